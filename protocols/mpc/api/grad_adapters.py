"""Adapters for the ops a traced TRAINING step adds to a model's graph
(DESIGN §8 "Training"): gradient ops (BiasAddGrad, ReluGrad, SigmoidGrad,
TanhGrad, Conv2DBackpropInput/Filter), the fused losses
(SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits,
SquaredDifference) and the bookkeeping ops of tf.GradientTape (AddN, Cast,
DivNoNan, Slice, ZerosLike, OnesLike).

The op table's converter-only rows (registry.py) name them, beside the
inference adapters (adapters.py), so the converter's analysis,
tp.converters.supported_ops() and every converted graph see them; like
those, each one composes registry ops only and re-implements nothing. The
resource ops of the optimizer update (ReadVariableOp, Assign*VariableOp,
ResourceApplyGradientDescent, ...) are stateful and handled by the
training evaluator (converters/training.py), not here. ReLU's training form
(keeping its private bit for ReluGrad) is adapters.relu.

Cost notes: ReluGrad is one comparison and one multiplication per element
(dy·[y > 0]); SigmoidGrad two multiplications (dy·y·(1 − y)); TanhGrad two
(dy·(1 − y²)); SoftmaxCrossEntropyWithLogits one private softmax for its
backprop output (softmax(logits) − labels) and a log_softmax only if its
loss output is used by the converted step (the training evaluator tells the
adapter through env.consumed).
"""
from __future__ import annotations

from typing import List

import numpy as np
import tensorflow as tf

from .adapters import Unsupported, fmt, hw, impl, numerics, padding, private as _private, static
from .ops import _common as C
from .value import PrivateTensor


def _consumed(env, node, index: int) -> bool:
    """Whether output `index` of the node is used by the converted graph
    (unknown: assume it is)."""
    used = getattr(env, "consumed", None)
    return used is None or (node.name, index) in used


# ------------------------------------------------------------ activations
def relu_grad(env, node, ins):
    """dy·[features > 0]: TF passes ReLU's output (or input) as features;
    one private comparison, then a product by the private bit."""
    dy, feat = env.operand(ins[0]), env.operand(ins[1])
    cache = getattr(env, "relu_bits", None)
    bit = cache.get(id(feat)) if cache is not None else None
    if bit is None:
        bit = impl("greater")(feat, 0.0)
    return [impl("multiply")(dy, bit)]


def sigmoid_grad(env, node, ins):
    """dy·y·(1 − y), y = sigmoid(x) the forward output."""
    y, dy = env.operand(ins[0]), env.operand(ins[1])
    return [impl("multiply")(dy, impl("multiply")(y, impl("subtract")(1.0, y)))]


def tanh_grad(env, node, ins):
    """dy·(1 − y²), y = tanh(x) the forward output."""
    y, dy = env.operand(ins[0]), env.operand(ins[1])
    return [impl("multiply")(dy, impl("subtract")(1.0, impl("square")(y)))]


def bias_add_grad(env, node, ins):
    """The bias gradient: dy summed over every axis but the channel axis
    (local)."""
    dy = env.operand(ins[0])
    rank = dy.shape.rank
    channel = rank - 1 if fmt(node) == "NHWC" else 1
    return [impl("reduce_sum")(dy, [a for a in range(rank) if a != channel], False)]


# ----------------------------------------------------------------- losses
def softmax_xent(env, node, ins):
    """Outputs (loss, backprop): backprop = softmax(logits) − labels (the
    gradient of the loss with respect to the logits), loss =
    −Σ labels·log_softmax(logits), computed only when the step uses it."""
    logits, labels = env.operand(ins[0]), env.operand(ins[1])
    return _xent(env, node, logits, labels)


def _xent(env, node, logits, labels):
    backprop = impl("subtract")(impl("nn.softmax")(logits, -1, **numerics(env)), labels)
    loss = None
    if _consumed(env, node, 0):
        loss = impl("negative")(impl("reduce_sum")(
            impl("multiply")(labels, impl("nn.log_softmax")(logits, -1, **numerics(env))),
            [-1], False))
    return [loss, backprop]


def sparse_softmax_xent(env, node, ins):
    """As SoftmaxCrossEntropyWithLogits with integer labels: public labels
    are one-hot encoded in the clear; private labels by one private equality
    per class ([label == c], two comparisons each)."""
    logits, labels = env.operand(ins[0]), env.operand(ins[1])
    classes = logits.shape[-1]
    if classes is None:
        raise Unsupported("the number of classes is not known when converting",
                          "give the model a static output shape")
    if _private(labels):
        onehot = impl("equal")(impl("expand_dims")(labels, -1),
                               np.arange(classes, dtype=np.float64))
    else:
        onehot = tf.one_hot(tf.cast(labels, tf.int32), classes, dtype=logits.dtype)
    return _xent(env, node, logits, onehot)


def squared_difference(env, node, ins):
    """(x − y)²: one private multiplication."""
    return [impl("square")(impl("subtract")(env.operand(ins[0]), env.operand(ins[1])))]


# ------------------------------------------------------------ bookkeeping
def add_n(env, node, ins):
    """Gradient accumulation: a sum (local)."""
    out = env.operand(ins[0])
    for v in ins[1:]:
        out = impl("add")(out, env.operand(v))
    return [out]


def cast(env, node, ins):
    """The ring encoding does not depend on the dtype (it only says what
    reveal() returns), so casts between float types, between integer types
    and from integers to floats only retag the value (integer labels of a
    sparse loss); a cast from float to integer (rounding) is refused."""
    x = env.operand(ins[0])
    dst = node.attr.get("DstT")
    if _private(x) and dst is not None and not (x.dtype.is_floating and dst.is_integer):
        if dst == x.dtype:
            return [x]
        return [C.wrap(C.handle_of(x), C.shares(x), dst)]
    raise Unsupported(f"a cast of a private {getattr(x, 'dtype', '?')} value to {dst}",
                      "keep private values in float")


def div_no_nan(env, node, ins):
    """x / y, 0 where y == 0, for a public divisor (the loss reduction's
    division by the batch size): a product by the public 1/y."""
    x, y = env.operand(ins[0]), ins[1]
    if _private(env.operand(y)):
        raise Unsupported("division by a private value in DivNoNan",
                          "divide by public values (the batch size)")
    y = np.asarray(static(env, y, "divisor"), np.float64)
    inv = np.where(y == 0, 0.0, 1.0 / np.where(y == 0, 1.0, y))
    return [impl("multiply")(x, inv)]


def slice_(env, node, ins):
    begin = static(env, ins[1], "slice begin").tolist()
    size = static(env, ins[2], "slice size").tolist()
    key = tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))
    return [impl("getitem")(env.operand(ins[0]), key)]


def shape_n(env, node, ins):
    """The (public) shapes of several values, as Shape does for one."""
    out = []
    dtype = node.attr.get("out_type") or tf.int32
    for v in ins:
        shape = v.shape if not isinstance(v, np.ndarray) else tf.TensorShape(v.shape)
        if not shape.is_fully_defined():
            raise Unsupported("the shape of a private value is not known when converting",
                              "give the input signature a fixed batch size")
        out.append(np.asarray(shape.as_list(), dtype.as_numpy_dtype))
    return out


def fill_like(env, node, ins):
    """Public zeros or ones of a private value's (public) shape."""
    x = env.operand(ins[0])
    fill = np.zeros if node.op == "ZerosLike" else np.ones
    return [fill(x.shape.as_list(), x.dtype.as_numpy_dtype)]


# ----------------------------------------------------------- convolutions
def _conv_strides(node, what) -> List[int]:
    """The forward convolution's [sh, sw] (any stride; no dilation, NHWC)."""
    if hw(node, "dilations") != [1, 1]:
        raise Unsupported(f"{what} of a dilated convolution",
                          "use dilation_rate=1 in trained convolutions")
    if fmt(node) != "NHWC":
        raise Unsupported(f"{what} in NCHW", "use channels-last (NHWC)")
    return hw(node, "strides")


def _forward_pads(node, in_hw: List[int], k_hw: List[int], strides: List[int]
                  ) -> List[List[int]]:
    """[[top, bottom], [left, right]] of the forward convolution, as TF pads
    SAME: total max((ceil(n/s) - 1)·s + k - n, 0), the smaller half on top."""
    pad = padding(node)
    if pad == "VALID":
        return [[0, 0], [0, 0]]
    if pad == "SAME":
        tot = [max((-(-n // s) - 1) * s + k - n, 0) for n, k, s in zip(in_hw, k_hw, strides)]
        return [[t // 2, t - t // 2] for t in tot]
    return [list(pad[1]), list(pad[2])]


def _out_hw(in_hw: List[int], k_hw: List[int], strides: List[int], pads) -> List[int]:
    return [(n + p[0] + p[1] - k) // s + 1 for n, k, s, p in zip(in_hw, k_hw, strides, pads)]


def conv2d_backprop_input(env, node, ins):
    """dx = conv2d(dy padded by (k − 1 − forward pad), plus the rows no
    window reached, the filter flipped in space with in/out channels
    swapped), VALID: one private product, the registry's conv2d. A strided
    one goes through _strided_input_grad (a stride-1 one of the
    stride-dilated dy would multiply its zeros, Dumoulin & Visin 2016,
    §4.5)."""
    strides = _conv_strides(node, "Conv2DBackpropInput")
    in_shape = static(env, ins[0], "input sizes").tolist()
    w, dy = env.operand(ins[1]), env.operand(ins[2])
    kh, kw = w.shape.as_list()[:2]
    pads = _forward_pads(node, in_shape[1:3], [kh, kw], strides)
    out_hw = _out_hw(in_shape[1:3], [kh, kw], strides, pads)
    if strides != [1, 1]:
        return [_strided_input_grad(w, dy, in_shape[1:3], strides, pads)]
    # padded rows past the last window's reach get no gradient
    rest = [n + p[0] + p[1] - ((o - 1) * s + k)
            for n, p, o, s, k in zip(in_shape[1:3], pads, out_hw, strides, (kh, kw))]
    back = [[0, 0]] + [[k - 1 - p[0], k - 1 - p[1] + r]
                       for k, p, r in zip((kh, kw), pads, rest)] + [[0, 0]]
    flipped = impl("transpose")(impl("getitem")(w, (slice(None, None, -1),
                                                    slice(None, None, -1))), [0, 1, 3, 2])
    padded = impl("pad")(dy, back) if any(any(p) for p in back) else dy
    return [impl("nn.conv2d")(padded, flipped, strides=[1, 1], padding="VALID",
                              data_format="NHWC")]


def _strided_input_grad(w, dy, in_hw: List[int], strides: List[int], pads):
    """The input gradient of a strided convolution without dilating dy:
    padded row Y = s·m + a gets Σ_i' dy[m − i']·W[s·i' + a], a stride-1
    full correlation of dy with the phase filter W[a::s] (the polyphase
    decomposition, as _filter_grad). The sh·sw phase filters,
    zero-padded to ceil(k/s) taps, flipped, in/out channels swapped, are
    the output channels of one VALID conv2d of dy padded by ceil(k/s) − 1:
    one private product over ceil(k/s)² taps of dy instead of k² taps of a
    dy three quarters zeros at stride 2 (its messages about 4x smaller);
    the phases are then interleaved into rows s·m + a and cropped to the
    input (rows no window reached get zeros). Pad, reshape, transpose and
    slice: local and exact on shares."""
    (sh, sw) = strides
    kh, kw, c, o = w.shape.as_list()
    qh, qw = -(-kh // sh), -(-kw // sw)
    if qh * sh != kh or qw * sw != kw:
        w = impl("pad")(w, [[0, qh * sh - kh], [0, qw * sw - kw], [0, 0], [0, 0]])
    f = impl("transpose")(impl("reshape")(w, [qh, sh, qw, sw, c, o]), [0, 2, 5, 1, 3, 4])
    f = impl("reshape")(f, [qh, qw, o, sh * sw * c])
    f = impl("getitem")(f, (slice(None, None, -1), slice(None, None, -1)))
    n, ho, wo, _ = dy.shape.as_list()
    if qh > 1 or qw > 1:
        dy = impl("pad")(dy, [[0, 0], [qh - 1, qh - 1], [qw - 1, qw - 1], [0, 0]])
    out = impl("nn.conv2d")(dy, f, strides=[1, 1], padding="VALID", data_format="NHWC")
    mh, mw = ho + qh - 1, wo + qw - 1
    full = impl("transpose")(impl("reshape")(out, [n, mh, mw, sh, sw, c]), [0, 1, 3, 2, 4, 5])
    full = impl("reshape")(full, [n, mh * sh, mw * sw, c])
    (top, _), (left, _) = pads
    short = [max(0, top + in_hw[0] - mh * sh), max(0, left + in_hw[1] - mw * sw)]
    if any(short):
        full = impl("pad")(full, [[0, 0], [0, short[0]], [0, short[1]], [0, 0]])
    return impl("getitem")(full, (slice(None), slice(top, top + in_hw[0]),
                                  slice(left, left + in_hw[1])))


def conv2d_backprop_filter(env, node, ins):
    """dW[i, j, c, o] = Σ_n,h,w x_pad[n, s·h+i, s·w+j, c]·dy[n, h, w, o]:
    one private product, _filter_grad's conv2d of the input's stride phases
    with dy as the filter."""
    strides = _conv_strides(node, "Conv2DBackpropFilter")
    x, dy = env.operand(ins[0]), env.operand(ins[2])
    fshape = static(env, ins[1], "filter sizes").tolist()
    in_hw = x.shape.as_list()[1:3]
    pads = _forward_pads(node, in_hw, fshape[:2], strides)
    if any(any(p) for p in pads):
        x = impl("pad")(x, [[0, 0]] + pads + [[0, 0]])
    out_hw = _out_hw(in_hw, fshape[:2], strides, pads)
    return [_filter_grad(x, dy, fshape[:2], strides, out_hw)]


def _filter_grad(x, dy, k_hw: List[int], strides: List[int], out_hw: List[int]):
    """The filter gradient without dilating dy: tap i = s·i' + a reads
    x_pad[s·(h + i') + a], i.e. entry h + i' of the phase image x_pad[a::s]
    (the polyphase decomposition of a strided convolution), so each of the
    sh·sw phases is a stride-1 filter gradient over ceil(k/s) taps. The
    phases ride in the image axis of one VALID conv2d, [sh·sw·C, Hp, Wp, N]
    with dy [Ho, Wo, N, O] as the filter: one private product whose
    contraction is dy's Ho·Wo·N entries instead of the dilated dy's
    ((Ho−1)·s+1)·((Wo−1)·s+1)·N, three quarters of them zeros at stride 2
    (network D: 11.7 → 4.5 million products, dy's messages 3.7x smaller).
    At stride 1 there is one phase: x as [C, H, W, N] cropped to the
    windows' reach. Taps past the filter (s·i' + a >= k) are computed on the
    zero padding and dropped. Pad, reshape, transpose and slice: local and
    exact on shares."""
    (sh, sw), (kh, kw) = strides, k_hw
    qh, qw = -(-kh // sh), -(-kw // sw)
    hp, wp = out_hw[0] + qh - 1, out_hw[1] + qw - 1
    n, h, w, c = x.shape.as_list()
    if h < sh * hp or w < sw * wp:
        x = impl("pad")(x, [[0, 0], [0, max(0, sh * hp - h)], [0, max(0, sw * wp - w)], [0, 0]])
    if h > sh * hp or w > sw * wp:
        x = impl("getitem")(x, (slice(None), slice(0, sh * hp), slice(0, sw * wp)))
    dyt = impl("transpose")(dy, [1, 2, 0, 3])
    if sh == sw == 1:
        out = impl("nn.conv2d")(impl("transpose")(x, [3, 1, 2, 0]), dyt, strides=[1, 1],
                                padding="VALID", data_format="NHWC")
        return impl("transpose")(out, [1, 2, 0, 3])
    phases = impl("transpose")(impl("reshape")(x, [n, hp, sh, wp, sw, c]), [2, 4, 5, 1, 3, 0])
    phases = impl("reshape")(phases, [sh * sw * c, hp, wp, n])
    out = impl("nn.conv2d")(phases, dyt, strides=[1, 1], padding="VALID", data_format="NHWC")
    o = out.shape.as_list()[-1]
    taps = impl("transpose")(impl("reshape")(out, [sh, sw, c, qh, qw, o]), [3, 0, 4, 1, 2, 5])
    taps = impl("reshape")(taps, [qh * sh, qw * sw, c, o])
    if qh * sh != kh or qw * sw != kw:
        taps = impl("getitem")(taps, (slice(0, kh), slice(0, kw)))
    return taps


def max_pool_grad(env, node, ins):
    """The gradient of non-overlapping max pooling (window = stride, VALID,
    sizes divisible, NHWC): each window's gradient goes to the entries equal
    to its maximum, [x >= max] = [x == max] (one comparison per input
    element, as the window's max is >= every entry), times the upsampled
    gradient (one multiplication). Ties share the gradient (TF gives it to
    the first maximum only); after a ReLU, all-zero windows get a zero
    gradient from the ReLU anyway."""
    if fmt(node) != "NHWC":
        raise Unsupported("MaxPoolGrad in NCHW", "use channels-last (NHWC)")
    k, st = list(node.attr["ksize"]), list(node.attr["strides"])
    x, m, g = (env.operand(v) for v in ins)
    n, h, w, c = x.shape.as_list()
    kh, kw = k[1], k[2]
    if k != st or padding(node) not in ("VALID", "SAME") or h % kh or w % kw:
        raise Unsupported("the gradient of overlapping or padded max pooling",
                          "use pool_size == strides dividing the input size")
    six = [n, h // kh, kh, w // kw, kw, c]
    small = [n, h // kh, 1, w // kw, 1, c]
    xm = impl("reshape")(x, six)
    bits = impl("greater_equal")(xm, impl("broadcast_to")(impl("reshape")(m, small), six))
    up = impl("broadcast_to")(impl("reshape")(g, small), six) if _private(g) else \
        np.broadcast_to(np.reshape(np.asarray(g), small), six)
    return [impl("reshape")(impl("multiply")(bits, up), [n, h, w, c])]
