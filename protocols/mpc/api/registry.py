"""The op registry: ONE table from op name and TF op type to private
implementation (DESIGN §2, "Op registry").

Each row (an OpDef, opdef.py) records a private op: its tp name ("matmul",
"nn.relu"), the TF op types the converter maps to it ("MatMul",
"BatchMatMulV2") with the converter's adapter of their nodes (adapters.py),
the TF Python APIs that dispatch to it (tf.linalg.matmul, with an argument
adapter), the implementation (ops/), a one-line doc, its cost, a small
example, and the domain and tolerance it is computed on. Converter-only rows
(impl None) name the TF op types the converter accepts that have no tp
function: the gradient, loss and bookkeeping ops of a training step
(grad_adapters.py) and fused or composite forward ops (FusedBatchNormV3,
Relu6, LeakyRelu, DepthwiseConv2dNative). The tp.* functions, the TF
dispatchers (dispatch.py), the converter (converters/rewrite.py) and the
generated supported-ops table (tools/gen_supported_ops.py) all read this
table; nothing above it re-implements an op.

A new derived function is its implementation (ops/math_fns.py) and its row
here (adapter=A.unary(name, moded=True) for a one-input function), then
`make docs` regenerates docs/supported_ops.md.

Importing this module also attaches PrivateTensor's operators, so that the
value type (value.py) needs no op module.

Example:
  >>> op = registry.get("matmul")
  >>> registry.by_tf_op("BatchMatMulV2") is op
  True
  >>> op.cost(registry.Private((2, 3)), registry.Private((3, 4))).rounds
  2
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import tensorflow as tf

from . import adapters as A
from ..runtime import context, cost
from . import grad_adapters as G
from . import layer_adapters as LA
from . import sequence_adapters as SA
from .ops import array_ops, compare_ops, math_fns, math_ops, nn
from .opdef import (Adapter, Example, OpDef, Private, TFApi, accepting_variables,  # noqa: F401
                    api_name, by_tf_op, converter_row, converter_rows, find, get, namespace,
                    ops, private_spec, register, sample, tf_apis, tf_op_types, trace_cost)
from .value import PrivateTensor
from .variable import PrivateVariable


def _garble_cost(shape) -> cost.Cost:
    """The setup phase sends each assistant its half of the tables (offline)."""
    n = cost._elems(shape)
    c = cost.Cost(rounds=1)
    for t, k in (("T1", n // 2), ("T2", n - n // 2)):
        c.send("S1", t, k * (cost.GC_TABLE_BYTES + cost.GC_DECODE_BYTES))
    return c


def _prepare_cost(shape) -> cost.Cost:
    """The set-up phase of the comparison family the runtime runs now."""
    return context.get_handle().backend.prepare_cost(shape)


def _ex(*args, **kwargs) -> Callable[[], Example]:
    return lambda: Example(args, kwargs)


def _api(api, *dispatch_on, **kw) -> TFApi:
    return TFApi(api, dispatch_on, **kw)


X23, Y23 = Private((2, 3)), Private((2, 3))
POS = Private((2, 3), 0.5, 4.0)
IMG = Private((1, 4, 4, 2))
_keras = tf.keras.activations


def _unary(api, **kw):
    return _api(api, "x", **kw)


def _binary(api, **kw):
    return _api(api, "x", "y", **kw)


def _keras_relu(x, alpha=0.0, max_value=None, threshold=0.0):
    if alpha != 0.0 or max_value is not None or threshold != 0.0:
        raise ValueError("tf.keras.activations.relu on PrivateTensors supports the plain "
                         "ReLU only (alpha=0, max_value=None, threshold=0)")
    return compare_ops.relu(x)


def _matmul(a, b, transpose_a, transpose_b, adjoint_a, adjoint_b, a_is_sparse, b_is_sparse,
            output_type, name):
    if output_type is not None:
        raise ValueError("tf.linalg.matmul: output_type is not supported on PrivateTensors")
    return math_ops.matmul(a, b, transpose_a or adjoint_a, transpose_b or adjoint_b, name)


def _pool(impl):
    def adapter(input, ksize, strides, padding, data_format, name):  # noqa: A002
        return impl(input, ksize, strides, padding, data_format or "NHWC", name)
    return adapter


def _reveal_cost(x: Private) -> cost.Cost:
    return cost.reveal_cost(x.shape, context.get_handle().config.ring_bits)


_TABLE = [
    # --------------------------------------------------------- sharing
    OpDef("share", math_ops.share, "Secret-shares a public tensor between S1 and S2.",
          _ex(np.ones((2, 3), np.float32))),
    OpDef("reveal", math_ops.reveal, "Reconstructs a PrivateTensor on the client.",
          _ex(X23), cost_fn=_reveal_cost),
    # -------------------------------------------------------- arithmetic
    OpDef("add", math_ops.add, "x + y with broadcasting; local.", _ex(X23, Y23),
          ("Add", "AddV2"), (_binary(tf.math.add),), ("math.add",),
          adapter=A.binary("add")),
    OpDef("subtract", math_ops.subtract, "x - y with broadcasting; local.", _ex(X23, Y23),
          ("Sub",), (_binary(tf.math.subtract),), ("math.subtract",),
          adapter=A.binary("subtract")),
    OpDef("negative", math_ops.negative, "-x; local.", _ex(X23), ("Neg",),
          (_unary(tf.math.negative),), ("math.negative",),
          adapter=A.unary("negative")),
    OpDef("multiply", math_ops.multiply, "Elementwise x * y (one multiplication if both private).",
          _ex(X23, Y23), ("Mul",), (_binary(tf.math.multiply),), ("math.multiply",),
          adapter=A.binary("multiply"), tolerance=1e-5),
    OpDef("multiply_many", math_ops.multiply_many,
          "Independent private products in one protocol call.", _ex([(X23, Y23), (X23, Y23)]),
          tolerance=1e-5),
    OpDef("square", math_ops.square, "x * x (one multiplication).", _ex(X23), ("Square",),
          (_unary(tf.math.square),), ("math.square",),
          adapter=A.unary("square"), tolerance=1e-5),
    OpDef("pow", math_fns.pow, "x ** n for a public integer n, by square-and-multiply.",
          _ex(X23, 3), ("Pow",), (_binary(tf.math.pow),), ("math.pow",),
          adapter=A.power, domain='public integer n >= 0', tolerance=5e-5),
    OpDef("matmul", math_ops.matmul, "Matrix product (batch dimensions broadcast).",
          _ex(Private((2, 3)), Private((3, 4))), ("MatMul", "BatchMatMul", "BatchMatMulV2"),
          (_api(tf.linalg.matmul, "a", "b", adapter=_matmul),),
          adapter=A.matmul, tolerance=1e-5),
    OpDef("tensordot", math_ops.tensordot, "Sum over given axes, as one matrix product.",
          _ex(Private((2, 3)), Private((3, 4)), 1), (), (_api(tf.tensordot, "a", "b"),),
          tolerance=1e-5),
    OpDef("dot", math_ops.dot, "numpy.dot semantics.", _ex(Private((3,)), Private((3,))),
          tolerance=1e-5),
    OpDef("outer", math_ops.outer, "Outer product as one [n,1] @ [1,m] matmul.",
          _ex(Private((3,)), Private((2,))),
          tolerance=1e-5),
    OpDef("reduce_sum", math_ops.reduce_sum, "Sum over axes; local.", _ex(X23, 1), ("Sum",),
          (_api(tf.math.reduce_sum, "input_tensor", rename={"input_tensor": "x"}),),
          ("math.reduce_sum",),
          adapter=A.reduction("reduce_sum")),
    OpDef("reduce_mean", math_ops.reduce_mean, "Mean over axes: a local sum times 1/n.",
          _ex(X23, 1), ("Mean",),
          (_api(tf.math.reduce_mean, "input_tensor", rename={"input_tensor": "x"}),),
          ("math.reduce_mean",),
          adapter=A.reduction("reduce_mean"), tolerance=1e-5),
    OpDef("divide", math_fns.divide, "x / y: local for a public y, Goldschmidt for a private y.",
          _ex(X23, POS), ("RealDiv",),
          (_binary(tf.math.divide), _binary(tf.math.truediv)), ("math.divide",),
          adapter=A.binary("divide", moded=True), domain='x in [-10, 10], |y| in [0.01, 100]', tolerance=4e-4),
    # ------------------------------------------------------- comparisons
    OpDef("less", compare_ops.less,
          "Private [x < y] (one comparison per element: bitwise by default, garbled by "
          "tp.comparison).",
          _ex(X23, Y23), ("Less",), (_binary(tf.math.less),), ("math.less",),
          adapter=A.binary("less")),
    OpDef("greater", compare_ops.greater, "Private [x > y].", _ex(X23, Y23), ("Greater",),
          (_binary(tf.math.greater),), ("math.greater",),
          adapter=A.binary("greater")),
    OpDef("less_equal", compare_ops.less_equal, "Private [x <= y].", _ex(X23, Y23),
          ("LessEqual",), (_binary(tf.math.less_equal),), ("math.less_equal",),
          adapter=A.binary("less_equal")),
    OpDef("greater_equal", compare_ops.greater_equal, "Private [x >= y].", _ex(X23, Y23),
          ("GreaterEqual",), (_binary(tf.math.greater_equal),), ("math.greater_equal",),
          adapter=A.binary("greater_equal")),
    OpDef("equal", compare_ops.equal, "Private [x == y] (two comparisons in one round).",
          _ex(X23, Y23), ("Equal",), (_binary(tf.math.equal),), ("math.equal",),
          adapter=A.binary("equal")),
    OpDef("not_equal", compare_ops.not_equal, "Private [x != y].", _ex(X23, Y23),
          ("NotEqual",), (_binary(tf.math.not_equal),), ("math.not_equal",),
          adapter=A.binary("not_equal")),
    OpDef("logical_not", compare_ops.logical_not, "1 - c for a private bit; local.",
          _ex(X23), ("LogicalNot",), (_unary(tf.math.logical_not, rename={"x": "c"}),),
          adapter=A.unary("logical_not"), domain='c in {0, 1}'),
    OpDef("garble_comparisons", compare_ops.garble_comparisons,
          "Setup phase: garbles the comparators of one later comparison.", _ex([2, 3]),
          cost_fn=_garble_cost),
    OpDef("prepare_comparisons", compare_ops.prepare_comparisons,
          "Setup phase of the comparison family in use, for one later comparison.",
          _ex([2, 3]), cost_fn=_prepare_cost),
    OpDef("sign", compare_ops.sign, "-1, 0 or 1 per element.", _ex(X23), ("Sign",),
          (_unary(tf.math.sign),), ("math.sign",),
          adapter=A.unary("sign")),
    OpDef("abs", compare_ops.abs, "|x| (one comparison, one multiplication).", _ex(X23),
          ("Abs",), (_unary(tf.math.abs),), ("math.abs",),
          adapter=A.unary("abs")),
    OpDef("where", compare_ops.where, "condition ? x : y (oblivious select if private).",
          _ex(Private((2, 3), 0.0, 1.0), X23, Y23), ("Select", "SelectV2"),
          (_api(tf.where, "condition", "x", "y"),),
          adapter=A.operands("where"), domain='private condition in {0, 1}'),
    OpDef("maximum", compare_ops.maximum, "Elementwise max (one comparison).", _ex(X23, Y23),
          ("Maximum",), (_binary(tf.math.maximum),), ("math.maximum",),
          adapter=A.binary("maximum")),
    OpDef("minimum", compare_ops.minimum, "Elementwise min (one comparison).", _ex(X23, Y23),
          ("Minimum",), (_binary(tf.math.minimum),), ("math.minimum",),
          adapter=A.binary("minimum")),
    OpDef("clip_by_value", compare_ops.clip_by_value, "min(max(t, lo), hi) elementwise.",
          _ex(X23, -1.0, 1.0), ("ClipByValue",),
          (_api(tf.clip_by_value, "t", "clip_value_min", "clip_value_max"),),
          adapter=A.operands("clip_by_value")),
    OpDef("nn.relu", compare_ops.relu, "max(x, 0) = x·[x >= 0].", _ex(X23), ("Relu",),
          (_api(tf.nn.relu, "features", rename={"features": "x"}),
           _api(_keras.relu, "x", adapter=_keras_relu)),
          adapter=A.relu),
    OpDef("nn.relu_many", compare_ops.relu_many,
          "Independent ReLUs in one comparison and one multiplication batch.",
          _ex([X23, Private((3,))])),
    OpDef("less_many", compare_ops.less_many,
          "Independent comparisons [x < y] in one comparison batch.",
          _ex([(X23, Y23), (Private((3,)), 0.0)])),
    OpDef("reduce_max", compare_ops.reduce_max, "Max over axes by a comparison tree.",
          _ex(X23, 1), ("Max",), (_api(tf.math.reduce_max, "input_tensor"),),
          ("math.reduce_max",),
          adapter=A.reduction("reduce_max")),
    OpDef("reduce_min", compare_ops.reduce_min, "Min over axes by a comparison tree.",
          _ex(X23, 1), ("Min",), (_api(tf.math.reduce_min, "input_tensor"),),
          ("math.reduce_min",),
          adapter=A.reduction("reduce_min")),
    OpDef("argmax", compare_ops.argmax, "Private index of the maximum along an axis.",
          _ex(X23, 1), ("ArgMax",), (_api(tf.math.argmax, "input", adapter=lambda input, axis,
                                            output_type, name: compare_ops.argmax(
                                                input, 0 if axis is None else axis,
                                                output_type)),), ("math.argmax",),
          adapter=A.arg),
    OpDef("argmin", compare_ops.argmin, "Private index of the minimum along an axis.",
          _ex(X23, 1), ("ArgMin",), (_api(tf.math.argmin, "input", adapter=lambda input, axis,
                                            output_type, name: compare_ops.argmin(
                                                input, 0 if axis is None else axis,
                                                output_type)),), ("math.argmin",),
          adapter=A.arg),
    OpDef("sort", compare_ops.sort, "Sort along an axis (Batcher's odd-even merge network).",
          _ex(Private((2, 4))), (), (_api(tf.sort, "values"),)),
    OpDef("math.top_k", compare_ops.top_k, "The k largest entries and their indices.",
          _ex(Private((2, 4)), 2), ("TopKV2",),
          (_api(tf.math.top_k, "input", adapter=lambda input, k, sorted, index_type, name:
                compare_ops.top_k(input, k, sorted)),),
          adapter=A.top_k),
    # --------------------------------------------------- shape operations
    OpDef("reshape", array_ops.reshape, "tf.reshape; local.", _ex(X23, [3, 2]), ("Reshape",),
          (_api(tf.reshape, "tensor", rename={"tensor": "x"}),),
          adapter=A.reshape),
    OpDef("transpose", array_ops.transpose, "tf.transpose; local.", _ex(X23), ("Transpose",),
          (_api(tf.transpose, "a", rename={"a": "x"}),),
          adapter=A.transpose),
    OpDef("getitem", array_ops.getitem, "Indexing and slicing (x[1:, ..., None]); local.",
          _ex(X23, (slice(None), slice(1, None))), ("StridedSlice",),
          (_api(tf.__operators__.getitem, "tensor",
                adapter=lambda tensor, slice_spec, var: array_ops.getitem(tensor, slice_spec)),),
          adapter=A.strided_slice),
    OpDef("concat", array_ops.concat, "tf.concat; local.", _ex([X23, Y23], 0), ("ConcatV2",),
          (_api(tf.concat, "values", lists=("values",)),),
          adapter=A.concat),
    OpDef("stack", array_ops.stack, "tf.stack; local.", _ex([X23, Y23]), ("Pack",),
          (_api(tf.stack, "values", lists=("values",)),),
          adapter=A.stack),
    OpDef("tile", array_ops.tile, "tf.tile; local.", _ex(X23, [2, 1]), ("Tile",),
          (_api(tf.tile, "input", rename={"input": "x"}),),
          adapter=A.tile),
    OpDef("repeat", array_ops.repeat, "tf.repeat; local.", _ex(X23, 2, 1), (),
          (_api(tf.repeat, "input", rename={"input": "x"}),)),
    OpDef("expand_dims", array_ops.expand_dims, "tf.expand_dims; local.", _ex(X23, 0),
          ("ExpandDims",), (_api(tf.expand_dims, "input", rename={"input": "x"}),),
          adapter=A.expand_dims),
    OpDef("squeeze", array_ops.squeeze, "tf.squeeze; local.", _ex(Private((2, 1, 3))),
          ("Squeeze",), (_api(tf.squeeze, "input", rename={"input": "x"}),),
          adapter=A.squeeze),
    OpDef("pad", array_ops.pad, "Zero padding; local.", _ex(X23, [[1, 0], [0, 1]]), ("Pad", "PadV2"),
          (_api(tf.pad, "tensor", rename={"tensor": "x"}),),
          adapter=A.pad),
    OpDef("gather", array_ops.gather, "tf.gather with public indices; local. The converter "
          "also takes private indices (Keras Embedding on private token ids): an oblivious "
          "lookup, n private equalities per index and one matrix product.",
          _ex(X23, [1, 0]), ("GatherV2",),
          (_api(tf.gather, "params", adapter=lambda params, indices, validate_indices, axis,
                batch_dims, name: array_ops.gather(params, indices, axis or 0)),),
          adapter=A.gather),
    OpDef("broadcast_to", array_ops.broadcast_to, "tf.broadcast_to; local.",
          _ex(Private((1, 3)), [2, 3]), ("BroadcastTo",),
          (_api(tf.broadcast_to, "input", rename={"input": "x"}),),
          adapter=A.broadcast_to),
    OpDef("identity", array_ops.identity, "The value itself (no protocol).", _ex(X23),
          ("Identity", "StopGradient", "PreventGradient", "Snapshot"),
          (_api(tf.identity, "input", rename={"input": "x"}),
                          _api(_keras.linear, "x")),
          adapter=A.identity),
    # ------------------------------------------------- derived functions
    OpDef("exp", math_fns.exp, "e^x by range reduction and a polynomial.", _ex(X23), ("Exp",),
          (_unary(tf.math.exp), _api(_keras.exponential, "x")), ("math.exp",),
          adapter=A.unary("exp", moded=True), domain='[-20, 10]', tolerance=8e-4),
    OpDef("math.log", math_fns.log, "Natural logarithm for x > 0.", _ex(POS), ("Log",),
          (_unary(tf.math.log),),
          adapter=A.unary("math.log", moded=True), domain='[0.001, 10000]', tolerance=1e-4),
    OpDef("sqrt", math_fns.sqrt, "sqrt(x) for x >= 0.", _ex(POS), ("Sqrt",),
          (_unary(tf.math.sqrt),), ("math.sqrt",),
          adapter=A.root("sqrt", True), domain='[0.001, 10000]', tolerance=2e-4),
    OpDef("math.rsqrt", math_fns.rsqrt, "1/sqrt(x) for x > 0.", _ex(POS), ("Rsqrt",),
          (_unary(tf.math.rsqrt),),
          adapter=A.root("math.rsqrt", False), domain='[0.001, 10000]', tolerance=2e-4),
    OpDef("math.sqrt_and_rsqrt", math_fns.sqrt_and_rsqrt,
          "sqrt(x) and 1/sqrt(x) of one tensor from one range reduction.", _ex(POS), (),
          domain='[0.001, 10000]', tolerance=2e-4),
    OpDef("math.reciprocal", math_fns.reciprocal, "1/x by Goldschmidt iterations.", _ex(POS),
          ("Reciprocal", "Inv"), (_unary(tf.math.reciprocal),),
          adapter=A.unary("math.reciprocal", moded=True), domain='|x| in [0.001, 10000]', tolerance=2e-4),
    OpDef("sigmoid", math_fns.sigmoid, "Logistic function as a piecewise polynomial.",
          _ex(X23), ("Sigmoid",), (_unary(tf.math.sigmoid), _api(_keras.sigmoid, "x")),
          ("math.sigmoid", "nn.sigmoid"),
          adapter=A.unary("sigmoid", moded=True), domain='[-30, 30]', tolerance=1e-4),
    OpDef("tanh", math_fns.tanh, "tanh as a piecewise polynomial.", _ex(X23), ("Tanh",),
          (_unary(tf.math.tanh), _api(_keras.tanh, "x")), ("math.tanh", "nn.tanh"),
          adapter=A.unary("tanh", moded=True), domain='[-30, 30]', tolerance=1e-4),
    OpDef("math.erf", math_fns.erf, "The error function as a piecewise polynomial (exact "
          "GELU).", _ex(X23), ("Erf",), (_unary(tf.math.erf),),
          adapter=A.unary("math.erf"), domain='any', tolerance=1e-4),
    OpDef("nn.gelu", math_fns.gelu, "GELU, exact (erf) or approximate (tanh) form.", _ex(X23),
          (), (_api(tf.nn.gelu, "features", adapter=lambda features, approximate, name:
                    math_fns.gelu(features, approximate)),),
          domain='[-30, 30]; approximate=True: [-10, 10]', tolerance=1e-4),
    OpDef("nn.softmax", math_fns.softmax, "exp(x - max) / sum along an axis.", _ex(X23),
          ("Softmax",), (_api(tf.nn.softmax, "logits", adapter=lambda logits, axis, name:
                              math_fns.softmax(logits, -1 if axis is None else axis)),
                         _api(_keras.softmax, "x", adapter=lambda x, axis:
                              math_fns.softmax(x, axis))),
          adapter=A.softmax, domain='rows in [-15, 15]', tolerance=1e-4),
    OpDef("nn.log_softmax", math_fns.log_softmax, "(x - max) - log sum exp along an axis.",
          _ex(X23), ("LogSoftmax",),
          (_api(tf.nn.log_softmax, "logits", adapter=lambda logits, axis, name:
                math_fns.log_softmax(logits, -1 if axis is None else axis)),),
          adapter=A.softmax, domain='rows in [-15, 15]', tolerance=3e-4),
    OpDef("nn.softplus", nn.softplus, "log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)).",
          _ex(X23), ("Softplus",), (_api(tf.math.softplus, "features"),
                                    _api(_keras.softplus, "x", rename={"x": "features"})),
          adapter=A.unary("nn.softplus"), tolerance=3e-4),
    OpDef("nn.sigmoid_cross_entropy_with_logits", nn.sigmoid_cross_entropy_with_logits,
          "Logistic loss max(x, 0) - x·z + log(1 + exp(-|x|)).",
          _ex(labels=Private((2, 3), 0.0, 1.0), logits=X23), (),
          (_api(tf.nn.sigmoid_cross_entropy_with_logits, "labels", "logits"),),
          domain='labels in [0, 1]', tolerance=4e-4),
    # -------------------------------------------------------------- nn
    OpDef("nn.conv2d", nn.conv2d, "2-D convolution (NHWC, HWIO), one multiplication.",
          _ex(IMG, Private((2, 2, 2, 3)), 1, "VALID"), ("Conv2D",),
          (_api(tf.nn.conv2d, "input", "filters"),),
          adapter=A.conv2d, tolerance=1e-5),
    OpDef("nn.bias_add", nn.bias_add, "value + bias along the channel axis; local.",
          _ex(IMG, Private((2,))), ("BiasAdd", "BiasAddV1"), (_api(tf.nn.bias_add, "value", "bias"),),
          adapter=A.bias_add),
    OpDef("nn.avg_pool2d", nn.avg_pool2d, "Average pooling; local.", _ex(IMG, 2, 2, "VALID"),
          ("AvgPool",), (_api(tf.nn.avg_pool2d, "input", adapter=_pool(nn.avg_pool2d)),
                         _api(tf.nn.avg_pool, "input", adapter=_pool(nn.avg_pool2d))),
          adapter=A.pool("nn.avg_pool2d"), tolerance=1e-5),
    OpDef("nn.max_pool2d", nn.max_pool2d, "Max pooling by a comparison tree per window.",
          _ex(IMG, 2, 2, "VALID"), ("MaxPool",),
          (_api(tf.nn.max_pool2d, "input", adapter=_pool(nn.max_pool2d)),
           _api(tf.nn.max_pool, "input", adapter=_pool(nn.max_pool2d))),
          adapter=A.pool("nn.max_pool2d")),
    OpDef("nn.max_pool2d_relu", nn.max_pool2d_relu, "relu(max_pool2d(x)): fewer comparisons.",
          _ex(IMG, 2, 2, "VALID")),
]


def _only(tf_ops, adapter: Adapter, doc: str, tolerance: float = 0.0, domain: str = "") -> OpDef:
    """A converter-only row: TF op types with no tp function of their own."""
    return OpDef(tf_ops[0], None, doc, None, tuple(tf_ops), adapter=adapter, domain=domain,
                 tolerance=tolerance)


_CONVERTER_ONLY = [
    # -------------------------------------------- fused and composite forward ops
    _only(["Relu6"], A.relu6, "min(max(x, 0), 6), as tp.clip_by_value."),
    _only(["LeakyRelu"], A.leaky_relu, "x - (1 - alpha)·min(x, 0): one comparison.", 1e-5),
    _only(["DepthwiseConv2dNative"], A.depthwise_conv2d,
          "One conv2d with a block-diagonal filter built from the plaintext weight.", 1e-5,
          "NHWC, no dilation, filter a model weight"),
    _only(["FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"], A.batch_norm,
          "Inference BatchNorm folded by the model owner into x·a + b: one product. With the "
          "batch's statistics (is_training; Keras's LayerNormalization): private mean, "
          "variance and rsqrt.", 1e-5,
          "inference: statistics model weights; batch statistics: epsilon >= 1e-3, error "
          "rsqrt's (relative 1e-4), tests/tolerances.py"),
    _only(["IdentityN"], A.identity_n, "The values themselves."),
    _only(["Einsum"], LA.einsum,
          "One or two operands as transposes, reshapes and one batched matrix product "
          "(MultiHeadAttention).", 1e-5, "no ellipsis, no repeated axis in an operand"),
    _only(["ResizeNearestNeighbor"], LA.resize_nearest,
          "Each output pixel one input pixel (UpSampling2D): two local gathers.", 0.0, "NHWC"),
    _only(["Split"], SA.split, "Equal parts along a static axis (LSTM gates); local."),
    _only(["SplitV"], SA.split_v, "Parts of static sizes along a static axis; local."),
    _only(["Unpack"], SA.unpack, "tf.unstack along a static axis; local."),
    _only(["ReverseV2"], SA.reverse, "Reversal along static axes (go_backwards); local."),
    # --------------------------- the TensorLists of a loop (Keras RNNs), held dense
    _only(["TensorListFromTensor"], SA.from_tensor, "A tensor's elements along axis 0."),
    _only(["TensorListGetItem"], SA.get_item, "An element at a public index; local.", 0.0,
          "public index"),
    _only(["TensorListSetItem"], SA.set_item, "An element written at a public index; local.",
          0.0, "public index"),
    _only(["TensorListStack"], SA.stack, "The elements as one tensor; local."),
    _only(["TensorListLength"], SA.length, "The public, static length."),
    _only(["Shape"], A.shape, "The public static shape of a private value."),
    _only(["Size"], A.size, "The public number of elements of a private value."),
    _only(["Rank"], A.rank, "The public rank of a private value."),
    # ------------------------------------------------- a training step's gradients
    _only(["ReluGrad"], G.relu_grad, "dy·[y > 0], reusing the forward ReLU's bit.", 1e-5),
    _only(["SigmoidGrad"], G.sigmoid_grad, "dy·y·(1 - y): two multiplications.", 1e-5),
    _only(["TanhGrad"], G.tanh_grad, "dy·(1 - y²): two multiplications.", 1e-5),
    _only(["BiasAddGrad"], G.bias_add_grad, "dy summed over all axes but channels; local."),
    _only(["MaxPoolGrad"], G.max_pool_grad,
          "Gradient to each window's maxima: one comparison, one multiplication.", 1e-5,
          "window = stride dividing the input, NHWC"),
    _only(["Conv2DBackpropInput"], G.conv2d_backprop_input,
          "dx as one conv2d of the padded dy with the flipped filter (its stride phases).",
          1e-5,
          "NHWC, no dilation"),
    _only(["Conv2DBackpropFilter"], G.conv2d_backprop_filter,
          "dW as one conv2d of the input (at stride > 1 its stride phases) with dy as filter.",
          1e-5,
          "NHWC, no dilation"),
    _only(["SoftmaxCrossEntropyWithLogits"], G.softmax_xent,
          "(loss, softmax(logits) - labels); the loss only when used.", 3e-4),
    _only(["SparseSoftmaxCrossEntropyWithLogits"], G.sparse_softmax_xent,
          "As SoftmaxCrossEntropyWithLogits with integer labels (one-hot).", 3e-4),
    _only(["SquaredDifference"], G.squared_difference, "(x - y)²: one multiplication.", 1e-5),
    # ------------------------------------------------------------- bookkeeping
    _only(["AddN"], G.add_n, "A sum; local."),
    _only(["Cast"], G.cast, "Retags a private value's dtype; float to integer is refused."),
    _only(["DivNoNan"], G.div_no_nan, "x / y for a public y, 0 where y = 0.", 1e-5,
          "public y"),
    _only(["Slice"], G.slice_, "tf.slice with static bounds; local."),
    _only(["ShapeN"], G.shape_n, "The public static shapes of private values."),
    _only(["ZerosLike", "OnesLike"], G.fill_like, "Public zeros or ones of a private shape."),
]
for _op in _TABLE + _CONVERTER_ONLY:
    register(_op)


# ------------------------------------------------------------- operators
def _attach_operators() -> None:
    """The Python operators of PrivateTensor and tp.Variable (which reads
    itself first), from the registered ops."""
    for P in (PrivateTensor, PrivateVariable):
        binary = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
                  "matmul": "matmul"}
        for dunder, name in binary.items():
            impl = get(name).impl
            setattr(P, f"__{dunder}__", lambda self, other, f=impl: f(self, other))
            setattr(P, f"__r{dunder}__", lambda self, other, f=impl: f(other, self))
        for dunder, name in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                             ("ge", "greater_equal")):
            setattr(P, f"__{dunder}__", lambda self, other, f=get(name).impl: f(self, other))
        P.__pow__ = lambda self, n: get("pow").impl(self, n)
        P.__rpow__ = lambda self, base: get("pow").impl(base, self)
        P.__neg__ = lambda self: get("negative").impl(self)
        P.__abs__ = lambda self: get("abs").impl(self)
        P.__getitem__ = lambda self, key: get("getitem").impl(self, key)
        P.reveal = lambda self: get("reveal").impl(self)
        P.reveal.__doc__ = "The plaintext value on the client device (see tp.reveal)."
    PrivateTensor.__pos__ = lambda self: self
    PrivateVariable.__pos__ = lambda self: self.read_value()


_attach_operators()
