"""tf_privpy: privacy-preserving machine learning inside TensorFlow.

Private tensors are TF values secret-shared between two servers (S1, S2) and
computed on with PrivPy's four-server protocols (assistants T1, T2), every
protocol step a C++ kernel on its own TF device.

Example:
  >>> import tf_privpy as tp
  >>> tp.init()                                   # before any other TF op
  >>> x = tp.share([[1.0, 2.0]]); w = tp.share([[0.5], [0.25]])
  >>> tp.reveal(x @ w)
  <tf.Tensor: shape=(1, 1), dtype=float32, numpy=array([[1.]], dtype=float32)>
"""
from tf_privpy.protocols import loader as _loader

# Load the op library now: a missing library, or one built for another
# TensorFlow, fails the import with the command that rebuilds it.
_loader.load_library()

from tf_privpy.protocols.mpc.api import registry as _registry  # noqa: E402
from tf_privpy.protocols.mpc.api import dispatch as _dispatch  # noqa: E402
from tf_privpy.protocols.mpc.runtime import calling as _calling  # noqa: E402
from tf_privpy.protocols.mpc.runtime import placement as _placement  # noqa: E402

# Every op function (tp.matmul, tp.exp, ...) comes from the op registry.
globals().update(_registry.namespace(""))

from tf_privpy import nn  # noqa: E402
from tf_privpy import tp_math as math  # noqa: E402
from tf_privpy.protocols import Config  # noqa: E402
from tf_privpy.protocols.loader import OpLibraryError  # noqa: E402
from tf_privpy.protocols.mpc.api.value import PrivateTensor  # noqa: E402
from tf_privpy.protocols.mpc.api.control_flow import cond  # noqa: E402
from tf_privpy.protocols.mpc.runtime.calling import function  # noqa: E402
from tf_privpy.protocols.mpc.runtime.placement import PlacementError  # noqa: E402
from tf_privpy.protocols.mpc.api.variable import PrivateVariable as Variable  # noqa: E402
from tf_privpy.protocols.mpc.api.checkpoint import (  # noqa: E402
    CheckpointError, restore_variables, save_variables)
from tf_privpy.runtime import (check_servers, client_devices, comparison, get_runtime, init,  # noqa: E402
                               is_initialized, reset, servers)
from tf_privpy.distributed import ClusterError, ServerError  # noqa: E402
from tf_privpy.stats import Stats, cost, stats  # noqa: E402
from tf_privpy import profiling  # noqa: E402
from tf_privpy.profiling import ProfileError, profile  # noqa: E402
from tf_privpy import datasets, federated, he, models  # noqa: E402
from tf_privpy import converters, keras  # noqa: E402
from tf_privpy.share_io import load, publish  # noqa: E402
from tf_privpy.large import LargeArray, LargeArrayError, share_to_disk  # noqa: E402
from tf_privpy.converters import Policy, UnsupportedOpError  # noqa: E402


def convert(fn, input_signature=None, policy=None, passes=None):
    """A private version of a tf.function (or a Keras model): traced with
    `input_signature`, frozen and rewritten (see tp.keras.convert).

    Example:
      >>> f = tf.function(lambda x: tf.nn.relu(x @ w + b))
      >>> private = tp.convert(f, [tf.TensorSpec([None, 4], tf.float32)])
      >>> private.predict(x, reveal=True)
    """
    return converters.convert(fn, input_signature, policy, passes=passes)



def __getattr__(name):
    # tp.client (the data owners' side of the share service) is imported on
    # first use: importing the service with tf_privpy would make `python -m
    # tf_privpy.deploy.service.server` run a second copy of the server module.
    if name == "client":
        from tf_privpy.deploy.service import client
        return client
    raise AttributeError(f"module 'tf_privpy' has no attribute {name!r}")


_dispatch.register()
# tf_privpy is graph code: AutoGraph converting it only cost tracing time.
_calling.exclude_from_autograph()
# A small share captured by a tf.function must not be copied to the driver.
_placement.capture_shares_by_reference()

__version__ = "0.1.0"

__all__ = sorted(list(_registry.namespace("")) + [
    "CheckpointError", "ClusterError", "Config", "PlacementError", "cond", "OpLibraryError",
    "Policy", "PrivateTensor",
    "ServerError", "UnsupportedOpError", "Variable", "check_servers", "client", "client_devices",
    "comparison",
    "converters", "convert", "datasets",
    "federated", "function", "keras", "get_runtime", "he", "init", "is_initialized",
    "LargeArray", "LargeArrayError", "load", "math",
    "models", "nn", "ProfileError", "profile", "profiling", "publish", "reset",
    "restore_variables", "save_variables", "servers", "share_to_disk", "Stats", "cost",
    "stats"])
