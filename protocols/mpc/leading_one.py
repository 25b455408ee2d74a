"""The leading one of a shared value by ONE garbled circuit (issue 14).

`leading_one` returns arithmetic shares of threshold bits o_j = [v >= 2^j]
of v = |x| (or of x itself, for functions defined on x > 0), where x is the
fixed-point ring integer, from one garbled priority encoder per element
(ops/gc/leading_one.h): an adder rebuilds x mod 2^W from the low W bits of
the two shares inside the circuit (exact: reduction mod 2^W is a ring
homomorphism, DESIGN §3), an incrementer takes |x|, a prefix OR gives the
o_j. The leading one is at p = Σ o_j - 1 and [p = j] = o_j - o_(j+1), both
linear, so every table of the position (2^-p, p·ln 2, ...) is a local dot
product of the bits with public values: a range reduction over K octaves in
one circuit of 2W - 3 AND gates (3W - 5 with |x|) instead of a search of
~log2 K comparator levels of 64 AND gates each.

The protocol is PrivPy's comparison (Protocol 2, DESIGN §6) with a bigger
circuit and several output bits: S1 garbles with the S1-S2 stream (S2 derives
the same labels, so there is no oblivious transfer), S1 and S2 send the
labels of their own shares' bits, T1 evaluates the first half of the batch
and T2 the second, each output bit is masked by a bit of the S1-S2 stream,
and the assistant re-shares the masked bits it decoded with its own server
(b2a family) exactly as a comparison re-shares its one bit. Every message
goes through the channel; the cost is declared in cost.leading_one_cost.
"""
from __future__ import annotations

import math
from typing import Sequence

import tensorflow as tf

from . import cost as C
from . import kernels
from . import shares as sh

_SERVERS = ("S1", "S2")
_PAIRS = (("S1", "T1"), ("S2", "T2"))


def default_width(cfg) -> int:
    """Circuit width W for a config: the low W bits of x hold every value
    up to twice the bound B (|x|·2^f < 2^(W-2)), so an in-range x is exact
    and, without the magnitude step, a negative x lands in o_(W-2) = 1."""
    return min(64, int(math.ceil(math.log2(cfg.bound))) + cfg.frac_bits + 3)


def check_columns(columns: Sequence[int], width: int) -> list:
    """The requested output columns: threshold positions j in [0, W - 2],
    and W - 1 for the sign bit [x < 0]."""
    cols = [int(c) for c in columns]
    if not cols or any(c < 0 or c >= width for c in cols):
        raise ValueError(f"leading_one columns must be in [0, {width - 1}] (width {width}: "
                         f"positions 0..{width - 2} and {width - 1} for the sign), got {cols}")
    return cols


def privpy_leading_one(backend, x, columns: Sequence[int], magnitude: bool, width: int):
    """The four-server protocol (see the module doc) on a flat x [N]:
    integer bit shares [N, len(columns)]."""
    limbs = backend.limbs
    cols = check_columns(columns, width)
    gates = C.leading_one_gates(width, magnitude)

    def low_half(s, party):
        flat = sh.reshape(s, [-1], limbs)
        return flat[:, 0] if limbs == 2 else flat     # mod 2^64 is a ring homomorphism

    low = backend.local(low_half, x)
    n_static = low[0].shape[0]
    if n_static is None:
        raise ValueError("leading_one needs a statically known number of elements")
    # Same memory per batch as the comparison's chunks (tables grow with G).
    chunk = max(2, int(backend.cfg.comparison_batch) * 64 // gates)
    if C.active():
        C.declare(C.leading_one_cost(n_static, backend.bits, width, magnitude, len(cols),
                                     chunk))
    outs, after = [], None
    for b in range(0, max(n_static, 1), chunk):
        part = backend.map_shares(lambda s, b=b: s[b:b + chunk], low)
        outs.append(_chunk(backend, part, cols, magnitude, width, after))
        after = outs[-1][0]
    return outs[0] if len(outs) == 1 else backend.map_many(lambda p: tf.concat(p, 0), outs)


def _chunk(backend, low, cols, magnitude: bool, width: int, after):
    """One garbled batch on flat int64 low halves [n] of the shares."""
    rt, bits = backend.rt, backend.bits
    k = len(cols)
    n, half = {}, {}
    for p, party in enumerate(_SERVERS):
        with tf.device(rt.device(party)):
            n[p] = tf.shape(low[p], out_type=tf.int64)[0]
            half[p] = n[p] // 2
    key, nonce = backend._take_gc_stream()         # a fresh S1-S2 stream: fresh Delta, labels
    with tf.device(rt.device("S1")), tf.control_dependencies([after] if after is not None
                                                               else []):
        tables, decode = kernels.gc_leading_one_garble(key[0], nonce[0], n[0], width, magnitude)
    at_t = backend._ship_tables(tables, decode, nonce[0], half[0])
    labels, mask = {}, {}
    for p, (party, role) in enumerate(zip(_SERVERS, ("a", "b"))):
        with tf.device(rt.device(party)):
            labels[p] = kernels.gc_leading_one_encode(key[p], nonce[p], low[p], width, role)
            mask[p] = tf.gather(kernels.gc_leading_one_mask(key[p], nonce[p], n[p], width),
                                cols, axis=1)
    own_share, msg = {}, {}
    for own, (server, t) in enumerate(_PAIRS):
        other = 1 - own
        ks, ns = rt.key_material(server, t, server)
        part = {}
        for p, party in enumerate(_SERVERS):
            with tf.device(rt.device(party)):
                part[p] = labels[p][:half[p]] if own == 0 else labels[p][half[p]:]
        (l_own,), (n12_own, n_st) = rt.send(server, t, part[own], headers=(nonce[own], ns))
        (l_other,), (n12_other,) = rt.send(_SERVERS[other], t, part[other],
                                           headers=(nonce[other],))
        la, lb = (l_own, l_other) if own == 0 else (l_other, l_own)   # a from S1, b from S2
        tables_t, decode_t, nonce_t, first_t = at_t[t]
        kt, nt = rt.key_material(server, t, t)
        la = rt.check_stream("S1", "S2", t, n12_own, n12_other, _SERVERS[other], la)
        la = rt.check_stream(server, t, t, nt, n_st, server, la)
        with tf.device(rt.device(t)):
            masked = kernels.gc_leading_one_evaluate(tables_t, decode_t, la, lb, nonce_t,
                                                     first_t, width, magnitude)
            m = kernels.bit_share_assist(tf.gather(masked, cols, axis=1), kt, nt, bits, 0)
        msg[other] = rt.send1(t, _SERVERS[other], m)
        with tf.device(rt.device(server)):
            count = half[own] if own == 0 else n[own] - half[own]
            own_share[own] = kernels.prg_ring(ks, ns, tf.stack([count, tf.constant(k, tf.int64)]),
                                              bits)
    out = []
    for p, party in enumerate(_SERVERS):
        first, second = (own_share[0], msg[0]) if p == 0 else (msg[1], own_share[1])
        with tf.device(rt.device(party)):
            out.append(kernels.bit_unmask(tf.concat([first, second], 0), mask[p], bits, 0,
                                          party=p))
    with tf.device(rt.device("S1")):
        rt.count(rounds=2, comparisons=n[0])
    return out[0], out[1]


def plaintext_leading_one(backend, x, columns: Sequence[int], magnitude: bool, width: int):
    """The same outputs in the clear on the client (the plaintext backend,
    a test oracle): integer bits [N, len(columns)] in share 0."""
    cols = check_columns(columns, width)
    limbs = backend.limbs
    with tf.device(backend.rt.device("client")):
        v = sh.reshape(kernels.ring_add(x[0], x[1], backend.bits), [-1], limbs)
        low = v[:, 0] if limbs == 2 else v
        sft = 64 - width
        xw = tf.bitwise.right_shift(tf.bitwise.left_shift(low, sft), sft)  # sign-extended
        keep = tf.constant((1 << (width - 1)) - 1, tf.int64)
        mag = tf.bitwise.bitwise_and(tf.abs(xw) if magnitude else xw, keep)
        thr = tf.constant([1 << j for j in range(width - 1)], tf.int64)
        o = tf.cast(mag[:, None] >= thr[None, :], tf.int64)
        allbits = tf.concat([o, tf.cast(xw < 0, tf.int64)[:, None]], 1)
        z = kernels.ring_encode(tf.gather(allbits, cols, axis=1), backend.bits, 0, 2.0)
        return z, tf.zeros_like(z)
