"""Fast mode of the private numerics (issue 14): comparison-free methods
(one sign comparison for sigmoid and tanh) on stated domains, at or below the
fastest peer's error, for callers who accept that accuracy.

Selected by `mode="fast"` per call, by the "mode" setting of a function or of
"common" in the config's "functions" (protocols/defaults.json, default
"exact"), or by the converter's `Policy(numerics_mode="fast")`; the exact
methods are in protocols/mpc/fixedpoint/numerics.py, which dispatches here.

Methods (all products of shares, in both rings; "lifted" intermediates as in
protocols/mpc/fixedpoint/lifted.py):

- exp: CrypTen's limit approach, e^x = lim (1 + x/N)^N, with the second-order
  base 1 + u + u²/2 (u = x/N, N = 2^n): n squarings, relative error about
  |x|³/(6N²) instead of x²/(2N), so n = 8 (128-bit) is 300 times more exact
  than CrypTen's n = 8 for one more product. The base is >= 1/2 for every u,
  and for u in [-1.8, 0] it is at most 0.82, so e^x for x in [-1.8N, 0] is
  within 0.82^N (+ the fixed-point error) of 0: exp of shifted logits
  (softmax) needs no comparison. Beyond -2N the base exceeds 1 and the result
  is wrong (large); above ln B it overflows the ring.
- reciprocal, divide: Newton-Raphson in Goldschmidt's form
  (series.goldschmidt) from a public polynomial guess g on the domain
  [lo, hi]: 1 - x·g(x) is the scaled Chebyshev polynomial T_m((lo + hi -
  2x)/(hi - lo)) / T_m((hi + lo)/(hi - lo)), the smallest on [lo, hi] of all
  degree-m polynomials that are 1 at 0 (Rivlin, "Chebyshev polynomials",
  §2.7); k iterations give the relative error |1 - x·g|^(2^k). The degree and
  k are chosen for the fewest rounds that reach the configured relative
  error. The output is (1 - (1 - x·g(x))^(2^k)) / x everywhere: outside
  [lo, hi] it is still close to 1/x while |1 - x·g(x)| < 1 and wrong beyond.
- sqrt, rsqrt: Goldschmidt's square-root iteration (g -> sqrt x, 2h ->
  1/sqrt x, two rounds per iteration) from a public polynomial guess p of
  1/sqrt on the domain [lo, hi] (near-minimax relative error); the degree
  and the iteration count are chosen for the fewest rounds that reach the
  configured relative error. Outside [lo, hi] the guess is extrapolated: close
  just outside, wrong further out and for x <= 0 (sqrt(0) = 0 still).
- sigmoid: one comparison β = [x < 0] gives |x| = x - 2βx (exact); e =
  e^(-|x|) by the limit above lies in (0, 1], d = 1 + e in [1, 2]; 1/d by
  Goldschmidt from the linear minimax guess 24/17 - 8d/17 (|1 - d·g| <= 1/17),
  with the sign s = 1 - 2β folded into the numerator: sigmoid(x) = s/d + β.
  CrypTen's method (crypten/common/functions/approximations.py) with a
  bounded denominator. Accurate for |x| < 1.8N, wrong from 2N.
- tanh(x) = 2·sigmoid(2x) - 1.
- log: CrypTen's Householder iterations: y0 = x/120 - 20·e^(-2x - 1) + 3,
  then y <- y - Σ_{i=1}^{order} h^i / i, h = 1 - x·e^(-y) (the series of
  -ln(1 - h) = y - ln x), with the fast exp.
- softmax, log_softmax: the max shift of the exact mode (comparisons), the
  fast exp of the non-positive shifted values, the row sum's reciprocal
  (domain [1, n]) or log by the methods above.

Domains, measured errors and times: docs/numerics.md ("Fast mode").
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Sequence, Tuple

import numpy as np
from numpy.polynomial import chebyshev as Ch, polynomial as P

from ..privpy import compare
from . import series as S
from ..runtime import shares as sh
from ...config import DEFAULTS
from ..privpy.backend import Backend, Shares
from .lifted import Ctx, mul_round

MODES = ("exact", "fast")
#: functions with a fast method (the others compute exactly in either mode)
FAST_FUNCTIONS = ("exp", "log", "reciprocal", "divide", "sqrt", "rsqrt", "sigmoid", "tanh",
                  "softmax", "log_softmax")


# ----------------------------------------------------------------- settings
def mode(backend: Backend, fn: str, override: Optional[str] = None) -> str:
    """The numerics mode of fn: the per-call override, else the config's
    setting for fn, else the config's "common" one, else defaults.json's."""
    m = override
    if m is None:
        cfg = backend.cfg.functions
        dflt = DEFAULTS["functions"]
        for src in (cfg.get(fn, {}), cfg.get("common", {}), dflt.get(fn, {}), dflt["common"]):
            if "mode" in src:
                m = src["mode"]
                break
    if m not in MODES:
        raise ValueError(
            f"unknown numerics mode {m!r} for {fn}: use 'exact' (the default, <= 1e-4 "
            "everywhere in range) or 'fast' (comparison-free, accurate on a stated domain: "
            "see docs/numerics.md)")
    return m


def setting(backend: Backend, fn: str, key: str, override: Any = None) -> Any:
    """A fast-mode setting ("fast" under fn in the config, then defaults.json);
    per-ring values ({"128": .., "64": ..}) are resolved for the runtime's ring."""
    v = override
    if v is None:
        own = backend.cfg.functions.get(fn, {}).get("fast", {})
        v = own[key] if key in own else DEFAULTS["functions"][fn]["fast"][key]
    if isinstance(v, dict):
        v = v[str(backend.cfg.ring_bits)]
    return v


# ---------------------------------------------------------------------- exp
def exp_limit(ctx: Ctx, x: Shares, n: int) -> Shares:
    """Lifted (1 + u + u²/2)^(2^n), u = x/2^n, for an unlifted x: n + 1
    multiplication rounds, one product each."""
    b = ctx.b
    u = ctx.lscale(x, 2.0 ** -n)
    u2h = ctx.lmul_many([(u, ctx.scale(u, 0.5))])[0]
    y = ctx.add_const(b.add(u, u2h), ctx.lconst(1.0))
    for _ in range(n):
        y = ctx.lmul_many([(y, y)])[0]
    return y


@S.elementwise
def _exp(ctx: Ctx, x: Shares, iterations: Optional[int] = None) -> Shares:
    n = int(setting(ctx.b, "exp", "iterations", iterations))
    return ctx.lower(exp_limit(ctx, x, n))


def exp(backend: Backend, x: Shares, iterations: Optional[int] = None) -> Shares:
    """e^x by 2^n squarings of 1 + u + u²/2, u = x/2^n (module doc)."""
    return _exp(backend, x, iterations=iterations)


# ------------------------------------------------------------ reciprocal
@functools.lru_cache(maxsize=None)
def recip_plan(lo: float, hi: float, rel_error: float) -> Tuple[Tuple[float, ...], float, float,
                                                                  int]:
    """(coefficients of the guess g in z = (x - c)/h, c, h, iterations) for
    1/x on [lo, hi]: the degree m - 1 and iteration count k with the fewest
    rounds (ceil(log2(m - 1)) for the powers of z, 1 for x·g, k) such that
    (1/T_m((hi + lo)/(hi - lo)))^(2^k) <= rel_error; fewer products on ties."""
    if not 0 < lo < hi:
        raise ValueError(f"the fast reciprocal needs a domain 0 < lo < hi, got [{lo}, {hi}]")
    c, h = (lo + hi) / 2, (hi - lo) / 2
    best = None
    for m in range(2, 13):
        e0 = 1.0 / Ch.chebval(c / h, [0] * m + [1])
        for k in range(1, 8):
            if e0 ** (2 ** k) <= rel_error:
                cost = ((m - 2).bit_length() + 1 + k, m - 1 + 2 * k)
                if best is None or cost < best[0]:
                    best = (cost, m, k)
                break
    if best is None:
        raise ValueError(f"the fast reciprocal cannot reach relative error {rel_error} on "
                         f"[{lo}, {hi}] with 12 terms and 7 iterations: narrow the domain")
    _, m, k = best
    q = Ch.cheb2poly([0] * m + [1]) * (-1.0) ** np.arange(m + 1)   # T_m(-z)
    num = -q / Ch.chebval(c / h, [0] * m + [1])
    num[0] += 1.0                                                   # 1 - q, zero at x = 0
    g, _ = P.polydiv(num, [c / h, 1.0])                             # / (z - z0), z0 = -c/h
    return tuple(g / h), c, h, k


def recip_guess(ctx: Ctx, y: Shares, lo: float, hi: float, rel_error: float):
    """The lifted guess g(y) of recip_plan and its iteration count."""
    coeffs, c, h, k = recip_plan(float(lo), float(hi), float(rel_error))
    return _poly_guess(ctx, y, coeffs, c, h), k


def _poly_guess(ctx: Ctx, y: Shares, coeffs: Sequence[float], c: float, h: float) -> Shares:
    """Lifted Σ coeffs[i]·z^i, z = (y - c)/h in [-1, 1] on the domain: the
    powers of z by one product tree (ceil(log2 degree) rounds)."""
    if 1.0 / h < 4:
        z = ctx.lscale(y, 1.0 / h)
    else:
        z = ctx.lift(ctx.scale(y, 1.0 / h))
    z = ctx.add_const(z, -ctx.lconst(c / h))
    terms = S.power_terms(ctx, z, len(coeffs) - 1)
    return ctx.combine([ctx.ones(z)] + terms[1:], [coeffs[0] * 2.0 ** ctx.E] + list(coeffs[1:]))


def divide(backend: Backend, x: Optional[Shares], y: Shares, fn: str = "divide",
           domain: Optional[Sequence[float]] = None,
           rel_error: Optional[float] = None) -> Shares:
    """x / y (x None: 1/y) for y in the configured domain (module doc)."""
    ctx = Ctx(backend)
    lo, hi = setting(backend, fn, "domain", domain)
    err = float(setting(backend, fn, "rel_error", rel_error))
    shape = ctx.shape(y)
    yf = ctx.flat(y)
    polish = int(setting(backend, fn, "newton_polish"))
    g, k = recip_guess(ctx, yf, lo, hi, err)
    xf = None if x is None else ctx.flat(x)
    if polish:
        # Goldschmidt's truncation errors add up (its products are not
        # self-correcting): about 5 ulps in the 64-bit ring; Newton steps
        # r(2 - y·r) from its result leave about 3 (then x·r for a division).
        r = S.goldschmidt(ctx, None, yf, g, k)
        out = S.newton_recip(ctx, xf, yf, ctx.lift(r), polish)
    else:
        out = S.goldschmidt(ctx, xf, yf, g, k)
    return backend.map_shares(lambda s: sh.reshape(s, shape, ctx.limbs), out)


# -------------------------------------------------------------- sqrt, rsqrt
@functools.lru_cache(maxsize=None)
def rsqrt_plan(lo: float, hi: float, rel_error: float) -> Tuple[Tuple[float, ...], float, float,
                                                                   int]:
    """(coefficients of the guess p in z = (x - c)/h, c, h, iterations) for
    1/sqrt(x) on [lo, hi]: p of degree d near-minimax in relative error
    (Lawson's iteratively reweighted least squares on Chebyshev points),
    e0 = max |1 - x·p(x)²| on a dense grid, and the iteration count k such
    that the Goldschmidt recurrence e' = e²(3 + e)/4 brings e0 to e_k with
    e_k / 2 <= rel_error; the fewest rounds (ceil(log2 d) for the powers of
    z, 1 for x·p, 2 per iteration), then the fewest products."""
    if not 0 < lo < hi:
        raise ValueError(f"the fast sqrt/rsqrt needs a domain 0 < lo < hi, got [{lo}, {hi}]")
    c, h = (lo + hi) / 2, (hi - lo) / 2
    z = np.cos(np.linspace(0.0, np.pi, 4001))
    x = c + h * z
    best = None
    for d in range(1, 9):                         # higher degrees extrapolate wildly
        vander, w = Ch.chebvander(z, d) * np.sqrt(x)[:, None], np.ones_like(z)
        for _ in range(100):                      # Lawson: weights grow where the error peaks
            co = np.linalg.lstsq(vander * w[:, None], w, rcond=None)[0]
            err = np.abs(1.0 - vander @ co)
            w = w * np.sqrt(err / err.max())
        e = float(np.abs(1.0 - x * Ch.chebval(z, co) ** 2).max())
        if e >= 1.0:
            continue
        for k in range(1, 8):
            e = e * e * (3.0 + e) / 4.0
            if e / 2.0 <= rel_error:
                cost = ((d - 1).bit_length() + 1 + 2 * k, d + 1 + 3 * k)
                if best is None or cost < best[0]:
                    best = (cost, tuple(Ch.cheb2poly(co)), k)
                break
    if best is None:
        raise ValueError(f"the fast sqrt/rsqrt cannot reach relative error {rel_error} on "
                         f"[{lo}, {hi}] with degree 8 and 7 iterations: narrow the domain")
    return best[1], c, h, best[2]


def _root_flat(ctx: Ctx, x: Shares, want_sqrt: bool, lo: float, hi: float,
               rel_error: float, polish: int = 0) -> Shares:
    """Goldschmidt's square root (Markstein, "Software division and square
    root using Goldschmidt's algorithms", 2004, §3): from y0 ~ 1/sqrt(x),
    g = x·y0, h = y0/2, then r = 1/2 - g·h, g <- g(1 + r), h <- h(1 + r):
    g -> sqrt(x) and 2h -> 1/sqrt(x) quadratically (g/h = 2x throughout),
    two rounds per iteration, no comparison; sqrt then takes `polish`
    self-correcting Heron steps (two rounds each)."""
    b = ctx.b
    coeffs, c, hw, k = rsqrt_plan(float(lo), float(hi), float(rel_error))
    y0 = _poly_guess(ctx, x, coeffs, c, hw)                      # lifted
    g = mul_round(ctx, [(x, y0)], [True])[0]                      # lifted x·y0
    h = ctx.scale(y0, 0.5)
    for i in range(k):
        r = b.public_sub(ctx.fill(x, ctx.lconst(0.5)), ctx.lmul_many([(g, h)])[0])
        # the last iteration updates only the output's chain
        upd_g, upd_h = i < k - 1 or want_sqrt, i < k - 1 or not want_sqrt
        out = iter(ctx.lmul_many([(g, r)] * upd_g + [(h, r)] * upd_h))
        g = b.add(g, next(out)) if upd_g else g
        h = b.add(h, next(out)) if upd_h else h
    if not want_sqrt:
        return ctx.lower(b.add(h, h))
    for _ in range(polish):
        # g and h round independently, so g/h drifts from 2x by about an ulp
        # of h (small: 1/(2 sqrt x)) per iteration, and g with it. Heron's
        # step g + h·(x - g²) is self-correcting: about an ulp of g is left.
        sq = ctx.lmul_many([(g, g)])[0]
        g = b.add(g, ctx.lmul_many([(h, b.sub(ctx.lift(x), sq))])[0])
    return ctx.lower(g)


def _root_settings(backend, fn, domain, rel_error):
    lo, hi = setting(backend, fn, "domain", domain)
    return float(lo), float(hi), float(setting(backend, fn, "rel_error", rel_error))


@S.elementwise
def _sqrt(ctx, x, domain=None, rel_error=None):
    return _root_flat(ctx, x, True, *_root_settings(ctx.b, "sqrt", domain, rel_error),
                      polish=int(setting(ctx.b, "sqrt", "newton_polish")))


@S.elementwise
def _rsqrt(ctx, x, domain=None, rel_error=None):
    return _root_flat(ctx, x, False, *_root_settings(ctx.b, "rsqrt", domain, rel_error))


def sqrt(backend: Backend, x: Shares, domain: Optional[Sequence[float]] = None,
         rel_error: Optional[float] = None) -> Shares:
    """sqrt(x) by Goldschmidt's iteration from a polynomial guess (module doc)."""
    return _sqrt(backend, x, domain=domain, rel_error=rel_error)


def rsqrt(backend: Backend, x: Shares, domain: Optional[Sequence[float]] = None,
          rel_error: Optional[float] = None) -> Shares:
    """1/sqrt(x) by Goldschmidt's iteration from a polynomial guess (module doc)."""
    return _rsqrt(backend, x, domain=domain, rel_error=rel_error)


# ---------------------------------------------------------- sigmoid, tanh
def _sigmoid_flat(ctx: Ctx, x: Shares, n: int, iterations: int) -> Shares:
    b = ctx.b
    beta = b.ltz(x, integer=True)                                 # plain 0/1
    bx = b.mul(beta, x, truncate=False)                           # exact
    mag = b.sub(x, b.add(bx, bx))                                 # |x|, exact
    beta_fp = b.mul_public(beta, ctx.fill(x, float(2 ** ctx.f)), c_frac_bits=0,
                           c_bound=2.0 ** (ctx.f + 1))
    sgn = b.public_sub(ctx.fill(x, 1.0), b.add(beta_fp, beta_fp))  # ±1, exact
    e = exp_limit(ctx, b.neg(mag), n)                             # lifted, (0, 1]
    d = ctx.add_const(e, ctx.lconst(1.0))                         # lifted, [1, 2]
    g = ctx.add_const(ctx.scale(d, -8 / 17), ctx.lconst(24 / 17))  # |1 - d·g| <= 1/17
    q = S.goldschmidt(ctx, sgn, ctx.lower(d), g, iterations)     # s / d
    return b.add(q, beta_fp)


def _sig_settings(backend, fn, exp_iterations, iterations):
    return (int(setting(backend, fn, "exp_iterations", exp_iterations)),
            int(setting(backend, fn, "iterations", iterations)))


@S.elementwise
def _sigmoid(ctx, x, exp_iterations=None, iterations=None):
    return _sigmoid_flat(ctx, x, *_sig_settings(ctx.b, "sigmoid", exp_iterations, iterations))


@S.elementwise
def _tanh(ctx, x, exp_iterations=None, iterations=None):
    n, k = _sig_settings(ctx.b, "tanh", exp_iterations, iterations)
    s = _sigmoid_flat(ctx, ctx.b.add(x, x), n, k)
    return ctx.add_const(ctx.b.add(s, s), -1.0)


def sigmoid(backend: Backend, x: Shares, exp_iterations: Optional[int] = None,
            iterations: Optional[int] = None) -> Shares:
    """1/(1 + e^-x) from one sign comparison (module doc)."""
    return _sigmoid(backend, x, exp_iterations=exp_iterations, iterations=iterations)


def tanh(backend: Backend, x: Shares, exp_iterations: Optional[int] = None,
         iterations: Optional[int] = None) -> Shares:
    """2·sigmoid(2x) - 1 (module doc)."""
    return _tanh(backend, x, exp_iterations=exp_iterations, iterations=iterations)


# ---------------------------------------------------------------------- log
def _log_flat(ctx: Ctx, x: Shares, n: int, n_init: int, iterations: int,
              order: int) -> Shares:
    b = ctx.b
    t = ctx.add_const(ctx.scale(x, -2.0), -1.0)
    e0 = ctx.lower(exp_limit(ctx, t, n_init))
    y = ctx.add_const(b.add(ctx.scale(x, 1 / 120), ctx.scale(e0, -20.0)), 3.0)
    for _ in range(iterations):
        xe = b.mul(x, exp_limit(ctx, b.neg(y), n))                # lifted x·e^-y
        h = b.public_sub(ctx.fill(x, ctx.lconst(1.0)), xe)
        terms = S.power_terms(ctx, h, order)[1:]
        y = b.sub(y, ctx.lower(ctx.combine(terms, [1.0 / i for i in range(1, order + 1)])))
    return y


def _log_settings(backend, fn):
    return tuple(int(setting(backend, fn, k)) for k in
                 ("exp_iterations", "init_exp_iterations", "iterations", "order"))


@S.elementwise
def _log(ctx, x):
    return _log_flat(ctx, x, *_log_settings(ctx.b, "log"))


def log(backend: Backend, x: Shares) -> Shares:
    """ln x by Householder iterations (module doc)."""
    return _log(backend, x)


# ------------------------------------------------------ softmax, log_softmax
def _shifted_exp(ctx: Ctx, x: Shares, axis: int, n: int):
    """d = x - max (exact mode's comparison tree) and e = e^d <= 1 by the
    limit (d in [-1.8·2^n, 0]), flat, with the row sums s [R]."""
    b = ctx.b
    x2, rows, cols, back = S.to_rows(b, x, axis)
    m = compare.reduce_max_last(b, x2, cols)

    def expand(v: Shares) -> Shares:                              # [R] -> flat [R·n]
        return b.map_shares(lambda s: sh.reshape(sh.broadcast_to(
            sh.reshape(s, [rows, 1], ctx.limbs), [rows, cols], ctx.limbs), [-1], ctx.limbs), v)
    d = b.sub(ctx.flat(x2), expand(m))
    e = ctx.lower(exp_limit(ctx, d, n))
    s = b.reduce_sum(b.map_shares(lambda v: sh.reshape(v, [rows, cols], ctx.limbs), e), 1)

    def out(v: Shares) -> Shares:
        return back(b.map_shares(lambda t: sh.reshape(t, [rows, cols], ctx.limbs), v))
    return d, e, s, cols, expand, out


def softmax(backend: Backend, x: Shares, axis: int = -1) -> Shares:
    """e^d / Σ e^d, d = x - max along axis (module doc)."""
    ctx = Ctx(backend)
    n = int(setting(backend, "softmax", "exp_iterations"))
    _, e, s, cols, expand, out = _shifted_exp(ctx, x, axis, n)
    err = float(setting(backend, "softmax", "rel_error"))
    g, k = recip_guess(ctx, s, 1.0, float(max(cols, 2)), err)     # s in [1, n]
    return out(S.goldschmidt(ctx, e, s, g, k, expand=expand))


def log_softmax(backend: Backend, x: Shares, axis: int = -1) -> Shares:
    """d - ln Σ e^d, d = x - max along axis (module doc)."""
    ctx = Ctx(backend)
    n = int(setting(backend, "log_softmax", "exp_iterations"))
    d, _, s, _, expand, out = _shifted_exp(ctx, x, axis, n)
    ls = _log_flat(ctx, s, *_log_settings(backend, "log_softmax"))
    return out(backend.sub(d, expand(ls)))
