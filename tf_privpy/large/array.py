"""tp.LargeArray: a private matrix whose shares live on disk, S1's in S1's
folder and S2's in S2's, computed on block by block (tf_privpy/large/stream.py).

A LargeArray is a view: the array id (public) and a window of its rows and
columns. Slicing makes views without reading anything; computing streams
the view's blocks through the existing private ops (products, sums,
element-wise ops), each block read on S1 and S2 by ops on their own devices.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from tf_privpy.large import store_copy
from tf_privpy.large import stream as S
from tf_privpy.large.blockfile import LargeArrayError, check_id
from tf_privpy.protocols.he.progress import Progress
from tf_privpy.protocols.mpc.api.ops import _common as C
from tf_privpy.protocols.mpc.api.ops import array_ops as A
from tf_privpy.protocols.mpc.api.ops import math_ops as M
from tf_privpy.protocols.mpc.api.value import PrivateTensor

Out = str  # "auto", "memory" or "disk"
#: results up to this many blocks' bytes stay in memory with out="auto"
MEMORY_BLOCKS = 4


class LargeArray:
    """A private [rows, columns] array whose two shares are files on S1 and
    S2, never both in one place; computed on in blocks of bounded size.

    Make one with `tp.share_to_disk` (from an array, a .npy file or a
    generator of row blocks, by the data owner), `tp.LargeArray.from_store`
    (from a share-service upload) or `tp.LargeArray.open(id)` (written
    earlier). Rows and columns slice into views (`x[1000:2000, :8]`) without
    reading anything; `x[i]` is row i as a PrivateTensor.

    Operations stream block by block (rows per block: `tp.Config(
    large_block_bytes=...)` over a row's bytes), with a progress line on
    stderr for long work (progress=True, or a callable):
      - `x @ w`, `x.matmul(w)`: w private or public [columns, k] in memory;
        the [rows, k] result is a PrivateTensor, or a LargeArray when large;
      - `x.sum(axis)`, `x.mean(axis)`: axis 0 or None in memory, axis 1 as
        for matmul;
      - `x + y`, `x - y`, `x * y`, `-x`, `x.map(fn)`: element-wise with a
        public or private in-memory operand broadcast to a row (a scalar,
        [columns], [1, columns]) or another LargeArray of the same shape:
        a new LargeArray;
      - `x.to_private()`: a small view in memory.

    The results carry the existing private ops' tolerances (tests/
    tolerances.py): sums are exact, products truncate once per block.

    Example:
      >>> tp.init(large_array_dirs={"S1": "big/s1", "S2": "big/s2"})
      >>> x = tp.share_to_disk("features.npy")          # [10**7, 16] on disk
      >>> w = tp.share(np.ones([16, 1]))
      >>> scores = x @ w                                  # a LargeArray [10**7, 1]
      >>> tp.reveal(x.mean(axis=0))                       # [16] in memory
      >>> tp.reveal(x[:5, :3].to_private())
    """

    def __init__(self, array_id: str, shape: Sequence[int], dtype: tf.DType,
                 row0: int = 0, col0: int = 0, full_shape: Optional[Sequence[int]] = None):
        """Internal: use tp.share_to_disk, LargeArray.open or slicing."""
        self.id = check_id(array_id)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = tf.as_dtype(dtype)
        self.row0, self.col0 = int(row0), int(col0)
        self.full_shape = tuple(full_shape or self.shape)

    # ---------------------------------------------------------- making one
    @classmethod
    def open(cls, array_id: str) -> "LargeArray":
        """The whole array `array_id`, after S1's and S2's headers were read
        and checked to be one sharing in this runtime's ring (same id, shape,
        dtype; complete, not truncated): else LargeArrayError.

        Example:
          >>> x = tp.LargeArray.open("5f0c...")       # an id from x.id
        """
        h = S.handle()
        m = S.headers(h, check_id(array_id))
        return cls(array_id, m["shape"], tf.as_dtype(m["dtype"]))

    @staticmethod
    def list() -> list:
        """Headers (public metadata: id, shape, dtype, created) of the arrays
        S1 and S2 both hold."""
        return S.listing(S.handle())

    @classmethod
    def from_store(cls, name: str, owner: Optional[str] = None, progress: Progress = None,
                   dtype: tf.DType = tf.float64) -> "LargeArray":
        """A share-service upload (issue 12's store, tp.client.upload) as a
        LargeArray, without anyone holding it whole: S1 and S2 each copy
        their own share from their own store into their own large-array
        folder, block by block, with an op on their own device
        (tf_privpy/large/store_copy.py). The driver sees only public
        metadata (shape, upload id, owner) and the new headers.

        Both records are checked first (one sharing: same upload id, shape,
        ring and fractional bits; owned by `owner`; a 2-D matrix in this
        runtime's ring): a refusal copies nothing. A failure while copying
        (a damaged or replaced record, a full disk) removes what was
        written on both servers.

        Needs, on each of S1 and S2, a share store and a large-array folder
        in one process: tp.init(share_stores=..., large_array_dirs=...) in
        the embedded mode; --share_store and --large_array_dir on the
        servers (python -m tf_privpy.server).

        Args:
          name: the record's name.
          owner: who must own both records (the uploader's certificate CN).
            Names are first come, first served: pass it.
          progress: True for a progress line on stderr, a callable (done,
            total, seconds), or False; None: when stderr is a terminal. Each
            server copies in one op, so the line reports the whole copy.
          dtype: the dtype the array reveals to (the store keeps ring
            elements only).

        Raises:
          ShareServiceError: unknown name (NOT_FOUND), no store on a server,
            records that are not one sharing or of another ring
            (FAILED_PRECONDITION), not owned by `owner` (PERMISSION_DENIED).
          LargeArrayError: not a 2-D matrix (saying how to reshape), no
            large-array folder, or a copy that failed (nothing is left).

        Example:
          >>> tp.client.upload("features", x, cluster="hospital-a.json")  # the owner
          >>> big = tp.LargeArray.from_store("features", owner="hospital-a")  # the driver
          >>> tp.reveal(big.sum(axis=0))
        """
        array_id = store_copy.copy_from_store(name, owner, dtype, progress)
        try:
            return cls.open(array_id)
        except BaseException:
            store_copy.remove(S.handle(), array_id)
            raise

    def delete(self) -> None:
        """Removes both shares' files (every view of this array stops working)."""
        h = S.handle()
        for party in S.P.PARTIES:
            S.P.call(h, party, "remove", [self.id])

    # -------------------------------------------------------------- views
    @property
    def nbytes(self) -> int:
        """Bytes of one server's share of this view."""
        return int(np.prod(self.shape)) * 8 * S.handle().config.limbs

    @property
    def block_rows(self) -> int:
        """Rows of one block (tp.Config(large_block_bytes) over the bytes of a
        row of the file's share): what a streaming step holds at once."""
        return self._rows(S.handle())

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"<tp.LargeArray {self.id[:8]} shape={list(self.shape)} "
                f"dtype={self.dtype.name}>")

    def __getitem__(self, key) -> Union["LargeArray", PrivateTensor]:
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > 2:
            raise IndexError(f"a LargeArray has 2 dimensions, got {len(key)} indices")
        key = key + (slice(None),) * (2 - len(key))
        if isinstance(key[0], (int, np.integer)):
            i = int(key[0]) + (self.shape[0] if key[0] < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError(f"row {key[0]} is out of range for {self.shape[0]} rows")
            row = self._view(slice(i, i + 1), key[1]).to_private()
            return A.reshape(row, [row.shape[1]])
        return self._view(key[0], key[1])

    def _view(self, rows, cols) -> "LargeArray":
        spans = []
        for k, n, what in ((rows, self.shape[0], "rows"), (cols, self.shape[1], "columns")):
            if not isinstance(k, slice):
                raise IndexError(f"LargeArray {what} take slices (or an int row), got {k!r}")
            start, stop, step = k.indices(n)
            if step != 1:
                raise IndexError(f"LargeArray slices take step 1, got {step}: slice "
                                 "contiguous rows and columns")
            spans.append((start, max(start, stop)))
        (r0, r1), (c0, c1) = spans
        return LargeArray(self.id, (r1 - r0, c1 - c0), self.dtype, self.row0 + r0,
                          self.col0 + c0, self.full_shape)

    def _rows(self, h) -> int:
        """Rows per block, from the bytes of a whole row of the file (a
        block reads whole rows, whatever columns the view keeps)."""
        return S.block_rows(h, self.full_shape[1])

    # ------------------------------------------------------------ in memory
    def to_private(self, max_bytes: Optional[int] = None) -> PrivateTensor:
        """This view in memory as a PrivateTensor (read in blocks, shares
        concatenated on their servers). Refuses a view whose share exceeds
        max_bytes (default: 4 blocks, tp.Config(large_block_bytes=...)).

        Example:
          >>> tp.reveal(x[:10].to_private())
        """
        h = S.handle()
        limit = MEMORY_BLOCKS * int(h.config.large_block_bytes) if max_bytes is None \
            else int(max_bytes)
        if self.nbytes > limit:
            raise LargeArrayError(
                f"{self!r} holds {self.nbytes} bytes per share, more than {limit}: slice "
                "it smaller, compute on it as a LargeArray, or pass max_bytes")

        cols, dtype = self.shape[1], self.dtype

        def step(start, geo, carry, args, n):
            return S.read_block(h, S.place(h, start, geo), 0, n, cols, dtype), None

        parts, _ = S.run(h, ("read", cols, dtype), step, self.shape[0], self._rows(h),
                         "LargeArray read", False, S.geometry(h, [self]), collect=True)
        if not parts:
            raise LargeArrayError(f"{self!r} is empty")
        return parts[0] if len(parts) == 1 else A.concat(parts, 0)

    # ------------------------------------------------------------ products
    def matmul(self, w, out: Out = "auto", progress: Progress = None
               ) -> Union[PrivateTensor, "LargeArray"]:
        """self @ w for w [columns, k], private (a PrivateTensor) or public,
        in memory: each block's product is PrivateTensor @ w, PrivPy's
        multiplication (or a local product for a public w).

        Args:
          w: the [columns, k] operand.
          out: "memory" (a PrivateTensor), "disk" (a LargeArray), or "auto":
            memory while the result's share is at most 4 blocks.
          progress: True for a progress line on stderr, a callable
            (done, total, seconds), or False; None: when stderr is a terminal.

        Example:
          >>> y = x.matmul(tp.share(w), out="disk")
        """
        h = S.handle()
        wshape = C.static_shape(w)
        if wshape.rank != 2 or wshape[0] != self.shape[1]:
            raise ValueError(f"{self!r} @ w needs w of shape [{self.shape[1]}, k], got "
                             f"{wshape}")
        w = w if C.is_private(w) else C.public(w)
        dtype = C.result_dtype(self.dtype, C.operand_dtype(w))
        return self._blockwise(h, M.matmul, [w], int(wshape[1]), dtype, out,
                               "LargeArray matmul", progress)

    def __matmul__(self, w):
        return self.matmul(w)

    # ----------------------------------------------------------- reductions
    def sum(self, axis: Optional[int] = None, out: Out = "auto",
            progress: Progress = None) -> Union[PrivateTensor, "LargeArray"]:
        """The sum over rows (axis 0: [columns]), over columns (axis 1:
        [rows], placed as for matmul) or of everything (None: a scalar).
        Sums are local on S1 and S2: exact.

        Example:
          >>> tp.reveal(x.sum(axis=0))
        """
        h = S.handle()
        if axis is None or axis in (0, -2):
            cols, dtype = self.shape[1], self.dtype

            def step(start, geo, carry, args, n):
                block = S.read_block(h, S.place(h, start, geo), 0, n, cols, dtype)
                return None, M.add(carry, M.reduce_sum(block, 0))

            _, total = S.run(h, ("sum0", cols, dtype), step, self.shape[0], self._rows(h),
                             "LargeArray sum", progress, S.geometry(h, [self]),
                             carry=S.zeros(h, [cols], dtype))
            return total if axis is not None else M.reduce_sum(total)
        if axis in (1, -1):
            col = self._blockwise(h, _row_sums, [], 1, self.dtype, out, "LargeArray sum",
                                  progress)
            return A.reshape(col, [self.shape[0]]) if C.is_private(col) else col
        raise ValueError(f"axis must be None, 0 or 1 for a LargeArray, got {axis!r}")

    def mean(self, axis: Optional[int] = None, out: Out = "auto",
             progress: Progress = None) -> Union[PrivateTensor, "LargeArray"]:
        """sum(axis) divided by the count (a public division, one
        truncation). The result is float.

        Example:
          >>> tp.reveal(x.mean(axis=0))
        """
        count = {None: self.shape[0] * self.shape[1], 0: self.shape[0], -2: self.shape[0],
                 1: self.shape[1], -1: self.shape[1]}.get(axis)
        if count is None:
            raise ValueError(f"axis must be None, 0 or 1 for a LargeArray, got {axis!r}")
        s = self.sum(axis, out, progress)
        if isinstance(s, LargeArray):
            return s._stream_to_disk(S.handle(), M.divide, (s,), [float(count)], 1,
                                     tf.float64, "LargeArray mean", progress)
        return M.divide(s, float(count))

    # ---------------------------------------------------------- element-wise
    def map(self, fn: Callable[[PrivateTensor], PrivateTensor], *others,
            progress: Progress = None) -> "LargeArray":
        """A new LargeArray of fn(block, *other blocks) for each block of rows,
        with other LargeArrays of the same shape read alongside; fn must
        keep the block's rows (any element-wise private function: tp.nn.relu,
        tp.exp...) and may change the columns.

        Example:
          >>> z = x.map(tp.nn.sigmoid)
          >>> d = x.map(lambda a, b: (a - b) * (a - b), y)
        """
        h = S.handle()
        for o in others:
            if not isinstance(o, LargeArray) or o.shape != self.shape:
                raise ValueError(f"map's other operands are LargeArrays of shape "
                                 f"{list(self.shape)}, got {o!r}")
        # the result's columns and dtype, from fn on the first row
        first = self[:1].to_private(max_bytes=1 << 62)
        sample = fn(first, *[o[:1].to_private(max_bytes=1 << 62) for o in others])
        if not C.is_private(sample) or sample.shape.rank != 2 or sample.shape[0] != 1:
            raise ValueError("map's fn must return a PrivateTensor with the block's rows")
        views = (self,) + tuple(others)
        return self._stream_to_disk(h, fn, views, [], int(sample.shape[1]), sample.dtype,
                                    "LargeArray map", progress)

    def _elementwise(self, y, op, what: str) -> "LargeArray":
        if isinstance(y, LargeArray):
            return self.map(op, y)
        shape = C.static_shape(y)
        if shape.rank is None or shape.rank > 2 or (shape.rank == 2 and shape[0] != 1) or \
                (shape.rank >= 1 and shape[-1] not in (1, self.shape[1])):
            raise ValueError(f"{what} of {self!r} takes a scalar, a row ([{self.shape[1]}] "
                             f"or [1, {self.shape[1]}]) or a LargeArray of the same shape, "
                             f"got shape {shape}")
        y = y if C.is_private(y) else C.public(y)
        h = S.handle()
        dtype = C.result_dtype(self.dtype, C.operand_dtype(y))
        return self._stream_to_disk(h, op, (self,), [y], self.shape[1], dtype,
                                    f"LargeArray {what}", None)

    def __add__(self, y):
        return self._elementwise(y, M.add, "add")

    def __radd__(self, y):
        return self._elementwise(y, _radd, "add")

    def __sub__(self, y):
        return self._elementwise(y, M.subtract, "subtract")

    def __rsub__(self, y):
        return self._elementwise(y, _rsub, "subtract")

    def __mul__(self, y):
        return self._elementwise(y, M.multiply, "multiply")

    def __rmul__(self, y):
        return self._elementwise(y, _rmul, "multiply")

    def __neg__(self):
        return self.map(M.negative)

    # ------------------------------------------------------------- engine
    def _blockwise(self, h, fn, args, columns: int, dtype, out: Out, what: str,
                   progress: Progress):
        """fn(block, *args) per block: a PrivateTensor of the results
        concatenated in memory, or a LargeArray, as `out` says."""
        if out not in ("auto", "memory", "disk"):
            raise ValueError(f"out must be 'auto', 'memory' or 'disk', got {out!r}")
        result_bytes = self.shape[0] * columns * 8 * h.config.limbs
        if out == "disk" or (out == "auto" and
                             result_bytes > MEMORY_BLOCKS * int(h.config.large_block_bytes)):
            return self._stream_to_disk(h, fn, (self,), args, columns, dtype, what, progress)
        cols, vdtype = self.shape[1], self.dtype

        def step(start, geo, carry, args, n):
            block = S.read_block(h, S.place(h, start, geo), 0, n, cols, vdtype)
            return fn(block, *args), None

        parts, _ = S.run(h, ("blockwise", fn, cols, vdtype), step, self.shape[0],
                         self._rows(h), what, progress, S.geometry(h, [self]), args,
                         collect=True)
        return parts[0] if len(parts) == 1 else A.concat(parts, 0)

    def _stream_to_disk(self, h, fn, views, args, columns: int, dtype, what: str,
                        progress: Progress) -> "LargeArray":
        """fn(*blocks of views, *args) per block, written as a new LargeArray."""
        w = S.Writer(h, columns, dtype, self.shape[0])
        rows = min(min(v._rows(h) for v in views), w.block_rows)
        widths = tuple((v.shape[1], v.dtype) for v in views)

        def step(start, geo, carry, args, n):
            at = S.place(h, start, geo)
            y = fn(*[S.read_block(h, at, k, n, c, d) for k, (c, d) in enumerate(widths)],
                   *args)
            S.write_block(h, at, len(widths), y)
            return None, None

        try:
            S.run(h, ("to_disk", fn, widths), step, self.shape[0], rows, what, progress,
                  S.geometry(h, views, w.id), args)
        except BaseException:
            w.abort()
            raise
        return LargeArray.open(w.finish(self.shape[0]))


def _row_sums(x: PrivateTensor) -> PrivateTensor:
    return M.reduce_sum(x, 1, keepdims=True)


def _radd(a, b):
    return M.add(b, a)


def _rsub(a, b):
    return M.subtract(b, a)


def _rmul(a, b):
    return M.multiply(b, a)
