"""The garbled window-thresholds circuit (ops/gc/thresholds.h) and its
protocol (protocols/mpc/privpy/thresholds.py, issue 14): kernels against a Python-int
reference (random, each threshold and ±1, the window's saturation limits,
negatives, far outside the window), the window chooser, the protocol in both
rings and backends on fixed-point values, its declared cost against the
channel's counters, and what the assistants see (with a deliberately broken
variant that the view check catches). The C++ standalone test
(ops/gc/thresholds_test.cc) runs in tests/test_gc_kernels.py."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import case_fixtures, run
from test_leading_one import (I64, _check_views, revealed_bits, rt, shares_of,  # noqa: F401 (rt)
                              unmasked)
from tf_privpy.protocols.mpc.runtime import cost, kernels
from tf_privpy.protocols.mpc.privpy import leading_one as LO
from tf_privpy.protocols.mpc.privpy import thresholds as TH

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])

#: (width, lo, window, points): sigmoid's breakpoints at f = 20 (lo = f - 1),
#: exp's pieces (lo = f), unsorted and extreme points, a window that reaches
#: the top bit (no overflow step), one-bit windows
SPECS = [(46, 19, 6, [-22, -16, -12, -9, -6, -3, 0, 3, 6, 9, 12, 16, 22]),
         (46, 20, 6, [-20, -18, -10, -2, 0, 2, 10, 22, 23]),
         (34, 15, 6, [-22, -3, 0, 1, 31, -31]),
         (64, 0, 64, [0, 1, -1, int(I64.max), int(I64.min) + 1]),
         (10, 9, 1, [0]),
         (3, 0, 2, [1, 0, -1])]


def reference(xs, width, points):
    """Python ints: [x < θ_k], x = xs mod 2^W read as signed, θ_k = points (ints)."""
    out = []
    for x in xs:
        x = int(x) % (1 << width)
        x -= (x >> (width - 1)) << width
        out.append([int(x < int(t)) for t in points])
    return np.array(out, np.int64)


def values(width, lo, window, points, rng):
    """Edges: 0, ±1, the extremes, each threshold and its neighbours, the
    window's saturation limits ±2^(lo+m-1) and neighbours, ±powers of two;
    random values of every size and near the window."""
    v = [0, 1, -1, int(I64.max), int(I64.min)]
    v += [(int(c) << lo) + d for c in points for d in (-2, -1, 0, 1, 2)]
    if lo + window - 1 < 64:
        lim = 1 << (lo + window - 1)
        v += [s * lim + d for s in (1, -1) for d in (-2, -1, 0, 1, 2)]
    v += [s * (1 << j) + d for s in (1, -1) for j in range(63) for d in (-1, 0, 1)]
    v += [int(r) >> int(s) for r, s in zip(rng.integers(I64.min, I64.max, 300, dtype=np.int64),
                                          rng.integers(0, 64, 300))]
    v += [int(c) << max(lo - 2, 0) for c in rng.integers(-100, 100, 200)]
    return [((x + (1 << 63)) % (1 << 64)) - (1 << 63) for x in v]   # wrap to int64


# ----------------------------------------------------------------- kernels
@pytest.mark.parametrize("width,lo,window,points", SPECS)
def test_kernels_against_python_ints(width, lo, window, points):
    rng = np.random.default_rng(width + lo)
    x = np.array(values(width, lo, window, points, rng), np.int64)
    r = rng.integers(I64.min, I64.max, len(x), dtype=np.int64, endpoint=True)
    a, bb = r, (x.astype(np.uint64) - r.astype(np.uint64)).astype(np.int64)  # x = a + b
    key = tf.constant(rng.integers(I64.min, I64.max, 2, dtype=np.int64))
    nonce, n = tf.constant(7, tf.int64), len(x)
    spec = dict(width=width, lo=lo, window=window, points=points)
    gates = cost.thresholds_gates(width, lo, window, points)

    def kernel(fn, *args):
        return getattr(kernels, "gc_" + fn)(*args, "thresholds", **spec)

    tables, decode = kernel("garble", key, nonce, n, 0, n)
    assert tables.shape == (n, gates, 4)
    # the leading-one circuit's labels are the same (one layout)
    la = kernels.gc_encode(key, nonce, tf.constant(a), n, 0, "leading_one", "a", width=width)
    lb = kernels.gc_encode(key, nonce, tf.constant(bb), n, 0, "thresholds", "b", **spec)
    np.testing.assert_array_equal(
        kernels.gc_encode(key, nonce, tf.constant(bb), n, 0, "leading_one", "b", width=width), lb)
    m = kernel("mask", key, nonce, n).numpy()
    # two parts, as T1 and T2 evaluate them, garbled apart as S1 does; tables
    # are chunk-major (64 elements, gc_circuit.h TableIndex), so a part's
    # tables are the whole batch's rows only when it starts on a chunk
    h = n // 3 // 64 * 64 or n // 3
    t1, d1 = kernel("garble", key, nonce, n, 0, h)
    t2, d2 = kernel("garble", key, nonce, n, h, n - h)
    np.testing.assert_array_equal(np.concatenate([d1, d2]), decode)
    if h % 64 == 0:
        np.testing.assert_array_equal(np.concatenate([t1, t2]), tables)
    bits = np.concatenate([
        kernel("evaluate", t1, d1, la[:h], lb[:h], nonce, 0).numpy(),
        kernel("evaluate", t2, d2, la[h:], lb[h:], nonce, h).numpy()])
    want = reference(x, width, [int(c) << lo for c in points])
    np.testing.assert_array_equal(bits ^ m, want)
    if gates > width - 1:   # gates past the adder: garbage
        wrong = kernel("evaluate", t2, d2, la[h:], lb[h:], nonce, 0).numpy()
        assert (wrong != bits[h:]).mean() > 0.2


def th_kernel(fn, *args, points=(0, 3)):
    """kernels.gc_<fn>(*args) of a thresholds circuit of window [19, 25) of 46 bits."""
    return getattr(kernels, "gc_" + fn)(*args, "thresholds", width=46, lo=19, window=6,
                                        points=points)


def test_kernels_reject_bad_specs():
    key, nonce = tf.constant([1, 2], tf.int64), tf.constant(1, tf.int64)
    for spec in ((46, 19, 6, [32]), (46, 19, 6, [-32]), (46, 41, 6, [0])):
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="window"):
            kernels.gc_mask(key, nonce, 4, "thresholds", **dict(zip(("width", "lo", "window",
                                                                     "points"), spec)))
    tables, decode = th_kernel("garble", key, nonce, 4, 0, 4)
    la = kernels.gc_encode(key, nonce, tf.zeros([4], tf.int64), 4, 0, "thresholds", "a",
                           width=46, lo=19, window=6, points=[0, 3])
    with pytest.raises(tf.errors.InvalidArgumentError, match="tables must have shape"):
        th_kernel("evaluate", tables, decode, la, la, nonce, 0, points=[0, 4])
    with pytest.raises(tf.errors.InvalidArgumentError, match="labels_b must have shape"):
        th_kernel("evaluate", tables, decode, la, la[:3], nonce, 0)


def test_window_chooser():
    f = 20
    sig = [int(v * 2 ** f) for v in (-11, -8, -6, -4.5, -3, -1.5, 0, 1.5, 3, 4.5, 6, 8, 11)]
    assert TH.window(sig, 46) == (19, 6)
    assert TH.window([0], 46) == (45, 1)
    assert TH.window([1, 3], 46) == (0, 3)              # 3 < 2^(m-1) needs m = 3
    assert TH.window([-(1 << 45) + 1], 46) == (0, 46)
    assert TH.window([-(1 << 45) - 1], 46) is None      # needs 47 bits
    assert TH.window([1 << 44], 46) == (44, 2)
    assert TH.worth_it(sig, 46) and not TH.worth_it([1, 1 << 40], 46)
    assert cost.thresholds_gates(46, 19, 6, [c >> 19 for c in sig]) < 2 * 64


# ---------------------------------------------------------------- protocol
def test_protocol_fixed_point_values(rt, mode):
    """tp.share'd values: each breakpoint exactly, ±1 ulp, random values,
    negatives, beyond the window (saturation), ± the bound; fixed-point and
    integer bits; the default width."""
    ring = rt
    b = tp.get_runtime().backend
    cfg = b.cfg
    f, u = cfg.frac_bits, 2.0 ** -cfg.frac_bits
    bps = np.array([-11, -8, -6, -4.5, -3, -1.5, 0, 1.5, 3, 4.5, 6, 8, 11])
    rng = np.random.default_rng(5)
    x = np.concatenate([bps, bps + u, bps - u, bps + 2 * u, [0.0, u, -u, 15.9, -16, 16, 17.5,
                        -40.25, cfg.bound - 1, 1 - cfg.bound],
                        rng.uniform(-14, 14, 300), rng.uniform(-1, 1, 100) * cfg.bound])
    ints = np.round(x * 2.0 ** f).astype(np.int64)
    pts = [int(v * 2 ** f) for v in bps]
    px = tp.share(x)
    want = reference(ints, LO.default_width(cfg), pts)
    assert (want == (x[:, None] < bps[None, :])).all()      # the bits are the true ones
    for integer in (False, True):
        out = run(mode, lambda s0, s1: b.thresholds((s0, s1), pts, integer=integer),
                  px.share0, px.share1)
        got = revealed_bits(b, out, ring)
        np.testing.assert_array_equal(got, want << (0 if integer else f))
    # the fused table (piecewise values, exp's pieces): exactly bits @ table[:K] + table[K]
    table = rng.integers(-2**52, 2**52, (len(pts) + 1, 2), dtype=np.int64)
    out = run(mode, lambda s0, s1: b.thresholds((s0, s1), pts, integer=True, table=table),
              px.share0, px.share1)
    got = b.reveal(out).numpy()
    if ring == 128:
        got = (got[..., 0].astype(object) % 2**64) + (got[..., 1].astype(object) << 64)
    expect = (want.astype(object).dot(table[:-1].astype(object))
              + table[-1].astype(object)) % 2**ring
    np.testing.assert_array_equal(got.astype(object) % 2**ring, expect)
    with pytest.raises(ValueError, match="integer=True"):
        b.thresholds((px.share0, px.share1), pts, table=table)
    with pytest.raises(ValueError, match="do not fit a window"):
        b.thresholds((px.share0, px.share1), [1, 1 << 60])


def test_declared_cost_equals_channel_counts(ring_case):
    """cost.thresholds_cost is what the channel counts, in several chunks too
    (the garbled circuit: pinned to the garbled family)."""
    ring = ring_case.ring
    pts = [-3 << 19, 0, 5 << 19, 9 << 19]
    for batch in (None, 200):
        if batch:
            tp.reset()
            tp.init(tp.Config(ring_bits=ring, comparison_batch=batch, comparison="garbled"))
        b = tp.get_runtime().backend
        px = tp.share(np.linspace(-10, 10, 301))
        with b.comparison("garbled"), cost.record() as declared, tp.stats() as counted:
            b.thresholds((px.share0, px.share1), pts)
        assert {k: tuple(v) for k, v in declared.links.items()} == counted.links
        assert (declared.rounds, declared.comparisons) == (counted.rounds, counted.comparisons)
        assert declared.rounds == 2 if batch is None else declared.rounds > 2


# ---------------------------------------------------------------- security
def _all_thresholds(b, s):
    pts = [int(v * 2 ** b.cfg.frac_bits) for v in (-11, -4.5, -1.5, 0, 3, 8, 11)]
    return b.thresholds(s, pts)


THRESHOLDS_CIRCUIT = dict(evaluate="gc_evaluate", call=_all_thresholds)


def test_views_are_uniform_and_secret_independent(ring_case, monkeypatch):
    """Every message T1, T2, S1 and S2 receive (tables, decoding bits, labels,
    re-shared bits) and the bits the assistants decode are uniform and the
    same distribution for x = 0 and random x: T sees labels and masked bits."""
    ring = ring_case.ring
    _check_views(ring, monkeypatch, **THRESHOLDS_CIRCUIT)


def test_view_check_fails_without_output_masks(monkeypatch):
    """The check above can fail: a deliberately broken variant whose output
    masks are all zero (S1 folds m into the decoding bits, S1 and S2 unmask
    with 0; results stay right) lets T decode [x < θ_k] itself."""
    tp.reset()
    tp.init(tp.Config(ring_bits=64))
    try:
        unmasked(monkeypatch)
        b = tp.get_runtime().backend
        xs = [5 << 16, -(9 << 16), 0, 1 << 20]
        pts = [-(3 << 16), 0, 6 << 16]
        got = revealed_bits(b, b.thresholds(shares_of(xs, 64), pts), 64)
        np.testing.assert_array_equal(got, reference(xs, 34, pts) << 16)
        with pytest.raises(AssertionError, match="biased"):
            _check_views(64, monkeypatch, **THRESHOLDS_CIRCUIT)
    finally:
        tp.reset()
        tp.init()
