"""tp.load and tp.publish: private programs read the data owners' uploads
and store results for their owners, through the share service's stores.

Each of S1 and S2 reads and writes its own share in its own store with an op
placed on its own device: a py-function op whose Python function is
registered, under a token naming the party, only in the process that holds
that party's store (`attach_store`: tf_privpy.server does it for
`--share-store`, `tp.init(share_stores=...)` in the embedded mode). The
driver sends only the record's name and receives only public metadata
(store.public: shape, upload id, owner, kind; never a share's SHA-256,
which would let it test guesses of a small share); the shares stay on their
servers and enter the protocols as a PrivateTensor. In a distributed run
the driver process has no such function registered, so an op misplaced onto
the client fails instead of reading a share there.

Example (embedded; the services' stores under stores/s1 and stores/s2):
  >>> tp.init(share_stores={"S1": "stores/s1", "S2": "stores/s2"})
  >>> x = tp.load("records")                     # uploaded by tp.client.upload
  >>> tp.publish(tp.nn.sigmoid(x @ w), "prediction", owner="hospital-a")
"""
from __future__ import annotations

import json
import os
import re
import threading
from typing import Dict, Mapping, Optional, Sequence

import grpc
import tensorflow as tf
from tensorflow.python.ops import script_ops

from tf_privpy import distributed
from tf_privpy.protocols.mpc.api.ops import _common as C
from tf_privpy.protocols.mpc.api.value import PrivateTensor
from tf_privpy.deploy.service.store import Store, StoreError, public, read_share, write_share

__all__ = ["attach_store", "checked_metadata", "detach_stores", "load", "publish"]

PARTIES = ("S1", "S2")
#: how a store's refusal crosses the op boundary (py_func keeps only the
#: message): "[CODE] message", CODE a grpc.StatusCode name
_CODED = re.compile(r"\[([A-Z][A-Z_]+)\] ([^\n]*?)(?: \[Op:|\n|$)")


def _client():
    """tf_privpy.deploy.service.client, imported on first use: importing it with
    tf_privpy would import the service's server module with the package, and
    `python -m tf_privpy.deploy.service.server` would then run a second copy of it
    (which then hung on SIGTERM)."""
    from tf_privpy.deploy.service import client
    return client


def _error(*args) -> Exception:
    """A tp.client.ShareServiceError(code, message, server)."""
    return _client().ShareServiceError(*args)


_keep: Dict[str, object] = {}  # the registry holds weak references
_lock = threading.Lock()


def token(action: str, party: str) -> str:
    """The py_func registry key of `action` ("info", "probe", "read", "write") on
    party "S1" or "S2"."""
    return f"tf_privpy_share_{action}_{party.lower()}"


def _op_error(e: StoreError) -> Exception:
    return RuntimeError(f"[{e.code}] {e}")


def attach_store(party: str, store_dir: str) -> None:
    """Serves `party`'s ("S1"/"S2") side of tp.load/tp.publish from the store
    in store_dir, in this process (a server process, or the embedded driver,
    which hosts every party's device)."""
    if party not in PARTIES:
        raise ValueError(f"party must be 'S1' or 'S2', got {party!r}")
    index = PARTIES.index(party)
    stores: Dict[tuple, Store] = {}

    def store(ring_bits: int = 128, frac_bits: int = 20) -> Store:
        # One Store per encoding, opened once: opening cleans the temp files
        # of dead writers, never while this process writes.
        with _lock:
            key = (ring_bits, frac_bits)
            if key not in stores:
                stores[key] = Store(store_dir, ring_bits, frac_bits)
            return stores[key]

    def info(name):
        try:
            meta = store().require(name.numpy().decode(), None)
        except StoreError as e:
            raise _op_error(e) from None
        return tf.constant(json.dumps(public(meta)))

    def probe(name):
        # info without NOT_FOUND: "null" for a missing record. A remote op that
        # fails can fail the next op enqueued on the same server with the same
        # error (TF's remote eager executor), so tp.publish's existence check
        # must not use a failing op as its "no".
        try:
            meta = store().info(name.numpy().decode())
        except StoreError as e:
            raise _op_error(e) from None
        return tf.constant(json.dumps(public(meta)))

    def read(name, upload_id):
        try:
            meta, share = read_share(store(), name.numpy().decode(), index)
        except StoreError as e:
            raise _op_error(e) from None
        if meta["upload_id"] != upload_id.numpy().decode():
            raise RuntimeError(f"[ABORTED] record {meta['name']!r} was replaced while it was "
                               "being loaded: load it again")
        return tf.constant(share)

    def write(name, owner, upload_id, ring_bits, frac_bits, overwrite, share):
        try:
            meta, existed = write_share(
                store(int(ring_bits), int(frac_bits)), name.numpy().decode(), share.numpy(),
                index, owner.numpy().decode(), upload_id.numpy().decode(), bool(overwrite))
        except StoreError as e:
            raise _op_error(e) from None
        return tf.constant(json.dumps(dict(public(meta), existed=existed)))

    registry = script_ops._py_funcs._funcs
    for action, fn in (("info", info), ("probe", probe), ("read", read), ("write", write)):
        _keep[token(action, party)] = fn
        registry[token(action, party)] = fn


def detach_stores() -> None:
    """Removes this process's share-store functions (tp.init without
    share_stores: a driver must not serve a server's store)."""
    registry = script_ops._py_funcs._funcs
    for t in list(_keep):
        registry.pop(t, None)
        _keep.pop(t, None)


def _run(h, party: str, action: str, inputs, dtype):
    """The py-function op of `action` on `party`'s device. Python values
    become constants there too (a name made on the client would be one more
    edge into the server outside the channel)."""
    with tf.device(h.runtime.device(party)):
        inputs = [v if isinstance(v, tf.Tensor) else tf.constant(v) for v in inputs]
        return tf.raw_ops.EagerPyFunc(input=inputs, token=token(action, party), Tout=[dtype])[0]


def _translate(e: tf.errors.OpError, party: str) -> Exception:
    """The op's error as a ShareServiceError (code, the server, what to do)."""
    msg = e.message
    if "callback" in msg and "tf_privpy_share_" in msg:
        return _error(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"no share store on {party}: start its server with --share-store DIR "
            "(python -m tf_privpy.server), or in the embedded mode call "
            "tp.init(share_stores={'S1': DIR1, 'S2': DIR2})", party)
    # the first "[CODE] ..." that names a status (a remote error adds others)
    m = next((m for m in _CODED.finditer(msg) if hasattr(grpc.StatusCode, m.group(1))), None)
    if m is None:
        return _error(grpc.StatusCode.UNKNOWN, msg.strip(), party)
    code, text = m.group(1), m.group(2).strip()
    hint = {"NOT_FOUND": ": upload it first (tp.client.upload) or check the name"}.get(code, "")
    return _error(getattr(grpc.StatusCode, code), text + hint, party)


def _call(h, party: str, action: str, inputs, dtype):
    """The op's output (decoded JSON for info and write), errors translated.
    Remote eager ops run asynchronously: their errors come with the value."""
    try:
        out = _run(h, party, action, inputs, dtype)
        return json.loads(out.numpy().decode()) if dtype == tf.string else out
    except tf.errors.OpError as e:
        distributed.clear_remote_errors()
        raise _translate(e, party) from None


def _metadata(h, name: str) -> Sequence[dict]:
    metas = []
    for party in PARTIES:
        metas.append(_call(h, party, "info", [name], tf.string))
    return metas


def checked_metadata(h, name: str, owner: Optional[str], what: str) -> dict:
    """S1's public metadata of record `name` (read on S1 and S2 by the "info"
    op), after checking that both records are owned by `owner` (if given),
    are one sharing and are in this runtime's ring. `what` names the caller
    in errors. Raises ShareServiceError as tp.load documents."""
    m0, m1 = _metadata(h, name)
    if owner is not None and (m0["owner"], m1["owner"]) != (owner, owner):
        raise _error(grpc.StatusCode.PERMISSION_DENIED,
                     f"{what}({name!r}, owner={owner!r}): S1's record belongs to "
                     f"{m0['owner']!r} and S2's to {m1['owner']!r}; the program expects "
                     f"{owner!r}: check the name with its owner (names are first come, "
                     f"first served)")
    _client().check_pair(name, m0, m1)
    cfg = h.config
    if (m0["ring_bits"], m0["frac_bits"]) != (cfg.ring_bits, cfg.frac_bits):
        raise _error(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"{name!r} is stored in the {m0['ring_bits']}-bit ring with {m0['frac_bits']} "
            f"fractional bits; this runtime computes with {cfg.ring_bits} and "
            f"{cfg.frac_bits}: tp.init(tp.Config(ring_bits={m0['ring_bits']}, "
            f"frac_bits={m0['frac_bits']}))")
    return m0


def load(name: str, dtype: tf.DType = tf.float32,
         shape: Optional[Sequence[int]] = None, owner: Optional[str] = None) -> PrivateTensor:
    """The stored shares of `name` as a PrivateTensor, read on S1 and S2.

    Each server reads its own share from its own store with an op on its own
    device; the driver receives only the record's public metadata (shape,
    owner, upload id), checks that the two records are one sharing in this
    runtime's ring, and never sees a share. Works in eager mode and inside
    tf.function (the metadata is read when tracing, the shares at each run).

    Args:
      name: the record's name (tp.client.upload, or an earlier tp.publish).
      dtype: the dtype the PrivateTensor reveals to (the store keeps ring
        elements only).
      shape: the shape the program expects, if any; another raises ValueError.
      owner: who must own both records (the CN of the uploader's
        certificate, or the owner a result was published for). Names are
        first come, first served: without owner, a record another owner
        uploaded under the expected name first is loaded as well. Pass it.

    Returns:
      A PrivateTensor of the record's shape.

    Raises:
      ShareServiceError: unknown name (NOT_FOUND), no store attached, records
        that are not one sharing or of another ring (FAILED_PRECONDITION),
        a record not owned by `owner` (PERMISSION_DENIED).
      ValueError: the record's shape is not `shape`.

    Example:
      >>> tp.client.upload("features", x, cluster="owner.json")   # the owner
      >>> f = tp.load("features", shape=[100, 5], owner="hospital-a")  # the driver
      >>> tp.reveal(f @ w)
    """
    h = C.handle_of()
    with tf.init_scope():  # public metadata, read eagerly even while tracing
        m0 = checked_metadata(h, name, owner, "tp.load")
    cfg = h.config
    if shape is not None and list(shape) != m0["shape"]:
        raise ValueError(f"tp.load({name!r}): the record has shape {m0['shape']}, the "
                         f"program expects {list(shape)}")
    storage = m0["shape"] + ([2] if cfg.ring_bits == 128 else [])
    shares = []
    for party in PARTIES:
        s = _call(h, party, "read", [name, m0["upload_id"]], tf.int64)
        with tf.device(h.runtime.device(party)):
            shares.append(tf.reshape(s, storage))  # static shape for the protocols
    return C.wrap(h, shares, tf.as_dtype(dtype))


def publish(x: PrivateTensor, name: str, owner: str, overwrite: bool = False) -> dict:
    """Stores a PrivateTensor's shares as a result `owner` can fetch.

    S1 and S2 each write their own share into their own store, under one
    random upload id; nothing is revealed. Only `owner` (the CN of its
    certificate) can then fetch it, with tp.client.fetch(name), and
    reconstruct it. Both stores are checked before either writes, so a
    refused name leaves nothing behind. Call it eagerly (not in tf.function).

    Args:
      x: the result.
      name: the record's name (1-128 of letters, digits, '.', '_', '-').
      owner: who may fetch it.
      overwrite: replace an existing result of the same owner (never an
        upload: an owner's input is not replaced by a result).

    Returns:
      {"name", "shape", "upload_id", "owner", "existed"}.

    Raises:
      ShareServiceError: another owner's name (PERMISSION_DENIED), an
        existing name without overwrite, or an upload's name
        (ALREADY_EXISTS), a bad name or owner
        (INVALID_ARGUMENT), no store attached (FAILED_PRECONDITION).

    Example:
      >>> tp.publish(tp.nn.sigmoid(tp.load("features") @ w), "risk", owner="hospital-a")
      >>> tp.client.fetch("risk", cluster="hospital-a.json")   # on the hospital's machine
    """
    if not isinstance(x, PrivateTensor):
        raise TypeError(f"tp.publish takes a PrivateTensor, got {type(x).__name__}: share "
                        "public values with tp.share first")
    if not isinstance(owner, str) or not owner:
        raise ValueError("owner: the name (certificate CN) of who may fetch the result")
    try:
        Store.check_owner(owner)
    except StoreError as e:
        raise _error(getattr(grpc.StatusCode, e.code), str(e)) from None
    if not tf.executing_eagerly():
        raise RuntimeError("tp.publish writes to the servers' stores: call it eagerly, "
                           "outside tf.function (return the PrivateTensor from the function)")
    h = C.handle_of(x)
    for party in PARTIES:  # refuse before anything is written
        m = _call(h, party, "probe", [name], tf.string)
        if m is None:
            continue
        if m["owner"] != owner:
            raise _error(grpc.StatusCode.PERMISSION_DENIED,
                         f"record {name!r} belongs to another owner", party)
        if m.get("kind") == "upload":
            # the store refuses it too; this names it before anything is written
            raise _error(grpc.StatusCode.ALREADY_EXISTS,
                         f"record {name!r} is an upload of {owner!r} (an input): a result "
                         "never replaces it, overwrite or not; publish under another name",
                         party)
        if not overwrite:
            raise _error(grpc.StatusCode.ALREADY_EXISTS,
                         f"record {name!r} exists: pass overwrite=True to replace it", party)
    uid = os.urandom(16).hex()
    metas = []
    for party, share in zip(PARTIES, C.shares(x)):
        args = [name, owner, uid, h.config.ring_bits, h.config.frac_bits, overwrite, share]
        metas.append(_call(h, party, "write", args, tf.string))
    return {"name": name, "shape": metas[0]["shape"], "upload_id": uid, "owner": owner,
            "existed": all(m["existed"] for m in metas)}


def attach_embedded(stores: Optional[Mapping[str, str]]) -> None:
    """tp.init's share_stores: this process serves both parties' stores."""
    detach_stores()
    if stores:
        unknown = set(stores) - set(PARTIES)
        if unknown or len(stores) != 2:
            raise ValueError(f"share_stores maps 'S1' and 'S2' to their store folders, "
                             f"got keys {sorted(stores)}")
        for party in PARTIES:
            attach_store(party, stores[party])
