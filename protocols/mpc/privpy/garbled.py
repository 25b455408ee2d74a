"""Garbled comparators made ahead of time: the setup phase of DESIGN §6.

S1 garbles a batch of comparators before the inputs exist and ships the
tables to T1 and T2, where they wait in TF variables; online, only input
labels travel. Each batch is single-use, which every server enforces in TF
state with one atomic test-and-set kernel (TakeOnce), also against
concurrent runs.
"""
from __future__ import annotations

import tensorflow as tf

from . import circuits
from ..runtime import kernels
from ..runtime.devscope import device_scope

ALREADY_USED = ("tf_privpy: these pregarbled comparators were already used; garble new ones "
                "(tp.garble_comparisons) for every comparison")


class Pregarbled:
    """Garbled comparators made ahead of time for one comparison batch."""

    def __init__(self, backend, shape: tf.TensorShape):
        if not shape.is_fully_defined():
            raise ValueError(f"garble_comparisons needs a fully known shape, got {shape}")
        self.shape = shape
        rt = backend.rt
        n = shape.num_elements()
        with tf.init_scope():  # variables and garbling happen once, eagerly
            key, nonce = circuits.take_stream(rt)
            garble = circuits.comparison().garble
            shipped = circuits.garble_and_ship(
                rt, lambda first, count: garble(key[0], nonce[0], n, first, count),
                nonce[0], tf.constant(n, tf.int64))
            self._nonce, self._fresh, self._at_t = {}, {}, {}
            for p, party in enumerate(("S1", "S2")):
                with device_scope(rt.device(party)):
                    self._nonce[p] = tf.Variable(nonce[p], trainable=False)
                    self._fresh[p] = tf.Variable(True, trainable=False)
            for t in ("T1", "T2"):
                with device_scope(rt.device(t)):
                    self._at_t[t] = tuple(tf.Variable(v, trainable=False) for v in shipped[t])
        self._rt = rt

    def consume(self, share_shape: tf.TensorShape, limbs: int):
        """(key, nonce, {T: (tables, decode, nonce)}) for the online phase,
        after each server checks in TF state that this batch is unused."""
        logical = share_shape[:-1] if limbs == 2 else share_shape
        if logical.num_elements() != self.shape.num_elements():
            raise ValueError(f"these garbled comparators are for {self.shape.num_elements()} "
                             f"comparisons, not {logical.num_elements()}")
        rt = self._rt
        key, nonce, after = {}, {}, []
        for p, party in enumerate(("S1", "S2")):
            # One kernel checks and marks the batch used: separate read,
            # Assert and assign ops would let two concurrent runs pass. S2
            # takes after S1 (a control edge, no data), as it does eagerly: of
            # concurrent runs, only the one S1 let through reaches S2, so
            # exactly one succeeds instead of each winning one server and
            # both failing.
            with device_scope(rt.device(party)), tf.control_dependencies(after):
                nonce[p] = kernels.take_once(self._fresh[p], self._nonce[p], ALREADY_USED)
                after = [nonce[p]]
                with tf.control_dependencies(after):
                    key[p] = rt.key("S1", "S2", party)
        at_t = {}
        for t, vs in self._at_t.items():
            with device_scope(rt.device(t)):  # each assistant reads its own tables
                at_t[t] = tuple(v.read_value() for v in vs)
        return key, nonce, at_t
