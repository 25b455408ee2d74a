"""Secret-shared computation on the four servers (PrivPy, DESIGN §5-7)."""
from .privpy.backend import BACKENDS, Backend, PlaintextBackend, PrivPyBackend, make_backend
from .runtime.runtime import CLIENT, PARTIES, Runtime

__all__ = ["BACKENDS", "Backend", "CLIENT", "PARTIES", "PlaintextBackend", "PrivPyBackend",
           "Runtime", "make_backend"]
