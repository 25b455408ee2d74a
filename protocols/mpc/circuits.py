"""The protocol that runs a garbled circuit on the low W bits of the shares
(issue 14): shared by the leading-one encoder (leading_one.py) and the
window-thresholds circuit (thresholds.py).

It is PrivPy's comparison (Protocol 2, DESIGN §6) with a bigger circuit and
several output bits: S1 garbles with the S1-S2 stream (S2 derives the same
labels, so there is no oblivious transfer), S1 and S2 send the labels of
their own shares' low W bits (x mod 2^W = x1 + x2 mod 2^W exactly: reduction
mod 2^W is a ring homomorphism), T1 evaluates the first half of the batch
and T2 the second, each output bit is masked by a bit of the S1-S2 stream,
and the assistant re-shares the masked bits it decoded with its own server
(b2a family) exactly as a comparison re-shares its one bit. A fresh stream
(Delta, labels, masks) per garbled batch. Two rounds.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np
import tensorflow as tf

from . import cost as C
from . import kernels
from . import shares as sh
from .backend import halves

_SERVERS = ("S1", "S2")
_PAIRS = (("S1", "T1"), ("S2", "T2"))


@dataclasses.dataclass(frozen=True)
class Circuit:
    """A garbled circuit family's kernels with their public parameters
    (outputs included) bound: garble(key, nonce, n, first, count) -> (tables
    [count, gates, 4], decode [count, K]) of elements [first, first + count)
    of a batch of n, on S1; evaluate(tables, decode, labels_a, labels_b,
    nonce, first) -> masked bits [count, K] on T; mask(key, nonce, n) ->
    [n, K] on S1 and S2. Inputs are labelled by gc_leading_one_encode with
    `width`."""
    width: int
    gates: int
    garble: Callable
    evaluate: Callable
    mask: Callable


def check_table(table, outputs: int) -> Optional[np.ndarray]:
    """A fused table for a circuit of `outputs` output bits, as int64
    [outputs + 1, J] (None passes); checked before any op is made, so a bad
    table advances no stream."""
    if table is None:
        return None
    table = np.asarray(table)
    if table.dtype != np.int64 or table.ndim != 2 or table.shape[0] != outputs + 1:
        raise ValueError(f"the table must be int64 [K + 1, J] for the K = {outputs} circuit "
                         f"outputs, got {table.dtype} {list(table.shape)}")
    return table


def run(backend, x, circuit: Circuit, frac_bits: int, bill: Callable[[int, int], C.Cost],
        table: Optional[np.ndarray] = None):
    """Shares [N, K] of the circuit's output bits for a flat x [N], scaled
    by 2^frac_bits (0: integer bits). bill(n, chunk) is the declared cost.
    With an int64 `table` [K + 1, J] (integer bits only): shares [N, J] of
    bits @ table[:K] + table[K], fused into the servers' last step
    (kernels.bit_unmask_table), exact."""
    if table is not None and frac_bits != 0:
        raise ValueError("a fused table takes integer bits (frac_bits=0)")
    limbs = backend.limbs

    def low_half(s, party):
        flat = sh.reshape(s, [-1], limbs)
        return flat[:, 0] if limbs == 2 else flat     # mod 2^64 is a ring homomorphism

    low = backend.local(low_half, x)
    n_static = low[0].shape[0]
    if n_static is None:
        raise ValueError("a garbled circuit batch needs a statically known number of elements")
    # Same memory per batch as the comparison's chunks (tables grow with the gates).
    chunk = max(2, int(backend.cfg.comparison_batch) * 64 // circuit.gates)
    if C.active():
        C.declare(bill(n_static, chunk))
    outs, after = [], None
    for b in range(0, max(n_static, 1), chunk):
        part = backend.map_shares(lambda s, b=b: s[b:b + chunk], low) \
            if n_static > chunk else low
        outs.append(_chunk(backend, part, circuit, frac_bits, after, table))
        after = outs[-1][0]
    return outs[0] if len(outs) == 1 else backend.map_many(lambda p: tf.concat(p, 0), outs)


def _chunk(backend, low, circuit: Circuit, frac_bits: int, after, table=None):
    """One garbled batch on flat int64 low halves [n] of the shares. T1
    evaluates elements [0, n // 2), T2 the rest: S1 garbles the two parts
    as two tensors and S1 and S2 encode theirs apart (the kernels take the
    part's place in the batch), so no party copies a slice of [n, G, 4]
    tables or [n, W, 2] labels (1-3 KB per element)."""
    rt, bits = backend.rt, backend.bits
    width = circuit.width
    n, part = {}, {}
    for p, party in enumerate(_SERVERS):
        with tf.device(rt.device(party)):
            n[p] = tf.shape(low[p], out_type=tf.int64)[0]
            part[p] = halves(n[p])                 # (first, count) of T1's and T2's parts
    key, nonce = backend._take_gc_stream()         # a fresh S1-S2 stream: fresh Delta, labels
    at_t = backend._garble_and_ship(
        lambda first, count: circuit.garble(key[0], nonce[0], n[0], first, count), nonce[0],
        n[0], after)
    labels, mask = {}, {}
    for p, (party, role) in enumerate(zip(_SERVERS, ("a", "b"))):
        with tf.device(rt.device(party)):
            labels[p] = [kernels.gc_leading_one_encode(key[p], nonce[p],
                                                       low[p][first:first + count], n[p],
                                                       first, width, role)
                         for first, count in part[p]]
            mask[p] = circuit.mask(key[p], nonce[p], n[p])
    own_share, msg = {}, {}
    for own, (server, t) in enumerate(_PAIRS):
        other = 1 - own
        ks, ns = rt.key_material(server, t, server)
        (l_own,), (n12_own, n_st) = rt.send(server, t, labels[own][own],
                                            headers=(nonce[own], ns))
        (l_other,), (n12_other,) = rt.send(_SERVERS[other], t, labels[other][own],
                                           headers=(nonce[other],))
        la, lb = (l_own, l_other) if own == 0 else (l_other, l_own)   # a from S1, b from S2
        tables_t, decode_t, nonce_t, first_t = at_t[t]
        kt, nt = rt.key_material(server, t, t)
        la = rt.check_stream("S1", "S2", t, n12_own, n12_other, _SERVERS[other], la)
        la = rt.check_stream(server, t, t, nt, n_st, server, la)
        with tf.device(rt.device(t)):
            masked = circuit.evaluate(tables_t, decode_t, la, lb, nonce_t, first_t)
            m = kernels.bit_share_assist(masked, kt, nt, bits, frac_bits)
        msg[other] = rt.send1(t, _SERVERS[other], m)
        with tf.device(rt.device(server)):
            k = tf.constant(int(mask[own].shape[1]), tf.int64)   # outputs: public
            own_share[own] = kernels.prg_ring(ks, ns, tf.stack([part[own][own][1], k]), bits)
    out = []
    for p, party in enumerate(_SERVERS):
        first, second = (own_share[0], msg[0]) if p == 0 else (msg[1], own_share[1])
        with tf.device(rt.device(party)):
            if table is not None:                  # checked by the caller (check_table)
                out.append(kernels.bit_unmask_table([first, second], mask[p],
                                                    tf.constant(table), bits, party=p))
                continue
            out.append(kernels.bit_unmask(tf.concat([first, second], 0), mask[p], bits,
                                          frac_bits, party=p))
    with tf.device(rt.device("S1")):
        rt.count(rounds=2, comparisons=n[0])
    return out[0], out[1]
