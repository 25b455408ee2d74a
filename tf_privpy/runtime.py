"""The runtime handle: the one piece of global state in tf_privpy.

`tp.init()` creates it (devices, keys, backend); `tp.reset()` drops it so
tests and notebooks can start fresh with a new config and new keys.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Dict, Optional

import tensorflow as tf

from tf_privpy.protocols import CLIENT, PARTIES, Backend, Config, Runtime, make_backend

_N_DEVICES = 1 + len(PARTIES)
_lock = threading.Lock()
_handle: Optional["Handle"] = None


class RuntimeError_(RuntimeError):
    """Raised for runtime set-up and misuse errors."""


@dataclasses.dataclass(frozen=True)
class Handle:
    runtime: Runtime
    backend: Backend

    @property
    def config(self) -> Config:
        return self.runtime.config


def _embedded_devices() -> Dict[str, str]:
    """Splits the host CPU into 5 logical devices: client, S1, S2, T1, T2.

    Logical devices can only be configured before TensorFlow initializes its
    devices; afterwards the existing configuration is reused if it fits.
    """
    cpus = tf.config.list_physical_devices("CPU")
    if not cpus:
        raise RuntimeError_("tf_privpy found no CPU device")
    conf = tf.config.get_logical_device_configuration(cpus[0])
    if conf is None or len(conf) < _N_DEVICES:
        try:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration()] * _N_DEVICES)
        except RuntimeError as e:
            raise RuntimeError_(
                "tp.init() must split the CPU into 5 logical devices (client, S1, S2, "
                "T1, T2), but TensorFlow has already initialized its devices. Call "
                "tp.init() before running any TensorFlow op (right after importing "
                "tf_privpy), or in a fresh process.") from e
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) < _N_DEVICES:
        raise RuntimeError_(
            f"TensorFlow exposes {len(logical)} logical CPU devices; tf_privpy needs "
            f"{_N_DEVICES}. Call tp.init() before running any TensorFlow op.")
    names = [d.name for d in logical[:_N_DEVICES]]
    return dict(zip((CLIENT,) + PARTIES, names))


def init(config: Optional[Config] = None, devices: Optional[Dict[str, str]] = None) -> Handle:
    """Starts (or restarts) the tf_privpy runtime.

    In the embedded default it splits the host CPU into logical TF devices for
    the client and the servers S1, S2, T1, T2, draws every pairwise PRG key from
    the OS CSPRNG on its server, and selects the backend. Calling it again
    replaces the runtime (new keys); PrivateTensors of the old one are rejected.

    Args:
      config: a `tp.Config`; default: 128-bit ring, 20 fractional bits, privpy.
      devices: optional explicit map {"client", "S1", "S2", "T1", "T2"} -> TF
        device name (e.g. the tasks of a tf.distribute cluster).

    Returns:
      The runtime handle (also available as `tp.get_runtime()`).

    Example:
      >>> import tf_privpy as tp
      >>> tp.init()
      >>> tp.servers()["S1"]
      '/job:localhost/replica:0/task:0/device:CPU:1'
    """
    global _handle
    config = config or Config()
    if not isinstance(config, Config):
        raise TypeError(f"config must be a tp.Config, got {type(config).__name__}")
    devs = devices or _embedded_devices()
    with _lock:
        rt = Runtime(config, devs)
        _handle = Handle(rt, make_backend(rt))
        return _handle


def reset() -> None:
    """Drops the runtime handle (keys, counters). The logical devices stay, as
    TensorFlow cannot change them once initialized; the next `tp.init()` reuses
    them with a fresh runtime."""
    global _handle
    with _lock:
        _handle = None


def get_runtime() -> Handle:
    """The current runtime handle; raises if `tp.init()` was not called."""
    h = _handle
    if h is None:
        raise RuntimeError_("tf_privpy is not initialized: call tp.init() first "
                            "(before any other TensorFlow op).")
    return h


def is_initialized() -> bool:
    return _handle is not None


def servers() -> Dict[str, str]:
    """TF device names of the client and the four servers.

    Example:
      >>> sorted(tp.servers())
      ['S1', 'S2', 'T1', 'T2', 'client']
    """
    return dict(get_runtime().runtime.devices)
