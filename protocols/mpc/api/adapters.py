"""The converter's adapters: TF graph node -> private op, each node's
attributes mapped to the op's arguments (DESIGN §8). Each row of the op
table (registry.py) names its adapter; the converter (converters/rewrite.py)
reads them there and nowhere else.

An adapter is a function (env, node, ins) -> outputs. `node` is a Node (op
type, decoded attributes, name); `ins` its input values, each a
PrivateTensor, a `Weight` (a frozen variable the model owner still holds in
plaintext) or a public numpy/tf value. Of the conversion env it uses only:
  env.operand(v)    v as an operand (a Weight shared once, or its value
                    under a public-weights policy);
  env.public(v)     v's plaintext (a Weight's value);
  env.policy.numerics()  the numerics mode's keyword arguments;
  env.consumed      (training) the (node, output) pairs the step uses;
  env.relu_bits     (training) id(ReLU output) -> its private bit;
  env.roots         (training) paired Sqrt/Rsqrt nodes (Roots).
An adapter composes registry ops only, re-implementing nothing, and raises
Unsupported (why, what to do) for what it cannot convert exactly. Adapters
that can use the model owner's plaintext weights do so before they are
shared: BatchNorm folds its four vectors into one scale and one offset,
depthwise convolution builds its block-diagonal filter.

A unary function with a fast mode needs no code here: its row says
`adapter=unary("name", moded=True)`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List

import numpy as np
import tensorflow as tf

from . import opdef
from .value import PrivateTensor


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


def impl(name: str) -> Callable:
    """The registered implementation of a tp op (accepting tp.Variables)."""
    return opdef.get(name).impl


def static(env, v, what: str) -> np.ndarray:
    """A value the node needs known while converting (axes, shapes, paddings)."""
    v = env.public(v)
    s = tf.get_static_value(v) if isinstance(v, tf.Tensor) else v
    if s is None:
        raise Unsupported(f"its {what} is computed at run time",
                          f"give the model static shapes so the {what} is a constant")
    return np.asarray(s)


def fmt(node: Node) -> str:
    df = node.attr.get("data_format", "NHWC") or "NHWC"
    if df not in ("NHWC", "NCHW"):
        raise Unsupported(f"data_format {df} is not supported", "use channels-last (NHWC)")
    return df


# ------------------------------------------------------------ elementwise
def numerics(env) -> Dict[str, str]:
    """The policy's numerics mode as keyword arguments ({} when unset:
    the config's), for the functions that have a fast mode."""
    return env.policy.numerics()


def unary(name: str, moded: bool = False) -> Callable:
    """The adapter of a one-input op: tp.`name`(x); with `moded`, in the
    policy's numerics mode (the functions of protocols/mpc/fixedpoint/fast_numerics.py)."""
    def fn(env, node, ins):
        return [impl(name)(env.operand(ins[0]), **(numerics(env) if moded else {}))]
    fn.__name__ = f"unary_{name}"
    fn.refuses_nothing = moded  # see binary
    return fn


@dataclasses.dataclass
class Roots:
    """A training step's Sqrt and Rsqrt nodes that read one tensor (Adam's
    update, converters/optimizers.py): `pairs` their names, `done` id(input
    value) -> (sqrt, rsqrt) once the first of them is converted."""

    pairs: frozenset
    done: Dict[int, Any] = dataclasses.field(default_factory=dict)


def paired_roots(nodes) -> Roots:
    """Roots of a graph's NodeDefs: the Sqrt and Rsqrt nodes whose input
    tensor both a Sqrt and an Rsqrt read."""
    by_input: Dict[str, Dict[str, List[str]]] = {}
    for n in nodes:
        if n.op in ("Sqrt", "Rsqrt"):
            by_input.setdefault(n.input[0], {}).setdefault(n.op, []).append(n.name)
    return Roots(frozenset(name for ops in by_input.values() if len(ops) == 2
                           for names in ops.values() for name in names))


def root(name: str, want_sqrt: bool) -> Callable:
    """The adapter of Sqrt (want_sqrt) or Rsqrt: tp.`name`(x); in a training
    step (env.roots) whose graph takes both roots of one tensor, both come
    from tp.math.sqrt_and_rsqrt: one range reduction (one leading-one
    circuit per element) instead of two."""
    def fn(env, node, ins):
        roots = getattr(env, "roots", None)
        if roots is None or node.name not in roots.pairs:
            return [impl(name)(env.operand(ins[0]))]
        key = id(ins[0])
        if key not in roots.done:
            roots.done[key] = impl("math.sqrt_and_rsqrt")(env.operand(ins[0]))
        return [roots.done[key][0 if want_sqrt else 1]]
    fn.__name__ = f"root_{name}"
    fn.refuses_nothing = False
    return fn


def binary(name: str, moded: bool = False) -> Callable:
    """The adapter of a two-input op: tp.`name`(x, y)."""
    def fn(env, node, ins):
        return [impl(name)(env.operand(ins[0]), env.operand(ins[1]),
                           **(numerics(env) if moded else {}))]
    fn.__name__ = f"binary_{name}"
    # a moded function (exp, divide, sigmoid, ...) of floats refuses nothing
    # and returns a private float of its operands' broadcast shape: a
    # training step's dry run (converters/training.py check_step) puts shared
    # zeros of the traced shape in its place instead of tracing its protocol
    # (most of the dry run's graph: network A's divisions alone, 60%)
    fn.refuses_nothing = moded
    return fn


def operands(name: str) -> Callable:
    """The adapter of an op taking every input as it comes (tp.where)."""
    def fn(env, node, ins):
        return [impl(name)(*[env.operand(v) for v in ins])]
    fn.__name__ = f"operands_{name}"
    return fn


def power(env, node, ins):
    """Pow by a public exponent known when converting."""
    return [impl("pow")(env.operand(ins[0]), static(env, ins[1], "exponent").item())]


def relu(env, node, ins):
    """ReLU. In a training step (env.relu_bits) y = x·[x > 0] keeps its private
    bit, so that ReluGrad(dy, y) = dy·[y > 0] = dy·[x > 0] reuses it: one
    comparison per element per step instead of two (same multiplications,
    same rounds)."""
    x = env.operand(ins[0])
    bits = getattr(env, "relu_bits", None)
    if bits is None:
        return [impl("nn.relu")(x)]
    bit = impl("greater")(x, 0.0)
    y = impl("multiply")(x, bit)
    bits[id(y)] = bit
    return [y]


def relu6(env, node, ins):
    return [impl("clip_by_value")(env.operand(ins[0]), 0.0, 6.0)]


def leaky_relu(env, node, ins):
    x, alpha = env.operand(ins[0]), float(node.attr.get("alpha", 0.2))
    # x for x > 0, alpha·x otherwise: x - (1 - alpha)·min(x, 0), one ReLU's comparisons
    return [impl("subtract")(x, impl("multiply")(impl("minimum")(x, 0.0), 1.0 - alpha))]


def identity(env, node, ins):
    return [ins[0]]


def identity_n(env, node, ins):
    return list(ins)


# ------------------------------------------------------------- products
def matmul(env, node, ins):
    ta = bool(node.attr.get("transpose_a", node.attr.get("adj_x", False)))
    tb = bool(node.attr.get("transpose_b", node.attr.get("adj_y", False)))
    return [impl("matmul")(env.operand(ins[0]), env.operand(ins[1]), transpose_a=ta,
                           transpose_b=tb)]


def bias_add(env, node, ins):
    return [impl("nn.bias_add")(env.operand(ins[0]), env.operand(ins[1]),
                                data_format=fmt(node))]


def hw(node: Node, key: str) -> List[int]:
    v = list(node.attr.get(key) or [1, 1, 1, 1])
    return [v[1], v[2]] if fmt(node) == "NHWC" else [v[2], v[3]]


def padding(node: Node):
    pad = node.attr.get("padding", "VALID")
    if pad == "EXPLICIT":
        p = list(node.attr.get("explicit_paddings"))
        return [[p[0], p[1]], [p[2], p[3]], [p[4], p[5]], [p[6], p[7]]]
    return pad


def conv2d(env, node, ins):
    if hw(node, "dilations") != [1, 1]:
        raise Unsupported("dilated convolution is not supported", "use dilation_rate=1")
    return [impl("nn.conv2d")(env.operand(ins[0]), env.operand(ins[1]),
                              strides=hw(node, "strides"), padding=padding(node),
                              data_format=fmt(node))]


def depthwise_conv2d(env, node, ins):
    """Depthwise convolution as one ordinary convolution with a block-diagonal
    filter [kh, kw, C, C·m] built by the model owner in plaintext: one
    protocol call instead of one per channel (the zeros cost local ring
    arithmetic only, no messages)."""
    if fmt(node) != "NHWC" or hw(node, "dilations") != [1, 1]:
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
    return [impl("nn.conv2d")(env.operand(ins[0]), filt, strides=hw(node, "strides"),
                              padding=padding(node), data_format="NHWC")]


def batch_norm(env, node, ins):
    """Inference BatchNorm: y = x·a + b with a = scale / sqrt(var + eps) and
    b = offset - mean·a, folded by the model owner, who holds all four
    vectors, before anything is shared: one product instead of a private
    rsqrt (DESIGN §8)."""
    if node.attr.get("is_training"):
        return _batch_norm_of_batch(env, node, ins)
    params = ins[1:5]
    if not all(isinstance(p, (Weight, np.ndarray)) for p in params):
        raise Unsupported("its statistics are not model weights",
                          "convert a model whose BatchNormalization variables are trained")
    scale, offset, mean, var = (p.value if isinstance(p, Weight) else p for p in params)
    eps = float(node.attr.get("epsilon", 1e-3))
    a = (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
    b = offset.astype(np.float64) - mean.astype(np.float64) * a
    if fmt(node) == "NCHW":
        a, b = a.reshape(-1, 1, 1), b.reshape(-1, 1, 1)
    x = env.operand(ins[0])
    y = impl("add")(impl("multiply")(x, env.operand(Weight(node.name + "/folded_scale", a))),
                    env.operand(Weight(node.name + "/folded_offset", b)))
    return [y, None, None, None, None, None]


#: the smallest epsilon a batch-statistics BatchNorm may add to its variance:
#: tp.math.rsqrt's domain starts at 1e-3 (docs/numerics.md), and a variance
#: of 0 (a constant row) must stay inside it
MIN_EPSILON = 1e-3


def batch_norm_refusal(node: Node):
    """What batch_norm would refuse, from the node alone (the converter's
    analysis asks before anything runs): a batch-statistics BatchNorm
    whose epsilon lies below rsqrt's domain."""
    eps = float(node.attr.get("epsilon", 1e-3))
    if node.attr.get("is_training") and eps < MIN_EPSILON:
        return Unsupported(
            f"its epsilon {eps:g} is below {MIN_EPSILON:g}: the private rsqrt's domain starts "
            "there, and a row of equal values has variance 0",
            f"build the layer with epsilon >= {MIN_EPSILON:g} (Keras's default)")
    return None


batch_norm.static_refusal = batch_norm_refusal


def _batch_norm_of_batch(env, node, ins):
    """BatchNorm with the batch's own statistics (is_training): what Keras's
    LayerNormalization runs, on its input reshaped so that each row is a
    channel (NCHW), with scale ones and offset zeros (public Fill nodes).
    mean and variance (biased, as TF's normalization uses) are private:
    y = (x - mean)·rsqrt(var + eps)·scale + offset, the rsqrt a derived
    function (relative error 1e-4 in the 128-bit ring, docs/numerics.md).
    Outputs 1 and 2 are the private batch mean and variance per channel
    (the variance with Bessel's correction, as TF's kernel returns it for the
    moving averages); the reserve spaces are not produced."""
    refusal = batch_norm_refusal(node)
    if refusal is not None:
        raise refusal
    eps = float(node.attr.get("epsilon", 1e-3))
    x = env.operand(ins[0])
    rank = x.shape.rank
    if rank != 4:
        raise Unsupported("its input is not 4-D", "use a 4-D input (NHWC or NCHW)")
    axes = [0, 1, 2] if fmt(node) == "NHWC" else [0, 2, 3]
    mean = impl("reduce_mean")(x, axes, keepdims=True)
    d = impl("subtract")(x, mean)
    var = impl("reduce_mean")(impl("square")(d), axes, keepdims=True)
    r = impl("math.rsqrt")(impl("add")(var, np.float64(eps)))
    y = impl("multiply")(d, r)
    scale, offset = ins[1:3]
    # (LayerNormalization's: public ones and zeros, folded at conversion)
    ones = isinstance(scale, np.ndarray) and np.all(scale == 1)
    zeros = isinstance(offset, np.ndarray) and not np.any(offset)
    per_channel = (lambda v: impl("reshape")(v, [-1, 1, 1])) if fmt(node) == "NCHW" else (
        lambda v: v)
    if not ones:
        y = impl("multiply")(y, per_channel(env.operand(scale)))
    if not zeros:
        y = impl("add")(y, per_channel(env.operand(offset)))
    n = int(np.prod([x.shape[a] for a in axes]))
    flat = lambda v: impl("reshape")(v, [-1])  # noqa: E731
    unbiased = flat(impl("multiply")(var, np.float64(n / (n - 1)))) if n > 1 else flat(var)
    return [y, flat(mean), unbiased, None, None, None]


# -------------------------------------------------------------- pooling
def pool(name: str) -> Callable:
    """The adapter of MaxPool / AvgPool: tp.`name` with the node's window."""
    def fn(env, node, ins):
        k = list(node.attr["ksize"])
        s = list(node.attr["strides"])
        kk, ss = ([k[1], k[2]], [s[1], s[2]]) if fmt(node) == "NHWC" else ([k[2], k[3]],
                                                                             [s[2], s[3]])
        return [impl(name)(env.operand(ins[0]), kk, ss, padding=padding(node),
                           data_format=fmt(node))]
    return fn


# ----------------------------------------------------------- reductions
def reduction(name: str) -> Callable:
    """The adapter of a reduction over static axes: tp.`name`."""
    def fn(env, node, ins):
        axis = static(env, ins[1], "axis").tolist()
        return [impl(name)(env.operand(ins[0]), axis, bool(node.attr.get("keep_dims", False)))]
    return fn


def arg(env, node, ins):
    """ArgMax / ArgMin along a static axis."""
    axis = int(static(env, ins[1], "axis"))
    name = "argmax" if node.op == "ArgMax" else "argmin"
    return [impl(name)(env.operand(ins[0]), axis)]


def softmax(env, node, ins):
    """Softmax / LogSoftmax along the last axis, in the policy's numerics mode."""
    return [impl("nn.softmax" if node.op == "Softmax" else "nn.log_softmax")(
        env.operand(ins[0]), -1, **numerics(env))]


# --------------------------------------------------------------- shapes
def reshape(env, node, ins):
    return [impl("reshape")(env.operand(ins[0]), static(env, ins[1], "shape").tolist())]


def transpose(env, node, ins):
    return [impl("transpose")(env.operand(ins[0]), static(env, ins[1], "perm").tolist())]


def expand_dims(env, node, ins):
    return [impl("expand_dims")(env.operand(ins[0]), int(static(env, ins[1], "axis")))]


def squeeze(env, node, ins):
    dims = list(node.attr.get("squeeze_dims") or []) or None
    return [impl("squeeze")(env.operand(ins[0]), dims)]


def pad(env, node, ins):
    value = 0.0 if len(ins) < 3 else float(static(env, ins[2], "padding value"))
    if value != 0.0:
        raise Unsupported("padding with a non-zero value", "pad with zeros")
    return [impl("pad")(env.operand(ins[0]), static(env, ins[1], "paddings").tolist())]


def concat(env, node, ins):
    axis = int(static(env, ins[-1], "axis"))
    return [impl("concat")([env.operand(v) for v in ins[:-1]], axis)]


def stack(env, node, ins):
    return [impl("stack")([env.operand(v) for v in ins], int(node.attr.get("axis", 0)))]


def tile(env, node, ins):
    return [impl("tile")(env.operand(ins[0]), static(env, ins[1], "multiples").tolist())]


def gather(env, node, ins):
    """tf.gather: by public indices a local gather of the shares; by private
    indices (an Embedding on private token ids) an oblivious lookup."""
    axis = int(static(env, ins[2], "axis"))
    if private(ins[1]):
        return [_oblivious_gather(env, node, env.operand(ins[0]), ins[1], axis)]
    return [impl("gather")(env.operand(ins[0]), static(env, ins[1], "indices"), axis)]


def private(v) -> bool:
    """Whether an adapter's input is a private value."""
    return isinstance(v, PrivateTensor)


def _oblivious_gather(env, node, params, ids, axis: int):
    """params gathered along `axis` by private indices, none of them
    revealed: the one-hot [ids == j] of each index (j = 0..n-1 along the
    axis: n private equalities, integer bits) times params, one matrix
    product without truncation (the bits are integers), so the result is
    params' encoding exactly. An index outside [0, n) selects nothing: its
    row is 0 (TF raises there; the servers cannot look)."""
    n = gather_rows(node, params, ids.shape, axis)
    bits = impl("equal")(impl("reshape")(ids, [-1, 1]), np.arange(n, dtype=np.float64))
    return gather_by_one_hot(params, bits, ids.shape, axis)


def gather_rows(node, params, ids_shape, axis: int) -> int:
    """The number of rows a gather by private (or owner-side) indices
    chooses from; refuses what the one-hot product cannot do."""
    if int(node.attr.get("batch_dims", 0) or 0):
        raise Unsupported("a gather with batch_dims by private indices",
                          "gather with batch_dims=0")
    shape = params.shape
    if shape.rank is None or not shape.is_fully_defined() or not ids_shape.is_fully_defined():
        raise Unsupported("a gather by private indices with shapes unknown when converting",
                          "give the model static shapes")
    return shape.as_list()[axis % shape.rank]


def gather_by_one_hot(params, bits, ids_shape, axis: int):
    """tf.gather(params, ids, axis) from the one-hot of ids, [m, n] private
    integer bits (m = ids' size, n = params' size along axis): one private
    matrix product, exact (converters/owner.py's one-hot made by the data
    owner, or _oblivious_gather's equalities)."""
    dims = params.shape.as_list()
    axis %= len(dims)
    n = dims[axis]
    rest = dims[:axis] + dims[axis + 1:]
    perm = [axis] + [i for i in range(len(dims)) if i != axis]
    table = impl("reshape")(impl("transpose")(params, perm), [n, -1])
    out = impl("matmul")(bits, table)
    k = ids_shape.rank
    out = impl("reshape")(out, ids_shape.as_list() + rest)
    if axis:   # TF's order: params' leading axes, then the indices', then the rest
        lead = list(range(k, k + axis))
        out = impl("transpose")(out, lead + list(range(k)) + list(range(k + axis,
                                                                        k + len(rest))))
    return out


def broadcast_to(env, node, ins):
    return [impl("broadcast_to")(env.operand(ins[0]), static(env, ins[1], "shape").tolist())]


def shape(env, node, ins):
    """The (public) static shape of a private value."""
    s = ins[0].shape
    if not s.is_fully_defined():
        raise Unsupported("the shape of a private value is not known when converting",
                          "give the input signature a fixed batch size")
    dtype = node.attr.get("out_type") or tf.int32
    return [np.asarray(s.as_list(), dtype.as_numpy_dtype)]


def size(env, node, ins):
    """The (public) number of elements of a private value."""
    (s,) = shape(env, node, ins)
    return [np.asarray(np.prod(s, dtype=np.int64), s.dtype)]


def rank(env, node, ins):
    """The (public) rank of a private value."""
    return [np.asarray(ins[0].shape.rank, np.int32)]


def strided_slice(env, node, ins):
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


def top_k(env, node, ins):
    """TopKV2: (values, indices) of the k largest entries along the last
    axis, both private (Batcher's network, as tp.math.top_k), k static."""
    k = int(static(env, ins[1], "k"))
    values, indices = impl("math.top_k")(env.operand(ins[0]), k,
                                         bool(node.attr.get("sorted", True)))
    return [values, indices]
