"""[x < θ_k] for K public thresholds by ONE garbled circuit per element
(issue 14): the interval membership of exp's range reduction (pieces of
t = x·log2 e) and of the piecewise polynomials of sigmoid and tanh.

The thresholds are ring integers θ_k (θ·2^f on the fixed-point grid). If
they are all multiples of 2^lo and the quotients c_k = θ_k / 2^lo fit an
m-bit window (-2^(m-1) < c_k < 2^(m-1), lo + m <= W), one garbled
window-thresholds circuit (ops/gc/thresholds.h) rebuilds x mod 2^W from the
low W bits of the shares, drops its lowest lo bits (an exact floor), clamps
the quotient to the window and compares it with every c_k: W - 1 + (W - lo
- 2) + Σ_k (m - 1 - tz) AND gates, 114 for sigmoid's 13 breakpoints
against 13 comparators of 64 gates, in the same two rounds as one
comparison. The protocol is circuits.py's (PrivPy Protocol 2 with this
circuit, DESIGN §6); x must satisfy |x| < 2^(W-1) (the default width holds
every value up to 4 B, leading_one.default_width). Cost: cost.thresholds_cost.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import tensorflow as tf

from . import circuits
from ..runtime import cost as C
from ..runtime import kernels
from .leading_one import plain_low_signed
from ..runtime.devscope import device_scope

#: AND gates of one garbled comparator: the circuit is used only where it is
#: smaller than the comparators it replaces
COMPARATOR_GATES = circuits.COMPARATOR_GATES


def window(points: Sequence[int], width: int) -> Optional[Tuple[int, int]]:
    """(lo, m) of the smallest window holding integer thresholds `points`
    (largest lo with every point a multiple of 2^lo, then the smallest m),
    or None if they do not fit the low `width` bits."""
    pts = [int(p) for p in points]
    if not pts:
        return None
    nz = [p for p in pts if p]
    lo = min(min(((p & -p).bit_length() - 1) for p in nz), width - 1) if nz else width - 1
    cs = [p >> lo for p in pts]
    m = 1
    while not all(-(1 << (m - 1)) < c < (1 << (m - 1)) for c in cs):
        m += 1
    return (lo, m) if lo + m <= width else None


def worth_it(points: Sequence[int], width: int) -> bool:
    """Whether the circuit fits and has fewer AND gates than K comparators."""
    w = window(points, width)
    if w is None:
        return False
    lo, m = w
    return C.thresholds_gates(width, lo, m, [int(p) >> lo for p in points]) \
        < COMPARATOR_GATES * len(points)


def _spec(points: Sequence[int], width: int):
    w = window(points, width)
    if w is None:
        raise ValueError(f"thresholds {list(points)} do not fit a window of the low {width} "
                         "bits: use comparisons (Backend.ltz) for them")
    lo, m = w
    return lo, m, [int(p) >> lo for p in points]


def privpy_thresholds(backend, x, points: Sequence[int], width: int, integer: bool,
                      table=None):
    """The four-server protocol (circuits.py) on a flat x [N]: shares of the
    bits [x < θ_k], [N, K] (integer 0/1 or fixed point), or with `table`
    (integer bits) the fused bits @ table[:K] + table[K] ([N, J])."""
    lo, m, cs = _spec(points, width)
    table = circuits.check_table(table, len(cs))
    circuits.require_static(backend, x)
    circuit = circuits.Circuit(
        name="thresholds", width=width, gates=C.thresholds_gates(width, lo, m, cs),
        params=dict(width=width, lo=lo, window=m, points=cs), outputs=len(cs))
    f = 0 if integer else backend.cfg.frac_bits
    return circuits.run(backend, x, circuit, f, lambda n, chunk: C.thresholds_cost(
        n, backend.bits, width, lo, m, cs, chunk), table=table)


def plaintext_thresholds(backend, x, points: Sequence[int], width: int, integer: bool):
    """The same outputs in the clear on the client (the plaintext backend, a
    test oracle): [x < θ_k] of x mod 2^W read as a signed W-bit integer."""
    _spec(points, width)                    # same validity as the circuit
    with device_scope(backend.rt.device("client")):
        xw = plain_low_signed(backend, x, width)
        th = tf.constant([int(p) for p in points], tf.int64)
        bits = tf.cast(xw[:, None] < th[None, :], tf.int64)
        z = kernels.ring_encode(bits, backend.bits, 0 if integer else backend.cfg.frac_bits,
                                2.0)
        return z, tf.zeros_like(z)
