"""tp.LargeArray.from_store: a share-service upload (issue 12's store)
becomes a LargeArray without anyone loading it whole.

The driver reads the record's public metadata on S1 and S2 (tp.load's "info"
op: shape, upload id, owner, kind; never a share's hash), checks the two are
one sharing of a 2-D matrix in this runtime's ring, picks a fresh random array
id and sends each server, in one traced call, the record's name, its upload id
and the LargeArray header it is to write (all public). Each of S1 and S2 then
copies its own share from its own store into its own large-array folder with a
py-function op on its own device ("copy"), registered only in a process that
holds both that party's store and its folder (`attach_copier`). The op reads
the record in chunks of one block (Store.chunks: the SHA-256 is checked as it
goes), writes whole rows at their offsets and completes the file only when
the record's checksum held; memory is bounded by two blocks. No share leaves
its server; the driver receives the two headers.

A failure on either server (a damaged record, a record replaced meanwhile, a
full disk) removes what was written on both.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Dict, Mapping, Optional

import numpy as np
import tensorflow as tf

from tf_privpy import distributed, share_io
from tf_privpy.deploy.service.store import Store, StoreError
from tf_privpy.large import blockfile as bf
from tf_privpy.large import party as P
from tf_privpy.large import stream as S
from tf_privpy.large.blockfile import LargeArrayError
from tf_privpy.protocols.he.progress import Progress

ACTION = "copy"


def copy_record(store: Store, folder: str, party: str, name: str, upload_id: str,
                head: bf.Header) -> bf.Header:
    """Copies `party`'s share of record `name` from `store` into a new share
    file of `folder` described by `head`, one block of rows at a time; the
    completed file's header. Refuses a record that is not this party's share
    of upload `upload_id` with head's shape, ring and fractional bits; on any
    failure the partial file is removed (nothing else was touched)."""
    index = bf.PARTIES.index(party)
    if head.party != party:
        raise LargeArrayError(f"a header for {head.party}'s share was sent to {party}")
    # whole rows per chunk: each one is a single write at its row's offset
    meta, chunks = store.chunks(name, None, max(1, head.block_rows) * head.row_bytes)
    # the record is read through the file opened by chunks(): a record
    # replaced after this point is not mixed in (its upload id is checked here)
    if meta["upload_id"] != upload_id:
        raise LargeArrayError(f"record {name!r} on {party} was replaced after its metadata was "
                              "read (another upload id): call from_store again")
    if meta["party"] != index:
        raise LargeArrayError(f"record {name!r} on {party} is party {meta['party']}'s share, "
                              f"not {party}'s")
    for key, want in (("shape", head.shape), ("ring_bits", head.ring_bits),
                      ("frac_bits", head.frac_bits)):
        if meta[key] != want:
            raise LargeArrayError(f"record {name!r} on {party} has {key} {meta[key]}, the "
                                  f"driver expected {want}: call from_store again")
    bf.create(folder, head)
    try:
        rows, rest = 0, b""
        width = head.shape[1] * head.limbs
        for chunk in chunks:
            buf = rest + chunk if rest else chunk
            whole = len(buf) // head.row_bytes
            if whole:
                block = np.frombuffer(buf, "<i8", whole * width).reshape(whole, width)
                bf.write_rows(folder, party, head.array_id, rows, block)
                rows += whole
            rest = buf[whole * head.row_bytes:]
        if rest or rows != head.shape[0]:
            raise LargeArrayError(f"record {name!r} on {party} holds {rows} rows and "
                                  f"{len(rest)} bytes, its shape {head.shape} says otherwise")
        return bf.finish(folder, party, head.array_id, rows)
    except StoreError as e:
        bf.remove(folder, head.array_id)
        raise LargeArrayError(f"record {name!r} on {party}: {e}") from None
    except BaseException:
        bf.remove(folder, head.array_id)
        raise


def attach_copier(party: str, store_dir: str, folder: str) -> None:
    """Serves `party`'s side of LargeArray.from_store in this process, which
    holds both its share store (store_dir) and its large-array folder: a
    server started with --share_store and --large_array_dir, or the embedded
    driver. Kept alive with the large-array functions (party.detach_folders
    removes it too)."""
    if party not in bf.PARTIES:
        raise ValueError(f"party must be 'S1' or 'S2', got {party!r}")
    folder = bf.private_dir(folder)
    stores: Dict[tuple, Store] = {}
    lock = threading.Lock()

    def store(ring_bits: int, frac_bits: int) -> Store:
        # opened once per encoding (opening cleans dead writers' temp files)
        with lock:
            key = (ring_bits, frac_bits)
            if key not in stores:
                stores[key] = Store(store_dir, ring_bits, frac_bits)
            return stores[key]

    def copy(name, upload_id, header):
        head = bf.Header.from_json(P.text(header))
        try:
            st = store(head.ring_bits, head.frac_bits)
            out = copy_record(st, folder, party, P.text(name), P.text(upload_id), head)
        except StoreError as e:
            raise LargeArrayError(f"record {P.text(name)!r} on {party}: {e}") from None
        return tf.constant(out.to_json())

    P.register(party, ACTION, copy)


def attach_embedded(stores: Optional[Mapping[str, str]],
                    dirs: Optional[Mapping[str, str]]) -> None:
    """tp.init with both share_stores and large_array_dirs: this process
    serves both parties' copies (after share_io and party attached and
    checked the two mappings)."""
    if stores and dirs:
        for party in bf.PARTIES:
            attach_copier(party, stores[party], dirs[party])


def _copy_step(h):
    """Both servers' copies in one traced call: they run concurrently, and
    the call returns only when both ops are done (a failed one cancels
    nothing that is already running), so the clean-up after it races with
    no copy."""
    def step(name, upload_id, head1, head2):
        return [P.op(h, party, ACTION, [name, upload_id, head], tf.string)
                for party, head in zip(bf.PARTIES, (head1, head2))]
    steps = h.runtime.__dict__.setdefault("_large_array_steps", {})
    return steps.setdefault(("from_store",), tf.function(step))


def remove(h, array_id: str) -> None:
    """Removes array_id's files (complete or not) on S1 and S2, where there are any."""
    for party in bf.PARTIES:
        try:
            P.call(h, party, "remove", [array_id])
        except LargeArrayError:
            pass


def copy_from_store(name: str, owner: Optional[str], dtype: tf.DType,
                    progress: Progress = None) -> str:
    """The driver's side of LargeArray.from_store (which documents it): the
    new array's id, after both servers copied their shares."""
    h = S.handle()
    if not tf.executing_eagerly():
        raise RuntimeError("tp.LargeArray.from_store writes files on S1 and S2: call it "
                           "eagerly, outside tf.function")
    m0 = share_io.checked_metadata(h, name, owner, "tp.LargeArray.from_store")
    shape = [int(d) for d in m0["shape"]]
    if len(shape) != 2:
        hint = (f"upload it as [{shape[0]}, -1] (x.reshape(len(x), -1): rows stay whole)"
                if len(shape) > 2 else "upload it as a column, x.reshape(-1, 1)"
                if len(shape) == 1 else "load a scalar with tp.load")
        raise LargeArrayError(f"tp.LargeArray.from_store({name!r}): a LargeArray is a 2-D "
                              f"matrix, the record has shape {shape}: {hint}, or load it "
                              "whole with tp.load and reshape if it is small")
    if shape[0] == 0:
        raise LargeArrayError(f"tp.LargeArray.from_store({name!r}): the record holds no rows")
    array_id = os.urandom(16).hex()
    cfg = h.config
    # one creation time for both headers: LargeArray.open compares it
    created = time.time()
    heads = [bf.Header(array_id=array_id, party=party, shape=shape, ring_bits=cfg.ring_bits,
                       frac_bits=cfg.frac_bits, dtype=tf.as_dtype(dtype).name,
                       block_rows=S.block_rows(h, shape[1]), created=created).to_json()
             for party in bf.PARTIES]
    rep = S.reporter(progress, shape[0], f"LargeArray.from_store {name}")
    try:
        with tf.device(h.runtime.device("client")):  # public strings, sent as arguments
            args = [tf.constant(v) for v in [name, m0["upload_id"]] + heads]
        out = _copy_step(h)(*args)
        got = [json.loads(t.numpy().decode()) for t in out]
    except tf.errors.OpError as e:
        distributed.clear_remote_errors()
        remove(h, array_id)
        raise P.translate(e) from None
    except BaseException:
        remove(h, array_id)
        raise
    if any(g["array_id"] != array_id or g["shape"] != shape for g in got):
        remove(h, array_id)
        raise LargeArrayError(f"the servers' copies of {name!r} disagree with its metadata: "
                              f"{got}")
    rep.update(shape[0])
    return array_id
