"""Cost declarations of the protocols (SPU-style, STYLE §7): the one cost model.

Every protocol that sends messages declares what it sends: its rounds, and
for each ordered pair of parties the number of messages and bytes, plus the
number of secure multiplications and comparisons (elements).

A ROUND is one message hop on the critical path: a message that cannot be
sent before an earlier one has arrived. A multiplication is 2 (S -> T, then
T -> S), a batch of garbled comparisons or circuits 2 (tables and labels to
the assistants, re-shared bits back), a share or a reveal 1. The rounds of a
computation are the depth of its longest chain of dependent messages: calls
one after another add (`then`), independent calls overlap (`beside`). The
runtime's counters (tp.stats), the converter's bill, tp.cost, the TensorBoard
scalars and both generated docs all count this one quantity: `advance()`
below computes it for every protocol call from the data dependencies of its
operands (eager code runs one op after another, so there it is the sum). The
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
from typing import Dict, Iterator, List, Sequence, Tuple

import tensorflow as tf

Link = Tuple[str, str]

#: bytes of a stream nonce carried in a message header (int64), checked by
#: the receiver so that two ends of a PRG stream can never silently disagree
NONCE_BYTES = 8
#: garbled comparator: 64 AND gates x 2 half-gate rows x 128-bit ciphertexts
#: (int64[64, 4]) and one decoding byte; active labels: 64 wires x 128 bits
GC_TABLE_BYTES = 64 * 4 * 8
GC_DECODE_BYTES = 1
GC_LABEL_BYTES = 64 * 2 * 8

#: rounds of each protocol (message hops on its own critical path): PrivPy's
#: multiplication (operands to T1/T2, products back), one garbled batch
#: (tables and labels to T1/T2, re-shared bits back), tp.share, tp.reveal
MUL_ROUNDS = 2
CIRCUIT_ROUNDS = 2
SHARE_ROUNDS = 1
REVEAL_ROUNDS = 1


@dataclasses.dataclass
class Cost:
    """What one or more protocol calls send.

    rounds: the critical-path depth of the messages (see the module
    docstring); links: (src, dst) -> [messages, bytes]. `+` composes in
    sequence (`then`); `beside` composes independent calls.
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

    def then(self, other: "Cost") -> "Cost":
        """self followed by other (other needs self's result): rounds add."""
        return self + other

    def beside(self, other: "Cost") -> "Cost":
        """self and other independent (they overlap): the deeper one's rounds."""
        out = self + other
        out.rounds = max(self.rounds, other.rounds)
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
def share_cost(shape, ring_bits: int, owner: str = "client") -> Cost:
    """tp.share: the owner (the client, or a federated data owner) sends one
    share to S1 and one to S2."""
    nbytes = _elems(shape) * ring_bits // 8
    return Cost(rounds=SHARE_ROUNDS).send(owner, "S1", nbytes).send(owner, "S2", nbytes)


def reveal_cost(shape, ring_bits: int, to: str = "client") -> Cost:
    """tp.reveal: S1 and S2 send their shares to the client (or to `to`)."""
    nbytes = _elems(shape) * ring_bits // 8
    return Cost(rounds=REVEAL_ROUNDS).send("S1", to, nbytes).send("S2", to, nbytes)


def mul_cost(x_shape, y_shape, out_shape, ring_bits: int) -> Cost:
    """PrivPy Protocol 1 (DESIGN §5) for any bilinear kind: S1 and S2 send
    their masked operands to T1 and T2 (round 1), each assistant sends one
    masked product to a server (round 2). Round-1 messages carry the
    sender's nonces of the streams the receiver checks (S1-S2 from both
    servers; S1-T1 to T1 and S2-T2 to T2)."""
    e = ring_bits // 8
    nx, ny, nz = _elems(x_shape) * e, _elems(y_shape) * e, _elems(out_shape) * e
    c = Cost(rounds=MUL_ROUNDS, multiplications=_elems(out_shape))
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
    c = Cost(rounds=CIRCUIT_ROUNDS, comparisons=n)
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
    c = Cost(rounds=CIRCUIT_ROUNDS, comparisons=n)
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
    """Adds a protocol call's declared traffic and counts (not its rounds,
    which `advance` adds on the critical path) to every active recorder."""
    traffic = dataclasses.replace(cost, rounds=0, links=dict(cost.links))
    for bill in _stack():
        bill += traffic


def declare_in_sequence(cost: Cost) -> None:
    """declare(cost), its rounds after everything so far (`advance` with no
    known operands): for a loop that declares its iterations' bill outside
    the loop body (the body's calls count in TF state per iteration)."""
    declare(cost)
    advance((), cost.rounds, ())


# ----------------------------------------------------------- critical path
def _clock(graph) -> dict:
    """The critical-path bookkeeping of one graph being built: the depth
    (rounds) at which each share tensor made by a protocol or a local op is
    ready, and the frontier, the deepest depth reached so far. It lives on
    the graph, so each tf.function trace (and each loop body) starts at 0."""
    c = getattr(graph, "_tp_cost_clock", None)
    if c is None:
        c = {"frontier": 0, "depth": {}}
        graph._tp_cost_clock = c
    return c


def _graph_or_none():
    return None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()


def _depth_of(c: dict, t) -> int:
    hit = c["depth"].get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    # The graph's inputs are there when it starts: a tf.function's arguments
    # and a loop body's variables (placeholders), and what it will capture
    # (eager tensors: the shares of weights shared once at conversion; a
    # tensor of an enclosing graph).
    if not tf.is_symbolic_tensor(t) or t.graph is not tf.compat.v1.get_default_graph():
        return 0
    return _walk(c, t)


def _dated(c: dict, t) -> bool:
    hit = c["depth"].get(id(t))
    return hit is not None and hit[0] is t


def _walk(c: dict, t) -> int:
    """The depth of a tensor no protocol call or Backend.local dated (a share
    reshaped, split or offset by a public constant where it is made): the
    deepest of its op's inputs, found by walking back to dated tensors,
    constants and arguments (memoized in the clock). A value that may hold
    what an earlier op wrote (a variable read, a zero-input stateful op) is
    taken to come after everything so far: never fewer rounds than the
    critical path."""
    stack, frontier = [t], c["frontier"]
    while stack:
        u = stack[-1]
        if _dated(c, u):
            stack.pop()
            continue
        op = u.op
        if op.type in ("Placeholder", "Const") or u.graph is not t.graph:
            d = 0
        elif not op.inputs or any(i.dtype == tf.resource for i in op.inputs):
            d = frontier
        else:
            todo = [i for i in op.inputs if not _dated(c, i)]
            if todo:
                stack.extend(todo)
                continue
            d = max(c["depth"][id(i)][1] for i in op.inputs)
        c["depth"][id(u)] = (u, d)
        stack.pop()
    return c["depth"][id(t)][1]


def propagate(inputs: Sequence, outputs: Sequence) -> None:
    """Local ops (no message): outputs are ready when their inputs are."""
    graph = _graph_or_none()
    if graph is None:
        return
    c = _clock(graph)
    d = max((_depth_of(c, t) for t in inputs), default=c["frontier"])
    for t in outputs:
        c["depth"][id(t)] = (t, d)


def advance(inputs: Sequence, rounds: int, outputs: Sequence) -> int:
    """A protocol call of `rounds` rounds on `inputs` producing `outputs`:
    returns how much it deepens the critical path of the program being
    built (what the runtime's round counter advances by), and adds that to
    every active recorder. Eagerly each call runs after the last: `rounds`."""
    graph = _graph_or_none()
    if graph is None:
        inc = int(rounds)
    else:
        c = _clock(graph)
        d = max((_depth_of(c, t) for t in inputs), default=c["frontier"]) + int(rounds)
        for t in outputs:
            c["depth"][id(t)] = (t, d)
        inc = max(0, d - c["frontier"])
        c["frontier"] = max(c["frontier"], d)
    for bill in _stack():
        bill.rounds += inc
    return inc


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
