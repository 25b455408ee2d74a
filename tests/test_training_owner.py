"""Owner-side inputs in training (issue 27): under Policy(owner_side=True),
the default, what a training step computes from the data owner's x or y
alone (a Rescaling, a Flatten, the labels' cast) runs at the owner, in plain
TF on the client, before anything is shared (converters/training.owner_plan,
converters/owner.py); only what a private node reads is shared.

Checked in both rings: one step within the bound of tests/tolerances_training.py
(the owner's float32 rescaled input is what is shared, so the bound starts
there), the rescaling's op on the client device (with Policy(owner_side=False),
the variant that computes it on shares, the same check fails: it is run
below), the summary and the bill's saving, and a PrivateTensor input, which
is private as it is."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import session_ring_fixture
from tolerances_training import OPTIMIZER_RRMSE_TOL, dense_sgd_step_tol

L = tf.keras.layers
LR = 0.1
ring = session_ring_fixture()


def _model():
    tf.keras.utils.set_random_seed(11)
    return tf.keras.Sequential([L.InputLayer((4, 4, 1)), L.Rescaling(1 / 255.0, offset=-0.5),
                                L.Flatten(), L.Dense(3)])


def _batch(n=8, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, 4, 4, 1)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, n)]
    return x, y


def _loss():
    return tf.keras.losses.CategoricalCrossentropy(from_logits=True)


def _float64_step(x_rescaled, y, w, b):
    """One SGD step of the Dense layer in float64 from the owner's float32
    rescaled input (what is shared): Keras' own gradient of the same loss."""
    w, b = tf.Variable(w.astype(np.float64)), tf.Variable(b.astype(np.float64))
    xs = tf.constant(x_rescaled.reshape(len(x_rescaled), -1), tf.float64)
    with tf.GradientTape() as tape:
        value = _loss()(tf.constant(y, tf.float64), xs @ w + b)
    gw, gb = tape.gradient(value, [w, b])
    return [w.numpy() - LR * gw.numpy(), b.numpy() - LR * gb.numpy()]


def _on_client(trainer, batch: int) -> list:
    """The converted step's nodes of the Rescaling's multiplication that run
    as plain TF on the client device."""
    client = tp.get_runtime().runtime.device("client")
    return [n for n in trainer.graph(batch).node
            if n.op == "Mul" and "rescaling" in n.name and n.device == client]


def test_owner_side_step_within_its_bound(ring):
    model = _model()
    x, y = _batch()
    w0, b0 = model.get_weights()
    trainer = tp.keras.convert_training(model, _loss(), tf.keras.optimizers.SGD(LR))
    trainer.step(x, y)
    got = trainer.weights(reveal=True)
    # the owner's value: Keras' float32 rescaling of its own data
    x_rescaled = (x * np.float32(1 / 255.0) + np.float32(-0.5)).astype(np.float32)
    want = _float64_step(x_rescaled, y, w0, b0)
    frac = tp.get_runtime().config.frac_bits
    tol = dense_sgd_step_tol(x_rescaled.reshape(len(x), -1), y, [(w0, b0)], ["linear"], "cce",
                             float(np.float32(LR)), frac, ring)
    for g, w, t, init in zip(got, want, tol, (w0, b0)):
        assert np.all(np.abs(g - w) <= t), (np.abs(g - w).max(), t.max())
        assert np.abs(w - init).max() > 2 * t.max()   # the step moved the weights


def test_the_owner_computes_its_part_on_the_client(ring):
    """The Rescaling runs at the owner, on the client; Policy(owner_side=False)
    (everything on shares) is the variant the check must catch."""
    x, y = _batch()
    on = tp.keras.convert_training(_model(), _loss(), tf.keras.optimizers.SGD(LR))
    assert _on_client(on, len(x)), "the owner's rescaling is not on the client"
    off = tp.keras.convert_training(_model(), _loss(), tf.keras.optimizers.SGD(LR),
                                    policy=tp.Policy(owner_side=False))
    assert not _on_client(off, len(x))   # the check can fail: here it computes on shares
    summary = on.summary(len(x))
    assert "owner-side (run by the data owner before sharing): " in summary
    line = next(s for s in summary.splitlines() if "owner-side" in s)
    assert "Mul x1" in line and "AddV2 x1" in line and "Reshape" in line, line
    assert "owner-side: off" in off.summary(len(x))
    saved = on.owner_saving(len(x))
    assert set(saved) == {"rounds", "multiplications", "comparisons", "messages", "bytes"}
    assert all(v >= 0 for v in saved.values()), saved
    assert off.owner_saving(len(x)) == dict.fromkeys(saved, 0)
    # the same step either way, within the fixed-point encoding
    on.step(x, y)
    off.step(x, y)
    for a, b in zip(on.weights(reveal=True), off.weights(reveal=True)):
        assert np.abs(a - b).max() < 1e-4


def test_a_private_input_is_not_the_owners(ring):
    """A PrivateTensor x is private as it is: the rescaling runs on shares
    (nothing of it on the client) and the step is the plain input's."""
    x, y = _batch()
    a = tp.keras.convert_training(_model(), _loss(), tf.keras.optimizers.SGD(LR))
    b = tp.keras.convert_training(_model(), _loss(), tf.keras.optimizers.SGD(LR))
    a.step(x, y)
    b.step(tp.share(x), y)
    for u, v in zip(a.weights(reveal=True), b.weights(reveal=True)):
        assert np.abs(u - v).max() < 1e-4


def test_the_owners_values_are_never_written_into_public_state(ring):
    """BatchNormalization on the input: its moving statistics would be the
    owner's data written into public variables, refused as a private value
    is (before the refusal counted owner-side updates, this converted)."""
    model = tf.keras.Sequential([L.InputLayer((5,)), L.BatchNormalization(), L.Dense(2)])
    with pytest.raises(tp.UnsupportedOpError, match="written into the public variable"):
        tp.keras.convert_training(model, tf.keras.losses.MeanSquaredError(),
                                  tf.keras.optimizers.SGD(LR))


# ------------------------------------------------------------ Embedding
def _embedding_model(dtype="float32"):
    tf.keras.utils.set_random_seed(3)
    return tf.keras.Sequential([L.InputLayer((5,), dtype="int32"), L.Embedding(20, 4, dtype=dtype),
                                L.Flatten(dtype=dtype), L.Dense(3, dtype=dtype)])


def _id_batches(steps, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, 20, (16, 5)).astype(np.int32), rng.integers(0, 3, 16).astype(np.int32))
            for _ in range(steps)]


def _sparse_loss():
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _rrmse(got, want) -> float:
    g = np.concatenate([np.ravel(a) for a in got])
    w = np.concatenate([np.ravel(a) for a in want])
    return float(np.sqrt(np.mean((g - w) ** 2)) / np.sqrt(np.mean(w ** 2)))


def test_embedding_trains_by_the_owners_one_hot(ring):
    """An Embedding on the owner's token ids trains: the lookup is the
    owner's one-hot times the private table and the table's gradient the
    transposed one-hot times the rows' gradients (Keras' sparse update made
    dense: every row updated, none named to the servers). 20 SGD steps
    against the same training in float64 Keras, within the SGD budget of
    OPTIMIZER_RRMSE_TOL (measured 8.2e-6 / 9.0e-6 in the 128-bit ring and
    1.4e-4 / 1.7e-4 in the 64-bit one)."""
    batches = _id_batches(20)
    model = _embedding_model()
    ref = _embedding_model("float64")
    ref.set_weights([w.astype(np.float64) for w in model.get_weights()])
    w0 = model.get_weights()
    trainer = tp.keras.convert_training(model, _sparse_loss(), tf.keras.optimizers.SGD(0.5))
    summary = trainer.summary(16)
    assert "one-hot for ResourceGather x1" in summary and \
        "one-hot for UnsortedSegmentSum x1" in summary, summary
    assert "needed: Policy(owner_side=False) cannot convert" in summary
    # no gather of private rows by ids and no scatter at ids in the converted step
    ops = {n.op for n in trainer.graph(16).node}
    assert not ops & {"ResourceGather", "GatherV2", "ResourceScatterAdd", "Unique"}, ops
    opt = tf.keras.optimizers.SGD(0.5)

    @tf.function
    def plain_step(x, y):
        with tf.GradientTape() as tape:
            value = _sparse_loss()(y, ref(x, training=True))
        opt.apply_gradients(zip(tape.gradient(value, ref.trainable_variables),
                                ref.trainable_variables))

    for x, y in batches:
        trainer.step(x, y)
        plain_step(x, y)
    err = _rrmse(trainer.weights(reveal=True), ref.get_weights())
    tol = OPTIMIZER_RRMSE_TOL["sgd"][ring]
    assert err <= tol, (err, tol)
    assert _rrmse(w0, ref.get_weights()) > 100 * tol   # the training moved the weights


def test_embedding_training_refuses_what_it_cannot_do(ring):
    """An id outside the table raises at the owner (as Keras on CPU) and the
    weights stay as they were; ids given as a PrivateTensor (no owner to
    make the one-hot) are refused before anything runs; so is the step
    without owner-side computing (Policy(owner_side=False))."""
    x, y = _id_batches(1)[0]
    trainer = tp.keras.convert_training(_embedding_model(), _sparse_loss(),
                                        tf.keras.optimizers.SGD(0.5))
    before = trainer.weights(reveal=True)
    bad = x.copy()
    bad[0, 0] = 20
    with pytest.raises(tf.errors.InvalidArgumentError, match="checked by the data owner"):
        trainer.step(bad, y)
    for a, b in zip(trainer.weights(reveal=True), before):
        assert np.array_equal(a, b)
    with pytest.raises(tp.UnsupportedOpError, match="ResourceGather"):
        trainer.step(tp.share(x.astype(np.float64)), y)
    with pytest.raises(tp.UnsupportedOpError, match="ResourceGather"):
        tp.keras.convert_training(_embedding_model(), _sparse_loss(),
                                  tf.keras.optimizers.SGD(0.5),
                                  policy=tp.Policy(owner_side=False))
