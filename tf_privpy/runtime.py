"""Starting and stopping tf_privpy: tp.init, tp.reset, tp.servers.

`tp.init()` creates the runtime handle (devices, keys, backend), the one
piece of global state, kept in protocols/mpc/runtime/context.py where the op
implementations read it; `tp.reset()` drops it so tests and notebooks can
start fresh with a new config and new keys. `tp.init(cluster=PATH)` runs the
same protocols on four server processes (tf_privpy/distributed.py).
"""
from __future__ import annotations

import contextlib

from typing import Dict, Iterator, List, Optional

import tensorflow as tf

from tf_privpy import distributed, share_io
from tf_privpy.large import party as large_party
from tf_privpy.large import store_copy
from tf_privpy.protocols import Config
from tf_privpy.protocols.mpc import CLIENT, PARTIES, Runtime, make_backend
from tf_privpy.protocols.mpc.runtime import context
from tf_privpy.protocols.mpc.runtime.context import Handle, RuntimeError_
from tf_privpy.protocols.mpc.runtime.keying import KeyExchangeError

_N_DEVICES = 1 + len(PARTIES)


def _embedded_devices(num_clients: int = 1) -> Dict[str, str]:
    """Splits the host CPU into logical devices: client, S1, S2, T1, T2 and,
    with num_clients > 1, client1 ... client{num_clients-1} (data owners of a
    federated run).

    Logical devices can only be configured before TensorFlow initializes its
    devices; afterwards the existing configuration is reused if it fits.
    """
    n_devices = _N_DEVICES + num_clients - 1
    cpus = tf.config.list_physical_devices("CPU")
    if not cpus:
        raise RuntimeError_("tf_privpy found no CPU device")
    conf = tf.config.get_logical_device_configuration(cpus[0])
    if conf is None or len(conf) < n_devices:
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration()] * n_devices)
        except RuntimeError as e:
            raise RuntimeError_(
                f"tp.init() must split the CPU into {n_devices} logical devices (client, "
                "S1, S2, T1, T2 and the extra clients), but TensorFlow has already "
                "initialized its devices. Call tp.init() before running any TensorFlow "
                "op (right after importing tf_privpy), or in a fresh process.") from e
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) < n_devices:
        raise RuntimeError_(
            f"TensorFlow exposes {len(logical)} logical CPU devices; tf_privpy needs "
            f"{n_devices}. Call tp.init() before running any TensorFlow op.")
    names = [d.name for d in logical[:n_devices]]
    extra = tuple(f"{CLIENT}{i}" for i in range(1, num_clients))
    return dict(zip((CLIENT,) + PARTIES + extra, names))


def init(config: Optional[Config] = None, devices: Optional[Dict[str, str]] = None,
         num_clients: int = 1, cluster: Optional[str] = None,
         timeout: Optional[float] = None, allow_public_address: bool = False,
         share_stores: Optional[Dict[str, str]] = None,
         large_array_dirs: Optional[Dict[str, str]] = None) -> Handle:
    """Starts (or restarts) the tf_privpy runtime.

    In the embedded default it splits the host CPU into logical TF devices for
    the client and the servers S1, S2, T1, T2, draws every pairwise PRG key from
    the OS CSPRNG on its server, and selects the backend. Calling it again
    replaces the runtime (new keys); PrivateTensors of the old one are rejected.

    Args:
      config: a `tp.Config`; default: 128-bit ring, 20 fractional bits, privpy.
      devices: optional explicit map {"client", "S1", "S2", "T1", "T2"} -> TF
        device name (e.g. the tasks of a tf.distribute cluster); extra keys
        "client1", "client2", ... name more data owners' devices.
      num_clients: embedded mode: how many data-owner devices to create
        (federated runs place each client's encryption on its own device).
      cluster: path of a cluster file (docs/distributed.md): connect to four
        tf_privpy servers (`python -m tf_privpy.server`, or all four on this
        machine with `python -m tf_privpy.cluster local`) and run S1, S2, T1,
        T2 there, the client here. Each server must answer as its role and run
        this tf_privpy build, else this raises a ServerError naming it.
      timeout: distributed mode: seconds within which a dead or hung server
        is reported as a ServerError naming it instead of a hang (default:
        the cluster file's timeout_s, 30).
      allow_public_address: distributed mode: accept servers on public
        addresses (TF's gRPC has no TLS; see docs/distributed.md).
      share_stores: embedded mode: {"S1": DIR, "S2": DIR}, the share
        services' store folders that tp.load and tp.publish use on S1 and S2
        (docs/share_service.md). In distributed mode each server names its
        own (python -m tf_privpy.server --share-store DIR).
      large_array_dirs: embedded mode: {"S1": DIR, "S2": DIR}, the two
        folders (neither inside the other) where S1 and S2 keep their shares
        of tp.LargeArray (docs/large_arrays.md). In distributed mode each
        server names its own (python -m tf_privpy.server --large_array_dir DIR).

    Returns:
      The runtime handle (also available as `tp.get_runtime()`).

    Example:
      >>> import tf_privpy as tp
      >>> tp.init()
      >>> tp.servers()["S1"]
      '/job:localhost/replica:0/task:0/device:CPU:1'
      >>> tp.init(cluster="cluster.json")            # a fresh process
      >>> tp.servers()["S1"]
      '/job:s1/replica:0/task:0/device:CPU:0'
    """
    config = config or Config()
    if not isinstance(config, Config):
        raise TypeError(f"config must be a tp.Config, got {type(config).__name__}")
    if not isinstance(num_clients, int) or num_clients < 1:
        raise ValueError(f"num_clients must be an int >= 1, got {num_clients!r}")
    if cluster is not None:
        if config.encrypt_links is False:
            raise ValueError(
                "tp.Config(encrypt_links=False) with a cluster would send shares between "
                "servers in the clear over TensorFlow's gRPC (no TLS): tf_privpy refuses. "
                "Leave encrypt_links at None.")
        if share_stores:
            raise ValueError("tp.init(cluster=...) takes no share_stores: each server uses "
                             "its own (python -m tf_privpy.server --share-store DIR)")
        if large_array_dirs:
            raise ValueError("tp.init(cluster=...) takes no large_array_dirs: S1 and S2 each "
                             "use their own (python -m tf_privpy.server --large_array_dir DIR)")
        if devices is not None or num_clients != 1:
            raise ValueError("tp.init(cluster=...) places the parties itself: give neither "
                             "devices nor num_clients (extra data owners are embedded-only)")
        # Checks come first: a refused cluster file leaves the current runtime as it is.
        devs = distributed.connect(cluster, timeout, allow_public_address)
    elif devices:
        devs = devices
    elif distributed.joined():
        raise RuntimeError_(
            "this process has connected to a tf_privpy cluster, and TensorFlow 2.14 cannot "
            "disconnect it: the embedded mode (tp.init() without cluster) needs a fresh "
            "process. tp.init(cluster=...) can connect again.")
    else:
        devs = _embedded_devices(num_clients)
    server_keys = distributed.server_keys() if cluster is not None else None
    encrypt = cluster is not None if config.encrypt_links is None else config.encrypt_links
    try:
        rt = Runtime(config, devs, server_keys=server_keys, encrypt_links=encrypt)
    except tf.errors.OpError as e:  # distributed: keys are made on the servers
        translated = context.translate_error(e)
        if translated is e:
            raise
        raise translated from e
    except KeyExchangeError as e:
        raise distributed.key_exchange_error(e) from None
    # A driver serves no store of its own: only the embedded mode, which
    # hosts S1's and S2's devices, attaches theirs.
    share_io.attach_embedded(None if cluster is not None else share_stores)
    large_party.attach_embedded(None if cluster is not None else large_array_dirs)
    if cluster is None:  # LargeArray.from_store: each party's store copied to its folder
        store_copy.attach_embedded(share_stores, large_array_dirs)
    return context.set_handle(Handle(rt, make_backend(rt)))


def activate(handle: Handle) -> Handle:
    """Makes an existing embedded runtime handle (from an earlier `tp.init()`)
    the current one again, its tp.stats() counters back to what they were
    right after that `tp.init()` (the key set-up's traffic): a test
    session starts each runtime once and reuses it across cases instead of
    making new keys per case (tests/conftest.py's `case` fixture).

    Its keys and nonce counters carry on (a (key, nonce) pair is never used
    twice); PrivateTensors of the runtime current before are rejected, as
    after `tp.init()`. Not for the distributed mode: a process connected to
    a cluster runs `tp.init(cluster=...)` instead.

    Args:
      handle: a runtime handle `tp.init()` returned (or `tp.get_runtime()`).

    Returns:
      `handle`, now current.
    """
    if not isinstance(handle, Handle):
        raise TypeError(f"activate takes a runtime handle from tp.init(), got "
                        f"{type(handle).__name__}")
    if distributed.joined():
        raise RuntimeError_(
            "activate() switches between embedded runtimes, but this process has connected "
            "to a tf_privpy cluster: call tp.init(cluster=...) again instead.")
    handle.runtime.reset_counters()
    # The runtimes activate() switches between are made without share stores
    # (a store is the folder of one tp.init call): none stays attached.
    share_io.attach_embedded(None)
    large_party.attach_embedded(None)
    return context.set_handle(handle)


@contextlib.contextmanager
def comparison(family: str) -> Iterator[None]:
    """Comparisons built inside run as `family`: "garbled" (PrivPy's garbled
    comparator: 2 rounds, about 4 KB per comparison) or "bitwise" (boolean
    shares, a carry tree with triples dealt by T1: 8 rounds, about 100
    bytes), whatever `tp.Config(comparison=...)` chose. It covers every
    comparison built inside (less, ReLU, max, argmax, sort, where's
    condition...); inside a tf.function it applies while the function is
    traced. docs/comparisons.md says which is faster where.

    Example:
      >>> with tp.comparison("bitwise"):
      ...     y = tp.nn.relu(x)
    """
    backend = get_runtime().backend
    if not hasattr(backend, "comparison"):
        raise ValueError(f"the {backend.name} backend has no comparison protocols to choose "
                         "from: tp.comparison belongs to the privpy backend")
    with backend.comparison(family):
        yield


def reset_stats() -> None:
    """Sets the current runtime's tp.stats() counters (messages and bytes per
    link, rounds, multiplications, comparisons) back to what they were right
    after `tp.init()`; keys and nonce counters carry on."""
    get_runtime().runtime.reset_counters()


def reset() -> None:
    """Drops the runtime handle (keys, counters). The logical devices stay, as
    TensorFlow cannot change them once initialized; the next `tp.init()` reuses
    them with a fresh runtime. A process connected to a cluster stays
    connected (TensorFlow 2.14 cannot undo it): it can `tp.init(cluster=...)`
    again, but the embedded mode needs a fresh process."""
    context.clear()
    distributed.disconnect()


def get_runtime() -> Handle:
    """The current runtime handle; raises if `tp.init()` was not called."""
    return context.get_handle()


def is_initialized() -> bool:
    """Whether `tp.init()` was called (and `tp.reset()` not since)."""
    return context.is_initialized()


def check_servers(timeout: Optional[float] = None) -> Dict[str, str]:
    """Distributed mode: {party: address} if the four servers answer as
    themselves and none restarted since tp.init(); else a ServerError naming
    them (see tf_privpy/distributed.py)."""
    return distributed.check_servers(timeout)


def servers() -> Dict[str, str]:
    """TF device names of the client and the four servers.

    Example:
      >>> sorted(tp.servers())
      ['S1', 'S2', 'T1', 'T2', 'client']
    """
    return dict(get_runtime().runtime.devices)


def client_devices() -> List[str]:
    """TF device names of the data owners: "client", then "client1", ...

    Example:
      >>> tp.init(num_clients=3)
      >>> len(tp.client_devices())
      3
    """
    devs = get_runtime().runtime.devices
    extra = sorted((k for k in devs if k.startswith(CLIENT) and k[len(CLIENT):].isdigit()),
                   key=lambda k: int(k[len(CLIENT):]))
    return [devs[CLIENT]] + [devs[k] for k in extra]
