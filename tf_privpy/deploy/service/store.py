"""The share service's durable record store: one server's shares, by name.

Each record is one file, records/<name>.rec: a magic line, a JSON header
(name, owner, shape, dtype, ring_bits, frac_bits, party, size_bytes, sha256,
upload_id, kind, created) and the share's bytes (int64, little-endian; in the
128-bit ring two limbs lo, hi per element). A record is written to tmp/ first,
fsync'd, checked against its SHA-256 and renamed into records/ (then the
folder is fsync'd): a reader, or the service after a crash, sees the whole
record or none of it. Opening a store removes the temp files of processes
that are gone (a restarted service's interrupted uploads). Several processes
may open one folder (the service, and tp.load/tp.publish in the server's TF
process); a name is written by whole-file rename, so they never see a torn
record, and the check-then-rename of a commit holds a lock on the folder
(flock on records/.lock), so two writers of one name are serialised.

Rules (StoreError.code names the gRPC status the service answers with):
- a name is 1-128 of letters, digits, '.', '_', '-' and nothing else (no
  trailing newline: fullmatch), an owner 1-64 of the same (INVALID_ARGUMENT);
- dtype must be int64 and the ring and frac bits the store's (the cluster's):
  INVALID_ARGUMENT / FAILED_PRECONDITION; the bytes must be exactly
  prod(shape) * 8 * limbs (INVALID_ARGUMENT), at most max_record_bytes
  (RESOURCE_EXHAUSTED);
- idempotent: the same name with the same owner, metadata and bytes again is
  accepted and changes nothing; other content under an existing name is
  ALREADY_EXISTS unless the owner asks to overwrite; a record of another owner
  is PERMISSION_DENIED, to read or to write; a result (tp.publish) never
  replaces an upload (ALREADY_EXISTS, even with overwrite); a replacement
  with other content must carry a new upload id (a new sharing, never the
  old one's mask: INVALID_ARGUMENT);
- per-owner quota (the service's uploads, kind "upload"): at most
  quota_records records and quota_bytes bytes of shares per owner, counting
  uploads in progress (RESOURCE_EXHAUSTED);
- data that does not match its checksum is DATA_LOSS and nothing is stored.

Permissions: records, temp files and the lock file are 0600, the store's
folders (root, records/, tmp/) 0700; opening a store tightens folders and
records made by older versions (0755/0644), and refuses (FAILED_PRECONDITION)
a folder it cannot tighten. The metadata the driver may see (tp.load,
tp.publish) is public(meta): without the share's SHA-256, which would let it
test guesses of a small share.

A share is uniformly random, so no server can check that the value it hides
is in the fixed-point range: the owner's client checks that before sharing.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import threading
import time
import uuid
from typing import Dict, Iterator, Optional, Tuple

MAGIC = b"TFPRIVPY-SHARE-1\n"
#: used with fullmatch only: `$` in re.match also accepts a trailing newline
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: the owner names of ca.py's certificates (CNs), fullmatch
OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DTYPE = "int64"
KINDS = ("upload", "result")
DEFAULT_MAX_RECORD_BYTES = 1 << 30
FIELDS = ("name", "owner", "shape", "dtype", "ring_bits", "frac_bits", "party", "size_bytes",
          "sha256", "upload_id", "kind", "created")
#: what the driver may learn of a record (tp.load, tp.publish): all but the
#: share's SHA-256 (a one-element 64-bit share falls to 2^64 hashes)
PUBLIC = tuple(f for f in FIELDS if f != "sha256")
FILE_MODE, DIR_MODE = 0o600, 0o700
#: the fields two uploads of the same content must agree on
_SAME = ("owner", "shape", "dtype", "ring_bits", "frac_bits", "party", "size_bytes", "sha256",
         "kind")


_OPENED: set = set()  # store folders this process has opened (abspaths)


class StoreError(Exception):
    """code: the gRPC status name (grpc.StatusCode.<code>) the service answers."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def public(meta: Optional[dict]) -> Optional[dict]:
    """The record's metadata without what only its owner may see (the
    share's SHA-256): what the driver's ops return."""
    return None if meta is None else {k: meta[k] for k in PUBLIC if k in meta}


def _private_dir(path: str) -> None:
    """Makes `path` a folder of mode 0700: created so, or tightened when an
    older version (or the umask) left it open. Raises StoreError when it
    cannot be tightened (another user's folder)."""
    os.makedirs(path, mode=DIR_MODE, exist_ok=True)
    mode = os.stat(path).st_mode & 0o777
    if mode != DIR_MODE:
        try:
            os.chmod(path, DIR_MODE)
        except OSError as e:
            raise StoreError("FAILED_PRECONDITION", f"the store folder {path} is mode "
                             f"{mode:o}; cannot make it {DIR_MODE:o} ({e.strerror}): run "
                             f"the service as the folder's owner, or chmod 700 it") from None


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def record_bytes(shape, ring_bits: int) -> int:
    return int(math.prod(shape)) * 8 * (ring_bits // 64)


class Pending:
    """A record being written (Store.begin): write() the bytes in order, then
    commit(); abort() (or a failed commit) removes the temp file."""

    def __init__(self, store: "Store", meta: dict, overwrite: bool):
        self.store, self.meta, self.overwrite = store, meta, overwrite
        self.released = False  # no longer counted in the owner's quota (Store._release)
        self.received = 0
        self._hash = hashlib.sha256()
        self.path = os.path.join(store.tmp, f"{os.getpid()}-{uuid.uuid4().hex}.part")
        self._f = os.fdopen(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE),
                            "wb")
        head = json.dumps(meta, sort_keys=True).encode()
        self._f.write(MAGIC + len(head).to_bytes(4, "little") + head)

    def write(self, offset: int, data: bytes) -> None:
        if offset != self.received:
            raise StoreError("INVALID_ARGUMENT", f"chunk at offset {offset}, expected "
                             f"{self.received}: chunks must arrive in order")
        if self.received + len(data) > self.meta["size_bytes"]:
            raise StoreError("INVALID_ARGUMENT", f"more data than the declared shape "
                             f"{self.meta['shape']} holds ({self.meta['size_bytes']} bytes)")
        self._f.write(data)
        self._hash.update(data)
        self.received += len(data)

    def commit(self, sha256_hex: Optional[str] = None) -> Tuple[dict, bool]:
        """Checks size and checksum, makes the record durable and visible.
        Returns (metadata, existed): existed when an identical record was there."""
        try:
            if self.received != self.meta["size_bytes"]:
                raise StoreError("INVALID_ARGUMENT", f"{self.received} bytes received, the "
                                 f"shape {self.meta['shape']} needs {self.meta['size_bytes']}")
            digest = self._hash.hexdigest()
            for claimed in (self.meta["sha256"], sha256_hex):
                if claimed is not None and claimed != digest:
                    raise StoreError("DATA_LOSS", "the data does not match its SHA-256: "
                                     "nothing stored")
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
            return self.store._install(self.path, self.meta, self.overwrite)
        finally:
            self.abort()

    def abort(self) -> None:
        self.store._release(self)
        if not self._f.closed:
            self._f.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class Store:
    """One server's records in folder `root`. quota_bytes/quota_records: the
    most each owner may keep uploaded (kind "upload", uploads in progress
    included); None: no limit (the servers' own tp.publish writes are never
    limited)."""

    def __init__(self, root: str, ring_bits: int = 128, frac_bits: int = 20,
                 max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                 quota_bytes: Optional[int] = None, quota_records: Optional[int] = None):
        if ring_bits not in (64, 128):
            raise ValueError(f"ring_bits must be 64 or 128, got {ring_bits}")
        root = os.path.abspath(root)
        self.root, self.ring_bits, self.frac_bits = root, ring_bits, frac_bits
        self.max_record_bytes = int(max_record_bytes)
        self.quota_bytes = int(quota_bytes) if quota_bytes else None
        self.quota_records = int(quota_records) if quota_records else None
        self.records = os.path.join(root, "records")
        self.tmp = os.path.join(root, "tmp")
        for d in (root, self.records, self.tmp):
            _private_dir(d)
        self._tighten_files()
        self._clean_tmp()
        _OPENED.add(self.root)
        self._lock = threading.Lock()
        #: uploads in progress in this process, by owner: [bytes, count]
        self._pending: Dict[str, list] = {}
        self._heads: Dict[str, tuple] = {}  # name -> (stat key, owner, kind, size)

    def _tighten_files(self) -> None:
        """Records and the lock file made by older versions were 0644: 0600
        now (the 0700 folder already keeps others out; this keeps them out
        if it is ever opened up again)."""
        for d in (self.records, self.tmp):
            for n in os.listdir(d):
                path = os.path.join(d, n)
                try:
                    if os.stat(path).st_mode & 0o077:
                        os.chmod(path, FILE_MODE)
                except FileNotFoundError:
                    pass

    def _clean_tmp(self) -> None:
        """Removes the temp files of interrupted uploads (never visible): those
        of processes that are gone. Another live process's (a service sharing
        the folder with tp.load's reader) are left alone."""
        for leftover in os.listdir(self.tmp):
            try:
                pid = int(leftover.split("-", 1)[0])
                os.kill(pid, 0)
                # Our own pid: a dead process's files under a recycled pid,
                # unless this process opened the folder already (the service
                # and tp.publish's store in one server process).
                alive = pid != os.getpid() or self.root in _OPENED
            except (ValueError, ProcessLookupError):
                alive = False
            except PermissionError:
                alive = True
            if not alive:
                try:
                    os.unlink(os.path.join(self.tmp, leftover))
                except FileNotFoundError:
                    pass

    # --- validation -------------------------------------------------------
    def check_name(self, name: str) -> None:
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise StoreError("INVALID_ARGUMENT", f"record name {name!r}: 1-128 of letters, "
                             f"digits, '.', '_', '-', starting with a letter or digit")

    @staticmethod
    def check_owner(owner: str) -> None:
        if not isinstance(owner, str) or not OWNER.fullmatch(owner):
            raise StoreError("INVALID_ARGUMENT", f"owner {owner!r}: 1-64 of letters, digits, "
                             f"'.', '_', '-', starting with a letter or digit (a certificate's "
                             f"CN)")

    def _path(self, name: str) -> str:
        self.check_name(name)
        return os.path.join(self.records, name + ".rec")

    def validate(self, info: dict, owner: str) -> dict:
        """The metadata of a record to write, checked and completed."""
        self.check_name(info.get("name"))
        self.check_owner(owner)
        if info.get("dtype") != DTYPE:
            raise StoreError("INVALID_ARGUMENT", f"dtype {info.get('dtype')!r}: shares are "
                             f"{DTYPE} (little-endian ring elements)")
        if info.get("ring_bits") != self.ring_bits:
            raise StoreError("FAILED_PRECONDITION", f"a share of the {info.get('ring_bits')}-"
                             f"bit ring; this cluster computes in the {self.ring_bits}-bit ring")
        if info.get("frac_bits") != self.frac_bits:
            raise StoreError("FAILED_PRECONDITION", f"{info.get('frac_bits')} fractional bits;"
                             f" this cluster encodes with {self.frac_bits}")
        if info.get("party") not in (0, 1):
            raise StoreError("INVALID_ARGUMENT", f"party {info.get('party')!r}: 0 (S1) or 1 (S2)")
        if info.get("kind", "upload") not in KINDS:
            raise StoreError("INVALID_ARGUMENT", f"kind {info.get('kind')!r}: one of {KINDS}")
        shape = [int(d) for d in info.get("shape", [])]
        if any(d < 0 for d in shape) or len(shape) > 32:
            raise StoreError("INVALID_ARGUMENT", f"shape {shape}: at most 32 dimensions >= 0")
        size = record_bytes(shape, self.ring_bits)
        if size > self.max_record_bytes:
            raise StoreError("RESOURCE_EXHAUSTED", f"a share of shape {shape} is {size} bytes;"
                             f" this service takes at most {self.max_record_bytes}")
        sha = info.get("sha256") or ""
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise StoreError("INVALID_ARGUMENT", "sha256: 64 lowercase hex digits")
        uid = info.get("upload_id") or ""
        if not re.fullmatch(r"[0-9a-f]{32}", uid):
            raise StoreError("INVALID_ARGUMENT", "upload_id: 16 bytes (32 hex digits)")
        return {"name": info["name"], "owner": owner, "shape": shape, "dtype": DTYPE,
                "ring_bits": self.ring_bits, "frac_bits": self.frac_bits,
                "party": info["party"], "size_bytes": size, "sha256": sha, "upload_id": uid,
                "kind": info.get("kind") or "upload", "created": time.time()}

    # --- writing ----------------------------------------------------------
    def begin(self, info: dict, owner: str, overwrite: bool = False) -> Pending:
        """Validates a record's metadata and opens it for writing. Refuses
        early what commit() would refuse anyway (another owner's name; an
        existing name with other content, unless overwrite; over the
        owner's quota)."""
        meta = self.validate(info, owner)
        old = self.info(meta["name"])
        if old is not None:
            self._check_replace(old, meta, overwrite)
        with self._lock:
            if meta["kind"] == "upload":
                used = self._usage(owner, meta["name"])
                held = self._pending.get(owner, [0, 0])
                self._check_quota(owner, used[0] + held[0], used[1] + held[1], meta)
            p = Pending(self, meta, overwrite)
            held = self._pending.setdefault(owner, [0, 0])
            held[0] += meta["size_bytes"]
            held[1] += 1
        return p

    def _release(self, p: Pending) -> None:
        """p no longer holds quota (committed or abandoned); idempotent."""
        with self._lock:
            if p.released:
                return
            p.released = True
            held = self._pending.get(p.meta["owner"])
            if held is not None:
                held[0] -= p.meta["size_bytes"]
                held[1] -= 1
                if held[1] <= 0:
                    del self._pending[p.meta["owner"]]

    def put(self, info: dict, data: bytes, owner: str, overwrite: bool = False
            ) -> Tuple[dict, bool]:
        """A whole record at once (what tp.publish would call on S1 and S2)."""
        p = self.begin(info, owner, overwrite)
        try:
            p.write(0, data)
        except BaseException:
            p.abort()
            raise
        return p.commit()

    @staticmethod
    def _check_replace(old: dict, meta: dict, overwrite: bool) -> bool:
        """True when old is identical to meta (an idempotent repeat). The
        messages name no checksum: they reach the driver (tp.publish)."""
        name = meta["name"]
        if old["owner"] != meta["owner"]:
            raise StoreError("PERMISSION_DENIED", f"record {name!r} belongs to "
                             f"another owner")
        if old.get("kind") == "upload" and meta["kind"] == "result":
            raise StoreError("ALREADY_EXISTS", f"record {name!r} is an upload of "
                             f"{old['owner']!r} (an input): a result never replaces it, "
                             f"overwrite or not; publish under another name")
        same = all(old[k] == meta[k] for k in _SAME)
        if not same and not overwrite:
            raise StoreError("ALREADY_EXISTS", f"record {name!r} exists with other "
                             f"content; pass overwrite to replace it")
        if not same and old["upload_id"] == meta["upload_id"]:
            # A replacement under the old upload id would pair a new share
            # with the other server's old one: its mask reused for new data.
            raise StoreError("INVALID_ARGUMENT", f"record {name!r}: other content under its "
                             f"upload id; a new sharing (fresh masks) takes a new upload id")
        return same

    def _check_quota(self, owner: str, used_bytes: int, used_records: int,
                     meta: dict) -> None:
        if self.quota_records is not None and used_records + 1 > self.quota_records:
            raise StoreError("RESOURCE_EXHAUSTED", f"owner {owner!r} keeps {used_records} "
                             f"records here (uploads in progress included); the quota is "
                             f"{self.quota_records}: overwrite one of yours, or ask the "
                             f"operator to raise --owner-quota-records")
        if self.quota_bytes is not None and used_bytes + meta["size_bytes"] > self.quota_bytes:
            raise StoreError("RESOURCE_EXHAUSTED", f"owner {owner!r} keeps {used_bytes} bytes "
                             f"of shares here; {meta['name']!r} needs {meta['size_bytes']} "
                             f"more, over the quota of {self.quota_bytes}: overwrite one of "
                             f"yours, or ask the operator to raise --owner-quota-bytes")

    def _usage(self, owner: str, without: Optional[str] = None) -> Tuple[int, int]:
        """(bytes, records) of owner's uploads stored here, but `without`
        (the record a write would replace). Headers are cached by the file's
        identity: a scan reads only records written since the last one."""
        if self.quota_bytes is None and self.quota_records is None:
            return 0, 0
        total, count, seen = 0, 0, set()
        for n in os.listdir(self.records):
            if not n.endswith(".rec"):
                continue
            name = n[:-4]
            seen.add(name)
            try:
                st = os.stat(os.path.join(self.records, n))
            except FileNotFoundError:
                continue
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
            head = self._heads.get(name)
            if head is None or head[0] != key:
                try:
                    meta = self.info(name)
                except (StoreError, ValueError):
                    continue
                if meta is None:
                    continue
                head = (key, meta["owner"], meta.get("kind"), meta["size_bytes"])
                self._heads[name] = head
            if head[1] == owner and head[2] == "upload" and name != without:
                total += head[3]
                count += 1
        for gone in set(self._heads) - seen:
            del self._heads[gone]
        return total, count

    def _install(self, tmp_path: str, meta: dict, overwrite: bool) -> Tuple[dict, bool]:
        path = self._path(meta["name"])
        lock_fd = os.open(os.path.join(self.records, ".lock"), os.O_RDWR | os.O_CREAT, FILE_MODE)
        with self._lock, os.fdopen(lock_fd, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            old = self.info(meta["name"])
            if old is not None and self._check_replace(old, meta, overwrite):
                return old, True
            if meta["kind"] == "upload":  # the quota again, now that no one else writes
                used = self._usage(meta["owner"], meta["name"])
                self._check_quota(meta["owner"], used[0], used[1], meta)
            os.replace(tmp_path, path)
            _fsync_dir(self.records)
        return meta, False

    # --- reading ----------------------------------------------------------
    def _open(self, name: str):
        try:
            f = open(self._path(name), "rb")
        except FileNotFoundError:
            return None, None
        if f.read(len(MAGIC)) != MAGIC:
            f.close()
            raise StoreError("DATA_LOSS", f"record {name!r} is not a share record")
        n = int.from_bytes(f.read(4), "little")
        return f, json.loads(f.read(n))

    def info(self, name: str) -> Optional[dict]:
        """The record's metadata, or None."""
        f, meta = self._open(name)
        if f is not None:
            f.close()
        return meta

    def require(self, name: str, owner: Optional[str]) -> dict:
        """The metadata of a record `owner` may read (owner None: the servers
        themselves, e.g. tp.load)."""
        meta = self.info(name)
        if meta is None:
            raise StoreError("NOT_FOUND", f"no record {name!r}")
        if owner is not None and meta["owner"] != owner:
            raise StoreError("PERMISSION_DENIED", f"record {name!r} belongs to another owner")
        return meta

    def chunks(self, name: str, owner: Optional[str], chunk_bytes: int = 1 << 20
               ) -> Tuple[dict, Iterator[bytes]]:
        """(metadata, the data in chunks); the data is checked against its
        SHA-256 as it is read (DATA_LOSS at the end when it does not match)."""
        self.require(name, owner)
        f, meta = self._open(name)
        if f is None:
            raise StoreError("NOT_FOUND", f"no record {name!r}")

        def gen():
            h = hashlib.sha256()
            with f:
                while True:
                    b = f.read(chunk_bytes)
                    if not b:
                        break
                    h.update(b)
                    yield b
            if h.hexdigest() != meta["sha256"]:
                raise StoreError("DATA_LOSS", f"record {name!r} is damaged on disk")
        return meta, gen()

    def read(self, name: str, owner: Optional[str] = None) -> Tuple[dict, bytes]:
        """(metadata, all the data): what tp.load would read on S1 and S2."""
        meta, it = self.chunks(name, owner)
        return meta, b"".join(it)

    def names(self) -> Dict[str, dict]:
        return {n[:-4]: self.info(n[:-4]) for n in sorted(os.listdir(self.records))
                if n.endswith(".rec")}


# --- the servers' own side: what tp.load and tp.publish run on S1 and S2 ------
def read_share(store: Store, name: str, party: int):
    """(metadata, share) of `name` on this server, the share an int64 numpy
    array in storage layout (logical shape, plus [2] limbs in the 128-bit
    ring): what tp.load's op on S1 (party 0) or S2 (party 1) returns. The
    caller checks S1's and S2's metadata agree (client.check_pair) before
    using the two as one PrivateTensor."""
    import numpy as np

    meta, data = store.read(name)
    if meta["party"] != party:
        raise StoreError("FAILED_PRECONDITION", f"{name!r} here is party {meta['party']}'s "
                         f"share, not party {party}'s")
    shape = meta["shape"] + ([2] if meta["ring_bits"] == 128 else [])
    return meta, np.frombuffer(data, dtype="<i8").astype(np.int64).reshape(shape)


def write_share(store: Store, name: str, share, party: int, owner: str, upload_id: str,
                overwrite: bool = False):
    """Stores this server's share of a result for `owner` (kind "result"):
    what tp.publish's op runs on S1 and S2, with the same upload_id (32 hex
    digits, chosen by the driver) on both. The owner then fetches it with
    client.fetch; nobody else can. Returns (metadata, existed)."""
    import numpy as np

    limbs = store.ring_bits // 64
    a = np.ascontiguousarray(share, dtype="<i8")
    shape = list(a.shape[:-1] if limbs == 2 else a.shape)
    if limbs == 2 and (a.ndim == 0 or a.shape[-1] != 2):
        raise StoreError("INVALID_ARGUMENT", f"a 128-bit share has a trailing limb "
                         f"dimension of 2, got shape {list(a.shape)}")
    data = a.tobytes()
    info = {"name": name, "shape": shape, "dtype": DTYPE, "ring_bits": store.ring_bits,
            "frac_bits": store.frac_bits, "party": party, "kind": "result",
            "sha256": hashlib.sha256(data).hexdigest(), "upload_id": upload_id}
    return store.put(info, data, owner, overwrite)
