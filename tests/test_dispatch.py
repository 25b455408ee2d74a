"""TF functions on PrivateTensors, tried as a new user would (issue 9): each
one that has a private implementation works and matches plaintext TF at the
tolerances of tests/tolerances.py; every other one fails with a TypeError
naming the TF function."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import case_fixtures, run
from tf_privpy.protocols.mpc.api import dispatch
from tolerances import (FUNCTION_TOL, composed_tol, encode_tol, linear_tol, matmul_tol,
                        mul_tol, public_mul_tol, select_tol)

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])


def frac():
    return tp.get_runtime().config.frac_bits


def close(got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want)
    assert not (err > tol).any(), f"max error {err.max():.3g} > tol {np.min(tol):.3g}"


def grid(x):
    """x rounded to the fixed-point grid: the errors measured are the op's own."""
    u = 2.0 ** -frac()
    return np.round(np.asarray(x, np.float64) / u) * u


def share64(a):
    return tp.share(tf.constant(a, tf.float64))


def test_conv2d(case, rng):
    ring, mode = case.ring, case.mode
    x, w = rng.normal(0, 1, (2, 5, 5, 3)), rng.normal(0, 1, (3, 3, 3, 4))
    px, pw = share64(x), share64(w)
    got = run(mode, lambda a, b: tf.nn.conv2d(a, b, 1, "SAME"), px, pw)
    assert isinstance(got, tp.PrivateTensor)
    k = 3 * 3 * 3  # terms per output
    tol = matmul_tol(np.full((1, k), np.abs(x).max()), np.full((k, 1), np.abs(w).max()), frac())
    close(got.reveal(), tf.nn.conv2d(x, w, 1, "SAME"), tol)
    # a public filter: local
    close(tf.nn.conv2d(px, w, 2, "VALID").reveal(), tf.nn.conv2d(x, w, 2, "VALID"),
          k * public_mul_tol(np.abs(x).max(), np.abs(w).max(), frac()))


def test_bias_add(case, rng):
    ring, mode = case.ring, case.mode
    x, b = rng.normal(0, 3, (2, 4, 4, 3)), rng.normal(0, 3, (3,))
    got = run(mode, lambda a: tf.nn.bias_add(a, b), share64(x))
    close(got.reveal(), tf.nn.bias_add(x, b), linear_tol(frac()))
    xc = rng.normal(0, 3, (2, 3, 4, 4))
    close(tf.nn.bias_add(share64(xc), share64(b), data_format="NCHW").reveal(),
          tf.nn.bias_add(xc, b, data_format="NCHW"), linear_tol(frac()))
    with pytest.raises(ValueError, match="channels"):
        tf.nn.bias_add(share64(x), np.ones(4))


def test_avg_pool2d(case, rng):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 2, (2, 6, 6, 3))
    got = run(mode, lambda a: tf.nn.avg_pool2d(a, 2, 2, "VALID"), share64(x))
    # 4 encoded terms summed, then one local product by the public 1/4
    tol = linear_tol(frac(), 4) / 4 + public_mul_tol(4 * np.abs(x).max(), 0.25, frac(),
                                                     frac() + 20)
    close(got.reveal(), tf.nn.avg_pool2d(x, 2, 2, "VALID"), tol)


def test_square(case, rng):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 10, (3, 4))
    got = run(mode, tf.math.square, share64(x))
    close(got.reveal(), np.square(x), mul_tol(x, x, frac()))


def test_clip_by_value(case, rng):
    ring, mode = case.ring, case.mode
    x = grid(rng.uniform(-3, 3, (4, 5)))
    got = run(mode, lambda a: tf.clip_by_value(a, -1.0, 1.5), share64(x))
    assert got.dtype == tf.float64
    close(got.reveal(), tf.clip_by_value(x, -1.0, 1.5), select_tol(2, frac()))


def test_softplus(ring_case, rng):
    ring = ring_case.ring
    x = grid(np.concatenate([rng.uniform(-20, 20, 60), [0.0, -1e-3, 1e-3, 25.0, -25.0]]))
    got = tf.nn.softplus(share64(x)).reveal()
    tol = composed_tol(ring, frac(), 2, levels=2)
    close(got, tf.nn.softplus(x), tol)
    close(tp.nn.softplus(share64(x)).reveal(), tf.nn.softplus(x), tol)


def test_sigmoid_cross_entropy_with_logits(ring_case, rng):
    ring = ring_case.ring
    logits = grid(rng.uniform(-12, 12, (4, 6)))
    labels = grid(rng.uniform(0, 1, (4, 6)))
    want = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    tol = composed_tol(ring, frac(), 2, levels=2) + mul_tol(logits, labels, frac())
    got = tf.nn.sigmoid_cross_entropy_with_logits(labels=share64(labels),
                                                  logits=share64(logits))
    close(got.reveal(), want, tol)
    public_labels = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=share64(logits))
    close(public_labels.reveal(), want, tol)


def test_integer_powers(case, rng):
    ring, mode = case.ring, case.mode
    x = grid(rng.uniform(-3, 3, (5,)))
    p = share64(x)
    u = 2.0 ** -frac()
    close(run(mode, lambda a: a ** 2, p).reveal(), x ** 2, mul_tol(x, x, frac()))
    # x^3 = x^2 · x: the error of x^2 scaled by |x|, plus one more product
    e2 = mul_tol(x, x, frac())
    close(run(mode, lambda a: a ** 3, p).reveal(), x ** 3,
          np.abs(x) * e2 + mul_tol(x ** 2, x, frac()) + e2 * u)
    close(tf.math.pow(p, 2).reveal(), x ** 2, mul_tol(x, x, frac()))
    close((p ** 0).reveal(), np.ones(5), 0)
    close((p ** 1).reveal(), x, 0)


def test_non_integer_power_says_what_to_use():
    p = tp.share([4.0])
    with pytest.raises(ValueError, match=r"tp\.sqrt"):
        p ** 0.5
    with pytest.raises(ValueError, match=r"tp\.math\.rsqrt"):
        p ** -0.5
    with pytest.raises(TypeError, match="private exponent"):
        2.0 ** p


def test_max_pool_default_data_format(case, rng):
    ring, mode = case.ring, case.mode
    x = grid(rng.normal(0, 2, (2, 4, 4, 3)))
    got = run(mode, lambda a: tf.nn.max_pool(a, 2, 2, "VALID"), share64(x))
    close(got.reveal(), tf.nn.max_pool(x, 2, 2, "VALID"), select_tol(2, frac()))


def test_keras_sigmoid(ring_case, rng):
    ring = ring_case.ring
    x = grid(rng.uniform(-8, 8, (3, 4)))
    p = share64(x)
    got = tf.keras.activations.sigmoid(p)
    assert isinstance(got, tp.PrivateTensor)
    close(got.reveal(), tf.sigmoid(x), FUNCTION_TOL[ring])
    # Keras tags activation outputs with their logits: allowed, nothing else is.
    out = tf.sigmoid(p)
    out._keras_logits = p
    assert out._keras_logits is p
    with pytest.raises(AttributeError):
        out.share0 = p.share0


def test_keras_dense_layer_activations():
    x = tp.share([[1.0, -2.0]])
    close(tf.keras.activations.relu(x).reveal(), [[1.0, 0.0]], select_tol(1, frac()))
    close(tf.keras.activations.linear(x).reveal(), [[1.0, -2.0]], encode_tol(frac()))
    with pytest.raises(ValueError, match="alpha"):
        tf.keras.activations.relu(x, alpha=0.1)


@pytest.mark.parametrize("fn,name", [(tf.math.cumprod, "tf.math.cumprod"),
                                     (tf.linalg.det, "tf.linalg.det"),
                                     (tf.math.log1p, "tf.math.log1p")])
def test_unsupported_tf_function_names_itself(fn, name):
    x = tp.share([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match=name.replace(".", r"\.") + " is not supported"):
        fn(x)


def test_unsupported_message_names_the_tp_equivalent():
    msg = dispatch.unsupported_message("tf.compat.v1.reshape")
    assert "tf.compat.v1.reshape" in msg and "tp.reshape" in msg


def test_no_silent_conversion_to_a_plaintext_tensor():
    x = tp.share([1.0, 2.0])
    with pytest.raises(TypeError, match="tf.convert_to_tensor: .* cannot be converted to a "
                                        "plaintext"):
        tf.convert_to_tensor(x)
    # raw ops do not dispatch: they meet the conversion function
    with pytest.raises(TypeError, match=r"PrivateTensor \(shape \(2,\)\) cannot be converted"):
        tf.raw_ops.Cumprod(x=x, axis=0)
    with pytest.raises(TypeError):
        tf.constant(1.0) + tf.cast(x, tf.float32)


def test_dispatched_apis_keep_working_on_plain_tensors():
    a = tf.constant([[1.0, -2.0]])
    np.testing.assert_allclose(tf.nn.softplus(a), np.log1p(np.exp([[1.0, -2.0]])), rtol=1e-6)
    np.testing.assert_allclose(tf.math.cumprod(a, axis=1), [[1.0, -2.0]])
    np.testing.assert_allclose(tf.nn.max_pool(tf.ones([1, 2, 2, 1]), 2, 2, "VALID"),
                               np.ones((1, 1, 1, 1)))
