"""Private non-linear functions (tp.math): reciprocal, division, sqrt, rsqrt,
exp, log, sigmoid, tanh, softmax, log_softmax.

Thin wrappers over protocols/mpc/fixedpoint/numerics.py, which documents the methods. Each
function's method, degree or iteration count comes from the runtime config
("functions" in protocols/defaults.json, or tp.Config(functions=...)) and can
be overridden per call. Errors, rounds and costs: docs/numerics.md.

The functions that find an octave or an integer part first (reciprocal,
divide, sqrt, rsqrt, exp, log, softmax, log_softmax) take `range_reduction`:
"leading_one" (default, except for exp: one garbled leading-one circuit per
element gives the octave of x in one round, log adds one comparison; exp,
whose pieces are not octaves, uses binary_search under it), "binary_search"
(exp's default: about log2 of the number of octaves comparisons per element,
one per round) or "thresholds" (one comparison per octave boundary, all in
one round: many more comparisons).

Inputs must be in the shared range |x| < B. A private value cannot raise an
error without revealing itself, so out-of-domain inputs have documented
results instead:
  reciprocal(0) = 0, divide(x, 0) = 0; sqrt(x <= 0) = 0, rsqrt(x <= 0) = 0;
  log(x <= 0) = ln(2^-(f+1)) (ln of half an ulp: -14.56 with f = 20);
  exp(x) = 0 below ln(2^-f) and 2^floor(log2 B) (= B) from floor(log2 B)·ln 2 up;
  sigmoid and tanh are exactly 0/-1 and 1 beyond their outer breakpoints.

mode="fast" (per call; or the config's "mode" setting, per function or in
"common"; or the converter's Policy(numerics_mode="fast")) trades accuracy
for speed on stated domains, with no comparison (sigmoid, tanh: one):
protocols/mpc/fixedpoint/fast_numerics.py. What happens outside a fast domain:
  exp: relative error about |x|^3/(6·4^n) (n = 8, 128-bit; 6, 64-bit); within
    0.82^(2^n) of 0 for x in [-1.8·2^n, 0]; wrong below -2·2^n and above ln B;
  reciprocal, divide (y in [0.5, 50] by default): (1 - q(y)^(2^k))/y for the
    guess's error polynomial q: close to 1/y just outside, wrong further out
    (and for y <= 0);
  sigmoid, tanh: accurate for |x| < 1.8·2^n (|2x| for tanh), wrong from 2·2^n;
  log: accurate on [0.05, 200] (docs/numerics.md), wrong for x <= 0;
  softmax, log_softmax: rows whose spread max - x exceeds 1.8·2^n are wrong.
  sqrt, rsqrt (x in [0.5, 50] by default): the guess polynomial is
    extrapolated: close just outside, wrong further out (and rsqrt for x <= 0).
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from . import _common as C
from . import array_ops, math_ops
from ..value import PrivateTensor
from ...fixedpoint import numerics as N


def _check(x, what: str) -> PrivateTensor:
    if not C.is_private(x):
        raise TypeError(f"{what} takes a PrivateTensor, got {type(x).__name__}; use the "
                        "tf.math function for public tensors")
    return x


def _out_dtype(x: PrivateTensor) -> tf.DType:
    return x.dtype if x.dtype.is_floating else tf.float64


def _unary(fn, x, what, **kw) -> PrivateTensor:
    x = _check(x, what)
    h = C.handle_of(x)
    return C.wrap(h, fn(h.backend, C.shares(x), **kw), _out_dtype(x))


def reciprocal(x: PrivateTensor, method: Optional[str] = None, iterations: Optional[int] = None,
               signed: Optional[bool] = None,
               range_reduction: Optional[str] = None,
               mode: Optional[str] = None) -> PrivateTensor:
    """1/x (Newton-Raphson in Goldschmidt's form from an octave guess).

    Args:
      x: a PrivateTensor, 2^-f <= |x| < B. 1/0 returns 0.
      method: "goldschmidt" (default: iterations + 1 multiplication rounds) or
        "newton" (2 rounds per iteration, self-correcting).
      iterations: Newton iterations (default 4: error (1/3)^16).
      signed: False when x > 0 is known (fewer comparisons).
      range_reduction: "leading_one", "binary_search" or "thresholds" (default:
        the config's, see the module doc).
      mode: "exact" (default) or "fast" (a comparison-free method on a stated
        domain: see the module doc); default: the config's.

    Example:
      >>> tp.math.reciprocal(tp.share([4.0, -0.5])).reveal()   # [0.25, -2.]
      >>> tp.math.reciprocal(tp.share([4.0]), mode="fast").reveal()   # [0.25], x in [0.5, 50]
    """
    return _unary(N.reciprocal, x, "tp.math.reciprocal", method=method,
                  iterations=iterations, signed=signed, range_reduction=range_reduction,
                  mode=mode)


def divide(x, y, method: Optional[str] = None, iterations: Optional[int] = None,
           signed: Optional[bool] = None, name: Optional[str] = None,
           range_reduction: Optional[str] = None, mode: Optional[str] = None):
    """x / y with broadcasting. A public y is a local multiplication by 1/y
    (math_ops.divide); a private y runs Goldschmidt division (the numerator
    enters in the first round, so it costs what reciprocal costs). x / 0 = 0.
    mode="fast": y in the fast domain ([0.5, 50] by default), see the module doc.

    Example:
      >>> tp.divide(tp.share([3.0]), tp.share([4.0])).reveal()   # [0.75]
    """
    if not C.is_private(y):
        return math_ops.divide(x, y, name=name)
    h = C.handle_of(x, y)
    if not C.is_private(x):
        return math_ops.multiply(x, reciprocal(y, method, iterations, signed, range_reduction,
                                               mode))
    shape = C.broadcast_shape(x.shape, y.shape, "tp.divide")
    x, y = C.broadcast(h, x, shape), C.broadcast(h, y, shape)
    dtype = C.result_dtype(x.dtype, y.dtype)
    dtype = dtype if dtype.is_floating else tf.float64
    s = N.divide(h.backend, C.shares(x), C.shares(y), method=method, iterations=iterations,
                 signed=signed, range_reduction=range_reduction, mode=mode)
    return C.wrap(h, s, dtype)


def sqrt(x: PrivateTensor, degree: Optional[int] = None,
         range_reduction: Optional[str] = None, mode: Optional[str] = None) -> PrivateTensor:
    """sqrt(x) for 0 <= x < B; sqrt(x <= 0) = 0.

    mode="fast": Goldschmidt's square root from a polynomial guess, for x in
    the fast domain ([0.5, 50] by default; see the module doc).

    Example:
      >>> tp.sqrt(tp.share([2.0, 9.0])).reveal()   # [1.41421, 3.]
      >>> tp.sqrt(tp.share([2.0]), mode="fast").reveal()   # [1.41421], x in [0.5, 50]
    """
    return _unary(N.sqrt, x, "tp.sqrt", degree=degree, range_reduction=range_reduction,
                  mode=mode)


def rsqrt(x: PrivateTensor, degree: Optional[int] = None,
          range_reduction: Optional[str] = None, mode: Optional[str] = None) -> PrivateTensor:
    """1/sqrt(x) for 2^-f <= x < B; rsqrt(x <= 0) = 0.

    mode="fast": as for tp.sqrt.

    Example:
      >>> tp.math.rsqrt(tp.share([4.0])).reveal()   # [0.5]
    """
    return _unary(N.rsqrt, x, "tp.math.rsqrt", degree=degree, range_reduction=range_reduction,
                  mode=mode)


def sqrt_and_rsqrt(x: PrivateTensor, range_reduction: Optional[str] = None):
    """(sqrt(x), 1/sqrt(x)) of one tensor from one range reduction: one
    leading-one circuit per element instead of two (the costly part of
    each), the two polynomials beside each other. Exact mode only; each
    result as tp.sqrt's and tp.math.rsqrt's (same degrees and errors).

    Example:
      >>> s, r = tp.math.sqrt_and_rsqrt(tp.share([4.0, 2.0]))
      >>> s.reveal(), r.reveal()   # [2., 1.41421], [0.5, 0.70711]
    """
    x = _check(x, "tp.math.sqrt_and_rsqrt")
    h = C.handle_of(x)
    s, r = N.sqrt_rsqrt(h.backend, C.shares(x), range_reduction=range_reduction)
    return C.wrap(h, s, _out_dtype(x)), C.wrap(h, r, _out_dtype(x))


def exp(x: PrivateTensor, degree: Optional[int] = None,
        range_reduction: Optional[str] = None, mode: Optional[str] = None) -> PrivateTensor:
    """e^x = 2^t, t = x·log2 e: 2^(piece of t) from the range reduction times a
    polynomial on the piece.

    Saturates to 0 where e^x < 2^-f and to 2^floor(log2 B) above it.
    mode="fast": (1 + u + u²/2)^(2^n), u = x/2^n, no comparison (module doc).

    Example:
      >>> tp.exp(tp.share([0.0, 1.0])).reveal()   # [1., 2.71828]
      >>> tp.exp(tp.share([1.0]), mode="fast").reveal()   # [2.71828]
    """
    return _unary(N.exp, x, "tp.exp", degree=degree, range_reduction=range_reduction,
                  mode=mode)


def log(x: PrivateTensor, degree: Optional[int] = None,
        range_reduction: Optional[str] = None, mode: Optional[str] = None) -> PrivateTensor:
    """Natural logarithm for 2^-f <= x < B; log(x <= 0) = ln(2^-(f+1)).
    mode="fast": Householder iterations, no comparison (module doc).

    Example:
      >>> tp.math.log(tp.share([1.0, 10.0])).reveal()   # [0., 2.30259]
      >>> tp.math.log(tp.share([10.0]), mode="fast").reveal()   # [2.30259]
    """
    return _unary(N.log, x, "tp.math.log", degree=degree, range_reduction=range_reduction,
                  mode=mode)


def sigmoid(x: PrivateTensor, breakpoints=None, degree: Optional[int] = None,
            method: Optional[str] = None, mode: Optional[str] = None) -> PrivateTensor:
    """The logistic function as a piecewise polynomial: 4 rounds (PrivPy's
    Euler method takes 50), exactly 0 / 1 beyond the outer breakpoints (±11).
    The default method "folded_piecewise_poly" uses sigmoid(-x) = 1 - sigmoid(x)
    and places only |x| among the positive breakpoints (7 comparisons per
    element); method="piecewise_poly" places x among all 13 (3 rounds).
    mode="fast": 1/(1 + e^-|x|) from one sign comparison (module doc).

    Example:
      >>> tp.sigmoid(tp.share([0.0, 2.0])).reveal()   # [0.5, 0.880797]
      >>> tp.sigmoid(tp.share([2.0]), mode="fast").reveal()   # [0.880797]
    """
    return _unary(N.sigmoid, x, "tp.sigmoid", breakpoints=breakpoints, degree=degree,
                  method=method, mode=mode)


def tanh(x: PrivateTensor, breakpoints=None, degree: Optional[int] = None,
         method: Optional[str] = None, mode: Optional[str] = None) -> PrivateTensor:
    """tanh as a piecewise polynomial (4 rounds), exactly ±1 beyond ±6.
    Default method "folded_piecewise_poly": tanh(-x) = -tanh(x), 7 comparisons
    per element; "piecewise_poly": 13 comparisons, 3 rounds.
    mode="fast": 2·sigmoid(2x) - 1 by the fast sigmoid (module doc).

    Example:
      >>> tp.tanh(tp.share([0.5])).reveal()   # [0.462117]
    """
    return _unary(N.tanh, x, "tp.tanh", breakpoints=breakpoints, degree=degree,
                  method=method, mode=mode)


def erf(x: PrivateTensor, breakpoints=None, degree: Optional[int] = None,
        method: Optional[str] = None) -> PrivateTensor:
    """The error function as a piecewise polynomial (3 rounds), exactly ±1
    beyond ±4 (1 - erf(4) = 1.5e-8); the exact form of GELU is built on it.

    Example:
      >>> tp.math.erf(tp.share([0.5])).reveal()   # [0.5205]
    """
    return _unary(N.erf, x, "tp.math.erf", breakpoints=breakpoints, degree=degree,
                  method=method)


def gelu(features: PrivateTensor, approximate: bool = False) -> PrivateTensor:
    """GELU, as tf.nn.gelu: x·(1 + erf(x/√2))/2, or with approximate=True
    x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2. Built on tp.math.erf / tp.tanh
    and one private product (the tanh form: three); errors in docs/numerics.md.

    Example:
      >>> tp.nn.gelu(tp.share([1.0])).reveal()   # [0.8413]
    """
    return _unary(N.gelu, features, "tp.nn.gelu", approximate=approximate)


def softmax(logits: PrivateTensor, axis: int = -1, degree: Optional[int] = None,
            iterations: Optional[int] = None,
            range_reduction: Optional[str] = None,
            mode: Optional[str] = None) -> PrivateTensor:
    """exp(x - max) / Σ exp(x - max) along axis (static shape). mode="fast":
    the fast exp and reciprocal after the same max (module doc).

    Example:
      >>> tp.nn.softmax(tp.share([[1.0, 2.0, 3.0]])).reveal()   # [[0.0900, 0.2447, 0.6652]]
    """
    return _unary(N.softmax, logits, "tp.nn.softmax", axis=axis, degree=degree,
                  iterations=iterations, range_reduction=range_reduction, mode=mode)


def log_softmax(logits: PrivateTensor, axis: int = -1, degree: Optional[int] = None,
                log_degree: Optional[int] = None,
                range_reduction: Optional[str] = None,
                mode: Optional[str] = None) -> PrivateTensor:
    """(x - max) - ln Σ exp(x - max) along axis (static shape). mode="fast":
    the fast exp and log after the same max (module doc).

    Example:
      >>> tp.nn.log_softmax(tp.share([[0.0, 0.0]])).reveal()   # [[-0.6931, -0.6931]]
    """
    return _unary(N.log_softmax, logits, "tp.nn.log_softmax", axis=axis, degree=degree,
                  log_degree=log_degree, range_reduction=range_reduction, mode=mode)


__all__ = ["divide", "erf", "exp", "log", "log_softmax", "reciprocal", "rsqrt", "sigmoid",
           "softmax", "sqrt", "tanh"]


# ------------------------------------------------------------------ pow
# Here, beside reciprocal, which a negative exponent needs (math_ops.py
# would otherwise import this module back).
def _integer_exponent(y) -> int:
    """The exponent as a Python int, or a ValueError saying what to use."""
    v = tf.get_static_value(y) if isinstance(y, (tf.Tensor, tf.Variable)) else y
    if v is None:
        raise ValueError("tp.pow needs an exponent known when the graph is built (a Python "
                         "number or a constant), got a tensor without a static value")
    arr = np.asarray(v)
    if arr.size != 1 or arr.dtype == bool:
        raise ValueError(f"tp.pow takes one scalar integer exponent, got {v!r}")
    f = float(arr.reshape(()))
    if not np.isfinite(f) or f != np.round(f):
        hint = {0.5: "tp.sqrt(x)", -0.5: "tp.math.rsqrt(x)"}.get(f, "tp.sqrt, tp.math.rsqrt "
                                                                   "or tp.exp(y * tp.math.log(x))")
        raise ValueError(f"tp.pow supports integer exponents only (repeated multiplication), "
                         f"got {f}; use {hint}")
    return int(f)


def pow(x: math_ops.TensorLike, y, name: Optional[str] = None) -> PrivateTensor:  # noqa: A001
    """x ** y for a private x and a public integer y (tf.math.pow semantics).

    Square-and-multiply with each round's square and product batched into
    one protocol call: about log2(|y|) rounds of multiplication. A negative
    y takes the private reciprocal of x ** |y| (x ** -n = 0 where x = 0, as
    tp.math.reciprocal). Non-integer exponents raise: use tp.sqrt,
    tp.math.rsqrt, or tp.exp(y * tp.math.log(x)).

    Example:
      >>> (tp.share([1.5, -2.0]) ** 3).reveal()   # [3.375, -8.]
    """
    if C.is_private(y):
        raise TypeError("tp.pow: a private exponent is not supported; for a public base "
                        "c > 0 use tp.exp(y * math.log(c))")
    if not C.is_private(x):
        return tf.math.pow(x, y, name=name)
    n = _integer_exponent(y)
    if n < 0:
        return reciprocal(pow(x, -n))
    if n == 0:
        h = C.handle_of(x)
        return array_ops._public_as_private(h, tf.ones(x.shape, x.dtype))
    acc, p = None, x
    while True:
        bit, n = n & 1, n >> 1
        pairs = ([(acc, p)] if bit and acc is not None else []) + ([(p, p)] if n else [])
        outs = math_ops.multiply_many(pairs)
        if bit:
            acc = p if acc is None else outs.pop(0)
        if not n:
            return acc
        p = outs.pop(0)
