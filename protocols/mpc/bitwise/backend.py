"""PrivPy's four-server backend with a choice of comparison family.

Multiplication, sharing and every linear op are PrivPy's (privpy/backend.py).
A comparison runs either as PrivPy's garbled circuit (Protocol 2, DESIGN §6;
2 rounds, about 4 KB) or as this folder's bitwise protocol (protocol.py; 8
rounds, about 100 bytes), chosen by `Config.comparison`, and per call inside
`backend.comparison(name)` (tp.comparison). Comparisons made ahead of time
(`garble_ahead`) are garbled ones whatever the choice; the leading-one and
window-thresholds circuits of the derived functions stay garbled circuits
(one circuit per element replaces many comparisons there).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List

from ..privpy.backend import PrivPyBackend
from . import protocol

#: the comparison families, Config.comparison's values
COMPARISONS = ("garbled", "bitwise")


class BitwiseBackend(PrivPyBackend):
    """PrivPy's protocols, comparisons by the family chosen (see module doc)."""

    def __init__(self, runtime):
        super().__init__(runtime)
        self._families: List[str] = [check_family(runtime.config.comparison)]

    @property
    def comparison_family(self) -> str:
        """The family `ltz` runs now: the innermost `comparison()` scope's,
        else the config's."""
        return self._families[-1]

    @contextlib.contextmanager
    def comparison(self, family: str) -> Iterator[None]:
        """Inside it, comparisons built run as `family` ("garbled" or "bitwise")."""
        self._families.append(check_family(family))
        try:
            yield
        finally:
            self._families.pop()

    def ltz_bill(self, n: int, pregarbled: bool = False):
        if pregarbled or self.comparison_family == "garbled":
            return super().ltz_bill(n, pregarbled)
        # a bill is for a call in a graph loop, declared outside it (see
        # Backend.mul_bill): its trace does not know n, S1 sends it to T1
        return protocol.ltz_cost(n, self.bits, size_unknown=True)

    def ltz(self, x, pregarbled=None, integer: bool = False):
        if pregarbled is not None or self.comparison_family == "garbled":
            return super().ltz(x, pregarbled, integer=integer)
        return protocol.ltz(self, x, 0 if integer else self.cfg.frac_bits)


def check_family(family: str) -> str:
    if family not in COMPARISONS:
        raise ValueError(f"comparison must be one of {COMPARISONS}, got {family!r}")
    return family
