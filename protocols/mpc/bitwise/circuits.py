"""The derived functions' two garbled circuits as batched bitwise comparisons
(issue 26): `Backend.thresholds` (privpy/thresholds.py) and
`Backend.leading_one` (privpy/leading_one.py) with the same outputs, from
ONE bitwise `ltz` (protocol.py: 8 rounds, about 100 bytes per comparison)
over an [N, M] tensor of x minus public ring integers, then at most one
local integer matmul. Whether the bitwise family runs them this way or
keeps the garbled circuit is a per-circuit setting: as comparisons up to a
number of comparisons per element ("bitwise_circuits" in
protocols/defaults.json, measured in docs/comparisons_functions.md).

thresholds: [x < θ_k] = ltz(x - θ_k), K comparisons per element.

leading_one: every column is a ±1 combination of bits [x < t] for a few
public t (deduplicated across columns):
- column W - 1, the sign: [x < 0];
- magnitude (one's complement v = x XOR [x < 0], |x| - 1 for x < 0):
  [v >= 2^j] = [x >= 2^j] + [x < -2^j] (disjoint), and column 0 is
  [x != 0] = [x >= 1] + [x < 0];
- without the magnitude (v = x mod 2^(W-1)): [x >= 2^j] + [x < 0], as the
  circuit's o_j is 1 for every j when -2^(W-2) <= x < 0 ("a negative x lands
  in o_(W-2) = 1", leading_one.default_width).

Domain: the garbled circuits read x mod 2^W, these compare x itself (its
low 64 bits), so they agree bit for bit where the circuits' callers keep x
(leading_one.default_width: |x| < 2^(W-2), twice the bound): thresholds
and the magnitude leading one for |x| < 2^(W-1) (and |x - θ| < 2^63, always
true for W <= 63), the plain leading one for -2^(W-2) <= x < 2^(W-1).
tests/test_bitwise_circuits.py checks the edges.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from . import protocol
from ..privpy import circuits as gc
from ..privpy import leading_one as lo
from ..privpy import thresholds as th
from ..runtime import kernels
from ..runtime import shares as sh

#: the circuits the bitwise family may run as comparisons
CIRCUITS = ("leading_one", "thresholds")


def ring_ints(values, ring_bits: int) -> np.ndarray:
    """The ring storage (int64, a trailing limb pair [low, high] in the
    128-bit ring) of Python integers, exactly (two's complement mod 2^l):
    no float on the way, unlike ring_encode, which rounds beyond 2^53."""
    arr = np.asarray(values, dtype=object)
    flat = [int(v) % (1 << ring_bits) for v in arr.reshape(-1)]

    def signed(u):
        return u - (1 << 64) if u >= 1 << 63 else u

    if ring_bits == 64:
        out = np.array([signed(u) for u in flat], np.int64)
        return out.reshape(arr.shape)
    out = np.array([[signed(u & ((1 << 64) - 1)), signed(u >> 64)] for u in flat], np.int64)
    return out.reshape(arr.shape + (2,))


def _differences(backend, x, points: Sequence[int]):
    """Shares [N, M] of x_n - t_m for a flat x [N] and public ring integers
    t (exact: S1 subtracts them from its share)."""
    limbs, m = backend.limbs, len(points)
    t = ring_ints([points], backend.bits)           # [1, M(, 2)]

    def fn(s, party):
        tiled = sh.tile(sh.expand_dims(s, 1, limbs), [1, m], limbs)
        if party:
            return tiled
        return kernels.ring_sub(tiled, sh.like(tf.constant(t), tiled, limbs), backend.bits)

    return backend.local(fn, x)


def combine(backend, bits, matrix: List[List[int]], const: List[int]):
    """Shares [N, J] of bits @ matrix + const for integer bit shares [N, M]
    and public Python-integer matrix [M, J], const [J]: one local ring
    matmul, exact (no truncation, no float)."""
    mat, c = ring_ints(matrix, backend.bits), ring_ints([const], backend.bits)

    def fn(s, party):   # public constants made on each server, under its scope
        z = kernels.ring_bilinear(s, tf.constant(mat), backend.bits, "matmul")
        if party:
            return z
        return kernels.ring_add(z, sh.like(tf.constant(c), z, backend.limbs), backend.bits)

    return backend.local(fn, bits)


def _with_table(matrix: List[List[int]], const: List[int], table: Optional[np.ndarray]):
    """(matrix', const') of (bits @ matrix + const) @ table[:K] + table[K],
    in Python integers (exact; the ring reduces them)."""
    if table is None:
        return matrix, const
    t = [[int(v) for v in row] for row in table]
    k, j = len(t) - 1, len(t[0])
    mat = [[sum(row[i] * t[i][c] for i in range(k)) for c in range(j)] for row in matrix]
    cst = [sum(const[i] * t[i][c] for i in range(k)) + t[k][c] for c in range(j)]
    return mat, cst


def thresholds(backend, x, points: Sequence[int], width: int, integer: bool, table=None):
    """`Backend.thresholds` by comparisons: shares [N, K] of [x < θ_k]
    (integer or fixed point), or with `table` [K + 1, J] (integer bits)
    bits @ table[:K] + table[K]; ONE bitwise ltz of N·K elements. The
    points must fit the circuit's window (the same ValueError as the
    garbled circuit's, so a config never works under one family only)."""
    pts = [int(p) for p in points]
    if th.window(pts, width) is None:
        raise ValueError(f"thresholds {pts} do not fit a window of the low {width} "
                         "bits: use comparisons (Backend.ltz) for them")
    table = gc.check_table(table, len(pts))
    f = 0 if integer or table is not None else backend.cfg.frac_bits
    bits = protocol.ltz(backend, _differences(backend, x, pts), f)
    if table is None:
        return bits
    k = len(pts)
    return combine(backend, bits, *_with_table([[int(i == c) for c in range(k)]
                                                 for i in range(k)], [0] * k, table))


def leading_one_terms(columns: Sequence[int], magnitude: bool,
                      width: int) -> Tuple[List[int], List[List[int]], List[int]]:
    """(points t [M], matrix [M, K], const [K]): column k of the leading-one
    circuit = Σ_m matrix[m][k]·[x < t_m] + const[k] (see the module doc)."""
    index: Dict[int, int] = {}
    terms: List[Dict[int, int]] = []
    const: List[int] = []

    def bit(t):
        return index.setdefault(int(t), len(index))

    for j in columns:
        if j == width - 1:                          # the sign
            terms.append({bit(0): 1})
            const.append(0)
            continue
        below = (-(1 << j) if j else 0) if magnitude else 0
        # [x >= 2^j] + [x < below] = 1 - [x < 2^j] + [x < below]
        terms.append({bit(1 << j): -1, bit(below): 1})
        const.append(1)
    points = sorted(index, key=index.get)
    matrix = [[t.get(index[p], 0) for t in terms] for p in points]
    return points, matrix, const


def leading_one(backend, x, columns: Sequence[int], magnitude: bool, width: int, table=None):
    """`Backend.leading_one` by comparisons: integer bit shares [N, K] of
    the circuit's columns, or with `table` the fused bits @ table[:K] +
    table[K]; ONE bitwise ltz of N·M elements (M distinct thresholds: K + 1
    without the magnitude, 2K with it, fewer when columns share them)."""
    cols = lo.check_columns(columns, width)
    table = gc.check_table(table, len(cols))
    points, matrix, const = leading_one_terms(cols, magnitude, width)
    bits = protocol.ltz(backend, _differences(backend, x, points), 0)
    return combine(backend, bits, *_with_table(matrix, const, table))
