"""tp.share_to_disk: the data owner shares a large matrix straight onto S1's
and S2's disks, one block at a time.

For each block of rows, the owner's device (the client) encodes the block in
fixed point and splits it into two fresh shares, exactly as tp.share does
(the ShareSplit kernel: a new seed from the OS CSPRNG at every call, so no
mask is ever reused), and sends one share to S1 and one to S2 through the
channel (counted, and sealed where links are); each server writes its share
into its own file with an op on its own device. Memory: one block of
plaintext and its two shares, whatever the array's size.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator, Optional, Union

import numpy as np
import tensorflow as tf

from tf_privpy import distributed
from tf_privpy.large import party as P
from tf_privpy.large import stream as S
from tf_privpy.large.array import LargeArray
from tf_privpy.protocols.he.progress import Progress
from tf_privpy.protocols.mpc.api.ops import math_ops as M

Source = Union[str, os.PathLike, np.ndarray, Iterable[np.ndarray]]
_DTYPES = (np.float32, np.float64, np.int32, np.int64)


def _blocks(source: Source) -> Iterator[np.ndarray]:
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not path.endswith(".npy"):
            raise ValueError(f"tp.share_to_disk reads .npy files (np.save), got {path!r}: "
                             "pass a generator of row blocks for other formats")
        source = np.load(path, mmap_mode="r")  # read block by block, never whole
    if isinstance(source, np.ndarray):
        arr = source

        def chunks():
            yield arr  # split into blocks by the caller
        return chunks()
    if callable(source):
        source = source()
    try:
        return iter(source)
    except TypeError:
        raise TypeError(f"tp.share_to_disk takes a .npy path, a 2-D array or an iterable of "
                        f"2-D row blocks, got {type(source).__name__}") from None


def share_to_disk(source: Source, dtype: Optional[tf.DType] = None,
                  rows: Optional[int] = None, name: Optional[str] = None,
                  progress: Progress = None) -> LargeArray:
    """Secret-shares a [rows, columns] matrix onto S1's and S2's disks as a
    tp.LargeArray, without holding more than one block in memory.

    Each block of rows (tp.Config(large_block_bytes=...) of one share) is
    encoded and split on this device (the data owner's) into fresh shares,
    as tp.share does, and each share goes to its server through the channel,
    which appends it to its own file. Values are range-checked as tp.share
    checks them (NaN, Inf, |x| >= the config's bound raise ValueError
    naming the row), and a failure removes what was written.

    Args:
      source: a 2-D array (np.memmap works: read block by block), the path
        of a .npy file (opened memory-mapped), or an iterable (or a callable
        returning one, e.g. a generator function) of 2-D row blocks of equal
        column counts and any heights.
      dtype: the dtype the array reveals to (default: the source's, float64
        for other kinds).
      rows: the total row count of a generator, for the progress line only.
      name: a name for error messages.
      progress: True for a progress line on stderr, a callable (done, total,
        seconds), or False; None: when stderr is a terminal.

    Returns:
      The LargeArray (its id, `x.id`, reopens it with tp.LargeArray.open).

    Raises:
      ValueError: values out of range, blocks of another column count.
      LargeArrayError: no large-array folder on S1 or S2 (tp.init(
        large_array_dirs=...), or the servers' --large_array_dir).

    Example:
      >>> x = tp.share_to_disk("features.npy", progress=True)
      >>> def blocks():                       # rows made on the fly
      ...     for i in range(100):
      ...         yield np.random.default_rng(i).normal(size=(10_000, 16))
      >>> y = tp.share_to_disk(blocks, rows=1_000_000)
    """
    h = S.handle()
    label = name or "tp.share_to_disk"
    it = _blocks(source)
    writer, fn, done = None, None, 0
    total = int(rows) if rows else 0
    rep = None

    def step(start, geo, args, n):
        at = S.place(h, start, geo)
        with tf.device(h.runtime.device("client")):
            x = M.share(args[0], name=label)
        S.write_block(h, at, 0, x)

    try:
        for block in it:
            block = np.asarray(block) if not isinstance(block, np.ndarray) else block
            if block.ndim != 2:
                raise ValueError(f"{label}: a LargeArray is 2-D [rows, columns] and so are "
                                 f"its row blocks, got shape {list(block.shape)}: reshape")
            if writer is None:
                vdtype = tf.as_dtype(dtype or (block.dtype if block.dtype.type in _DTYPES
                                               else np.float64))
                writer = S.Writer(h, block.shape[1], vdtype, total)
                geo = S.geometry(h, [], writer.id)
                steps = h.runtime.__dict__.setdefault("_large_array_steps", {})
                fn = steps.setdefault(("share", label), tf.function(step))
                if isinstance(source, (np.ndarray, str, os.PathLike)):
                    total = block.shape[0]  # the whole array: one "block" split below
                rep = S.reporter(progress, total,
                                 "share_to_disk" + (f" {name}" if name else ""))
            if block.shape[1] != writer.columns:
                raise ValueError(f"{label}: a block of {block.shape[1]} columns after blocks "
                                 f"of {writer.columns}")
            np_dtype = writer.dtype.as_numpy_dtype if writer.dtype.is_floating or \
                writer.dtype in (tf.int32, tf.int64) else np.float64
            for r in range(0, block.shape[0], writer.block_rows):
                part = np.ascontiguousarray(block[r:r + writer.block_rows], dtype=np_dtype)
                with tf.device(h.runtime.device("client")):
                    x = tf.constant(part)
                try:
                    fn(tf.constant(done, tf.int64), geo, (x,), part.shape[0])
                except tf.errors.InvalidArgumentError as e:
                    distributed.clear_remote_errors()
                    if "tf_privpy_large_" in e.message or "[LARGE]" in e.message:
                        raise P.translate(e) from None
                    raise ValueError(f"{M._clean_tf_message(e.message)} (rows from "
                                     f"{done})") from None
                except tf.errors.OpError as e:
                    distributed.clear_remote_errors()
                    raise P.translate(e) from None
                done += part.shape[0]
                rep.update(done, max(total, done))
        if writer is None:
            raise ValueError(f"{label}: the source holds no rows")
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return LargeArray.open(writer.finish(done))

