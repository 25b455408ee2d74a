"""Secret-shared computation on the four servers (PrivPy, DESIGN §5-7)."""
from .backends import BACKENDS, make_backend
from .bitwise.backend import BitwiseBackend
from .privpy.backend import Backend, PlaintextBackend, PrivPyBackend
from .runtime.runtime import CLIENT, PARTIES, Runtime

__all__ = ["BACKENDS", "Backend", "BitwiseBackend", "CLIENT", "PARTIES", "PlaintextBackend", "PrivPyBackend",
           "Runtime", "make_backend"]
