"""S1's and S2's side of tp.LargeArray: each reads and writes its own share
file with an op placed on its own device.

As tp.load does (tf_privpy/share_io.py), each action is a py-function op
whose Python function is registered, under a token naming the action and the
party, only in the process that holds that party's folder (`attach_folder`:
`python -m tf_privpy.server --large_array_dir DIR` on S1 and S2, or
`tp.init(large_array_dirs={"S1": ..., "S2": ...})` in the embedded mode,
which hosts both parties' devices). A distributed driver registers none, so
an op misplaced onto the client fails instead of reading a share there. The
driver sends an op only the array id, row and column numbers (public) and,
to write, the share that is already on that server; it receives only
headers (public metadata).

Example (embedded):
  >>> tp.init(large_array_dirs={"S1": "big/s1", "S2": "big/s2"})
"""
from __future__ import annotations

import json
import os
import re
from typing import Dict, Mapping, Optional, Sequence

import tensorflow as tf
from tensorflow.python.ops import script_ops

from tf_privpy import distributed
from tf_privpy.large import blockfile as bf
from tf_privpy.large.blockfile import LargeArrayError

PARTIES = bf.PARTIES
ACTIONS = ("create", "write", "finish", "info", "read", "remove", "list")
#: how a refusal crosses the op boundary (py_func keeps only the message)
_CODED = re.compile(r"\[LARGE\] ([^\n]*?)(?: \[Op:|\n|$)")

_keep: Dict[str, object] = {}  # the py_func registry holds weak references


def token(action: str, party: str) -> str:
    """The py_func registry key of `action` on party "S1" or "S2"."""
    return f"tf_privpy_large_{action}_{party.lower()}"


def text(t) -> str:
    """A scalar string tensor's text (a py-function's input)."""
    return t.numpy().decode()


def id_words(array_id: str):
    """An array id (32 hex digits) as two int64 words: how a traced step
    carries it, so that one trace serves every array."""
    v = int(bf.check_id(array_id), 16)
    return [((v >> s) & (2**64 - 1)) - (2**64 if (v >> s) & (1 << 63) else 0) for s in (64, 0)]


def id_text(words) -> str:
    hi, lo = (int(w) & (2**64 - 1) for w in words)
    return f"{hi:016x}{lo:016x}"


def attach_folder(party: str, folder: str) -> None:
    """Serves `party`'s share files of tp.LargeArray from `folder`, in this
    process (a server process, or the embedded driver)."""
    if party not in PARTIES:
        raise ValueError(f"party must be 'S1' or 'S2', got {party!r}")
    folder = bf.private_dir(folder)

    def create(array_id, header):
        h = bf.Header.from_json(text(header))
        if h.party != party or h.array_id != text(array_id):
            raise LargeArrayError(f"a header for {h.party}'s share was sent to {party}")
        bf.create(folder, h)
        return tf.constant(h.to_json())

    def write(array_id, row0, block):
        return tf.constant(bf.write_rows(folder, party, id_text(array_id.numpy()), int(row0),
                                         block.numpy()), tf.int64)

    def finish(array_id, rows):
        return tf.constant(bf.finish(folder, party, text(array_id), int(rows)).to_json())

    def info(array_id):
        return tf.constant(bf.open_header(folder, party, text(array_id)).to_json())

    def read(array_id, row0, rows, col0, cols):
        return tf.constant(bf.read_rows(folder, party, id_text(array_id.numpy()), int(row0),
                                        int(rows), int(col0), int(cols)))

    def remove(array_id):
        return tf.constant(json.dumps(bf.remove(folder, text(array_id))))

    def listing():
        return tf.constant(json.dumps(bf.listing(folder, party)))

    for action, fn in zip(ACTIONS, (create, write, finish, info, read, remove, listing)):
        register(party, action, fn)


def register(party: str, action: str, fn) -> None:
    """Registers fn as `action` on `party` in this process, its refusals
    (LargeArrayError, OSError) coded for translate(); detach_folders removes
    it with the rest (store_copy's "copy" uses it too)."""
    def run(*args):
        try:
            return fn(*args)
        except LargeArrayError as e:
            raise RuntimeError(f"[LARGE] {e}") from None
        except OSError as e:
            raise RuntimeError(f"[LARGE] {party}'s large-array folder: {e}") from None
    _keep[token(action, party)] = script_ops._py_funcs._funcs[token(action, party)] = run


def detach_folders() -> None:
    """Removes this process's large-array functions (a driver serves none)."""
    registry = script_ops._py_funcs._funcs
    for t in list(_keep):
        registry.pop(t, None)
        _keep.pop(t, None)


def attach_embedded(dirs: Optional[Mapping[str, str]]) -> None:
    """tp.init's large_array_dirs: this process serves both parties' folders,
    which must be two different folders, neither inside the other (never
    both shares in one place)."""
    detach_folders()
    if not dirs:
        return
    if set(dirs) != set(PARTIES):
        raise ValueError(f"large_array_dirs maps 'S1' and 'S2' to their folders, got keys "
                         f"{sorted(dirs)}")
    a, b = (os.path.realpath(dirs[p]) for p in PARTIES)
    if a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep):
        raise ValueError(f"large_array_dirs: S1's folder {dirs['S1']!r} and S2's "
                         f"{dirs['S2']!r} overlap: each server's shares need a folder of "
                         "its own (on a deployment, its own machine)")
    for party in PARTIES:
        attach_folder(party, dirs[party])


def op(h, party: str, action: str, inputs: Sequence, dtype: tf.DType) -> tf.Tensor:
    """The py-function op of `action`, placed on `party`'s device. Python
    values become constants there (made on the client they would be one
    more edge into the server outside the channel)."""
    with tf.device(h.runtime.device(party)):
        inputs = [v if isinstance(v, tf.Tensor) else tf.constant(v) for v in inputs]
        return tf.raw_ops.EagerPyFunc(input=inputs, token=token(action, party), Tout=[dtype])[0]


def translate(e: tf.errors.OpError, party: Optional[str] = None) -> LargeArrayError:
    """A failed op's error as a LargeArrayError saying what to do."""
    msg = e.message
    if "callback" in msg and "tf_privpy_large_" in msg:
        where = party or re.search(r"tf_privpy_large_\w+_(s[12])", msg).group(1).upper()
        return LargeArrayError(
            f"no large-array folder on {where}: start S1's and S2's servers with "
            "--large_array_dir DIR (python -m tf_privpy.server), or in the embedded mode "
            "call tp.init(large_array_dirs={'S1': DIR1, 'S2': DIR2})")
    m = _CODED.search(msg)
    return LargeArrayError(m.group(1).strip() if m else msg.strip())


def call(h, party: str, action: str, inputs: Sequence, dtype: tf.DType = tf.string):
    """Runs one action eagerly on `party`: decoded JSON for string results."""
    try:
        out = op(h, party, action, inputs, dtype)
        return json.loads(out.numpy().decode()) if dtype == tf.string else out
    except tf.errors.OpError as e:
        distributed.clear_remote_errors()
        raise translate(e, party) from None


def check_pair(array_id: str, m0: dict, m1: dict, ring_bits: int, frac_bits: int) -> dict:
    """S1's and S2's headers of one array: the same array (id, shape, dtype,
    block rows, ring), each complete and its own party's, in this runtime's
    ring. Returns S1's. Raises LargeArrayError before anything is computed."""
    for party, m in zip(PARTIES, (m0, m1)):
        if m["party"] != party or m["array_id"] != array_id:
            raise LargeArrayError(f"{party}'s file of LargeArray {array_id} is another "
                                  f"array's ({m['array_id']}, {m['party']})")
        if not m["complete"]:
            raise LargeArrayError(f"LargeArray {array_id} is still being written on {party}")
    for key in ("shape", "ring_bits", "frac_bits", "dtype", "block_rows", "created"):
        if m0[key] != m1[key]:
            raise LargeArrayError(
                f"S1's and S2's shares of LargeArray {array_id} disagree on {key} "
                f"({m0[key]} vs {m1[key]}): they are not one sharing; write the array again")
    if (m0["ring_bits"], m0["frac_bits"]) != (ring_bits, frac_bits):
        raise LargeArrayError(
            f"LargeArray {array_id} is shared in the {m0['ring_bits']}-bit ring with "
            f"{m0['frac_bits']} fractional bits; this runtime computes with {ring_bits} and "
            f"{frac_bits}: tp.init(tp.Config(ring_bits={m0['ring_bits']}, "
            f"frac_bits={m0['frac_bits']}))")
    return m0
