"""The four-server runtime: devices, pairwise PRG keys and nonce counters.

A Runtime owns, for every pair of servers, a 128-bit AES key drawn from the
OS CSPRNG on one server of the pair at setup and held by both, and on each of
the two servers a nonce counter that lives in TF state (a resource variable
advanced in the graph). Each protocol call takes a fresh nonce from those
counters, so re-running an op, eagerly or as the same tf.function, never
reuses a (key, nonce) pair (DESIGN §4). A Python-side counter would be frozen
into a traced function.

Every tensor that crosses from one party to another goes through
`Runtime.send`, the single place where traffic happens: it places the copy on
the receiver and lets observers (tests, profiling) see what each party gets.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from . import kernels
from ..loader import load_library
from ..config import Config

PARTIES = ("S1", "S2", "T1", "T2")
CLIENT = "client"
_ids = itertools.count(1)


@dataclasses.dataclass
class LinkStats:
    """Traffic counted when protocol code is run (eagerly) or traced."""

    messages: int = 0
    bytes: int = 0


Observer = Callable[[str, str, tf.Tensor], None]


class Runtime:
    """Devices, keys and counters of one tf_privpy session.

    Args:
      config: the Config (ring, encoding, backend).
      devices: maps "client", "S1", "S2", "T1", "T2" to TF device names.
    """

    def __init__(self, config: Config, devices: Dict[str, str]):
        missing = [p for p in (CLIENT,) + PARTIES if p not in devices]
        if missing:
            raise ValueError(f"devices lacks {missing}; it needs client, S1, S2, T1, T2")
        self.config = config
        self.devices = dict(devices)
        self.id = next(_ids)
        self._lock = threading.Lock()
        self._observers: List[Observer] = []
        self.stats: Dict[Tuple[str, str], LinkStats] = {}
        self._keys: Dict[Tuple[str, str], Dict[str, tf.Variable]] = {}
        self._counters: Dict[Tuple[str, str], Dict[str, tf.Variable]] = {}
        load_library()
        with tf.init_scope():  # variables and keys are created eagerly, once
            for a, b in itertools.combinations(PARTIES, 2):
                with tf.device(self.devices[a]):
                    # Drawn by server a's OS CSPRNG; b receives it once at setup.
                    key_a = tf.Variable(kernels.random_key(), trainable=False,
                                        name=f"tp_key_{a}{b}_at_{a}")
                    ctr_a = tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                        name=f"tp_nonce_{a}{b}_at_{a}")
                with tf.device(self.devices[b]):
                    key_b = tf.Variable(tf.identity(key_a.read_value()), trainable=False,
                                        name=f"tp_key_{a}{b}_at_{b}")
                    ctr_b = tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                        name=f"tp_nonce_{a}{b}_at_{b}")
                self._keys[(a, b)] = {a: key_a, b: key_b}
                self._counters[(a, b)] = {a: ctr_a, b: ctr_b}

    # ------------------------------------------------------------ devices
    def device(self, party: str) -> str:
        return self.devices[party]

    # --------------------------------------------------------------- keys
    @staticmethod
    def _pair(a: str, b: str) -> Tuple[str, str]:
        if a == b or a not in PARTIES or b not in PARTIES:
            raise ValueError(f"no PRG key between {a!r} and {b!r}")
        return (a, b) if PARTIES.index(a) < PARTIES.index(b) else (b, a)

    def key(self, a: str, b: str, at: str) -> tf.Tensor:
        """The a-b pair key as held by party `at` (one of a, b)."""
        v = self._keys[self._pair(a, b)][at]
        with tf.device(self.devices[at]):
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
        with tf.device(self.devices[at]):
            return kernels.stream_next(self._keys[pair][at], self._counters[pair][at])

    # ------------------------------------------------------------ traffic
    def send(self, x: tf.Tensor, src: str, dst: str) -> tf.Tensor:
        """Moves x from party src to party dst; the only place traffic happens.

        The copy itself is TensorFlow's: the receiver's kernel runs under its
        device scope and TF inserts the Send/Recv pair (in memory when
        embedded, over gRPC between tasks), so no extra op is built here.
        """
        y = x
        n = x.shape.num_elements()
        with self._lock:
            st = self.stats.setdefault((src, dst), LinkStats())
            st.messages += 1
            st.bytes += (n or 0) * x.dtype.size
            observers = list(self._observers)
        for obs in observers:
            obs(src, dst, y)
        return y

    @contextlib.contextmanager
    def observe(self, observer: Observer):
        """Calls observer(src, dst, tensor) for every message while active."""
        with self._lock:
            self._observers.append(observer)
        try:
            yield
        finally:
            with self._lock:
                self._observers.remove(observer)

    def reset_stats(self) -> None:
        with self._lock:
            self.stats.clear()
