"""The backends a runtime can run, by `Config.backend` (DESIGN §2).

"privpy": PrivPy's four-server protocols, comparisons by the family the
config or a `comparison()` scope chooses (bitwise/backend.py: the garbled
circuits of privpy/ or the bitwise protocol of bitwise/). "plaintext": the
same API in the clear on the client (the test oracle, never private).
"""
from __future__ import annotations

from .bitwise.backend import COMPARISONS, BitwiseBackend
from .privpy.backend import Backend, PlaintextBackend
from .runtime.runtime import Runtime

BACKENDS = {"privpy": BitwiseBackend, "plaintext": PlaintextBackend}


def make_backend(runtime: Runtime) -> Backend:
    return BACKENDS[runtime.config.backend](runtime)


__all__ = ["BACKENDS", "COMPARISONS", "make_backend"]
