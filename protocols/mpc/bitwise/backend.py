"""PrivPy's four-server backend with a choice of comparison family.

Multiplication, sharing and every linear op are PrivPy's (privpy/backend.py).
A comparison runs either as PrivPy's garbled circuit (Protocol 2, DESIGN §6;
2 rounds, about 4 KB) or as this folder's bitwise protocol (protocol.py; 8
rounds, about 100 bytes), chosen by `Config.comparison`, and per call inside
`backend.comparison(name)` (tp.comparison). Comparisons made ahead of time
(`garble_ahead`) are garbled ones whatever the choice. The derived
functions' leading-one and window-thresholds circuits run, under "bitwise",
as batched bitwise comparisons (circuits.py) or stay garbled circuits, per
circuit by the setting functions.common.bitwise_circuits
(protocols/defaults.json; the figures in docs/comparisons_functions.md).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List

from ...config import DEFAULTS
from ..privpy.backend import PrivPyBackend
from . import circuits
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
        return protocol.ltz_cost(n, self.bits)

    def ltz(self, x, pregarbled=None, integer: bool = False):
        if pregarbled is not None or self.comparison_family == "garbled":
            return super().ltz(x, pregarbled, integer=integer)
        return protocol.ltz(self, x, 0 if integer else self.cfg.frac_bits)

    def circuit_choice(self, circuit: str) -> str:
        """How `circuit` ("leading_one" or "thresholds") runs now: "garbled"
        under the garbled family, else the config's bitwise_circuits
        setting ("comparisons" or "garbled")."""
        if self.comparison_family == "garbled":
            return "garbled"
        return bitwise_circuit_setting(self.cfg, circuit)

    def _leading_one(self, x, columns, magnitude, width, table):
        if self.circuit_choice("leading_one") == "garbled":
            return super()._leading_one(x, columns, magnitude, width, table)
        return circuits.leading_one(self, x, columns, magnitude, width, table=table)

    def _thresholds(self, x, points, integer, width, table):
        if self.circuit_choice("thresholds") == "garbled":
            return super()._thresholds(x, points, integer, width, table)
        return circuits.thresholds(self, x, points, width, integer, table=table)


def bitwise_circuit_setting(cfg, circuit: str) -> str:
    """The config's choice for `circuit` under the bitwise family
    (functions.common.bitwise_circuits, keys missing from the config's dict
    taken from defaults.json); ValueError for an unknown circuit or value."""
    if circuit not in circuits.CIRCUITS:
        raise ValueError(f"bitwise_circuits has no circuit {circuit!r}: one of "
                         f"{circuits.CIRCUITS}")
    own = (cfg.functions.get("common") or {}).get("bitwise_circuits") or {}
    choice = own.get(circuit) or DEFAULTS["functions"]["common"]["bitwise_circuits"][circuit]
    if choice not in circuits.CHOICES:
        raise ValueError(f"bitwise_circuits[{circuit!r}] must be one of {circuits.CHOICES}, "
                         f"got {choice!r}: set it in tp.Config(functions={{'common': "
                         "{'bitwise_circuits': {...}}})")
    return choice


def check_family(family: str) -> str:
    if family not in COMPARISONS:
        raise ValueError(f"comparison must be one of {COMPARISONS}, got {family!r}")
    return family
