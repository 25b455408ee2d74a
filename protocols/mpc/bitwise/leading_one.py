"""`Backend.leading_one` on boolean shares: ONE bit decomposition per
element instead of a garbled priority encoder (privpy/leading_one.py, about
6 KB per element) or one bitwise comparison per threshold (circuits.py,
about 100 bytes each, 33-86 per element for the derived functions' range
reductions).

S1 and S2 add their low words on boolean shares with a Kogge-Stone adder
(ABY3 §5.3, as SPU's SEMI2K A2B), take the magnitude locally, run a suffix
OR (one AND per level) and open the requested thermometer bits masked by a
dealt word, re-shared arithmetically as the comparisons' bit (DESIGN §6 step
5). Every AND is a Beaver triple whose halves both derive from the servers'
PRG streams with the dealer T1, which sends S2 only its product words and
its ring shares of the mask bits. The math and the message layout:
ops/bitwise/leading_one.h.

Rounds: A + O + 2 = 14 for widths 34-63 (A = ceil(log2(W - 1)) adder
levels, O = ceil(log2 W) OR levels). Bytes per element: 8·(3A + 2O + 1)
each way between S1 and S2 (248 at W = 46), 8·(2A + O) of T1's product
words and one ring element per requested column to S2 (cost below,
checked against the channel's counters in tests/test_bitwise_circuits.py).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import tensorflow as tf

from . import protocol
from ..privpy import circuits as gc
from ..privpy import leading_one as lo
from ..runtime import cost as C
from ..runtime import kernels
from ..runtime import shares as sh
from ..runtime.devscope import device_scope

#: widest circuit: the sign column is bit 63 of the opened word
MAX_WIDTH = 63
#: elements per dealt batch: the dealer's outputs take 8·(2A + O) bytes and
#: a ring element per column each (about 0.9 KB for sqrt's 45 columns in the
#: 128-bit ring: 225 MB per batch of 2^18), so bigger batches go in chunks
#: dealt one after another (their rounds overlap)
CHUNK = 1 << 18
SERVERS = protocol.SERVERS
DEALER = protocol.DEALER


def _levels(width: int):
    """(adder levels A, OR levels O) of the circuit for width W."""
    return math.ceil(math.log2(width - 1)), math.ceil(math.log2(width))


def rounds(width: int) -> int:
    """Message rounds of one call (ops/bitwise/leading_one.h: Plan::Steps)."""
    a, o = _levels(width)
    return a + o + 2


def message_words(width: int) -> int:
    """Words per element each server sends the other over all steps."""
    a, o = _levels(width)
    return 1 + 3 * (a - 1) + 2 + 2 * o + 1


def correction_words(width: int) -> int:
    """T1's product words per element to S2."""
    a, o = _levels(width)
    return 1 + 2 * (a - 1) + 1 + o


def cost(n: int, ring_bits: int, width: int, columns: int) -> C.Cost:
    """What a bitwise leading one of n elements with `columns` outputs sends
    (chunks of CHUNK side by side)."""
    c = C.Cost()
    for start in range(0, max(n, 1), CHUNK):
        c = c.beside(_batch_cost(min(CHUNK, n - start), ring_bits, width, columns))
    return c


def _batch_cost(n: int, ring_bits: int, width: int, columns: int) -> C.Cost:
    c = C.Cost(rounds=rounds(width), comparisons=n)
    for step_words in _step_words(width):
        c.send("S1", "S2", n * step_words * 8)
        c.send("S2", "S1", n * step_words * 8)
    c.send(DEALER, "S2", n * (correction_words(width) * 8 + columns * ring_bits // 8)
           + C.NONCE_BYTES)
    c.send(DEALER, "S1", C.NONCE_BYTES)
    return c


def _step_words(width: int):
    a, o = _levels(width)
    return [1] + [3] * (a - 1) + [2] + [2] * o + [1]


def available(width: int) -> bool:
    """Whether this protocol runs a circuit of width W (the sign column
    needs a free bit above it)."""
    return 3 <= width <= MAX_WIDTH


def leading_one(backend, x, columns: Sequence[int], magnitude: bool, width: int, table=None):
    """`Backend.leading_one` by one bit decomposition per element: integer
    bit shares [N, K] of the circuit's columns for a flat x [N] (the garbled
    circuit's outputs bit for bit: x mod 2^W is what both read), or with
    `table` [K + 1, J] the fused bits @ table[:K] + table[K], computed in
    the last kernel (BwLeadingOneFinish) without storing the bits. N must be
    known statically."""
    cols = lo.check_columns(columns, width)
    table = gc.check_table(table, len(cols))
    if not available(width):
        raise ValueError(f"the bitwise leading one takes widths 3..{MAX_WIDTH}, got {width}: "
                         "run the garbled circuit (comparison='garbled') for it")
    n = gc.require_static(backend, x)
    limbs = backend.limbs
    low = backend.local(lambda s, party: sh.low64(s, limbs), x)
    if C.active():
        C.declare(cost(n, backend.bits, width, len(cols)))
    outs, after = [], None
    for b in range(0, max(n, 1), CHUNK):
        part = low if n <= CHUNK else backend.map_shares(lambda s, b=b: s[b:b + CHUNK], low)
        outs.append(_batch(backend, part, int(part[0].shape[0]), cols, magnitude, width, after,
                           table))
        after = outs[-1][2]
    z = outs[0][:2] if len(outs) == 1 else \
        backend.map_many(lambda p: tf.concat(p, 0), [o[:2] for o in outs])
    with device_scope(backend.rt.device("S1")):
        backend.rt.count(rounds=C.advance(list(low), rounds(width), z), comparisons=n)
    return z


def _batch(backend, low, n: int, cols, magnitude: bool, width: int, after, table=None):
    """One dealt batch of n elements: (S1's bits, S2's bits, the dealer's
    output); with `table`, the bits times it, fused into the last kernel."""
    rt, bits = backend.rt, backend.bits
    m = protocol.deal_with(rt, lambda k0, n0, k1, n1: kernels.bw_lo_deal(
        k0, n0, k1, n1, n, width, cols, magnitude, bits), after)
    key, nonce, corr_s2, ring_s2 = m["key"], m["nonce"], m["corrections"], m["ring"]
    empty = {p: rt.constant(party, np.zeros([0], np.int64)) for p, party in enumerate(SERVERS)}
    state, msg = {0: low[0], 1: low[1]}, {}
    for step in range(rounds(width)):
        recv = empty if step == 0 else \
            {1 - p: rt.send1(party, SERVERS[1 - p], msg[p]) for p, party in enumerate(SERVERS)}
        for p, party in enumerate(SERVERS):
            with device_scope(rt.device(party)):
                extra = corr_s2 if p == 1 and step > 0 else empty[p]
                state[p], msg[p] = kernels.bw_lo_step(state[p], recv[p], key[p], nonce[p],
                                                      extra, width, magnitude, step, party=p)
    recv = {1 - p: rt.send1(party, SERVERS[1 - p], msg[p]) for p, party in enumerate(SERVERS)}
    out = []
    for p, party in enumerate(SERVERS):
        with device_scope(rt.device(party)):
            r = ring_s2 if p == 1 else empty[p]
            z = kernels.bw_lo_finish(msg[p], recv[p], key[p], nonce[p], r, width, cols,
                                     magnitude, bits, party=p, table=table)
            if p in m["checks"]:   # this server's stream with the dealer was in step
                z = protocol.check_dealer(rt, p, *m["checks"][p], z)
            out.append(z)
    return out[0], out[1], m["dealt"]
