"""tp.math: the tf.math-style namespace of tf_privpy, from the op registry
(protocols/mpc/api/registry.py; list: docs/supported_ops.md).

Example:
  >>> tp.math.log(tp.share([1.0, 10.0])).reveal()   # [0., 2.30259]
"""
from tf_privpy.protocols.mpc.api import registry as _registry

globals().update(_registry.namespace("math"))
__all__ = sorted(_registry.namespace("math"))
