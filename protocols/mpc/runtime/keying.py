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
  keys only. Each server takes the public keys it trusts, and the path of
  its own identity key file, from its own process (`server_held_keys`: a
  function the server registered at start from its own copy of the cluster
  file), never from the driver's graph: TF's control plane is
  unauthenticated, so a value the driver sends could have been replaced.
  A key confirmation follows: each side derives a confirmation
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

import itertools
from typing import Callable, Dict, List, Mapping, Tuple

import numpy as np
import tensorflow as tf

from . import identity, kernels, sealing

Pair = Tuple[str, str]
#: pair -> {party: variable}: one key as held by each of the two servers
KeyVars = Dict[Pair, Dict[str, tf.Variable]]
CONFIRM_INFO = b"tf_privpy/kex/v1 key confirmation"


#: the servers in the order in which a server's key function lists their
#: public keys
SERVERS = ("S1", "S2", "T1", "T2")


def keys_token(party: str) -> str:
    """The py-func token under which the server process of `party` serves
    its identity key file's path and the public keys of its own cluster file
    (register_server_keys); the driver's graph names only the token."""
    if party not in SERVERS:
        raise ValueError(f"no server key function for {party!r}")
    return f"tf_privpy_server_kex_keys_{party}"


def register_server_keys(party: str, key_path: str, publics: Mapping[str, bytes]) -> object:
    """Makes this process answer `server_held_keys(party, ...)`: an
    EagerPyFunc with keys_token(party), run on this process's device, returns
    [key_path (string), the four public keys (uint8[4, 32], SERVERS order)].

    A server process calls it at start with its own identity key file and
    the keys of its own cluster file (tf_privpy/deploy/server.py); the embedded
    tests call it for all four parties. TensorFlow's registry holds weak
    references: keep the returned function alive as long as it should answer.

    Args:
      party: "S1", "S2", "T1" or "T2".
      key_path: this server's identity key file on this machine.
      publics: party -> 32-byte public key, for all four servers.
    """
    from tensorflow.python.ops import script_ops  # TF 2.14's py_func registry
    rows = [identity.parse_public_key_hex(identity.public_key_hex(publics[p]),
                                          f"the public key of {p}") for p in SERVERS]
    table = np.frombuffer(b"".join(rows), np.uint8).reshape(len(SERVERS), identity.KEY_BYTES)

    def held() -> List[tf.Tensor]:
        return [tf.constant(key_path), tf.constant(table)]

    registry = getattr(script_ops, "_py_funcs", None)
    if registry is None or not hasattr(registry, "_funcs"):
        raise RuntimeError("this TensorFlow has no py_func registry where tf_privpy expects "
                           "it (TF 2.14): a server could not serve its identity keys")
    # EagerFunc: the op's kernel takes eager tensors from it, on the op's device
    func = script_ops.EagerFunc(held, [tf.string, tf.uint8], False)
    registry._funcs[keys_token(party)] = func
    return func


def server_held_keys(party: str, device: str) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """(identity key path, {server: public key}) as the server of `party`
    holds them: an op on `device` whose outputs are made in that server's
    process from its own flags and cluster file (register_server_keys), so
    neither comes from the driver. Both stay on `device`."""
    with tf.device(device):
        path, table = tf.raw_ops.EagerPyFunc(input=[], token=keys_token(party),
                                             Tout=[tf.string, tf.uint8])
        path = tf.reshape(path, [])
        table = tf.reshape(table, [len(SERVERS), identity.KEY_BYTES])
        return path, {p: table[i] for i, p in enumerate(SERVERS)}


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


def exchanged_keys(key_sets: Mapping[str, KeyVars], client_trusts: Mapping[str, bytes],
                   devices: Mapping[str, str],
                   send: Callable[[str, str, tf.Tensor], tf.Tensor],
                   client: str = "client") -> None:
    """Distributed mode: every pair of a key set runs the authenticated
    exchange once per set it is in (context = the set's name: "prg", "link")
    and assigns the results to the variables on its two sides; then the key
    confirmation. Raises KeyExchangeError naming the pairs that disagree.

    Each server reads its identity key file and authenticates its peers with
    what its own process holds (server_held_keys: its key path and its own
    cluster file's public keys): the graph the driver sends names no server
    key and no path, so a driver, or anyone on a driver-to-server link, who
    changes the values it sends cannot make a server trust another key. The
    driver's own key pair is fresh for this runtime; the servers take its
    public key from the driver's graph, as nothing could authenticate it.

    Args:
      key_sets: name -> the variables to fill (key_variables); pairs with
        the client get its fresh key pair as their identity.
      client_trusts: server -> 32-byte public key: what the driver
        authenticates the servers with (its own cluster file).
      devices: party -> TF device.
      send: the channel (Channels.send1): carries public values only here.
    """
    names = sorted(key_sets)
    pairs = list(dict.fromkeys(pair for keys in key_sets.values() for pair in keys))
    parties = sorted({p for pair in pairs for p in pair} - {client}, key=SERVERS.index)
    with tf.device(devices[client]):  # the driver's key for this runtime only
        client_private, client_public = kernels.x25519_keypair()
    client_public = client_public.numpy()
    # what the driver authenticates the servers with: its own cluster file
    trusts = {p: np.frombuffer(identity.parse_public_key_hex(
        client_trusts[p].hex(), f"the cluster file's public key of {p}"), np.uint8)
        for p in parties}

    @tf.function(autograph=False)
    def run():
        sides = {}
        with tf.device(devices[client]):
            sides[client] = identity.KexParty(client, devices[client], client_private,
                                              {p: tf.constant(k) for p, k in trusts.items()})
        for p in parties:
            path, trusted = server_held_keys(p, devices[p])
            with tf.device(devices[p]):  # read on the server's own file system
                static = kernels.x25519_read_private_key(path)[0]
                trusted = dict(trusted, **{client: tf.constant(client_public)})
            sides[p] = identity.KexParty(p, devices[p], static, trusted)
        agree = []
        for a, b in pairs:
            derived = {a: [], b: []}
            for name in names:
                if (a, b) not in key_sets[name]:
                    continue  # the driver has link keys, no PRG keys
                ka, kb = identity.pair_key_exchange(sides[a], sides[b], None, send,
                                                    context=name)
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
            f"{sum(suspects[0] in pair for pair in bad)} of the failed pairs), or the servers' "
            "cluster files differ, or a public key was changed in transit. Check that each "
            "server runs with the key file whose public key the cluster file lists, and that "
            "every machine has the same cluster file.", bad)


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

