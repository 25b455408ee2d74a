"""The four-server runtime: devices, pairwise PRG keys, nonce counters, channels.

A Runtime owns, for every pair of servers, a 128-bit AES key held by both
(made as keying.py describes: drawn by one of them in the embedded mode,
exchanged by the pair in the distributed mode), and on each of
the two servers a nonce counter that lives in TF state (a resource variable
advanced in the graph). Each protocol call takes a fresh nonce from those
counters, so re-running an op, eagerly or as the same tf.function, never
reuses a (key, nonce) pair (DESIGN §4). A Python-side counter would be frozen
into a traced function.

Every tensor that crosses from one party to another goes through the
runtime's channels (channel.py), the single place where traffic happens and
is counted; protocol counters (rounds, multiplications, comparisons) live in
TF state beside them, so `tp.stats()` reports any run, traced or eager.
"""
from __future__ import annotations

import contextlib
import itertools
import weakref
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from . import kernels, keying
from . import shares as sh
from ...config import Config
from ...loader import load_library
from .channel import Channels, check_stream
from .devscope import device_scope

PARTIES = ("S1", "S2", "T1", "T2")
CLIENT = "client"
_ids = itertools.count(1)

#: protocol counters, in this order, in one int64 variable on S1
PROTOCOL_COUNTERS = ("rounds", "multiplications", "comparisons")


class Runtime:
    """Devices, keys and counters of one tf_privpy session.

    Args:
      config: the Config (ring, encoding, backend).
      devices: maps "client", "S1", "S2", "T1", "T2" to TF device names.
      server_keys: distributed mode: server -> the 32-byte identity public
        key the driver authenticates it with (the driver's cluster file);
        the pairs then exchange their keys (keying.exchanged_keys), each
        server using the keys its own process holds. None: embedded keys.
      encrypt_links: seal every channel message (keying.links).
    """

    def __init__(self, config: Config, devices: Dict[str, str],
                 server_keys: Optional[Mapping[str, bytes]] = None,
                 encrypt_links: bool = False):
        check_devices(devices)
        self.config = config
        self.devices = dict(devices)
        self.id = next(_ids)
        self._counters: Dict[Tuple[str, str], Dict[str, tf.Variable]] = {}
        #: `constant`'s cache per graph, gone with the graph
        self._graph_constants: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        load_library()
        # Channels between the client and the four servers; an extra data
        # owner (client1, ...) of a federated run shares its update to S1
        # and S2 and may receive the aggregate's shares back from them
        # (converters/federated.py), so it has those four channels only.
        core = (CLIENT,) + PARTIES
        extra = extra_clients(self.devices)
        pairs = list(itertools.permutations(core, 2)) + [
            pair for c in extra for h in ("S1", "S2") for pair in ((c, h), (h, c))]
        self.channels = Channels({p: self.devices[p] for p in core + extra}, pairs)
        with tf.init_scope():  # variables and keys are created eagerly, once
            with device_scope(self.devices["S1"]):
                self._protocol_counters = tf.Variable(
                    tf.zeros([len(PROTOCOL_COUNTERS)], tf.int64), trainable=False,
                    name="tp_protocol_counters")
            key_sets = {"prg": keying.key_variables(PARTIES, self.devices, "prg")}
            if encrypt_links:
                key_sets["link"] = keying.key_variables((CLIENT,) + PARTIES, self.devices,
                                                        "link")
            if server_keys is None:
                for keys in key_sets.values():
                    keying.random_keys(keys, self.devices, self.channels.send1)
            else:
                keying.exchanged_keys(key_sets, server_keys, self.devices,
                                      self.channels.send1, CLIENT)
            self._keys = key_sets["prg"]
            for a, b in self._keys:
                self._counters[(a, b)] = {}
                for p in (a, b):
                    with device_scope(self.devices[p]):
                        self._counters[(a, b)][p] = tf.Variable(
                            tf.constant(0, tf.int64), trainable=False,
                            name=f"tp_nonce_{a}{b}_at_{p}")
            for link in keying.links(key_sets.get("link", {}), self.devices):
                self.channels.secure(link)
        # what the key set-up sent: tp.stats() of a fresh runtime, restored
        # by reset_counters
        self._setup_counts = self.channels.counts()

    # ------------------------------------------------------------ devices
    def device(self, party: str) -> str:
        return self.devices[party]

    def constant(self, party: str, value, dtype=tf.int64) -> tf.Tensor:
        """A public constant on `party`, made once per graph being built
        (tracing costs per op; protocols ask for the same shapes and empty
        operands call after call). Shared safely: a Const has no inputs and
        no state, and it is made without the caller's control dependencies,
        so reusing it orders nothing. The cache lives on the graph (each
        tf.function trace, loop body and branch has its own), keyed by
        device, dtype and value; eagerly it is a plain constant."""
        device = self.devices[party]
        if tf.executing_eagerly():
            with device_scope(device):
                return tf.constant(value, dtype)
        graph = tf.compat.v1.get_default_graph()
        cache = self._graph_constants.setdefault(graph, {})
        a = np.asarray(value, dtype.as_numpy_dtype)
        key = (device, dtype, a.shape, a.tobytes())
        c = cache.get(key)
        if c is None:
            with tf.control_dependencies(None), device_scope(device):
                c = cache[key] = tf.constant(a, dtype)
        return c

    # --------------------------------------------------------------- keys
    @staticmethod
    def _pair(a: str, b: str) -> Tuple[str, str]:
        if a == b or a not in PARTIES or b not in PARTIES:
            raise ValueError(f"no PRG key between {a!r} and {b!r}")
        return (a, b) if PARTIES.index(a) < PARTIES.index(b) else (b, a)

    def key(self, a: str, b: str, at: str) -> tf.Tensor:
        """The a-b pair key as held by party `at` (one of a, b)."""
        v = self._keys[self._pair(a, b)][at]
        with device_scope(self.devices[at]):
            return v.read_value()

    def nonce(self, a: str, b: str, at: str) -> tf.Tensor:
        """Takes the next nonce of the a-b stream on party `at`.

        Both parties of a pair advance their own counter once per protocol
        call, so they agree without a message.
        """
        return self.key_material(a, b, at)[1]

    def key_material(self, a: str, b: str, at: str) -> Tuple[tf.Tensor, tf.Tensor]:
        """(key, fresh nonce) of the a-b stream on party `at`, in one op."""
        pair = self._pair(a, b)
        with device_scope(self.devices[at]):
            return kernels.stream_next(self._keys[pair][at], self._counters[pair][at])

    def key_materials(self, at: str, pairs: Sequence[Tuple[str, str]]
                      ) -> List[Tuple[tf.Tensor, tf.Tensor]]:
        """(key, fresh nonce) of each a-b stream of `pairs` on party `at`,
        all in one op (a protocol call takes several streams per party)."""
        if len(pairs) == 1:
            return [self.key_material(pairs[0][0], pairs[0][1], at)]
        ps = [self._pair(a, b) for a, b in pairs]
        with device_scope(self.devices[at]):
            return kernels.stream_next_many([self._keys[p][at] for p in ps],
                                            [self._counters[p][at] for p in ps])

    # ------------------------------------------------------------ traffic
    def send(self, src: str, dst: str, *payload: tf.Tensor,
             headers: Sequence[tf.Tensor] = ()) -> Tuple[List[tf.Tensor], List[tf.Tensor]]:
        """Moves payload (and headers) from party src to party dst as one
        message through their channel; returns them placed on dst."""
        return self.channels.send(src, dst, *payload, headers=headers)

    def send1(self, src: str, dst: str, x: tf.Tensor) -> tf.Tensor:
        """One tensor from src to dst, no header."""
        return self.channels.send1(src, dst, x)

    def check_stream(self, a: str, b: str, at: str, own_nonce: tf.Tensor,
                     received_nonce: tf.Tensor, sender: str, x: tf.Tensor) -> tf.Tensor:
        """x, checked on party `at`: its nonce of the a-b stream must equal the
        one `sender` put in a message header (channel.check_stream)."""
        with device_scope(self.devices[at]):
            return check_stream(self._pair(a, b), at, own_nonce, received_nonce, sender, x)

    def count(self, rounds=0, multiplications=0, comparisons=0) -> None:
        """Advances the protocol counters in TF state (on S1, which takes part
        in every protocol); arguments may be ints or int64 tensors on S1."""
        values = (rounds, multiplications, comparisons)
        static = [tf.get_static_value(v) if tf.is_tensor(v) else v for v in values]
        if all(v is not None for v in static) and self.channels.add_at_end(
                self._protocol_counters, self.devices["S1"], static):
            return   # once for the whole graph, as its messages (Channels.counted_at_end)
        with device_scope(self.devices["S1"]):
            if all(v is not None for v in static):
                # known while tracing (the usual case): one constant, so a
                # protocol call is counted by two graph ops, not six
                delta = tf.constant([int(v) for v in static], tf.int64)
            else:
                delta = sh.pack([tf.cast(v, tf.int64) for v in values])  # see sh.pack
            self._protocol_counters.assign_add(delta, read_value=False)

    def protocol_counts(self) -> Dict[str, int]:
        """{"rounds", "multiplications", "comparisons"} so far, read eagerly."""
        with tf.init_scope():
            return dict(zip(PROTOCOL_COUNTERS,
                            (int(v) for v in self._protocol_counters.numpy())))

    def reset_counters(self) -> None:
        """Sets what tp.stats() reports back to what it was right after this
        runtime was made (the key set-up's messages, no protocol counts), so
        a runtime reused for another run (tf_privpy.runtime.activate) looks
        fresh. The nonce counters are NOT reset: a (key, nonce) pair is never
        used twice (DESIGN §4), so they only ever advance.

        Raises RuntimeError if an observe() or intercept() block is still open
        on the channels: its hook would follow the runtime into the next run."""
        if self.channels.hooked():
            raise RuntimeError(
                "an observe() or intercept() block is still open on this runtime's channels: "
                "close it before reusing the runtime")
        if not self.streams_in_step():
            raise RuntimeError(
                "this runtime's PRG streams are out of step (one end of a pair advanced "
                "alone): it cannot run protocols any more; tp.init() a new one")
        self.channels.restore_counts(self._setup_counts)
        with tf.init_scope():
            self._protocol_counters.assign(tf.zeros_like(self._protocol_counters))

    def streams_in_step(self) -> bool:
        """Whether both ends of every pair's PRG stream have taken as many
        nonces (read eagerly): a protocol call on a pair out of step fails."""
        with tf.init_scope():
            return all(len({int(v.numpy()) for v in per.values()}) == 1
                       for per in self._counters.values())

    @contextlib.contextmanager
    def observe(self, observer: Callable[[str, str, tf.Tensor], None]):
        """Calls observer(src, dst, tensor) for every payload tensor that a
        channel delivers while active (the copy on the receiver)."""
        def each(src, dst, tensors):
            for t in tensors:
                observer(src, dst, t)
        with self.channels.observe(each):
            yield


def extra_clients(devices: Mapping[str, str]) -> Tuple[str, ...]:
    """The extra data owners of `devices` ("client1", "client2", ...), in order."""
    return tuple(sorted((k for k in devices if k.startswith(CLIENT) and k[len(CLIENT):].isdigit()),
                        key=lambda k: int(k[len(CLIENT):])))


def check_devices(devices: Dict[str, str]) -> None:
    """Each party needs its own device, and no server may share the client's:
    two parties on one device would see each other's secrets (DESIGN §1)."""
    missing = [p for p in (CLIENT,) + PARTIES if p not in devices]
    if missing:
        raise ValueError(f"devices lacks {missing}; it needs client, S1, S2, T1, T2")
    seen: Dict[str, str] = {}
    for party, name in devices.items():
        try:
            spec = canonical_device(name)
        except ValueError as e:
            raise ValueError(f"device {name!r} of {party} is not a TF device name") from e
        if spec in seen:
            raise ValueError(
                f"{seen[spec]} and {party} are both placed on {name}: every party needs a "
                "device of its own (a server on the client's device, or two servers on one "
                "device, would hold each other's secrets). Give each a distinct device.")
        seen[spec] = party


def canonical_device(device: str) -> tuple:
    """A device name with a local process's defaults filled in, so that
    '/device:CPU:1' and '/job:localhost/replica:0/task:0/device:CPU:1' match."""
    d = tf.DeviceSpec.from_string(device)
    return (d.job or "localhost", d.replica or 0, d.task or 0, d.device_type, d.device_index)
