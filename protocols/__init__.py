"""tf_privpy.protocols: protocols that compose kernels across the four devices.

Installed as tf_privpy.protocols; depends only on the op library (ops/).
"""
from .backend import BACKENDS, Backend, PlaintextBackend, PrivPyBackend, make_backend
from .config import Config
from .runtime import CLIENT, PARTIES, Runtime

__all__ = ["BACKENDS", "Backend", "CLIENT", "Config", "PARTIES", "PlaintextBackend",
           "PrivPyBackend", "Runtime", "make_backend"]
