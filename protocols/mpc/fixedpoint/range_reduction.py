"""Range reduction of the private numerics (DESIGN §6, §7): the piece of x
(an octave [2^j, 2^(j+1)) for reciprocal, sqrt, rsqrt and log; an interval
of t = x·log2 e for exp) and the piecewise-constant values that go with it
(initial guesses 2^-j, 2^k, k, m·ln 2), on shares, through the Backend API.

Comparisons are the dominant cost (a garbled 64-bit comparator each, about
2 KB online, DESIGN §6; PrivPy Protocol 2), so the method is config
("range_reduction"):
- "thresholds": x is compared with every piece boundary in ONE batched `ltz`
  round ([N, K] comparisons); the values are public linear combinations of
  the K bits (`Ctx.table`, one local matmul).
- "binary_search" (default): a few levels, each ONE comparison per element
  (more in the first level, which also finds zero/saturation rows). Each
  level halves the candidate range and renormalizes x into it,
  z <- z·2^-(chosen offset), by an exact power of two from the level's bit (a
  table, then one multiplication), so the next level compares z with a
  PUBLIC boundary. The comparison of level l+1 is made against z before level
  l's rescaling, with a threshold that is itself a table of level l's bit
  ("lookahead"), so each level costs one comparison round and its rescaling
  runs in parallel with the next comparison. Values exponential in the piece
  index (2^-j, 2^k) are products of per-level factors, all <= 1, so that
  truncation errors are never amplified; values linear in the index (k,
  m·ln 2) are sums of per-level tables (local). A signed x has its sign found
  first (one comparison, |x| by one exact product). ~log2 K comparisons per
  element instead of K.

- "leading_one": for octave plans (pieces [2^j, 2^(j+1)): reciprocal,
  divide, sqrt, rsqrt, softmax's row sums), ONE garbled leading-one circuit
  per element (Backend.leading_one, protocols/mpc/privpy/leading_one.py; issue 14)
  gives the integer bits [x >= 2^j] of every boundary at once, and the
  values are one exact local matmul of them: one comparison round and about
  one and a half comparators' worth of garbling instead of log2 K + 1
  comparators. Pieces [2^(j+δ), 2^(j+1+δ)) (log: δ = -1/2) take one more
  comparison against a table of the octave bits. exp's pieces of t are
  integer intervals, not octaves: all their boundaries go to ONE garbled
  window-thresholds circuit per element (`Ctx.bits` with the common setting
  "threshold_bits" = "circuit", protocols/mpc/privpy/thresholds.py), i.e. the
  "thresholds" method at the cost of about one comparison; with
  "comparisons" they fall back to "binary_search".

Only `ltz`, `leading_one`, `thresholds`, multiplications and local operations
are used: the four-server security model is that of those protocols (DESIGN
§5, §6), with fresh masks and garbled tables per call, and no value is
revealed to pick a threshold.
Tables are rounded to the fixed-point grid so these combinations are exact
(an exact 0 times anything, even a wrapped value, is an exact 0, which gives
saturation and the x <= 0 rules for free).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from ..runtime import shares as sh
from ..privpy.backend import Shares
from .lifted import Ctx, mul_round


@dataclasses.dataclass(frozen=True)
class Plan:
    """The pieces i = 0..K-1 of a range reduction, e_i = jlo + i·h.

    mode "mul": piece i is x in [2^(e_i + δ), 2^(e_i + h + δ)) and x is
    normalized to z = x·2^-e_i in [2^δ, 2^(h + δ)); mode "add": piece i is
    x in [e_i, e_i + h) (the caller subtracts a Lin feature for x - e_i).
    Values below `below` (x <= 0; t < -f for exp) and from `above` on are rows
    of their own. `signed` (mode "mul") adds the mirror pieces of x < 0 and a
    zero row (-2^(jlo+δ) < x < 2^(jlo+δ))."""
    mode: str
    K: int
    jlo: int
    h: int = 1
    delta: float = 0.0
    below: Optional[float] = None
    above: Optional[float] = None
    signed: bool = False

    def boundary(self, i: int) -> float:
        e = self.jlo + i * self.h
        return 2.0 ** (e + self.delta) if self.mode == "mul" else float(e)


@dataclasses.dataclass(frozen=True)
class Geo:
    """A value c·r^i on piece i (2^-j, 2^k, 2^(-j/2)); neg_sign·c·r^i on the
    mirror piece of a signed plan; 0 on the below, zero and above rows.
    Multi-level plans build it as a product of one factor per level, each
    <= 1 (the first level carries the largest value of its block), so a
    truncation error is never multiplied up."""
    c: float
    r: float
    neg_sign: float = 1.0


@dataclasses.dataclass(frozen=True)
class Lin:
    """A value c0 + c1·i on piece i (k, m·ln 2); `below` on the below/zero
    row, `above` on the above row. Multi-level plans sum one table per
    level: local, no round."""
    c0: float
    c1: float
    below: float = 0.0
    above: float = 0.0
    lifted: bool = True


#: the range-reduction methods (config "range_reduction")
METHODS = ("binary_search", "thresholds", "leading_one")


def radices(plan: Plan, method: str, window: int) -> List[int]:
    """Pieces per level. "thresholds": one level, every boundary compared at
    once (K - 1 comparisons). "binary_search": two sub-blocks per level, except
    that the first level makes blocks of at most `window` octaves (window // h
    pieces), which bounds the normalized z by 2^window: comparator inputs and
    products stay small (DESIGN §3, §6; 8 octaves in the 64-bit ring, where a
    product's truncation fails with probability ~|xy|·2^(2f-64)). A search
    that would save fewer than 2 comparisons per element (K <= 5: a softmax
    row sum) stays one level: rounds are not free either."""
    if method not in METHODS:
        raise ValueError(f"unknown range_reduction {method!r} ({', '.join(METHODS)})")
    if method in ("thresholds", "leading_one") or plan.K <= 2:
        return [plan.K]
    per = max(window // plan.h, 1)
    rad = [min(plan.K, max(2, -(-plan.K // per)))]
    size = -(-plan.K // rad[0])
    while size > 1:
        rad.append(2)
        size = -(-size // 2)
    if (plan.K - 1) - sum(r - 1 for r in rad) < 2:
        return [plan.K]
    return rad


def reduce_range(ctx: Ctx, v: Shares, plan: Plan, feats: Dict[str, object], method: str,
                 want_z: bool = False, sign: Optional[Shares] = None) -> Dict[str, Shares]:
    """Range reduction of a flat v [N] (at f bits) by `plan`: returns the
    features (lifted unless a Lin says otherwise) and, with want_z (mode
    "mul"), the lifted normalized z = v·2^-e_i. "levels" is the number of
    comparison levels.

    Level 0 compares v with public boundaries (plus the below/above/zero/sign
    thresholds); level l >= 1 compares z_(l-1) = v·Π_(m<l-1) s_m with the
    level's boundaries divided by level l-1's scale s_(l-1) (a table of its
    bits, exact powers of two), so the comparison does not wait for the
    product z_l = z_(l-1)·s_(l-1), which runs in the same round. Costs, for
    L levels: L comparison rounds and the features one multiplication round
    later (L = 1, "thresholds": the features are the table itself, z one
    product). A signed multi-level plan finds the sign first (two rounds
    more: the comparison and |v|) and multiplies the geo features with
    neg_sign = -1 by the sign (`sign`, exact: ±1 times grid values) beside
    level 1's comparison.

    Boundaries are rounded up to the 2^-f grid, so levels 0 and 1 (on v) are
    exact; later levels see z with truncation errors of a few units of
    2^-(f+E), which can only move an element within ~2^-f·z of a boundary to
    the neighbouring piece, whose approximation is as good there.
    """
    b = ctx.b
    circuit = False             # the window-thresholds circuit: under "leading_one" only
    if method == "leading_one":
        if by_leading_one_applies(plan, want_z):
            return _by_leading_one(ctx, v, plan, feats, want_z)
        if sub_octave_applies(plan, feats) and len(radices(plan, "binary_search",
                                                              ctx.window)) > 1:
            return _sub_octave_by_leading_one(ctx, v, plan, feats, want_z)
        # exp's pieces of t (and a short plan: log_softmax's row sums, K <= 5):
        # every boundary in ONE window-thresholds circuit per element (Ctx.bits)
        # when the config allows it, else the binary search
        circuit = ctx.circuit_bits
        method = "thresholds" if circuit else "binary_search"
    rad = radices(plan, method, ctx.window)
    L = len(rad)
    if plan.signed and L > 1:
        # Sign first: σ = [v < 0] (one comparison), |v| = v·(1 - 2σ) (one
        # product, exact), then the unsigned search of |v| with a zero row
        # (1 + log2 K comparisons instead of 2 per level-0 split and sign).
        sigma = b.ltz(v)
        sgn = b.public_sub(ctx.fill(v, 1.0), b.add(sigma, sigma))
        mag = b.mul(v, sgn)
        return reduce_range(ctx, mag, dataclasses.replace(plan, signed=False,
                                                          below=plan.boundary(0)),
                            feats, method, want_z, sign=sgn)
    size = [plan.K]
    for w in rad:
        size.append(-(-size[-1] // w))
    splits = [[d * size[l + 1] for d in range(1, rad[l]) if d * size[l + 1] < size[l]]
              for l in range(L)]
    mul_mode = plan.mode == "mul"
    h, dl = plan.h, plan.delta
    geo = [k for k, f in feats.items() if isinstance(f, Geo)]
    lin = [k for k, f in feats.items() if isinstance(f, Lin)]
    if not mul_mode and (plan.signed or want_z):
        raise ValueError("additive range reductions are unsigned and return features only")

    def columns(level):
        c = [("zs", 1, True)] if mul_mode else [("off", 1, False)]
        if level + 1 < L:
            c.append(("th", len(splits[level + 1]), False))
        return c + [(k, 1, True) for k in geo] + [(k, 1, feats[k].lifted) for k in lin]

    def lookup(make_table, rows, level):
        """make_table(values, lifted) -> [N, M] shares of the rows' values."""
        spec = columns(level)
        mat = np.array([[x for key, _, _ in spec
                         for x in (ctx.grid_up(r[key]) if key == "th" else np.atleast_1d(r[key]))]
                        for r in rows])
        lifted = [lf for _, width, lf in spec for _ in range(width)]
        tab = make_table(mat, lifted)
        out, col = {}, 0
        for key, width, _ in spec:
            out[key] = ctx.columns(tab, col, col + width) if key == "th" else ctx.column(tab, col)
            col += width
        return out

    # level 0: blocks of size[1] pieces starting at piece lo
    def block_row(lo, sign):
        r = {"zs": sign * 2.0 ** -(plan.jlo + lo * h)} if mul_mode else {"off": plan.jlo + lo * h}
        if L > 1:
            r["th"] = [plan.boundary(lo + s) for s in splits[1]]
        for k in geo:
            f = feats[k]
            ref = lo if f.r <= 1 else lo + size[1] - 1
            r[k] = (f.neg_sign if sign < 0 else 1.0) * f.c * f.r ** ref
        for k in lin:
            r[k] = feats[k].c0 + feats[k].c1 * lo
        return r

    def special_row(like, which):
        r = dict(like, **{k: 0.0 for k in geo})
        if mul_mode:
            r["zs"] = 0.0
        r.update({k: getattr(feats[k], which) for k in lin})
        return r

    los = [d * size[1] for d in range(rad[0]) if d * size[1] < plan.K]
    if plan.signed:
        u = 2.0 ** -ctx.f                                 # x <= -2^j  <=>  x < -2^j + ulp
        thr = [-plan.boundary(lo) + u for lo in reversed(los)] + [plan.boundary(lo) for lo in los]
        rows = ([block_row(lo, -1) for lo in reversed(los)]
                + [special_row(block_row(0, 1), "below")] + [block_row(lo, 1) for lo in los])
    else:
        thr = [plan.boundary(lo) for lo in los[1:]]
        rows = [block_row(lo, 1) for lo in los]
        if plan.below is not None:
            thr, rows = [plan.below] + thr, [special_row(rows[0], "below")] + rows
        if plan.above is not None:
            thr, rows = thr + [plan.above], rows + [special_row(rows[-1], "above")]
    if not thr:
        raise ValueError("a range reduction needs at least one comparison")

    def level_rows(l):
        out = []
        for d in range(rad[l]):
            sub = d * size[l + 1]
            if sub >= size[l]:
                break
            r = {"zs": 2.0 ** -(sub * h)} if mul_mode else {"off": float(sub * h)}
            if l + 1 < L:
                r["th"] = [2.0 ** (dl + (sub + s) * h) if mul_mode else float((sub + s) * h)
                           for s in splits[l + 1]]
            for k in geo:
                f = feats[k]
                r[k] = f.r ** (sub if f.r <= 1 else sub + size[l + 1] - size[l])
            for k in lin:
                r[k] = feats[k].c1 * sub
            out.append(r)
        return out

    # level 0: bits and table in one step (fused into the circuit's protocol)
    prev = lookup(lambda mat, lf: ctx.bits_table(v, thr, mat, lf, circuit=circuit), rows, 0)
    z = {0: v}                  # z[l] = v·s_0···s_(l-1); z[0] at f bits, the others lifted
    P = {k: prev[k] for k in geo}
    S = {k: prev[k] for k in lin}
    cum = None                  # mode "add": Σ offsets of the levels before the previous one
    for l in range(1, L):
        if mul_mode:
            bits = ctx.less(z[0] if l == 1 else ctx.lower(z[l - 1]), prev["th"], len(splits[l]))
        else:
            bits = ctx.less(v if cum is None else b.sub(v, cum), prev["th"], len(splits[l]))
        # this round's products run beside the comparison
        jobs = []
        if mul_mode and (l <= L - 2 or (l == L - 1 and want_z)):
            jobs.append(("z", (z[l - 1], prev["zs"]), l == 1))
        if l >= 2:
            jobs += [(k, (P[k], prev[k]), False) for k in geo]
        elif sign is not None:
            jobs += [(k, (P[k], sign), True) for k in geo if feats[k].neg_sign < 0]
        for (key, _, _), out in zip(jobs, mul_round(ctx, [j[1] for j in jobs],
                                                     [j[2] for j in jobs])):
            if key == "z":
                z[l] = out
            else:
                P[key] = out
        if not mul_mode:
            cum = prev["off"] if cum is None else b.add(cum, prev["off"])
        prev = lookup(lambda mat, lf, bits=bits: ctx.table(bits, mat, lifted=lf),
                      level_rows(l), l)
        for k in lin:
            S[k] = b.add(S[k], prev[k])
    jobs = []
    if want_z:
        jobs.append(("z", (z[L - 1], prev["zs"]), L == 1))
    if L >= 2:
        jobs += [(k, (P[k], prev[k]), False) for k in geo]
    res: Dict[str, Shares] = dict(P)
    res.update(S)
    for (key, _, _), out in zip(jobs, mul_round(ctx, [j[1] for j in jobs],
                                                 [j[2] for j in jobs])):
        res[key] = out
    res["levels"] = L
    return res


def octaves(ctx: Ctx) -> Tuple[int, int]:
    """Exponents j with 2^j from one ulp up to below the bound B."""
    return -ctx.f, int(math.ceil(math.log2(ctx.b.cfg.bound))) - 1


def octave_plan(ctx: Ctx, signed: bool = False) -> Plan:
    """Octaves [2^j, 2^(j+1)), j = -f .. ceil(log2 B) - 1 (the last one open
    above); unsigned: a row for x <= 0 (x < one ulp), signed: a zero row."""
    jlo, jhi = octaves(ctx)
    return Plan("mul", K=jhi - jlo + 1, jlo=jlo, below=None if signed else 2.0 ** jlo,
                 signed=signed)


# ------------------------------------------------------- by the leading one
def by_leading_one_applies(plan: Plan, want_z: bool = False) -> bool:
    """Whether `plan` has octave pieces [2^j, 2^(j+1)) whose boundaries are
    the leading-one circuit's thresholds (reciprocal, divide, sqrt, rsqrt,
    softmax's row sums); the others (exp's pieces of t, log's boundaries
    2^(j-1/2)) use "binary_search" under the "leading_one" setting."""
    return (plan.mode == "mul" and plan.delta == 0 and plan.h == 1 and plan.above is None
            and not (plan.signed and want_z))


def sub_octave_applies(plan: Plan, feats: Dict[str, object]) -> bool:
    """Whether `plan` has pieces [2^(j+δ), 2^(j+1+δ)), -1 < δ < 0, and only
    additive features (log's m·ln 2: δ = -1/2)."""
    return (plan.mode == "mul" and -1 < plan.delta < 0 and plan.h == 1 and not plan.signed
            and plan.above is None and all(isinstance(f, Lin) for f in feats.values()))


def _thermometer_coeff(ctx: Ctx, rows, keys, lifted, extra: int = 0) -> np.ndarray:
    """The public int64 table [K + extra + 1, len(keys)] that turns integer
    bit shares o [N, K (+ extra)] of a thermometer (o_k = [x >= θ_k], θ
    increasing) into rows[r][key], r = Σ_k o_k: r_0 + Σ_k (r_(k+1) - r_k)·o_k
    with the values as integers on the (lifted where `lifted`) fixed-point
    grid, so o @ table[:-1] + table[-1] is exact (no truncation). The
    `extra` bits after the thermometer get zero rows (the caller adds their
    own columns). Backend.leading_one applies it inside the protocol."""
    unit = 2.0 ** (ctx.f + np.where(np.asarray(lifted, bool), ctx.E, 0))
    vals = np.round(np.array([[r[k] for k in keys] for r in rows], np.float64) * unit)
    diffs = vals[1:] - vals[:-1]
    coeff = np.concatenate([diffs, np.zeros((extra, len(keys))), vals[:1]], 0)
    if np.abs(coeff).max() >= 2.0 ** 52:
        raise ValueError("piecewise table out of range")
    return coeff.astype(np.int64)


def _by_leading_one(ctx: Ctx, v: Shares, plan: Plan, feats: Dict[str, object],
                    want_z: bool) -> Dict[str, Shares]:
    """Range reduction by ONE garbled leading-one circuit per element
    (protocols/mpc/privpy/leading_one.py; issue 14): o_k = [v >= 2^(j_k)] for every
    octave boundary (positions j_k + f of the ring integer), so the features
    are r_0 + Σ_k (r_(k+1) - r_k)·o_k on integer bits with integer grid
    coefficients: one local matmul, exact, no truncation. Unsigned plans use
    the circuit on x itself (89 AND gates at W = 46): x < 0 sets o_(W-2),
    which gets the below row. Signed plans use the one's complement
    magnitude (90 gates instead of 133 for |x|, leading_one.h): x < 0 is
    placed by |x| - 1 ulp, so x = -2^j exactly gets the octave j - 1 (and
    o_0 = [x != 0] keeps x = -1 ulp out of the zero row); its only user,
    the reciprocal's guess g = (2/3)·2^-j (numerics._recip_guess), then has
    1 - |x|·g = -1/3, within the |1 - x·g| <= 1/3 that Goldschmidt's
    iteration count assumes. The odd features (neg_sign = -1) are multiplied
    by 1 - 2s, exact, in one more round. z = v·2^-j (want_z) is one
    product."""
    from ..privpy.leading_one import default_width
    b = ctx.b
    width = default_width(b.cfg)
    geo = [k for k, f in feats.items() if isinstance(f, Geo)]
    lin = [k for k, f in feats.items() if isinstance(f, Lin)]
    if plan.signed and (lin or plan.jlo + ctx.f != 0):
        # the one's complement's zero test is o_0: the zero row must end at 1 ulp
        raise ValueError("a signed range reduction by the leading one has no additive "
                         "features and starts at one ulp")

    def piece(i):
        r = {k: feats[k].c * feats[k].r ** i for k in geo}
        r.update({k: feats[k].c0 + feats[k].c1 * i for k in lin})
        r["zs"] = 2.0 ** -(plan.jlo + i)
        return r

    special = dict({k: 0.0 for k in geo}, zs=0.0, **{k: feats[k].below for k in lin})
    p0 = plan.jlo + ctx.f                           # bit position of 2^jlo
    pos = [p0 + i for i in range(1, plan.K)]
    rows = [piece(i) for i in range(plan.K)]
    if plan.below is not None or plan.signed:       # x < 2^jlo: below (zero) row
        pos, rows = [p0] + pos, [special] + rows
    if plan.below is not None and not plan.signed:  # x < 0: o_(W-2) = 1
        pos, rows = pos + [width - 2], rows + [special]
    if not pos or pos[0] < 0 or any(q <= p for p, q in zip(pos, pos[1:])) \
            or pos[-1] > width - 2:
        raise ValueError(f"octave boundaries at bits {pos} do not fit the leading-one "
                         f"circuit's {width - 1} positions")
    cols = pos + ([width - 1] if plan.signed else [])
    keys = geo + lin + (["zs"] if want_z else [])
    lifted = [True] * len(geo) + [feats[k].lifted for k in lin] + [True] * want_z
    n_thr = len(pos)
    coeff = _thermometer_coeff(ctx, rows, keys, lifted, extra=int(plan.signed))
    if plan.signed:                                 # and the sign bit itself, last column
        sign_col = np.zeros((n_thr + 2, 1), np.int64)
        sign_col[n_thr, 0] = 1
        coeff = np.concatenate([coeff, sign_col], 1)
    # the circuit's integer bits [N, k(+1)] times the table, fused (one local step)
    tab = b.leading_one(v, cols, magnitude=plan.signed, table=coeff)
    res: Dict[str, Shares] = {k: ctx.column(tab, i) for i, k in enumerate(keys)}
    jobs = []
    if plan.signed:
        s = ctx.column(tab, len(keys))
        sgn = b.public_sub(ctx.fill(v, 1.0), b.add(s, s), frac_bits=0)      # ±1, integer
        jobs += [(k, (res[k], sgn), False) for k in geo if feats[k].neg_sign < 0]
    if want_z:
        jobs.append(("z", (v, res.pop("zs")), True))
    if jobs:
        if plan.signed:                             # ±1 times grid values: exact
            outs = b.mul_many([j[1] for j in jobs], truncate=False)
        else:
            outs = mul_round(ctx, [j[1] for j in jobs], [j[2] for j in jobs])
        for (key, _, _), out in zip(jobs, outs):
            res[key] = out
    res["levels"] = 1
    return res


def _sub_octave_by_leading_one(ctx: Ctx, v: Shares, plan: Plan, feats: Dict[str, object],
                               want_z: bool) -> Dict[str, Shares]:
    """Pieces [2^(j+δ), 2^(j+1+δ)) with -1 < δ < 0 (log: δ = -1/2) from the
    octave [2^q, 2^(q+1)) of the leading-one circuit and ONE comparison
    c = [x >= 2^(q+1+δ)] against a threshold that is a table of the octave
    bits (local): the piece is j = q + c. Lin features are a table plus
    c·c1 (local), z = z0 - c·z0/2 with z0 = x·2^-q computed beside the
    comparison (c·z0 is exact: an integer bit times a lifted value). Three
    rounds and 1 circuit + 1 comparator per element, against about
    log2 K + 1 comparators in as many rounds."""
    from ..privpy.leading_one import default_width
    b = ctx.b
    width = default_width(b.cfg)
    lin = list(feats)
    big = 2.0 ** math.ceil(math.log2(b.cfg.bound) + 2)    # never reached: c = 0
    qmax = plan.jlo + plan.K - 1
    qs = list(range(max(plan.jlo - 1, -ctx.f), qmax + 1))

    def octave(q):
        r = {k: feats[k].c0 + feats[k].c1 * (q - plan.jlo) for k in lin}
        r.update(zs=2.0 ** -q, th=ctx.grid_up(2.0 ** (q + 1 + plan.delta)) if q < qmax else big)
        return r

    special = dict({k: feats[k].below for k in lin}, zs=0.0, th=big)
    pos = [q + ctx.f for q in qs[1:]]
    rows = [octave(q) for q in qs]
    if plan.below is not None:                      # x < 2^qs[0]: below row
        pos, rows = [qs[0] + ctx.f] + pos, [special] + rows
        pos, rows = pos + [width - 2], rows + [special]   # x < 0: o_(W-2) = 1
    keys = lin + ["zs", "th"]
    lifted = [feats[k].lifted for k in lin] + [True, False]
    tab = b.leading_one(v, pos, table=_thermometer_coeff(ctx, rows, keys, lifted))
    th = ctx.column(tab, len(lin) + 1)
    c = b.ltz(b.sub(v, th), integer=True)           # [x < θ]: c = 1 - it
    c = b.public_sub(ctx.fill(v, 1.0), c, frac_bits=0)
    z0 = mul_round(ctx, [(v, ctx.column(tab, len(lin)))], [True])[0]   # beside the comparison
    res: Dict[str, Shares] = {}
    for i, k in enumerate(lin):
        unit = 2.0 ** (ctx.f + (ctx.E if feats[k].lifted else 0))
        step = b.mul_public(c, ctx.fill(v, round(feats[k].c1 * unit)), c_frac_bits=0,
                            c_bound=2.0 ** 62)
        res[k] = b.add(ctx.column(tab, i), step)
    if want_z:
        cz = b.mul(c, z0, truncate=False)
        res["z"] = b.sub(z0, ctx.lower(cz, 1))
    res["levels"] = 2
    return res
