"""Piecewise-polynomial functions on shares: sigmoid, tanh and erf
(DESIGN §7). Each is a polynomial of degree d per interval between public
breakpoints, constant beyond the outer ones; interval membership is one
comparison batch beside the powers (numerics.py's module doc has the
building blocks). Split from numerics.py, which re-exports these."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from . import fast_numerics
from ..privpy.backend import Backend, Shares
from .lifted import Ctx
from .series import cheb_fit, elementwise, power_terms


def setting(backend: Backend, fn: str, key: str, override=None):
    """fn's setting `key`: the call's override, else the config's, else
    protocols/defaults.json's."""
    return backend.cfg.function_setting(fn, key, override)


def fast(backend: Backend, fn: str, mode: Optional[str]):
    """protocols/mpc/fixedpoint/fast_numerics.py when fn's numerics mode (per call,
    config, defaults.json) is "fast", else None (the exact methods)."""
    return fast_numerics if fast_numerics.mode(backend, fn, mode) == "fast" else None



def power_range(ctx: Ctx) -> float:
    """R: the powers are of z = x/(S/R), S the outermost breakpoint, so
    |z| <= R on the pieces. Each power's local truncation costs up to
    TRUNC_ULPS ulps times its coefficient, and the monomial coefficients in
    x/S grow as S^k (sigmoid's cubic one is S^3/48 = 28 near 0). At the
    64-bit ring's 16 bits, with no lift, R = 1 left ~100 ulps (sigmoid 1.6e-3,
    tanh 4.3e-3); R = 2 shrinks the k-th coefficient by 2^k: 11-23 ulps
    (config functions.common.power_range's _why has the figures)."""
    return float(ctx.b.cfg.function_setting("common", "power_range")[str(ctx.ring)])


def _piecewise_flat(ctx: Ctx, x: Shares, name: str, breakpoints: Sequence[float],
                    degree: int, lo: float, hi: float) -> Shares:
    """A piecewise polynomial in z = x/s (s = max |breakpoint|), constant lo
    below the first and hi above the last breakpoint. Interval membership is
    one comparison batch, in parallel with the powers z^2..z^d
    (ceil(log2 d) rounds); the per-interval coefficients are public linear
    combinations of the bits, so one more round of d products finishes it."""
    b = ctx.b
    bps = sorted(float(v) for v in breakpoints)
    s = max(abs(bps[0]), abs(bps[-1])) / power_range(ctx)
    rows = [[lo] + [0.0] * degree]
    for a, c in zip(bps[:-1], bps[1:]):
        rows.append(list(cheb_fit(name, a, c, degree, s)))
    rows.append([hi] + [0.0] * degree)
    coef = ctx.bits_table(x, bps, np.array(rows))             # [N, d+1] lifted
    z = ctx.lscale(x, 1.0 / s)
    pw = power_terms(ctx, z, degree)[1:]
    prods = b.mul_many([(ctx.column(coef, j + 1), pw[j]) for j in range(degree)])
    acc = ctx.column(coef, 0)
    for p in prods:
        acc = b.add(acc, ctx.lower(p))
    return ctx.lower(acc)


def _folded_flat(ctx: Ctx, x: Shares, name: str, breakpoints: Sequence[float],
                 degree: int, lo: float, hi: float) -> Shares:
    """The same pieces folded by point symmetry (sigmoid about (0, 1/2), tanh
    about 0): f(x) = A + s·(F(|x|) - A), A = (lo + hi)/2, s = 1 - 2[x < 0]. With
    F(|x|) - A = Σ c_k·(|x|/S)^k on the positive pieces and |x|^k = s^k·x^k,
    s·(F - A) = Σ c_k·m_k, m_k = w^k for odd k and s·w^k for even k (w = x/S):
    the powers need no |x|. Comparisons: the sign, then |x| = s·x against the
    positive breakpoints only (7 instead of 13 with the defaults); 4 rounds
    (sign, |x|, the |x| comparisons beside s·w^4, the coefficient products).
    Saturation stays exact: c_0 = hi - A and c_k = 0 (k > 0) are exact."""
    b = ctx.b
    bps = sorted(float(v) for v in breakpoints)
    pos = [v for v in bps if v > 0]
    if bps != sorted([-v for v in pos] + [0.0] + pos):
        raise ValueError("folded_piecewise_poly needs breakpoints symmetric about 0, with 0")
    S = pos[-1] / power_range(ctx)
    A = (lo + hi) / 2
    rows = []
    for a, c in zip([0.0] + pos[:-1], pos):
        co = list(cheb_fit(name, a, c, degree, S))
        rows.append([co[0] - A] + co[1:])
    rows.append([hi - A] + [0.0] * degree)
    sigma = b.ltz(x)
    sgn = b.public_sub(ctx.fill(x, 1.0), b.add(sigma, sigma))     # ±1, exact
    w = ctx.lscale(x, 1.0 / S)
    pw = power_terms(ctx, w, degree)
    mag = b.mul(x, sgn)                                           # |x|, exact
    even = [k for k in range(2, degree + 1, 2)]
    sw = dict(zip(even, ctx.lmul_many([(ctx.lift(sgn), pw[k]) for k in even])))
    coef = ctx.bits_table(mag, pos, np.array(rows))               # [N, d+1] lifted
    m = [ctx.lift(sgn)] + [sw[k] if k % 2 == 0 else pw[k] for k in range(1, degree + 1)]
    prods = b.mul_many([(ctx.column(coef, k), m[k]) for k in range(degree + 1)])
    acc = ctx.add_const(ctx.lower(prods[0]), ctx.lconst(A))
    for p in prods[1:]:
        acc = b.add(acc, ctx.lower(p))
    return ctx.lower(acc)


_PIECEWISE = {"piecewise_poly": _piecewise_flat, "folded_piecewise_poly": _folded_flat}


def _pw_setting(backend, name, breakpoints, degree, method=None):
    bp = setting(backend, name, "breakpoints", breakpoints)
    m = setting(backend, name, "method", method)
    if m not in _PIECEWISE:
        raise ValueError(f"unknown {name} method {m!r} ({', '.join(_PIECEWISE)})")
    return list(bp), int(setting(backend, name, "degree", degree)), _PIECEWISE[m]


@elementwise
def _sigmoid(ctx, x, breakpoints=None, degree=None, method=None):
    bp, d, fn = _pw_setting(ctx.b, "sigmoid", breakpoints, degree, method)
    return fn(ctx, x, "sigmoid", bp, d, 0.0, 1.0)


@elementwise
def _tanh(ctx, x, breakpoints=None, degree=None, method=None):
    bp, d, fn = _pw_setting(ctx.b, "tanh", breakpoints, degree, method)
    return fn(ctx, x, "tanh", bp, d, -1.0, 1.0)


def sigmoid(backend: Backend, x: Shares, breakpoints=None, degree=None, method=None,
            mode: Optional[str] = None) -> Shares:
    """1/(1 + e^-x), piecewise polynomial; 0 / 1 beyond the outer breakpoints.
    method "piecewise_poly" (default: 3 rounds, every breakpoint in one
    window-thresholds circuit) or "folded_piecewise_poly" (4 rounds, the
    sign and the positive breakpoints).
    mode "fast": fast_numerics.sigmoid (one comparison)."""
    fast_module = fast(backend, "sigmoid", mode)
    if fast_module:
        return fast_module.sigmoid(backend, x)
    return _sigmoid(backend, x, breakpoints=breakpoints, degree=degree, method=method)


def tanh(backend: Backend, x: Shares, breakpoints=None, degree=None, method=None,
         mode: Optional[str] = None) -> Shares:
    """tanh(x), piecewise polynomial; -1 / 1 beyond the outer breakpoints
    (methods as sigmoid's). mode "fast": fast_numerics.tanh."""
    fast_module = fast(backend, "tanh", mode)
    if fast_module:
        return fast_module.tanh(backend, x)
    return _tanh(backend, x, breakpoints=breakpoints, degree=degree, method=method)


@elementwise
def _erf(ctx, x, breakpoints=None, degree=None, method=None):
    bp, d, fn = _pw_setting(ctx.b, "erf", breakpoints, degree, method)
    return fn(ctx, x, "erf", bp, d, -1.0, 1.0)


def erf(backend: Backend, x: Shares, breakpoints=None, degree=None, method=None) -> Shares:
    """The error function, piecewise polynomial; -1 / 1 beyond the outer
    breakpoints (±4 by default: 1 - erf(4) = 1.5e-8). Methods as sigmoid's;
    the exact form of GELU, x·(1 + erf(x/√2))/2, is built on it."""
    return _erf(backend, x, breakpoints=breakpoints, degree=degree, method=method)


_SQRT_HALF = 1.0 / np.sqrt(2.0)
_TANH_C = np.sqrt(2.0 / np.pi)   # the tanh form's constants (Hendrycks & Gimpel 2016, §2)
_TANH_A = 0.044715


def gelu(backend: Backend, x: Shares, approximate: bool = False) -> Shares:
    """GELU (Hendrycks & Gimpel 2016), the two forms Keras and tf.nn.gelu
    compute, built as the converter builds them from their traced graphs:
    exact x·(1 + erf(x/√2))/2: erf on a public scaling, then one product
    (erf's rounds + 1); approximate x·(1 + tanh(c·(x + a·x³)))/2: x³ by two
    products, tanh, then one product (tanh's rounds + 3). The last product
    is x·erf (or x·tanh), not x·(1 + erf)/2, so its error is erf's times
    |x|, plus one truncation."""
    b = backend
    if approximate:
        x2 = b.mul(x, x)
        x3 = b.mul(x2, x)
        inner = b.mul_public(b.add(x, b.mul_public(x3, _TANH_A)), _TANH_C)
        g = tanh(b, inner)
    else:
        g = erf(b, b.mul_public(x, _SQRT_HALF))
    return b.mul_public(b.add(x, b.mul(x, g)), 0.5)
