"""Comparison-based protocols on shares (PrivPy §5.4-5.5, DESIGN §6).

Everything here composes `Backend.ltz` (the garbled-circuit comparison)
with local linear operations and the multiplication protocol:
  select(c, a, b) = b + c·(a - b)          one multiplication
  max(a, b) = b + [b < a]·(a - b)          one comparison + one multiplication

Selects take the comparison bit as a plain integer share (0/1, no 2^f scale,
`ltz(integer=True)`) and multiply with `truncate=False`: c·(a - b) is then
already the fixed-point encoding of the selected difference, exact in the
ring. With a fixed-point bit c·2^f the product had to be truncated locally,
which fails with probability about |a - b|·2^(2f+1-l) per element (DESIGN §3;
PrivPy §5.1 truncation): in the 64-bit ring one max-of-4 output in 10^5 was
off by 2^32 (issue 15). Bits stay fixed point where they are values (tp.less,
tp.equal, tp.sign: the user may compute with them).
Independent comparisons and products of one level are always issued as one
batched call, so a tree of depth d costs d comparison rounds and d
multiplication rounds, whatever the batch size.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from . import shares as sh
from .backend import Backend, Shares


def ltz_many(backend: Backend, xs: Sequence[Shares], integer: bool = False) -> List[Shares]:
    """[x < 0] for several tensors in ONE comparison batch (one round);
    integer bits (0/1) with integer=True, else fixed point."""
    if len(xs) == 1:
        return [backend.ltz(xs[0], integer=integer)]
    limbs = backend.limbs
    shapes = [sh.dynamic_shape(x[0], limbs) for x in xs]
    sizes = [int(np.prod(s)) if isinstance(s, list) else tf.reduce_prod(s) for s in shapes]
    flat = backend.map_many(lambda parts: tf.concat([sh.reshape(p, [-1], limbs) for p in parts], 0),
                            list(xs))
    bits = backend.ltz(flat, integer=integer)
    out = []
    for i in range(2):
        with backend.on(i):
            out.append(tf.split(bits[i], tf.stack(sizes), axis=0))
    return [backend.map_shares(lambda s, shp=shp: sh.reshape(s, shp, limbs), (a, b))
            for a, b, shp in zip(out[0], out[1], shapes)]


def less(backend: Backend, x: Shares, y: Shares, pregarbled=None,
         integer: bool = False) -> Shares:
    """[x < y] (with garbled tables prepared ahead if `pregarbled` is given)."""
    return backend.ltz(backend.sub(x, y), pregarbled, integer=integer)


def not_(backend: Backend, c: Shares, integer: bool = False) -> Shares:
    """1 - c for a shared bit c (integer or fixed point, kept as given)."""
    one = tf.ones(sh.dynamic_shape(c[0], backend.limbs), tf.float64)
    return backend.public_sub(one, c, frac_bits=0 if integer else None)


def equal(backend: Backend, x: Shares, y: Shares, integer: bool = False) -> Shares:
    """[x == y] = 1 - [x < y] - [y < x]: two comparisons, one round."""
    d = backend.sub(x, y)
    lt, gt = ltz_many(backend, [d, backend.neg(d)], integer=integer)
    return not_(backend, backend.add(lt, gt), integer)


def sign(backend: Backend, x: Shares) -> Shares:
    """-1, 0 or 1 (tf.sign): [x > 0] - [x < 0], one comparison round."""
    neg, pos = ltz_many(backend, [x, backend.neg(x)])
    return backend.sub(pos, neg)


def select(backend: Backend, c: Shares, a: Shares, b: Shares, integer: bool = False) -> Shares:
    """c ? a : b for a shared bit c: b + c·(a - b), one multiplication
    without truncation. A fixed-point bit (integer=False: a user's tp.less
    result) is first made an integer bit by one local truncation of the
    exact multiple c·2^f (Backend.bits_from_fixed: fails with probability
    about 2^(f+1-l), not |a - b|·2^(2f+1-l))."""
    if not integer:
        c = backend.bits_from_fixed(c)
    return backend.add(b, backend.mul(c, backend.sub(a, b), truncate=False))


def abs_(backend: Backend, x: Shares) -> Shares:
    """|x| = x - 2·x·[x < 0] (integer bit: no truncation)."""
    c = backend.ltz(x, integer=True)
    xc = backend.mul(x, c, truncate=False)
    return backend.sub(x, backend.add(xc, xc))


def relu(backend: Backend, x: Shares) -> Shares:
    """max(x, 0) = x - x·[x < 0] (PrivPy §5.5); integer bit, no truncation."""
    return backend.sub(x, backend.mul(x, backend.ltz(x, integer=True), truncate=False))


def maximum(backend: Backend, a: Shares, b: Shares, want_min: bool = False) -> Shares:
    """max(a, b) = b + [b < a]·(a - b); min(a, b) = a - [b < a]·(a - b)
    (integer bit, no truncation)."""
    d = backend.sub(a, b)
    t = backend.mul(backend.ltz(backend.neg(d), integer=True), d, truncate=False)
    return backend.sub(a, t) if want_min else backend.add(b, t)


def minimum(backend: Backend, a: Shares, b: Shares) -> Shares:
    """min(a, b), one comparison and one multiplication."""
    return maximum(backend, a, b, want_min=True)


# ------------------------------------------------------------- reductions
def _split_last(backend: Backend, x: Shares, n: int) -> Tuple[Shares, Shares, Shares]:
    """(first half, second half, odd leftover or None) along the last axis."""
    h = n // 2
    limbs = backend.limbs
    a = backend.map_shares(lambda s: sh.getitem(s, (Ellipsis, slice(0, h)), limbs), x)
    b = backend.map_shares(lambda s: sh.getitem(s, (Ellipsis, slice(h, 2 * h)), limbs), x)
    rest = (backend.map_shares(lambda s: sh.getitem(s, (Ellipsis, slice(2 * h, n)), limbs), x)
            if n % 2 else None)
    return a, b, rest


def reduce_max_last(backend: Backend, x: Shares, n: int, want_min: bool = False,
                    with_index: bool = False):
    """Max (or min) over the last axis of static length n by a tree of
    comparisons: ceil(log2 n) levels, each one comparison round and one
    multiplication round for the whole level. With with_index, also the
    (shared, fixed-point) index of the first extremum. The bits are integer
    shares and the selects untruncated, so the outputs are exact."""
    limbs = backend.limbs
    if n < 1:
        raise ValueError("reduction over an empty axis")
    idx = None
    if with_index:
        shape = sh.dynamic_shape(x[0], limbs)
        pos = tf.broadcast_to(tf.range(n, dtype=tf.float64), shape)
        idx = backend.add_public(backend.sub(x, x), pos)
    while n > 1:
        a, b, rest = _split_last(backend, x, n)
        d = backend.sub(a, b)
        # c = 1 where b wins: b > a for max (first index wins ties), b < a for min
        c = backend.ltz(d if not want_min else backend.neg(d), integer=True)
        if with_index:
            ia, ib, irest = _split_last(backend, idx, n)
            di = backend.sub(ib, ia)
            neg_d = backend.neg(d)
            prod_v, prod_i = backend.mul_many([(c, neg_d), (c, di)], truncate=False)
            x, idx = backend.add(a, prod_v), backend.add(ia, prod_i)
        else:
            x = backend.add(a, backend.mul(c, backend.neg(d), truncate=False))
        if rest is not None:
            x = backend.map_many(lambda p: sh.concat(p, -1, limbs), [x, rest])
            if with_index:
                idx = backend.map_many(lambda p: sh.concat(p, -1, limbs), [idx, irest])
        n = (n + 1) // 2
    squeeze = lambda s: sh.squeeze(s, -1, limbs)  # noqa: E731
    x = backend.map_shares(squeeze, x)
    if with_index:
        return x, backend.map_shares(squeeze, idx)
    return x


def reduce_max(backend: Backend, x: Shares, axis: int, keepdims: bool = False,
               want_min: bool = False) -> Shares:
    """Max (or min) along `axis` (static length), a comparison tree."""
    limbs = backend.limbs
    shape = sh.logical_shape(x[0], limbs)
    r = shape.rank
    axis = sh.norm_axis(axis, r)
    n = shape[axis]
    if n is None:
        raise ValueError("reduce_max needs a static length along the reduced axis")
    perm = [i for i in range(r) if i != axis] + [axis]
    xt = backend.map_shares(lambda s: sh.transpose(s, perm, limbs), x)
    out = reduce_max_last(backend, xt, n, want_min)
    if keepdims:
        out = backend.map_shares(lambda s: sh.expand_dims(s, axis, limbs), out)
    return out


# --------------------------------------------------------------- sorting
def batcher_layers(n: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Layers of Batcher's odd-even merge sort for n elements, as index
    arrays (a, b), a < b, disjoint within a layer. Built for the next power
    of two; comparators touching indices >= n are dropped, which is the same
    as padding with +inf (they would never swap).

    Vectorized with numpy: the equivalent Python loops over the ~4·10^6
    comparators of n = 2^16 took 6-10 s of every graph build of tp.sort
    (issue 15)."""
    p = 1
    while p < n:
        p *= 2
    layers = []
    k = 1
    while k < p:
        j = k
        while j >= 1:
            starts = np.arange(j % k, max(p - j, 0), 2 * j, dtype=np.int64)
            a = (starts[:, None] + np.arange(j, dtype=np.int64)[None, :]).reshape(-1)
            b = a + j
            keep = (b < min(p, n)) & (a // (2 * k) == b // (2 * k))
            if keep.any():
                layers.append((a[keep], b[keep]))
            j //= 2
        k *= 2
    return layers


def batcher_pairs(n: int) -> List[List[Tuple[int, int]]]:
    """`batcher_layers` as lists of comparators (i, j)."""
    return [list(zip(a.tolist(), b.tolist())) for a, b in batcher_layers(n)]


def sort_last(backend: Backend, x: Shares, n: int, descending: bool = False,
              with_index: bool = False):
    """Sorts along the last axis (static length n) with Batcher's network:
    O(log^2 n) layers, each one comparison round and one multiplication
    round for all its comparators."""
    limbs = backend.limbs
    idx = None
    if with_index:
        shape = sh.dynamic_shape(x[0], limbs)
        idx = backend.add_public(backend.sub(x, x),
                                 tf.broadcast_to(tf.range(n, dtype=tf.float64), shape))
    for ia, ib in batcher_layers(n):
        touched = np.concatenate([ia, ib])
        rest = np.setdiff1d(np.arange(n), touched)
        order = np.concatenate([ia, ib, rest])
        inv = np.argsort(order)
        take = lambda s, i: sh.gather(s, i, -1, limbs)  # noqa: E731
        a = backend.map_shares(lambda s: take(s, ia), x)
        b = backend.map_shares(lambda s: take(s, ib), x)
        d = backend.sub(a, b)
        # c = 1 where the pair is out of order
        c = backend.ltz(backend.neg(d) if not descending else d, integer=True)
        if with_index:
            ja = backend.map_shares(lambda s: take(s, ia), idx)
            jb = backend.map_shares(lambda s: take(s, ib), idx)
            dv, di = backend.mul_many([(c, d), (c, backend.sub(ja, jb))], truncate=False)
        else:
            dv = backend.mul(c, d, truncate=False)
        lo, hi = backend.sub(a, dv), backend.add(b, dv)
        parts = [lo, hi]
        if len(rest):
            parts.append(backend.map_shares(lambda s: take(s, rest), x))
        x = backend.map_many(lambda p: take(sh.concat(p, -1, limbs), inv), parts)
        if with_index:
            iparts = [backend.sub(ja, di), backend.add(jb, di)]
            if len(rest):
                iparts.append(backend.map_shares(lambda s: take(s, rest), idx))
            idx = backend.map_many(lambda p: take(sh.concat(p, -1, limbs), inv), iparts)
    return (x, idx) if with_index else x
