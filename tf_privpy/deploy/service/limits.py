"""How much of a share service one caller may hold: calls at once (overall
and per owner), how long the service waits on a client, and per-owner
storage quotas (enforced by store.Store).

Each call of the share service holds one of the server's threads for as long
as it runs, and an upload or fetch runs as long as its client keeps the
stream open. Without limits, one owner opening many uploads and sending
nothing would hold every thread, and no other owner's call would ever run.
So:

- the gRPC server admits at most max_calls calls at once (more get
  RESOURCE_EXHAUSTED at once, not a queue) and has a thread for each;
- one owner may run at most max_calls_per_owner of them (RESOURCE_EXHAUSTED),
  so max_calls - max_calls_per_owner are always left to the others;
- the service never waits on a client for more than idle_timeout_s between
  two messages, nor call_deadline_s in all: a watchdog cancels such a call
  (the client sees CANCELLED), and the upload's temp file is removed;
- quota_bytes/quota_records: what one owner may keep stored (store.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from typing import Dict, Iterator, Optional

from tf_privpy.deploy.service.store import DEFAULT_MAX_RECORD_BYTES, StoreError

__all__ = ["Limits", "CallGuard", "add_limit_flags", "limits_from"]


@dataclasses.dataclass(frozen=True)
class Limits:
    """A share service's limits (serve() arguments; the command-line flags of
    `python -m tf_privpy.deploy.service.server` and `--share_*` of
    `python -m tf_privpy.server`). quota_*: 0 or None for no limit."""

    max_calls: int = 128
    max_calls_per_owner: int = 64
    call_deadline_s: float = 3600.0
    idle_timeout_s: float = 60.0
    quota_bytes: Optional[int] = 64 * DEFAULT_MAX_RECORD_BYTES
    quota_records: Optional[int] = 10000

    def __post_init__(self):
        if self.max_calls < 2 or not 1 <= self.max_calls_per_owner < self.max_calls:
            raise ValueError(f"max_calls_per_owner ({self.max_calls_per_owner}) must be at "
                             f"least 1 and below max_calls ({self.max_calls}), so one owner "
                             f"always leaves calls to the others")
        if not (self.call_deadline_s > 0 and self.idle_timeout_s > 0):
            raise ValueError(f"call_deadline_s ({self.call_deadline_s}) and idle_timeout_s "
                             f"({self.idle_timeout_s}) must be positive")
        for k in ("quota_bytes", "quota_records"):
            v = getattr(self, k)
            if v is not None and v < 0:
                raise ValueError(f"{k} must be >= 0 (0: no limit), got {v}")


class _Call:
    """One call in progress: when it started, when its client last moved,
    and whether the service is waiting on the client (only then is idleness
    the client's)."""

    __slots__ = ("owner", "context", "start", "last", "waiting", "cut")

    def __init__(self, owner: str, context):
        self.owner, self.context = owner, context
        self.start = self.last = time.monotonic()
        self.waiting = True
        self.cut: Optional[str] = None

    def touch(self) -> None:
        """The client sent or took a message."""
        self.last = time.monotonic()

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """The service itself is busy (e.g. fsync of a commit): not the
        client's idle time, and not cut off."""
        self.waiting = False
        try:
            yield
        finally:
            self.last = time.monotonic()
            self.waiting = True


class CallGuard:
    """Counts calls per owner and cuts off calls that wait on their client
    too long (one watchdog thread per service, started by start())."""

    def __init__(self, limits: Limits, role: str = "share"):
        self.limits, self.role = limits, role
        self._lock = threading.Lock()
        self._calls: Dict[int, _Call] = {}
        self._per_owner: Dict[str, int] = {}
        self._stop = threading.Event()
        self._tick = min(1.0, max(0.02, min(limits.idle_timeout_s,
                                            limits.call_deadline_s) / 8))
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name=f"share-{role}-watchdog")

    def start(self) -> "CallGuard":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def enter(self, owner: str, context) -> _Call:
        """Takes one of owner's call slots (leave() gives it back); raises
        StoreError(RESOURCE_EXHAUSTED) when it runs max_calls_per_owner
        already."""
        with self._lock:
            n = self._per_owner.get(owner, 0)
            if n >= self.limits.max_calls_per_owner:
                raise StoreError("RESOURCE_EXHAUSTED", f"owner {owner!r} runs {n} calls on "
                                 f"{self.role.upper()} already, the most one owner may "
                                 f"(--max-calls-per-owner): wait for them to finish, then "
                                 f"retry")
            self._per_owner[owner] = n + 1
            c = _Call(owner, context)
            self._calls[id(c)] = c
        return c

    def leave(self, c: _Call) -> None:
        with self._lock:
            del self._calls[id(c)]
            left = self._per_owner[c.owner] - 1
            if left:
                self._per_owner[c.owner] = left
            else:
                del self._per_owner[c.owner]

    @contextlib.contextmanager
    def call(self, owner: str, context) -> Iterator[_Call]:
        """enter() ... leave() around a block."""
        c = self.enter(owner, context)
        try:
            yield c
        finally:
            self.leave(c)

    def running(self, owner: Optional[str] = None) -> int:
        """Calls in progress (of owner, or of everyone)."""
        with self._lock:
            return len(self._calls) if owner is None else self._per_owner.get(owner, 0)

    def _watch(self) -> None:
        lim = self.limits
        while not self._stop.wait(self._tick):
            now = time.monotonic()
            with self._lock:
                calls = list(self._calls.values())
            for c in calls:
                if not c.waiting or c.cut:
                    continue
                if now - c.last > lim.idle_timeout_s:
                    c.cut = f"no message for {lim.idle_timeout_s:g} s (--call-idle-timeout)"
                elif now - c.start > lim.call_deadline_s:
                    c.cut = f"longer than {lim.call_deadline_s:g} s (--call-deadline)"
                else:
                    continue
                # The handler's thread is blocked on the client (reading the
                # next chunk, or sending one): cancelling the RPC wakes it with
                # an error, and it cleans up (an upload removes its temp file).
                c.context.cancel()


def add_limit_flags(add, prefix: str = "") -> None:
    """The limits' flags, with their defaults and help: add(name, type,
    default, help) is argparse's add_argument or an absl wrapper; prefix
    "share_" for tf_privpy.server."""
    d = Limits()
    add(prefix + "max_calls", int, d.max_calls,
        "Calls the share service runs at once; more are refused (RESOURCE_EXHAUSTED).")
    add(prefix + "max_calls_per_owner", int, d.max_calls_per_owner,
        "Calls one owner may run at once (below max_calls, so others always get some).")
    add(prefix + "call_deadline", float, d.call_deadline_s,
        "Seconds the service waits on one call's client in all; then it is cut off.")
    add(prefix + "call_idle_timeout", float, d.idle_timeout_s,
        "Seconds the service waits for a client's next message; then the call is cut off "
        "(a stalled upload's temp file is removed).")
    add(prefix + "owner_quota_bytes", int, d.quota_bytes,
        "Bytes of shares one owner may keep uploaded (0: no limit).")
    add(prefix + "owner_quota_records", int, d.quota_records,
        "Records one owner may keep uploaded (0: no limit).")


def limits_from(values, prefix: str = "") -> Limits:
    """Limits from parsed flags (an object with the attributes add_limit_flags
    names)."""
    g = lambda k: getattr(values, prefix + k)  # noqa: E731
    return Limits(max_calls=g("max_calls"), max_calls_per_owner=g("max_calls_per_owner"),
                  call_deadline_s=g("call_deadline"), idle_timeout_s=g("call_idle_timeout"),
                  quota_bytes=g("owner_quota_bytes"), quota_records=g("owner_quota_records"))
