"""Each protocol node runs on the device DESIGN §5 gives it (graph check)."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp


def graph_ops(fn, *args):
    return tf.function(fn).get_concrete_function(*args).graph.get_operations()


def device_of(op, servers):
    names = {tf.DeviceSpec.from_string(v).to_string(): k for k, v in servers.items()}
    return names.get(tf.DeviceSpec.from_string(op.device).to_string(), op.device)


@pytest.mark.parametrize("kind", ["mul", "matmul", "conv2d"])
def test_multiplication_placement(ring, kind):
    servers = tp.servers()
    shapes = {"mul": ((4, 4), (4, 4)), "matmul": ((4, 3), (3, 2)),
              "conv2d": ((1, 5, 5, 2), (3, 3, 2, 4))}[kind]
    x, y = tp.share(np.ones(shapes[0])), tp.share(np.ones(shapes[1]))
    fns = {"mul": lambda a, b: a * b, "matmul": lambda a, b: a @ b,
           "conv2d": lambda a, b: tp.nn.conv2d(a, b, 1, "SAME")}
    placed, counted = {}, {}
    for op in graph_ops(fns[kind], x, y):
        if op.type == "AssignAddVariableOp" and op.name.startswith("tp_channel_"):
            # a link's counter update: "tp_channel_S1_to_T1_counts/..."
            counted.setdefault(op.name.split("/")[0][len("tp_channel_"):-len("_counts")],
                               []).append(device_of(op, servers))
        if op.type.startswith("TfPrivpy>"):
            party = op.get_attr("party") if op.type in ("TfPrivpy>MulMask",
                                                        "TfPrivpy>MulFinish") else None
            placed.setdefault((op.type, party), []).append(device_of(op, servers))
    placed = {k: sorted(v) for k, v in placed.items()}
    assert placed == {
        # each party takes (key, nonce) of each stream it uses: S1 of S1-S2
        # and S1-T1, S2 of S1-S2 and S2-T2 (each server's two in one op),
        # T1 of S1-T1, T2 of S2-T2
        ("TfPrivpy>StreamNextMany", None): ["S1", "S2"],
        ("TfPrivpy>StreamNext", None): ["T1", "T2"],
        ("TfPrivpy>MulMask", 0): ["S1"], ("TfPrivpy>MulMask", 1): ["S2"],
        ("TfPrivpy>MulAssist", None): ["T1", "T2"],
        ("TfPrivpy>MulFinish", 0): ["S1"], ("TfPrivpy>MulFinish", 1): ["S2"],
        # each assistant checks the S1-S2 nonce and its own stream's nonce
        # in the headers it received before it unmasks (channel.check_stream)
        ("TfPrivpy>CheckEqual", None): ["T1", "T1", "T2", "T2"],
    }
    # each of the six messages (each on a link of its own) is counted on its
    # receiver, by one counter update per link when the op's trace ends
    # (Channels.counted_at_end); no CountMessage op per message
    assert counted == {"S1_to_T1": ["T1"], "S2_to_T1": ["T1"], "S1_to_T2": ["T2"],
                       "S2_to_T2": ["T2"], "T1_to_S2": ["S2"], "T2_to_S1": ["S1"]}


def test_share_and_reveal_placement(ring):
    servers = tp.servers()
    ops = graph_ops(lambda a: tp.share(a).reveal(), tf.TensorSpec([3], tf.float32))
    placed = {op.type: device_of(op, servers) for op in ops if op.type.startswith("TfPrivpy>")}
    assert placed["TfPrivpy>RingEncode"] == "client"
    assert placed["TfPrivpy>ShareSplit"] == "client"
    assert placed["TfPrivpy>RingDecode"] == "client"


def test_local_ops_stay_on_share_holders(ring):
    servers = tp.servers()
    x = tp.share(np.ones((2, 3)))
    ops = graph_ops(lambda a: tp.reduce_sum(a * 2.0 + 1.0, 0), x)
    devices = {device_of(op, servers) for op in ops if op.type.startswith("TfPrivpy>")}
    assert devices == {"S1", "S2"}


# ------------------------------------------------ taint-checked placement
# Every op of the registry (protocols/mpc/api/registry.py: the list every tp.*
# function, TF dispatcher and the converter read, so it is generated, not
# hand-picked), traced in a tf.function and run eagerly on its registered
# example: each op that reads a share or a protocol message runs on a server,
# and every value that changes party goes through the channel
# (tests/graphcheck.py). tp.share has no private input and garbling or dealing
# ahead creates TF variables eagerly: covered by the tests above and by
# test_comparisons_dealt_ahead_run_on_their_owners.
import graphcheck  # noqa: E402
from tf_privpy.protocols.mpc.runtime import placement  # noqa: E402
from tf_privpy.protocols.mpc.api import registry  # noqa: E402

NO_PRIVATE_INPUT = {"share", "garble_comparisons", "prepare_comparisons"}
OPS = sorted(op.name for op in registry.ops() if op.name not in NO_PRIVATE_INPUT)


def test_the_op_list_is_the_registry():
    names = {op.name for op in registry.ops()}
    assert set(OPS) | NO_PRIVATE_INPUT == names and len(OPS) > 50


def _sample(name):
    """(fn of the private operands, the private operands) of an op's example."""
    op = registry.get(name)
    ex = registry.sample(op.example())
    flat = tf.nest.flatten((ex.args, dict(ex.kwargs)))
    private = [v for v in flat if isinstance(v, tp.PrivateTensor)]

    def fn(*p):
        it = iter(p)
        args, kwargs = tf.nest.pack_sequence_as(
            (ex.args, dict(ex.kwargs)),
            [next(it) if isinstance(v, tp.PrivateTensor) else v for v in flat])
        return tf.nest.flatten(op.impl(*args, **kwargs), expand_composites=True)

    return fn, private


@pytest.mark.parametrize("name", OPS)
def test_every_op_runs_on_its_owners_traced(name):
    fn, private = _sample(name)
    concrete = tf.function(fn, autograph=False).get_concrete_function(*private)
    bad = graphcheck.graph_violations(concrete, tp.servers(),
                                      graphcheck.share_inputs(concrete, len(private)))
    assert not bad, f"{name}:\n" + "\n".join(bad[:20])


@pytest.mark.parametrize("name", OPS)
def test_every_op_runs_on_its_owners_eagerly(name):
    fn, private = _sample(name)
    rec = graphcheck.EagerRecorder(tp.servers(), [s for a in private
                                                  for s in (a.share0, a.share1)])
    with rec.active():
        fn(*private)
    assert rec.ran or name == "identity", "the recorder saw no op"
    assert not rec.violations, f"{name}:\n" + "\n".join(rec.violations[:20])


def test_comparisons_dealt_ahead_run_on_their_owners():
    """The bitwise family's set-up (T1 deals, S2 stores) and online phase,
    eagerly: every op that reads a share or a message runs on its owner."""
    x = tp.share(_A)
    rec = graphcheck.EagerRecorder(tp.servers(), [x.share0, x.share1])
    with rec.active(), tp.comparison("bitwise"):
        prepared = tp.prepare_comparisons([2, 3])
        tp.less(x, 0.0, pregarbled=prepared)
    assert rec.ran and not rec.violations, "\n".join(rec.violations[:20])


def _outputs(v):
    return [v.share0, v.share1]


_A = np.linspace(-2, 2, 6).reshape(2, 3)


def _misplaced_reshape(x):
    """A deliberately broken op: reshapes S1's share with no device scope,
    so TF runs it on the client: the leak this check exists to catch."""
    y = tp.reshape(x, [3, 2])
    return tp.PrivateTensor(share0=tf.reshape(x.share0, y.share0.shape), share1=y.share1,
                            ring_bits=y.ring_bits, frac_bits=y.frac_bits,
                            value_dtype=y.value_dtype, runtime_id=y.runtime_id)


def test_the_check_catches_a_misplaced_reshape(monkeypatch):
    x = tp.share(_A)
    # The trace-time guard (protocols/mpc/runtime/placement.py) refuses it, naming the op...
    with pytest.raises(tp.PlacementError, match="'Reshape.*' \\(Reshape\\) reads .* held by S1"):
        tf.function(lambda a: _outputs(_misplaced_reshape(a))).get_concrete_function(x)
    # ...and with the guard off, the full graph check finds it too.
    monkeypatch.setattr(placement, "_check", lambda op, st: None)
    concrete = tf.function(lambda a: _outputs(_misplaced_reshape(a))).get_concrete_function(x)
    shares = graphcheck.share_inputs(concrete, 1)
    bad = graphcheck.graph_violations(concrete, tp.servers(), shares)
    assert any("Reshape" in b and "runs on client" in b for b in bad), bad
    assert any("outside the channel" in b for b in bad), bad
    rec = graphcheck.EagerRecorder(tp.servers(), [x.share0, x.share1])
    with rec.active():
        _misplaced_reshape(x)
    assert any("Reshape" in v for v in rec.violations), rec.violations


def test_the_check_catches_a_copy_that_bypasses_the_channel():
    servers = tp.servers()
    x = tp.share(_A)

    def leak(a):  # S2 reads S1's share directly: a cross-device edge, no channel
        with tf.device(servers["S2"]):
            return [tf.identity(a.share0)]

    concrete = tf.function(leak).get_concrete_function(x)
    shares = graphcheck.share_inputs(concrete, 1)
    bad = graphcheck.graph_violations(concrete, servers, shares)
    assert any("crosses S1 -> S2" in b for b in bad), bad


def _device_scope_places(scope) -> dict:
    """Where `scope(S1)` puts an op built in a trace and one run eagerly
    under tf.init_scope inside the same trace (the default graph is still
    the function's there)."""
    s1 = tp.servers()["S1"]
    seen = {}

    def f():
        with tf.init_scope():
            with scope(s1):
                seen["eager"] = (tf.constant([1], tf.int64) + 1).device
        with scope(s1):
            out = tf.constant([1], tf.int64) + 1
        seen["graph"] = out.op.device
        return out
    tf.function(f, autograph=False).get_concrete_function()
    return {k: placement.canon(v) for k, v in seen.items()}


def test_device_scope_places_traced_and_init_scope_ops():
    """runtime/devscope.device_scope, the protocols' tf.device: the graph's
    own scope while tracing, tf.device when executing eagerly, also under
    tf.init_scope inside a trace. Broken variant, in the test: a scope that
    only sets the graph's device leaves the eager op on the client."""
    from tensorflow.python.framework import ops
    from tf_privpy.protocols.mpc.runtime.devscope import device_scope
    s1 = placement.canon(tp.servers()["S1"])
    assert _device_scope_places(device_scope) == {"eager": s1, "graph": s1}
    assert _device_scope_places(tf.device) == {"eager": s1, "graph": s1}
    graph_only = _device_scope_places(lambda d: ops.get_default_graph().device(d))
    assert graph_only["graph"] == s1 and graph_only["eager"] != s1, graph_only
