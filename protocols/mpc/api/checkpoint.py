"""Saving and restoring tp.Variables, each server its own share.

`save_variables(variables, root)` makes each share holder write its shares
with ops placed on its own device, into its own directory:

    root/S1/tp_variables.json              S1's metadata (public: names, shapes,
    root/S1/shares.index                   dtypes, ring, encoding, checkpoint id)
    root/S1/shares.data-00000-of-00001     S1's shares, a TF tensor bundle (SaveV2)
    root/S2/...                            the same for S2

No file holds both shares of anything: a copy of one server's directory
reveals nothing. The paths and the metadata are the client's public data,
given to each server the way the ops themselves are (constants placed on its
device: control plane, not channel messages; the channel seals numbers
only, and a path is an instruction, not data); in distributed mode `root` is
a path on each server's own machine. Shares never leave their server. The
one thing that comes back is each directory's metadata at restore time, as
bytes through the channel (sealed and counted like any message), which the
client checks before any variable changes.

`restore_variables(variables, root)` checks, before assigning anything, that
both directories exist and belong to the same save, that the ring, encoding
and backend match the runtime's, and that every variable is there with its
shape and a compatible dtype; then each server reads its own bundle and
assigns its own share variables. Shares do not depend on the runtime's PRG
keys, so a checkpoint restores into variables of a fresh runtime (after
tp.reset(); tp.init()) and the restored shares are bit-identical.

Both run eagerly (outside tf.function), like tf.train.Checkpoint.write.
"""
from __future__ import annotations

import json
import os
import re
import secrets
from typing import Dict, List, Mapping, Sequence, Tuple, Union

import tensorflow as tf

from ..runtime import context as _context
from ..runtime import shares as _sh
from ..runtime.runtime import CLIENT
from .variable import PrivateVariable

FORMAT = "tf_privpy.variables/1"
#: one directory per share: share 0 (S1's) and share 1 (S2's)
SHARE_DIRS = ("S1", "S2")
META_FILE = "tp_variables.json"
BUNDLE = "shares"
_KEY_OK = re.compile(r"^[A-Za-z0-9_.\-/]+$")

Variables = Union[Sequence[PrivateVariable], Mapping[str, PrivateVariable]]


class CheckpointError(ValueError):
    """A checkpoint that does not fit the variables or the runtime."""


def _entries(variables: Variables, what: str) -> List[Tuple[str, PrivateVariable]]:
    """(key, variable) pairs: a dict's keys, or each variable's name."""
    if isinstance(variables, PrivateVariable):
        variables = [variables]
    if isinstance(variables, Mapping):
        items = list(variables.items())
    else:
        items = [(getattr(v, "name", None), v) for v in variables]
    if not items:
        raise ValueError(f"{what}: no variables given")
    seen = set()
    for key, v in items:
        if not isinstance(v, PrivateVariable):
            raise TypeError(f"{what} takes tp.Variables, got {type(v).__name__}"
                            + (f" for '{key}'" if key else ""))
        if not isinstance(key, str) or not _KEY_OK.match(key) or key.startswith("_tp"):
            raise ValueError(f"{what}: {key!r} is not a usable checkpoint key (letters, digits, "
                             "_ . - /; not starting with _tp)")
        if key in seen:
            raise ValueError(f"{what}: two variables named '{key}'; give them distinct names or "
                             "pass a dict {key: variable}")
        seen.add(key)
    return items


def _check_eager(what: str) -> None:
    if not tf.executing_eagerly():
        raise RuntimeError(f"{what} runs eagerly: call it outside tf.function")


def _holders(h: _context.Handle) -> Tuple[str, str]:
    return tuple(h.backend.holders)


def _to_holder(h, holder: str, *values) -> List[tf.Tensor]:
    """Public data of the client (paths, names, metadata) placed on a
    holder's device, as the graph's own constants are: not a channel
    message (sealed links carry numbers only)."""
    with tf.device(h.runtime.device(holder)):
        return [tf.identity(tf.constant(v)) for v in values]


def _bytes_to_client(h, holder: str, *strings: tf.Tensor) -> List[bytes]:
    """Scalar strings on a holder (public metadata) brought to the client
    as bytes, through the channel (a sealed link carries uint8, not strings)."""
    if holder == CLIENT:
        return [t.numpy() for t in strings]
    with tf.device(h.runtime.device(holder)):
        raw = [tf.io.decode_raw(t, tf.uint8) for t in strings]
    return [t.numpy().tobytes() for t in h.runtime.send(holder, CLIENT, *raw)[0]]


def _check_variables(entries) -> None:
    """Every variable belongs to the active runtime (a clear error otherwise)."""
    for _, v in entries:
        v._handle()  # noqa: SLF001


def save_variables(variables: Variables, root: str) -> str:
    """Saves tp.Variables: each server writes its own shares to root/<server>.

    Args:
      variables: a list of tp.Variables (keyed by their names, which must
        then be distinct) or a dict {key: tp.Variable}.
      root: the checkpoint directory; S1 writes root/S1, S2 writes root/S2
        (a path each server can write: in distributed mode, on its machine).

    Returns:
      root.

    Example:
      >>> w = tp.Variable(tp.share([[0.5, -1.0]]), name="w")
      >>> tp.save_variables([w], "/tmp/ckpt")       # /tmp/ckpt/S1/..., /tmp/ckpt/S2/...
      >>> w.assign(tp.share([[0.0, 0.0]]))
      >>> tp.restore_variables([w], "/tmp/ckpt"); w.reveal()
      <tf.Tensor: shape=(1, 2), dtype=float32, numpy=array([[ 0.5, -1. ]], dtype=float32)>
    """
    _check_eager("tp.save_variables")
    entries = _entries(variables, "tp.save_variables")
    h = _context.get_handle()
    _check_variables(entries)
    cfg = h.config
    checkpoint_id = secrets.token_hex(16)
    for i, (holder, sub) in enumerate(zip(_holders(h), SHARE_DIRS)):
        meta = {
            "format": FORMAT, "share": i, "directory": sub, "id": checkpoint_id,
            "ring_bits": cfg.ring_bits, "frac_bits": cfg.frac_bits, "backend": cfg.backend,
            "variables": {k: {"shape": v.shape.as_list(), "dtype": v.dtype.name,
                              "name": v.name, "trainable": v.trainable}
                          for k, v in entries},
        }
        names = ["_tp/id"] + [f"{k}/share" for k, _ in entries]
        meta_t, meta_path, prefix, names_t, slices, id_t = _to_holder(
            h, holder, json.dumps(meta, indent=1, sort_keys=True),
            os.path.join(root, sub, META_FILE), os.path.join(root, sub, BUNDLE), names,
            [""] * len(names), checkpoint_id)
        with tf.device(h.runtime.device(holder)):
            tf.io.write_file(meta_path, meta_t)  # also creates root/<server>
            tensors = [id_t] + [
                v.share_variables[i].read_value() for _, v in entries]
            tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names_t, shape_and_slices=slices,
                              tensors=tensors)
    return root


def _tf_call(fn, what: str):
    try:
        return fn()
    except tf.errors.NotFoundError as e:
        raise FileNotFoundError(f"{what}: {_clean(e.message)}") from None
    except tf.errors.OpError as e:
        raise CheckpointError(f"{what}: {_clean(e.message)}") from None


def _clean(msg: str) -> str:
    msg = re.sub(r"^\{\{[^}]*\}\}\s*", "", msg)
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", msg, flags=re.S)


def _read_meta(h, holder: str, i: int, root: str) -> Tuple[dict, str]:
    """(metadata, checkpoint id of the bundle) of share i's directory, read
    on its holder and sent to the client (both are public)."""
    sub = SHARE_DIRS[i]
    where = os.path.join(root, sub)
    meta_path, prefix, id_name, slice_ = _to_holder(
        h, holder, os.path.join(where, META_FILE), os.path.join(where, BUNDLE), ["_tp/id"],
        [""])
    what = f"tp.restore_variables: no tf_privpy checkpoint of {sub}'s shares at {where}"

    def read():
        with tf.device(h.runtime.device(holder)):
            raw = tf.io.read_file(meta_path)
            bundle_id = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=id_name,
                                             shape_and_slices=slice_, dtypes=[tf.string])[0]
        return _bytes_to_client(h, holder, raw, bundle_id)

    raw, bundle_id = _tf_call(read, what)
    try:
        meta = json.loads(raw.decode("utf-8"))
        bundle_id = bundle_id.decode("utf-8")
    except ValueError:
        raise CheckpointError(f"tp.restore_variables: {where}/{META_FILE} is not a tf_privpy "
                              "variables checkpoint (unreadable metadata)") from None
    return meta, bundle_id


def _check_meta(h, metas: Sequence[dict], bundle_ids: Sequence[str], entries,
                root: str) -> None:
    cfg = h.config
    for i, (m, bid) in enumerate(zip(metas, bundle_ids)):
        where = os.path.join(root, SHARE_DIRS[i])
        if m.get("format") != FORMAT:
            raise CheckpointError(f"tp.restore_variables: {where} holds format "
                                  f"{m.get('format')!r}, expected {FORMAT!r}")
        if m.get("share") != i:
            raise CheckpointError(
                f"tp.restore_variables: {where} holds share {m.get('share')} (written as "
                f"{m.get('directory')}), expected share {i}: the server directories were "
                "swapped or copied")
        if m.get("id") != bid:
            raise CheckpointError(f"tp.restore_variables: the metadata and the shares in "
                                  f"{where} come from different saves")
        got = (m.get("ring_bits"), m.get("frac_bits"), m.get("backend"))
        want = (cfg.ring_bits, cfg.frac_bits, cfg.backend)
        if got != want:
            raise CheckpointError(
                f"tp.restore_variables: {where} was saved with ring 2^{got[0]}, "
                f"{got[1]} fractional bits, backend {got[2]!r}; the runtime has ring "
                f"2^{want[0]}, {want[1]} fractional bits, backend {want[2]!r}. Restore it in "
                f"a runtime with that config (tp.init(tp.Config(ring_bits={got[0]}, "
                f"frac_bits={got[1]}, backend={got[2]!r}))).")
    if metas[0]["id"] != metas[1]["id"]:
        raise CheckpointError(
            f"tp.restore_variables: {root}/{SHARE_DIRS[0]} and {root}/{SHARE_DIRS[1]} come "
            "from different saves; their shares do not add up to any saved value")
    stored: Dict[str, dict] = metas[0]["variables"]
    missing = [k for k, _ in entries if k not in stored or k not in metas[1]["variables"]]
    if missing:
        raise CheckpointError(f"tp.restore_variables: {root} has no variable {missing}; it "
                              f"holds {sorted(stored)}")
    for k, v in entries:
        s = stored[k]
        if list(s["shape"]) != v.shape.as_list():
            raise CheckpointError(f"tp.restore_variables: '{k}' was saved with shape "
                                  f"{tuple(s['shape'])}, the variable has shape "
                                  f"{tuple(v.shape.as_list())}")
        saved = tf.as_dtype(s["dtype"])
        if v.dtype.is_integer and saved.is_floating:
            raise CheckpointError(f"tp.restore_variables: '{k}' was saved as {saved.name}, "
                                  f"the variable is {v.dtype.name}")


def restore_variables(variables: Variables, root: str) -> None:
    """Restores tp.Variables saved by `save_variables`, each server its own share.

    Checks everything first (both directories present and from the same
    save; ring, fractional bits and backend equal to the runtime's; every
    variable present with its shape; no float checkpoint into an integer
    variable), so that a failed restore changes no variable. The variables
    must belong to the active runtime, which may be a fresh one: shares do
    not depend on the PRG keys.

    Args:
      variables: as for save_variables (the same keys).
      root: the checkpoint directory given to save_variables.

    Raises:
      FileNotFoundError: a server's directory or files are missing.
      CheckpointError (a ValueError): the checkpoint does not fit.

    Example:
      >>> tp.reset(); tp.init()                        # fresh keys
      >>> w = tp.Variable(tf.zeros([1, 2]), name="w")
      >>> tp.restore_variables([w], "/tmp/ckpt")
    """
    _check_eager("tp.restore_variables")
    entries = _entries(variables, "tp.restore_variables")
    h = _context.get_handle()
    _check_variables(entries)
    holders = _holders(h)
    metas, ids = zip(*[_read_meta(h, holder, i, root) for i, holder in enumerate(holders)])
    _check_meta(h, metas, ids, entries, root)
    names = [f"{k}/share" for k, _ in entries]
    restored = []
    for i, holder in enumerate(holders):
        where = os.path.join(root, SHARE_DIRS[i])
        prefix, names_t, slices = _to_holder(
            h, holder, os.path.join(where, BUNDLE), names, [""] * len(names))

        def read(prefix=prefix, names_t=names_t, slices=slices, holder=holder):
            with tf.device(h.runtime.device(holder)):
                return tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names_t,
                                            shape_and_slices=slices,
                                            dtypes=[tf.int64] * len(names))

        shares = _tf_call(read, f"tp.restore_variables: reading {where}")
        for (k, v), s in zip(entries, shares):
            want = _sh.storage(v.shape.as_list(), h.config.limbs)
            if s.shape.as_list() != want:  # the handle's shape: no data moves
                raise CheckpointError(f"tp.restore_variables: '{k}' in {where} has storage "
                                      f"shape {s.shape}, expected {want}: corrupt checkpoint")
        restored.append(shares)
    for i, holder in enumerate(holders):
        with tf.device(h.runtime.device(holder)):
            for (_, v), s in zip(entries, restored[i]):
                v.share_variables[i].assign(s, read_value=False)
