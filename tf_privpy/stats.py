"""tp.stats(): what a private run sent, per link, from counters in TF state.

The channels count every message and byte each party receives, and the
protocols count their rounds, multiplications and comparisons, all in TF
variables advanced by the graph: a tf.function is counted on every run, not
once when traced, and eager code the same way. The one cost model
(protocols/mpc/runtime/cost.py) declares the same quantities: tp.cost and the
converter's bill equal what a run counts here, and TensorBoard's scalars
(tp.profile) are differences of these counters.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

from tf_privpy import runtime as _runtime

Link = Tuple[str, str]


@dataclasses.dataclass
class Stats:
    """Traffic and protocol counts, per ordered pair of parties.

    `tp.stats()` gives the totals since `tp.init()`; used as a context manager
    it gives what ran inside the block.

    Example:
      >>> x = tp.share([1.0, 2.0])
      >>> with tp.stats() as s:
      ...     y = x * x
      >>> s.rounds, s.multiplications, s.links[("S1", "T1")][0]
      (2, 2, 1)
    """

    links: Dict[Link, Tuple[int, int]] = dataclasses.field(default_factory=dict)
    rounds: int = 0
    multiplications: int = 0
    comparisons: int = 0

    @property
    def messages(self) -> int:
        return sum(m for m, _ in self.links.values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.links.values())

    def between_servers(self) -> Dict[Link, Tuple[int, int]]:
        """The links among S1, S2, T1 and T2 (without the client's)."""
        return {k: v for k, v in self.links.items()
                if not any(p.startswith("client") for p in k)}

    def __enter__(self) -> "Stats":
        self._start = _snapshot()
        self.links, self.rounds, self.multiplications, self.comparisons = {}, 0, 0, 0
        return self

    def __exit__(self, *exc) -> None:
        end = _snapshot()
        start = self._start
        self.links = {k: (end.links[k][0] - start.links[k][0],
                          end.links[k][1] - start.links[k][1])
                      for k in end.links if end.links[k] != start.links[k]}
        self.rounds = end.rounds - start.rounds
        self.multiplications = end.multiplications - start.multiplications
        self.comparisons = end.comparisons - start.comparisons

    def __str__(self) -> str:
        rows = [f"rounds {self.rounds}, multiplications {self.multiplications}, "
                f"comparisons {self.comparisons}, {self.messages} messages, "
                f"{self.bytes} bytes"]
        rows += [f"  {s:>6} -> {d:<6} {m:8d} messages {b:14d} bytes"
                 for (s, d), (m, b) in sorted(self.links.items())]
        return "\n".join(rows)


def _snapshot() -> Stats:
    rt = _runtime.get_runtime().runtime
    counts = rt.protocol_counts()
    links = {k: v for k, v in rt.channels.counts().items()}
    return Stats(links=links, **counts)


def stats() -> Stats:
    """Messages and bytes per link, rounds, multiplications and comparisons.

    Outside a `with` block: the totals since `tp.init()` (only links that
    carried something are listed). As a context manager: what the block ran.
    Rounds are message hops on the critical path (protocols/mpc/runtime/
    cost.py): inside a tf.function independent protocol calls overlap, eager
    calls run one after another. HE aggregation rounds (tf_privpy.he) are
    counted on the same links and counters.
    """
    s = _snapshot()
    s.links = {k: v for k, v in s.links.items() if v != (0, 0)}
    return s


def cost(fn, *args, **kwargs):
    """The declared cost (rounds, multiplications, comparisons, messages and
    bytes per ordered pair) of one call of `fn(*args, **kwargs)`, found by
    tracing it as a tf.function: nothing runs. A run of it advances
    `tp.stats()` by exactly this (tested).

    Example:
      >>> x, y = tp.share([1.0, 2.0]), tp.share([3.0, 4.0])
      >>> tp.cost(lambda a, b: a * b, x, y).rounds
      2
    """
    import tensorflow as tf
    from tf_privpy.protocols.mpc.runtime import cost as _cost
    with _cost.record() as bill:
        tf.function(fn).get_concrete_function(*args, **kwargs)
    return bill
