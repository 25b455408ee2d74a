"""Neural-network ops on PrivateTensors (tp.nn)."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from . import _common as C
from . import array_ops, compare_ops, math_ops
from .compare_ops import relu
from .math_fns import log_softmax, sigmoid, softmax, tanh  # noqa: F401
from ..value import PrivateTensor
from ...privpy import compare as P
from ...runtime import shares as sh


def _pair(v, what) -> Tuple[int, int]:
    if isinstance(v, int):
        return v, v
    v = list(v)
    if len(v) == 4:  # NHWC-style [1, h, w, 1]
        if v[0] != 1 or v[3] != 1:
            raise ValueError(f"{what} {v}: batch and channel entries must be 1")
        v = v[1:3]
    if len(v) != 2:
        raise ValueError(f"{what} must be an int, or 2 or 4 values, got {v}")
    return int(v[0]), int(v[1])


def _explicit_padding(padding, in_hw, k_hw, s_hw):
    """TF's SAME/VALID (or explicit [[0,0],[t,b],[l,r],[0,0]]) as (t, b, l, r)."""
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        if padding.upper() != "SAME":
            raise ValueError(f"padding must be 'SAME', 'VALID' or explicit, got {padding!r}")
        pads = []
        for n, k, s in zip(in_hw, k_hw, s_hw):
            out = -(-n // s)
            total = max((out - 1) * s + k - n, 0)
            pads += [total // 2, total - total // 2]
        return tuple(pads)
    p = [list(x) for x in padding]
    if len(p) != 4 or p[0] != [0, 0] or p[3] != [0, 0]:
        raise ValueError("explicit padding must be [[0,0],[top,bottom],[left,right],[0,0]]")
    return p[1][0], p[1][1], p[2][0], p[2][1]


def conv2d(input, filters, strides=1, padding: Union[str, Sequence] = "VALID",
           data_format: str = "NHWC", dilations=None, name: Optional[str] = None):
    """2-D convolution (tf.nn.conv2d semantics, NHWC input, HWIO filters).

    Private input and private filters run the four-server protocol once,
    with the assistants convolving masked operands; a public operand makes it
    local. Strides and SAME/VALID/explicit padding are supported.

    Example:
      >>> y = tp.nn.conv2d(tp.share(images), tp.share(kernel), strides=1, padding="SAME")
    """
    if not (C.is_private(input) or C.is_private(filters)):
        return tf.nn.conv2d(input, filters, strides, padding, data_format, dilations, name)
    if data_format not in (None, "NHWC"):
        raise ValueError("tp.nn.conv2d supports data_format='NHWC' only")
    if dilations not in (None, 1, [1, 1], [1, 1, 1, 1], (1, 1), (1, 1, 1, 1)):
        raise ValueError("tp.nn.conv2d supports dilations of 1 only")
    h = C.handle_of(input, filters)
    dtype = C.result_dtype(C.operand_dtype(input), C.operand_dtype(filters))
    x = input if C.is_private(input) else C.public(input)
    w = filters if C.is_private(filters) else C.public(filters)
    xs, ws = C.static_shape(x), C.static_shape(w)
    if xs.rank != 4 or ws.rank != 4 or not (xs[1:].is_fully_defined() and ws.is_fully_defined()):
        raise ValueError(f"tp.nn.conv2d needs an NHWC input and HWIO filters of known shape, "
                         f"got {xs} and {ws}")
    if xs[3] != ws[2]:
        raise ValueError(f"tp.nn.conv2d: input has {xs[3]} channels, filters expect {ws[2]}")
    st = _pair(strides, "strides")
    pads = _explicit_padding(padding, (xs[1], xs[2]), (ws[0], ws[1]), st)
    if C.is_private(x) and C.is_private(w):
        s = h.backend.mul(C.shares(x), C.shares(w), "conv2d", st, pads)
    elif C.is_private(x):
        s = h.backend.mul_public(C.shares(x), w, "conv2d", strides=st, padding=pads,
                                 name=name or "")
    else:
        s = h.backend.mul_public(C.shares(w), x, "conv2d", public_left=True, strides=st,
                                 padding=pads, name=name or "")
    return C.wrap(h, s, dtype)


def avg_pool2d(input: PrivateTensor, ksize, strides, padding: str = "VALID",
               data_format: str = "NHWC", name: Optional[str] = None) -> PrivateTensor:
    """Average pooling (tf.nn.avg_pool2d semantics; SAME averages over the
    in-bounds taps only, like TensorFlow). Local: window sums of shares times
    a public 1/count."""
    if not C.is_private(input):
        return tf.nn.avg_pool2d(input, ksize, strides, padding, data_format, name)
    if data_format not in (None, "NHWC"):
        raise ValueError("tp.nn.avg_pool2d supports data_format='NHWC' only")
    xs = input.shape
    kh, kw, sh_, sw, (t, b, l, r), (H, W), (oh, ow) = _pool_geometry(
        input, ksize, strides, padding, "tp.nn.avg_pool2d")
    x = array_ops.pad(input, [[0, 0], [t, b], [l, r], [0, 0]]) if (t or b or l or r) else input
    total = None
    for i in range(kh):
        for j in range(kw):
            win = x[:, i:i + (oh - 1) * sh_ + 1:sh_, j:j + (ow - 1) * sw + 1:sw, :]
            total = win if total is None else math_ops.add(total, win)
    # Number of in-bounds taps per output position (public).
    mask = np.zeros((H, W))
    mask[t:t + xs[1], l:l + xs[2]] = 1
    counts = np.zeros((oh, ow))
    for i in range(kh):
        for j in range(kw):
            counts += mask[i:i + (oh - 1) * sh_ + 1:sh_, j:j + (ow - 1) * sw + 1:sw]
    return math_ops.divide(total, tf.constant(counts[None, :, :, None], tf.float64))


def _pool_geometry(input: PrivateTensor, ksize, strides, padding, what):
    """(kh, kw, sh, sw, (top, bottom, left, right) padding, padded (H, W),
    output (OH, OW)) of pooling an NHWC input of known shape."""
    xs = input.shape
    if xs.rank != 4 or not xs[1:].is_fully_defined():
        raise ValueError(f"{what} needs an NHWC input of known shape, got {xs}")
    kh, kw = _pair(ksize, "ksize")
    sh_, sw = _pair(strides, "strides")
    t, b, l, r = _explicit_padding(padding, (xs[1], xs[2]), (kh, kw), (sh_, sw))
    H, W = xs[1] + t + b, xs[2] + l + r
    return kh, kw, sh_, sw, (t, b, l, r), (H, W), ((H - kh) // sh_ + 1, (W - kw) // sw + 1)


def _windows(input: PrivateTensor, ksize, strides, padding, what):
    """The pooling windows of an NHWC input stacked on a new last axis
    [N, OH, OW, C, kh*kw] (local slicing), with SAME padding by zeros."""
    if not C.is_private(input):
        raise TypeError(f"{what} takes a PrivateTensor")
    kh, kw, sh_, sw, (t, b, l, r), (H, W), (oh, ow) = _pool_geometry(
        input, ksize, strides, padding, what)
    if t or b or l or r:
        # Max pooling must ignore padding: pad with the most negative encodable
        # value, so a padded tap never wins (a public constant, so local).
        h = C.handle_of(input)
        low = -(h.config.bound * (1 - 2.0 ** -8))
        shifted = math_ops.subtract(input, low)
        x = math_ops.add(array_ops.pad(shifted, [[0, 0], [t, b], [l, r], [0, 0]]), low)
    else:
        x = input
    if (kh, kw) == (sh_, sw):
        # Windows that tile the input: a reshape, a transpose and a reshape
        # per share (6 ops) instead of kh*kw strided slices and a stack (17
        # for 2x2); the same taps in the same order (i*kw + j).
        c = x.shape[3]
        if (oh * kh, ow * kw) != (H, W):
            x = x[:, :oh * kh, :ow * kw, :]
        x = array_ops.reshape(x, [-1, oh, kh, ow, kw, c])
        x = array_ops.transpose(x, [0, 1, 3, 5, 2, 4])
        return array_ops.reshape(x, [-1, oh, ow, c, kh * kw]), kh * kw
    wins = [x[:, i:i + (oh - 1) * sh_ + 1:sh_, j:j + (ow - 1) * sw + 1:sw, :]
            for i in range(kh) for j in range(kw)]
    return array_ops.stack(wins, axis=-1), kh * kw


def max_pool2d(input: PrivateTensor, ksize, strides, padding: str = "VALID",
               data_format: str = "NHWC", name: Optional[str] = None) -> PrivateTensor:
    """Max pooling (tf.nn.max_pool2d semantics) by a comparison tree over each
    window: ceil(log2(kh*kw)) comparison rounds for all windows at once.

    For relu followed by max pooling use `max_pool2d_relu`, which computes the
    same values as relu(max_pool2d(x)) with kh*kw times fewer ReLU comparisons
    (maxpool and relu commute).
    """
    if not C.is_private(input):
        return tf.nn.max_pool2d(input, ksize, strides, padding, data_format, name)
    if data_format not in (None, "NHWC"):
        raise ValueError("tp.nn.max_pool2d supports data_format='NHWC' only")
    win, n = _windows(input, ksize, strides, padding, "tp.nn.max_pool2d")
    h = C.handle_of(win)
    return C.wrap(h, P.reduce_max_last(h.backend, C.shares(win), n), input.dtype)


def max_pool2d_relu(input: PrivateTensor, ksize, strides, padding: str = "VALID",
                    name: Optional[str] = None) -> PrivateTensor:
    """maxpool(relu(x)) computed as relu(maxpool(x)): the ReLU then runs on
    the pooled tensor only (PrivPy §6.2)."""
    return relu(max_pool2d(input, ksize, strides, padding))


def bias_add(value, bias, data_format: Optional[str] = None,
             name: Optional[str] = None) -> PrivateTensor:
    """value + bias along the channel axis (tf.nn.bias_add semantics: the last
    axis for data_format None or "N...C", axis 1 for "NC..."). Local.

    Example:
      >>> tp.nn.bias_add(tp.share(tf.ones([2, 3])), [1.0, 2.0, 3.0]).reveal()
    """
    if not (C.is_private(value) or C.is_private(bias)):
        return tf.nn.bias_add(value, bias, data_format, name)
    vs, bs = C.static_shape(value), C.static_shape(bias)
    if bs.rank != 1:
        raise ValueError(f"tp.nn.bias_add: bias must be a vector, got shape {bs}")
    if vs.rank is None or vs.rank < 2:
        raise ValueError(f"tp.nn.bias_add: value must have rank >= 2, got shape {vs}")
    channels_first = data_format is not None and data_format.startswith("NC")
    axis = 1 if channels_first else vs.rank - 1
    if vs[axis] is not None and bs[0] is not None and vs[axis] != bs[0]:
        raise ValueError(f"tp.nn.bias_add: bias has {bs[0]} entries, value has {vs[axis]} "
                         f"channels (axis {axis}, data_format={data_format!r})")
    if channels_first:
        shape = [bs[0]] + [1] * (vs.rank - 2)
        bias = (array_ops.reshape(bias, shape) if C.is_private(bias)
                else tf.reshape(C.public(bias), shape))
    return math_ops.add(value, bias, name=name)


def _log1p_exp_neg(a: PrivateTensor) -> PrivateTensor:
    """log(1 + exp(-a)) for a >= 0: exp's input is <= 0 and log's in [1, 2],
    where both are accurate (the naive log(1 + exp(x)) saturates with exp)."""
    from . import math_fns
    return math_fns.log(math_ops.add(math_fns.exp(math_ops.negative(a)), 1.0))


def softplus(features: PrivateTensor, name: Optional[str] = None) -> PrivateTensor:
    """log(1 + exp(x)), computed as max(x, 0) + log(1 + exp(-|x|)) with
    max(x, 0) = (x + |x|) / 2: one comparison, exp and log on small ranges.

    Example:
      >>> tp.nn.softplus(tp.share([-1.0, 0.0, 5.0])).reveal()   # [0.31326, 0.69315, 5.00672]
    """
    if not C.is_private(features):
        return tf.nn.softplus(features, name=name)
    a = compare_ops.abs(features)
    pos = math_ops.multiply(math_ops.add(features, a), 0.5)
    return math_ops.add(pos, _log1p_exp_neg(a))


def sigmoid_cross_entropy_with_logits(labels=None, logits=None,
                                      name: Optional[str] = None) -> PrivateTensor:
    """Logistic loss per element, tf.nn.sigmoid_cross_entropy_with_logits's
    stable form max(x, 0) - x·z + log(1 + exp(-|x|)) (x logits, z labels;
    either or both private).

    Example:
      >>> tp.nn.sigmoid_cross_entropy_with_logits(labels=[1.0], logits=tp.share([2.0])).reveal()
    """
    if labels is None or logits is None:
        raise ValueError("tp.nn.sigmoid_cross_entropy_with_logits needs labels and logits")
    if not (C.is_private(labels) or C.is_private(logits)):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits, name=name)
    ls, xs = C.static_shape(labels), C.static_shape(logits)
    if not ls.is_compatible_with(xs):
        raise ValueError(f"tp.nn.sigmoid_cross_entropy_with_logits: labels {ls} and logits {xs} "
                         "must have the same shape")
    x = logits if C.is_private(logits) else array_ops._public_as_private(
        C.handle_of(labels), C.public(logits))
    return math_ops.subtract(softplus(x), math_ops.multiply(x, labels), name=name)
