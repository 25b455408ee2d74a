"""Converted reference models on real MNIST test digits (issue 10): every
logit of the private prediction is within the bound tests/tolerances.py
derives for the network (keras_tol), in both rings, and the private
classes equal Keras' on at least 99.5 % of the digits. The models
are trained once (tests/zoo.py) on the 4,000 shipped training digits,
shared with tests/test_models.py's accuracy checks.

The bound is per logit, so N_TEST digits check it as 1,000 did; the suite
used 1,000 digits (10 predicts per case) until issue 25: at 50 (one
predict; about 5 of each class), 99.5 % agreement means every digit agrees."""
import numpy as np
import pytest

import tf_privpy as tp
import zoo
from tolerances import keras_tol

MODELS = ["logistic_regression", "ffnn", "lenet5", "lenet5_sigmoid", "lenet5_bn",
          "network_a", "network_b", "network_c", "network_d"]
N_TEST, BATCH = 50, 50
AGREEMENT = 0.995


@pytest.fixture(scope="module")
def plaintext(tmp_path_factory):
    """name -> (model, test digits, Keras' outputs): each model trained (or
    loaded from the zoo's folder) and run in plaintext once for both rings."""
    (train, test), seen = zoo.mnist(), {}

    def get(name):
        if name not in seen:
            model = zoo.trained(name, tmp_path_factory, train)
            x = zoo.data(name, test)[0][:N_TEST]
            x = x.reshape((-1,) + model.input_shape[1:])  # FFNN, network A: flat
            seen[name] = model, x, model.predict(x, verbose=0)
        return seen[name]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_private_predictions_equal_plaintext(ring, plaintext, name):
    model, x, want = plaintext(name)
    private = tp.keras.convert(model)
    got = np.concatenate([private.predict(x[i:i + BATCH], reveal=True).numpy()
                          for i in range(0, len(x), BATCH)])
    cfg = tp.get_runtime().config
    tol = np.concatenate([keras_tol(model, x[i:i + BATCH], cfg.frac_bits, ring)
                          for i in range(0, len(x), BATCH)])
    over = np.abs(got - want) > tol
    assert not over.any(), (f"{name}: {over.sum()} logits outside the bound; worst "
                            f"{np.abs(got - want)[over].max():.2e}")
    if got.shape[-1] == 1:
        same = (got[:, 0] > 0.5) == (want[:, 0] > 0.5)
    else:
        same = got.argmax(-1) == want.argmax(-1)
    agree = np.mean(same)
    assert agree >= AGREEMENT, f"{name}: {agree:.2%} of predictions equal"
