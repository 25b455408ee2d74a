"""The protocols under a plain tf.function, Grappler on.

The case tests (tests/conftest.py `run`) trace through `tp.function`, which
calls without Grappler, as a converted model's predict and a trainer's step
do (protocols/mpc/runtime/calling.py). A user may still wrap private code in
a plain tf.function: TF then runs Grappler's meta optimizer over the private
graph (constant folding, common-subgraph elimination, the memory optimizer,
the remapper) before partitioning it. Nothing it does may change a result:
common-subgraph elimination must not merge two stream draws (they are
stateful ops), constant folding must not move a share's op. Here every op
family the case tests run, in one graph per ring (one trace, one Grappler
run), against plaintext with tests/tolerances.py's bounds; its trace sees
the process's options, Grappler on. The partition graphs' placement under
Grappler is the placement tests' (tests/test_placement.py)."""
import numpy as np
import tensorflow as tf

import graphcheck
import tf_privpy as tp
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.eager import context as tf_context
from tolerances import FUNCTION_TOL, matmul_tol, mul_tol, select_tol


def _graph_ops(x, w, m, img, k):
    """One private graph over the case tests' op families."""
    xw = x * w
    pool = tp.nn.max_pool2d(tp.nn.conv2d(img, k, 1, "SAME"), 2, 2, "VALID")
    return dict(
        mul=xw, matmul=x @ m, add=x + w, sum=tp.reduce_sum(x, 1),
        relu=tp.nn.relu(x), maximum=tp.maximum(x, w), sort=tp.sort(x),
        argmax=tp.argmax(x, 1), where=tp.where(tp.greater(x, w), x, w),
        exp=tp.math.exp(x * 0.05), reciprocal=tp.math.reciprocal(w + 5.0),
        sigmoid=tp.math.sigmoid(x), conv_pool=pool)


def _plain(x, w, m, img, k):
    conv = tf.nn.conv2d(img, k, 1, "SAME")
    return dict(
        mul=x * w, matmul=x @ m, add=x + w, sum=x.sum(1), relu=np.maximum(x, 0),
        maximum=np.maximum(x, w), sort=np.sort(x, -1), argmax=x.argmax(1),
        where=np.where(x > w, x, w), exp=np.exp(x * 0.05), reciprocal=1 / (w + 5.0),
        sigmoid=1 / (1 + np.exp(-x)),
        conv_pool=tf.nn.max_pool2d(conv, 2, 2, "VALID").numpy())


def _inputs(frac_bits):
    rng = np.random.default_rng(7)
    on_grid = lambda a: np.round(a * 2.0 ** frac_bits) / 2.0 ** frac_bits  # noqa: E731
    # distinct values (sort and argmax have one answer), |x| < 8 for exp(x/20);
    # rows of 8: the sort's 6 layers unrolled (its tf.while_loop under
    # Grappler is tests/test_sort_loop.py's: test_loop_placement and
    # test_bitwise_loop_sends_the_dealer_no_size run plain tf.functions)
    x = on_grid(rng.permutation(24).reshape(3, 8) / 3.0 - 4.0)
    w = on_grid(rng.uniform(-4, 4, (3, 8)))
    m = on_grid(rng.uniform(-1, 1, (8, 4)))
    img = on_grid(rng.uniform(-1, 1, (1, 6, 6, 2)))
    k = on_grid(rng.uniform(-1, 1, (3, 3, 2, 3)))
    return x, w, m, img, k


def _check(got, want, x, w, m, img, k, cfg):
    f, ring = cfg.frac_bits, cfg.ring_bits
    conv = tf.nn.conv2d(img, k, 1, "SAME").numpy()
    # the conv's products: a matmul of 18 terms per output; the pool selects
    conv_tol = matmul_tol(np.ones((1, 18)) * np.abs(img).max(),
                          np.ones((18, 1)) * np.abs(k).max(), f).max()
    tols = dict(mul=mul_tol(x, w, f), matmul=matmul_tol(x, m, f), add=0, sum=0,
                relu=0, maximum=0, sort=0, argmax=0, where=0,
                exp=FUNCTION_TOL[ring] * np.exp(x * 0.05) + mul_tol(x, 0.05, f) * 2,
                reciprocal=FUNCTION_TOL[ring] / (w + 5.0),
                sigmoid=FUNCTION_TOL[ring] * np.ones_like(x),
                conv_pool=conv_tol + select_tol(2, f))
    for name, v in got.items():
        v = v.reveal().numpy() if isinstance(v, tp.PrivateTensor) else np.asarray(v)
        np.testing.assert_allclose(v, want[name], atol=np.max(tols[name]) + 1e-12, rtol=0,
                                   err_msg=name)


def test_every_case_family_under_grappler(ring):
    cfg = tp.get_runtime().config
    args = _inputs(cfg.frac_bits)
    shared = [tp.share(tf.constant(a, tf.float64)) for a in args]
    seen = {}

    def body(*xs):
        seen["options"] = tf_context.context().function_call_options.config_proto_serialized
        return _graph_ops(*xs)

    f = tf.function(body)
    got, md = graphcheck.run_metadata(f, *shared)
    _check(got, _plain(*args), *args, cfg)
    # no Pack of one repeated tensor (test_pack_of_a_repeated_tensor): the
    # selects' dealt bit, stacked once per operand, was one (IdentityN:1)
    assert _repeated_packs(f.get_concrete_function(*shared).graph) == []
    # nor one Grappler made: its common-subgraph elimination may merge two
    # equal producers into one, which the traced graph cannot show; what
    # ran (the partition graphs) holds no ReplacePackWithTileReshape node.
    # Broken variant (shares.pack = tf.stack, the traced check above off):
    # 57 rewritten nodes here, and wrong values.
    parts = [pg for fg in md.function_graphs for pg in fg.partition_graphs]
    assert parts, "no partition graph recorded"
    assert [n.name for pg in parts for n in pg.node
            if "ReplacePackWithTileReshape" in n.name] == []
    # the process's options: Grappler on (tp.function's calls have it off:
    # test_tp_function_calls_without_grappler)
    rewrite = config_pb2.ConfigProto.FromString(seen["options"]).graph_options.rewrite_options
    assert not rewrite.disable_meta_optimizer


def _repeated_packs(graph):
    return [op.name for op in graph.get_operations()
            if op.type == "Pack" and len(op.inputs) > 1
            and all(t is op.inputs[0] for t in op.inputs)]


def test_pack_of_a_repeated_tensor():
    """TF 2.14's Grappler rewrites Pack(b, b) into a Tile of b's producer's
    output 0 (the arithmetic optimizer's ReplacePackWithTileReshape drops
    the output index): under a plain tf.function tf.stack([b, b]) with
    b = tf.unstack(x)[1] gives [x[0], x[0]]. shares.pack, which every
    stack of shares goes through, tiles a repeated tensor instead. Broken
    variant: the bitwise selects stacking their dealt bit with tf.stack
    (before this test) left 6 such Packs in test_every_case_family's graph;
    mul_many's stacked pairs with tf.stack made tp.math.reciprocal wrong
    on every element in the 64-bit ring."""
    from tf_privpy.protocols.mpc.runtime import shares as sh

    @tf.function
    def f(x):
        b = tf.unstack(x)[1]
        return sh.pack([b, b]), sh.pack([b, b, b], 1), sh.pack([b, x[0]])

    x = tf.constant([[1, 2], [3, 4]], tf.int64)
    two, three, mixed = (v.numpy().tolist() for v in f(x))
    assert two == [[3, 4], [3, 4]]
    assert three == [[3, 3, 3], [4, 4, 4]]
    assert mixed == [[3, 4], [1, 2]]
    assert _repeated_packs(f.get_concrete_function(x).graph) == []


def test_tp_function_calls_without_grappler(ring_case):
    """tp.function: traced once, called with the meta optimizer off (its
    body traces inside the call, under the call's options), refuses XLA."""
    traces = []

    @tp.function
    def square(a):
        options = tf_context.context().function_call_options.config_proto_serialized
        traces.append(config_pb2.ConfigProto.FromString(options))
        return a * a

    x = tp.share([1.5, -2.0])
    for _ in range(2):
        np.testing.assert_allclose(square(x).reveal(), [2.25, 4.0], atol=1e-4)
    assert len(traces) == 1 and square.__name__ == "square"
    assert traces[0].graph_options.rewrite_options.disable_meta_optimizer
    assert square.get_concrete_function(x).structured_outputs is not None
    try:
        tp.function(lambda a: a, jit_compile=True)
    except ValueError as e:
        assert "XLA" in str(e)
    else:
        raise AssertionError("jit_compile=True was accepted")
