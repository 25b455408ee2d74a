"""TF op type -> private implementation, with each node's attributes mapped
to the registry op's arguments (DESIGN §8).

Every adapter calls the op registry (protocols/mpc/registry.py): nothing
here re-implements an op. An adapter gets the conversion environment, the
node (op type, decoded attributes, name) and its input values, each a
PrivateTensor, a `Weight` (a frozen variable the model owner still holds in
plaintext) or a public numpy/tf value, and returns the node's outputs.
Adapters that can use the model owner's plaintext weights do so before they
are shared: BatchNorm folds its four vectors into one scale and one offset,
depthwise convolution builds its block-diagonal filter.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.mpc import registry


@dataclasses.dataclass
class Weight:
    """A frozen variable: plaintext at the model owner until it is shared."""

    name: str
    value: np.ndarray


@dataclasses.dataclass
class Node:
    name: str
    op: str
    attr: Dict[str, Any]
    layer: str = ""


class Unsupported(Exception):
    """Raised by an adapter that cannot convert a node; `why` and `fix` go
    into the converter's single UnsupportedOpError."""

    def __init__(self, why: str, fix: str):
        super().__init__(why)
        self.why, self.fix = why, fix


Adapter = Callable[[Any, Node, List[Any]], List[Any]]
ADAPTERS: Dict[str, Adapter] = {}


def adapter(*op_types: str):
    def deco(fn: Adapter) -> Adapter:
        for t in op_types:
            ADAPTERS[t] = fn
        return fn
    return deco


def impl(name: str):
    return registry.get(name).impl


def static(env, v, what: str) -> np.ndarray:
    """A value the node needs known while converting (axes, shapes, paddings)."""
    v = env.public(v)
    s = tf.get_static_value(v) if isinstance(v, tf.Tensor) else v
    if s is None:
        raise Unsupported(f"its {what} is computed at run time",
                          f"give the model static shapes so the {what} is a constant")
    return np.asarray(s)


def _fmt(node: Node) -> str:
    df = node.attr.get("data_format", "NHWC") or "NHWC"
    if df not in ("NHWC", "NCHW"):
        raise Unsupported(f"data_format {df} is not supported", "use channels-last (NHWC)")
    return df


# ------------------------------------------------------------ elementwise
def numerics(env) -> Dict[str, str]:
    """The policy's numerics mode as keyword arguments ({} when unset:
    the config's), for the functions that have a fast mode."""
    return env.policy.numerics()


def _registry_unary(op_type: str, name: str, moded: bool = False):
    @adapter(op_type)
    def fn(env, node, ins):
        return [impl(name)(env.operand(ins[0]), **(numerics(env) if moded else {}))]
    return fn


for _t, _n in (("Relu", "nn.relu"), ("Sqrt", "sqrt"), ("Rsqrt", "math.rsqrt"),
               ("Neg", "negative"), ("Abs", "abs"), ("Sign", "sign"), ("Square", "square"),
               ("Softplus", "nn.softplus"), ("LogicalNot", "logical_not")):
    _registry_unary(_t, _n)
# the functions with a fast mode (protocols/mpc/fast_numerics.py) follow the policy's
for _t, _n in (("Sigmoid", "sigmoid"), ("Tanh", "tanh"), ("Exp", "exp"), ("Log", "math.log"),
               ("Reciprocal", "math.reciprocal"), ("Inv", "math.reciprocal")):
    _registry_unary(_t, _n, moded=True)

_BINARY = {"Add": "add", "AddV2": "add", "Sub": "subtract", "Mul": "multiply",
           "RealDiv": "divide", "Maximum": "maximum", "Minimum": "minimum", "Less": "less",
           "Greater": "greater", "LessEqual": "less_equal", "GreaterEqual": "greater_equal",
           "Equal": "equal", "NotEqual": "not_equal", "Pow": "pow"}


@adapter(*_BINARY)
def _binary(env, node, ins):
    a, b = env.operand(ins[0]), env.operand(ins[1])
    if node.op == "Pow":
        b = static(env, b, "exponent").item()
    if node.op == "RealDiv":
        return [impl("divide")(a, b, **numerics(env))]
    return [impl(_BINARY[node.op])(a, b)]


@adapter("Relu6")
def _relu6(env, node, ins):
    return [impl("clip_by_value")(env.operand(ins[0]), 0.0, 6.0)]


@adapter("LeakyRelu")
def _leaky(env, node, ins):
    x, alpha = env.operand(ins[0]), float(node.attr.get("alpha", 0.2))
    # max(x, alpha x) for 0 < alpha < 1: x - (1 - alpha)·min(x, 0), one ReLU's comparisons
    return [impl("subtract")(x, impl("multiply")(impl("minimum")(x, 0.0), 1.0 - alpha))]


@adapter("Select", "SelectV2")
def _select(env, node, ins):
    return [impl("where")(*[env.operand(v) for v in ins])]


@adapter("ClipByValue")
def _clip(env, node, ins):
    return [impl("clip_by_value")(*[env.operand(v) for v in ins])]


@adapter("Identity", "StopGradient", "PreventGradient", "Snapshot")
def _identity(env, node, ins):
    return [ins[0]]


@adapter("IdentityN")
def _identity_n(env, node, ins):
    return list(ins)


# ------------------------------------------------------------- products
@adapter("MatMul", "BatchMatMul", "BatchMatMulV2")
def _matmul(env, node, ins):
    ta = bool(node.attr.get("transpose_a", node.attr.get("adj_x", False)))
    tb = bool(node.attr.get("transpose_b", node.attr.get("adj_y", False)))
    return [impl("matmul")(env.operand(ins[0]), env.operand(ins[1]), transpose_a=ta,
                           transpose_b=tb)]


@adapter("BiasAdd", "BiasAddV1")
def _bias_add(env, node, ins):
    return [impl("nn.bias_add")(env.operand(ins[0]), env.operand(ins[1]),
                                data_format=_fmt(node))]


def _hw(node: Node, key: str) -> List[int]:
    v = list(node.attr.get(key) or [1, 1, 1, 1])
    return [v[1], v[2]] if _fmt(node) == "NHWC" else [v[2], v[3]]


def _padding(node: Node):
    pad = node.attr.get("padding", "VALID")
    if pad == "EXPLICIT":
        p = list(node.attr.get("explicit_paddings"))
        return [[p[0], p[1]], [p[2], p[3]], [p[4], p[5]], [p[6], p[7]]]
    return pad


@adapter("Conv2D")
def _conv2d(env, node, ins):
    if _hw(node, "dilations") != [1, 1]:
        raise Unsupported("dilated convolution is not supported", "use dilation_rate=1")
    return [impl("nn.conv2d")(env.operand(ins[0]), env.operand(ins[1]),
                              strides=_hw(node, "strides"), padding=_padding(node),
                              data_format=_fmt(node))]


@adapter("DepthwiseConv2dNative")
def _depthwise(env, node, ins):
    """Depthwise convolution as one ordinary convolution with a block-diagonal
    filter [kh, kw, C, C·m] built by the model owner in plaintext: one
    protocol call instead of one per channel (the zeros cost local ring
    arithmetic only, no messages)."""
    if _fmt(node) != "NHWC" or _hw(node, "dilations") != [1, 1]:
        raise Unsupported("only NHWC depthwise convolution without dilation is supported",
                          "use data_format channels_last and dilation_rate=1")
    w = ins[1]
    if not isinstance(w, Weight):
        raise Unsupported("its filter is not a model weight",
                          "convert a model whose depthwise filter is a trained variable")
    kh, kw, c, m = w.value.shape
    full = np.zeros((kh, kw, c, c * m), w.value.dtype)
    for ch in range(c):
        full[:, :, ch, ch * m:(ch + 1) * m] = w.value[:, :, ch, :]
    filt = env.operand(Weight(w.name + "/block_diagonal", full))
    return [impl("nn.conv2d")(env.operand(ins[0]), filt, strides=_hw(node, "strides"),
                              padding=_padding(node), data_format="NHWC")]


@adapter("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _batch_norm(env, node, ins):
    """Inference BatchNorm: y = x·a + b with a = scale / sqrt(var + eps) and
    b = offset - mean·a, folded by the model owner, who holds all four
    vectors, before anything is shared: one product instead of a private
    rsqrt (DESIGN §8)."""
    if node.attr.get("is_training"):
        raise Unsupported("BatchNormalization in training mode",
                          "convert the model for inference (training=False)")
    params = ins[1:5]
    if not all(isinstance(p, (Weight, np.ndarray)) for p in params):
        raise Unsupported("its statistics are not model weights",
                          "convert a model whose BatchNormalization variables are trained")
    scale, offset, mean, var = (p.value if isinstance(p, Weight) else p for p in params)
    eps = float(node.attr.get("epsilon", 1e-3))
    a = (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
    b = offset.astype(np.float64) - mean.astype(np.float64) * a
    if _fmt(node) == "NCHW":
        a, b = a.reshape(-1, 1, 1), b.reshape(-1, 1, 1)
    x = env.operand(ins[0])
    y = impl("add")(impl("multiply")(x, env.operand(Weight(node.name + "/folded_scale", a))),
                    env.operand(Weight(node.name + "/folded_offset", b)))
    return [y, None, None, None, None, None]


# -------------------------------------------------------------- pooling
def _pool(name):
    def fn(env, node, ins):
        k = list(node.attr["ksize"])
        s = list(node.attr["strides"])
        kk, ss = ([k[1], k[2]], [s[1], s[2]]) if _fmt(node) == "NHWC" else ([k[2], k[3]],
                                                                             [s[2], s[3]])
        return [impl(name)(env.operand(ins[0]), kk, ss, padding=_padding(node),
                           data_format=_fmt(node))]
    return fn


adapter("MaxPool")(_pool("nn.max_pool2d"))
adapter("AvgPool")(_pool("nn.avg_pool2d"))


# ----------------------------------------------------------- reductions
def _reduction(name):
    def fn(env, node, ins):
        axis = static(env, ins[1], "axis").tolist()
        return [impl(name)(env.operand(ins[0]), axis, bool(node.attr.get("keep_dims", False)))]
    return fn


for _t, _n in (("Sum", "reduce_sum"), ("Mean", "reduce_mean"), ("Max", "reduce_max"),
               ("Min", "reduce_min")):
    adapter(_t)(_reduction(_n))


@adapter("ArgMax", "ArgMin")
def _arg(env, node, ins):
    axis = int(static(env, ins[1], "axis"))
    name = "argmax" if node.op == "ArgMax" else "argmin"
    return [impl(name)(env.operand(ins[0]), axis)]


@adapter("Softmax", "LogSoftmax")
def _softmax(env, node, ins):
    return [impl("nn.softmax" if node.op == "Softmax" else "nn.log_softmax")(
        env.operand(ins[0]), -1, **numerics(env))]


# --------------------------------------------------------------- shapes
@adapter("Reshape")
def _reshape(env, node, ins):
    return [impl("reshape")(env.operand(ins[0]), static(env, ins[1], "shape").tolist())]


@adapter("Transpose")
def _transpose(env, node, ins):
    return [impl("transpose")(env.operand(ins[0]), static(env, ins[1], "perm").tolist())]


@adapter("ExpandDims")
def _expand(env, node, ins):
    return [impl("expand_dims")(env.operand(ins[0]), int(static(env, ins[1], "axis")))]


@adapter("Squeeze")
def _squeeze(env, node, ins):
    dims = list(node.attr.get("squeeze_dims") or []) or None
    return [impl("squeeze")(env.operand(ins[0]), dims)]


@adapter("Pad", "PadV2")
def _pad(env, node, ins):
    value = 0.0 if len(ins) < 3 else float(static(env, ins[2], "padding value"))
    if value != 0.0:
        raise Unsupported("padding with a non-zero value", "pad with zeros")
    return [impl("pad")(env.operand(ins[0]), static(env, ins[1], "paddings").tolist())]


@adapter("ConcatV2")
def _concat(env, node, ins):
    axis = int(static(env, ins[-1], "axis"))
    return [impl("concat")([env.operand(v) for v in ins[:-1]], axis)]


@adapter("Pack")
def _pack(env, node, ins):
    return [impl("stack")([env.operand(v) for v in ins], int(node.attr.get("axis", 0)))]


@adapter("Tile")
def _tile(env, node, ins):
    return [impl("tile")(env.operand(ins[0]), static(env, ins[1], "multiples").tolist())]


@adapter("GatherV2")
def _gather(env, node, ins):
    return [impl("gather")(env.operand(ins[0]), static(env, ins[1], "indices"),
                           int(static(env, ins[2], "axis")))]


@adapter("BroadcastTo")
def _broadcast(env, node, ins):
    return [impl("broadcast_to")(env.operand(ins[0]), static(env, ins[1], "shape").tolist())]


@adapter("Shape")
def _shape(env, node, ins):
    shape = ins[0].shape
    if not shape.is_fully_defined():
        raise Unsupported("the shape of a private value is not known when converting",
                          "give the input signature a fixed batch size")
    dtype = node.attr.get("out_type") or tf.int32
    return [np.asarray(shape.as_list(), dtype.as_numpy_dtype)]


@adapter("StridedSlice")
def _strided_slice(env, node, ins):
    begin, end, strides = (static(env, v, "slice bound").tolist() for v in ins[1:4])
    masks = {k: int(node.attr.get(k, 0) or 0) for k in
             ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    key = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if masks["ellipsis_mask"] & bit:
            key.append(Ellipsis)
        elif masks["new_axis_mask"] & bit:
            key.append(None)
        elif masks["shrink_axis_mask"] & bit:
            key.append(b)
        else:
            key.append(slice(None if masks["begin_mask"] & bit else b,
                             None if masks["end_mask"] & bit else e, s))
    return [impl("getitem")(env.operand(ins[0]), tuple(key))]


# the training half's gradient, loss and bookkeeping ops register here too
from . import grad_ops  # noqa: E402,F401


def supported_op_types() -> List[str]:
    """TF op types the converter rewrites when a private value reaches them."""
    return sorted(ADAPTERS)


def lookup(op_type: str) -> Optional[Adapter]:
    return ADAPTERS.get(op_type)
