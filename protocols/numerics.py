"""Private non-linear numerics on shares: exp, log, reciprocal, division,
sqrt, rsqrt, sigmoid, tanh, softmax, log_softmax (DESIGN §7).

Building blocks (all on `Shares`, through the Backend API only):

- Range reduction by ONE batched comparison round: x is compared against
  every public threshold θ_k at once (one `ltz` on a stacked [N, K] tensor).
  Any piecewise-constant function of x (initial guesses 2^-m, 2^k, k·ln2,
  interval coefficients) is then a public linear combination of the bits
  b_k = [x < θ_k]: one local matmul with a public table, no round. Tables
  are rounded to the fixed-point grid so these combinations are exact (an
  exact 0 times anything, even a wrapped value, is an exact 0, which gives
  saturation for free).
- Products of independent values are batched: a tree of powers of degree d
  costs ceil(log2 d) multiplication rounds (ceil(log2(d+1)) with a scale).
- In the 128-bit ring intermediate values carry `extra_frac_bits` (8) more
  fractional bits ("lifted": value·2^E at the config's f bits): products of
  two lifted values are truncated once more, locally. Intermediates stay far
  below 2^87 (truncation failure <= 2^-40, DESIGN §3); the 64-bit ring has no
  room for that and computes at its 16 bits.

Rounds are sequential communication rounds: a batched private multiplication
= 1, a batched comparison (`ltz`) = 1. `CostTracker` measures the critical
path of every function by instrumenting the backend.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from . import compare
from . import shares as sh
from .backend import Backend, Shares

LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)


# ------------------------------------------------------------------ context
class _Ctx:
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

    # shapes and constants ------------------------------------------------
    def flat(self, x: Shares) -> Shares:
        return self.b.map_shares(lambda s: sh.reshape(s, [-1], self.limbs), x)

    def shape(self, x: Shares) -> tf.Tensor:
        return sh.dynamic_shape(x[0], self.limbs)

    def fill(self, x: Shares, value, suffix: Sequence[int] = ()) -> tf.Tensor:
        shape = self.shape(x)
        if suffix:
            shape = tf.concat([shape, tf.constant(list(suffix), tf.int64)], 0)
        v = tf.constant(value, tf.float64)
        return tf.broadcast_to(v, shape)

    def ones(self, x: Shares) -> Shares:
        return self.b.add_public(self.b.sub(x, x), self.fill(x, 1.0))

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
        return self.b.mul_public(x, self.fill(x, 2.0 ** -k), c_frac_bits=k, c_bound=2.0)

    def lmul_many(self, pairs: Sequence[Tuple[Shares, Shares]]) -> List[Shares]:
        """Products of lifted values (one round), lifted."""
        return [self.lower(z) for z in self.b.mul_many(list(pairs))]

    def lconst(self, c: float) -> float:
        """A public constant at the lifted scale."""
        return c * 2.0 ** self.E

    # comparisons and tables ----------------------------------------------
    def bits(self, x: Shares, thresholds: Sequence[float]) -> Shares:
        """[x < θ_k] for a flat x [N] and all thresholds: ONE ltz on [N, K]."""
        k = len(thresholds)
        xk = self.b.map_shares(
            lambda s: sh.tile(sh.expand_dims(s, 1, self.limbs), [1, k], self.limbs), x)
        th = tf.constant(np.asarray(thresholds, np.float64))
        n = self.shape(x)[0]
        d = self.b.add_public(xk, -tf.broadcast_to(th[None, :],
                                                  tf.stack([n, tf.constant(k, tf.int64)])))
        return self.b.ltz(d)

    def table(self, bits: Shares, values: np.ndarray, lifted: bool = True) -> Shares:
        """Piecewise-constant values[i] on interval i (θ_{i-1} <= x < θ_i,
        i = 0..K) from bits [N, K] = [x < θ_k]: returns [N, M] shares, exact
        on the (lifted) fixed-point grid. One local matmul, no round."""
        values = np.asarray(values, np.float64)
        if values.ndim == 1:
            values = values[:, None]
        unit = 2.0 ** (self.f + (self.E if lifted else 0))
        vint = np.round(values * unit)                    # the grid values
        d = vint[:-1] - vint[1:]                          # D_k = v_k - v_{k+1}
        base = vint[-1:]                                  # v_K (all bits 0)
        coeff = np.concatenate([d, base], 0) / 2.0 ** self.f
        if np.abs(coeff).max() >= 2.0 ** (61 - self.f):
            raise ValueError("piecewise table out of range")
        ones = self.b.map_shares(lambda s: sh.getitem(s, (slice(None), slice(0, 1)),
                                                      self.limbs), bits)
        ones = self.ones(ones)
        aug = self.b.map_many(lambda p: sh.concat(p, 1, self.limbs), [bits, ones])
        return self.b.mul_public(aug, tf.constant(coeff), kind="matmul", c_frac_bits=self.f,
                                 c_bound=2.0 ** (62 - self.f))

    def column(self, m: Shares, j: int) -> Shares:
        return self.b.map_shares(lambda s: sh.getitem(s, (slice(None), j), self.limbs), m)

    def combine(self, terms: Sequence[Shares], coeffs: Sequence[float]) -> Shares:
        """Σ coeffs[i]·terms[i] for flat terms [N] and public scalars: one
        local matmul with c_frac_bits = fc."""
        st = self.b.map_many(lambda p: sh.stack(p, 1, self.limbs), list(terms))
        c = np.asarray(coeffs, np.float64)[:, None]
        fb = self.fc if np.abs(c).max() < 2.0 ** (61 - self.fc) else self.f
        z = self.b.mul_public(st, tf.constant(c), kind="matmul", c_frac_bits=fb,
                              c_bound=2.0 ** (62 - fb))
        return self.column(z, 0)


def _powers(ctx: _Ctx, e: Shares, degree: int, scale: Optional[Shares] = None) -> List[Shares]:
    """Lifted terms t_i = scale·e^i for i = 0..degree by a product tree.

    With a scale, the round of step s makes t_i (s <= i < 2s) = t_{i-s}·e^s
    and e^(2s): ceil(log2(degree + 1)) rounds. Without (t_0 = None, t_1 = e),
    it makes t_i (s < i <= 2s) = t_{i-s}·e^s: ceil(log2 degree) rounds."""
    off = 0 if scale is not None else 1
    t: Dict[int, Shares] = {0: scale} if scale is not None else {1: e}
    pw: Dict[int, Shares] = {1: e}
    s = 1
    while max(t) < degree:
        idx = [i for i in range(s + off, 2 * s + off) if i <= degree]
        pairs = [(t[i - s], pw[s]) for i in idx]
        need_pw = scale is not None and 2 * s <= degree
        if need_pw:
            pairs.append((pw[s], pw[s]))
        out = ctx.lmul_many(pairs)
        for i, z in zip(idx, out):
            t[i] = z
        if need_pw:
            pw[2 * s] = out[-1]
        elif 2 * s in t:
            pw[2 * s] = t[2 * s]
        s *= 2
    return [t.get(i) for i in range(degree + 1)]


@functools.lru_cache(maxsize=None)
def _cheb_fit(name: str, a: float, b: float, degree: int, scale: float = 1.0) -> Tuple:
    """Near-minimax (Chebyshev least squares) monomial coefficients of fn
    on [a, b] in the variable z = x / scale."""
    from numpy.polynomial import chebyshev as Ch, polynomial as P
    fn = _FUNCS[name]
    n = 4000
    t = np.cos(np.pi * (np.arange(n) + 0.5) / n)
    za, zb = a / scale, b / scale
    m, h = (za + zb) / 2, (zb - za) / 2
    pc = Ch.cheb2poly(Ch.chebfit(t, fn((m + h * t) * scale), degree))
    out, acc, lin = np.zeros(degree + 1), np.array([1.0]), np.array([-m / h, 1 / h])
    for k in range(degree + 1):
        out[:len(acc)] += pc[k] * acc
        acc = P.polymul(acc, lin)
    return tuple(out)


_FUNCS = {
    "exp2": lambda x: 2.0 ** x,
    "rsqrt1m": lambda e: (1.0 - e) ** -0.5,
    "log1p": np.log1p,
    "sigmoid": lambda x: 0.5 * (1 + np.tanh(x / 2)),
    "tanh": np.tanh,
}


def _setting(backend: Backend, fn: str, key: str, override=None):
    return backend.cfg.function_setting(fn, key, override)


def _elementwise(fn):
    """Runs fn(ctx, flat x, **kw) on the flattened input, restores the shape."""
    @functools.wraps(fn)
    def wrapper(backend: Backend, x: Shares, **kw) -> Shares:
        ctx = _Ctx(backend)
        shape = ctx.shape(x)
        out = fn(ctx, ctx.flat(x), **kw)
        return backend.map_shares(lambda s: sh.reshape(s, shape, ctx.limbs), out)
    return wrapper


def _octaves(ctx: _Ctx) -> Tuple[int, int]:
    """Exponents j with 2^j from one ulp up to below the bound B."""
    return -ctx.f, int(math.ceil(math.log2(ctx.b.cfg.bound))) - 1


# ---------------------------------------------------------------------- exp
def _exp_flat(ctx: _Ctx, x: Shares, degree: int, nonpositive: bool = False) -> Shares:
    """exp(x) = 2^k · 2^frac, t = x·log2(e) = k + frac, k = floor(t) from
    one comparison batch on t, 2^frac by a degree-d polynomial, the product
    with 2^k folded into the power tree (scale)."""
    b = ctx.b
    t = ctx.scale(x, LOG2E)                                   # for comparisons
    tl = ctx.lscale(x, LOG2E)                                 # lifted t
    jlo = -ctx.f
    jhi = 0 if nonpositive else int(math.floor(math.log2(b.cfg.bound)))
    js = list(range(jlo, jhi + 1))
    bits = ctx.bits(t, js)                                    # [t < j]
    # interval i: t in [js[i-1], js[i]); i = 0: t < jlo; i = K: t >= jhi
    k_of = [jlo - 1] + js                                     # floor(t) per interval
    scale = [0.0] + [2.0 ** k for k in js[:-1]] + [0.0 if not nonpositive else 1.0]
    sat = [0.0] * len(js) + [0.0 if nonpositive else 2.0 ** jhi]
    k_used = [k if s != 0 else 0 for k, s in zip(k_of, scale)]
    tab = ctx.table(bits, np.stack([np.array(k_used, float), scale, sat], 1))
    kl, sl, satl = (ctx.column(tab, j) for j in range(3))
    frac = b.sub(tl, kl)                                      # lifted, in [0, 1)
    coeffs = _cheb_fit("exp2", 0.0, 1.0, degree)
    terms = _powers(ctx, frac, degree, scale=sl)
    y = ctx.combine(terms, coeffs)
    return ctx.lower(b.add(y, satl))


@_elementwise
def _exp(ctx: _Ctx, x: Shares, degree: Optional[int] = None) -> Shares:
    return _exp_flat(ctx, x, int(_setting(ctx.b, "exp", "degree", degree)))


def exp(backend: Backend, x: Shares, degree: Optional[int] = None) -> Shares:
    """e^x. Saturates: 0 where x·log2(e) < -f (e^x below one ulp), 2^floor(log2 B)
    where x·log2(e) >= floor(log2 B)."""
    return _exp(backend, x, degree=degree)


# ----------------------------------------------------------- reciprocal, div
def _recip_table(ctx: _Ctx, y: Shares, signed: bool):
    """Bits and initial guesses (2/3)·2^-j on |y| in [2^j, 2^(j+1)): |1 - y·g| <= 1/3;
    g = 0 at y = 0 (and for y < 0 when unsigned)."""
    jlo, jhi = _octaves(ctx)
    js = list(range(jlo, jhi + 1))
    u = 2.0 ** -ctx.f
    pos_th = [2.0 ** j for j in js]
    pos_v = [0.0] + [(2 / 3) * 2.0 ** -j for j in js]         # intervals below/between/above
    if not signed:
        return ctx.bits(y, pos_th), np.array(pos_v)
    neg_th = [-(2.0 ** j) + u for j in reversed(js)]          # [y <= -2^j]
    neg_v = [-(2 / 3) * 2.0 ** -j for j in reversed(js)]      # y in [-2^(j+1), -2^j]
    return ctx.bits(y, neg_th + pos_th), np.array(neg_v + pos_v)


def _goldschmidt(ctx: _Ctx, x: Optional[Shares], y: Shares, g: Shares, iterations: int,
                 expand=None):
    """q = x·g·Π(1 + e^(2^i)), e = 1 - y·g: Newton-Raphson's iterates for
    x/y (y_{i+1} = y_i(2 - y·y_i) has error e^(2^i)) with the error term
    squared instead of recomputed, so the two chains run in parallel: one
    round per iteration plus one for e (and x·g). With `expand`, y and g are
    per-row values broadcast to x's (larger) shape by expand."""
    b = ctx.b
    ex = expand or (lambda v: v)
    pairs = [(y, g)] + ([(x, ex(g))] if x is not None else [])
    prods = b.mul_many(pairs)                                 # lifted (y, x unlifted)
    e = b.public_sub(ctx.fill(y, ctx.lconst(1.0)), prods[0])
    q = prods[1] if x is not None else g
    for i in range(iterations):
        one_e = ctx.add_const(e, ctx.lconst(1.0))
        pairs = [(q, ex(one_e))] + ([(e, e)] if i < iterations - 1 else [])
        out = ctx.lmul_many(pairs)
        q = out[0]
        if i < iterations - 1:
            e = out[1]
    return ctx.lower(q)


def _newton_recip(ctx: _Ctx, x: Optional[Shares], y: Shares, g: Shares, iterations: int):
    """Classic Newton-Raphson r <- r(2 - y·r): two rounds per iteration,
    self-correcting; then x·r (one more round) for a division."""
    b = ctx.b
    r = g
    for _ in range(iterations):
        yr = b.mul(y, r)                                      # lifted
        two = b.public_sub(ctx.fill(y, ctx.lconst(2.0)), yr)
        r = ctx.lmul_many([(r, two)])[0]
    if x is not None:
        r = b.mul(x, r)
    return ctx.lower(r)


def _divide_flat(ctx, x, y, method, iterations, signed):
    bits, vals = _recip_table(ctx, y, signed)
    g = ctx.column(ctx.table(bits, vals), 0)
    if method == "goldschmidt":
        return _goldschmidt(ctx, x, y, g, iterations)
    if method == "newton":
        return _newton_recip(ctx, x, y, g, iterations)
    raise ValueError(f"unknown reciprocal method {method!r} (goldschmidt, newton)")


def reciprocal(backend: Backend, x: Shares, method: Optional[str] = None,
               iterations: Optional[int] = None, signed: Optional[bool] = None) -> Shares:
    """1/x for 2^-f <= |x| < B (x >= 2^-f only, if unsigned). 1/0 = 0."""
    return divide(backend, None, x, method=method, iterations=iterations, signed=signed,
                  _fn="reciprocal")


def divide(backend: Backend, x: Optional[Shares], y: Shares, method: Optional[str] = None,
           iterations: Optional[int] = None, signed: Optional[bool] = None,
           _fn: str = "divide") -> Shares:
    """x / y for shares of equal shapes (x None: 1/y). x / 0 = 0."""
    ctx = _Ctx(backend)
    method = _setting(backend, _fn, "method", method)
    iterations = int(_setting(backend, _fn, "iterations", iterations))
    signed = bool(_setting(backend, _fn, "signed", signed))
    shape = ctx.shape(y)
    out = _divide_flat(ctx, None if x is None else ctx.flat(x), ctx.flat(y), method,
                       iterations, signed)
    return backend.map_shares(lambda s: sh.reshape(s, shape, ctx.limbs), out)


# -------------------------------------------------------------- sqrt, rsqrt
def _root_flat(ctx: _Ctx, x: Shares, degree: int, want_sqrt: bool) -> Shares:
    """1/sqrt(x) = g·(1 - e)^(-1/2) with x in [2^j, 2^(j+1)) from one
    comparison batch, u = x·2^-j in [1, 2) (one round, exact power of two),
    e = 1 - (2/3)u in (-1/3, 1/3] (local), g = sqrt(2/3)·2^(-j/2). The
    degree-d polynomial for (1 - e)^(-1/2) is folded into a power tree with
    the scale g (rsqrt) or x·g (sqrt, made in the same round as u). x <= 0
    gives 0 (g = 0)."""
    b = ctx.b
    jlo, jhi = _octaves(ctx)
    js = list(range(jlo, jhi + 1))
    q = [0.0] + [2.0 ** -j for j in js]
    g = [0.0] + [math.sqrt(2 / 3) * 2.0 ** (-j / 2) for j in js]
    tab = ctx.table(ctx.bits(x, [2.0 ** j for j in js]), np.stack([q, g], 1))
    ql, gl = ctx.column(tab, 0), ctx.column(tab, 1)
    prods = b.mul_many([(x, ql)] + ([(x, gl)] if want_sqrt else []))   # lifted
    e = b.public_sub(ctx.fill(x, ctx.lconst(1.0)), ctx.scale(prods[0], 2 / 3))
    scale = prods[1] if want_sqrt else gl
    terms = _powers(ctx, e, degree, scale=scale)
    return ctx.lower(ctx.combine(terms, _cheb_fit("rsqrt1m", -1 / 3, 1 / 3, degree)))


@_elementwise
def _rsqrt(ctx, x, degree=None):
    return _root_flat(ctx, x, int(_setting(ctx.b, "rsqrt", "degree", degree)), False)


@_elementwise
def _sqrt(ctx, x, degree=None):
    return _root_flat(ctx, x, int(_setting(ctx.b, "sqrt", "degree", degree)), True)


def rsqrt(backend: Backend, x: Shares, degree: Optional[int] = None) -> Shares:
    """1/sqrt(x) for 2^-f <= x < B; 0 for x <= 0."""
    return _rsqrt(backend, x, degree=degree)


def sqrt(backend: Backend, x: Shares, degree: Optional[int] = None) -> Shares:
    """sqrt(x) for 0 <= x < B; 0 for x <= 0."""
    return _sqrt(backend, x, degree=degree)


# ---------------------------------------------------------------------- log
def _log_flat(ctx: _Ctx, x: Shares, degree: int, js: Optional[Sequence[int]] = None) -> Shares:
    """ln x = m·ln2 + ln(1 + z), z = x·2^-m - 1 in [2^-1/2 - 1, 2^1/2 - 1) with m
    from one comparison batch against 2^(j - 1/2); ln(1 + z) by a degree-d
    polynomial. x <= 0 gives ln(2^-(f+1)) (half an ulp)."""
    b = ctx.b
    if js is None:
        jlo, _ = _octaves(ctx)
        js = list(range(jlo, int(math.floor(math.log2(b.cfg.bound) + 0.5)) + 1))
    th = [2.0 ** (j - 0.5) for j in js]
    m_of = [js[0] - 1] + list(js)                             # interval i -> m
    q = [0.0] + [2.0 ** -m for m in js]
    coeffs = _cheb_fit("log1p", 2 ** -0.5 - 1, 2 ** 0.5 - 1, degree)
    p_at_m1 = float(np.polynomial.polynomial.polyval(-1.0, coeffs))
    bad = -(ctx.f + 1) * LN2 - p_at_m1                        # x <= 0: q = 0, z = -1
    mln2 = [bad] + [m * LN2 for m in m_of[1:]]
    tab = ctx.table(ctx.bits(x, th), np.stack([q, mln2], 1))
    ql, cl = ctx.column(tab, 0), ctx.column(tab, 1)
    u = b.mul(x, ql)                                          # lifted x·2^-m
    z = ctx.add_const(u, -ctx.lconst(1.0))
    terms = _powers(ctx, z, degree)
    poly = ctx.combine([ctx.ones(z) if t is None else t for t in terms],
                       [coeffs[0] * 2.0 ** ctx.E] + list(coeffs[1:]))
    return ctx.lower(b.add(poly, cl))


@_elementwise
def _log(ctx, x, degree=None):
    return _log_flat(ctx, x, int(_setting(ctx.b, "log", "degree", degree)))


def log(backend: Backend, x: Shares, degree: Optional[int] = None) -> Shares:
    """Natural log for 2^-f <= x < B; ln(2^-(f+1)) for x <= 0."""
    return _log(backend, x, degree=degree)


# --------------------------------------------------------- sigmoid and tanh
def _piecewise_flat(ctx: _Ctx, x: Shares, name: str, breakpoints: Sequence[float],
                    degree: int, lo: float, hi: float) -> Shares:
    """A piecewise polynomial in z = x/s (s = max |breakpoint|), constant lo
    below the first and hi above the last breakpoint. Interval membership is
    one comparison batch, in parallel with the powers z^2..z^d
    (ceil(log2 d) rounds); the per-interval coefficients are public linear
    combinations of the bits, so one more round of d products finishes it."""
    b = ctx.b
    bps = sorted(float(v) for v in breakpoints)
    s = max(abs(bps[0]), abs(bps[-1]))
    rows = [[lo] + [0.0] * degree]
    for a, c in zip(bps[:-1], bps[1:]):
        rows.append(list(_cheb_fit(name, a, c, degree, s)))
    rows.append([hi] + [0.0] * degree)
    bits = ctx.bits(x, bps)
    coef = ctx.table(bits, np.array(rows))                    # [N, d+1] lifted
    z = ctx.lscale(x, 1.0 / s)
    pw = _powers(ctx, z, degree)[1:]
    prods = b.mul_many([(ctx.column(coef, j + 1), pw[j]) for j in range(degree)])
    acc = ctx.column(coef, 0)
    for p in prods:
        acc = b.add(acc, ctx.lower(p))
    return ctx.lower(acc)


def _pw_setting(backend, name, breakpoints, degree):
    bp = _setting(backend, name, "breakpoints", breakpoints)
    return list(bp), int(_setting(backend, name, "degree", degree))


@_elementwise
def _sigmoid(ctx, x, breakpoints=None, degree=None):
    bp, d = _pw_setting(ctx.b, "sigmoid", breakpoints, degree)
    return _piecewise_flat(ctx, x, "sigmoid", bp, d, 0.0, 1.0)


@_elementwise
def _tanh(ctx, x, breakpoints=None, degree=None):
    bp, d = _pw_setting(ctx.b, "tanh", breakpoints, degree)
    return _piecewise_flat(ctx, x, "tanh", bp, d, -1.0, 1.0)


def sigmoid(backend: Backend, x: Shares, breakpoints=None, degree=None) -> Shares:
    """1/(1 + e^-x), piecewise polynomial; 0 / 1 beyond the outer breakpoints."""
    return _sigmoid(backend, x, breakpoints=breakpoints, degree=degree)


def tanh(backend: Backend, x: Shares, breakpoints=None, degree=None) -> Shares:
    """tanh(x), piecewise polynomial; -1 / 1 beyond the outer breakpoints."""
    return _tanh(backend, x, breakpoints=breakpoints, degree=degree)


# ------------------------------------------------------ softmax, log_softmax
def _rows(backend: Backend, x: Shares, axis: int):
    """x with `axis` moved last and flattened to [R, n]; and the inverse."""
    limbs = backend.limbs
    shape = sh.logical_shape(x[0], limbs)
    if not shape.is_fully_defined():
        raise ValueError("softmax needs a fully known shape")
    r = shape.rank
    axis = sh.norm_axis(axis, r)
    perm = [i for i in range(r) if i != axis] + [axis]
    inv = list(np.argsort(perm))
    tshape = [shape[i] for i in perm]
    n = int(shape[axis])
    rows = int(np.prod(tshape[:-1], dtype=np.int64))
    x2 = backend.map_shares(lambda s: sh.reshape(sh.transpose(s, perm, limbs), [rows, n], limbs),
                            x)

    def back(y: Shares) -> Shares:
        return backend.map_shares(
            lambda s: sh.transpose(sh.reshape(s, tshape, limbs), inv, limbs), y)
    return x2, rows, n, back


def _shifted_exp(ctx: _Ctx, x: Shares, axis: int, degree: int):
    """d = x - max along axis (a comparison tree), e = exp(d) <= 1 and the row
    sums s in [1, n], in the [R, n] layout."""
    b = ctx.b
    x2, rows, n, back = _rows(b, x, axis)
    m = compare.reduce_max_last(b, x2, n)                      # [R]

    def expand(v: Shares) -> Shares:                          # [R] -> flat [R·n]
        return b.map_shares(lambda s: sh.reshape(sh.broadcast_to(
            sh.reshape(s, [rows, 1], ctx.limbs), [rows, n], ctx.limbs), [-1], ctx.limbs), v)
    d = b.sub(ctx.flat(x2), expand(m))
    e = _exp_flat(ctx, d, degree, nonpositive=True)            # flat [R·n]
    s = b.reduce_sum(b.map_shares(lambda v: sh.reshape(v, [rows, n], ctx.limbs), e), 1)
    return d, e, s, n, expand, back, rows


def softmax(backend: Backend, x: Shares, axis: int = -1, degree: Optional[int] = None,
            iterations: Optional[int] = None) -> Shares:
    """exp(x - max) / Σ exp(x - max) along axis (static length n). exp of the
    non-positive shifted values needs thresholds on [-f, 0] only; the row sum
    is in [1, n], so its reciprocal needs ceil(log2 n) thresholds (one per
    row), and the division is Goldschmidt's with the numerators in the first
    round."""
    ctx = _Ctx(backend)
    degree = int(_setting(backend, "softmax", "degree", degree))
    iterations = int(_setting(backend, "softmax", "iterations", iterations))
    d, e, s, n, expand, back, rows = _shifted_exp(ctx, x, axis, degree)
    js = list(range(1, int(math.ceil(math.log2(max(n, 2)))) + 1))
    bits = ctx.bits(s, [2.0 ** j for j in js])
    g = ctx.column(ctx.table(bits, [2 / 3] + [(2 / 3) * 2.0 ** -j for j in js]), 0)
    out = _goldschmidt(ctx, e, s, g, iterations, expand=expand)
    return back(backend.map_shares(lambda v: sh.reshape(v, [rows, n], ctx.limbs), out))


def log_softmax(backend: Backend, x: Shares, axis: int = -1, degree: Optional[int] = None,
                log_degree: Optional[int] = None) -> Shares:
    """(x - max) - ln Σ exp(x - max) along axis; the log of the row sum (in
    [1, n]) needs ceil(log2 n + 1/2) + 1 thresholds per row."""
    ctx = _Ctx(backend)
    degree = int(_setting(backend, "log_softmax", "degree", degree))
    log_degree = int(_setting(backend, "log_softmax", "log_degree", log_degree))
    d, e, s, n, expand, back, rows = _shifted_exp(ctx, x, axis, degree)
    js = list(range(0, int(math.ceil(math.log2(max(n, 2)) + 0.5)) + 1))
    ls = _log_flat(ctx, s, log_degree, js=js)                  # [R]
    out = backend.sub(d, expand(ls))
    return back(backend.map_shares(lambda v: sh.reshape(v, [rows, n], ctx.limbs), out))


# ------------------------------------------------------------- cost tracker
class CostTracker:
    """A Backend proxy that measures what a computation costs.

    Every Shares value gets a depth: the critical path of sequential rounds
    that produced it (a batched multiplication or a batched comparison adds
    one round; local operations add none). Values the tracker has not seen
    raise, so nothing is silently counted as free; register inputs first.
    Also counts elementwise products and comparisons.
    """

    _LINEAR = ("add", "sub", "neg", "add_public", "public_sub", "mul_public", "reduce_sum",
               "map_shares", "map_many")

    def __init__(self, backend: Backend):
        self._b = backend
        self._depth: Dict[int, Tuple[int, int, int]] = {}
        self._keep: list = []
        self.products = 0
        self.comparisons = 0

    def __getattr__(self, name):
        if name in CostTracker._LINEAR:
            return functools.partial(self._linear, name)
        return getattr(self._b, name)

    @staticmethod
    def _is_shares(v) -> bool:
        return isinstance(v, tuple) and len(v) == 2 and all(isinstance(t, tf.Tensor) for t in v)

    def _size(self, s: Shares) -> int:
        return int(sh.logical_shape(s[0], self._b.limbs).num_elements())

    def register(self, s: Shares) -> Shares:
        self._set(s, (0, 0, 0))
        return s

    def depth(self, s: Shares) -> Tuple[int, int, int]:
        """(rounds, multiplication rounds, comparison rounds) on the critical path."""
        key = id(s[0])
        if key not in self._depth:
            raise KeyError("CostTracker: a value of unknown origin (register the inputs)")
        return self._depth[key]

    def _set(self, s: Shares, d):
        self._depth[id(s[0])] = d
        self._keep.append(s)

    def _deepest(self, values) -> Tuple[int, int, int]:
        ds = [self.depth(v) for v in values]
        return max(ds) if ds else (0, 0, 0)

    def _linear(self, name, *args, **kw):
        ins = []
        for a in args:
            if self._is_shares(a):
                ins.append(a)
            elif isinstance(a, (list, tuple)):
                ins += [v for v in a if self._is_shares(v)]
        out = getattr(self._b, name)(*args, **kw)
        self._set(out, self._deepest(ins))
        return out

    def mul(self, x: Shares, y: Shares, *args, **kw) -> Shares:
        d = self._deepest([x, y])
        out = self._b.mul(x, y, *args, **kw)
        self.products += self._size(out)
        self._set(out, (d[0] + 1, d[1] + 1, d[2]))
        return out

    def mul_many(self, pairs):
        d = self._deepest([v for p in pairs for v in p])
        outs = self._b.mul_many(pairs)
        for o in outs:
            self.products += self._size(o)
            self._set(o, (d[0] + 1, d[1] + 1, d[2]))
        return outs

    def ltz(self, x: Shares) -> Shares:
        d = self.depth(x)
        out = self._b.ltz(x)
        self.comparisons += self._size(x)
        self._set(out, (d[0] + 1, d[1], d[2] + 1))
        return out


def measure(backend: Backend, fn, *inputs: Shares) -> Dict[str, float]:
    """Runs fn(tracker, *inputs) eagerly and returns its output, rounds on
    the critical path (total, multiplication, comparison) and products and
    comparisons per element of the first input."""
    tr = CostTracker(backend)
    for v in inputs:
        tr.register(v)
    out = fn(tr, *inputs)
    rounds, mrounds, crounds = tr.depth(out)
    n = tr._size(inputs[0])
    return {"out": out, "rounds": rounds, "mul_rounds": mrounds, "cmp_rounds": crounds,
            "products": tr.products / n, "comparisons": tr.comparisons / n}
