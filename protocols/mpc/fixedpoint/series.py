"""Building blocks shared by the exact (numerics.py) and fast
(fast_numerics.py) numerics: the depth-scheduled power tree, near-minimax
polynomial fits, Goldschmidt's and Newton's reciprocal iterations, and the
elementwise and row layouts. Here, apart from both, so that neither imports
the other (tests/test_layout.py::test_no_import_circles).
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..runtime import shares as sh
from ..privpy.backend import Backend, Shares
from .lifted import Ctx


def power_terms(ctx: Ctx, e: Shares, degree: int, scale: Optional[Shares] = None,
           lag: int = 0) -> List[Optional[Shares]]:
    """Lifted terms t_i = scale·e^i for i = 0..degree (t_0 = scale), or
    t_i = e^i without a scale (t_0 = None), by a product tree scheduled by
    depth, one batched multiplication per round.

    Pure powers e^i are ready ceil(log2 i) rounds after e; a scaled term is
    (scale·e^a)·e^b for the split that finishes first, the scale arriving
    `lag` rounds after e. On time (lag 0) that is ceil(log2(degree + 1))
    rounds (ceil(log2 degree) without a scale); a round late (lag 1), a
    degree up to 6 still needs only 2 rounds after the scale."""
    def pure_depth(i):
        return (i - 1).bit_length()                       # ceil(log2 i)

    sdepth, srecipe = {0: lag}, {}
    if scale is not None:
        for i in range(1, degree + 1):
            best = None
            for bb in range(i, 0, -1):                    # larger pure factors first
                d = max(sdepth[i - bb], pure_depth(bb)) + 1
                key = (d, bb & (bb - 1) != 0)             # then prefer powers of two
                if best is None or key < best[0]:
                    best = (key, bb)
            sdepth[i], srecipe[i] = best[0][0], best[1]
    need = set(srecipe.values()) if scale is not None else set(range(1, degree + 1))
    stack = list(need)
    while stack:                                          # e^i = e^(2^k)·e^(i - 2^k)
        i = stack.pop()
        if i > 1:
            p = 1 << (pure_depth(i) - 1)
            for j in (p, i - p):
                if j not in need:
                    need.add(j)
                    stack.append(j)
    pw: Dict[int, Shares] = {1: e}
    st: Dict[int, Shares] = {0: scale}
    top = max([pure_depth(i) for i in need] + (list(sdepth.values()) if srecipe else []) + [0])
    for depth in range(1, top + 1):
        jobs = []                                         # (table, index, left, right)
        for i in sorted(need):
            if i > 1 and pure_depth(i) == depth:
                p = 1 << (depth - 1)
                jobs.append((pw, i, pw[p], pw[i - p]))
        for i in sorted(srecipe):
            if sdepth[i] == depth:
                jobs.append((st, i, st[i - srecipe[i]], pw[srecipe[i]]))
        for (table, i, _, _), z in zip(jobs, ctx.lmul_many([(j[2], j[3]) for j in jobs])):
            table[i] = z
    if scale is None:
        return [None] + [pw[i] for i in range(1, degree + 1)]
    return [st[i] for i in range(degree + 1)]


@functools.lru_cache(maxsize=None)
def cheb_fit(name: str, a: float, b: float, degree: int, scale: float = 1.0) -> Tuple:
    """Near-minimax (Chebyshev least squares) monomial coefficients of fn
    on [a, b] in the variable z = x / scale."""
    from numpy.polynomial import chebyshev as Ch, polynomial as P
    fn = FUNCS[name]
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


FUNCS = {
    "rsqrt1m": lambda e: (1.0 - e) ** -0.5,
    "sqrt1m": lambda e: (1.0 - e) ** 0.5,
    "log1p": np.log1p,
    "sigmoid": lambda x: 0.5 * (1 + np.tanh(x / 2)),
    "tanh": np.tanh,
    "erf": np.vectorize(math.erf),
}


def elementwise(fn):
    """Runs fn(ctx, flat x, **kw) on the flattened input, restores the shape."""
    @functools.wraps(fn)
    def wrapper(backend: Backend, x: Shares, **kw) -> Shares:
        ctx = Ctx(backend)
        shape = ctx.shape(x)
        out = fn(ctx, ctx.flat(x), **kw)
        return backend.map_shares(lambda s: sh.reshape(s, shape, ctx.limbs), out)
    return wrapper



def goldschmidt(ctx: Ctx, x: Optional[Shares], y: Shares, g: Shares, iterations: int,
                 expand=None):
    """q = x·g·Π(1 + e^(2^i)), e = 1 - y·g: Newton-Raphson's iterates for
    x/y (y_{i+1} = y_i(2 - y·y_i) has error e^(2^i)) with the error term
    squared instead of recomputed, so the two chains run in parallel: one
    round per iteration plus one for e (and x·g). With `expand`, y and g are
    per-row values broadcast to x's (larger) shape by expand. The guess g
    only has to satisfy |e| <= 1/3: its rounding (or a range reduction's
    truncation errors) enters e, not the result."""
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


def newton_recip(ctx: Ctx, x: Optional[Shares], y: Shares, g: Shares, iterations: int):
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


def to_rows(backend: Backend, x: Shares, axis: int):
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
