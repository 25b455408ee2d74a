"""Keras models to private inference: `tp.keras.convert` (DESIGN §8).

Example:
  >>> import tf_privpy as tp
  >>> tp.init()
  >>> model = tp.models.lenet5()                   # any built Keras model
  >>> private = tp.keras.convert(model)            # weights shared once
  >>> private.predict(images, reveal=True)         # one traced tf.function
"""
from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from tf_privpy import converters as _conv
from tf_privpy.converters import PrivateModel, Policy, UnsupportedOpError  # noqa: F401


def convert(model: tf.keras.Model, policy: Optional[Policy] = None,
            input_signature: Optional[Sequence[tf.TensorSpec]] = None,
            passes=None) -> PrivateModel:
    """A private version of a built Keras model, for inference.

    The model is traced with training=False (Dropout is the identity,
    BatchNormalization uses its moving statistics, which the model owner
    folds into one scale and offset before sharing), frozen, and rewritten
    into private computation on the servers. Every layer that cannot be
    converted is reported at once in a tp.UnsupportedOpError before anything
    is shared or run.

    Args:
      model: a built tf.keras.Model (Sequential or functional).
      policy: which values are private (default: inputs and weights,
        `tp.converters.Policy`).
      input_signature: optional TensorSpecs overriding the model's inputs.
      passes: optimizer passes (tp.converters.passes, DESIGN §8): None for
        all (default), False for none, a list of pass names, or a dict
        {name: False} turning some off.
    """
    if not isinstance(model, tf.keras.Model):
        raise TypeError(f"tp.keras.convert takes a tf.keras.Model, got {type(model).__name__}; "
                        "for a function use tp.convert(fn, input_signature)")
    return _conv.convert(model, input_signature, policy, name=model.name,
                         passes=passes)
