"""PrivPy's four-server backend with a choice of comparison family.

Multiplication, sharing and every linear op are PrivPy's (privpy/backend.py).
A comparison runs either as PrivPy's garbled circuit (Protocol 2, DESIGN §6;
2 rounds, about 4 KB) or as this folder's bitwise protocol (protocol.py; 8
rounds, about 100 bytes), chosen by `Config.comparison`, and per call inside
`backend.comparison(name)` (tp.comparison). Comparisons made ahead of time
with `garble_ahead` are garbled ones whatever the choice, with
`prepare_ahead` (tp.prepare_comparisons) those of the family chosen. The derived
functions' leading-one and window-thresholds circuits run, under "bitwise",
as batched bitwise comparisons (circuits.py) or stay garbled circuits, per
circuit by the setting functions.common.bitwise_circuits
(protocols/defaults.json; the figures in docs/comparisons_functions.md).
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List, Tuple

import tensorflow as tf

from ...config import DEFAULTS
from ..privpy.backend import PrivPyBackend
from ..runtime.cost import CIRCUIT_ROUNDS
from ..runtime import shares as sh
from . import circuits
from . import leading_one as bitwise_lo
from . import protocol
from . import selects
from .ahead import Predealt, setup_cost

#: the comparison families, Config.comparison's values
COMPARISONS = ("garbled", "bitwise")


class BitwiseBackend(PrivPyBackend):
    """PrivPy's protocols, comparisons by the family chosen (see module doc)."""

    def __init__(self, runtime):
        super().__init__(runtime)
        self._families: List[str] = [check_family(runtime.config.comparison)]
        #: the `batch_sizes` scopes open now, innermost last
        self._sizes: List[Dict[str, tf.Tensor]] = []

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

    def ltz_bill(self, n: int, pregarbled: bool = False, sized: bool = False):
        if pregarbled or self.comparison_family == "garbled":
            return super().ltz_bill(n, pregarbled)
        # a bill is for a call in a graph loop, declared outside it (see
        # Backend.mul_bill): its trace does not know n; unless the loop gives
        # the dealer each batch's size (batch_sizes), S1 sends it to T1
        return protocol.ltz_cost(n, self.bits, size_unknown=not sized)

    def loop_batch_limit(self) -> int:
        """Under the bitwise family, one dealt batch (protocol.CHUNK, 2^21:
        the dealer's buffers take about 120 bytes per comparison), not the
        garbled family's comparison_batch (2^18): the sort loop of 10^6
        (layers of 500,000) ran unrolled under that limit, and its graph, with
        every layer's index arrays as constants, exceeded TF's 2 GB."""
        if self.comparison_family == "garbled":
            return super().loop_batch_limit()
        return protocol.CHUNK

    def size_parties(self) -> Tuple[str, ...]:
        """The dealer, under the bitwise family (it deals a batch's triples
        before the servers' data exists); none under the garbled one."""
        return () if self.comparison_family == "garbled" else (protocol.DEALER,)

    @contextlib.contextmanager
    def batch_sizes(self, sizes: Dict[str, tf.Tensor]) -> Iterator[None]:
        missing = set(self.size_parties()) - set(sizes)
        if missing:
            raise ValueError(f"batch_sizes needs the size on {sorted(missing)} too "
                             "(each party of backend.size_parties())")
        self._sizes.append(dict(sizes))
        try:
            yield
        finally:
            self._sizes.pop()

    def ltz(self, x, pregarbled=None, integer: bool = False):
        frac_bits = 0 if integer else self.cfg.frac_bits
        if isinstance(pregarbled, Predealt):
            return protocol.ltz(self, x, frac_bits, predealt=pregarbled)
        if pregarbled is not None or self.comparison_family == "garbled":
            return super().ltz(x, pregarbled, integer=integer)
        return protocol.ltz(self, x, frac_bits, dealer_n=self._dealer_n())

    def _dealer_n(self):
        """The dealer's batch size from the innermost `batch_sizes` scope."""
        return self._sizes[-1].get(protocol.DEALER) if self._sizes else None

    def ltz_mul(self, z, vs, pregarbled=None):
        """[z < 0]·v for each v of vs: under the bitwise family the products
        run beside the comparison's rounds (selects.py: 8 rounds, not 8 + 2);
        triples dealt ahead, the garbled family and batches over one dealt
        chunk take the comparison, then the multiplication."""
        n = sh.logical_shape(z[0], self.limbs).num_elements()
        if (pregarbled is not None or self.comparison_family == "garbled"
                or (n is not None and n > protocol.CHUNK)):
            return super().ltz_mul(z, vs, pregarbled)
        return selects.ltz_mul(self, z, vs, dealer_n=self._dealer_n())

    def ltz_mul_bill(self, n: int, k: int = 1, sized: bool = False):
        if self.comparison_family == "garbled":
            return super().ltz_mul_bill(n, k, sized)
        return selects.ltz_mul_cost(n, k, self.bits, size_unknown=not sized)

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

    def circuit_choice(self, circuit: str, comparisons: int, width: int = 0) -> str:
        """How `circuit` ("leading_one" or "thresholds") runs now, if as
        comparisons it takes `comparisons` per element: "garbled" under the
        garbled family, else `circuit_route` by the config."""
        if self.comparison_family == "garbled":
            return "garbled"
        return circuit_route(self.cfg, circuit, comparisons, width)

    def _leading_one(self, x, columns, magnitude, width, table):
        m = leading_one_comparisons(columns, magnitude, width)
        route = self.circuit_choice("leading_one", m, width)
        if route == "comparisons":
            return circuits.leading_one(self, x, columns, magnitude, width, table=table)
        if route == "decomposition":
            return bitwise_lo.leading_one(self, x, columns, magnitude, width, table=table)
        return super()._leading_one(x, columns, magnitude, width, table)

    def _thresholds(self, x, points, integer, width, table):
        if self.circuit_choice("thresholds", len(points)) == "garbled":
            return super()._thresholds(x, points, integer, width, table)
        return circuits.thresholds(self, x, points, width, integer, table=table)


def circuit_route(cfg, circuit: str, comparisons: int, width: int = 0) -> str:
    """How `circuit` runs under the bitwise family when as comparisons it
    takes `comparisons` per element: "comparisons" up to the config's
    bitwise_circuits limit (per ring); above it the leading one (width W)
    runs as "decomposition" (leading_one.py: one bit decomposition per
    element) where functions.common.bitwise_leading_one says so and W fits,
    every other case as the "garbled" circuit."""
    if comparisons <= bitwise_circuit_limit(cfg, circuit):
        return "comparisons"
    if circuit == "leading_one" and bitwise_lo.available(width) \
            and bitwise_leading_one(cfg) == "decomposition":
        return "decomposition"
    return "garbled"


def circuit_rounds(cfg, circuit: str, comparisons: int, width: int = 0) -> int:
    """The rounds of `circuit` under cfg's family when as comparisons it
    takes `comparisons` per element (width W: the leading one's), by the
    route `circuit_route` picks (for a cost model measured without the
    protocols: numerics.CostTracker on the plaintext oracle)."""
    route = circuit_route(cfg, circuit, comparisons, width) \
        if cfg.comparison == "bitwise" else "garbled"
    if route == "comparisons":
        return protocol.BITWISE_ROUNDS
    if route == "decomposition":
        return bitwise_lo.rounds(width)
    return CIRCUIT_ROUNDS


def bitwise_leading_one(cfg) -> str:
    """functions.common.bitwise_leading_one for cfg's ring: "decomposition"
    or "garbled" (the leading one above the bitwise_circuits limit)."""
    own = (cfg.functions.get("common") or {}).get("bitwise_leading_one")
    per_ring = own if own is not None else \
        DEFAULTS["functions"]["common"]["bitwise_leading_one"]
    value = per_ring.get(str(cfg.ring_bits)) if isinstance(per_ring, dict) else per_ring
    if value not in ("decomposition", "garbled"):
        raise ValueError(f"bitwise_leading_one must be 'decomposition' or 'garbled' (or one "
                         f"per ring, {{'128': ..., '64': ...}}), got {per_ring!r}: set it in "
                         "tp.Config(functions={'common': {'bitwise_leading_one': ...}})")
    return value


def leading_one_comparisons(columns, magnitude: bool, width: int) -> int:
    """Comparisons per element of the leading-one circuit run as comparisons."""
    return len(circuits.leading_one_terms(columns, magnitude, width)[0])


def bitwise_circuit_limit(cfg, circuit: str) -> int:
    """The most comparisons per element for which `circuit` runs as bitwise
    comparisons under the bitwise family (functions.common.bitwise_circuits
    [circuit][ring]; keys missing from the config's dict are taken from
    defaults.json); 0: always the garbled circuit. ValueError for an unknown
    circuit or a bad value."""
    if circuit not in circuits.CIRCUITS:
        raise ValueError(f"bitwise_circuits has no circuit {circuit!r}: one of "
                         f"{circuits.CIRCUITS}")
    own = (cfg.functions.get("common") or {}).get("bitwise_circuits") or {}
    per_ring = own.get(circuit, DEFAULTS["functions"]["common"]["bitwise_circuits"][circuit])
    limit = per_ring.get(str(cfg.ring_bits)) if isinstance(per_ring, dict) else per_ring
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"bitwise_circuits[{circuit!r}] must be a count >= 0 of comparisons "
                         f"per element (or one per ring, {{'128': n, '64': n}}), got "
                         f"{per_ring!r}: set it in tp.Config(functions={{'common': "
                         "{'bitwise_circuits': {...}}})")
    return limit


def check_family(family: str) -> str:
    if family not in COMPARISONS:
        raise ValueError(f"comparison must be one of {COMPARISONS}, got {family!r}")
    return family
