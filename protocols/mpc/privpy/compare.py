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
multiplication rounds, whatever the batch size. A comparison's bit times
values goes through `Backend.ltz_mul`: the bitwise family runs those
products beside its comparison rounds (bitwise/selects.py), so there a
level costs the comparison's rounds only.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from ... import std_ops
from ..runtime import cost as C, kernels, shares as sh
from .backend import Backend, Shares
from ..runtime.devscope import device_scope


def ltz_many(backend: Backend, xs: Sequence[Shares], integer: bool = False) -> List[Shares]:
    """[x < 0] for several tensors in ONE comparison batch (one round);
    integer bits (0/1) with integer=True, else fixed point."""
    if len(xs) == 1:
        return [backend.ltz(xs[0], integer=integer)]
    return _batched(backend, xs, lambda flat: backend.ltz(flat, integer=integer))


def relu_many(backend: Backend, xs: Sequence[Shares]) -> List[Shares]:
    """ReLUs of several tensors as ONE `ltz_mul` batch: one comparison's
    and one multiplication's messages, a single ReLU's rounds."""
    if len(xs) == 1:
        return [relu(backend, xs[0])]
    return _batched(backend, xs, lambda flat: relu(backend, flat))


def _batched(backend: Backend, xs: Sequence[Shares], fn) -> List[Shares]:
    """fn (elementwise) of the tensors xs flattened into one, split back."""
    limbs = backend.limbs
    shapes = [sh.dynamic_shape(x[0], limbs) for x in xs]
    sizes = [int(np.prod(s)) if isinstance(s, list) else tf.reduce_prod(s) for s in shapes]
    flat = backend.map_many(lambda parts: tf.concat([sh.reshape(p, [-1], limbs) for p in parts], 0),
                            list(xs))
    got = fn(flat)
    out = []
    for i in range(2):
        with backend.on(i):
            out.append(tf.split(got[i], tf.stack(sizes), axis=0))
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
    (xc,) = backend.ltz_mul(x, [x])
    return backend.sub(x, backend.add(xc, xc))


def relu(backend: Backend, x: Shares) -> Shares:
    """max(x, 0) = x - x·[x < 0] (PrivPy §5.5); integer bit, no truncation."""
    return backend.sub(x, backend.ltz_mul(x, [x])[0])


def maximum(backend: Backend, a: Shares, b: Shares, want_min: bool = False) -> Shares:
    """max(a, b) = b + [b < a]·(a - b); min(a, b) = a - [b < a]·(a - b)
    (integer bit, no truncation)."""
    d = backend.sub(a, b)
    (t,) = backend.ltz_mul(backend.neg(d), [d])
    return backend.sub(a, t) if want_min else backend.add(b, t)


def minimum(backend: Backend, a: Shares, b: Shares) -> Shares:
    """min(a, b), one comparison and one multiplication."""
    return maximum(backend, a, b, want_min=True)


# ------------------------------------------------------------- reductions
def _split_last(backend: Backend, x: Shares, n: int) -> Tuple[Shares, Shares, Shares]:
    """(first half, second half, odd leftover or None) along the last axis
    (of length n): one SplitV per share, not a strided slice per part."""
    h = n // 2
    sizes = [h, h] + ([n - 2 * h] if n % 2 else [])
    splits = {}   # per share: its one SplitV, made on its holder at the first part
    def part(j):
        def take(s):
            if id(s) not in splits:
                last = s.shape.rank - (2 if backend.limbs == 2 else 1)
                splits[id(s)] = tf.split(s, sizes, axis=last)
            return splits[id(s)][j]
        return backend.map_shares(take, x)   # a wrapping CostTracker sees x's parts

    return part(0), part(1), (part(2) if n % 2 else None)


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
        # 0..n-1 along the last axis, broadcast on S1 (a constant S1 makes)
        idx = backend.add_public(backend.sub(x, x), np.arange(n, dtype=np.float64))
    while n > 1:
        a, b, rest = _split_last(backend, x, n)
        d = backend.sub(a, b)
        # c = 1 where b wins: b > a for max (first index wins ties), b < a for min
        z = d if not want_min else backend.neg(d)
        if with_index:
            ia, ib, irest = _split_last(backend, idx, n)
            prod_v, prod_i = backend.ltz_mul(z, [backend.neg(d), backend.sub(ib, ia)])
            x, idx = backend.add(a, prod_v), backend.add(ia, prod_i)
        else:
            x = backend.add(a, backend.ltz_mul(z, [backend.neg(d)])[0])
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
def _batcher_steps(n: int) -> List[Tuple[int, int, np.ndarray, np.ndarray]]:
    """(k, j, a, b) of each layer of Batcher's odd-even merge sort for n
    elements: comparators (a[t], a[t] + j) of the merge of blocks of k
    (see `batcher_layers`)."""
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
                layers.append((k, j, a[keep], b[keep]))
            j //= 2
        k *= 2
    return layers


def batcher_layers(n: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Layers of Batcher's odd-even merge sort for n elements, as index
    arrays (a, b), a < b, disjoint within a layer. Built for the next power
    of two; comparators touching indices >= n are dropped, which is the same
    as padding with +inf (they would never swap).

    Vectorized with numpy: the equivalent Python loops over the ~4·10^6
    comparators of n = 2^16 took 6-10 s of every graph build of tp.sort
    (issue 15)."""
    return [(a, b) for _, _, a, b in _batcher_steps(n)]


def batcher_pairs(n: int) -> List[List[Tuple[int, int]]]:
    """`batcher_layers` as lists of comparators (i, j)."""
    return [list(zip(a.tolist(), b.tolist())) for a, b in batcher_layers(n)]


def _exchange(backend: Backend, x: Shares, idx, ia, ib, inv, m, descending: bool):
    """One layer of compare-exchanges: the pairs (ia[t], ib[t]) along the
    last axis are put in order (one comparison round, one multiplication
    round), and the elements gathered back by `inv` from [lo, hi, x].
    ia, ib, inv, m: per share holder (tuples), or the same numpy arrays for
    both. With idx (the positions' shares), they move along."""
    limbs = backend.limbs
    per = lambda v, party: v[party] if isinstance(v, tuple) else v  # noqa: E731
    take = lambda v: lambda s, party: sh.gather(s, per(v, party), -1, limbs)  # noqa: E731
    pairs = [(backend.local(take(ia), v), backend.local(take(ib), v))
             for v in ((x,) if idx is None else (x, idx))]

    def back(lo, hi, old):
        return backend.local(lambda u, v, w, party: sh.gather(
            sh.concat([u, v, w], -1, limbs), per(inv, party), -1, limbs), lo, hi, old)

    out = [back(lo, hi, v) for (lo, hi), v in zip(_order(backend, pairs, descending),
                                                  (x, idx))]
    return out[0], (out[1] if idx is not None else None)


def _order(backend: Backend, pairs, descending: bool):
    """The compare-exchange of one layer: pairs[0] = (a, b), the values, are
    put in order (a <= b, or a >= b descending), and the pairs after it
    (the positions' shares) move along; one comparison with its selects
    (`Backend.ltz_mul`: the comparison's rounds, one product for all)."""
    (a, b), rest = pairs[0], pairs[1:]
    d = backend.sub(a, b)
    # c = 1 where the pair is out of order
    z = backend.neg(d) if not descending else d
    deltas = backend.ltz_mul(z, [d] + [backend.sub(u, v) for u, v in rest])
    return [(backend.sub(u, dv), backend.add(v, dv)) for (u, v), dv in zip(pairs, deltas)]


def _exchange_blocks(backend: Backend, x: Shares, idx, kj, n: int, descending: bool):
    """`_exchange` for layer (k, j) of a power-of-two n, with no index
    arrays: in each block of 2k positions the comparators are (t, t + j) for
    t in [off, 2k - off) with (t - off) mod 2j < j, off = j mod k (the
    `_batcher_steps` layer), so the block's middle reshaped to
    [groups, 2, j] holds the a's in row 0 and the b's in row 1. Slices and
    reshapes where `_exchange` gathers: the while-loop's body computes no
    comparators and gathers nothing. kj: the (k, j) int64 scalars of each
    share holder."""
    limbs = backend.limbs
    tail = (limbs,) if limbs == 2 else ()

    # The layer's geometry once per share holder, shared by the values and
    # indices and by split and join (the loop body is traced per op, so its
    # constants are made once per body and server: Runtime.constant).
    geo = []
    for party in range(2):
        const = lambda v, dtype=tf.int64, party=party: backend.rt.constant(  # noqa: E731
            backend.holders[party], v, dtype)
        with backend.on(party):
            k, j = kj[party]
            off = tf.math.floormod(j, k)
            two_k = k + k
            end = two_k - off
            blocks = tf.math.floordiv(const(n), two_k)
            dims = lambda *d: tf.stack([const(v) if isinstance(v, int) else v  # noqa: E731
                                        for v in (-1,) + d + tail])
            # the block's [off, end) middle and the untouched ends, by one SplitV
            geo.append(dict(parts=tf.stack([off, end - off, off]), axis=const(2, tf.int32),
                            blk=dims(blocks, two_k),
                            mid=dims(blocks, tf.math.floordiv(k - off, j), 2, j),
                            joined=dims(blocks, end - off)))

    def split(s, party):
        g = geo[party]
        first, middle, last = tf.split(std_ops.reshape(s, g["blk"]), g["parts"], num=3,
                                       axis=g["axis"])
        lo, hi = std_ops.unstack(std_ops.reshape(middle, g["mid"]), num=2, axis=3)
        return lo, hi, (first, last)

    def join(lo, hi, s, ends, party):
        g = geo[party]
        mid = std_ops.reshape(std_ops.stack([lo, hi], 3), g["joined"])
        whole = std_ops.concat([ends[0], mid, ends[1]], g["axis"])
        shape = (backend.rt.constant(backend.holders[party], s.shape.as_list())
                 if s.shape.is_fully_defined() else tf.shape(s, out_type=tf.int64))
        return std_ops.reshape(whole, shape)

    vals = (x,) if idx is None else (x, idx)
    pairs, ends = [], []
    for v in vals:
        halves = []
        for party in range(2):
            with backend.on(party):
                halves.append(split(v[party], party))
        lo, hi = (halves[0][0], halves[1][0]), (halves[0][1], halves[1][1])
        C.propagate(list(v), list(lo) + list(hi))
        pairs.append((lo, hi))
        ends.append((halves[0][2], halves[1][2]))
    out = [backend.local(join, lo, hi, v, e)
           for (lo, hi), v, e in zip(_order(backend, pairs, descending), vals, ends)]
    return out[0], (out[1] if idx is not None else None)


def _inverse(a: np.ndarray, b: np.ndarray, n: int, m: int) -> np.ndarray:
    """Where each position's new value lies in [lo (m), hi (m), x (n)]: the
    a's in lo, the b's in hi, the untouched ones in x (the loop's TF
    version: `_layer_indices`)."""
    inv = 2 * m + np.arange(n, dtype=np.int64)
    inv[a] = np.arange(m)
    inv[b] = m + np.arange(m)
    return inv


def _layer_indices(k, j, n: int, p: int):
    """The comparators (a, b) of layer (k, j) of `_batcher_steps`, the
    inverse gather and their number, computed in TF from the scalars k, j
    (int64), so that one loop body serves every layer.

    From masks over the n positions, in int32, with no scatter: position t
    is an `a` when it starts a pair (t - j % k mod 2j < j), its partner
    t + j exists and lies in its block of 2k; a `b` when t - j is an `a`;
    a position's index in a (and its partner's in b) is the exclusive
    cumulative count of a's before it. The scatters of the inverse took two
    thirds of this function's time (0.25 s per holder for the 136 layers of
    2^16 on 2 loaded cores; these masks 0.19 s, the same indices exactly)."""
    del p   # the starts need not be enumerated: the masks cover [0, n)
    k, j = tf.cast(k, tf.int32), tf.cast(j, tf.int32)
    t = tf.range(n, dtype=tf.int32)
    off = j % k
    # k and j are powers of two: the bitwise ands are the mods
    is_a = ((t >= off) & (tf.bitwise.bitwise_and(t - off, 2 * j - 1) < j) & (t + j < n)
            & (tf.bitwise.bitwise_and(t, 2 * k - 1) + j < 2 * k))
    ones = tf.cast(is_a, tf.int32)
    before = tf.math.cumsum(ones, exclusive=True)
    m = tf.reduce_sum(ones)
    a = tf.cast(tf.reshape(tf.where(is_a), [-1]), tf.int32)
    shift = lambda v: tf.concat([tf.zeros([j], v.dtype), v[:n - j]], 0)  # noqa: E731
    inv = tf.where(is_a, before, tf.where(shift(is_a), m + shift(before), 2 * m + t))
    return a, a + j, inv, tf.cast(m, tf.int64)


def sort_last(backend: Backend, x: Shares, n: int, descending: bool = False,
              with_index: bool = False):
    """Sorts along the last axis (static length n) with Batcher's network:
    O(log^2 n) layers, each one comparison round and one multiplication
    round for all its comparators.

    Inside a graph the layers run in tf.while_loops whose bodies are
    compare-exchange layers whose comparators follow from the layer's
    (k, j) on each share holder (slices of blocks for a power-of-two n,
    index arrays computed in TF otherwise): the graph holds 9 layers whatever n (the
    unrolled network of 2^16 had 136 and took 18 s or more to build, issue
    15). A length n of at least 3/4 of the next power of two p is padded to
    p with public values past any data (PAD) and run on slices: issue 28's
    10^6 (p = 2^20: 100.7 million comparators against the dropped network's
    96.0 million): first call 58.8 s against the gathering loop's 86.3 s
    (64-bit, 2 cores at load 8-9), its graph built in 5.4 s instead of 24 s
    and its peak memory 1.1 GB instead of 2.6 GB (the layers' sizes now
    come from `_layer_sizes`: `_batcher_steps`' index arrays of 10^6 took
    10 s and 2 GB). Below 3/4 the gathering loop does fewer comparisons.
    Eagerly, for fewer than LAYERS_PER_ITERATION layers, or when one layer
    would exceed `Backend.loop_batch_limit` (the loop does not chunk), the
    layers are unrolled."""
    limbs = backend.limbs
    idx = None
    if with_index:
        shape = sh.dynamic_shape(x[0], limbs)
        idx = backend.add_public(backend.sub(x, x),
                                 tf.broadcast_to(tf.range(n, dtype=tf.float64), shape))
    rows = sh.logical_shape(x[0], limbs)[:-1].num_elements()
    if tf.inside_function() and rows is not None:
        p = 1 << max(n - 1, 0).bit_length()
        padded = p != n and 4 * n >= 3 * p
        layers = _layer_sizes(p if padded else n)
        most = max((m for _, _, m in layers), default=0)
        if (len(layers) >= LAYERS_PER_ITERATION
                and rows * most <= backend.loop_batch_limit()):
            if padded:
                x = _pad_last(backend, x, n, p, PAD if not descending else -PAD)
                idx = None if idx is None else _pad_last(backend, idx, n, p, 0)
            x, idx = _sort_loop(backend, x, idx, p if padded else n, layers, rows, descending)
            if padded:   # the pads are the largest (smallest descending): last
                x, idx = [None if v is None else backend.map_shares(
                    lambda s: sh.getitem(s, (Ellipsis, slice(0, n)), limbs), v)
                    for v in (x, idx)]
            return (x, idx) if with_index else x
    for _, _, a, b in _batcher_steps(n):
        x, idx = _exchange(backend, x, idx, a, b, _inverse(a, b, n, len(a)), len(a),
                           descending)
    return (x, idx) if with_index else x


#: layers per iteration of the sorting loop: within an iteration the
#: dealing of later layers (T1's triples under the bitwise family, whose
#: sizes T1 takes from its own counter; the garbling under the garbled one)
#: can overlap the rounds of earlier ones (it needs no data), across
#: iterations it cannot (an iteration ends when all its stateful ops did).
#: 8 ran a 2^12 sort ~2.7x faster than 1, with 9 layers in the graph
#: whatever n (the rest: a loop of 1). Under the bitwise family, 2^16 on 2
#: loaded cores ran as fast with 8, 34 or all 136 layers in one iteration
#: (issue 26: 1.25, 1.19, 1.42 s best of 5, unrolled 0.89 s): what the loop
#: cost against the unrolled network (1.3x) was its per-layer work (the
#: comparators computed on each holder, the gathers), not the barrier
#: between iterations. For a power-of-two n the body now slices and
#: reshapes instead (`_exchange_blocks`): 2^16, 128-bit, same run on 2
#: idle cores, best of 5: loop 0.72 s, unrolled 0.86 s, the gathering loop
#: 1.15 s (loaded: 1.77, 1.79, 2.27 s).
LAYERS_PER_ITERATION = 8


#: the value (in the ring, unscaled) the sort loop pads a length n to the
#: next power of two p with, descending its negative: the padded network
#: runs `_exchange_blocks` (slices, no gathers) on p. Both comparison
#: families read the low 64 bits of a difference (DESIGN §3), exact when
#: |a - b| < 2^63; sorting already needs that of every pair, i.e. values
#: within +-2^62 (2^46 in the 64-bit ring with f = 16, 2^42 in the 128-bit
#: one with f = 20, both far past Config.bound), and then x - PAD lies in
#: (-2^63, 0): every value sorts strictly before the pads, which end in
#: [n, p) and are cut off.
PAD = 1 << 62


def _pad_last(backend: Backend, x: Shares, n: int, p: int, value: int) -> Shares:
    """x padded along the last axis from n to p with the public ring value
    `value` (unscaled): zeros on both holders, `value` added on S1 where
    the positions are >= n (a mask built in the graph: no p-element
    constant)."""
    limbs = backend.limbs
    keep = [[0, 0]] * (sh.logical_shape(x[0], limbs).rank - 1)
    x = backend.map_shares(lambda s: sh.pad(s, keep + [[0, p - n]], limbs), x)
    if value == 0:
        return x
    with backend.on(0):
        tail = tf.range(p) >= n
        low = tf.where(tail, tf.constant(value, tf.int64), tf.constant(0, tf.int64))
        if limbs == 2:   # [low, high] words of the 128-bit two's complement
            high = tf.where(tail, tf.constant(-1 if value < 0 else 0, tf.int64),
                            tf.constant(0, tf.int64))
            low = tf.stack([low, high], -1)
        x0 = kernels.ring_add(x[0], sh.like(low, x[0], limbs), backend.bits)
    return x0, x[1]


def _layer_sizes(n: int) -> List[Tuple[int, int, int]]:
    """(k, j, comparators) of each layer of `_batcher_steps(n)`, without
    its index arrays: for 10^6 those took 10 s and 2 GB of every graph
    build. A power of two in closed form (each block of 2k holds k - j mod
    k comparators: `_exchange_blocks`), otherwise counted from
    `_layer_indices`' masks in numpy, one layer at a time."""
    p = 1 << max(n - 1, 0).bit_length()
    t = None if p == n else np.arange(n, dtype=np.int64)
    out = []
    k = 1
    while k < p:
        j = k
        while j >= 1:
            off = j % k
            if t is None:
                m = p // (2 * k) * (k - off)
            else:
                m = int(np.count_nonzero((t >= off) & ((t - off) & (2 * j - 1) < j)
                                         & (t + j < n) & ((t & (2 * k - 1)) + j < 2 * k)))
            if m:
                out.append((k, j, m))
            j //= 2
        k *= 2
    return out


def _sort_loop(backend: Backend, x: Shares, idx, n: int, steps, rows: int,
               descending: bool):
    """The layers of `steps` as a tf.while_loop of LAYERS_PER_ITERATION
    layers per iteration, the remainder as a loop of one layer per
    iteration (see `sort_last`)."""
    if C.active():
        # The body is traced once with unknown layer sizes: its protocol
        # calls declare nothing (paused there), the loop declares each
        # layer's bill here, as the unrolled layers would.
        for _, _, m in steps:
            C.declare_in_sequence(backend.ltz_mul_bill(
                rows * m, 2 if idx is not None else 1, sized=True))
    full = len(steps) // LAYERS_PER_ITERATION * LAYERS_PER_ITERATION
    x, idx = _layer_loop(backend, x, idx, n, steps[:full], LAYERS_PER_ITERATION, rows,
                         descending)
    return _layer_loop(backend, x, idx, n, steps[full:], 1, rows, descending)


def _layer_loop(backend: Backend, x: Shares, idx, n: int, steps, per_iter: int, rows: int,
                descending: bool):
    """One tf.while_loop over `steps`, per_iter layers per iteration."""
    if not steps:
        return x, idx
    p = 1
    while p < n:
        p *= 2
    ks = np.array([k for k, _, _ in steps], np.int64)
    js = np.array([j for _, j, _ in steps], np.int64)
    # each layer's comparisons: public, for the parties that deal for them
    # (the bitwise family's T1), which cannot wait for the servers' data
    sizes = np.array([rows * m for _, _, m in steps], np.int64)
    others = backend.size_parties()
    with_index = idx is not None
    counters = 2 + len(others)   # loop variables ahead of the shares

    def cond(i0, *_):
        with backend.on(0):
            return i0 < len(steps)

    def body(*v):
        i, v = v[:counters], v[counters:]
        xs, ids = (v[0], v[1]), ((v[2], v[3]) if with_index else None)
        for u in range(per_iter):
            # each party computes the (public) comparators or their number
            # from its own counter: nothing crosses between parties outside
            # the channel, and the dealer needs no message to start a layer
            kj, ia, ib, inv, m = [], [], [], [], []
            for party in range(2):
                with backend.on(party):
                    kj.append((tf.gather(ks, i[party] + u), tf.gather(js, i[party] + u)))
                    if p != n:
                        la, lb, li, lm = _layer_indices(*kj[-1], n, p)
                        ia.append(la), ib.append(lb), inv.append(li), m.append(lm)
            given = {}
            for name, c in zip(others, i[2:]):
                with device_scope(backend.rt.device(name)):
                    given[name] = tf.gather(sizes, c + u)
            with C.paused(), backend.batch_sizes(given):
                if p == n:
                    xs, ids = _exchange_blocks(backend, xs, ids, kj, n, descending)
                else:
                    xs, ids = _exchange(backend, xs, ids, tuple(ia), tuple(ib), tuple(inv),
                                        tuple(m), descending)
        nxt = []
        for party, c in enumerate(i):
            with _on(backend, party, others):
                nxt.append(c + per_iter)
        return tuple(nxt) + tuple(xs) + (tuple(ids) if with_index else ())

    start = []
    for party in range(counters):
        with _on(backend, party, others):
            start.append(tf.constant(0, tf.int64))
    loop_vars = tuple(start) + tuple(x) + (tuple(idx) if with_index else ())
    out = list(tf.while_loop(cond, body, loop_vars, parallel_iterations=1))
    ends, out = out[:2], out[counters:]
    # The loop condition is computed on S1 and reaches the other parties as
    # TF's own control-flow message, outside the sealed channel. A party made
    # to leave the loop early would stall the others (a timeout), never
    # return a half-sorted result: each holder checks its own counter.
    for party in range(2):
        with backend.on(party):
            out[party] = kernels.check(
                tf.equal(ends[party], len(steps)), out[party],
                f"tf_privpy: a sort's loop on the share holder {party + 1} ran a different "
                f"number of layers than its {len(steps)} (its loop condition was changed "
                "on the way from S1?):", ends[party])
    return (out[0], out[1]), ((out[2], out[3]) if with_index else None)


def _on(backend: Backend, party: int, others: Tuple[str, ...]):
    """Device scope of loop counter `party`: the share holders' (0, 1),
    then those of `others` (names)."""
    return backend.on(party) if party < 2 else device_scope(backend.rt.device(others[party - 2]))
