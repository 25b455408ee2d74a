"""Test tolerances, in one place, derived from the fixed-point precision.

With f fractional bits (ulp = 2^-f):
- encoding rounds to nearest: |enc(x) - x| <= ulp/2;
- local truncation of a product (PrivPy §5.2) floors each share: the two
  truncated shares add up to floor(xy·2^f)/2^f or one ulp less (or more), so
  a truncation adds at most 1 ulp (2 with the -(-z>>f) rule's rounding);
- a product of encoded values: |x̃ỹ - xy| <= (|x| + |y|)·ulp/2 + ulp²/4.

Everything below is these bounds with nothing added. A peer tests at 5 %
relative error; these tolerances are exact to the last bits.
"""
import numpy as np

TRUNC_ULPS = 2  # at most 2 ulps lost by one local truncation


def ulp(frac_bits: int) -> float:
    return 2.0 ** -frac_bits


def encode_tol(frac_bits: int) -> float:
    return ulp(frac_bits) / 2


def linear_tol(frac_bits: int, n_terms: int = 2) -> float:
    """A sum/difference of n encoded values (no truncation)."""
    return n_terms * encode_tol(frac_bits)


def mul_tol(x, y, frac_bits: int) -> np.ndarray:
    """Elementwise product of two encoded values, then one truncation."""
    u = ulp(frac_bits)
    return (np.abs(x) + np.abs(y)) * u / 2 + u * u / 4 + TRUNC_ULPS * u


def matmul_tol(a, b, frac_bits: int) -> np.ndarray:
    """(a @ b) with encoded inputs: per-term product error summed over k,
    one truncation of the sum."""
    u = ulp(frac_bits)
    a, b = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    k = a.shape[-1]
    return (a @ np.ones_like(b) + np.ones_like(a) @ b) * u / 2 + k * u * u / 4 + TRUNC_ULPS * u


def public_mul_tol(x, c, frac_bits: int, c_frac_bits: int = None) -> np.ndarray:
    """x * c with x shared (f bits) and public c encoded with c_frac_bits."""
    u = ulp(frac_bits)
    uc = ulp(c_frac_bits if c_frac_bits is not None else frac_bits)
    return np.abs(c) * u / 2 + np.abs(x) * uc / 2 + u * uc / 4 + TRUNC_ULPS * u


def select_tol(levels: int, frac_bits: int) -> float:
    """Results of `levels` sequential oblivious selections (max, min, relu,
    where, compare-exchange). A selection multiplies by an exact bit (0 or
    2^f), so each costs only one local truncation: TRUNC_ULPS ulps."""
    return TRUNC_ULPS * levels * ulp(frac_bits)


#: accuracy target of one derived function (exp, log, sigmoid, ...) per ring
#: width, as tests/test_numerics.py enforces and docs/numerics.md measures:
#: DESIGN §3's 1e-4 with f = 20; with f = 16 the ulp is 16 times coarser and
#: no extra precision is available, so the 64-bit ring's target is 1e-3.
FUNCTION_TOL = {128: 1e-4, 64: 1e-3}


def composed_tol(ring_bits: int, frac_bits: int, n_functions: int, levels: int = 0) -> float:
    """A composition of n derived functions, each applied where the next one
    has a Lipschitz constant <= 1 (softplus: exp on x <= 0, whose outputs lie
    in (0, 1], then log on [1, 2]): their errors add, plus `levels` local
    truncations (selections, products by public constants)."""
    return n_functions * FUNCTION_TOL[ring_bits] + select_tol(levels, frac_bits)
