"""The graph-rewriting converter (DESIGN §8): every Keras layer of the
coverage list converts and predicts what Keras predicts within the bound
tests/tolerances.py derives for the network, every unsupported node is
reported at once, predict is one traced tf.function, and the cost bill
equals what a run sends."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.bitwise import protocol as bitwise
from kerasutil import randomize_batchnorm, seeded
from tolerances import (attention_tol, einsum_tol, gelu_exact_tol, gelu_tanh_tol, keras_tol,
                        mha_tol, one_hot_gather_tol)
from conftest import session_ring_fixture

L = tf.keras.layers
#: ring cases in the session's runtime of their ring, not a tp.init() each
ring = session_ring_fixture()


IMG = (6, 6, 2)
SEQUENTIAL = {
    "dense_linear": lambda: [L.InputLayer((5,)), L.Dense(4)],
    "dense_relu": lambda: [L.InputLayer((5,)), L.Dense(4, activation="relu")],
    "dense_sigmoid": lambda: [L.InputLayer((5,)), L.Dense(3, activation="sigmoid")],
    "dense_tanh": lambda: [L.InputLayer((5,)), L.Dense(3, activation="tanh")],
    "dense_softmax": lambda: [L.InputLayer((5,)), L.Dense(3, activation="softmax")],
    "activation_layers": lambda: [L.InputLayer((5,)), L.Dense(4), L.ReLU(),
                                  L.Dense(4), L.Activation("sigmoid"), L.Dense(3),
                                  L.Activation("linear")],
    "conv2d": lambda: [L.InputLayer(IMG), L.Conv2D(3, 3, activation="relu")],
    "conv2d_same_strided": lambda: [L.InputLayer(IMG), L.Conv2D(2, 3, strides=2,
                                                                padding="same")],
    "depthwise_conv2d": lambda: [L.InputLayer(IMG), L.DepthwiseConv2D(3, depth_multiplier=2)],
    "max_pool": lambda: [L.InputLayer(IMG), L.MaxPooling2D()],
    "avg_pool": lambda: [L.InputLayer(IMG), L.AveragePooling2D()],
    "global_avg_pool": lambda: [L.InputLayer(IMG), L.GlobalAveragePooling2D()],
    "global_max_pool": lambda: [L.InputLayer(IMG), L.GlobalMaxPooling2D()],
    "flatten_dense": lambda: [L.InputLayer(IMG), L.Flatten(), L.Dense(3)],
    "reshape": lambda: [L.InputLayer((12,)), L.Reshape((3, 4)), L.Flatten()],
    "zero_padding": lambda: [L.InputLayer(IMG), L.ZeroPadding2D(1), L.Conv2D(2, 3)],
    "batchnorm": lambda: [L.InputLayer(IMG), L.Conv2D(3, 3), L.BatchNormalization()],
    "dropout": lambda: [L.InputLayer((5,)), L.Dense(4), L.Dropout(0.5), L.Dense(2)],
    "rescaling": lambda: [L.InputLayer((5,)), L.Rescaling(1 / 255.0, offset=-0.5),
                          L.Dense(2)],
    # issue 27: its Shape -> Prod -> Fill run as plain TF, its batch-statistics
    # BatchNorm privately
    "layer_norm": lambda: [L.InputLayer((5,)), L.Dense(6), L.LayerNormalization(
        gamma_initializer="random_uniform", beta_initializer="random_uniform")],
    "layer_norm_image": lambda: [L.InputLayer(IMG), L.Conv2D(3, 3), L.LayerNormalization()],
    "conv1d": lambda: [L.InputLayer((6, 2)), L.Conv1D(3, 2, activation="relu")],
    "global_max_pool_1d": lambda: [L.InputLayer((6, 2)), L.GlobalMaxPooling1D()],
    "conv2d_transpose": lambda: [L.InputLayer((3, 3, 2)), L.Conv2DTranspose(2, 2, strides=2)],
    "softmax_inner_axis": lambda: [L.InputLayer((3, 4)), L.Softmax(axis=1)],
}


@pytest.mark.parametrize("case", sorted(SEQUENTIAL))
def test_layer_coverage(ring, case):
    model = randomize_batchnorm(seeded(lambda: tf.keras.Sequential(SEQUENTIAL[case]())))
    shape = model.input_shape[1:]
    lo, hi = (0, 255) if case == "rescaling" else (-2, 2)
    x = np.random.default_rng(1).uniform(lo, hi, (3,) + shape).astype(np.float32)
    # every layer on shares: by default the layers on the raw input would run
    # at the data owner (Policy.owner_side, tests/test_converter_owner.py)
    private = tp.keras.convert(model, policy=tp.Policy(owner_side=False))
    got = private.predict(x, reveal=True).numpy()
    want = model(x, training=False).numpy()
    cfg = tp.get_runtime().config
    tol = keras_tol(model, x, cfg.frac_bits, ring)
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= tol), (np.abs(got - want).max(), tol.min())


@pytest.mark.parametrize("case", ["batchnorm", "avg_pool", "rescaling", "conv2d"])
def test_two_runs_differ_by_their_truncations_only(case):
    """Two predicts of one converted model on one input (fresh masks each)
    differ by at most twice keras_tol(encoded=True): the bound
    tests/test_distributed_models.py uses between embedded and distributed
    runs, here on the layers LeNet-5 does not have."""
    model = randomize_batchnorm(seeded(lambda: tf.keras.Sequential(SEQUENTIAL[case]())))
    lo, hi = (0, 255) if case == "rescaling" else (-2, 2)
    x = np.random.default_rng(1).uniform(lo, hi, (3,) + model.input_shape[1:])
    private = tp.keras.convert(model, policy=tp.Policy(owner_side=False))   # all on shares
    a, b = (private.predict(x.astype(np.float32), reveal=True).numpy() for _ in range(2))
    cfg = tp.get_runtime().config
    runs = keras_tol(model, x, cfg.frac_bits, cfg.ring_bits, encoded=True)
    assert np.all(np.abs(a - b) <= 2 * runs), (np.abs(a - b).max(), runs.min())
    # the truncations are part of what keras_tol bounds against plaintext
    assert np.all(runs <= keras_tol(model, x, cfg.frac_bits, cfg.ring_bits))


def functional(kind):
    inp = tf.keras.Input((5,))
    a = L.Dense(3, activation="relu")(inp)
    b = L.Dense(3)(inp)
    merged = L.Add()([a, b]) if kind == "add" else L.Concatenate()([a, b])
    return tf.keras.Model(inp, L.Dense(2)(merged)), (a, b)


@pytest.mark.parametrize("kind", ["add", "concatenate"])
def test_functional_merges(ring, kind):
    model, _ = seeded(lambda: functional(kind))
    x = np.random.default_rng(2).uniform(-2, 2, (4, 5)).astype(np.float32)
    got = tp.keras.convert(model).predict(x, reveal=True).numpy()
    want = model(x).numpy()
    # Each branch is a Dense layer (bounded as in keras_tol), merged without
    # rounding, then one more Dense layer.
    branches = [tf.keras.Sequential([L.InputLayer((5,)), model.layers[i]]) for i in (1, 2)]
    cfg = tp.get_runtime().config
    errs = [keras_tol(b, x, cfg.frac_bits, ring) for b in branches]
    mid = errs[0] + errs[1] if kind == "add" else np.concatenate(errs, -1)
    merged = model.layers[3](
        [b(x) for b in branches]).numpy()
    head = model.layers[4]
    u = 2.0 ** -cfg.frac_bits
    w = np.abs(head.kernel.numpy())
    bound = mid @ w + (np.abs(merged) @ np.ones_like(w) + np.ones_like(merged) @ w) * u / 2 \
        + w.shape[0] * u * u / 4 + 2 * u + u / 2
    assert np.all(np.abs(got - want) <= bound)


def test_public_subgraphs_run_as_plain_tf():
    """Nodes that see only public values (a private value's shape and what
    is computed from it, constants) run as the TF op they are: nothing to
    refuse, and the summary lists them apart (issue 27; before, Prod and
    Fill on a Shape were refused as "no private implementation": seen with
    Keras's LayerNormalization)."""
    @tf.function
    def fn(x):
        n = tf.cast(tf.reduce_prod(tf.shape(x)), tf.float32)      # Shape -> Prod -> Cast
        row = tf.fill(tf.shape(x)[1:], 0.5) * tf.cast(tf.size(x) + tf.rank(x), tf.float32)
        return x * n + row
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3)).astype(np.float32)
    private = tp.convert(fn, [tf.TensorSpec(x.shape, tf.float32)],
                         policy=tp.Policy(owner_side=False))   # x * n on shares
    np.testing.assert_allclose(private.predict(x, reveal=True).numpy(), fn(x).numpy(),
                               atol=2 * 6 * 2.0 ** -tp.get_runtime().config.frac_bits)
    lines = {ln.split(":")[0].strip(): ln for ln in private.summary().splitlines()}
    public = lines["public, run as plain TF"]
    assert "Prod x1" in public and "Fill x1" in public and "Cast x" in public, public
    assert "Prod" not in lines["TF ops"], lines["TF ops"]


def test_embedding_on_private_token_ids(ring):
    """Keras Embedding (issue 27: before, a crash deep in predict). Ids the
    data owner gives in plaintext: the owner shares their one-hot and the
    servers multiply it by the private table (Policy.owner_side, no
    comparisons; tests/test_converter_owner.py). Ids given as a
    PrivateTensor: an oblivious lookup, the one-hot of each id by private
    equalities (integer bits, 2 comparisons each, in the bill) times the
    private table without truncation, so each output is the weight's
    encoding; an id outside the table gives a row of zeros."""
    vocab, dim = 7, 4
    model = seeded(lambda: tf.keras.Sequential([L.InputLayer((3,), dtype=tf.int32),
                                                L.Embedding(vocab, dim)]))
    ids = np.array([[1, 3, 0], [6, 2, 4]], np.int32)
    private = tp.keras.convert(model)
    tol = one_hot_gather_tol(tp.get_runtime().config.frac_bits)
    got = private.predict(ids, reveal=True).numpy()
    assert np.abs(got - model(ids).numpy()).max() <= tol
    assert private.cost(2).comparisons == 0
    oblivious = tp.keras.convert(model, policy=tp.Policy(owner_side=False))
    assert oblivious.cost(2).comparisons == 2 * ids.size * vocab
    got = private.predict(tp.share(ids), reveal=True).numpy()
    assert np.abs(got - model(ids).numpy()).max() <= tol
    shared = tp.share(np.array([[vocab, 5, 5], [0, 0, 0]], np.int32))   # one id out of range
    got = private.predict(shared, reveal=True).numpy()
    assert not got[0, 0].any()
    table = model.layers[0].embeddings.numpy()
    assert np.abs(got[1] - table[[0, 0, 0]]).max() <= tol


def test_gather_by_private_indices_along_an_inner_axis():
    """tf.gather(params, ids, axis=1) with both private: TF's output order
    (params' leading axes, the indices', the rest)."""
    fn = tf.function(lambda p, i: tf.gather(p, i, axis=1))
    p = np.random.default_rng(1).normal(size=(2, 5, 3)).astype(np.float32)
    i = np.array([[4, 0], [1, 1], [3, 2]], np.int32)
    private = tp.convert(fn, [tf.TensorSpec(p.shape, tf.float32),
                              tf.TensorSpec(i.shape, tf.int32)])
    u = 2.0 ** -tp.get_runtime().config.frac_bits
    got = private.predict([p, i], reveal=True).numpy()
    assert got.shape == (2, 3, 2, 3)
    assert np.abs(got - fn(p, i).numpy()).max() <= u / 2 + 2 * u


def test_multi_head_attention_self_attention(ring):
    """Keras MultiHeadAttention (issue 27: its Einsum nodes were refused):
    the converted layer predicts what Keras predicts within mha_tol, a
    bound built step by step from the einsums, the public scaling and the
    softmax (tests/tolerances.py)."""
    inp = tf.keras.Input((4, 6))
    layer = L.MultiHeadAttention(num_heads=2, key_dim=3)
    model = seeded(lambda: tf.keras.Model(inp, layer(inp, inp)))
    x = np.random.default_rng(5).uniform(-1, 1, (2, 4, 6)).astype(np.float32)
    got = tp.keras.convert(model).predict(x, reveal=True).numpy()
    cfg = tp.get_runtime().config
    tol = mha_tol(layer, x, cfg.frac_bits, ring)
    assert np.all(np.abs(got - model(x).numpy()) <= tol), (np.abs(got - model(x).numpy()).max(),
                                                           tol.min())


def test_multi_head_attention_causal_mask(ring):
    """use_causal_mask=True: Keras adds (1 - mask) * -1e9, far outside the
    fixed-point range; converters/masks.py brings it to -B/4, where our
    softmax's exp is exactly 0, as Keras's is. Within mha_tol with the mask;
    the mask itself is public (shapes only) and runs as plain TF."""
    inp = tf.keras.Input((4, 6))
    layer = L.MultiHeadAttention(num_heads=2, key_dim=3)
    model = seeded(lambda: tf.keras.Model(inp, layer(inp, inp, use_causal_mask=True)))
    x = np.random.default_rng(7).uniform(-1, 1, (2, 4, 6)).astype(np.float32)
    got = tp.keras.convert(model).predict(x, reveal=True).numpy()
    cfg = tp.get_runtime().config
    tol = mha_tol(layer, x, cfg.frac_bits, ring, mask=np.tril(np.ones((4, 4), bool)))
    err = np.abs(got - model(x).numpy())
    assert np.all(err <= tol), (err.max(), tol.min())


def test_multi_head_attention_mask_input(ring):
    """attention_mask as a model input (bool [B, T, S]): the data owner
    turns its mask into the additive term before sharing (owner-side, the
    default policy); a mask already shared (a PrivateTensor of 0/1 ints)
    and Policy(owner_side=False) (the bool input shared as integer bits)
    compute it on shares. All within mha_tol with the mask."""
    inp, mask_in = tf.keras.Input((4, 6)), tf.keras.Input((4, 4), dtype=tf.bool)
    layer = L.MultiHeadAttention(num_heads=2, key_dim=3)
    model = seeded(lambda: tf.keras.Model([inp, mask_in],
                                          layer(inp, inp, attention_mask=mask_in)))
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (2, 4, 6)).astype(np.float32)
    mask = rng.uniform(size=(2, 4, 4)) > 0.4
    mask[:, :, 0] = True                    # every row attends somewhere
    want = model([x, mask]).numpy()
    tol = mha_tol(layer, x, tp.get_runtime().config.frac_bits, ring, mask=mask)
    owner = tp.keras.convert(model)
    runs = [owner.predict([x, mask], reveal=True),
            owner.predict([x, tp.share(mask.astype(np.int32))], reveal=True),
            tp.keras.convert(model, policy=tp.Policy(owner_side=False)).predict(
                [x, mask], reveal=True)]
    for got in runs:
        err = np.abs(got.numpy() - want)
        assert np.all(err <= tol), (err.max(), tol.min())


@pytest.mark.parametrize("use_scale,causal", [(False, False), (True, True)])
def test_attention_layer(ring, use_scale, causal):
    """Keras Attention([query, value]) (Luong dot scores; key = value):
    private batch matmuls, the private scale weight, the softmax with the
    causal mask brought into range; within attention_tol."""
    q_in, v_in = tf.keras.Input((3, 4)), tf.keras.Input((5, 4))
    layer = L.Attention(use_scale=use_scale)
    model = seeded(lambda: tf.keras.Model([q_in, v_in],
                                          layer([q_in, v_in], use_causal_mask=causal)))
    if use_scale:
        layer.scale.assign(1.7)   # Keras starts it at 1: a product that changes nothing
    rng = np.random.default_rng(8)
    q = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    v = rng.uniform(-1, 1, (2, 5, 4)).astype(np.float32)
    got = tp.keras.convert(model).predict([q, v], reveal=True).numpy()
    cfg = tp.get_runtime().config
    mask = np.tril(np.ones((3, 5), bool)) if causal else None
    tol = attention_tol(q, v, 1.7 if use_scale else None, cfg.frac_bits, ring, mask=mask)
    err = np.abs(got - model([q, v]).numpy())
    assert np.all(err <= tol), (err.max(), tol.min())


@pytest.mark.parametrize("eq,sa,sb", [
    ("abc,cde->abde", (2, 3, 4), (4, 2, 3)), ("aecd,abcd->acbe", (2, 3, 2, 4), (2, 5, 2, 4)),
    ("acbe,aecd->abcd", (2, 2, 5, 3), (2, 3, 2, 4)), ("abcd,cde->abe", (2, 3, 2, 4), (2, 4, 5)),
    ("ij,jk->ki", (3, 4), (4, 2)), ("ijk,jl->il", (2, 3, 4), (3, 5))])
def test_einsum_equations(eq, sa, sb):
    """The Einsum adapter against tf.einsum: MultiHeadAttention's four
    equations, a transposed output, an axis summed away before the product;
    within einsum_tol of the encoded operands."""
    rng = np.random.default_rng(len(eq))
    a, b = rng.uniform(-2, 2, sa).astype(np.float32), rng.uniform(-2, 2, sb).astype(np.float32)
    fn = tf.function(lambda x, y: tf.einsum(eq, x, y))
    private = tp.convert(fn, [tf.TensorSpec(sa, tf.float32), tf.TensorSpec(sb, tf.float32)])
    u = 2.0 ** -tp.get_runtime().config.frac_bits
    want = np.einsum(eq, a.astype(np.float64), b.astype(np.float64))
    tol = einsum_tol(eq, a, u / 2, b, u / 2, tp.get_runtime().config.frac_bits)
    assert np.all(np.abs(private.predict([a, b], reveal=True).numpy() - want) <= tol + 1e-6)
    with pytest.raises(tp.UnsupportedOpError, match="ellipsis"):
        tp.convert(tf.function(lambda x, y: tf.einsum("...c,cd->...d", x, y)),
                   [tf.TensorSpec((2, 3), tf.float32), tf.TensorSpec((3, 2), tf.float32)])


def test_upsampling_is_exact():
    """UpSampling2D and tf.image.resize "nearest" (ResizeNearestNeighbor,
    also at a ratio that is not an integer): local gathers, exact."""
    model = seeded(lambda: tf.keras.Sequential([L.InputLayer((3, 4, 2)), L.UpSampling2D(2)]))
    x = np.random.default_rng(6).uniform(-2, 2, (1, 3, 4, 2)).astype(np.float32)
    px = tp.share(x)
    np.testing.assert_array_equal(tp.keras.convert(model).predict(px, reveal=True).numpy(),
                                  tp.reveal(px).numpy().repeat(2, 1).repeat(2, 2))
    for ac, hp in ((False, True), (False, False), (True, False)):
        fn = tf.function(lambda v: tf.compat.v1.image.resize_nearest_neighbor(
            v, [5, 7], align_corners=ac, half_pixel_centers=hp))
        got = tp.convert(fn, [tf.TensorSpec(x.shape, tf.float32)]).predict(px, reveal=True)
        np.testing.assert_array_equal(got.numpy(), fn(tp.reveal(px)).numpy())


def test_gelu_both_forms(ring):
    """GELU's tanh form (tf.nn.gelu(approximate=True): Pow, products by
    constants, Tanh) within gelu_tanh_tol, and its exact form (Erf, a
    piecewise polynomial like tanh) within gelu_exact_tol, on [-5, 5]."""
    x = np.linspace(-5, 5, 61, dtype=np.float32).reshape(1, -1)
    spec = [tf.TensorSpec(x.shape, tf.float32)]
    cfg = tp.get_runtime().config
    for approximate, bound in ((True, gelu_tanh_tol), (False, gelu_exact_tol)):
        fn = tf.function(lambda v: tf.nn.gelu(v, approximate=approximate))
        got = tp.convert(fn, spec, policy=tp.Policy(owner_side=False)).predict(
            x, reveal=True).numpy()     # on shares, not at the data owner
        err = np.abs(got - fn(x).numpy())
        assert np.all(err <= bound(x, cfg.frac_bits, ring)), (approximate, err.max())


def test_tp_gelu_and_tf_gelu_on_a_private_tensor(ring):
    """tp.nn.gelu (and tf.nn.gelu dispatched on a PrivateTensor) composes
    the same steps as the converted graph, in another order (x + x·erf,
    then the public 1/2), within the same bounds on [-5, 5]."""
    x = np.linspace(-5, 5, 61)
    cfg = tp.get_runtime().config
    for approximate, bound in ((True, gelu_tanh_tol), (False, gelu_exact_tol)):
        want = tf.nn.gelu(x, approximate=approximate).numpy()
        for got in (tp.nn.gelu(tp.share(x), approximate=approximate),
                    tf.nn.gelu(tp.share(x), approximate=approximate)):
            err = np.abs(tp.reveal(got).numpy() - want)
            assert np.all(err <= bound(x, cfg.frac_bits, ring)), (approximate, err.max())


def test_layer_norm_with_a_small_epsilon_is_refused():
    """rsqrt's domain starts at 1e-3: a smaller epsilon would leave a
    constant row outside it, so the conversion refuses, saying what to do.
    (Keras runs epsilons below 1.001e-5 unfused: Mean, SquaredDifference,
    Rsqrt, each converted on its own.)"""
    model = seeded(lambda: tf.keras.Sequential([L.InputLayer((4,)),
                                                L.LayerNormalization(epsilon=1e-4)]))
    # on the raw input it would run at the data owner (Policy.owner_side)
    with pytest.raises(tp.UnsupportedOpError, match="epsilon >= 0.001"):
        tp.keras.convert(model, policy=tp.Policy(owner_side=False))


def test_every_unsupported_node_in_one_error():
    inp = tf.keras.Input((4,))
    h = L.Dense(4)(inp)
    h = L.Lambda(lambda t: tf.math.cumsum(t, axis=-1), name="running_total")(h)
    h = L.Lambda(lambda t: tf.math.lgamma(t), name="lgamma_layer")(h)
    model = tf.keras.Model(inp, L.Dense(2)(h))
    with pytest.raises(tp.UnsupportedOpError) as e:
        tp.keras.convert(model)
    msg = str(e.value)
    assert len(e.value.problems) == 2
    assert "[Cumsum]" in msg and "running_total" in msg
    assert "[Lgamma]" in msg and "lgamma_layer" in msg and "What to do" in msg


def test_private_cond_becomes_a_select(ring):
    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x):
        return tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x * 3.0 - 1.0)

    # on shares (by default the data owner would compute it all: below)
    private = tp.convert(f, policy=tp.Policy(owner_side=False))
    at_owner = tp.convert(f)
    u = 2.0 ** -tp.get_runtime().config.frac_bits
    for v in ([1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]):
        x = np.array(v, np.float32)
        got = private.predict(x, reveal=True).numpy()
        np.testing.assert_allclose(got, f(x).numpy(), atol=1e-3 if ring == 64 else 1e-5)
        got = at_owner.predict(x, reveal=True).numpy()   # f(x) exactly, then encoded
        np.testing.assert_allclose(got, f(x).numpy(), atol=u)
    # both branches run and one comparison selects: the bill shows it
    assert private.cost().comparisons == 1
    assert (at_owner.cost().comparisons, at_owner.cost().multiplications) == (0, 0)
    # with a public input the same function runs in the clear
    out = tp.convert(f, policy=tp.Policy(inputs="public", weights="public")).predict(
        np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_allclose(out.numpy(), [2.0, 4.0, 6.0])


def test_private_loop_is_refused_with_what_to_do():
    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x):
        return tf.while_loop(lambda v: tf.reduce_sum(v) < 100.0, lambda v: v * 2.0, [x])[0]

    with pytest.raises(tp.UnsupportedOpError, match="loop.*tp.reveal"):
        tp.convert(f)


def test_tf_function_with_where_converts(ring):
    w = tf.Variable(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def f(x):
        y = tf.matmul(x, w)
        return tf.where(y > 0.0, y, 0.1 * y)

    x = np.random.default_rng(4).uniform(-1, 1, (5, 4)).astype(np.float32)
    got = tp.convert(f).predict(x, reveal=True).numpy()
    np.testing.assert_allclose(got, f(x).numpy(), atol=1e-3 if ring == 64 else 1e-5)


def test_predict_is_one_traced_function_and_cost_equals_a_run(ring):
    model = seeded(lambda: tf.keras.Sequential([
        L.InputLayer((6, 6, 1)), L.Conv2D(2, 3, activation="relu"), L.MaxPooling2D(),
        L.Flatten(), L.Dense(3, activation="softmax")]))
    private = tp.keras.convert(model)
    x = np.random.default_rng(5).normal(size=(2, 6, 6, 1)).astype(np.float32)
    private.predict(x)
    with tp.stats() as s:
        private.predict(x)
        private.predict(x)
    assert private._fn.experimental_get_tracing_count() == 1
    bill = private.cost(batch_size=2)
    # cost() after a predict of that batch reads the trace's bill (no second
    # trace of the model); a fresh trace declares the same bill
    assert private._fn.experimental_get_tracing_count() == 1
    assert private._bill(2, private._env) == bill and bill is not private.cost(batch_size=2)
    assert (s.rounds, s.multiplications, s.comparisons) == (
        2 * bill.rounds, 2 * bill.multiplications, 2 * bill.comparisons)
    assert s.links == {k: (2 * m, 2 * b) for k, (m, b) in bill.links.items()}
    assert "cost of one predict (batch 2)" in private.summary(batch_size=2)


def test_the_policy_chooses_the_comparison_family(ring):
    """Policy(comparison=...): the converted model's comparisons (ReLU,
    max-pooling, argmax) run in that family whatever the runtime's default;
    both give the same predictions, the bills differ as the families do."""
    model = seeded(lambda: tf.keras.Sequential([
        L.InputLayer((6, 6, 1)), L.Conv2D(2, 3, activation="relu"), L.MaxPooling2D(),
        L.Flatten(), L.Dense(3)]))
    x = np.random.default_rng(7).normal(size=(2, 6, 6, 1)).astype(np.float32)
    out, bills = {}, {}
    for family in ("garbled", "bitwise"):
        private = tp.keras.convert(model, policy=tp.Policy(comparison=family))
        bills[family] = private.cost(batch_size=2)
        private.predict(x)   # traced once (the weights are shared then)
        with tp.stats() as s:
            y = private.predict(x)
        out[family] = tp.reveal(y).numpy()
        assert s.links == {k: tuple(v) for k, v in bills[family].links.items()}
    cfg = tp.get_runtime().config    # both exact: they differ by the truncations only
    runs = keras_tol(model, x, cfg.frac_bits, cfg.ring_bits, encoded=True)
    assert np.all(np.abs(out["garbled"] - out["bitwise"]) <= 2 * runs)
    assert bills["bitwise"].bytes < bills["garbled"].bytes / 5
    assert ("S1", "S2") in bills["bitwise"].links and ("S1", "S2") not in bills["garbled"].links
    with pytest.raises(ValueError, match="Policy.comparison must be"):
        tp.Policy(comparison="fss")


def test_public_weights_are_local_products(ring):
    model = seeded(lambda: tf.keras.Sequential([L.InputLayer((5,)), L.Dense(3)]))
    # public weights with the input shared (by default the data owner could
    # compute the whole public model itself: Policy.owner_side)
    private = tp.keras.convert(model, policy=tp.Policy(weights="public", owner_side=False))
    assert private.cost(4).multiplications == 0
    x = np.random.default_rng(6).normal(size=(4, 5)).astype(np.float32)
    got = private.predict(x, reveal=True).numpy()
    np.testing.assert_allclose(got, model(x).numpy(), atol=1e-3 if ring == 64 else 1e-5)


def test_rewritten_graph_is_placed_on_the_servers():
    model = seeded(lambda: tf.keras.Sequential([L.InputLayer((4,)), L.Dense(3,
                                                                           activation="relu")]))
    graph = tp.keras.convert(model).graph(batch_size=2)
    devices = {n.device for n in graph.node if n.op.startswith("TfPrivpy>")}
    servers = tp.servers()
    assert {servers[p] for p in ("S1", "S2", "T1", "T2")} <= devices


def test_bad_input_is_refused_clearly():
    model = seeded(lambda: tf.keras.Sequential([L.InputLayer((4,)), L.Dense(2)]))
    private = tp.keras.convert(model)
    with pytest.raises(ValueError, match="shape"):
        private.predict(np.zeros((2, 5), np.float32))
    with pytest.raises(TypeError, match="tf.keras.Model"):
        tp.keras.convert(lambda x: x)


@pytest.mark.slow
def test_command_line_prints_summary_and_every_unsupported_node(tmp_path, monkeypatch,
                                                               capsys):
    import os
    import runpy
    import subprocess
    import sys
    good = tf.keras.Sequential([L.InputLayer((4,)), L.Dense(3, activation="relu"), L.Dense(2)])
    bad = tf.keras.Sequential([L.InputLayer((4,)), L.Dense(3, activation="elu"),
                               L.Dense(2, activation="selu")])
    good.save(tmp_path / "good.keras")
    bad.save(tmp_path / "bad.keras")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    run = lambda p, *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "tf_privpy.convert", str(p), *a], env=env,
        capture_output=True, text=True, timeout=300)
    r = run(tmp_path / "good.keras", "--batch-size", "10")
    assert r.returncode == 0, r.stderr
    # rounds: the client's input shares 1, Dense 2, the ReLU's comparison
    # (the default bitwise family's 8, its select's product beside them:
    # bitwise/selects.py), Dense 2
    rounds = 1 + 2 + bitwise.BITWISE_ROUNDS + 2
    assert f"cost of one predict (batch 10): {rounds} rounds, 80 multiplications, " \
        "30 comparisons" in r.stdout
    # the refusal path in this process (runpy runs the module as __main__, as
    # `python -m` does): a second process only repeated TensorFlow's import
    # (issue 25); its exit status is the SystemExit code sys.exit(main()) raises
    monkeypatch.setattr(sys, "argv", ["tf_privpy.convert", str(tmp_path / "bad.keras")])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("tf_privpy.convert", run_name="__main__", alter_sys=True)
    err = capsys.readouterr().err
    assert exited.value.code == 1
    assert "[Elu]" in err and "[Selu]" in err and "2 node(s)" in err
