"""The converter's optimizer passes (converters/passes.py, DESIGN §8, PrivPy
§5.6 and §6.2): each test shows (a) the graph change, (b) the same outputs
(within the error bound of the arithmetic: every pass but batching changes
rounding; batching keeps the arithmetic, but share truncation is randomised
so two runs of the same graph already differ by an ulp, hence the bound of
the truncations instead of bit-identity), and (c) the drop in the cost bill
of PrivateModel.cost()."""
import collections

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.converters import passes as P
from kerasutil import randomize_batchnorm, seeded
from tolerances import TRUNC_ULPS, keras_tol, matmul_tol, mul_tol, ulp

L = tf.keras.layers
S = tf.TensorSpec


def ops(private):
    return collections.Counter(n.op for n in private._traced.graph_def.node
                               if n.op not in ("Const", "Identity", "NoOp", "Placeholder"))


def bill(private, batch):
    c = private.cost(batch)
    return c.rounds, c.multiplications, c.comparisons


def both(convert, **kw):
    """The model converted without and with the passes."""
    return convert(passes=False, **kw), convert(**kw)


def frac():
    return tp.get_runtime().config.frac_bits


# ------------------------------------------------------------ BatchNorm
BN_MODELS = {
    "conv_depthwise": lambda: [L.InputLayer((6, 6, 2)), L.Conv2D(3, 3), L.BatchNormalization(),
                               L.DepthwiseConv2D(3, depth_multiplier=2),
                               L.BatchNormalization()],
    "dense": lambda: [L.InputLayer((5,)), L.Dense(4), L.BatchNormalization(),
                      L.Dense(3, use_bias=False), L.BatchNormalization()],
}


@pytest.mark.parametrize("case", sorted(BN_MODELS))
def test_fold_batchnorm(ring, case):
    model = randomize_batchnorm(seeded(lambda: tf.keras.Sequential(BN_MODELS[case]())))
    x = np.random.default_rng(1).uniform(-2, 2, (3,) + model.input_shape[1:]).astype(np.float32)
    before, after = both(lambda **kw: tp.keras.convert(model, **kw))
    # (a) no BatchNorm op left; the kernels and biases are new weights
    assert after.pass_report["fold_batchnorm"] == 2
    assert not any(k.startswith("FusedBatchNorm") or k in ("Rsqrt", "Mul")
                   for k in ops(after))
    assert sum("/folded_kernel" in w for w in after._traced.weights) == 2
    assert "fold_batchnorm x2" in after.summary(3)
    # (b) within the bound of the unfolded network
    tol = keras_tol(model, x, frac(), ring)
    want = model(x, training=False).numpy()
    # (the unfolded Dense case computes a private rsqrt, outside keras_tol's model)
    for private in (before, after) if case == "conv_depthwise" else (after,):
        got = private.predict(x, reveal=True).numpy()
        assert np.all(np.abs(got - want) <= tol), (np.abs(got - want).max(), tol.min())
    # (c) each BatchNorm was one private product per element of its output
    (r0, m0, c0), (r1, m1, c1) = bill(before, 3), bill(after, 3)
    bn_elems = sum(int(np.prod(layer.output_shape[1:])) * 3 for layer in model.layers
                   if isinstance(layer, L.BatchNormalization))
    if case == "conv_depthwise":
        assert (r0 - r1, m0 - m1, c0, c1) == (4, bn_elems, 0, 0)
    else:
        # Keras' unfused BatchNorm (rank-2 input) computed rsqrt(var + eps)
        # privately on the shared statistics: owner_constants computes it at
        # the model owner, fold_batchnorm then removes the x·a + b product.
        assert after.pass_report["owner_constants"] >= 2
        assert m1 < m0 - bn_elems and c1 == 0 < c0 and r1 < r0


# ------------------------------------------------------ ReLU after max-pool
def test_relu_after_maxpool(ring):
    model = seeded(lambda: tf.keras.Sequential([
        L.InputLayer((10, 10, 1)), L.Conv2D(2, 3, activation="relu"), L.MaxPooling2D(),
        L.Conv2D(2, 2, activation="relu"), L.MaxPooling2D(), L.Flatten(), L.Dense(2)]))
    x = np.random.default_rng(2).uniform(-2, 2, (2, 10, 10, 1)).astype(np.float32)
    before, after = both(lambda **kw: tp.keras.convert(model, **kw))
    # (a) BiasAdd -> Relu -> MaxPool became BiasAdd -> MaxPool -> Relu
    assert after.pass_report["relu_after_maxpool"] == 2
    nodes = {n.name: n for n in after._traced.graph_def.node}
    for n in nodes.values():
        if n.op == "MaxPool":
            assert nodes[n.input[0]].op == "BiasAdd"
        if n.op == "Relu":
            assert nodes[n.input[0]].op == "MaxPool"
    assert "relu_after_maxpool x2" in after.summary(2)
    # (b) max-pooling and ReLU commute; both orders have the same bound
    tol = keras_tol(model, x, frac(), ring)
    want = model(x).numpy()
    for private in (before, after):
        got = private.predict(x, reveal=True).numpy()
        assert np.all(np.abs(got - want) <= tol)
    # (c) the ReLUs compare (and multiply) the pooled tensors only: 4x fewer
    size = lambda kind: sum(int(np.prod(layer.output_shape[1:])) * 2  # noqa: E731
                            for layer in model.layers if isinstance(layer, kind))
    saved = size(L.Conv2D) - size(L.MaxPooling2D)
    (r0, m0, c0), (r1, m1, c1) = bill(before, 2), bill(after, 2)
    assert (r0, c0 - c1, m0 - m1) == (r1, saved, saved)


# ----------------------------------------------------- public products
@pytest.mark.parametrize("layer", ["dense", "conv2d"])
def test_public_weights_are_local_products_without_a_pass(ring, layer):
    model = seeded(lambda: tf.keras.Sequential(
        [L.InputLayer((5,)), L.Dense(3)] if layer == "dense" else
        [L.InputLayer((5, 5, 2)), L.Conv2D(3, 3)]))
    # the input shared (by default the data owner could compute the whole
    # public model itself: Policy.owner_side)
    private = tp.keras.convert(model, policy=tp.Policy(weights="public", owner_side=False))
    c = private.cost(4)
    assert (c.multiplications, c.comparisons) == (0, 0)
    # the pass is a documented no-op: the registry makes these products local
    traced = tp.converters.trace.trace(model)
    t, report = P.run(traced, tp.Policy(weights="public"), ["public_products"])
    assert report == {} and t.graph_def == traced.graph_def
    assert "public_products" not in private.pass_report
    x = np.random.default_rng(6).normal(size=(4,) + model.input_shape[1:]).astype(np.float32)
    got = private.predict(x, reveal=True).numpy()
    np.testing.assert_allclose(got, model(x).numpy(), atol=1e-3 if ring == 64 else 1e-4)


# ------------------------------------------------------ common factors
def test_factor_common(ring):
    @tf.function(input_signature=[S([4, 3])] * 3)
    def f(a, b, c):
        return a * b + a * c

    rng = np.random.default_rng(3)
    a, b, c = (rng.uniform(-2, 2, (4, 3)) for _ in range(3))
    before, after = both(lambda **kw: tp.convert(f, **kw))
    # (a) two products and a sum became a sum and one product
    assert after.pass_report["factor_common"] == 1
    assert ops(before) == {"Mul": 2, "AddV2": 1} and ops(after) == {"Mul": 1, "AddV2": 1}
    out = [n for n in after._traced.graph_def.node if n.op == "Mul"][0]
    assert sorted(n.op for n in after._traced.graph_def.node
                  if n.name in [i.split(":")[0] for i in out.input]) == ["AddV2", "Placeholder"]
    # (b) a·(b + c): one product of a and the (exact) sum of two encodings
    u = ulp(frac())
    tol = mul_tol(a, b + c, frac()) + np.abs(a) * u / 2
    want = a * b + a * c
    got = after.predict([v.astype(np.float32) for v in (a, b, c)], reveal=True).numpy()
    assert np.all(np.abs(got - want) <= tol + 1e-6 * np.abs(want))
    # (c) 12 multiplications and one product's rounds fewer
    (r0, m0, c0), (r1, m1, c1) = bill(before, 1), bill(after, 1)
    assert (m0, m1) == (24, 12) and r1 <= r0


# ----------------------------------------------------- sums of products
def test_sum_to_dot(ring):
    w = tf.Variable(np.linspace(-1, 1, 6).astype(np.float32))

    @tf.function(input_signature=[S([None, 6])])
    def weighted(x):
        return tf.reduce_sum(x * w, axis=-1)

    @tf.function(input_signature=[S([3, 5]), S([3, 5])])
    def rowdot(x, y):
        return tf.reduce_sum(x * y, axis=1, keepdims=True)

    rng = np.random.default_rng(4)
    x6, x, y = rng.uniform(-2, 2, (3, 6)), rng.uniform(-2, 2, (3, 5)), rng.uniform(-2, 2, (3, 5))
    for f, args, want, tol, dot in (
            (weighted, [x6], x6 @ w.numpy(), matmul_tol(x6, w.numpy()[:, None], frac())[:, 0],
             "MatMul"),
            (rowdot, [x, y], (x * y).sum(1, keepdims=True),
             np.array([matmul_tol(x[i:i + 1], y[i][:, None], frac())[0] for i in range(3)]),
             "BatchMatMulV2")):
        before, after = both(lambda **kw: tp.convert(f, **kw))
        # (a) Mul + Sum became one matrix product
        assert after.pass_report["sum_to_dot"] == 1
        assert ops(before) == {"Mul": 1, "Sum": 1}
        assert ops(after)[dot] == 1 and not {"Mul", "Sum"} & set(ops(after))
        # (b) one truncation of the sum instead of one per term
        got = after.predict([a.astype(np.float32) for a in args] if len(args) > 1
                            else args[0].astype(np.float32), reveal=True).numpy()
        assert got.shape == want.shape
        assert np.all(np.abs(got - want) <= tol + 1e-6 * np.abs(want))
        # (c) one multiplication per output element, not per term
        (r0, m0, _), (r1, m1, _) = bill(before, 3), bill(after, 3)
        assert (m0, m1) == (3 * args[0].shape[1], 3) and r1 <= r0


# ---------------------------------------------- batching of one depth
def test_batch_same_depth(ring):
    inp = tf.keras.Input((5,))
    model = seeded(lambda: tf.keras.Model(inp, L.Add()(
        [L.Dense(3, activation="relu")(inp), L.Dense(3, activation="relu")(inp)])))

    @tf.function(input_signature=[S([4, 3])] * 4)
    def products(x, y, u, v):
        return x * y + u * v + tf.where(x > u, x, u) + tf.where(y < v, y, v)

    rng = np.random.default_rng(5)
    xs = [rng.uniform(-2, 2, (4, 3)).astype(np.float32) for _ in range(4)]
    u = ulp(frac())
    # two independent ReLUs (a comparison, then a product), two independent
    # products and two comparisons: each pair becomes one protocol call
    for convert, args, kinds in (
            (lambda **kw: tp.keras.convert(model, **kw),
             rng.uniform(-2, 2, (4, 5)).astype(np.float32), {"relu"}),
            (lambda **kw: tp.convert(products, **kw), xs, {"multiply", "compare"})):
        before, after = both(convert)
        # (a) same graph; the independent nodes of one depth are one call
        assert ops(before) == ops(after)
        r0, m0, c0 = bill(before, 4)
        r1, m1, c1 = bill(after, 4)
        assert set(after._env.batched) == kinds
        assert all(n == 2 for _, n in after._env.batched.values())
        assert "batch_same_depth x1" in after.summary(4)
        # (c) the same work and the same critical path (independent calls
        # overlap in the one cost model: batching saves no round), fewer
        # messages: one call's per kind instead of two
        msg0, msg1 = before.cost(4).messages, after.cost(4).messages
        print(f"batch_same_depth {sorted(kinds)}: rounds {r0} -> {r1}, messages {msg0} -> {msg1}")
        assert (m0, c0) == (m1, c1) and r0 == r1 and msg1 < msg0
        # (b) the same arithmetic: differences are the randomised truncations
        a = before.predict(args, reveal=True).numpy().astype(np.float64)
        b = after.predict(args, reveal=True).numpy().astype(np.float64)
        assert np.all(np.abs(a - b) <= 2 * 2 * TRUNC_ULPS * u + 2 * u)


# ---------------------------------------------------------- selection
def test_passes_can_be_turned_off_one_by_one():
    assert P.resolve(None) == P.ALL_PASSES and P.resolve(False) == ()
    assert "fold_batchnorm" not in P.resolve({"fold_batchnorm": False})
    assert P.resolve(["sum_to_dot"]) == ("sum_to_dot",)
    with pytest.raises(ValueError, match="unknown pass"):
        P.resolve(["fold_bn"])
    model = randomize_batchnorm(seeded(lambda: tf.keras.Sequential([
        L.InputLayer((6, 6, 1)), L.Conv2D(2, 3, activation="relu"), L.MaxPooling2D(),
        L.Conv2D(2, 1), L.BatchNormalization()])))
    only_bn = tp.keras.convert(model, passes={"relu_after_maxpool": False})
    assert only_bn.pass_report == {"fold_batchnorm": 1}
    both_on = tp.keras.convert(model)
    assert "passes: fold_batchnorm x1, relu_after_maxpool x1" in both_on.summary()
    assert "passes: off" in tp.keras.convert(model, passes=False).summary()
