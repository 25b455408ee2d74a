"""Progress of long protocol work (noise pools, scalar products, vector sums).

One convention for every long call: `progress=False` (or None) is silent,
True prints a line to stderr at most once a second and once at the end, and
a callable gets (done, total, elapsed seconds) at the same moments.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional, Union

Progress = Union[bool, Callable[[int, int, float], None], None]


class ProgressReporter:
    """Reports `done` out of `total` units of `what`; thread-safe.

    Example:
      >>> rep = ProgressReporter(True, 1000, "scalar product", "elements")
      >>> rep.add(100)        # may print "scalar product: 100/1000 elements (10%), ..."
    """

    def __init__(self, progress: Progress, total: int, what: str, unit: str = "elements",
                 started_at: Optional[float] = None):
        """started_at: time.monotonic() when the work began (default: now)."""
        self.fn, self.total, self.what, self.unit = progress, int(total), what, unit
        self.t0 = time.monotonic() if started_at is None else started_at
        self.done, self.last = 0, 0.0
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        """n more units are done."""
        self.update(self.done + n)

    def update(self, done: int, total: Optional[int] = None) -> None:
        """`done` units are done (of `total`, when the total changes)."""
        if not self.fn:
            return
        with self.lock:
            self.done = done
            if total is not None:
                self.total = int(total)
            now = time.monotonic()
            if self.done < self.total and now - self.last < 1.0:
                return
            self.last = now
            done, total, elapsed = self.done, self.total, now - self.t0
        if callable(self.fn):
            self.fn(done, total, elapsed)
            return
        eta = elapsed / done * (total - done) if done else 0.0
        sys.stderr.write(f"{self.what}: {done}/{total} {self.unit} "
                         f"({100.0 * done / max(total, 1):.0f}%), {elapsed:.1f} s, "
                         f"~{eta:.0f} s left\n")
        sys.stderr.flush()
