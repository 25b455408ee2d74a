"""The sorting network as a graph loop (issue 15): inside a tf.function,
tp.sort and tp.math.top_k run Batcher's layers in a tf.while_loop
(protocols/mpc/privpy/compare.py sort_last), so the graph does not grow with n,
while the results, the placement of every op, and the bill against the
channel's counters stay those of the unrolled network (which eager code
still runs). Each trace of the loop bodies takes several seconds: 20-65 s
per test on 2 shared cores under load, about 5 min in all, so all slow."""
import numpy as np
import pytest
import tensorflow as tf

import graphcheck
import tf_privpy as tp
from conftest import case_fixtures
from test_channel import assert_declared_equals_counted
from tf_privpy.protocols.mpc.privpy import compare
from tf_privpy.protocols.mpc.runtime import cost


case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])


def _grid(a, f):
    return np.round(np.asarray(a, np.float64) * 2.0 ** f) / 2.0 ** f


def _n_ops(concrete) -> int:
    """Ops of the graph and of every function it calls (the loop body)."""
    gd = concrete.graph.as_graph_def()
    return len(gd.node) + sum(len(f.node_def) for f in gd.library.function)


@pytest.mark.slow
def test_graph_size_does_not_grow_with_n():
    """2^8 (36 layers) and 2^12 (78 layers): the loop body is the same and
    so is the one-layer loop of the remainder;
    unrolled, the op count grew with the layers (about 270 per layer)."""
    counts = {}
    for n in (2 ** 8, 2 ** 12):
        x = tp.share(np.zeros(n))
        counts[n] = _n_ops(tf.function(lambda a: tp.sort(a)).get_concrete_function(x))
    assert len(compare.batcher_layers(2 ** 12)) > 2 * len(compare.batcher_layers(2 ** 8))
    assert counts[2 ** 12] <= 1.1 * counts[2 ** 8], counts


#: the traced functions test_loop_equals_unrolled_exactly and
#: test_loop_bill_equals_counters share (each trace of the loops takes
#: several seconds; the bill test traced its own sort and top_k)
LOOPED = {
    "sort": lambda a: [tp.sort(a)],
    "sort_desc_axis0": lambda a: [tp.sort(a, 0, "DESCENDING")],
    "top_k": lambda a: list(tp.math.top_k(a, 7)),
}


def _n(ring: int) -> int:
    """A length with dropped comparators in one ring, a power of two in the other."""
    return 40 if ring == 64 else 64


@pytest.fixture(scope="module")
def traced_loops():
    """{(runtime, name, shape): (tp.function, its declared bill)}: each
    function of LOOPED traced once per runtime and shape, under
    cost.record() (Python bookkeeping only: the graph is the same). A
    tp.function (Grappler off, as conftest.run traces): the loop under
    Grappler is test_loop_placement's and
    test_bitwise_loop_sends_the_dealer_no_size's, plain tf.functions."""
    return {}


def _traced(cache, name: str, x):
    key = (tp.get_runtime().runtime, name, tuple(x.shape))
    if key not in cache:
        f = tp.function(LOOPED[name])
        with cost.record() as declared:  # the one trace, which the runs reuse
            f.get_concrete_function(x)
        cache[key] = (f, declared)
    return cache[key]


@pytest.mark.slow
def test_loop_equals_unrolled_exactly(ring_case, traced_loops):
    """The same values and indices as the unrolled network run eagerly,
    exactly (the selects are untruncated), ties included; a length with
    dropped comparators in one ring, a power of two in the other."""
    n = _n(ring_case.ring)
    cfg = tp.get_runtime().config
    rng = np.random.default_rng(n)
    x = _grid(rng.normal(0, 50, (2, n)), cfg.frac_bits)
    x[:, ::5] = x[:, :1]  # ties
    px = tp.share(x)
    for name, fn in LOOPED.items():
        eager = [v.reveal().numpy() for v in fn(px)]
        looped = [v.reveal().numpy() for v in _traced(traced_loops, name, px)[0](px)]
        for e, g in zip(eager, looped):
            np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(looped[0], -np.sort(-x, -1)[:, :7])


@pytest.mark.slow
def test_loop_bill_equals_counters(ring_case, traced_loops):
    """The loop declares each layer's bill while tracing; the channel and
    protocol counters in TF state count every iteration's messages. (The
    sort and top_k of test_loop_equals_unrolled_exactly, on the same shape:
    their one trace serves both tests.)"""
    n = _n(ring_case.ring)
    x = tp.share(np.random.default_rng(0).uniform(-9, 9, (2, n)))
    for name in ("sort", "top_k"):
        f, declared = _traced(traced_loops, name, x)
        f(x)
        with tp.stats() as counted:
            f(x)
        assert_declared_equals_counted(declared, counted)
        assert counted.comparisons == 2 * sum(len(a) for a, _ in compare.batcher_layers(n))


@pytest.mark.slow
def test_loop_placement():
    """Traced: every op of the loop body runs on its owner (graphcheck follows
    the loop). Run: the client's partition receives no share, only control
    edges and the loop's public condition."""
    servers = tp.servers()
    x = tp.share(np.random.default_rng(0).uniform(-9, 9, (2, 64)))
    fn = lambda a: list(tp.math.top_k(a, 3))  # noqa: E731
    f = tf.function(fn, autograph=False)
    concrete = f.get_concrete_function(x)  # traced once: the run below reuses it
    assert any(op.type in graphcheck.WHILE_OPS for op in concrete.graph.get_operations())
    bad = graphcheck.graph_violations(concrete, servers, graphcheck.share_inputs(concrete, 1))
    assert not bad, "\n".join(bad[:20])
    # what earlier tests' runs left is dropped first: their partitions (a
    # reveal's BitUnmask and GatherV2 outputs to the client among them) would
    # be exported with this run's (seen in a full-suite run, not alone)
    _, md = graphcheck.run_metadata(f, x)
    client = graphcheck.canon(servers["client"])
    received = [n for fg in md.function_graphs for pg in fg.partition_graphs for n in pg.node
                if n.op == "_Recv" and graphcheck.canon(n.device) == client]
    assert received, "no partition of the client found"
    data = [n.name for n in received if n.attr["tensor_type"].type != tf.float32.as_datatype_enum
            and "/cond/" not in n.name]  # control edges travel as float32
    assert not data, data


@pytest.mark.slow
def test_loop_over_sealed_links(monkeypatch):
    """Sealing inside the loop (counters in TF variables, dynamic shapes).
    Two layers per iteration instead of LAYERS_PER_ITERATION's 8: each
    sealed message is some 50 ops to trace and to instantiate, and the loop
    body's 8 layers (216 messages with the remainder loop's) took 20-40 s
    to trace and first run (2 loaded cores); with 2 the body is a third of
    that and both loops still iterate over sealed links (n = 40: 21
    layers: 10 iterations of 2 and one of 1, where 8 ran 2 of 8 and 5 of 1)."""
    monkeypatch.setattr(compare, "LAYERS_PER_ITERATION", 2)
    tp.reset()
    tp.init(tp.Config(encrypt_links=True))
    try:
        x = np.random.default_rng(1).uniform(-9, 9, (2, 40))
        px = tp.share(x)
        f = tp.function(lambda a: tp.sort(a))
        assert any(op.type in graphcheck.WHILE_OPS
                   for op in f.get_concrete_function(px).graph.get_operations())
        got = f(px).reveal().numpy()
        np.testing.assert_array_equal(got, tp.sort(px).reveal().numpy())
    finally:
        tp.reset()
        tp.init()


def test_bitwise_loop_sends_the_dealer_no_size():
    """Under the bitwise family the dealer (T1) takes each layer's size from
    its own loop counter and a table of the public layer sizes: the loop
    sends exactly the unrolled network's messages (no S1 -> T1 size header
    per layer, a hop before T1 could deal) and declares them. Before (seen
    failing on the old code): S1 -> T1 counted 2 messages per layer in the
    loop (the size and the multiplication's), 1 unrolled."""
    n = 40
    x = tp.share(np.random.default_rng(3).uniform(-9, 9, n))
    layers = len(compare.batcher_layers(n))
    with tp.comparison("bitwise"):
        with tp.stats() as unrolled:
            want = tp.sort(x)   # eagerly: the unrolled network
        f = tf.function(lambda a: tp.sort(a))
        with cost.record() as declared:
            f.get_concrete_function(x)
        with tp.stats() as looped:
            got = f(x)
    assert looped.links[("S1", "T1")][0] == layers
    assert looped.links == unrolled.links
    assert_declared_equals_counted(declared, looped)
    np.testing.assert_array_equal(got.reveal().numpy(), want.reveal().numpy())


def test_layer_sizes_are_the_networks():
    """The loop's per-layer (k, j, comparators), counted without index
    arrays (closed form for a power of two, masks otherwise), are those of
    the network's index arrays, dropped comparators included."""
    for n in list(range(1, 70)) + [100, 1000, 1023, 1025, 4096]:
        want = [(k, j, len(a)) for k, j, a, _ in compare._batcher_steps(n)]
        assert compare._layer_sizes(n) == want, n


def test_pad_last_puts_pad_values_after_the_data(ring_case):
    """_pad_last: the data unchanged, then +-PAD (unscaled ring value) in
    both rings (the 128-bit one's high word sign-extended), or 0."""
    from tf_privpy.protocols.mpc.api.ops import _common
    f = tp.get_runtime().config.frac_bits
    x = _grid(np.random.default_rng(5).uniform(-9, 9, (2, 5)), f)
    px = tp.share(x)
    h = _common.handle_of(px)
    for value in (compare.PAD, -compare.PAD, 0):
        s = compare._pad_last(h.backend, (px.share0, px.share1), 5, 8, value)
        got = _common.wrap(h, s, tf.float64).reveal().numpy()
        np.testing.assert_array_equal(got[:, :5], x)
        np.testing.assert_array_equal(got[:, 5:], np.full((2, 3), value / 2.0 ** f))


@pytest.mark.slow
def test_padded_loop_is_exact(ring_case):
    """A length within 3/4 of the next power of two (25 -> 32) runs the
    padded loop (slices, no gathers): the sort and top_k (descending, with
    the positions) equal numpy exactly, ties included, each one network of
    32 per row, and the declared bill equals the counters."""
    n = 25
    f = tp.get_runtime().config.frac_bits
    x = _grid(np.random.default_rng(7).normal(0, 50, (2, n)), f)
    x[:, ::4] = x[:, :1]   # ties
    px = tp.share(x)
    fn = tp.function(lambda a: [tp.sort(a)] + list(tp.math.top_k(a, 5)))
    with cost.record() as declared:
        fn.get_concrete_function(px)
    with tp.stats() as counted:
        asc, top, ids = fn(px)
    np.testing.assert_array_equal(asc.reveal().numpy(), np.sort(x, -1))
    np.testing.assert_array_equal(top.reveal().numpy(), -np.sort(-x, -1)[:, :5])
    np.testing.assert_array_equal(
        np.take_along_axis(x, ids.reveal().numpy().astype(np.int64), -1), top.reveal().numpy())
    assert counted.comparisons == 2 * 2 * sum(len(a) for a, _ in compare.batcher_layers(32))
    assert_declared_equals_counted(declared, counted)
