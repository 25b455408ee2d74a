"""One server's share of a tp.LargeArray on disk: the file format.

A share file is FOLDER/<array id>.share, written first as <array id>.part
and renamed when complete:

    MAGIC (17 bytes)  header length (4 bytes, little-endian)  header JSON,
    padded with spaces to HEADER_BYTES in all  |  the share's ring elements

The header (`Header`) names the array id (128 random bits, hex, chosen by the
driver: public), the party whose share this is, the shape [rows, cols], the
ring and fractional bits, the dtype the array reveals to, the block rows it
was written with and whether it is complete. The data are the share's
int64 words, little-endian, row-major; in the 128-bit ring two words (lo, hi)
per element, as a PrivateTensor's share holds them. Rows are written and read
at their own offsets, so a block is one seek and one read or write, and
memory is bounded by the block.

Nothing here knows TensorFlow or parties' devices: tf_privpy/large/party.py
calls it inside the ops it places on S1 and S2. A file that does not parse,
belongs to another party or array, or whose size disagrees with its header
(truncated) raises LargeArrayError saying so; the driver compares S1's and
S2's headers before anything is computed (party.check_pair).

Permissions: folders 0700, files 0600 (a share is one half of a secret; the
other half lives only on the other server).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from typing import List, Optional

import numpy as np

MAGIC = b"TFPRIVPY-LARGE-1\n"
HEADER_BYTES = 4096
FILE_MODE, DIR_MODE = 0o600, 0o700
ARRAY_ID = re.compile(r"[0-9a-f]{32}")
PARTIES = ("S1", "S2")


class LargeArrayError(Exception):
    """A tp.LargeArray cannot be written, read or computed on as asked: the
    message says what is wrong and what to do."""


@dataclasses.dataclass
class Header:
    """What a share file says about itself (all public)."""

    array_id: str
    party: str
    shape: List[int]
    ring_bits: int
    frac_bits: int
    dtype: str
    block_rows: int
    complete: bool = False
    created: float = dataclasses.field(default_factory=time.time)

    @property
    def limbs(self) -> int:
        return self.ring_bits // 64

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of the share."""
        return self.shape[1] * 8 * self.limbs

    def data_bytes(self) -> int:
        return self.shape[0] * self.row_bytes

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Header":
        d = json.loads(text)
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


def check_id(array_id: str) -> str:
    if not isinstance(array_id, str) or not ARRAY_ID.fullmatch(array_id):
        raise LargeArrayError(f"{array_id!r} is not a LargeArray id (32 hex digits)")
    return array_id


def private_dir(path: str) -> str:
    """`path` as a folder of mode 0700 (made, or tightened); its absolute path."""
    path = os.path.abspath(path)
    os.makedirs(path, mode=DIR_MODE, exist_ok=True)
    if os.stat(path).st_mode & 0o777 != DIR_MODE:
        try:
            os.chmod(path, DIR_MODE)
        except OSError as e:
            raise LargeArrayError(f"the LargeArray folder {path} cannot be made mode 700 "
                                  f"({e.strerror}): use a folder this user owns") from None
    return path


def path_of(folder: str, array_id: str, complete: bool = True) -> str:
    return os.path.join(folder, check_id(array_id) + (".share" if complete else ".part"))


def _encode_header(h: Header) -> bytes:
    body = h.to_json().encode()
    head = MAGIC + len(body).to_bytes(4, "little") + body
    if len(head) > HEADER_BYTES:
        raise LargeArrayError(f"a LargeArray header of {len(head)} bytes exceeds {HEADER_BYTES}")
    return head + b" " * (HEADER_BYTES - len(head))


def create(folder: str, h: Header) -> None:
    """Starts the share file of h.array_id (incomplete, no rows yet)."""
    path = path_of(folder, h.array_id, complete=False)
    if os.path.exists(path_of(folder, h.array_id)):
        raise LargeArrayError(f"LargeArray {h.array_id} exists on {h.party}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.write(fd, _encode_header(h))
    finally:
        os.close(fd)


def read_header(path: str, party: str, array_id: str) -> Header:
    """The header of a share file, checked: the magic, the party, the id and
    that the file holds exactly the rows the header says (a truncated or
    extended file is refused)."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        raise LargeArrayError(f"no LargeArray {array_id} on {party}: it was never written "
                              "there, or was deleted; check the id and the server's "
                              "large-array folder") from None
    if not head.startswith(MAGIC) or len(head) < HEADER_BYTES:
        raise LargeArrayError(f"{party}'s file of LargeArray {array_id} is not a share file "
                              "(bad magic or short header)")
    n = int.from_bytes(head[len(MAGIC):len(MAGIC) + 4], "little")
    try:
        h = Header.from_json(head[len(MAGIC) + 4:len(MAGIC) + 4 + n].decode())
    except (ValueError, TypeError, KeyError) as e:
        raise LargeArrayError(f"{party}'s header of LargeArray {array_id} does not parse "
                              f"({e})") from None
    if h.party != party:
        raise LargeArrayError(f"the file of LargeArray {array_id} in {party}'s folder holds "
                              f"{h.party}'s share: never copy a share file between servers")
    if h.array_id != array_id:
        raise LargeArrayError(f"{party}'s file named {array_id} holds LargeArray "
                              f"{h.array_id}: the file was renamed or replaced")
    if h.complete and size != HEADER_BYTES + h.data_bytes():
        raise LargeArrayError(
            f"{party}'s share of LargeArray {array_id} has {size - HEADER_BYTES} data bytes, "
            f"its header's shape {h.shape} needs {h.data_bytes()}: the file is truncated or "
            "damaged; write the array again")
    return h


def open_header(folder: str, party: str, array_id: str) -> Header:
    return read_header(path_of(folder, array_id), party, array_id)


def write_rows(folder: str, party: str, array_id: str, row0: int, data: np.ndarray) -> int:
    """Writes rows [row0, row0 + len(data)) of an incomplete share file;
    returns how many rows were written."""
    path = path_of(folder, array_id, complete=False)
    h = read_header(path, party, array_id)
    data = np.ascontiguousarray(data, dtype="<i8")
    if data.size and data.size != data.shape[0] * h.shape[1] * h.limbs:
        raise LargeArrayError(f"a block of shape {list(data.shape)} does not have rows of "
                              f"{h.shape[1]} columns of the {h.ring_bits}-bit ring")
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data.tobytes(), HEADER_BYTES + int(row0) * h.row_bytes)
    finally:
        os.close(fd)
    return int(data.shape[0])


def finish(folder: str, party: str, array_id: str, rows: int) -> Header:
    """Completes a share file of `rows` rows: size checked, header rewritten,
    fsync'd and renamed into place."""
    path = path_of(folder, array_id, complete=False)
    h = read_header(path, party, array_id)
    h.shape = [int(rows), h.shape[1]]
    h.complete = True
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size != HEADER_BYTES + h.data_bytes():
            raise LargeArrayError(f"{party} holds {size - HEADER_BYTES} bytes of LargeArray "
                                  f"{array_id}, {rows} rows need {h.data_bytes()}: a block "
                                  "was lost; write the array again")
        os.pwrite(fd, _encode_header(h), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(path, path_of(folder, array_id))
    return h


def read_rows(folder: str, party: str, array_id: str, row0: int, rows: int,
              col0: int, cols: int) -> np.ndarray:
    """Rows [row0, row0 + rows) and columns [col0, col0 + cols) of a complete
    share file: int64 [rows, cols] (with a trailing 2 in the 128-bit ring).
    Reads only those rows (one pread), never the file."""
    h = open_header(folder, party, array_id)
    n, d = h.shape
    if not (0 <= row0 and rows >= 0 and row0 + rows <= n and 0 <= col0 and cols >= 0
            and col0 + cols <= d):
        raise LargeArrayError(f"rows [{row0}, {row0 + rows}) x columns [{col0}, "
                              f"{col0 + cols}) are outside LargeArray {array_id} of shape "
                              f"{h.shape}")
    with open(path_of(folder, array_id), "rb") as f:
        f.seek(HEADER_BYTES + row0 * h.row_bytes)
        buf = np.empty(rows * d * h.limbs, dtype="<i8")
        got = f.readinto(memoryview(buf).cast("B"))
    if got != buf.nbytes:
        raise LargeArrayError(f"{party}'s share of LargeArray {array_id} ended early: the "
                              "file is truncated")
    block = buf.reshape([rows, d] + ([2] if h.limbs == 2 else []))
    if cols != d:
        block = np.ascontiguousarray(block[:, col0:col0 + cols])
    return block


def remove(folder: str, array_id: str) -> bool:
    """Deletes a share file (complete or not); whether one was there."""
    found = False
    for complete in (True, False):
        try:
            os.unlink(path_of(folder, array_id, complete))
            found = True
        except FileNotFoundError:
            pass
    return found


def listing(folder: str, party: str) -> List[dict]:
    """Headers of the complete arrays in a folder (unreadable files skipped)."""
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".share") and ARRAY_ID.fullmatch(name[:-6]):
            try:
                out.append(dataclasses.asdict(open_header(folder, party, name[:-6])))
            except LargeArrayError:
                continue
    return out


def header_dict(h: Optional[Header]) -> Optional[dict]:
    return None if h is None else dataclasses.asdict(h)
