"""Block by block: how a tp.LargeArray computation runs.

One step is one tf.function, traced once per block height (the last block
may be shorter: two traces in all) and called once per block:

1. the block's first row, a public number, goes from the client to S1 and
   to S2 through the channel (counted, sealed where links are);
2. S1 and S2 each read their own share's rows with an op on their own
   device (party.op "read"), which become the block's PrivateTensor;
3. the existing private ops compute on it (the step's body);
4. a result that goes to disk is written the same way, each share by the
   op of the server that holds it; a result kept in memory, or the carry
   of a reduction, is returned as a PrivateTensor whose shares stay on S1
   and S2.

So neither share ever meets the other, nothing but row numbers and public
headers reaches or leaves the client, and memory is bounded by a block.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, List, Optional, Sequence

import tensorflow as tf

from tf_privpy import distributed
from tf_privpy.large import blockfile as bf
from tf_privpy.large import party as P
from tf_privpy.large.blockfile import LargeArrayError
from tf_privpy.protocols.he.progress import Progress, ProgressReporter
from tf_privpy.protocols.mpc.api.ops import _common as C
from tf_privpy.protocols.mpc.api.value import PrivateTensor
from tf_privpy.protocols.mpc.runtime import shares as sh


#: traced steps kept per runtime
MAX_STEPS = 64


def handle():
    """The current runtime, checked to be one that can hold a LargeArray."""
    h = C.handle_of()
    if h.backend.name != "privpy":
        raise LargeArrayError(f"tp.LargeArray needs the privpy backend (the {h.backend.name} "
                              "backend holds both shares on the client): tp.init() with the "
                              "default backend")
    return h


def block_rows(h, columns: int) -> int:
    """Rows per block: the config's block bytes over a row of one share."""
    row = max(1, columns) * 8 * h.config.limbs
    return max(1, int(h.config.large_block_bytes) // row)


def reporter(progress: Progress, total: int, what: str) -> ProgressReporter:
    """The library's progress convention (protocols/he/progress.py); None:
    on when stderr is a terminal."""
    if progress is None:
        progress = sys.stderr.isatty()
    return ProgressReporter(progress, total, what, "rows")


def zeros(h, shape: Sequence[int], dtype: tf.DType) -> PrivateTensor:
    """A sharing of zero made by S1 and S2 alone (0 + 0): the start of a sum."""
    s = []
    for party in P.PARTIES:
        with tf.device(h.runtime.device(party)):
            s.append(tf.zeros(sh.storage(list(shape), h.config.limbs), tf.int64))
    return C.wrap(h, s, dtype)


def geometry(h, views: Sequence, out_id: Optional[str] = None) -> tf.Tensor:
    """Where a step reads and writes, as a public int64 [k, 4] on the
    client: each view's id (two words), first row and first column, then
    the array written (out_id), if any. A step receives it as an argument,
    so one trace serves every view of the same widths."""
    rows = [P.id_words(v.id) + [v.row0, v.col0] for v in views]
    if out_id is not None:
        rows.append(P.id_words(out_id) + [0, 0])
    with tf.device(h.runtime.device("client")):
        return tf.constant(rows, tf.int64)


def place(h, start: tf.Tensor, geo: tf.Tensor) -> dict:
    """A block's first row and the geometry, sent from the client to S1 and
    to S2 (one message each): {party: (start, geometry)} on that party."""
    with tf.device(h.runtime.device("client")):
        start, geo = tf.cast(start, tf.int64), tf.cast(geo, tf.int64)
    out = {}
    for party in P.PARTIES:
        (s, g), _ = h.runtime.send("client", party, start, geo)
        out[party] = (s, g)
    return out


def read_block(h, at: dict, k: int, rows: int, cols: int, dtype: tf.DType) -> PrivateTensor:
    """Rows [start, start + rows) of the k-th view of the step's geometry
    (`cols` columns wide), read by S1 and S2 each from its own file."""
    shares = []
    for party in P.PARTIES:
        start, geo = at[party]
        with tf.device(h.runtime.device(party)):
            ident, row0, col0 = geo[k, :2], start + geo[k, 2], geo[k, 3]
        s = P.op(h, party, "read", [ident, row0, rows, col0, cols], tf.int64)
        with tf.device(h.runtime.device(party)):
            shares.append(tf.ensure_shape(s, sh.storage([rows, cols], h.config.limbs)))
    return C.wrap(h, shares, dtype)


def write_block(h, at: dict, k: int, x: PrivateTensor) -> None:
    """S1 and S2 each write their own share of x at the block's first row
    of the k-th array of the step's geometry."""
    for party, s in zip(P.PARTIES, C.shares(x)):
        start, geo = at[party]
        with tf.device(h.runtime.device(party)):
            ident = geo[k, :2]
        P.op(h, party, "write", [ident, start, s], tf.int64)


class Writer:
    """A new array being written on S1 and S2: create, write blocks (inside
    steps, with write_block), finish or abort. Its id is 128 random bits."""

    def __init__(self, h, columns: int, dtype: tf.DType, rows_hint: int = 0):
        self.h, self.columns, self.dtype = h, int(columns), tf.as_dtype(dtype)
        self.id = os.urandom(16).hex()
        self.block_rows = block_rows(h, columns)
        head = bf.Header(array_id=self.id, party="", shape=[int(rows_hint), self.columns],
                         ring_bits=h.config.ring_bits, frac_bits=h.config.frac_bits,
                         dtype=self.dtype.name, block_rows=self.block_rows)
        self.created = []
        try:
            for party in P.PARTIES:
                head.party = party
                P.call(h, party, "create", [self.id, head.to_json()])
                self.created.append(party)
        except BaseException:
            self.abort()
            raise

    def finish(self, rows: int) -> str:
        """Completes both files of `rows` rows; returns the array id."""
        try:
            for party in P.PARTIES:
                P.call(self.h, party, "finish", [self.id, int(rows)])
        except BaseException:
            self.abort()
            raise
        self.created = []
        return self.id

    def abort(self) -> None:
        for party in self.created:
            try:
                P.call(self.h, party, "remove", [self.id])
            except LargeArrayError:
                pass
        self.created = []


def run(h, key: tuple, step: Callable, total: int, rows: int, what: str,
        progress: Progress, geo: tf.Tensor, args: Sequence = (), carry=None,
        collect: bool = False):
    """Calls step(start, geo, carry, args, n) for each block [start, start + n)
    of `total` rows, `rows` at a time; step returns (block result or None,
    carry or None). Returns (the block results if collect, the last carry).

    The step is one tf.function per `key` (what the step's Python closes
    over: the operation, widths, dtypes), kept on the runtime: traced for a
    block's height and for the last block's, then called once per block,
    and again by the next operation of the same key on any array."""
    steps = h.runtime.__dict__.setdefault("_large_array_steps", {})
    fn = steps.get(key)
    if fn is None:
        while len(steps) >= MAX_STEPS:  # the oldest first (a map of many lambdas)
            steps.pop(next(iter(steps)))
        fn = steps[key] = tf.function(step)
    rep = reporter(progress, total, what)
    out: List = []
    for start in range(0, total, rows):
        n = min(rows, total - start)
        try:
            res, new = fn(tf.constant(start, tf.int64), geo, carry, tuple(args), n)
        except tf.errors.OpError as e:
            distributed.clear_remote_errors()
            raise P.translate(e) from None
        if new is not None:
            carry = new
        if collect:
            out.append(res)
        rep.update(start + n)
    return out, carry


def headers(h, array_id: str) -> dict:
    """S1's and S2's headers of array_id, checked as one sharing in this ring."""
    metas = [P.call(h, party, "info", [array_id]) for party in P.PARTIES]
    return P.check_pair(array_id, metas[0], metas[1], h.config.ring_bits, h.config.frac_bits)


def listing(h) -> List[dict]:
    """The arrays both S1 and S2 hold completely (S1's headers)."""
    got = [P.call(h, party, "list", []) for party in P.PARTIES]
    ids = {m["array_id"] for m in got[1]}
    return [m for m in got[0] if m["array_id"] in ids]

