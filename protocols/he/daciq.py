"""dACIQ: BatchCrypt's per-layer clipping threshold (Zhang et al., USENIX
ATC'20, §4.3), extending ACIQ (Banner, Nahshan, Soudry, "Post training 4-bit
quantization of convolution networks for rapid-deployment", NeurIPS 2019) to
federated learning, where no party sees a layer's gradients in one place.

Each client reports, per layer, the min, max and number of its gradient
values; the aggregator merges them into the GLOBAL min, max and size n, fits
a Gaussian N(mu, sigma^2) to them and picks the clipping threshold alpha that
minimizes the expected squared error of BatchCrypt's quantizer. Every client
then quantizes that layer with the same alpha.

Gaussian fit from (min, max, n). The range R = max - min of n samples of
N(mu, sigma^2) has mean sigma * E[R_n], E[R_n] the expected range of n
standard normal samples, so sigma = (max - min) / E[R_n] and mu = (max + min)/2
(the midrange; unbiased for a symmetric law). ACIQ's code and BatchCrypt's
release take E[R_n] ~ 2 sqrt(2 ln n) / 1.0804 (their constant
0.175 (1 + sqrt(pi ln 4)) = 0.5402 divided by sqrt(2 ln n)), and the textbook
asymptote is 2 sqrt(2 ln n); both are off by several percent at practical n
(the asymptote by 8.6 % at n = 10^5, the constant by 6 % at n = 10^3). Here
E[R_n] is computed exactly, by quadrature of
    E[R_n] = integral over x of 1 - Phi(x)^n - (1 - Phi(x))^n
(the expected range of n i.i.d. samples with cdf Phi), so the fit is unbiased
up to the spread of the sample range itself (about 4 % standard deviation at
n = 10^5, shrinking like 1 / sqrt(ln n)).

Expected error. For X ~ N(mu, sigma^2) clipped to [-alpha, alpha] and
quantized with step Delta = alpha / qmax (qmax = 2^(r-2) - 1, BatchCrypt's r
bits with two sign bits) by stochastic rounding,
    E[(X - Q(X))^2] = sigma^2 [C((alpha - mu)/sigma) + C((alpha + mu)/sigma)]
                      + Delta^2 / 6 * P(|X| < alpha),
    C(t) = E[(Z - t)^2; Z > t] = (1 + t^2) Q(t) - t phi(t),  Z ~ N(0, 1),
Q the upper tail, phi the density. For mu = 0 the clipping term is
    (alpha^2 + sigma^2) [1 - erf(alpha / (sqrt 2 sigma))]
        - alpha sigma sqrt(2/pi) exp(-alpha^2 / (2 sigma^2)),
BatchCrypt's Eq. (1). Rounding term: stochastic rounding of a value whose
fractional position in its step is p has variance p (1 - p) Delta^2 (at most
Delta^2 / 4, at p = 1/2); a Gaussian is smooth on the scale of Delta, so p is
uniform on [0, 1) in the limit and the mean variance is Delta^2 / 6 (the
integral of p (1 - p)). Only unclipped values pay it: clipped ones land on
+-qmax exactly. (Round-to-nearest would pay Delta^2 / 12, but is biased;
BatchCrypt's Eq. (1) has the same Delta^2 / 6 with its own step.) The formula
is checked against simulation of the quantizer in tests/test_batchcrypt_daciq.py.

The clipping term is convex in alpha (its second derivative is
2 P(|X| > alpha)) and the rounding term grows like alpha^2; a 400-point grid
brackets the minimum and golden-section search refines it (no SciPy, no
failed unbounded searches: BatchCrypt's table of thresholds decreases from
r = 26 to 27). Finally alpha is capped at
max(|min|, |max|): no value lies beyond it, so a larger alpha only coarsens
the step.
"""
from __future__ import annotations

import math
import numbers
from functools import lru_cache
from typing import Tuple

MIN_BITS = 3    # r = 3: levels {-1, 0, 1}
MAX_BITS = 32   # quantized values fit int32

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def check_bits(r) -> int:
    """Validates the quantization width r (two sign bits included)."""
    if isinstance(r, bool) or not isinstance(r, numbers.Integral) or \
            not MIN_BITS <= r <= MAX_BITS:
        raise ValueError(f"BatchCrypt quantization width r must be an integer in "
                         f"[{MIN_BITS}, {MAX_BITS}] (two sign bits included), got {r!r}")
    return int(r)


def max_level(r: int) -> int:
    """qmax = 2^(r-2) - 1: quantized values lie in [-qmax, qmax]."""
    return (1 << (check_bits(r) - 2)) - 1


def _upper_tail(t: float) -> float:
    """Q(t) = P(Z > t) for Z ~ N(0, 1), accurate in both tails."""
    return 0.5 * math.erfc(t / _SQRT2)


def _pdf(t: float) -> float:
    return _INV_SQRT_2PI * math.exp(-0.5 * t * t)


@lru_cache(maxsize=1024)
def expected_normal_range(n: int) -> float:
    """E[max - min] of n i.i.d. N(0, 1) samples (0 for n = 1).

    Composite Simpson quadrature of 2 * integral_0^inf (1 - Phi(x)^n -
    Phi(-x)^n) dx (the integrand is even) with step 0.005 up to
    sqrt(2 ln n) + 10, where n Q(x) < 1e-20: relative error below 1e-9.
    Examples: n = 2: 2/sqrt(pi) = 1.12838; n = 10: 3.07751; n = 100: 5.01519.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"the number of samples must be a positive integer, got {n!r}")
    n = int(n)
    if n == 1:
        return 0.0
    upper = math.sqrt(2.0 * math.log(n)) + 10.0
    steps = int(math.ceil(upper / 0.005))
    steps += steps % 2
    h = upper / steps

    def g(x: float) -> float:
        q = _upper_tail(x)                       # 1 - Phi(x) = Phi(-x)
        below = -math.expm1(n * math.log1p(-q))  # 1 - Phi(x)^n without cancellation
        return below - q ** n

    total = g(0.0) + g(upper)
    for i in range(1, steps):
        total += (4.0 if i % 2 else 2.0) * g(i * h)
    return 2.0 * total * h / 3.0


def gaussian_fit(minimum: float, maximum: float, size: int) -> Tuple[float, float]:
    """(mu, sigma) of N(mu, sigma^2) fitted to the min, max and size of a
    sample: mu = (min + max) / 2, sigma = (max - min) / E[R_size]."""
    _check_stats(minimum, maximum, size)
    mu = 0.5 * (float(minimum) + float(maximum))
    if size == 1:
        return mu, 0.0
    return mu, (float(maximum) - float(minimum)) / expected_normal_range(int(size))


def _clip_tail(t: float) -> float:
    """C(t) = E[(Z - t)^2; Z > t] for Z ~ N(0, 1), any real t."""
    return (1.0 + t * t) * _upper_tail(t) - t * _pdf(t)


def quantization_mse(alpha: float, mu: float, sigma: float, r: int) -> float:
    """Model of E[(X - Q(X))^2], X ~ N(mu, sigma^2), for BatchCrypt's r-bit
    symmetric quantizer with threshold alpha and stochastic rounding (the
    module docstring derives it): clipping + Delta^2 / 6 * P(|X| < alpha)."""
    step = alpha / max_level(r)
    if sigma == 0.0:
        inside = 1.0 if abs(mu) < alpha else 0.0
        return max(abs(mu) - alpha, 0.0) ** 2 + step * step / 6.0 * inside
    hi, lo = (alpha - mu) / sigma, (alpha + mu) / sigma
    clip = sigma * sigma * (_clip_tail(hi) + _clip_tail(lo))
    inside = max(0.0, 1.0 - _upper_tail(hi) - _upper_tail(lo))
    return clip + step * step / 6.0 * inside


def optimal_alpha(mu: float, sigma: float, r: int) -> float:
    """argmin over alpha > 0 of quantization_mse(alpha, mu, sigma, r).

    A grid of 400 points over (0, |mu| + 40 sigma] brackets the minimum, then
    golden-section search narrows the bracket to 1e-12 of its width."""
    check_bits(r)
    if sigma <= 0.0:
        return abs(mu)
    top = abs(mu) + 40.0 * sigma
    n = 400
    grid = [top * (i + 1) / n for i in range(n)]
    errs = [quantization_mse(a, mu, sigma, r) for a in grid]
    best = min(range(n), key=errs.__getitem__)
    a = grid[best - 1] if best > 0 else 0.0
    b = grid[min(best + 1, n - 1)]
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = quantization_mse(c, mu, sigma, r), quantization_mse(d, mu, sigma, r)
    while b - a > 1e-12 * top:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = quantization_mse(c, mu, sigma, r)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = quantization_mse(d, mu, sigma, r)
    return 0.5 * (a + b)


def daciq_alpha(minimum: float, maximum: float, size: int, r: int) -> float:
    """dACIQ clipping threshold of one layer from its GLOBAL min, max and
    number of values (merged over all clients) for r-bit quantization.

    Fits N(mu, sigma^2) (gaussian_fit), minimizes the expected quantization
    error (optimal_alpha) and caps the result at max(|min|, |max|). A layer
    whose values are all 0 gets alpha = 1 (any alpha encodes it exactly).

    >>> round(daciq_alpha(-4.4, 4.4, 100_000, 8), 2)   # sigma = 1.004
    3.46
    """
    check_bits(r)
    _check_stats(minimum, maximum, size)
    reach = max(abs(float(minimum)), abs(float(maximum)))
    if reach == 0.0:
        return 1.0
    mu, sigma = gaussian_fit(minimum, maximum, size)
    return min(optimal_alpha(mu, sigma, r), reach)


def _check_stats(minimum, maximum, size) -> None:
    if isinstance(size, bool) or int(size) != size or size < 1:
        raise ValueError(f"a layer's size must be a positive integer, got {size!r}")
    if not (math.isfinite(minimum) and math.isfinite(maximum)):
        raise ValueError(f"a layer's min and max must be finite, got {minimum!r}, {maximum!r}")
    if minimum > maximum:
        raise ValueError(f"a layer's min {minimum!r} exceeds its max {maximum!r}")
