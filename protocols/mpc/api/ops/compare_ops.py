"""Comparisons and everything built on them (PrivPy §5.4-5.5, DESIGN §6).

Each comparison is the garbled-circuit protocol; results are private bits
(PrivateTensors of dtype bool) that can be used in arithmetic and revealed as
booleans. They are held as integer shares of 0 or 1 (frac_bits 0, no 2^f
scale) so that tp.where multiplies by them without truncation, exact in the
64-bit ring too (issue 15); C.shares makes them fixed point (exactly, a local
shift) wherever they enter arithmetic.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from . import _common as C
from . import array_ops
from ..value import PrivateTensor
from ...privpy import compare as P
from ...runtime import shares as sh


def _private_pair(x, y, what):
    """Both operands as PrivateTensors of the broadcast shape."""
    h = C.handle_of(x, y)
    shape = C.broadcast_shape(C.static_shape(x), C.static_shape(y), what)
    vals = []
    for v in (x, y):
        if not C.is_private(v):
            v = array_ops._public_as_private(h, C.public(v))
        vals.append(C.broadcast(h, v, shape))
    return h, vals[0], vals[1]


def _bits(h, s) -> PrivateTensor:
    """A private boolean from integer bit shares."""
    return C.wrap_bits(h, s)


def _check_any_private(what, *vals):
    if not any(C.is_private(v) for v in vals):
        raise TypeError(f"{what} needs at least one PrivateTensor (use tf.{what[3:]} "
                        "for public tensors)")


def less(x, y, name: Optional[str] = None, pregarbled=None) -> PrivateTensor:
    """Private [x < y] with broadcasting (one comparison per element, by the
    comparison family in use: tp.comparison, tp.Config(comparison=...)).

    Args:
      pregarbled: optional comparisons prepared ahead (the setup phase), by
        `tp.garble_comparisons` or `tp.prepare_comparisons`: their family
        runs, whatever is chosen now, and only its online messages travel.

    Example:
      >>> tp.reveal(tp.less(tp.share([1.0, 3.0]), 2.0))   # [True, False]
    """
    if not (C.is_private(x) or C.is_private(y)):
        return tf.less(x, y, name=name)
    h, a, b = _private_pair(x, y, "tp.less")
    return _bits(h, P.less(h.backend, C.shares(a), C.shares(b), pregarbled, integer=True))


def greater(x, y, name: Optional[str] = None, pregarbled=None) -> PrivateTensor:
    """Private [x > y]."""
    return less(y, x, name, pregarbled)


def garble_comparisons(shape):
    """Setup phase of the comparison protocol (DESIGN §6): garbles the
    comparators for ONE later `tp.less`/`tp.greater` of the given shape and
    stores the tables at T1 and T2, so that the online phase sends only
    input labels (about 2 KB per comparison). Single-use: a second use fails,
    also inside a re-run tf.function.

    Example:
      >>> g = tp.garble_comparisons([1000])
      >>> c = tp.less(x, y, pregarbled=g)
    """
    h = C.handle_of()
    return h.backend.garble_ahead(shape)


def prepare_comparisons(shape):
    """Setup phase of the comparison family in use (tp.comparison,
    tp.Config(comparison=...)) for ONE later `tp.less`/`tp.greater` of the
    given shape: garbled comparators stored at T1 and T2 (as
    `tp.garble_comparisons`), or, for the bitwise family, the triples T1
    deals stored at S2, so that the online phase is the servers' eight
    rounds between themselves (about 62 bytes per comparison). Single-use:
    a second use fails, also inside a re-run tf.function.

    Example:
      >>> with tp.comparison("bitwise"):
      ...     p = tp.prepare_comparisons([1000])
      >>> c = tp.less(x, y, pregarbled=p)
    """
    return C.handle_of().backend.prepare_ahead(shape)


def less_equal(x, y, name: Optional[str] = None) -> PrivateTensor:
    """Private [x <= y] = 1 - [y < x]."""
    if not (C.is_private(x) or C.is_private(y)):
        return tf.less_equal(x, y, name=name)
    h, a, b = _private_pair(x, y, "tp.less_equal")
    return _bits(h, P.not_(h.backend, P.less(h.backend, C.shares(b), C.shares(a),
                                             integer=True), integer=True))


def greater_equal(x, y, name: Optional[str] = None) -> PrivateTensor:
    """Private [x >= y]."""
    return less_equal(y, x, name)


def equal(x, y, name: Optional[str] = None) -> PrivateTensor:
    """Private [x == y] (two comparisons in one round)."""
    if not (C.is_private(x) or C.is_private(y)):
        return tf.equal(x, y, name=name)
    h, a, b = _private_pair(x, y, "tp.equal")
    return _bits(h, P.equal(h.backend, C.shares(a), C.shares(b), integer=True))


def not_equal(x, y, name: Optional[str] = None) -> PrivateTensor:
    """Private [x != y]."""
    e = equal(x, y, name)
    if not C.is_private(e):
        return e
    return logical_not(e)


def logical_not(c: PrivateTensor) -> PrivateTensor:
    """1 - c for a private bit."""
    h = C.handle_of(c)
    s, integer = C.bit_shares(c)
    out = P.not_(h.backend, s, integer)
    return _bits(h, out) if integer else C.wrap(h, out, tf.bool)


def sign(x: PrivateTensor, name: Optional[str] = None) -> PrivateTensor:
    """-1, 0 or 1 per element (tf.sign semantics)."""
    if not C.is_private(x):
        return tf.sign(x, name=name)
    h = C.handle_of(x)
    return C.wrap(h, P.sign(h.backend, C.shares(x)), x.dtype)


def abs(x: PrivateTensor, name: Optional[str] = None) -> PrivateTensor:  # noqa: A001
    """|x| (one comparison, one multiplication)."""
    if not C.is_private(x):
        return tf.abs(x, name=name)
    h = C.handle_of(x)
    return C.wrap(h, P.abs_(h.backend, C.shares(x)), x.dtype)


def where(condition, x, y, name: Optional[str] = None):
    """condition ? x : y elementwise, with broadcasting.

    A private condition selects obliviously (y + c·(x - y), one
    multiplication); a public boolean condition selects locally.
    """
    if not C.is_private(condition):
        cond = tf.convert_to_tensor(condition)
        if cond.dtype != tf.bool:
            raise TypeError("tp.where: a public condition must be boolean")
        if not (C.is_private(x) or C.is_private(y)):
            return tf.where(cond, x, y, name=name)
        from . import math_ops
        c = tf.cast(cond, tf.float64)
        x, y = [v if C.is_private(v) else tf.cast(C.public(v), tf.float64) for v in (x, y)]
        return math_ops.add(math_ops.multiply(x, c), math_ops.multiply(y, 1.0 - c))
    h = C.handle_of(condition, x, y)
    shape = C.broadcast_shape(condition.shape, C.broadcast_shape(
        C.static_shape(x), C.static_shape(y), "tp.where"), "tp.where")
    vals = []
    for v in (condition, x, y):
        if not C.is_private(v):
            v = array_ops._public_as_private(h, C.public(v))
        vals.append(C.broadcast(h, v, shape))
    c, a, b = vals
    dtype = C.result_dtype(C.operand_dtype(x), C.operand_dtype(y))
    # A comparison's bit is an integer share: the select is exact (issue 15).
    cs, integer = C.bit_shares(c) if c.dtype == tf.bool else (C.shares(c), False)
    return C.wrap(h, P.select(h.backend, cs, C.shares(a), C.shares(b), integer), dtype)


def _extremum(x, y, want_min: bool, name: Optional[str]):
    if not (C.is_private(x) or C.is_private(y)):
        return (tf.minimum if want_min else tf.maximum)(x, y, name=name)
    h, a, b = _private_pair(x, y, "tp.minimum" if want_min else "tp.maximum")
    return C.wrap(h, P.maximum(h.backend, C.shares(a), C.shares(b), want_min),
                  C.result_dtype(C.operand_dtype(x), C.operand_dtype(y)))


def maximum(x, y, name: Optional[str] = None) -> PrivateTensor:
    """Elementwise max (one comparison, one multiplication)."""
    return _extremum(x, y, False, name)


def minimum(x, y, name: Optional[str] = None) -> PrivateTensor:
    """Elementwise min (one comparison, one multiplication)."""
    return _extremum(x, y, True, name)


def relu(x: PrivateTensor, name: Optional[str] = None) -> PrivateTensor:
    """max(x, 0) = x·[x >= 0] (tp.nn.relu)."""
    if not C.is_private(x):
        return tf.nn.relu(x, name=name)
    h = C.handle_of(x)
    return C.wrap(h, P.relu(h.backend, C.shares(x)), x.dtype)


def relu_many(xs) -> list:
    """ReLUs of independent PrivateTensors in ONE comparison batch and ONE
    multiplication batch: the rounds of a single ReLU whatever their number
    (PrivPy §5.6 batching; the converter's same-depth batching, DESIGN §8).

    Example:
      >>> a, b = tp.nn.relu_many([x, y])
    """
    xs = list(xs)
    if not xs:
        return []
    if not all(C.is_private(x) for x in xs):
        raise TypeError("tp.nn.relu_many takes PrivateTensors")
    h = C.handle_of(*xs)
    outs = P.relu_many(h.backend, [C.shares(x) for x in xs])
    return [C.wrap(h, o, x.dtype) for o, x in zip(outs, xs)]


def less_many(pairs) -> list:
    """[x < y] for independent pairs [(x1, y1), (x2, y2), ...] (at least one
    of each pair private) in ONE comparison batch: one comparison's rounds.

    Example:
      >>> c, d = tp.less_many([(x, y), (u, 0.0)])
    """
    pairs = list(pairs)
    if not pairs:
        return []
    h = C.handle_of(*[v for p in pairs for v in p])
    diffs = []
    for x, y in pairs:
        _check_any_private("tp.less_many", x, y)
        _, a, b = _private_pair(x, y, "tp.less_many")
        diffs.append(h.backend.sub(C.shares(a), C.shares(b)))
    return [_bits(h, s) for s in P.ltz_many(h.backend, diffs, integer=True)]


def _reduce(x: PrivateTensor, axis, keepdims: bool, want_min: bool) -> PrivateTensor:
    h = C.handle_of(x)
    s = C.shares(x)
    if axis is None:  # all axes: flatten
        s = h.backend.map_shares(lambda t: sh.reshape(t, [-1], h.config.limbs), s)
        out = P.reduce_max(h.backend, s, 0, False, want_min)
        if keepdims:
            out = h.backend.map_shares(
                lambda t: sh.reshape(t, [1] * x.shape.rank, h.config.limbs), out)
        return C.wrap(h, out, x.dtype)
    axes = [axis] if isinstance(axis, int) else sorted(
        {sh.norm_axis(a, x.shape.rank) for a in axis}, reverse=True)
    for a in axes:  # several axes: one after the other
        s = P.reduce_max(h.backend, s, a, keepdims, want_min)
    return C.wrap(h, s, x.dtype)


def reduce_max(input_tensor: PrivateTensor, axis=None, keepdims: bool = False,
               name: Optional[str] = None) -> PrivateTensor:
    """Max along axis by a comparison tree (ceil(log2 n) rounds)."""
    if not C.is_private(input_tensor):
        return tf.reduce_max(input_tensor, axis, keepdims, name=name)
    return _reduce(input_tensor, axis, keepdims, False)


def reduce_min(input_tensor: PrivateTensor, axis=None, keepdims: bool = False,
               name: Optional[str] = None) -> PrivateTensor:
    """Min along axis by a comparison tree."""
    if not C.is_private(input_tensor):
        return tf.reduce_min(input_tensor, axis, keepdims, name=name)
    return _reduce(input_tensor, axis, keepdims, True)


def _axis_last(x: PrivateTensor, axis: int, what: str):
    """(handle, shares with `axis` moved last, its static length, the inverse
    permutation) for the protocols that work along the last axis."""
    h = C.handle_of(x)
    limbs = h.config.limbs
    r = x.shape.rank
    axis = sh.norm_axis(axis, r)
    n = x.shape[axis]
    if n is None:
        raise ValueError(f"{what} needs a static length along the axis")
    perm = [i for i in range(r) if i != axis] + [axis]
    s = h.backend.map_shares(lambda t: sh.transpose(t, perm, limbs), C.shares(x))
    return h, s, n, [int(i) for i in np.argsort(perm)]


def _arg(x: PrivateTensor, axis: int, want_min: bool, output_type) -> PrivateTensor:
    h, s, n, _ = _axis_last(x, axis, "tp.argmax")
    _, idx = P.reduce_max_last(h.backend, s, n, want_min, with_index=True)
    return C.wrap(h, idx, output_type)


def argmax(input, axis: int = 0, output_type=tf.int64, name: Optional[str] = None):
    """Private index of the (first) maximum along axis."""
    if not C.is_private(input):
        return tf.argmax(input, axis, output_type=output_type, name=name)
    return _arg(input, axis, False, output_type)


def argmin(input, axis: int = 0, output_type=tf.int64, name: Optional[str] = None):
    """Private index of the (first) minimum along axis."""
    if not C.is_private(input):
        return tf.argmin(input, axis, output_type=output_type, name=name)
    return _arg(input, axis, True, output_type)


# Graph build of a sorting network: the protocol code is plain Python over
# static shapes, but inside a user's tf.function AutoGraph converted every
# function it calls (each layer's comparison, multiplication and channel
# sends), about two thirds of the 2^16 sort's trace time (issue 15).
def _sort(x: PrivateTensor, axis: int, descending: bool, with_index: bool):
    h, s, n, inv = _axis_last(x, axis, "tp.sort")
    limbs = h.config.limbs
    out = P.sort_last(h.backend, s, n, descending, with_index)
    back = lambda v: h.backend.map_shares(lambda t: sh.transpose(t, inv, limbs), v)  # noqa
    if with_index:
        return back(out[0]), back(out[1])
    return back(out)


def sort(values: PrivateTensor, axis: int = -1, direction: str = "ASCENDING",
         name: Optional[str] = None) -> PrivateTensor:
    """Sorts along axis with Batcher's odd-even merge network
    (O(log^2 n) comparison rounds)."""
    if not C.is_private(values):
        return tf.sort(values, axis, direction, name)
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError("direction must be 'ASCENDING' or 'DESCENDING'")
    h = C.handle_of(values)
    return C.wrap(h, _sort(values, axis, direction == "DESCENDING", False), values.dtype)


def top_k(input: PrivateTensor, k: int = 1, sorted: bool = True,  # noqa: A002
          name: Optional[str] = None):
    """(values, indices) of the k largest entries along the last axis, both
    private (tf.math.top_k semantics)."""
    if not C.is_private(input):
        return tf.math.top_k(input, k, sorted, name)
    n = input.shape[-1]
    if n is None or not 0 <= k <= n:
        raise ValueError(f"tp.math.top_k: k={k} must be in [0, {n}]")
    h = C.handle_of(input)
    v, i = _sort(input, -1, True, True)
    cut = lambda s: h.backend.map_shares(  # noqa: E731
        lambda t: sh.getitem(t, (Ellipsis, slice(0, k)), h.config.limbs), s)
    return C.wrap(h, cut(v), input.dtype), C.wrap(h, cut(i), tf.int32)


def clip_by_value(t, clip_value_min, clip_value_max, name: Optional[str] = None):
    """min(max(t, clip_value_min), clip_value_max) elementwise (tf.clip_by_value
    semantics: the result has t's shape and dtype). Two comparisons per
    element, in two rounds.

    Example:
      >>> tp.clip_by_value(tp.share([-2.0, 0.5, 3.0]), -1.0, 1.0).reveal()   # [-1., 0.5, 1.]
    """
    if not any(C.is_private(v) for v in (t, clip_value_min, clip_value_max)):
        return tf.clip_by_value(t, clip_value_min, clip_value_max, name=name)
    out = minimum(maximum(t, clip_value_min), clip_value_max)
    shape = C.static_shape(t)
    if out.shape != shape:
        raise ValueError(f"tp.clip_by_value: the clip values (shapes "
                         f"{C.static_shape(clip_value_min)}, {C.static_shape(clip_value_max)}) "
                         f"must not broadcast t (shape {shape}) to a larger shape")
    return C.wrap(C.handle_of(out), C.shares(out), C.operand_dtype(t))
