"""The runtime handle: the one piece of global state of tf_privpy.

`tp.init()` (tf_privpy/runtime.py) builds a Runtime and a Backend and stores
them here; `tp.reset()` drops them. The op implementations below the API
(ops/, registry.py) read the handle from here, so that they need nothing
from the API layer.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Optional

from ...config import Config
from .runtime import Runtime

_lock = threading.Lock()
_handle: Optional["Handle"] = None
# Set by the API layer in distributed mode (tf_privpy/distributed.py): turns a
# TF error into one naming the server at fault. The protocol layer knows no
# cluster; it only offers the hook (DESIGN §2: dependencies point down).
_translator: Optional[Callable[[BaseException], BaseException]] = None


class RuntimeError_(RuntimeError):
    """Raised for runtime set-up and misuse errors."""


@dataclasses.dataclass(frozen=True)
class Handle:
    """A started runtime: its devices and keys, and the backend running on it."""

    runtime: Runtime
    #: the protocol family's Backend (protocols/mpc/privpy/backend.py): typed
    #: Any so that the runtime room needs nothing from a family above it
    backend: Any

    @property
    def config(self) -> Config:
        return self.runtime.config


def set_handle(handle: Handle) -> Handle:
    """Makes `handle` the current runtime (tp.init)."""
    global _handle
    with _lock:
        _handle = handle
    return handle


def clear() -> None:
    """Drops the current runtime (tp.reset)."""
    global _handle
    with _lock:
        _handle = None


def get_handle() -> Handle:
    """The current runtime handle; raises if `tp.init()` was not called."""
    h = _handle
    if h is None:
        raise RuntimeError_("tf_privpy is not initialized: call tp.init() first "
                            "(before any other TensorFlow op).")
    return h


def is_initialized() -> bool:
    return _handle is not None


def set_error_translator(fn: Optional[Callable[[BaseException], BaseException]]) -> None:
    """Installs (or with None removes) the function every tp op passes its
    TensorFlow errors through (registry.accepting_variables)."""
    global _translator
    _translator = fn


def translate_error(error: BaseException) -> BaseException:
    """The error a tp op should raise for `error`: the translator's, if one is
    installed, else `error` itself."""
    fn = _translator
    return error if fn is None else fn(error)
