"""What each server sees (DESIGN §5, §4): every message a party receives
during a multiplication or matmul is uniform and independent of the secret,
and masks are fresh on every run, eagerly and in the same tf.function."""
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import tf_privpy as tp

# Significance of each statistical check. The masks come from fresh OS-CSPRNG
# keys, so the tests are not seeded; a false alarm has probability ALPHA per
# check (~1e-5 over the whole file).
ALPHA = 1e-7
N = 1 << 14  # elements per operand


def byte_hist(t: tf.Tensor) -> np.ndarray:
    return np.bincount(np.frombuffer(t.numpy().tobytes(), np.uint8), minlength=256)


def assert_uniform(t, what):
    h = byte_hist(t)
    p = stats.chisquare(h).pvalue
    assert p > ALPHA, f"{what}: bytes are not uniform (chi-square p = {p:.2g})"


def assert_same_distribution(t1, t2, what):
    table = np.stack([byte_hist(t1), byte_hist(t2)])
    p = stats.chi2_contingency(table)[1]
    assert p > ALPHA, f"{what}: distributions differ between secrets (p = {p:.2g})"


def record(fn):
    """Runs fn() and returns ({receiver: [(sender, tensor)]}, result)."""
    rt = tp.get_runtime().runtime
    seen = {}
    with rt.observe(lambda src, dst, t: seen.setdefault(dst, []).append((src, t))):
        out = fn()
    return seen, out


def secrets(kind, which):
    shape_x, shape_y = ((N,), (N,)) if kind == "mul" else ((128, 128), (128, 128))
    if which == "zero":
        return np.zeros(shape_x), np.zeros(shape_y)
    rng = np.random.default_rng(11)
    return rng.normal(0, 1000, shape_x), np.full(shape_y, 4096.5)


def protocol_views(kind, which):
    x, y = secrets(kind, which)
    px, py = tp.share(x), tp.share(y)
    seen, _ = record(lambda: px * py if kind == "mul" else px @ py)
    return seen


@pytest.mark.parametrize("kind", ["mul", "matmul"])
def test_every_message_is_uniform_and_secret_independent(ring, kind):
    v0, v1 = protocol_views(kind, "zero"), protocol_views(kind, "big")
    # DESIGN §5: T1 and T2 get two masked operands each; S1 and S2 one
    # message each from the other assistant. Nothing else moves.
    assert sorted((d, s) for d in v0 for s, _ in v0[d]) == sorted(
        [("T1", "S1"), ("T1", "S2"), ("T2", "S2"), ("T2", "S1"), ("S2", "T1"), ("S1", "T2")])
    for party in ("S1", "S2", "T1", "T2"):
        for (src, m0), (_, m1) in zip(v0[party], v1[party]):
            what = f"{kind}: {src}->{party}"
            assert_uniform(m0, what + " (secret 0)")
            assert_uniform(m1, what + " (secret big)")
            assert_same_distribution(m0, m1, what)


def test_shares_sent_by_client_are_uniform(ring):
    x = np.full((N,), 12345.75)
    seen, p = record(lambda: tp.share(x))
    assert set(seen) == {"S1", "S2"}
    for party in ("S1", "S2"):
        assert_uniform(seen[party][0][1], f"client->{party}")
    assert_same_distribution(p.share0, tp.share(np.zeros(N)).share0, "share0")


def test_fresh_masks_eagerly(ring):
    px, py = tp.share(np.ones(64)), tp.share(np.ones(64))
    runs = [record(lambda: px * py)[0] for _ in range(2)]
    for party in ("S1", "S2", "T1", "T2"):
        for (_, a), (_, b) in zip(runs[0][party], runs[1][party]):
            assert not np.array_equal(a.numpy(), b.numpy()), f"mask reused towards {party}"


def test_fresh_masks_in_the_same_tf_function(ring):
    rt = tp.get_runtime().runtime

    @tf.function
    def f(a, b):
        msgs = []
        with rt.observe(lambda src, dst, t: msgs.append(t)):
            z = a * b
        return z, msgs

    px, py = tp.share(np.ones(64)), tp.share(np.ones(64))
    z1, m1 = f(px, py)
    z2, m2 = f(px, py)
    assert f.experimental_get_tracing_count() == 1  # the same graph ran twice
    assert len(m1) == 6
    for a, b in zip(m1, m2):
        assert not np.array_equal(a.numpy(), b.numpy()), "a tf.function reused its masks"
    assert not np.array_equal(z1.share0.numpy(), z2.share0.numpy())
    np.testing.assert_array_equal(z1.reveal().numpy(), z2.reveal().numpy())


def test_nonce_counters_live_in_tf_state(ring):
    rt = tp.get_runtime().runtime

    @tf.function
    def g():
        return rt.nonce("S1", "S2", "S1")

    a, b = int(g()), int(g())
    assert b == a + 1


def test_pair_keys_are_distinct_and_shared(ring):
    rt = tp.get_runtime().runtime
    keys = {}
    for a, b in [("S1", "S2"), ("S1", "T1"), ("S2", "T2"), ("S1", "T2"), ("S2", "T1")]:
        ka, kb = rt.key(a, b, a).numpy(), rt.key(a, b, b).numpy()
        np.testing.assert_array_equal(ka, kb)  # both ends hold the pair key
        keys[(a, b)] = ka.tobytes()
    assert len(set(keys.values())) == len(keys)
    with pytest.raises(ValueError, match="no PRG key"):
        rt.key("S1", "S1", "S1")


# ------------------------------------------------------------- comparison
def comparison_views(which, pregarbled=False):
    """What each party receives in one garbled comparison (pinned to the
    garbled family: tables, labels, decoding bits; the bitwise family's
    views are checked in tests/test_bitwise.py)."""
    n = N // 4
    x = np.zeros(n) if which == "zero" else np.random.default_rng(3).normal(0, 1000, n)
    px = tp.share(x)
    g = tp.garble_comparisons([n]) if pregarbled else None
    with tp.comparison("garbled"):
        seen, _ = record(lambda: tp.less(px, 0.0, pregarbled=g))
    return seen


def is_public_index(t):
    """The stream nonce and the index of the first comparison: counters that
    fix the garbling's hash tweaks, the same whatever the secrets."""
    return t.shape.rank == 0


def test_comparison_views_are_uniform_and_secret_independent(ring):
    v0, v1 = comparison_views("zero"), comparison_views("random")
    assert sorted(v0) == ["S1", "S2", "T1", "T2"]
    for party in ("S1", "S2", "T1", "T2"):
        for (src, m0), (_, m1) in zip(v0[party], v1[party]):
            if is_public_index(m0):
                continue
            what = f"comparison: {src}->{party} {m0.dtype.name}{m0.shape}"
            if m0.dtype == tf.uint8:  # decoding bits: uniform bits
                for m in (m0, m1):
                    ones = int(np.sum(m.numpy()))
                    p = stats.binomtest(ones, m.shape[0]).pvalue
                    assert p > ALPHA, f"{what}: decode bits are biased (p = {p:.2g})"
                continue
            assert_uniform(m0, what + " (secret 0)")
            assert_uniform(m1, what + " (secret random)")
            assert_same_distribution(m0, m1, what)


def test_garbled_tables_and_labels_are_never_reused(ring):
    runs = [comparison_views("zero") for _ in range(2)]
    for party in ("T1", "T2", "S1", "S2"):
        for (src, a), (_, b) in zip(runs[0][party], runs[1][party]):
            if is_public_index(a):
                continue
            assert not np.array_equal(a.numpy(), b.numpy()), f"{src}->{party} repeated"


def test_pregarbled_online_phase_sends_only_labels(ring):
    v = comparison_views("random", pregarbled=True)
    # online, T1/T2 receive only input labels ([n, 64, 2]) from S1 and S2
    for t in ("T1", "T2"):
        shapes = sorted((src, tuple(m.shape[1:])) for src, m in v[t])
        assert shapes == [("S1", (64, 2)), ("S2", (64, 2))], shapes


# ------------------------------------------------------- derived functions
def derived_views(fn, which):
    n = N // 8
    rng = np.random.default_rng(5)
    x = np.full(n, 1e-3) if which == "tiny" else rng.uniform(-1e4, 1e4, n)
    px = tp.share(x)
    seen, _ = record(lambda: fn(px))
    return seen


@pytest.mark.parametrize("fn", [tp.math.reciprocal, tp.exp], ids=["reciprocal", "exp"])
def test_binary_search_views_are_uniform_and_secret_independent(ring, fn):
    """The range reductions (protocols/mpc/fixedpoint/range_reduction.py: reciprocal's
    leading-one circuit, exp's binary search) compose the multiplication,
    comparison and leading-one protocols only, with secret thresholds
    taken from tables of earlier bits: every party receives the same messages
    (sender, shape, dtype) whatever the secret, each uniform, and nothing
    reaches the client."""
    v0, v1 = derived_views(fn, "tiny"), derived_views(fn, "spread")
    assert sorted(v0) == sorted(v1) == ["S1", "S2", "T1", "T2"]
    for party in v0:
        assert [(s, m.shape, m.dtype) for s, m in v0[party]] == \
            [(s, m.shape, m.dtype) for s, m in v1[party]], party
        for (src, m0), (_, m1) in zip(v0[party], v1[party]):
            if is_public_index(m0):
                continue
            what = f"{fn.__name__}: {src}->{party} {m0.dtype.name}{m0.shape}"
            if src == "client":  # public constants of the program (thresholds,
                # coefficients): the same bytes whatever the secret
                np.testing.assert_array_equal(m0.numpy(), m1.numpy(), err_msg=what)
                continue
            if m0.dtype == tf.uint8:  # decoding bits of garbled comparators / circuits
                for m in (m0, m1):
                    p = stats.binomtest(int(np.sum(m.numpy())), m.numpy().size).pvalue
                    assert p > ALPHA, f"{what}: decode bits are biased (p = {p:.2g})"
                continue
            assert_uniform(m0, what + " (tiny)")
            assert_uniform(m1, what + " (spread)")
            assert_same_distribution(m0, m1, what)


# ------------------------------------- what is recorded is what crosses
@pytest.mark.parametrize("kind", ["mul", "matmul", "less"])
def test_recorded_messages_are_every_cross_device_edge(ring, kind):
    """The views above are recorded at the channel. This checks, on the traced
    graph, that the channel is all that crosses: every edge between two
    parties' devices ends in a channel copy (tests/graphcheck.py), and the
    channel copies are exactly the messages the observer recorded."""
    import graphcheck
    rt = tp.get_runtime().runtime
    fns = {"mul": lambda a, b: a * b, "matmul": lambda a, b: a @ b,
           "less": lambda a, b: tp.less(a, b)}
    x, y = tp.share(np.ones((8, 8))), tp.share(np.ones((8, 8)))
    seen = []
    with rt.channels.observe(lambda src, dst, payload: seen.append((src, dst))):
        concrete = tf.function(
            lambda a, b: tf.nest.flatten(fns[kind](a, b), expand_composites=True)
        ).get_concrete_function(x, y)
    assert not graphcheck.graph_violations(concrete, tp.servers(),
                                           graphcheck.share_inputs(concrete, 2))
    copies = sorted(graphcheck._channel_ends(op) for op in concrete.graph.get_operations()
                    if graphcheck._channel_ends(op))
    assert copies == sorted(seen) and len(copies) >= 6
