"""How a runtime's pair keys are made (DESIGN §4, issue 11).

Each pair of servers holds two 128-bit keys: the PRG key of their correlated
randomness, and the link key under which their channel messages are sealed
(sealing.py). Both live in variables on each of the two servers.

- Embedded mode (`random_keys`): one server of the pair draws each key from
  its OS CSPRNG and hands it to the other in one setup message. All devices
  are in one process, so nothing better is possible or needed.
- Distributed mode (`exchanged_keys`): the pair makes them, by the
  authenticated X25519 exchange of identity.py, as ops on the two servers
  from the identity keys named in the cluster file; the driver sees public
  keys only. A key confirmation follows: each side derives a confirmation
  value from its keys (HKDF-SHA256, one-way), one side sends its value to the
  other, which compares and tells the driver only whether they agree. They
  disagree exactly when a server does not hold the identity private key the
  cluster file names for it, or a public key was substituted in transit.
  The driver's own links to the servers are keyed the same way, with a key
  pair the driver draws afresh for each runtime in place of an identity key:
  a server is authenticated to the driver (like Noise NK), the driver to no
  one (it has no long-term identity; anyone who can reach the servers' ports
  can act as a driver, which the firewall must prevent: docs/distributed.md).

Everything runs as one tf.function, so the exchange of all six pairs costs
one graph run, not a few hundred remote eager ops.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Dict, List, Mapping, Tuple

import tensorflow as tf

from . import identity, kernels, sealing

Pair = Tuple[str, str]
#: pair -> {party: variable}: one key as held by each of the two servers
KeyVars = Dict[Pair, Dict[str, tf.Variable]]
CONFIRM_INFO = b"tf_privpy/kex/v1 key confirmation"


@dataclasses.dataclass(frozen=True)
class ServerKey:
    """A server's identity key as the driver knows it.

    Attributes:
      path: the private key file on the server's own file system (the server
        reports it; an op on the server reads it there).
      public: its 32-byte X25519 public key, as named in the cluster file.
    """

    path: str
    public: bytes


class KeyExchangeError(RuntimeError):
    """A pair's exchanged keys do not agree.

    Attributes:
      pairs: the (a, b) pairs whose keys differ.
    """

    def __init__(self, message: str, pairs: List[Pair]):
        super().__init__(message)
        self.pairs = pairs


def key_variables(parties, devices: Mapping[str, str], what: str) -> KeyVars:
    """Zeroed int64[2] key variables, one per pair of `parties` and per side;
    create them eagerly (tf.init_scope)."""
    out: KeyVars = {}
    for a, b in itertools.combinations(parties, 2):
        out[(a, b)] = {}
        for p in (a, b):
            with tf.device(devices[p]):
                out[(a, b)][p] = tf.Variable(tf.zeros([2], tf.int64), trainable=False,
                                             name=f"tp_{what}_key_{a}{b}_at_{p}")
    return out


def random_keys(keys: KeyVars, devices: Mapping[str, str],
                send: Callable[[str, str, tf.Tensor], tf.Tensor]) -> None:
    """Embedded mode: a draws each a-b key, b receives it once. Eagerly."""
    for (a, b), held in keys.items():
        with tf.device(devices[a]):
            held[a].assign(kernels.random_key())
            value = held[a].read_value()
        at_b = send(a, b, value)
        with tf.device(devices[b]):
            held[b].assign(at_b)


def _confirmation(keys: List[tf.Tensor]) -> tf.Tensor:
    ikm = tf.reshape(tf.bitcast(tf.concat(keys, 0), tf.uint8), [-1])
    return kernels.hkdf_sha256(ikm, b"", CONFIRM_INFO, 16)


def exchanged_keys(key_sets: Mapping[str, KeyVars], server_keys: Mapping[str, ServerKey],
                   devices: Mapping[str, str],
                   send: Callable[[str, str, tf.Tensor], tf.Tensor],
                   client: str = "client") -> None:
    """Distributed mode: every pair of a key set runs the authenticated
    exchange once per set it is in (context = the set's name: "prg", "link")
    and assigns the results to the variables on its two sides; then the key
    confirmation. Raises KeyExchangeError naming the pairs that disagree.

    Args:
      key_sets: name -> the variables to fill (key_variables); pairs with
        the client get its fresh key pair as their identity.
      server_keys: party -> its identity key (cluster file + server report).
      devices: party -> TF device.
      send: the channel (Channels.send1): carries public values only here.
    """
    names = sorted(key_sets)
    pairs = list(dict.fromkeys(pair for keys in key_sets.values() for pair in keys))
    publics = {p: k.public for p, k in server_keys.items()}
    with tf.device(devices[client]):  # the driver's key for this runtime only
        client_private, client_public = kernels.x25519_keypair()
    publics[client] = client_public.numpy().tobytes()

    @tf.function(autograph=False)
    def run():
        statics = {client: client_private}
        for p, k in server_keys.items():
            with tf.device(devices[p]):  # read on the server's own file system
                statics[p] = kernels.x25519_read_private_key(tf.constant(k.path))[0]
        agree = []
        for a, b in pairs:
            sides = (identity.KexParty(a, devices[a], statics[a]),
                     identity.KexParty(b, devices[b], statics[b]))
            derived = {a: [], b: []}
            for name in names:
                if (a, b) not in key_sets[name]:
                    continue  # the driver has link keys, no PRG keys
                ka, kb = identity.pair_key_exchange(*sides, publics, send, context=name)
                for p, k in ((a, ka), (b, kb)):
                    with tf.device(devices[p]):
                        key_sets[name][(a, b)][p].assign(k)
                    derived[p].append(k)
            with tf.device(devices[a]):
                confirm_a = _confirmation(derived[a])
            confirm_a_at_b = send(a, b, confirm_a)
            with tf.device(devices[b]):
                same = tf.reduce_all(tf.equal(_confirmation(derived[b]), confirm_a_at_b))
            agree.append(send(b, client, same))  # b is a server: client pairs start with it
        with tf.device(devices[client]):
            return tf.stack(agree)

    agree = run().numpy()
    bad = [pair for pair, ok in zip(pairs, agree) if not ok]
    if bad:
        listed = ", ".join(f"{a}-{b}" for a, b in bad)
        suspects = sorted(set(p for pair in bad for p in pair),
                          key=lambda p: -sum(p in pair for pair in bad))
        raise KeyExchangeError(
            f"the authenticated key exchange failed between {listed}: the two sides derived "
            f"different keys, so one of them does not hold the identity private key that the "
            f"cluster file names for it (most likely {suspects[0]}, which is in "
            f"{sum(suspects[0] in pair for pair in bad)} of the failed pairs), or a public key "
            "was changed in transit. Check that each server runs with the key file whose "
            "public key the cluster file lists.", bad)


def links(link_keys: KeyVars, devices: Mapping[str, str]) -> List[sealing.Link]:
    """The sealed links of every ordered pair of servers, with fresh counters
    (create eagerly)."""
    out = []
    for (a, b), held in link_keys.items():
        for src, dst in ((a, b), (b, a)):
            name = f"{src}->{dst}"
            with tf.device(devices[src]):
                counter = tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                      name=f"tp_link_counter_{src}_to_{dst}")
            with tf.device(devices[dst]):
                state = tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                    name=f"tp_link_state_{src}_to_{dst}")
            out.append(sealing.Link(name, held[src], held[dst], counter, state))
    return out

