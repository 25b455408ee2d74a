"""The garbled leading-one circuit (ops/gc/leading_one.h) and its protocol
(protocols/mpc/privpy/leading_one.py, issue 14): kernels against a numpy / Python-int
reference, the protocol in both rings and backends (random values, zeros,
negatives, edge positions 0 and 62 and the sign bit 63 at width 64), its
declared cost against the channel's counters, and what the assistants see.
About 25 s on 2 cores."""
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import tf_privpy as tp
from conftest import activate_runtime, case_fixtures, run
from tf_privpy.protocols.mpc.runtime import cost, kernels
from tf_privpy.protocols.mpc.privpy import leading_one as LO

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])

I64 = np.iinfo(np.int64)
ALPHA = 1e-7


def reference(xs, width, magnitude):
    """Python ints: o_j = [v >= 2^j] (j < W-1) and [x < 0], x = xs mod 2^W
    signed; v = x mod 2^(W-1), or with magnitude |x| - 1 for x < 0 (one's
    complement) and o_0 = [x != 0]."""
    out = []
    for x in xs:
        x = int(x) % (1 << width)
        neg = x >> (width - 1)
        xs_ = x - (neg << width)
        v = (abs(xs_) - neg if magnitude else x) % (1 << (width - 1))
        o = [int(v >= (1 << j)) for j in range(width - 1)]
        if magnitude:
            o[0] = int(xs_ != 0)
        out.append(o + [neg])
    return np.array(out, np.int64)


def ring_values(ring, rng):
    """Ring integers (two's complement): zeros, ±1, ±powers of two at every
    position, their neighbours, random values of every size, the extremes."""
    v = [0, 0, 1, -1, 2, -2, 3, I64.max, I64.min, I64.min + 1]
    for j in range(63):
        v += [1 << j, -(1 << j), (1 << j) + 1, (1 << j) - 1, -(1 << j) + 1]
    v += [int(r) >> int(s) for r, s in zip(rng.integers(I64.min, I64.max, 400, dtype=np.int64),
                                          rng.integers(0, 64, 400))]
    return v


def shares_of(ints, ring):
    """Shares of exact ring integers (no fixed-point encoding)."""
    b = tp.get_runtime().backend
    lo = np.array(ints, np.int64)
    enc = lo if ring == 64 else np.stack([lo, np.where(lo < 0, -1, 0).astype(np.int64)], 1)
    return b.share(tf.constant(enc))


def revealed_bits(b, s, ring):
    v = b.reveal(s).numpy()
    return v[..., 0] if ring == 128 else v


# ----------------------------------------------------------------- kernels
@pytest.mark.parametrize("width,magnitude,subset", [(64, True, False), (64, False, True),
                                                    (46, True, True), (34, False, False),
                                                    (3, True, False)])
def test_kernels_against_python_ints(width, magnitude, subset):
    """Garbled, encoded and evaluated in two parts, as S1, S2, T1 and T2 do,
    all outputs or a subset of columns in any order."""
    rng = np.random.default_rng(width)
    x = np.array(ring_values(64, rng), np.int64)
    r = rng.integers(I64.min, I64.max, len(x), dtype=np.int64, endpoint=True)
    a, bb = r, (x.astype(np.uint64) - r.astype(np.uint64)).astype(np.int64)  # x = a + b
    key = tf.constant(rng.integers(I64.min, I64.max, 2, dtype=np.int64))
    nonce, n = tf.constant(7, tf.int64), len(x)
    cols = [width - 1, 0, width // 2, 1] if subset else []
    want = reference(x, width, magnitude)[:, cols or list(range(width))]
    spec = dict(width=width, magnitude=magnitude, columns=cols)
    m = kernels.gc_mask(key, nonce, n, "leading_one", **spec).numpy()
    h = n // 3   # two parts, as T1 and T2 evaluate them
    bits, parts = [], []
    for first, count in ((0, h), (h, n - h)):
        tables, decode = kernels.gc_garble(key, nonce, n, first, count, "leading_one", **spec)
        assert tables.shape == (count, cost.leading_one_gates(width, magnitude), 4)
        la, lb = (kernels.gc_encode(key, nonce, tf.constant(v[first:first + count]), n, first,
                                    "leading_one", role, **spec)
                  for v, role in ((a, "a"), (bb, "b")))
        parts.append((tables, decode, la, lb))
        bits.append(kernels.gc_evaluate(tables, decode, la, lb, nonce, first, "leading_one",
                                        **spec).numpy())
    np.testing.assert_array_equal(np.concatenate(bits) ^ m, want)
    # a part evaluated with the wrong first index decodes garbage
    wrong = kernels.gc_evaluate(*parts[1], nonce, 0, "leading_one", **spec).numpy()
    assert (wrong != bits[1]).mean() > 0.2


def lo_kernel(fn, *args, width=10, magnitude=True, columns=()):
    """kernels.gc_<fn>(*args) of the leading-one circuit."""
    return getattr(kernels, "gc_" + fn)(*args, "leading_one", width=width, magnitude=magnitude,
                                        columns=columns)


def test_kernels_reject_bad_shapes_and_widths():
    key, nonce = tf.constant([1, 2], tf.int64), tf.constant(1, tf.int64)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        lo_kernel("mask", key, nonce, 4, width=65)
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="repeat"):
        lo_kernel("mask", key, nonce, 4, columns=[3, 3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="must lie in the batch"):
        lo_kernel("garble", key, nonce, 4, 3, 2)
    tables, decode = lo_kernel("garble", key, nonce, 4, 0, 4)
    zeros = tf.zeros([4], tf.int64)
    la = kernels.gc_encode(key, nonce, zeros, 4, 0, "leading_one", "a", width=10)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must lie in the batch"):
        kernels.gc_encode(key, nonce, zeros, 4, 1, "leading_one", "a", width=10)
    with pytest.raises(tf.errors.InvalidArgumentError, match="tables must have shape"):
        lo_kernel("evaluate", tables, decode, la, la, nonce, 0, magnitude=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels_b must have shape"):
        lo_kernel("evaluate", tables, decode, la, la[:3], nonce, 0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="decode must have shape"):
        lo_kernel("evaluate", tables, decode, la, la, nonce, 0, columns=[1, 2])


# ---------------------------------------------------------------- protocol
@pytest.fixture(params=[(r, b) for r in (128, 64) for b in ("privpy", "plaintext")],
                ids=lambda p: f"ring{p[0]}-{p[1]}")
def rt(request):
    """backend x ring on the session's runtimes (conftest.activate_runtime)."""
    ring, backend = request.param
    activate_runtime(request.config, backend, ring)
    return ring


@pytest.mark.parametrize("magnitude", [True, False], ids=["abs", "raw"])
def test_protocol_edges_at_width_64(rt, magnitude, mode):
    """Every output of the widest circuit for edge and random ring integers:
    position 0 (x = ±1), position 62 (2^62 <= |x| < 2^63) and the sign (63)."""
    ring = rt
    b = tp.get_runtime().backend
    ints = ring_values(ring, np.random.default_rng(3))
    s = shares_of(ints, ring)
    cols = list(range(64))
    out = run(mode, lambda s0, s1: b.leading_one((s0, s1), cols, magnitude, width=64),
              s[0], s[1])
    np.testing.assert_array_equal(revealed_bits(b, out, ring), reference(ints, 64, magnitude))


def test_protocol_fixed_point_values_default_width(rt):
    """tp.share'd values over the whole range, a column subset in any order:
    the default width holds every in-range value exactly."""
    ring = rt
    b = tp.get_runtime().backend
    cfg = b.cfg
    w = LO.default_width(cfg)
    rng = np.random.default_rng(4)
    x = np.concatenate([[0.0, 2.0 ** -cfg.frac_bits, -(2.0 ** -cfg.frac_bits), cfg.bound - 1,
                         1 - cfg.bound], rng.uniform(-1, 1, 500) * 2.0 ** rng.uniform(-20, 23, 500)
                        .clip(max=np.log2(cfg.bound) - 0.01)])
    ints = np.round(x * 2.0 ** cfg.frac_bits).astype(np.int64)
    px = tp.share(x)
    cols = [w - 1, 0, 5, w - 2, 17]
    for magnitude in (True, False):
        got = revealed_bits(b, b.leading_one((px.share0, px.share1), cols, magnitude), ring)
        np.testing.assert_array_equal(got, reference(ints, w, magnitude)[:, cols])
    # the fused table (the range reductions' path): exactly bits @ table[:K] + table[K]
    rng_t = np.random.default_rng(5)
    table = rng_t.integers(-2**52, 2**52, (len(cols) + 1, 3), dtype=np.int64)
    for magnitude in (True, False):
        got = b.reveal(b.leading_one((px.share0, px.share1), cols, magnitude,
                                     table=table)).numpy()
        bits = reference(ints, w, magnitude)[:, cols].astype(object)
        want = (bits.dot(table[:-1].astype(object)) + table[-1].astype(object)) % 2**ring
        if ring == 128:
            got = (got[..., 0].astype(object) % 2**64) + (got[..., 1].astype(object) << 64)
        np.testing.assert_array_equal(got.astype(object) % 2**ring, want)
    with pytest.raises(ValueError, match=r"K \+ 1"):
        b.leading_one((px.share0, px.share1), cols, table=table[1:])
    with pytest.raises(ValueError, match="columns must be distinct and in"):
        b.leading_one((px.share0, px.share1), [w])
    with pytest.raises(ValueError, match="columns must be distinct and in"):
        b.leading_one((px.share0, px.share1), [3, 3])


def test_signed_reciprocal_at_negative_powers_of_two(rt):
    """The one's complement puts x = -2^j in the octave below (and x = -1
    ulp in octave 0, not the zero row): the reciprocal is as accurate there
    as anywhere (|1 - x·g| = 1/3, the bound its iterations assume)."""
    from tolerances import ulp
    ring = rt
    cfg = tp.get_runtime().config
    u = ulp(cfg.frac_bits)
    js = np.arange(-cfg.frac_bits + 2, np.log2(cfg.bound))
    x = -np.concatenate([[u, 2 * u, 3 * u], 2.0 ** js, 2.0 ** js + u])
    got = tp.math.reciprocal(tp.share(x)).reveal().numpy()
    # test_numerics' targets, and its "extremes" tolerance where 1/x nears the bound
    near = 1 / np.abs(x) >= cfg.bound / 8
    rel = np.where(near, 1e-3, 1e-4 if ring == 128 else 1e-3)
    ulps = np.where(near, 2 if ring == 128 else 4, 2 if ring == 128 else 8)
    err = np.abs(got - 1 / x)
    assert ((err <= rel * np.abs(1 / x)) | (err <= ulps * u)).all(), (x[np.argmax(err)],
                                                                      err.max())


def test_declared_cost_equals_channel_counts(ring_case):
    """cost.leading_one_cost is what the channel counts, in two chunks too
    (the garbled circuit: pinned to the garbled family; the bitwise family's
    comparisons are tests/test_bitwise_circuits.py's)."""
    ring = ring_case.ring
    b = tp.get_runtime().backend
    px = tp.share(np.linspace(-100, 100, 301))
    for batch in (None, 300):   # 300 comparators' memory: 213 / 290 circuits of 90 / 66 gates
        if batch:
            tp.reset()
            tp.init(tp.Config(ring_bits=ring, comparison_batch=batch, comparison="garbled"))
            b = tp.get_runtime().backend
            px = tp.share(np.linspace(-100, 100, 301))
        with b.comparison("garbled"), cost.record() as declared, tp.stats() as counted:
            b.leading_one((px.share0, px.share1), [0, 3, 9], magnitude=True)
        assert {k: tuple(v) for k, v in declared.links.items()} == counted.links
        assert (declared.rounds, declared.comparisons) == (counted.rounds, counted.comparisons)
        assert declared.rounds == (2 if batch is None else 4)


# ---------------------------------------------------------------- security
def _all_outputs(b, s):
    return b.leading_one(s, list(range(LO.default_width(b.cfg))), magnitude=True)


def _views(secret_ints, ring, monkeypatch, evaluate="gc_evaluate",
           call=_all_outputs):
    """({receiver: [(sender, message)]}, [T's evaluated (masked) bits]) of
    call(backend, shares) with the assistants' evaluation kernel `evaluate`:
    the garbled circuits' views, so pinned to the garbled family (the
    bitwise family's are tests/test_bitwise.py's)."""
    rt = tp.get_runtime().runtime
    evaluated = []
    real = getattr(kernels, evaluate)

    def spy(*a, **k):
        out = real(*a, **k)
        evaluated.append(out)
        return out

    monkeypatch.setattr(kernels, evaluate, spy)
    b = tp.get_runtime().backend
    s = shares_of(secret_ints, ring)
    seen = {}
    with b.comparison("garbled"), \
            rt.observe(lambda src, dst, t: seen.setdefault(dst, []).append((src, t))):
        call(b, s)
    return seen, evaluated


def assert_bits_uniform(bits, what):
    bits = np.asarray(bits)
    for j in range(bits.shape[1]):
        p = stats.binomtest(int(bits[:, j].sum()), bits.shape[0]).pvalue
        assert p > ALPHA, f"{what}: output bit {j} is biased (p = {p:.2g})"


def _check_views(ring, monkeypatch, **circuit):
    """What every party receives and what T decodes is uniform and the same
    for x = 0 and random x (`circuit`: _views' evaluate and call)."""
    n = 1 << 12
    rng = np.random.default_rng(9)
    v0, e0 = _views([0] * n, ring, monkeypatch, **circuit)
    v1, e1 = _views([int(v) for v in rng.integers(-(1 << 40), 1 << 40, n)], ring, monkeypatch,
                    **circuit)
    for ev, what in ((e0, "zeros"), (e1, "random")):
        assert_bits_uniform(np.concatenate([e.numpy() for e in ev]), f"T's decoded bits ({what})")
    for party in ("S1", "S2", "T1", "T2"):
        assert [(s, m.shape, m.dtype) for s, m in v0[party]] == \
            [(s, m.shape, m.dtype) for s, m in v1[party]], party
        for (src, m0), (_, m1) in zip(v0[party], v1[party]):
            if m0.shape.rank == 0:          # stream nonce, first index: public counters
                continue
            what = f"{src}->{party} {m0.dtype.name}{m0.shape}"
            if m0.dtype == tf.uint8:        # decoding bits
                assert_bits_uniform(m0.numpy(), what)
                assert_bits_uniform(m1.numpy(), what)
                continue
            for m in (m0, m1):
                h = np.bincount(np.frombuffer(m.numpy().tobytes(), np.uint8), minlength=256)
                assert stats.chisquare(h).pvalue > ALPHA, f"{what}: bytes not uniform"
            h = np.stack([np.bincount(np.frombuffer(m.numpy().tobytes(), np.uint8),
                                      minlength=256) for m in (m0, m1)])
            assert stats.chi2_contingency(h)[1] > ALPHA, f"{what}: depends on the secret"


def test_views_are_uniform_and_secret_independent(ring_case, monkeypatch):
    """Every message T1, T2, S1 and S2 receive (tables, decoding bits, labels,
    re-shared bits) and the bits the assistants decode are uniform and the
    same distribution for x = 0 and random x."""
    ring = ring_case.ring
    _check_views(ring, monkeypatch)


def unmasked(monkeypatch):
    """Patches the circuits' kernels into the broken variant below: S1 folds
    the output masks into the decoding bits, S1 and S2 unmask with 0."""
    real_garble, real_mask = kernels.gc_garble, kernels.gc_mask

    def garble_no_mask(key, nonce, n, first, count, circuit, **params):
        tables, decode = real_garble(key, nonce, n, first, count, circuit, **params)
        return tables, decode ^ real_mask(key, nonce, n, circuit, **params)[first:first + count]

    monkeypatch.setattr(kernels, "gc_garble", garble_no_mask)
    monkeypatch.setattr(kernels, "gc_mask", lambda key, nonce, n, circuit, **params: tf.zeros_like(
        real_mask(key, nonce, n, circuit, **params)))


def test_view_check_fails_without_output_masks(monkeypatch):
    """The check above can fail: a deliberately broken variant whose output
    masks are all zero (S1 folds m into the decoding bits, S1 and S2 unmask
    with 0; results stay right) lets T decode the thresholds themselves."""
    tp.reset()
    tp.init(tp.Config(ring_bits=64))
    try:
        unmasked(monkeypatch)
        b = tp.get_runtime().backend
        s = shares_of([5, -9, 0, 1 << 20], 64)
        got = revealed_bits(b, b.leading_one(s, list(range(34)), magnitude=True, width=34), 64)
        np.testing.assert_array_equal(got, reference([5, -9, 0, 1 << 20], 34, True))
        with pytest.raises(AssertionError, match="biased"):
            _check_views(64, monkeypatch)
    finally:
        tp.reset()
        tp.init()
