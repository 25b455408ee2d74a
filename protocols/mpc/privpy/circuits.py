"""The one protocol that runs a garbled circuit on the low W bits of the
shares: PrivPy's comparison (Protocol 2, DESIGN §6), and with bigger
circuits and several output bits the leading-one encoder (leading_one.py)
and the window-thresholds circuit (thresholds.py) of issue 14.

S1 garbles with the S1-S2 stream (S2 derives the same labels, so there is
no oblivious transfer), S1 and S2 send the labels of their own shares' low
W bits (x mod 2^W = x1 + x2 mod 2^W exactly: reduction mod 2^W is a ring
homomorphism), T1 evaluates the first half of the batch and T2 the second,
each output bit is masked by a bit of the S1-S2 stream, and the assistant
re-shares the masked bits it decoded with its own server (b2a family). A
fresh stream (Delta, labels, masks) per garbled batch, or one garbled
ahead (garbled.py). Two rounds.

A circuit family is a `Circuit`: its row of the C++ circuit table (one op
set for all, parametrized by the circuit's name) with its public parameters
bound. `comparison()` is PrivPy's comparator; leading_one.py and
thresholds.py make theirs.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from ..runtime import cost as C
from ..runtime import kernels
from ..runtime import shares as sh
from .assist import PAIRS, SERVERS, send_to_assistant
from ..runtime.devscope import device_scope

#: AND gates of one garbled comparator (ops/gc/garble.h)
COMPARATOR_GATES = 64


@dataclasses.dataclass(frozen=True)
class Circuit:
    """A garbled circuit: its row of the C++ circuit table (`name`, the
    kernels' circuit attribute, ops/gc/circuit_table.cc) with its public
    parameters bound, run by the one op set GcGarble / GcEncode / GcEvaluate
    / GcMask (kernels.gc_*).

    width: the input bits read from each share; gates: AND gates per element
    (the chunking and the bill); outputs: output bits per element, None for
    one bit per element (the comparison: [n] rather than [n, 1]); params:
    the kernels' circuit parameters (ops/gc/gc_ops.cc); prepare(party, low)
    -> the values party index `party` encodes from its flat low share
    (default: the share itself).
    """
    name: str
    width: int
    gates: int
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    outputs: Optional[int] = None
    prepare: Optional[Callable] = None

    def garble(self, key, nonce, n, first, count):
        """S1: (tables [count, gates, 4], decode) of elements [first, first +
        count) of a batch of n."""
        return kernels.gc_garble(key, nonce, n, first, count, self.name, **self.params)

    def evaluate(self, tables, decode, labels_a, labels_b, nonce, first):
        """T: the masked output bits, from S1's labels_a and S2's labels_b."""
        return kernels.gc_evaluate(tables, decode, labels_a, labels_b, nonce, first, self.name,
                                   **self.params)

    def mask(self, key, nonce, n):
        """S1 and S2: the output mask bits, [n, outputs] or [n]."""
        return kernels.gc_mask(key, nonce, n, self.name, **self.params)

    def values(self, party: int, low: tf.Tensor) -> tf.Tensor:
        """The values party index `party` encodes, from its flat low share."""
        return low if self.prepare is None else self.prepare(party, low)

    def labels(self, party: int, key, nonce, v, n, first) -> tf.Tensor:
        """Party index `party`'s input labels of values v, elements
        [first, first + len(v)) of a batch of n."""
        return kernels.gc_encode(key, nonce, v, n, first, self.name, ("a", "b")[party],
                                 **self.params)


def comparison() -> Circuit:
    """PrivPy's garbled comparator on the low 64 bits (ops/gc/garble.h): S1
    inputs a = x1, S2 inputs b = -x2, the circuit outputs [a < b] = [x1 + x2
    < 0] as signed 64-bit integers, one bit per element."""
    return Circuit(name="compare", width=64, gates=COMPARATOR_GATES,
                   prepare=lambda party, low: low if party == 0 else kernels.ring_neg(low, 64))


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


def require_static(backend, x) -> int:
    """The number of elements of shares x, which must be known statically
    (the circuits of issue 14 size their chunks and bill by it); else
    ValueError."""
    n = sh.logical_shape(x[0], backend.limbs).num_elements()
    if n is None:
        raise ValueError("a garbled circuit batch needs a statically known number of elements")
    return n


def halves(n):
    """((first, count) of T1's part, (first, count) of T2's) of a garbled
    batch of n elements (an int64 scalar; public): T1 evaluates [0, n // 2),
    T2 the rest (DESIGN §6). Call under the device of the party that uses it."""
    n = tf.cast(n, tf.int64)
    half = n // 2
    return (tf.zeros_like(half), half), (half, n - half)


def take_stream(rt) -> Tuple[Dict[int, tf.Tensor], Dict[int, tf.Tensor]]:
    """(key, nonce) of a fresh S1-S2 stream on each server, by party index:
    a garbled batch's Delta, labels and masks."""
    key, nonce = {}, {}
    for p, party in enumerate(SERVERS):
        key[p], nonce[p] = rt.key_material("S1", "S2", party)
    return key, nonce


def garble_and_ship(rt, garble: Callable, nonce: tf.Tensor, n: tf.Tensor,
                    after: Optional[tf.Tensor] = None) -> Dict[str, tuple]:
    """S1 garbles T1's part [0, n // 2) and T2's part [n // 2, n) of a
    batch with garble(first, count) -> (tables, decode), after `after`
    (an S1 tensor) if given, and sends each assistant its part in one
    message, with the stream nonce and the part's first index as headers
    (public: together they fix the hash tweaks). Garbling the parts apart
    instead of slicing one batch saves copying the tables (2-4 KB per
    element). Returns {T: (tables, decode, nonce, first)} on T."""
    at_t = {}
    with device_scope(rt.device("S1")):
        parts = halves(n)
    for t, (first, count) in zip(("T1", "T2"), parts):
        with device_scope(rt.device("S1")), tf.control_dependencies(
                [after] if after is not None else []):
            tab, dec = garble(first, count)
        (tab_t, dec_t), (nonce_t, first_t) = rt.send("S1", t, tab, dec, headers=(nonce, first))
        at_t[t] = (tab_t, dec_t, nonce_t, first_t)
    return at_t


def run(backend, x, circuit: Circuit, frac_bits: int, bill: Callable[[Optional[int], int], C.Cost],
        table: Optional[np.ndarray] = None, chunk: Optional[int] = None, pregarbled=None):
    """Shares of the circuit's output bits for x (flattened: [N, K], or [N]
    for a one-output circuit), scaled by 2^frac_bits (0: integer bits).

    bill(n, chunk) is the declared cost. Big batches go in chunks of `chunk`
    elements (default: the comparison's memory per batch, tables growing
    with the gates), S1 garbling each after it finished the last. With an
    int64 `table` [K + 1, J] (integer bits only): shares [N, J] of
    bits @ table[:K] + table[K], fused into the servers' last step
    (kernels.bit_unmask_table), exact. With `pregarbled` (garbled.py): the
    tables are already at T1 and T2 and only input labels travel.
    """
    if table is not None and frac_bits != 0:
        raise ValueError("a fused table takes integer bits (frac_bits=0)")
    limbs = backend.limbs

    low = backend.local(lambda s, party: sh.low64(s, limbs), x)
    n_static = low[0].shape[0]
    if chunk is None:
        chunk = max(2, int(backend.cfg.comparison_batch) * COMPARATOR_GATES // circuit.gates)
    if C.active():
        C.declare(bill(n_static, chunk))
    if pregarbled is not None or n_static is None or n_static <= chunk:
        return _batch(backend, low, circuit, frac_bits, None, table, pregarbled)
    outs, after = [], None
    for b in range(0, n_static, chunk):
        part = backend.map_shares(lambda s, b=b: s[b:b + chunk], low)
        outs.append(_batch(backend, part, circuit, frac_bits, after, table))
        after = outs[-1][0]
    return backend.map_many(lambda p: tf.concat(p, 0), outs)


def _batch(backend, low, circuit: Circuit, frac_bits: int, after, table=None,
           pregarbled=None):
    """One garbled batch on flat int64 low halves [n] of the shares. T1
    evaluates elements [0, n // 2), T2 the rest: S1 garbles the two parts
    as two tensors and S1 and S2 encode theirs apart (the kernels take the
    part's place in the batch), so no party copies a slice of [n, G, 4]
    tables or [n, W, 2] labels (1-3 KB per element)."""
    rt, bits = backend.rt, backend.bits
    n, part = {}, {}
    for p, party in enumerate(SERVERS):
        with device_scope(rt.device(party)):
            n[p] = tf.shape(low[p], out_type=tf.int64)[0]
            part[p] = halves(n[p])                 # (first, count) of T1's and T2's parts
    if pregarbled is None:
        key, nonce = take_stream(rt)               # a fresh S1-S2 stream: fresh Delta, labels
        at_t = garble_and_ship(
            rt, lambda first, count: circuit.garble(key[0], nonce[0], n[0], first, count),
            nonce[0], n[0], after)
    else:
        key, nonce, at_t = pregarbled.consume(low[0].shape, 1)
    # A run refused for a used batch must advance no stream counter: one
    # side of a pair advancing alone would desynchronise its nonces.
    taken = [] if pregarbled is None else [nonce[0], nonce[1]]
    labels, mask = {}, {}
    for p, party in enumerate(SERVERS):
        with device_scope(rt.device(party)):
            v = circuit.values(p, low[p])
            # T1's and T2's parts encoded apart: no copy of [n, W, 2] labels
            labels[p] = [circuit.labels(p, key[p], nonce[p], v[first:first + count], n[p], first)
                         for first, count in part[p]]
            mask[p] = circuit.mask(key[p], nonce[p], n[p])
    # Each assistant shares its bits b' with its own server (beta, from
    # their stream) and sends b'·2^f - beta (b' - beta if integer) to the
    # other server.
    own_share, msg = {}, {}
    for own, (server, t) in enumerate(PAIRS):
        other = 1 - own
        with tf.control_dependencies(taken):
            ks, ns = rt.key_material(server, t, server)
        mine, theirs, kt, nt = send_to_assistant(rt, own, labels[own][own],
                                                 labels[other][own], nonce, ns, after=taken)
        by_server = {own: mine, other: theirs}
        tables_t, decode_t, nonce_t, first_t = at_t[t]
        with device_scope(rt.device(t)):
            b = circuit.evaluate(tables_t, decode_t, by_server[0], by_server[1], nonce_t,
                                 first_t)
            m = kernels.bit_share_assist(b, kt, nt, bits, frac_bits)
        msg[other] = rt.send1(t, SERVERS[other], m)
        with device_scope(rt.device(server)):
            count = part[own][own][1]
            shape = tf.reshape(count, [1]) if circuit.outputs is None else \
                tf.stack([count, tf.constant(circuit.outputs, tf.int64)])   # outputs: public
            own_share[own] = kernels.prg_ring(ks, ns, shape, bits)
    out = []
    for p, party in enumerate(SERVERS):
        first, second = (own_share[0], msg[0]) if p == 0 else (msg[1], own_share[1])
        with device_scope(rt.device(party)):
            if table is not None:                  # checked by the caller (check_table)
                out.append(kernels.bit_unmask_table([first, second], mask[p],
                                                    tf.constant(table), bits, party=p))
                continue
            out.append(kernels.bit_unmask(tf.concat([first, second], 0), mask[p], bits,
                                          frac_bits, party=p))
    with device_scope(rt.device("S1")):
        rt.count(rounds=C.advance(list(low) + ([] if after is None else [after]),
                                  C.CIRCUIT_ROUNDS, out), comparisons=n[0])
    return out[0], out[1]
