"""The one channel: how a tensor crosses from one party to another (DESIGN §2).

Every tensor that leaves its party goes through `Channels.send`, one channel
per ordered pair of parties (client, S1, S2, T1, T2). In the embedded mode a
send is a pinned copy on the receiver (an IdentityN under the receiver's
device scope, so TF's Send/Recv pair is the only cross-device edge) plus
message and byte counters kept in TF state on the receiver: a tf.function
counts per run, not per trace. The distributed mode adds authenticated
encryption at this same point: a link given to `secure` carries a message as
one AES-GCM ciphertext sealed on the sender and opened on the receiver
(sealing.py), and the counters still count the plaintext bytes, which the
cost model predicts (a sealed message adds 8 bytes and a 16-byte tag per
MiB: kernels.aead_message_bytes).

A message may carry header tensors (stream nonces, batch indices) beside its
payload: they travel in the same message and are counted in its bytes. The
receiver of a nonce header checks it against its own end of the stream
(`check_stream`), so two ends of a PRG stream that fell out of step (an error
between their two kernels) are detected instead of silently producing wrong
results (DESIGN §4).
"""
from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from . import kernels, sealing
from ...op_builder import raw_op
from .devscope import device_scope

Observer = Callable[[str, str, Sequence[tf.Tensor]], None]
#: (src, dst, tensors on the wire) -> the tensors delivered instead
Interceptor = Callable[[str, str, List[tf.Tensor]], List[tf.Tensor]]

#: the name scope of every channel copy: graph tests recognise the one
#: allowed kind of cross-device edge by it
SCOPE = "tp_channel"

#: tf.raw_ops.IdentityN, built without its wrapper's layers while tracing
#: (op_builder.py): every message makes one
_identity_n = raw_op("IdentityN")


def _static_bytes(t: tf.Tensor):
    """Bytes of t if known when the graph is built, else None."""
    if t.dtype == tf.string:
        return None
    n = t.shape.num_elements()
    return None if n is None else n * t.dtype.size


class Channels:
    """The channels between every ordered pair of `parties`.

    Args:
      devices: party name -> TF device name, for every party.
      pairs: the ordered pairs (src, dst) that get a channel; default every
        ordered pair of `devices`. An extra data owner of a federated run
        (client1, ...) talks to the share holders only (runtime.py), so
        its pairs are listed rather than every permutation (N clients
        would otherwise make O(N^2) counters).
    """

    def __init__(self, devices: Dict[str, str],
                 pairs: Optional[Sequence[Tuple[str, str]]] = None):
        self.devices = dict(devices)
        self._lock = threading.Lock()
        self._observers: List[Observer] = []
        self._counters: Dict[Tuple[str, str], tf.Variable] = {}
        self._links: Dict[Tuple[str, str], sealing.Link] = {}
        self._interceptors: List[Interceptor] = []
        #: per thread: the open counted_at_end() blocks, (graph, pending counts)
        self._deferred = threading.local()
        with tf.init_scope():
            for src, dst in (pairs if pairs is not None
                             else itertools.permutations(self.devices, 2)):
                with device_scope(self.devices[dst]):
                    # [messages, bytes] received by dst from src
                    self._counters[(src, dst)] = tf.Variable(
                        tf.zeros([2], tf.int64), trainable=False,
                        name=f"tp_channel_{src}_to_{dst}")

    # ------------------------------------------------------------- sending
    def send(self, src: str, dst: str, *payload: tf.Tensor,
             headers: Sequence[tf.Tensor] = ()) -> Tuple[List[tf.Tensor], List[tf.Tensor]]:
        """Moves payload and headers from src to dst as ONE message.

        Returns (payload, headers) as tensors placed on dst.
        """
        if src == dst:
            raise ValueError(f"a message from {src} to itself is not a message")
        if (src, dst) not in self._counters:
            raise ValueError(f"no channel from {src!r} to {dst!r}")
        tensors = [tf.convert_to_tensor(t) for t in list(payload) + list(headers)]
        link = self._links.get((src, dst))
        if link is not None:
            with device_scope(self.devices[src]), tf.name_scope(f"tp_seal_{src}_to_{dst}"):
                message = sealing.seal(link, tensors)
        with device_scope(self.devices[dst]), tf.name_scope(f"{SCOPE}_{src}_to_{dst}"):
            wire = _identity_n(input=tensors if link is None else [message])
            for intercept in list(self._interceptors):
                wire = intercept(src, dst, list(wire))
            out = wire if link is None else sealing.open_(link, wire[0], tensors)
            static = [_static_bytes(t) for t in tensors]
            pending = self._pending()
            if pending is not None and all(b is not None for b in static):
                # counted at the end (counted_at_end)
                m, b = pending.get((src, dst), (0, 0))
                pending[(src, dst)] = (m + 1, b + sum(static))
            else:
                # one op per message: the known bytes as an attribute, the
                # tensors of sizes unknown while tracing as inputs (their
                # sizes are read, not their values); tracing cost is per op
                kernels.count_message(self._counters[(src, dst)],
                                      [o for b, o in zip(static, out) if b is None],
                                      sum(b for b in static if b is not None))
        with self._lock:
            observers = list(self._observers)
        for obs in observers:
            obs(src, dst, out[:len(payload)])
        return list(out[:len(payload)]), list(out[len(payload):])

    def _pending(self):
        """The counts to add at the end of the innermost counted_at_end()
        block, if one is open on the graph being built now (not in a loop
        body or a branch, whose graph is another: a message there is counted
        per iteration, where it happens); else None."""
        stack = getattr(self._deferred, "stack", ())
        if not stack or tf.executing_eagerly():
            return None
        graph, pending, _ = stack[-1]
        return pending if tf.compat.v1.get_default_graph() is graph else None

    def add_at_end(self, var: tf.Variable, device: str, values: Sequence[int]) -> bool:
        """Adds the ints `values` to the int64 vector variable `var` (on
        `device`) by one update when the innermost counted_at_end() block
        open on the graph being built closes, as its message counts (the
        runtime's protocol counters: two ops per protocol call otherwise).
        False, and nothing done, when no such block is open."""
        if self._pending() is None:
            return False
        adds = self._deferred.stack[-1][2]
        entry = adds.setdefault(id(var), [var, device, [0] * len(values)])
        entry[2] = [a + int(v) for a, v in zip(entry[2], values)]
        return True

    @contextlib.contextmanager
    def counted_at_end(self):
        """While a tf.function body is traced in this block, the messages of
        statically known size are counted by ONE counter update per link,
        added when the block closes, instead of one op per message (and the
        runtime's protocol counters by one update: `add_at_end`).

        Every tp op traced in a tf.function opens one (opdef.accepting_variables),
        so a user's function gets this too; a block opened while one is open
        on the same graph adds nothing of its own (the outer one counts).

        Why: a graph's build and first call cost per op. ResNet50's predict
        sends 2,185 messages: their counters were 4,370 of its 20,536 ops.
        The counters are statistics of a run (tp.stats, the bill's check);
        a run adds the same totals either way. A run that fails part-way
        counts its messages either way too (the update is not ordered after
        them), which no reader relies on: a failed run's stats are not
        reported. A block whose body raised while tracing still adds its
        counts (the messages sent before the error stay in the graph).
        """
        stack = getattr(self._deferred, "stack", ())
        graph = tf.compat.v1.get_default_graph()
        if tf.executing_eagerly() or (stack and stack[-1][0] is graph):
            # eager: nothing to defer; nested in a block on this graph: the
            # outer block adds these counts with its own
            yield
            return
        pending: Dict[Tuple[str, str], Tuple[int, int]] = {}
        adds: Dict[int, list] = {}   # add_at_end's: id(var) -> [var, device, totals]
        self._deferred.stack = stack + ((graph, pending, adds),)
        try:
            yield
        finally:
            # also when the block's body raised: a caller that catches the
            # error goes on tracing, and the messages already sent stay in
            # its graph, so they are counted like any other
            self._deferred.stack = stack
            for (src, dst), (m, b) in sorted(pending.items()):
                with device_scope(self.devices[dst]), \
                        tf.name_scope(f"{SCOPE}_{src}_to_{dst}_counts"):
                    self._counters[(src, dst)].assign_add(tf.constant([m, b], tf.int64),
                                                          read_value=False)
            for var, device, totals in adds.values():
                if any(totals):
                    with device_scope(device):
                        var.assign_add(tf.constant(totals, tf.int64), read_value=False)

    def secure(self, link: sealing.Link) -> None:
        """From now on, messages on link.name ("S1->T1") are sealed."""
        src, dst = link.name.split("->")
        if (src, dst) not in self._counters:
            raise ValueError(f"no channel from {src!r} to {dst!r}")
        self._links[(src, dst)] = link

    def secured(self) -> List[str]:
        """The links whose messages are sealed, as "S1->T1"."""
        return sorted(link.name for link in self._links.values())

    def send1(self, src: str, dst: str, x: tf.Tensor) -> tf.Tensor:
        """send() of a single tensor with no header."""
        return self.send(src, dst, x)[0][0]

    @contextlib.contextmanager
    def intercept(self, interceptor: Interceptor):
        """Tests only: while active, interceptor(src, dst, tensors) may replace
        what arrives on dst, as an attacker on the network could (the sealed
        message on a sealed link, the payload and headers otherwise). Its ops
        run on dst, between the transfer and the receiving kernels."""
        self._interceptors.append(interceptor)
        try:
            yield
        finally:
            self._interceptors.remove(interceptor)

    # ------------------------------------------------------------ counting
    def counts(self) -> Dict[Tuple[str, str], Tuple[int, int]]:
        """{(src, dst): (messages, bytes)} so far, read eagerly."""
        with tf.init_scope():
            return {k: tuple(int(v) for v in c.numpy()) for k, c in self._counters.items()}

    def restore_counts(self, counts: Dict[Tuple[str, str], Tuple[int, int]]) -> None:
        """Sets every link's message and byte counters to `counts` (an
        earlier counts()): a runtime reused for a new run starts from its
        set-up traffic (runtime.Runtime.reset_counters)."""
        with tf.init_scope():
            for k, c in self._counters.items():
                c.assign(tf.constant(counts.get(k, (0, 0)), tf.int64))

    def hooked(self) -> bool:
        """Whether an observe() or intercept() block is open on these channels."""
        with self._lock:
            return bool(self._observers or self._interceptors)

    @contextlib.contextmanager
    def observe(self, observer: Observer):
        """Calls observer(src, dst, payload tensors on dst) for every message
        while active (at trace time inside a tf.function)."""
        with self._lock:
            self._observers.append(observer)
        try:
            yield
        finally:
            with self._lock:
                self._observers.remove(observer)


def check_stream(pair: Tuple[str, str], at: str, own: tf.Tensor, received: tf.Tensor,
                 sender: str, x: tf.Tensor) -> tf.Tensor:
    """x, once `at`'s own nonce `own` of the pair's PRG stream equals the nonce
    `received` from `sender`; otherwise the run fails. Use the result in place
    of x. Build it under `at`'s device scope."""
    # A stateless check passing x through (kernels.check_equal), not Assert: Asserts
    # on different servers are chained by tf.function's automatic control
    # dependencies, one network trip per round.
    return kernels.check_equal(
        own, received, x,
        f"tf_privpy: the {pair[0]}-{pair[1]} PRG stream is out of step between "
        f"{at} and {sender} (their nonces differ): an earlier protocol call failed "
        "between the two servers' kernels. Masks would no longer cancel and every "
        "later result would be wrong, so nothing more runs on these keys: call "
        f"tp.init() again for fresh keys. Nonce at {at}, nonce from {sender}:")
