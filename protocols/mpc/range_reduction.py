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

Only `ltz`, multiplications and local operations are used: the four-server
security model is that of those protocols (DESIGN §5, §6), with fresh masks
and garbled tables per call, and no value is revealed to pick a threshold.
Tables are rounded to the fixed-point grid so these combinations are exact
(an exact 0 times anything, even a wrapped value, is an exact 0, which gives
saturation and the x <= 0 rules for free).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from .backend import Shares
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


def radices(plan: Plan, method: str, window: int) -> List[int]:
    """Pieces per level. "thresholds": one level, every boundary compared at
    once (K - 1 comparisons). "binary_search": two sub-blocks per level, except
    that the first level makes blocks of at most `window` octaves (window // h
    pieces), which bounds the normalized z by 2^window: comparator inputs and
    products stay small (DESIGN §3, §6; 8 octaves in the 64-bit ring, where a
    product's truncation fails with probability ~|xy|·2^(2f-64)). A search
    that would save fewer than 2 comparisons per element (K <= 5: a softmax
    row sum) stays one level: rounds are not free either."""
    if method not in ("thresholds", "binary_search"):
        raise ValueError(f"unknown range_reduction {method!r} (thresholds, binary_search)")
    if method == "thresholds" or plan.K <= 2:
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

    def lookup(bits, rows, level):
        spec = columns(level)
        mat = np.array([[x for key, _, _ in spec
                         for x in (ctx.grid_up(r[key]) if key == "th" else np.atleast_1d(r[key]))]
                        for r in rows])
        lifted = [lf for _, width, lf in spec for _ in range(width)]
        tab = ctx.table(bits, mat, lifted=lifted)
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

    prev = lookup(ctx.bits(v, thr), rows, 0)
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
        prev = lookup(bits, level_rows(l), l)
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
