"""Fixed-point context of the private numerics (protocols/numerics.py,
protocols/range_reduction.py): constants, lifted arithmetic, comparison
batches and piecewise-constant tables, all through the Backend API.

In the 128-bit ring intermediate values carry `extra_frac_bits` (8) more
fractional bits ("lifted": value·2^E at the config's f bits): products of two
lifted values are truncated once more, locally. Intermediates stay far below
2^87 (truncation failure <= 2^-40, DESIGN §3); the 64-bit ring has no room for
that and computes at its 16 bits. Comparisons always see values at f bits
(the comparator's wrap probability grows with the value, DESIGN §6).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from ..runtime import shares as sh
from ..privpy.backend import Backend, Shares
from ..privpy.leading_one import default_width
from ..privpy.thresholds import worth_it

#: how `Ctx.bits` finds [x < θ_k] (config functions.common.threshold_bits)
THRESHOLD_BITS = ("circuit", "comparisons")


class Ctx:
    """Per-call helpers: fixed-point parameters and lifted arithmetic."""

    def __init__(self, backend: Backend):
        self.b = backend
        cfg = backend.cfg
        self.f = cfg.frac_bits
        self.limbs = backend.limbs
        self.ring = cfg.ring_bits
        self.E = int(cfg.function_setting("common", "extra_frac_bits")[str(self.ring)])
        # fractional bits of small public constants (|c| < 4) multiplying
        # in-range private values: 128-bit: 20 more bits, products < 2^87.
        self.fc = self.f + (20 if self.ring == 128 else 0)
        # largest block (octaves) of a binary-search range reduction's first level
        self.window = int(cfg.function_setting("common", "range_reduction_window")[str(self.ring)])
        mode = cfg.function_setting("common", "threshold_bits")
        if mode not in THRESHOLD_BITS:
            raise ValueError(f"unknown threshold_bits {mode!r} ({', '.join(THRESHOLD_BITS)}): "
                             "set it in tp.Config(functions={'common': {...}})")
        #: whether `bits` may use the garbled window-thresholds circuit
        self.circuit_bits = mode == "circuit"
        self.width = default_width(cfg)
        #: the columns of a table's share, per (share, graph): `column`
        self._columns: dict = {}

    # shapes and constants ------------------------------------------------
    def flat(self, x: Shares) -> Shares:
        return self.b.map_shares(lambda s: sh.reshape(s, [-1], self.limbs), x)

    def shape(self, x: Shares) -> tf.Tensor:
        return sh.dynamic_shape(x[0], self.limbs)

    def fill(self, x: Shares, value, suffix: Sequence[int] = ()) -> np.ndarray:
        """The public constant `value` for an operation with x (add_public,
        public_sub, mul_public broadcast it to x's shape on each server): a
        float64 scalar, or [1, ..., 1, *suffix] filled with it. Each server
        makes it itself (Backend.to_party), so nothing of x's size is sent:
        a filled tensor of x's shape made by the client's program took one
        message per call and 8 bytes per element to each server (sqrt: 13
        messages, 184 of its 2,488 bytes per element)."""
        del x   # broadcast by the operation, on the server
        return np.full(list(suffix), value, np.float64) if suffix else \
            np.float64(value)

    def ones(self, x: Shares, frac_bits: Optional[int] = None) -> Shares:
        """Shares of 1 shaped like x: fixed point, or the integer 1 with
        frac_bits=0 (beside integer bits)."""
        return self.b.add_public(self.b.sub(x, x), self.fill(x, 1.0), frac_bits=frac_bits)

    def add_const(self, x: Shares, c: float) -> Shares:
        return self.b.add_public(x, self.fill(x, c))

    def scale(self, x: Shares, c: float, frac_bits: Optional[int] = None) -> Shares:
        """x·c for a public scalar c (local)."""
        fb = self.fc if frac_bits is None else frac_bits
        return self.b.mul_public(x, self.fill(x, c), c_frac_bits=fb,
                                 c_bound=max(2.0 ** (62 - fb) * 0.99, 2.0))

    def lscale(self, x: Shares, c: float) -> Shares:
        """Lifted x·c for an unlifted x and a public scalar c (|c| < 4), local."""
        fb = self.fc - self.E
        return self.b.mul_public(x, self.fill(x, c * 2.0 ** self.E), c_frac_bits=fb,
                                 c_bound=2.0 ** (62 - fb))

    # lifted arithmetic ---------------------------------------------------
    def lift(self, x: Shares) -> Shares:
        if self.E == 0:
            return x
        return self.b.mul_public(x, self.fill(x, float(2 ** self.E)), c_frac_bits=0)

    def lower(self, x: Shares, k: Optional[int] = None) -> Shares:
        """Local truncation by k (default E) bits: lifted -> f bits."""
        k = self.E if k is None else k
        if k == 0:
            return x
        return self.b.truncate(x, k)

    def lmul_many(self, pairs: Sequence[Tuple[Shares, Shares]]) -> List[Shares]:
        """Products of lifted values (one round), lifted."""
        return [self.lower(z) for z in self.b.mul_many(list(pairs))]

    def lconst(self, c: float) -> float:
        """A public constant at the lifted scale."""
        return c * 2.0 ** self.E

    # comparisons and tables ----------------------------------------------
    def grid_up(self, thresholds) -> np.ndarray:
        """Thresholds rounded UP to the 2^-f grid: a shared value x is on the
        grid, so [x < θ] = [x < ceil(θ·2^f)·2^-f] exactly (rounding to nearest
        would put 2^-19.5 = 1.41 ulp at 1 ulp and misplace x = 1 ulp)."""
        return np.ceil(np.asarray(thresholds, np.float64) * 2.0 ** self.f) / 2.0 ** self.f

    def uses_circuit(self, thresholds: Sequence[float], circuit: Optional[bool] = None) -> bool:
        """Whether `bits` finds these thresholds by the window circuit
        (circuit: allowed; None = the config's "threshold_bits")."""
        allowed = self.circuit_bits if circuit is None else circuit
        return allowed and len(thresholds) > 1 and \
            worth_it(self.grid_ints(thresholds), self.width)

    def grid_ints(self, thresholds: Sequence[float]) -> List[int]:
        """The thresholds rounded up to the grid, as ring integers."""
        return [int(v) for v in np.round(self.grid_up(thresholds) * 2.0 ** self.f)]

    def bits(self, x: Shares, thresholds: Sequence[float],
             circuit: Optional[bool] = None) -> Shares:
        """[x < θ_k] (integer bit shares, 0 or 1) for a flat x [N] and all thresholds: ONE
        garbled window-thresholds circuit per element when they fit a window
        and the circuit is allowed (`circuit`; None: the config's
        "threshold_bits" is "circuit"), about W + K·m AND gates
        (protocols/mpc/privpy/thresholds.py), else ONE ltz on [N, K] (K
        comparators). Either way one comparison round."""
        if self.uses_circuit(thresholds, circuit):
            return self.b.thresholds(x, self.grid_ints(thresholds), integer=True,
                                     width=self.width)
        k = len(thresholds)
        xk = self.b.map_shares(
            lambda s: sh.tile(sh.expand_dims(s, 1, self.limbs), [1, k], self.limbs), x)
        # [1, K], broadcast by S1 (a constant each server makes itself)
        th = -np.asarray(self.grid_up(thresholds), np.float64)[None, :]
        d = self.b.add_public(xk, th)
        return self.b.ltz(d, integer=True)

    def table(self, bits: Shares, values: np.ndarray, lifted=True) -> Shares:
        """Piecewise-constant values[i] on interval i (θ_{i-1} <= x < θ_i,
        i = 0..K) from integer bit shares [N, K] = [x < θ_k] (`bits`, `less`):
        returns [N, M] shares, exact on the (lifted) fixed-point grid. One
        local matmul of the integer bits with the integer grid values, no
        round and no truncation: a truncation of bits·2^f times values·2^f
        fails with probability ~|value|·2^(2f-64), 2^-16 for a value of 2^16
        (a range reduction's 2^-j) in the 64-bit ring. `lifted` is one flag
        or one per column of values."""
        coeff = self._grid_coeff(values, lifted)
        if np.abs(coeff).max() >= 2.0 ** 61:
            raise ValueError("piecewise table out of range")
        ones = self.b.map_shares(lambda s: sh.getitem(s, (slice(None), slice(0, 1)),
                                                      self.limbs), bits)
        ones = self.ones(ones, frac_bits=0)
        aug = self.b.map_many(lambda p: sh.concat(p, 1, self.limbs), [bits, ones])
        return self.b.mul_public(aug, coeff, kind="matmul", c_frac_bits=0,
                                 c_bound=2.0 ** 62)

    def _grid_coeff(self, values: np.ndarray, lifted) -> np.ndarray:
        """[D_0 .. D_(K-1); v_K] for values [K + 1(, M)] on the (lifted where
        `lifted`) grid as integers: D_k = v_k - v_(k+1), v_K the row with all
        bits [x < θ_k] = 0, so value = Σ_k bit_k·D_k + v_K."""
        values = np.asarray(values, np.float64)
        if values.ndim == 1:
            values = values[:, None]
        lift = np.broadcast_to(np.asarray(lifted, bool), values.shape[1:])
        vint = np.round(values * 2.0 ** (self.f + np.where(lift, self.E, 0)))
        return np.concatenate([vint[:-1] - vint[1:], vint[-1:]], 0)

    def bits_table(self, x: Shares, thresholds: Sequence[float], values: np.ndarray,
                   lifted=True, circuit: Optional[bool] = None) -> Shares:
        """table(bits(x, thresholds), values, lifted): with the window-
        thresholds circuit, fused into its protocol (integer bits times the
        integer grid values in the servers' unmasking pass,
        kernels.bit_unmask_table: exact, no truncation, no [N, K] tensor of
        the bits); with comparisons, `bits` then `table`. Same rounds."""
        if not self.uses_circuit(thresholds, circuit):
            return self.table(self.bits(x, thresholds, circuit), values, lifted)
        coeff = self._grid_coeff(values, lifted)
        if np.abs(coeff).max() >= 2.0 ** 62:
            raise ValueError("piecewise table out of range")
        return self.b.thresholds(x, self.grid_ints(thresholds), integer=True, width=self.width,
                                 table=coeff.astype(np.int64))

    def columns(self, m: Shares, lo: int, hi: int) -> Shares:
        return self.b.map_shares(lambda s: sh.getitem(s, (slice(None), slice(lo, hi)),
                                                      self.limbs), m)

    def less(self, v: Shares, th: Shares, k: int) -> Shares:
        """[v < θ_k] (integer bit shares) for a flat v [N] and shared
        thresholds θ [N, k]: ONE ltz."""
        vk = self.b.map_shares(
            lambda s: sh.tile(sh.expand_dims(s, 1, self.limbs), [1, k], self.limbs), v)
        return self.b.ltz(self.b.sub(vk, th), integer=True)

    def column(self, m: Shares, j: int) -> Shares:
        """Column j of a matrix [N, K] of shares. Tables are read column by
        column, so all K come from one Unpack per share, made when the first
        is taken (and kept for this call, per graph), instead of a strided
        slice and its three constants each: tp.exp's graph 402 -> 366 ops."""
        return self.b.map_shares(lambda s: self._unstacked(s, j), m)

    def _unstacked(self, s: tf.Tensor, j: int) -> tf.Tensor:
        if s.shape.rank is None or s.shape[1] is None:
            return sh.getitem(s, (slice(None), j), self.limbs)
        key = (s.ref(), id(tf.compat.v1.get_default_graph()))
        cols = self._columns.get(key)
        if cols is None:
            cols = self._columns[key] = tf.unstack(s, axis=1)
        return cols[j]

    def combine(self, terms: Sequence[Shares], coeffs: Sequence[float]) -> Shares:
        """Σ coeffs[i]·terms[i] for flat terms [N] and public scalars: one
        local matmul with c_frac_bits = fc."""
        st = self.b.map_many(lambda p: sh.stack(p, 1, self.limbs), list(terms))
        c = np.asarray(coeffs, np.float64)[:, None]
        fb = self.fc if np.abs(c).max() < 2.0 ** (61 - self.fc) else self.f
        z = self.b.mul_public(st, c, kind="matmul", c_frac_bits=fb,
                              c_bound=2.0 ** (62 - fb))
        return self.column(z, 0)


def mul_round(ctx: Ctx, pairs, raw) -> List[Shares]:
    """One batched multiplication round; lifted products are lowered except
    where `raw` (an unlifted factor times a lifted one is already lifted)."""
    outs = ctx.b.mul_many(list(pairs))
    return [o if r else ctx.lower(o) for o, r in zip(outs, raw)]
