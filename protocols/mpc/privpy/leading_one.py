"""The leading one of a shared value by ONE garbled circuit (issue 14).

`leading_one` returns arithmetic shares of threshold bits o_j = [v >= 2^j]
of v = x (for functions defined on x > 0) or of the one's complement
magnitude v = x XOR [x < 0] (|x| - 1 for x < 0, with o_0 = [x != 0]), where x
is the fixed-point ring integer, from one garbled priority encoder per
element (ops/gc/leading_one.h): an adder rebuilds x mod 2^W from the low W
bits of the two shares inside the circuit (exact: reduction mod 2^W is a
ring homomorphism, DESIGN §3), a prefix OR gives the o_j. The leading one is
at p = Σ o_j - 1 and [p = j] = o_j - o_(j+1), both linear, so every table of
the position (2^-p, p·ln 2, ...) is a local dot product of the bits with
public values: a range reduction over K octaves in one circuit of 2W - 3 AND
gates (2W - 2 with the magnitude) instead of a search of ~log2 K comparator
levels of 64 AND gates each. Only the requested columns are decoded,
masked and re-shared.

The protocol (circuits.py) is PrivPy's comparison (Protocol 2, DESIGN §6)
with this circuit: S1 garbles, S1 and S2 send their input labels, T1 and T2
evaluate halves of the batch and re-share the masked outputs. The cost is
declared in cost.leading_one_cost.
"""
from __future__ import annotations

import math
from typing import Sequence

import tensorflow as tf

from . import circuits
from ..runtime import cost as C
from ..runtime import kernels
from ..runtime import shares as sh
from ..runtime.devscope import device_scope


def default_width(cfg) -> int:
    """Circuit width W for a config: the low W bits of x hold every value
    up to twice the bound B (|x|·2^f < 2^(W-2)), so an in-range x is exact
    and, without the magnitude step, a negative x lands in o_(W-2) = 1."""
    return min(64, int(math.ceil(math.log2(cfg.bound))) + cfg.frac_bits + 3)


def check_columns(columns: Sequence[int], width: int) -> list:
    """The requested output columns: threshold positions j in [0, W - 2],
    and W - 1 for the sign bit [x < 0]."""
    cols = [int(c) for c in columns]
    if not cols or any(c < 0 or c >= width for c in cols) or len(set(cols)) != len(cols):
        raise ValueError(f"leading_one columns must be distinct and in [0, {width - 1}] (width "
                         f"{width}: positions 0..{width - 2} and {width - 1} for the sign), got "
                         f"{cols}")
    return cols


def privpy_leading_one(backend, x, columns: Sequence[int], magnitude: bool, width: int,
                       table=None):
    """The four-server protocol (circuits.py) on a flat x [N]: integer bit
    shares [N, len(columns)], or with `table` [K + 1, J] the fused
    bits @ table[:K] + table[K] ([N, J])."""
    cols = check_columns(columns, width)
    table = circuits.check_table(table, len(cols))
    circuits.require_static(backend, x)
    circuit = circuits.Circuit(
        name="leading_one", width=width, gates=C.leading_one_gates(width, magnitude),
        params=dict(width=width, magnitude=magnitude, columns=cols), outputs=len(cols))
    return circuits.run(backend, x, circuit, 0, lambda n, chunk: C.leading_one_cost(
        n, backend.bits, width, magnitude, len(cols), chunk), table=table)


def apply_table(backend, o, table) -> object:
    """Shares [N, J] of o @ table[:K] + table[K] for integer bit shares o
    [N, K] and a public int64 table [K + 1, J]: one local ring matmul of
    [o | 1] (the unfused path; the protocol fuses it, circuits.run)."""
    limbs = backend.limbs
    table = circuits.check_table(table, int(o[0].shape[1]))
    col = backend.map_shares(lambda s: sh.getitem(s, (slice(None), 0), limbs), o)
    ones = backend.add_public(backend.sub(col, col),
                              tf.ones(sh.dynamic_shape(col[0], limbs), tf.float64), frac_bits=0)
    aug = backend.map_many(lambda p: sh.concat(p, 1, limbs),
                           [o, backend.map_shares(lambda s: sh.expand_dims(s, 1, limbs), ones)])
    return backend.mul_public(aug, tf.constant(table), kind="matmul", c_frac_bits=0,
                              c_bound=2.0 ** 62)


def plain_low_signed(backend, x, width: int) -> tf.Tensor:
    """The plaintext backend's flat x [N] mod 2^width as a signed int64 (on
    the client, under its device scope): what the circuits see."""
    limbs = backend.limbs
    v = sh.reshape(kernels.ring_add(x[0], x[1], backend.bits), [-1], limbs)
    low = v[:, 0] if limbs == 2 else v
    sft = 64 - width
    return tf.bitwise.right_shift(tf.bitwise.left_shift(low, sft), sft)   # sign-extended


def plaintext_leading_one(backend, x, columns: Sequence[int], magnitude: bool, width: int):
    """The same outputs in the clear on the client (the plaintext backend,
    a test oracle): integer bits [N, len(columns)] in share 0."""
    cols = check_columns(columns, width)
    with device_scope(backend.rt.device("client")):
        xw = plain_low_signed(backend, x, width)
        keep = tf.constant((1 << (width - 1)) - 1, tf.int64)
        if magnitude:       # one's complement: x XOR sign (arithmetic shift)
            xw_c = tf.bitwise.bitwise_xor(xw, tf.bitwise.right_shift(xw, tf.constant(63,
                                                                                   tf.int64)))
        mag = tf.bitwise.bitwise_and(xw_c if magnitude else xw, keep)
        thr = tf.constant([1 << j for j in range(width - 1)], tf.int64)
        o = tf.cast(mag[:, None] >= thr[None, :], tf.int64)
        if magnitude:       # o_0 = [x != 0]: x = -1 is not zero
            o = tf.concat([tf.cast(xw != 0, tf.int64)[:, None], o[:, 1:]], 1)
        allbits = tf.concat([o, tf.cast(xw < 0, tf.int64)[:, None]], 1)
        z = kernels.ring_encode(tf.gather(allbits, cols, axis=1), backend.bits, 0, 2.0)
        return z, tf.zeros_like(z)
