"""Cost declarations of the protocols (SPU-style, STYLE §7).

Every protocol that sends messages declares what it sends: rounds, and for
each ordered pair of parties the number of messages and bytes, plus the
number of secure multiplications and comparisons (elements). The
declarations are plain functions of the operand shapes, so a cost bill can be
computed before anything runs; tests/test_channel.py checks each one against
what the channel (channel.py) counts in TF state during a real run.

`record()` collects the declarations of every protocol call made while it is
active, in eager code or while a tf.function is traced: the converter's cost
bill and the op registry's per-op costs come from tracing the private
implementation once inside it.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Dict, Iterator, List, Tuple

Link = Tuple[str, str]

#: bytes of a stream nonce carried in a message header (int64), checked by
#: the receiver so that two ends of a PRG stream can never silently disagree
NONCE_BYTES = 8
#: garbled comparator: 64 AND gates x 2 half-gate rows x 128-bit ciphertexts
#: (int64[64, 4]) and one decoding byte; active labels: 64 wires x 128 bits
GC_TABLE_BYTES = 64 * 4 * 8
GC_DECODE_BYTES = 1
GC_LABEL_BYTES = 64 * 2 * 8


@dataclasses.dataclass
class Cost:
    """What one or more protocol calls send.

    rounds is the number of sequential communication rounds when the calls
    run one after another (an upper bound when independent calls overlap).
    """

    rounds: int = 0
    links: Dict[Link, List[int]] = dataclasses.field(default_factory=dict)
    multiplications: int = 0
    comparisons: int = 0

    def send(self, src: str, dst: str, nbytes: int, messages: int = 1) -> "Cost":
        m = self.links.setdefault((src, dst), [0, 0])
        m[0] += messages
        m[1] += int(nbytes)
        return self

    def __iadd__(self, other: "Cost") -> "Cost":
        self.rounds += other.rounds
        self.multiplications += other.multiplications
        self.comparisons += other.comparisons
        for link, (msgs, nbytes) in other.links.items():
            self.send(link[0], link[1], nbytes, msgs)
        return self

    def __add__(self, other: "Cost") -> "Cost":
        out = Cost()
        out += self
        out += other
        return out

    @property
    def bytes(self) -> int:
        return sum(b for _, b in self.links.values())

    @property
    def messages(self) -> int:
        return sum(m for m, _ in self.links.values())

    def as_dict(self) -> dict:
        return {"rounds": self.rounds, "multiplications": self.multiplications,
                "comparisons": self.comparisons, "messages": self.messages,
                "bytes": self.bytes,
                "links": {f"{s}->{d}": {"messages": m, "bytes": b}
                          for (s, d), (m, b) in sorted(self.links.items())}}


def _elems(shape) -> int:
    n = 1
    for d in shape:
        if d is None:
            raise ValueError(f"a cost needs fully known shapes, got {list(shape)}")
        n *= int(d)
    return n


# ------------------------------------------------------------ declarations
def share_cost(shape, ring_bits: int) -> Cost:
    """tp.share: the client sends one share to S1 and one to S2."""
    nbytes = _elems(shape) * ring_bits // 8
    return Cost(rounds=1).send("client", "S1", nbytes).send("client", "S2", nbytes)


def reveal_cost(shape, ring_bits: int) -> Cost:
    """tp.reveal: S1 and S2 send their shares to the client."""
    nbytes = _elems(shape) * ring_bits // 8
    return Cost(rounds=1).send("S1", "client", nbytes).send("S2", "client", nbytes)


def mul_cost(x_shape, y_shape, out_shape, ring_bits: int) -> Cost:
    """PrivPy Protocol 1 (DESIGN §5) for any bilinear kind: S1 and S2 send
    their masked operands to T1 and T2 (round 1), each assistant sends one
    masked product to a server (round 2). Round-1 messages carry the
    sender's nonces of the streams the receiver checks (S1-S2 from both
    servers; S1-T1 to T1 and S2-T2 to T2)."""
    e = ring_bits // 8
    nx, ny, nz = _elems(x_shape) * e, _elems(y_shape) * e, _elems(out_shape) * e
    c = Cost(rounds=2, multiplications=_elems(out_shape))
    c.send("S1", "T1", nx + 2 * NONCE_BYTES).send("S2", "T1", ny + NONCE_BYTES)
    c.send("S2", "T2", nx + 2 * NONCE_BYTES).send("S1", "T2", ny + NONCE_BYTES)
    c.send("T1", "S2", nz).send("T2", "S1", nz)
    return c


def ltz_chunk_cost(n: int, ring_bits: int, pregarbled: bool = False) -> Cost:
    """One batch of n garbled comparisons (DESIGN §6). T1 evaluates the
    first n // 2, T2 the rest. Round 1: S1 sends each assistant its half of
    the tables (unless garbled ahead) and the labels of x1's bits, S2 the
    labels of -x2's bits; round 2: each assistant sends its re-shared output
    bits to the other server."""
    e = ring_bits // 8
    c = Cost(rounds=2, comparisons=n)
    for t, k, own, other in (("T1", n // 2, "S1", "S2"), ("T2", n - n // 2, "S2", "S1")):
        if not pregarbled:
            # tables, decode bits, the S1-S2 nonce and the batch's first index
            c.send("S1", t, k * (GC_TABLE_BYTES + GC_DECODE_BYTES) + 2 * NONCE_BYTES)
        # the assistant's own server also sends the nonce of their stream
        c.send(own, t, k * GC_LABEL_BYTES + 2 * NONCE_BYTES)
        c.send(other, t, k * GC_LABEL_BYTES + NONCE_BYTES)
        c.send(t, other, k * e)
    return c


def ltz_cost(n: int, ring_bits: int, batch: int, pregarbled: bool = False) -> Cost:
    """n comparisons, garbled in sequential chunks of at most `batch`."""
    if pregarbled or n <= batch:
        return ltz_chunk_cost(n, ring_bits, pregarbled)
    c = Cost()
    for start in range(0, n, batch):
        c += ltz_chunk_cost(min(batch, n - start), ring_bits)
    return c


def leading_one_gates(width: int, magnitude: bool) -> int:
    """AND gates of the garbled leading-one circuit (ops/gc/leading_one.h):
    adder W - 1, prefix OR W - 2, and one more for the one's complement
    magnitude (its zero test ORs in the sign; the complement itself is free)."""
    return (width - 1) + (width - 2) + (1 if magnitude else 0)


def circuit_chunk_cost(n: int, ring_bits: int, gates: int, width: int, decode: int,
                       outputs: int) -> Cost:
    """One batch of n garbled circuits on the low `width` bits of the shares
    (protocols/mpc/privpy/circuits.py), sent as the comparison's (DESIGN §6): round
    1, S1 sends each assistant its part of the tables (`gates` AND gates x
    32 bytes) and `decode` decoding bytes per element, S1 and S2 the labels
    of their shares' low `width` bits (16 bytes each); round 2, each
    assistant sends `outputs` re-shared bits per element to the other
    server. Counted as n comparisons (one circuit each)."""
    e = ring_bits // 8
    table = gates * 32 + decode
    labels = width * 16
    c = Cost(rounds=2, comparisons=n)
    for t, k, own, other in (("T1", n // 2, "S1", "S2"), ("T2", n - n // 2, "S2", "S1")):
        c.send("S1", t, k * table + 2 * NONCE_BYTES)
        c.send(own, t, k * labels + 2 * NONCE_BYTES)
        c.send(other, t, k * labels + NONCE_BYTES)
        c.send(t, other, k * outputs * e)
    return c


def _chunked(n: int, batch: int, one) -> Cost:
    c = Cost()
    for start in range(0, max(n, 1), batch):
        c += one(min(batch, n - start))
    return c


def leading_one_cost(n: int, ring_bits: int, width: int, magnitude: bool, outputs: int,
                     batch: int) -> Cost:
    """n leading-one circuits (`outputs` columns decoded and re-shared),
    garbled in sequential chunks of at most `batch`."""
    gates = leading_one_gates(width, magnitude)
    return _chunked(n, batch, lambda k: circuit_chunk_cost(k, ring_bits, gates, width, outputs,
                                                           outputs))


def thresholds_gates(width: int, lo: int, window: int, points) -> int:
    """AND gates of the garbled window-thresholds circuit (ops/gc/thresholds.h):
    adder W - 1; overflow and clamp W - lo - 2 when lo + m < W; per point c,
    m - 1 - tz(c + 2^(m-1)) for the comparison with a constant."""
    g = width - 1 + (width - lo - 2 if lo + window < width else 0)
    for c in points:
        u = int(c) + (1 << (window - 1))
        g += window - 1 - ((u & -u).bit_length() - 1)
    return g


def thresholds_cost(n: int, ring_bits: int, width: int, lo: int, window: int, points,
                    batch: int) -> Cost:
    """n window-thresholds circuits (K = len(points) outputs), garbled in
    sequential chunks of at most `batch`."""
    gates, k = thresholds_gates(width, lo, window, points), len(points)
    return _chunked(n, batch, lambda m: circuit_chunk_cost(m, ring_bits, gates, width, k, k))


# --------------------------------------------------------------- recording
_local = threading.local()


def _stack() -> List[Cost]:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


@contextlib.contextmanager
def record() -> Iterator[Cost]:
    """Collects the declared cost of every protocol call made inside it.

    Example:
      >>> with record() as bill:
      ...     z = backend.mul(x, y)
      >>> bill.rounds
      2
    """
    bill = Cost()
    _stack().append(bill)
    try:
        yield bill
    finally:
        _stack().remove(bill)


def active() -> bool:
    """Whether a recorder is collecting (declarations are skipped otherwise)."""
    return bool(getattr(_local, "stack", None))


def declare(cost: Cost) -> None:
    """Adds a protocol call's declared cost to every active recorder."""
    for bill in _stack():
        bill += cost


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Stops collecting inside it: for one-off setup work (a model owner
    sharing weights once at conversion) that a per-run bill must not count."""
    saved = getattr(_local, "stack", None)
    _local.stack = []
    try:
        yield
    finally:
        _local.stack = saved
