"""The channel seam (DESIGN §2): every cross-party tensor is counted in TF
state, the protocols' cost declarations equal what the channel counts, the
two ends of a PRG stream cannot silently fall out of step, and parties
never share a device."""
import contextlib

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime import cost, kernels
from tf_privpy.protocols.mpc.runtime.runtime import check_devices
from conftest import case_fixtures  # noqa: E402

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])


def measured(fn, *args):
    """(declared cost, counted stats) of one run of fn(*args)."""
    with cost.record() as declared, tp.stats() as counted:
        fn(*args)
    return declared, counted


def assert_declared_equals_counted(declared, counted):
    assert {k: tuple(v) for k, v in declared.links.items()} == counted.links
    assert (declared.rounds, declared.multiplications, declared.comparisons) == \
        (counted.rounds, counted.multiplications, counted.comparisons)


CASES = {
    "mul": (((7, 3), (7, 3)), lambda x, y: x * y),
    "matmul": (((4, 5), (5, 3)), lambda x, y: x @ y),
    "conv2d": (((1, 6, 6, 2), (3, 3, 2, 4)), lambda x, y: tp.nn.conv2d(x, y, 1, "SAME")),
    "less": (((9, 5), (9, 5)), lambda x, y: x < y),
    "relu": (((33,),), lambda x: tp.nn.relu(x)),
    "max": (((8, 4),), lambda x: tp.reduce_max(x, 1)),
    "sigmoid": (((10,),), lambda x: tp.sigmoid(x)),
    # range reductions by the leading-one circuit (|x| and sign; x and a comparison)
    "reciprocal": (((12,),), lambda x: tp.math.reciprocal(x)),
    "log": (((12,),), lambda x: tp.math.log(x)),
    "mul_public": (((3, 3),), lambda x: x * 2.5 + 1.0),
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_declared_cost_equals_channel_counts(case, op):
    """Each protocol's declaration (cost.py) against the counters the
    channel keeps in TF state: per link, messages and bytes, and the
    protocol counters (rounds, multiplications, comparisons)."""
    ring, mode = case.ring, case.mode
    shapes, fn = CASES[op]
    rng = np.random.default_rng(0)
    args = [tp.share(rng.uniform(-3, 3, s)) for s in shapes]
    f = fn if mode == "eager" else tf.function(fn)
    if mode == "tf_function":
        # declarations are made while tracing: trace once, under record; the
        # runs reuse the trace (a tf.function is counted per run, not per trace)
        with cost.record() as traced:
            f.get_concrete_function(*args)
        f(*args)
    declared, counted = measured(f, *args)
    if mode == "tf_function":
        declared = traced
    assert_declared_equals_counted(declared, counted)
    assert counted.messages > 0 or op == "mul_public"


def test_counts_are_per_run_not_per_trace(ring_case):
    ring = ring_case.ring
    x, y = tp.share(np.ones(5)), tp.share(np.ones(5))
    f = tf.function(lambda a, b: a * b)
    f(x, y)
    with tp.stats() as s:
        for _ in range(3):
            f(x, y)
    assert f.experimental_get_tracing_count() == 1
    assert s.rounds == 6 and s.multiplications == 15 and s.messages == 18


def test_stats_report_every_link(ring_case):
    ring = ring_case.ring
    x = tp.share(np.ones((2, 2)))
    with tp.stats() as s:
        tp.reveal(x * x)
    assert set(s.links) == {("S1", "T1"), ("S2", "T1"), ("S2", "T2"), ("S1", "T2"),
                            ("T1", "S2"), ("T2", "S1"), ("S1", "client"), ("S2", "client")}
    assert s.rounds == 3 and "rounds 3" in str(s)
    assert tp.stats().messages >= s.messages  # totals since tp.init()


# ----------------------------------------------------------- stream desync
def test_a_failure_between_two_ends_is_detected(ring_case, monkeypatch):
    """A kernel error after T1 took its S1-T1 nonce but before S1 did leaves
    the stream out of step; the next multiplication must fail with a clear
    error instead of returning a wrong product."""
    ring = ring_case.ring
    x, y = tp.share(np.full(4, 1.5)), tp.share(np.full(4, 2.0))
    real = kernels.mul_assist
    calls = []

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise tf.errors.InternalError(None, None, "injected failure on T1")
        return real(*a, **k)

    monkeypatch.setattr(kernels, "mul_assist", failing)
    with pytest.raises(tf.errors.InternalError, match="injected"):
        x * y  # S1 and S2 have taken their nonces; T1 took its own; T2 none
    monkeypatch.setattr(kernels, "mul_assist", real)
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of step.*tp.init"):
        x * y


def test_the_check_can_fail_and_passes_in_step(ring_case):
    """Shown failing on a deliberately desynchronised stream (one end
    advanced alone), and passing when both ends are in step."""
    ring = ring_case.ring
    x, y = tp.share(np.full(4, 1.5)), tp.share(np.full(4, 2.0))
    np.testing.assert_allclose((x * y).reveal().numpy(), 3.0)
    rt = tp.get_runtime().runtime
    rt.nonce("S2", "T2", "T2")  # T2 advances alone
    with pytest.raises(tf.errors.InvalidArgumentError, match="S2-T2 PRG stream is out of step"):
        x * y


def test_comparison_detects_desync(ring_case):
    """The garbled comparator draws its labels from the S1-S2 stream: pinned
    to that family (the bitwise family uses no S1-S2 stream; its dealer
    streams' checks are tests/test_bitwise.py's
    test_a_dealer_stream_out_of_step_is_refused)."""
    x = tp.share(np.linspace(-2, 2, 8))
    tp.get_runtime().runtime.nonce("S1", "S2", "S2")
    with pytest.raises(tf.errors.InvalidArgumentError, match="S1-S2 PRG stream is out of step"):
        with tp.comparison("garbled"):
            tp.less(x, 0.0)


# ----------------------------------------------------------------- devices
def test_parties_need_their_own_devices():
    devs = {"client": "/device:CPU:0", "S1": "/device:CPU:1", "S2": "/device:CPU:2",
            "T1": "/device:CPU:3", "T2": "/device:CPU:4"}
    check_devices(devs)
    with pytest.raises(ValueError, match="S1 and S2 are both placed"):
        check_devices(dict(devs, S2="/device:CPU:1"))
    with pytest.raises(ValueError, match="client and T1 are both placed"):
        check_devices(dict(devs, T1="/job:localhost/replica:0/task:0/device:CPU:0"))
    with pytest.raises(ValueError, match="lacks"):
        check_devices({k: v for k, v in devs.items() if k != "T2"})


def test_init_refuses_shared_devices():
    servers = tp.servers()
    try:
        with pytest.raises(ValueError, match="device of its own"):
            tp.init(devices=dict(servers, T2=servers["client"]))
    finally:
        tp.reset()
        tp.init()


@pytest.mark.parametrize("case", ["mul", "less", "sigmoid"])
def test_tp_cost_traces_without_running_and_equals_a_run(case):
    """tp.cost: the bill of one call, by tracing alone (the counters do not
    move), equal to what a traced run then counts."""
    shapes, fn = CASES[case]
    rng = np.random.default_rng(4)
    args = [tp.share(rng.normal(size=s)) for s in shapes]
    with tp.stats() as idle:
        bill = tp.cost(fn, *args)
    assert idle.links == {} or all(v == (0, 0) for v in idle.links.values())
    assert bill.rounds > 0
    traced = tf.function(fn)
    traced(*args)  # traced once: the run below counts a run, not a trace
    with tp.stats() as counted:
        traced(*args)
    assert_declared_equals_counted(bill, counted)


def test_counted_at_end_counts_a_graph_once_per_link_and_loops_per_iteration(ring_case):
    """Channels.counted_at_end: one counter update per link instead of a
    CountMessage op per message (and one update of the protocol counters
    instead of two ops per protocol call). PrivateModel.predict traces under
    one block; every tp op traced elsewhere opens its own
    (opdef.accepting_variables), nested blocks on one graph adding nothing of
    their own. After a run the totals equal the per-message counts of the
    same computation run eagerly; a send inside a while loop's body (another
    graph) is still counted where it happens, once per iteration.
    Broken variant tried while writing this: deferring the loop body's sends
    too counts them once (S1->T1: 3 messages instead of 5), and the
    comparison with the eager counts fails."""
    rt = tp.get_runtime().runtime
    plain = np.arange(6.0).reshape(2, 3) / 4
    x = tp.share(plain)

    def body(a, deferred):
        with (rt.channels.counted_at_end() if deferred else contextlib.nullcontext()):
            z = (a * a) * a                # two multiplications

            def step(i, v):
                return i + 1, v * a        # one per iteration
            return tf.while_loop(lambda i, v: i < 3, step, (tf.constant(0), z))[1]

    runs = {}
    for deferred in (True, False, "eager"):
        f = ((lambda a: body(a, False)) if deferred == "eager"
             else tf.function(lambda a, d=deferred: body(a, d)))
        if deferred != "eager":
            ops = f.get_concrete_function(x).graph.get_operations()
            runs[deferred] = sum(op.type == "AssignAddVariableOp" for op in ops)
            assert not any(op.type == "TfPrivpy>CountMessage" for op in ops)
        f(x)
        with tp.stats() as counted:
            out = f(x)
        np.testing.assert_allclose(tp.reveal(out).numpy(), plain ** 6, atol=1e-3)
        runs[deferred, "links"] = counted.links
        runs[deferred, "protocol"] = (counted.rounds, counted.multiplications,
                                      counted.comparisons)
    for deferred in (True, False):
        assert runs[deferred, "links"] == runs["eager", "links"]
        # the runtime's protocol counters (Channels.add_at_end) add up the same
        assert runs[deferred, "protocol"] == runs["eager", "protocol"]
    assert runs[True, "protocol"][1] > 0
    assert runs[True, "links"][("S1", "T1")][0] == 5   # 2 outside the loop + 3 iterations
    # one block for the function: fewer updates than a block per op
    assert runs[True] < runs[False]


def test_a_block_whose_body_raised_still_counts_its_messages(ring_case):
    """Channels.counted_at_end adds its counts also when its body raised: a
    caller that catches the error goes on tracing, and the messages sent
    before it stay in the graph and run. Broken variant tried while writing
    this: adding the counts after the block instead of in its `finally`
    left the multiplication's messages uncounted (no link counted)."""
    rt = tp.get_runtime().runtime
    x = tp.share(np.arange(4.0).reshape(2, 2))

    def f(a):
        z = None
        try:
            with rt.channels.counted_at_end():
                z = a * a
                raise ValueError("caught below")
        except ValueError:
            pass
        return z

    traced = tf.function(f)
    traced(x)
    with tp.stats() as counted:
        traced(x)
    with tp.stats() as eager:
        f(x)
    assert counted.links and counted.links == eager.links


def test_private_call_runs_without_grappler_and_restores_the_options(ring_case):
    """runtime/calling.private_call: the thread's call options inside have
    the meta optimizer off, the same config every call (TF keys an
    instantiated function by it), and the caller's options come back."""
    from tensorflow.python.eager import context as tf_context
    from tf_privpy.protocols.mpc.runtime import calling
    from tensorflow.core.protobuf import config_pb2
    before = tf_context.context().function_call_options
    seen = []
    for _ in range(2):
        with calling.private_call():
            seen.append(tf_context.context().function_call_options)
    assert seen[0].config_proto_serialized == seen[1].config_proto_serialized
    assert seen[0].executor_type == seen[1].executor_type
    cfg = config_pb2.ConfigProto.FromString(seen[0].config_proto_serialized)
    assert cfg.graph_options.rewrite_options.disable_meta_optimizer
    assert tf_context.context().function_call_options is before
