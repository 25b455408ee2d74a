"""Helpers shared by the converter tests: reproducible Keras models."""
import numpy as np
import tensorflow as tf


def seeded(build):
    """build() with Keras' initializers seeded: the same weights every run."""
    tf.keras.utils.set_random_seed(7)
    return build()


def randomize_batchnorm(model):
    """Gives every BatchNormalization non-trivial statistics (a fresh layer is
    the identity, which would hide a wrong fold)."""
    rng = np.random.default_rng(3)
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            g, b, m, v = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, g.shape), rng.normal(0, 0.5, b.shape),
                               rng.normal(0, 0.5, m.shape), rng.uniform(0.5, 2.0, v.shape)])
    return model
