"""The bitwise comparison's set-up phase: T1 deals the triples of one later
comparison batch ahead of time (tp.prepare_comparisons), so the online
phase is the servers' eight rounds between themselves only, as
privpy/garbled.py does for the garbled comparator (DESIGN §6).

The dealt material is S2's product shares and ring shares, stored at S2 in
TF variables, and the nonces of both servers' streams with T1, stored at
each server: the servers regenerate their own triple halves from those
streams online. Both stream checks run at set-up. Single-use in TF state:
each server takes its nonce with one TakeOnce kernel (a traced function
cannot replay it), S2 after S1, as for pregarbled comparators.
"""
from __future__ import annotations

import tensorflow as tf

from ..runtime import cost as C
from ..runtime import kernels
from . import protocol
from ..runtime.devscope import device_scope

ALREADY_USED = ("these comparisons were prepared for ONE comparison and were already used "
                "(reusing dealt triples would reuse masks): call tp.prepare_comparisons again "
                "for each comparison")


class Predealt:
    """Triples dealt ahead for one bitwise comparison of a given shape."""

    family = "bitwise"

    def __init__(self, backend, shape: tf.TensorShape):
        shape = tf.TensorShape(shape)
        if not shape.is_fully_defined():
            raise ValueError(f"prepare_comparisons needs a fully known shape, got {shape}")
        self.shape = shape
        rt = self._rt = backend.rt
        n = shape.num_elements()
        with tf.init_scope():   # dealt once, eagerly, whatever traces use it
            with device_scope(rt.device("S1")):
                n_s1 = tf.constant(n, tf.int64)
            m = protocol.deal(rt, n, n_s1, backend.bits, 0)
            own, theirs = m["checks"][0]
            with device_scope(rt.device("S1")):   # S1's stream check, now
                nonce_s1 = protocol.check_dealer(rt, 0, own, theirs, m["nonce"][0])
            self._nonce, self._fresh = {}, {}
            for p, party in enumerate(protocol.SERVERS):
                with device_scope(rt.device(party)):
                    value = nonce_s1 if p == 0 else m["nonce"][1]
                    self._nonce[p] = tf.Variable(value, trainable=False)
                    self._fresh[p] = tf.Variable(True, trainable=False)
            with device_scope(rt.device("S2")):
                self._corrections = tf.Variable(m["corrections"], trainable=False)
                self._ring = tf.Variable(m["ring"], trainable=False)

    def setup_cost(self, ring_bits: int) -> C.Cost:
        """What the set-up sent: T1's message to each server."""
        return setup_cost(self.shape.num_elements(), ring_bits)

    def consume(self, n: int):
        """The dealt material for the online phase (protocol.online), after
        each server marks it used in TF state."""
        if n != self.shape.num_elements():
            raise ValueError(f"these comparisons were prepared for {self.shape.num_elements()} "
                             f"elements, not {n}")
        rt = self._rt
        key, nonce, after = {}, {}, []
        for p, party in enumerate(protocol.SERVERS):
            with device_scope(rt.device(party)), tf.control_dependencies(after):
                nonce[p] = kernels.take_once(self._fresh[p], self._nonce[p], ALREADY_USED)
                after = [nonce[p]]
                with tf.control_dependencies(after):
                    key[p] = rt.key(party, protocol.DEALER, party)
        with device_scope(rt.device("S2")), tf.control_dependencies(after):
            corrections, ring = self._corrections.read_value(), self._ring.read_value()
        return dict(key=key, nonce=nonce, corrections=corrections, ring=ring)


def setup_cost(n: int, ring_bits: int) -> C.Cost:
    """The dealer's messages of `n` comparisons dealt ahead (one round)."""
    full = protocol.batch_cost(n, ring_bits)
    c = C.Cost(rounds=1)
    for link in ((protocol.DEALER, "S2"), (protocol.DEALER, "S1")):
        msgs, nbytes = full.links[link]
        c.send(link[0], link[1], nbytes, msgs)
    return c
