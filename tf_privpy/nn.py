"""tp.nn: neural-network ops on PrivateTensors, from the op registry
(protocols/mpc/api/registry.py; list: docs/supported_ops.md).

Example:
  >>> tp.nn.relu(tp.share([-1.0, 2.0])).reveal()   # [0., 2.]
"""
from tf_privpy.protocols.mpc.api import registry as _registry

globals().update(_registry.namespace("nn"))
__all__ = sorted(_registry.namespace("nn"))
