"""The bitwise comparison (issue 26): [x < 0] for shares x = x1 + x2 by a
carry circuit on boolean shares, its AND gates from Beaver triples dealt by
an assistant, in eight message rounds and about 100 bytes per comparison
(the garbled circuit of privpy/circuits.py: 2 rounds, 4,113 bytes).

S1 and S2 bit-slice the low 64 bits of their shares (mod 2^64 is a ring
homomorphism, DESIGN §3) and compute MSB(x1 + x2) = x1_63 ^ x2_63 ^ carry,
the carry by a reduction tree of (generate, propagate) pairs: ABY3
(Mohassel & Rindal, CCS 2018) §5.3's parallel-prefix adder restricted to its
top output, as SPU's SEMI2K computes an MSB with a trusted dealer. The
dealer is T1: it shares a PRG stream with each server, so both servers'
halves of every triple are derived from those streams and only S2's product
shares travel (T1 -> S2, one message that overlaps round 1); T1 sees no
message of the servers, only stream nonces. The last round opens msb ^ r
for a dealt bit r that T1 also shares arithmetically (the re-sharing of
DESIGN §6 step 5), so no party learns the bit. The math and the message
layout are in ops/bitwise/bitwise.h.

Rounds (tp.stats): 8. Bytes per comparison in a batch of n (blocks of 64):
61.75 between S1 and S2, 22.9 of corrections and one ring element (8 or 16
bytes) from T1, plus a 16-byte nonce header per batch.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from ..runtime import cost as C
from ..runtime import kernels
from ..runtime import shares as sh
from ..runtime.devscope import device_scope

#: the dealer of the Beaver triples (any assistant; T1 by the design's default)
DEALER = "T1"
SERVERS = ("S1", "S2")
#: message hops on the critical path: step 0 (level-0 openings), six tree
#: levels, the opening of msb ^ r; the dealer's message overlaps step 0
BITWISE_ROUNDS = 8
#: words (8 bytes) per block of 64 comparisons of each server's message in
#: steps 0-7, and of the dealer's corrections (ops/bitwise/bitwise.h)
MESSAGE_WORDS = (63, 95, 47, 23, 11, 5, 2, 1)
CORRECTION_WORDS = 63 + 120
BLOCK = 64
#: comparisons per dealt batch: the dealer's buffers take about 120 bytes per
#: comparison while it works (both servers' stream words), so bigger batches
#: go in chunks whose dealing runs one after another (their rounds overlap)
CHUNK = 1 << 21
#: the batch size S1 sends the dealer when the trace does not know it and
#: the caller did not give it to the dealer (int64)
SIZE_BYTES = 8


def ltz_cost(n: int, ring_bits: int, size_unknown: bool = False) -> C.Cost:
    """What a bitwise comparison of n elements sends (declared beside the
    protocol; tests/test_bitwise.py checks it against the channel's
    counters): chunks of CHUNK side by side. size_unknown: neither the
    trace nor the dealer knows n (a tf.function traced for a dynamic
    shape), so S1 tells the dealer (one 8-byte header; such a call is one
    chunk). A graph loop that gives the dealer each batch's size
    (Backend.batch_sizes: the sort loop) sends no such header."""
    c = C.Cost()
    for start in range(0, max(n, 1), CHUNK):
        c = c.beside(batch_cost(min(CHUNK, n - start), ring_bits))
    if size_unknown:
        c.send("S1", DEALER, SIZE_BYTES)
    return c


def batch_cost(n: int, ring_bits: int) -> C.Cost:
    """What one dealt batch of n comparisons sends."""
    blocks = math.ceil(n / BLOCK)
    c = C.Cost(rounds=BITWISE_ROUNDS, comparisons=n)
    for words in MESSAGE_WORDS:
        c.send("S1", "S2", blocks * words * 8)
        c.send("S2", "S1", blocks * words * 8)
    c.send(DEALER, "S2", blocks * CORRECTION_WORDS * 8 + n * ring_bits // 8 + C.NONCE_BYTES)
    c.send(DEALER, "S1", C.NONCE_BYTES)
    return c


def ltz(backend, x, frac_bits: int, predealt=None, dealer_n: Optional[tf.Tensor] = None):
    """Shares of [x < 0]·2^frac_bits (frac_bits 0: the plain bit) for shares
    x of any shape, by the bitwise protocol; same shape as x. With
    `predealt` (ahead.Predealt, tp.prepare_comparisons): the triples were
    dealt ahead and only the servers' rounds run. `dealer_n`: the number
    of elements as an int64 scalar on the dealer, for a trace that does not
    know it (a graph loop's layer): the dealer deals from it at once,
    without waiting for S1's data or a message (S2's kernels refuse a
    batch dealt for another size)."""
    rt, limbs = backend.rt, backend.limbs
    shape = backend.local(lambda s, party: sh.dynamic_shape(s, limbs), x)

    low = backend.local(lambda s, party: sh.low64(s, limbs), x)
    n_static = low[0].shape[0]
    if predealt is not None:
        if C.active():
            C.declare(ahead_online_cost(n_static, backend.bits))
        out = online(backend, low, predealt.consume(n_static), 0)
        if frac_bits:   # dealt for integer bits: scale locally, exactly
            out = backend.fixed_from_bits(out)
    else:
        if C.active() and n_static is not None:   # else the caller declares (ltz_bill)
            C.declare(ltz_cost(n_static, backend.bits))
        out = _chunked(backend, low, n_static, frac_bits, dealer_n)
    with device_scope(rt.device("S1")):   # the chunks' rounds overlap: one count
        n = n_static if n_static is not None else tf.shape(low[0], out_type=tf.int64)[0]
        rt.count(rounds=C.advance(list(low), BITWISE_ROUNDS, out), comparisons=n)
    return backend.local(lambda s, shp, party: sh.reshape(s, shp, limbs), out, shape)


def _chunked(backend, low, n_static: Optional[int], frac_bits: int, dealer_n=None):
    """Dealt batches of at most CHUNK comparisons, the dealer working on one
    after the other; the servers' rounds overlap. Of unknown size: one
    batch, its size `dealer_n` on the dealer, else from S1."""
    if n_static is None or n_static <= CHUNK:
        return _batch(backend, low, n_static, frac_bits, dealer_n=dealer_n)[:2]
    outs, after = [], None
    for b in range(0, n_static, CHUNK):
        part = backend.map_shares(lambda s, b=b: s[b:b + CHUNK], low)
        outs.append(_batch(backend, part, part[0].shape[0], frac_bits, after))
        after = outs[-1][2]
    return backend.map_many(lambda p: tf.concat(p, 0), [o[:2] for o in outs])


def ahead_online_cost(n: int, ring_bits: int) -> C.Cost:
    """The online phase of n comparisons dealt ahead (ahead.py): the
    servers' messages only."""
    full = batch_cost(n, ring_bits)
    c = C.Cost(rounds=full.rounds, comparisons=n)
    for link in (("S1", "S2"), ("S2", "S1")):
        msgs, nbytes = full.links[link]
        c.send(link[0], link[1], nbytes, msgs)
    return c


def deal(rt, n_static: Optional[int], n_s1: Optional[tf.Tensor], bits: int, frac_bits: int,
         after=None, dealer_n: Optional[tf.Tensor] = None) -> Dict[str, Any]:
    """The dealer's part of one batch of n comparisons: T1 regenerates both
    servers' triple halves from its streams with them and sends S2 its
    product shares and its ring shares of r·2^frac_bits. n: `n_static` if
    known, else `dealer_n` (an int64 scalar on the dealer, public: a graph
    loop's layer size from the dealer's own counter), else `n_s1` (on S1,
    sent to the dealer: one 8-byte message, a hop before the dealer can
    start); `after`: an op on the dealer to start after. Returns
    `deal_with`'s dict."""
    if n_static is None and dealer_n is not None:   # the dealer knows it
        n_t = dealer_n
    elif n_static is None:   # the size is public: S1 tells the dealer
        if n_s1 is None:
            raise ValueError("a bitwise comparison of unknown size needs its size on S1 or "
                             "on the dealer (Backend.batch_sizes): give one")
        (n_t,) = rt.send("S1", DEALER, headers=(n_s1,))[1]
    else:
        n_t = rt.constant(DEALER, n_static)
    return deal_with(rt, lambda k0, n0, k1, n1: kernels.bw_deal(k0, n0, k1, n1, n_t, bits,
                                                                frac_bits), after)


def deal_with(rt, kernel: Callable[..., Tuple[tf.Tensor, tf.Tensor]],
              after=None) -> Dict[str, Any]:
    """The dealer's part of one batch of any circuit of this family (the
    comparison's or the leading one's): `kernel(key, nonce` of T1's stream
    with S1`, key, nonce` of its stream with S2`)` runs on T1 and returns
    S2's product words and ring shares, which T1 sends S2 with its stream
    nonces as headers for the servers' checks. Returns the servers' (key,
    nonce) by party index, S2's `corrections` (checked) and `ring`, S1's
    pending check `checks` {party index: (own nonce, the dealer's)} and
    `dealt` (the dealer's output, to order the next batch after)."""
    key, nonce, kd, nd = {}, {}, {}, {}
    for p, party in enumerate(SERVERS):
        key[p], nonce[p] = rt.key_material(party, DEALER, party)
    (kd[0], nd[0]), (kd[1], nd[1]) = rt.key_materials(DEALER, [(s, DEALER) for s in SERVERS])
    with device_scope(rt.device(DEALER)), tf.control_dependencies([] if after is None else [after]):
        dealt, ring = kernel(kd[0], nd[0], kd[1], nd[1])
    (corr, ring), (nd_s2,) = rt.send(DEALER, "S2", dealt, ring, headers=(nd[1],))
    corr = check_dealer(rt, 1, nonce[1], nd_s2, corr)
    _, (nd_s1,) = rt.send(DEALER, "S1", headers=(nd[0],))
    return dict(key=key, nonce=nonce, corrections=corr, ring=ring,
                checks={0: (nonce[0], nd_s1)}, dealt=dealt)


def check_dealer(rt, p: int, own: tf.Tensor, theirs: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """x, once server p's nonce of its stream with the dealer (`own`) equals
    the one the dealer sent (`theirs`): the one place the bitwise family
    checks a stream (a server whose stream with T1 is out of step would
    regenerate other triple halves than T1 dealt: wrong bits, so refused)."""
    party = SERVERS[p]
    return rt.check_stream(party, DEALER, party, own, theirs, DEALER, x)


def online(backend, low, m: Dict[str, Any], frac_bits: int):
    """The servers' eight rounds on flat low halves `low` with the dealt
    material `m` (from `deal`, or stored ahead: ahead.py): their shares of
    [x < 0]·2^frac_bits, after S1's pending stream check if any."""
    rt, bits = backend.rt, backend.bits
    key, nonce, ring = m["key"], m["nonce"], m["ring"]
    msg, recv, n = rounds(backend, low, m)
    out = []
    for p, party in enumerate(SERVERS):
        with device_scope(rt.device(party)):
            r = ring if p == 1 else tf.zeros([0] if bits == 64 else [0, 2], tf.int64)
            z = kernels.bw_finish(msg[p], recv[p], key[p], nonce[p], r, n[p], bits, frac_bits,
                                  party=p)
            if p in m.get("checks", {}):   # this server's stream with the dealer was in step
                own, theirs = m["checks"][p]
                z = check_dealer(rt, p, own, theirs, z)
            out.append(z)
    return out[0], out[1]


def rounds(backend, low, m: Dict[str, Any], sizes: bool = True):
    """The servers' eight message rounds (steps 0-7) on flat low halves
    `low` with the dealt material `m`: by party index, each server's own
    step-7 message, the other's (their XOR is msb ^ r, one bit per
    comparison, bit-sliced) and n on that server (None unless `sizes`:
    a select reads n from its operands)."""
    rt = backend.rt
    key, nonce, corr = m["key"], m["nonce"], m["corrections"]
    state, msg, n = {}, {}, {}
    for p, party in enumerate(SERVERS):
        with device_scope(rt.device(party)):
            n[p] = tf.size(low[p], out_type=tf.int64) if sizes else None   # low is flat
            state[p], msg[p] = kernels.bw_input(low[p], key[p], nonce[p], party=p)
    none = rt.constant("S1", np.zeros([0]))   # S1 has no dealer message: an empty tensor
    for step in range(1, len(MESSAGE_WORDS)):
        recv = {1 - p: rt.send1(party, SERVERS[1 - p], msg[p]) for p, party in enumerate(SERVERS)}
        for p, party in enumerate(SERVERS):
            with device_scope(rt.device(party)):
                extra = corr if p == 1 else none
                state[p], msg[p] = kernels.bw_step(state[p], recv[p], key[p], nonce[p], extra,
                                                   step=step, party=p)
    recv = {1 - p: rt.send1(party, SERVERS[1 - p], msg[p]) for p, party in enumerate(SERVERS)}
    return msg, recv, n


def _batch(backend, low, n_static: Optional[int], frac_bits: int, after=None, dealer_n=None):
    """One dealt batch: (S1's share, S2's share, the dealer's output), the
    dealer starting after `after` (the previous chunk's, on the dealer)."""
    n_s1 = None
    if n_static is None and dealer_n is None:
        with device_scope(backend.rt.device("S1")):
            n_s1 = tf.shape(low[0], out_type=tf.int64)[0]
    m = deal(backend.rt, n_static, n_s1, backend.bits, frac_bits, after, dealer_n)
    return online(backend, low, m, frac_bits) + (m["dealt"],)
