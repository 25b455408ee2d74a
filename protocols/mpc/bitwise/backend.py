"""PrivPy's four-server backend with a choice of comparison family.

Multiplication, sharing and every linear op are PrivPy's (privpy/backend.py).
A comparison runs either as PrivPy's garbled circuit (Protocol 2, DESIGN §6;
2 rounds, about 4 KB) or as this folder's bitwise protocol (protocol.py; 8
rounds, about 100 bytes), chosen by `Config.comparison`, and per call inside
`backend.comparison(name)` (tp.comparison). Comparisons made ahead of time
with `garble_ahead` are garbled ones whatever the choice, with
`prepare_ahead` (tp.prepare_comparisons) those of the family chosen; the leading-one and
window-thresholds circuits of the derived functions stay garbled circuits
(one circuit per element replaces many comparisons there).
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List

import tensorflow as tf

from ..privpy.backend import PrivPyBackend
from . import protocol
from .ahead import Predealt, setup_cost

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
        frac_bits = 0 if integer else self.cfg.frac_bits
        if isinstance(pregarbled, Predealt):
            return protocol.ltz(self, x, frac_bits, predealt=pregarbled)
        if pregarbled is not None or self.comparison_family == "garbled":
            return super().ltz(x, pregarbled, integer=integer)
        return protocol.ltz(self, x, frac_bits)

    def prepare_ahead(self, shape):
        """The set-up phase of one later comparison of `shape` in the family
        chosen now: garbled tables to T1 and T2, or triples dealt to S2."""
        if self.comparison_family == "garbled":
            return self.garble_ahead(shape)
        return Predealt(self, shape)

    def prepare_cost(self, shape):
        """What `prepare_ahead(shape)` sends now."""
        if self.comparison_family == "garbled":
            return super().prepare_cost(shape)
        return setup_cost(tf.TensorShape(shape).num_elements(), self.bits)


def check_family(family: str) -> str:
    if family not in COMPARISONS:
        raise ValueError(f"comparison must be one of {COMPARISONS}, got {family!r}")
    return family
