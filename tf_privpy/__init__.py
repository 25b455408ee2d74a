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

from tf_privpy import nn  # noqa: E402
from tf_privpy import tp_math as math  # noqa: E402
from tf_privpy.compare_ops import (abs, argmax, argmin, equal, garble_comparisons,  # noqa: E402,A004
                                   greater, greater_equal, less, less_equal, logical_not, maximum,
                                   minimum, not_equal, reduce_max, reduce_min, sign, sort,
                                   where)
from tf_privpy.array_ops import (broadcast_to, concat, expand_dims, gather, pad, repeat,
                                 reshape, squeeze, stack, tile, transpose)
from tf_privpy.math_fns import divide, exp, sigmoid, sqrt, tanh  # noqa: E402
from tf_privpy.math_ops import (add, dot, matmul, multiply, multiply_many, negative,
                                outer, reduce_mean, reduce_sum, reveal, share, subtract,
                                tensordot)
from tf_privpy.private_tensor import PrivateTensor
from tf_privpy.protocols import Config
from tf_privpy.protocols.loader import OpLibraryError
from tf_privpy.runtime import client_devices, get_runtime, init, is_initialized, reset, servers
from tf_privpy.stats import Stats, stats
from tf_privpy import dispatch as _dispatch
from tf_privpy import datasets, federated, he  # noqa: E402

_dispatch.register()

__version__ = "0.1.0"

__all__ = [
    "abs", "argmax", "argmin", "equal", "garble_comparisons", "greater", "greater_equal", "less", "less_equal",
    "logical_not", "math", "maximum", "minimum", "not_equal", "reduce_max", "reduce_min",
    "sign", "sort", "where", "exp", "sigmoid", "sqrt", "tanh",
    "client_devices", "datasets", "federated", "he",
    "Config", "OpLibraryError", "PrivateTensor", "add", "broadcast_to", "concat", "divide",
    "dot", "expand_dims", "gather", "get_runtime", "init", "is_initialized", "matmul",
    "multiply", "multiply_many", "negative", "nn", "outer", "pad", "reduce_mean",
    "reduce_sum", "repeat", "reset", "reshape", "reveal", "servers", "share", "squeeze",
    "stack", "Stats", "stats", "subtract", "tensordot", "tile", "transpose",
]
