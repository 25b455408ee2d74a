"""A comparison's bit times values inside the comparison's own rounds
(issue 26): [z < 0]·v for ReLU, max/min, the reductions' and the sort's
selects in the bitwise comparison's 8 rounds instead of its 8 and then a
multiplication's 2.

The bitwise comparison ends by opening m = msb ^ r to S1 and S2, r a bit
dealt by T1 who also shares it arithmetically, and [msb] = m + (1 - 2m)[r]
(protocol.py). So

    [msb]·v = m·v + (1 - 2m)·[r·v],

and [r·v] is PrivPy's multiplication (DESIGN §5) of two shares known
before the comparison starts: [r] as soon as T1's dealing message is in
(it overlaps the first round), v at once. It runs beside the comparison
tree (its 2 rounds end by round 3 or 4 of the 8), and once m is open the
rest is local: each server takes v_p - w_p where m = 1, w_p where m = 0
(w = [r·v]), exact in the ring (r is an integer bit: no truncation).

Views. The multiplication is the ordinary one with [r] as its left
operand, so every message is masked as in DESIGN §5: T1 gets r1 + ρ and
v2 + σ, T2 gets r2 + ρ' and v1 + σ', with ρ, σ, ρ', σ' fresh from the
S1-S2 stream (a new nonce per call), which neither assistant holds. T1
dealt r and knows r1 and r2, but r1 + ρ is uniform for any r1 it knows:
its view is the masked operands and nothing else, as in every
multiplication; T2's likewise; S1 and S2 receive the products masked by
the S1-T1 / S2-T2 streams and the comparison's messages as before. r is
fresh per call (T1's new stream nonces in `protocol.deal`) and used once:
in the opening of m and in this product of the same call.
(tests/test_bitwise.py: test_every_view_is_uniform_and_secret_independent
runs ReLU too.)
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from ... import std_ops
from ..runtime import cost as C
from ..runtime import kernels
from ..runtime import shares as sh
from . import protocol
from ..runtime.devscope import device_scope


def ltz_mul_cost(n: int, k: int, ring_bits: int, size_unknown: bool = False) -> C.Cost:
    """What `ltz_mul` of n comparisons and k products of n elements sends:
    the comparison's messages beside one multiplication of k·n elements
    (the rounds of the comparison: the product ends before it does)."""
    e = [n * k]
    return protocol.ltz_cost(n, ring_bits, size_unknown).beside(
        C.mul_cost(e, e, e, ring_bits))


def ltz_mul(backend, z, vs: Sequence, dealer_n: Optional[tf.Tensor] = None) -> List:
    """[z < 0]·v for each v of vs (each of z's shape) in one dealt batch
    (n <= protocol.CHUNK or unknown while tracing): the comparison's 8
    rounds with the product of [r] and all of vs (one multiplication)
    beside them (see the module doc). dealer_n: as in `protocol.ltz` (the
    batch's size on the dealer, for a trace that does not know it)."""
    rt, limbs, bits = backend.rt, backend.limbs, backend.bits
    k = len(vs)
    servers = protocol.SERVERS
    # shapes and empty operands as constants made once per graph and server
    const = lambda p, value, dtype=tf.int32: rt.constant(servers[p], value, dtype)  # noqa: E731
    tail = [2] if limbs == 2 else []
    shape = backend.local(lambda s, party: sh.dynamic_shape(s, limbs), z)
    # z flat [n(, 2)], its low limb (sh.low64) by one Unpack; an operand
    # that is z itself (ReLU, |x|) reuses the flat z
    flat = lambda x, party: std_ops.reshape(x, const(party, [-1] + tail))  # noqa: E731
    zf = backend.local(flat, z)
    low = zf if limbs == 1 else backend.local(
        lambda s, party: std_ops.unstack(s, num=2, axis=-1)[0], zf)
    n_static: Optional[int] = low[0].shape[0]
    # The k operands stacked [k, n(, 2)], not concatenated: the opened bits
    # [n] broadcast over them and one Unpack splits the result back (the
    # trace costs per op: no tiling, slicing or size arithmetic); one
    # operand (a ReLU) stays flat [n(, 2)]: no Pack or Unpack.
    vf = [zf if x[0] is z[0] and x[1] is z[1] else backend.local(flat, x) for x in vs]
    v = vf[0] if k == 1 else backend.map_many(sh.pack, vf)
    with device_scope(rt.device("S1")):
        # low is flat: its size is n (a Python int when the trace knows it)
        n_s1 = n_static if n_static is not None else tf.size(low[0], out_type=tf.int64)
    m = protocol.deal(rt, n_static, None if n_static is not None or dealer_n is not None
                      else n_s1, bits, 0, dealer_n=dealer_n)

    # [r] (integer bit): S1's ring shares follow its stream words with the
    # dealer; BwFinish with nothing opened (m = 0) returns exactly them.
    # S2's are the dealer's `ring`.
    with device_scope(rt.device("S1")):
        blocks = (n_s1 + protocol.BLOCK - 1) // protocol.BLOCK
        if n_static is not None:
            nothing, n_r = const(0, np.zeros([blocks, 1]), tf.int64), const(0, n_s1, tf.int64)
        else:
            nothing, n_r = tf.zeros(tf.stack([blocks, tf.constant(1, tf.int64)]), tf.int64), n_s1
        empty = const(0, np.zeros([0] + tail), tf.int64)
        r1 = kernels.bw_finish(nothing, nothing, m["key"][0], m["nonce"][0], empty, n_r,
                               bits, 0, party=0)
    r = (r1, m["ring"]) if k == 1 else backend.map_many(lambda p: sh.pack(p * k),
                                                          [(r1, m["ring"])])
    w = backend.mul_messages(r, v, truncate=False)

    msg, recv, _ = protocol.rounds(backend, low, m, sizes=False)
    out = []
    for p, party in enumerate(protocol.SERVERS):
        with device_scope(rt.device(party)):
            # m·v + (1 - 2m)·[r·v]: v - [r·v] where m = msb ^ r (both step-7
            # words) is 1, [r·v] where it is 0, in one kernel on this server
            y = kernels.bw_select(msg[p], recv[p], v[p], w[p], bits)
            if p in m["checks"]:   # S1's stream with the dealer was in step
                own, theirs = m["checks"][p]
                y = protocol.check_dealer(rt, p, own, theirs, y)
            out.append(y)
    with device_scope(rt.device("S1")):
        rt.count(rounds=C.advance(list(low) + list(v), protocol.BITWISE_ROUNDS, out),
                 comparisons=n_s1, multiplications=n_s1 * k)
    if C.active() and n_static is not None:   # else the caller declares (ltz_mul_bill)
        C.declare(ltz_mul_cost(n_static, k, bits))

    if k == 1:   # one operand: its shape at once, no Unpack
        parts = [[y] for y in out]
    else:
        parts = []
        for p in range(2):
            with backend.on(p):
                parts.append(std_ops.unstack(out[p], num=k, axis=0))
        C.propagate(out, parts[0] + parts[1])

    def back(y, shp, party):
        if isinstance(shp, list):
            return std_ops.reshape(y, const(party, shp + tail))
        return sh.reshape(y, shp, limbs)
    return [backend.local(back, (parts[0][i], parts[1][i]), shape) for i in range(k)]
