"""The one loader of the op library, shared by protocols/mpc and protocols/he.

Each half wraps its kernels in its own `kernels` module (mpc/kernels.py,
he/kernels.py); every protocol calls kernels through those, never through the
generated op module. The library is loaded once, on first use; if it is missing or was
built for another TensorFlow, this raises with the command that rebuilds it.
There is no fallback: a privacy library that silently swapped its kernels for
something else would silently weaken its guarantees.
"""
from __future__ import annotations

import json
import os
import threading

import tensorflow as tf

from . import op_builder

LIB_NAME = "_tf_privpy_ops.so"
# The range of TensorFlow versions the library is built for (setup.py).
TF_MIN, TF_MAX = (2, 14, 0), (2, 15, 0)
_REBUILD = ("Rebuild it against the TensorFlow you run: `make build` in a source "
            "checkout (python setup.py build_ext --inplace), or "
            "`pip install --no-build-isolation --force-reinstall .`.")

_lock = threading.Lock()
_lib = None
_graph_ops = None   # op_builder.GraphOps over _lib


class OpLibraryError(ImportError):
    """The op library is missing, or was built for another TensorFlow."""


def _package_dir() -> str:
    # protocols/ is installed as tf_privpy.protocols; in a source tree it sits
    # beside tf_privpy/. The library is built into tf_privpy/ in both cases.
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(here)
    if os.path.basename(parent) == "tf_privpy":  # installed layout
        return parent
    return os.path.join(parent, "tf_privpy")  # source tree


def _version_tuple(v: str) -> tuple:
    parts = []
    for p in v.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def library_path() -> str:
    return os.environ.get("TF_PRIVPY_OPS_LIBRARY") or os.path.join(_package_dir(), LIB_NAME)


def load_library():
    """Loads the op library once (thread-safe) and returns its op module."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tf_ver = tf.__version__
        if "dev" in tf_ver or not (TF_MIN <= _version_tuple(tf_ver) < TF_MAX):
            raise OpLibraryError(
                f"tf_privpy's kernels need TensorFlow >=2.14.0,<2.15.0; this is "
                f"TensorFlow {tf_ver}. Install tensorflow==2.14.1 and rebuild. " + _REBUILD)
        path = library_path()
        if not os.path.exists(path):
            raise OpLibraryError(f"tf_privpy's op library {path} does not exist. " + _REBUILD)
        info_path = os.path.join(os.path.dirname(path), "_build_info.json")
        if os.path.exists(info_path):
            with open(info_path) as f:
                built_for = json.load(f).get("tf_version")
            if built_for and built_for != tf_ver:
                raise OpLibraryError(
                    f"{path} was built for TensorFlow {built_for}, but TensorFlow {tf_ver} "
                    "is running. " + _REBUILD)
        try:
            _lib = tf.load_op_library(path)
        except tf.errors.NotFoundError as e:
            raise OpLibraryError(
                f"TensorFlow {tf_ver} could not load {path} ({e}). The library was "
                "probably built for another TensorFlow or with other compiler flags. "
                + _REBUILD) from e
        return _lib


def ops():
    """The library's ops (loads it on first use): the generated op module's
    functions, built straight into the graph while tracing (op_builder.py)."""
    global _graph_ops
    if _graph_ops is None:
        lib = load_library()
        with _lock:
            if _graph_ops is None:
                _graph_ops = op_builder.GraphOps(lib)
    return _graph_ops
