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
    placed = {}
    for op in graph_ops(fns[kind], x, y):
        if op.type.startswith("TfPrivpy>"):
            party = op.get_attr("party") if op.type in ("TfPrivpy>MulMask",
                                                        "TfPrivpy>MulFinish") else None
            placed.setdefault((op.type, party), []).append(device_of(op, servers))
    placed = {k: sorted(v) for k, v in placed.items()}
    assert placed == {
        # each party takes (key, nonce) of each stream it uses: S1 of S1-S2
        # and S1-T1, S2 of S1-S2 and S2-T2, T1 of S1-T1, T2 of S2-T2
        ("TfPrivpy>StreamNext", None): ["S1", "S1", "S2", "S2", "T1", "T2"],
        ("TfPrivpy>MulMask", 0): ["S1"], ("TfPrivpy>MulMask", 1): ["S2"],
        ("TfPrivpy>MulAssist", None): ["T1", "T2"],
        ("TfPrivpy>MulFinish", 0): ["S1"], ("TfPrivpy>MulFinish", 1): ["S2"],
    }


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
# Every public op, traced in a tf.function and run eagerly: each op that reads
# a share or a protocol message runs on a server, and every value that changes
# party goes through the channel (tests/graphcheck.py). The op list is
# generated from the public API; an op without a sample call below fails
# test_every_public_op_has_a_sample, so a new op cannot slip through.
import inspect  # noqa: E402

import graphcheck  # noqa: E402

_A, _B = np.linspace(-2, 2, 6).reshape(2, 3), np.linspace(1, 3, 6).reshape(2, 3)
_IMG = np.linspace(-1, 1, 32).reshape(1, 4, 4, 2)
_FILT = np.linspace(-1, 1, 16).reshape(2, 2, 2, 2)
_POS = np.linspace(0.5, 3, 6).reshape(2, 3)

# name -> (plain inputs to share, fn of the private inputs)
SAMPLES = {
    "abs": ((_A,), lambda x: tp.abs(x)),
    "add": ((_A, _B), lambda x, y: tp.add(x, y) + 1.5),
    "argmax": ((_A,), lambda x: tp.argmax(x, 1)),
    "argmin": ((_A,), lambda x: tp.argmin(x, 1)),
    "broadcast_to": ((_A[:1],), lambda x: tp.broadcast_to(x, [2, 3])),
    "concat": ((_A, _B), lambda x, y: tp.concat([x, y], 0)),
    "divide": ((_A, _POS), lambda x, y: tp.divide(x, y) + x / 3.0),
    "dot": ((_A[0], _B[0]), lambda x, y: tp.dot(x, y)),
    "equal": ((_A, _B), lambda x, y: tp.equal(x, y)),
    "exp": ((_A,), lambda x: tp.exp(x)),
    "expand_dims": ((_A,), lambda x: tp.expand_dims(x, 0)),
    "gather": ((_A,), lambda x: tp.gather(x, [2, 0], axis=1)),
    "greater": ((_A, _B), lambda x, y: tp.greater(x, y)),
    "greater_equal": ((_A, _B), lambda x, y: tp.greater_equal(x, y)),
    "less": ((_A, _B), lambda x, y: tp.less(x, y)),
    "less_equal": ((_A, _B), lambda x, y: tp.less_equal(x, y)),
    "logical_not": ((_A, _B), lambda x, y: tp.logical_not(tp.less(x, y))),
    "log": ((_POS,), lambda x: tp.math.log(x)),
    "matmul": ((_A, _B), lambda x, y: tp.matmul(x, y, transpose_b=True)),
    "maximum": ((_A, _B), lambda x, y: tp.maximum(x, y)),
    "minimum": ((_A, _B), lambda x, y: tp.minimum(x, y)),
    "multiply": ((_A, _B), lambda x, y: tp.multiply(x, y) * 2.5),
    "multiply_many": ((_A, _B), lambda x, y: tp.multiply_many([(x, y), (y, y)])[1]),
    "negative": ((_A,), lambda x: tp.negative(x)),
    "not_equal": ((_A, _B), lambda x, y: tp.not_equal(x, y)),
    "outer": ((_A[0], _B[0]), lambda x, y: tp.outer(x, y)),
    "pad": ((_A,), lambda x: tp.pad(x, [[1, 0], [0, 1]])),
    "reciprocal": ((_POS,), lambda x: tp.math.reciprocal(x)),
    "reduce_max": ((_A,), lambda x: tp.reduce_max(x, 1)),
    "reduce_mean": ((_A,), lambda x: tp.reduce_mean(x, 0)),
    "reduce_min": ((_A,), lambda x: tp.reduce_min(x, 0)),
    "reduce_sum": ((_A,), lambda x: tp.reduce_sum(x, 1)),
    "repeat": ((_A,), lambda x: tp.repeat(x, 2, axis=0)),
    "reshape": ((_A,), lambda x: tp.reshape(x, [3, 2])),
    "rsqrt": ((_POS,), lambda x: tp.math.rsqrt(x)),
    "sigmoid": ((_A,), lambda x: tp.sigmoid(x)),
    "sign": ((_A,), lambda x: tp.sign(x)),
    "sort": ((_A,), lambda x: tp.sort(x, 1)),
    "sqrt": ((_POS,), lambda x: tp.sqrt(x)),
    "squeeze": ((_A[:1],), lambda x: tp.squeeze(x, 0)),
    "stack": ((_A, _B), lambda x, y: tp.stack([x, y], 1)),
    "subtract": ((_A, _B), lambda x, y: tp.subtract(x, y) - 0.25),
    "tanh": ((_A,), lambda x: tp.tanh(x)),
    "tensordot": ((_A, _B), lambda x, y: tp.tensordot(x, y, [[1], [1]])),
    "tile": ((_A,), lambda x: tp.tile(x, [1, 2])),
    "top_k": ((_A,), lambda x: tp.math.top_k(x, 2)[0]),
    "transpose": ((_A,), lambda x: tp.transpose(x)),
    "where": ((_A, _B), lambda x, y: tp.where(tp.less(x, y), x, y)),
    "nn.avg_pool2d": ((_IMG,), lambda x: tp.nn.avg_pool2d(x, 2, 2)),
    "nn.conv2d": ((_IMG, _FILT), lambda x, w: tp.nn.conv2d(x, w, 1, "SAME")),
    "nn.log_softmax": ((_A,), lambda x: tp.nn.log_softmax(x)),
    "nn.max_pool2d": ((_IMG,), lambda x: tp.nn.max_pool2d(x, 2, 2)),
    "nn.max_pool2d_relu": ((_IMG,), lambda x: tp.nn.max_pool2d_relu(x, 2, 2)),
    "nn.relu": ((_A,), lambda x: tp.nn.relu(x)),
    "nn.sigmoid": ((_A,), lambda x: tp.nn.sigmoid(x)),
    "nn.softmax": ((_A,), lambda x: tp.nn.softmax(x)),
    "nn.tanh": ((_A,), lambda x: tp.nn.tanh(x)),
}
# public names that are not ops on private values
NOT_OPS = {"client_devices", "garble_comparisons", "get_runtime", "init", "is_initialized",
           "reset", "reveal", "servers", "share", "stats"}


def public_ops():
    """Every function of tp, tp.math and tp.nn, by its name under tp."""
    names = set()
    for prefix, mod in (("", tp), ("", tp.math), ("nn.", tp.nn)):
        for n in getattr(mod, "__all__", None) or dir(mod):
            v = getattr(mod, n, None)
            if n.startswith("_") or not inspect.isfunction(v) or n in NOT_OPS:
                continue
            if getattr(v, "__module__", "").startswith(("typing", "tensorflow")):
                continue
            names.add(prefix + n)
    return sorted(names)


def test_every_public_op_has_a_sample():
    missing = [n for n in public_ops() if n not in SAMPLES]
    assert not missing, f"add a sample call to SAMPLES for {missing}"


def _outputs(v):
    return [v.share0, v.share1] if isinstance(v, tp.PrivateTensor) else [v]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_op_runs_on_its_owners_traced(name):
    plain, fn = SAMPLES[name]
    args = [tp.share(a) for a in plain]
    concrete = tf.function(lambda *a: _outputs(fn(*a))).get_concrete_function(*args)
    # the function's inputs: the shares of each private argument
    shares = graphcheck.share_inputs(concrete, len(args))
    bad = graphcheck.graph_violations(concrete, tp.servers(), shares)
    assert not bad, f"{name}:\n" + "\n".join(bad[:20])


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_op_runs_on_its_owners_eagerly(name):
    plain, fn = SAMPLES[name]
    args = [tp.share(a) for a in plain]
    rec = graphcheck.EagerRecorder(tp.servers(), [s for a in args for s in (a.share0, a.share1)])
    with rec.active():
        fn(*args)
    assert rec.ran, "the recorder saw no op"
    assert not rec.violations, f"{name}:\n" + "\n".join(rec.violations[:20])


def _misplaced_reshape(x):
    """A deliberately broken op: reshapes S1's share with no device scope,
    so TF runs it on the client: the leak this check exists to catch."""
    y = tp.reshape(x, [3, 2])
    return tp.PrivateTensor(share0=tf.reshape(x.share0, y.share0.shape), share1=y.share1,
                            ring_bits=y.ring_bits, frac_bits=y.frac_bits,
                            value_dtype=y.value_dtype, runtime_id=y.runtime_id)


def test_the_check_catches_a_misplaced_reshape():
    x = tp.share(_A)
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
