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


def convert_training(model: tf.keras.Model, loss, optimizer, policy: Optional[Policy] = None,
                     name: Optional[str] = None, passes=None
                     ) -> "_conv.PrivateTrainer":
    """Private training of a built Keras model (DESIGN §8 "Training").

    One training step (forward, loss, tf.GradientTape gradients, the
    optimizer's update) is traced as a tf.function at the batch's
    shape and rewritten like inference, the gradient ops (MatMul with
    transposes, BiasAddGrad, ReluGrad, SigmoidGrad, TanhGrad,
    SoftmaxCrossEntropyWithLogits, Conv2DBackprop* at any stride, ...) through
    their adapters. The weights and the optimizer's slots are shared once,
    into tp.Variables on S1 and S2, and each step assigns their new shares:
    they stay private from step to step. Every node that cannot be
    converted is reported at once in a tp.UnsupportedOpError, here, before
    anything is shared: from an analysis of the traced step and a dry run
    (the private step traced at batch 1 on shared zeros, never run; the
    protocols of exp, log, divide, sigmoid, tanh, which refuse nothing, are
    left out of it).

    Args:
      model: a built tf.keras.Model.
      loss: a Keras loss (instance or name): BinaryCrossentropy on a sigmoid
        output (differentiated in its gradient form (p − y)/n, the
        loss_gradient_form pass), Categorical/SparseCategoricalCrossentropy
        from logits (or on a softmax output), MeanSquaredError, ...
      optimizer: tf.keras.optimizers.SGD (learning rate, optional momentum,
        Nesterov) or its legacy version, or tf.keras.optimizers.Adam
        (amsgrad=True for AMSGrad; private moments, public bias
        corrections, a public floor under the denominator:
        converters/optimizers.py); jit_compile is turned off. Any other
        optimizer or option (clipping, weight decay, EMA) is refused with a
        ValueError before anything is traced.
      policy: Policy(inputs="private"|"public"); weights are always private.
        Policy(numerics_mode="fast") trains with the fast sigmoid and softmax
        (docs/numerics.md, "Fast mode"; benchmarks/training_modes.py); Adam
        needs the exact mode.
      passes: the trace-level passes (converters/training.py): None for all
        (default: "loss_gradient_form", "loss_scale"), or a list of names;
        () differentiates the loss exactly as traced.

    Example:
      >>> model = tp.models.network_a()
      >>> trainer = tp.keras.convert_training(
      ...     model, tf.keras.losses.CategoricalCrossentropy(from_logits=True),
      ...     tf.keras.optimizers.SGD(0.05))
      >>> for xb, yb in batches:
      ...     trainer.step(xb, yb)                 # one traced tf.function per step
      >>> weights = trainer.weights(reveal=True)   # plaintext, to the client
      >>> trainer.predictor().predict(x_test, reveal=True)
    """
    return _conv.convert_training(model, loss, optimizer, policy, name, passes)
