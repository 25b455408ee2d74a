"""Converted reference models on 1,000 real MNIST test digits (issue 10):
private predictions equal the plaintext Keras model's on at least 99.5 % of
them in both rings, and every logit is within the bound tests/tolerances.py
derives for the network (keras_tol). The models are trained once on the
4,000 shipped training digits and cached (tp.models.train)."""
import numpy as np
import pytest

import tf_privpy as tp
from tolerances import keras_tol

MODELS = ["logistic_regression", "ffnn", "lenet5", "lenet5_sigmoid", "lenet5_bn",
          "network_a", "network_b", "network_c", "network_d"]
N_TEST, BATCH = 1000, 100
AGREEMENT = 0.995


@pytest.fixture(scope="module")
def mnist():
    return tp.datasets.load_mnist(flatten=False)


def trained(name, mnist):
    (x, y), (xt, yt) = mnist
    if name == "logistic_regression":  # TF-Encrypted's task: 0-4 vs 5-9
        xb, yb = tp.datasets.mnist_binary(x.reshape(len(x), -1), y)
        return tp.models.train(name, xb, yb), xt.reshape(len(xt), -1)[:N_TEST]
    model = tp.models.train(name, x, y)
    return model, xt[:N_TEST].reshape((-1,) + model.input_shape[1:])


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_private_predictions_equal_plaintext(ring, mnist, name):
    model, x = trained(name, mnist)
    private = tp.keras.convert(model)
    got = np.concatenate([private.predict(x[i:i + BATCH], reveal=True).numpy()
                          for i in range(0, len(x), BATCH)])
    want = model.predict(x, verbose=0)
    if got.shape[-1] == 1:
        agree = np.mean((got[:, 0] > 0.5) == (want[:, 0] > 0.5))
    else:
        agree = np.mean(got.argmax(-1) == want.argmax(-1))
    assert agree >= AGREEMENT, f"{name}: {agree:.2%} of predictions equal"
    cfg = tp.get_runtime().config
    tol = np.concatenate([keras_tol(model, x[i:i + BATCH], cfg.frac_bits, ring)
                          for i in range(0, len(x), BATCH)])
    over = np.abs(got - want) > tol
    assert not over.any(), (f"{name}: {over.sum()} logits outside the bound; worst "
                            f"{np.abs(got - want)[over].max():.2e}")
