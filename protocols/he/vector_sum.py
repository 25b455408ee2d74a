"""Many-user vector sum under packed Paillier encryption (seed 002's task;
DESIGN §9).

Parties: many users, each with a vector of `dim` integers in [0, max_value];
a server that sums; a key holder (a party other than the server) who alone
has the private key and learns only the total.

1. Key holder -> everyone: the public key and the spec (dim, max_value,
   max_users): public parameters.
2. Each user packs its vector into as few plaintexts as possible: slots of
   w = ceil(log2(max_users * max_value + 1)) bits (the largest possible slot
   sum fits, so no slot carries into the next; values are non-negative, so
   no sign bits), k = floor((key_bits - 1) / w) slots per plaintext, slot 0
   the least significant: P = sum_i v_i 2^(w i) < 2^(k w) <= 2^(key_bits-1)
   <= n. It encrypts them with the PUBLIC key (users never hold the private
   key, so the key holder's CRT path is not theirs) and uploads the
   serialized ciphertexts (checksummed, key-bound: paillier_io's format).
3. The server checks each upload and multiplies the ciphertexts (adds the
   plaintexts) in a tree: the C++ reduce_sum over batches of `fan_in`
   uploads, then over the batch sums. It never holds a key that decrypts.
   It refuses more than max_users uploads: more summands could carry
   between slots.
4. The key holder decrypts the total ciphertexts (CRT) and unpacks each slot
   as an exact unsigned sum, checking that no slot exceeds count *
   max_value and that the bits above the last slot are zero.

Users' noise (the default a demanding user expects): the generic r^n mod n^2
with r uniform from the OS CSPRNG: the noise of textbook Paillier and of
python-paillier, resting on Paillier's assumption alone. It costs one
exponentiation mod n^2 per ciphertext (about 6-10 ms at 2048 bits on one
core), and a user with 100 values sends ONE ciphertext. Faster options, each
a documented trade: noise="djn" (several times cheaper, adds DJN's
short-exponent assumption), or a NoisePool(public_key) filled ahead (same
distribution, online cost one multiplication).

Semi-honest parties. A user who sends values above max_value, or a packed
plaintext it crafted, can corrupt the slot sums (the key holder detects
sums above count * max_value, not every lie); the server could drop or
duplicate uploads (the count it reports is not authenticated).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from . import kernels as K
from . import paillier as P
from . import paillier_io as io
from .progress import Progress, ProgressReporter


class VectorSumError(ValueError):
    """Invalid vectors (out of range, wrong shape) or a misuse of the protocol."""


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class VectorSumSpec:
    """The public parameters every party agrees on.

    >>> spec = VectorSumSpec(dim=100, max_value=20, max_users=8000, key_bits=2048)
    >>> spec.slot_bits, spec.slots_per_plaintext, spec.plaintexts_per_user
    (18, 113, 1)
    """
    dim: int
    max_value: int
    max_users: int
    key_bits: int

    def __post_init__(self):
        _check_int(self.dim, "dim", 1)
        _check_int(self.max_value, "max_value", 1)
        _check_int(self.max_users, "max_users", 1)
        _check_int(self.key_bits, "key_bits", P.MIN_BITS)
        if self.slots_per_plaintext < 1:
            raise VectorSumError(f"a {self.key_bits}-bit key cannot hold one {self.slot_bits}-bit "
                                 "slot")

    @property
    def slot_bits(self) -> int:
        """w = ceil(log2(max_users * max_value + 1))."""
        return (self.max_users * self.max_value).bit_length()

    @property
    def slots_per_plaintext(self) -> int:
        return (self.key_bits - 1) // self.slot_bits

    @property
    def plaintexts_per_user(self) -> int:
        return -(-self.dim // self.slots_per_plaintext)

    @property
    def plaintext_bytes(self) -> int:
        return (self.key_bits + 7) // 8

    @property
    def ciphertext_bytes_per_value(self) -> float:
        return self.plaintexts_per_user * 2 * self.plaintext_bytes / self.dim

    @property
    def upload_bytes(self) -> int:
        """Bytes of one user's serialized upload (header, ciphertexts, checksum)."""
        return io._HEADER.size + io._DIM.size + self.plaintexts_per_user * \
            2 * self.plaintext_bytes + io.CHECKSUM_BYTES

    def __repr__(self) -> str:
        return (f"VectorSumSpec(dim={self.dim}, max_value={self.max_value}, max_users="
                f"{self.max_users}, key_bits={self.key_bits}: {self.slots_per_plaintext} slots "
                f"of {self.slot_bits} bits, {self.plaintexts_per_user} plaintext(s) per user)")


def check_vectors(spec: VectorSumSpec, vectors: Any, first_user: int = 0) -> np.ndarray:
    """[users, dim] int64 of values in [0, max_value]; raises VectorSumError
    naming the first bad user and index."""
    if tf.is_tensor(vectors):
        vectors = vectors.numpy()
    a = np.asarray(vectors)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != spec.dim:
        raise VectorSumError(f"vectors must have shape [users, {spec.dim}], got {a.shape}")
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"vectors must hold integers, got dtype {a.dtype}")
    bad = (a < 0) | (a > spec.max_value)
    if bad.any():
        u, i = (int(v) for v in np.argwhere(bad)[0])
        raise VectorSumError(
            f"user {first_user + u} has {a[u, i]} at index {i}, outside [0, {spec.max_value}] "
            f"(max_value): a larger value could carry into the next slot. Nothing was "
            "encrypted for this batch")
    return a.astype(np.int64, copy=False)


PACKERS = ("auto", "kernel", "numpy")


def pack(spec: VectorSumSpec, vectors: np.ndarray, method: str = "auto") -> tf.Tensor:
    """[users, dim] values (checked) -> tf.string [users, plaintexts_per_user]
    big-endian plaintexts, slot 0 the least significant.

    method "kernel": BatchCrypt's pack kernel (ops/batchcrypt), which packs
    signed slot values in [-2^(w-1), 2^(w-1)): a non-negative value below
    2^(w-1) packs as itself, so it fits whenever max_value < 2^(w-1) (any
    max_users >= 2) and w <= 62. "numpy": bit packing in numpy (any w).
    "auto": the kernel when it fits (about 20x faster), else numpy."""
    if method not in PACKERS:
        raise ValueError(f"method must be one of {PACKERS}, got {method!r}")
    u, w, k, pb = vectors.shape[0], spec.slot_bits, spec.slots_per_plaintext, \
        spec.plaintext_bytes
    npt = spec.plaintexts_per_user
    fits = w <= 62 and spec.max_value < (1 << (w - 1))
    if method == "kernel" and not fits:
        raise VectorSumError(f"the pack kernel takes slots of at most 62 bits holding values "
                             f"below 2^(w-1); this spec has w = {w}, max_value = "
                             f"{spec.max_value}: use method='numpy'")
    v = np.zeros((u, npt * k), np.int64 if fits and method != "numpy" else np.uint64)
    v[:, :spec.dim] = vectors
    if fits and method != "numpy":
        return tf.reshape(K.batchcrypt_pack(tf.constant(v.reshape(-1)), w, k, pb), [u, npt])
    bits = ((v.reshape(u, npt, k, 1) >> np.arange(w, dtype=np.uint64)) & 1).astype(np.uint8)
    full = np.zeros((u, npt, pb * 8), np.uint8)
    full[:, :, :k * w] = bits.reshape(u, npt, k * w)
    le = np.packbits(full, axis=-1, bitorder="little")       # little-endian bytes
    be = np.ascontiguousarray(le[:, :, ::-1]).tobytes()
    flat = [be[i * pb:(i + 1) * pb] for i in range(u * npt)]
    return tf.reshape(tf.constant(flat, tf.string, shape=[u * npt]), [u, npt])


def unpack(spec: VectorSumSpec, totals: Sequence[int], count: int) -> np.ndarray:
    """Exact slot sums of the decrypted total plaintexts (python ints) of
    `count` users; raises VectorSumError if a sum exceeds count * max_value or
    bits beyond the last slot are set (more users, or bad uploads)."""
    w, k = spec.slot_bits, spec.slots_per_plaintext
    mask = (1 << w) - 1
    out: List[int] = []
    for j, t in enumerate(totals):
        t = int(t)
        if t >> (k * w):
            raise VectorSumError(f"total plaintext {j} has bits beyond its {k} slots: the sum "
                                 "overflowed (more users than max_users, or uploads not made by "
                                 "this spec)")
        out.extend((t >> (w * i)) & mask for i in range(k))
    sums = np.array(out[:spec.dim], dtype=np.int64)
    limit = count * spec.max_value
    if (sums > limit).any() or any(out[spec.dim:]):
        raise VectorSumError(f"a slot sum exceeds {count} users x max_value {spec.max_value} "
                             "(or padding slots are non-zero): some upload was not made by this "
                             "spec")
    return sums


# ------------------------------------------------------------------ serialization
def serialize_rows(enc: P.EncryptedTensor) -> List[bytes]:
    """One paillier_io-format blob per row of a [users, m] EncryptedTensor,
    validated with one kernel call (identical to io.serialize(enc[i]))."""
    pk = enc.public_key
    valid = P.validate(pk, enc).numpy()
    if not valid.all():
        raise P.CorruptCiphertextError("a ciphertext is not valid for its key; refusing to "
                                       "serialize it")
    arr = enc.ciphertext.numpy()
    header = io._HEADER.pack(io.MAGIC, io.VERSION, io.KIND_PAILLIER, 1, pk.fingerprint,
                             pk.ciphertext_bytes) + io._DIM.pack(arr.shape[1])
    out = []
    for row in arr:
        body = header + b"".join(row.tolist())
        out.append(body + io._checksum(body))
    return out


def deserialize_rows(blobs: Sequence[bytes], key: Any, width: int) -> P.EncryptedTensor:
    """[len(blobs), width] EncryptedTensor of paillier_io blobs of `width`
    ciphertexts each: every checksum, header and key fingerprint checked, all
    ciphertexts validated with one kernel call. Same checks as io.deserialize."""
    pk = P.as_public_key(key)
    header = io._HEADER.pack(io.MAGIC, io.VERSION, io.KIND_PAILLIER, 1, pk.fingerprint,
                             pk.ciphertext_bytes) + io._DIM.pack(width)
    size = len(header) + width * pk.ciphertext_bytes + io.CHECKSUM_BYTES
    flat = []
    for i, b in enumerate(blobs):
        b = bytes(b)
        if len(b) != size or not b.startswith(header):
            # Let the reference parser name the problem (key, version, shape...).
            one = io.deserialize(b, pk)
            raise VectorSumError(f"upload {i} holds {int(np.prod(one.shape))} ciphertexts "
                                 f"of shape {one.shape}; this spec needs [{width}]")
        body, checksum = b[:-io.CHECKSUM_BYTES], b[-io.CHECKSUM_BYTES:]
        if io._checksum(body) != checksum:
            raise P.CorruptCiphertextError(f"upload {i}: checksum mismatch (corrupted or "
                                           "altered in transit)")
        off, cw = len(header), pk.ciphertext_bytes
        flat.extend(body[off + j * cw: off + (j + 1) * cw] for j in range(width))
    c = tf.reshape(tf.constant(flat, tf.string, shape=[len(flat)]), [len(blobs), width])
    enc = P.EncryptedTensor(c, pk.n_bytes)
    valid = P.validate(pk, enc).numpy()
    if not valid.all():
        bad = int(np.argwhere(~valid)[0][0])
        raise P.CorruptCiphertextError(f"upload {bad} has a ciphertext outside Z*_(n^2)")
    return enc


# ------------------------------------------------------------------ parties
def _user_key(key: Any) -> P.PublicKey:
    if isinstance(key, P.PrivateKey):
        raise TypeError("users encrypt with the PUBLIC key only (the key holder's private key "
                        "must not reach them): pass private_key.public_key")
    return P.as_public_key(key)


def encrypt_users(public_key: P.PublicKey, spec: VectorSumSpec, vectors: Any,
                  noise: Any = None, first_user: int = 0) -> List[bytes]:
    """What users upload: one serialized blob per user (row of `vectors`).
    Each user's ciphertexts are independent public-key encryptions with fresh
    noise; batching several users into one kernel call changes nothing but
    the speed of this simulation."""
    pk = _user_key(public_key)
    if pk.bits != spec.key_bits:
        raise VectorSumError(f"the spec is for {spec.key_bits}-bit keys, the key has {pk.bits}")
    a = check_vectors(spec, vectors, first_user)
    return serialize_rows(P.encrypt(pk, pack(spec, a), noise))


class Server:
    """Sums uploads in a tree: batches of at least `fan_in` uploads through
    the C++ reduce_sum, then the batch sums. Holds only the public key."""

    def __init__(self, public_key: P.PublicKey, spec: VectorSumSpec, fan_in: int = 256):
        self.pk = _user_key(public_key)
        self.spec = spec
        self.fan_in = _check_int(fan_in, "fan_in", 2)
        self.count = 0
        self._pending: List[tf.Tensor] = []           # checked ciphertext rows
        self._pending_rows = 0
        self._partials: List[tf.Tensor] = []

    def receive(self, uploads: Sequence[bytes]) -> None:
        """Checks a batch of uploads (checksums, key, shape, Z*_{n^2}) and adds
        them; a bad upload raises before anything of the batch is counted."""
        if self.count + len(uploads) > self.spec.max_users:
            raise VectorSumError(
                f"{self.count + len(uploads)} uploads exceed max_users = {self.spec.max_users}: "
                "slot sums could carry into the next slot. Build the spec with a larger "
                "max_users (all users must use it)")
        if not uploads:
            return
        enc = deserialize_rows(uploads, self.pk, self.spec.plaintexts_per_user)
        self.count += len(uploads)
        self._pending.append(enc.ciphertext)
        self._pending_rows += len(uploads)
        if self._pending_rows >= self.fan_in:
            self._reduce_pending()

    def _sum(self, rows: List[tf.Tensor]) -> tf.Tensor:
        stacked = P.EncryptedTensor(tf.concat(rows, axis=0), self.pk.n_bytes)
        return P.reduce_sum(self.pk, stacked, axis=0).ciphertext[None]

    def _reduce_pending(self) -> None:
        self._partials.append(self._sum(self._pending))
        self._pending, self._pending_rows = [], 0
        if len(self._partials) >= self.fan_in:          # next level of the tree
            self._partials = [self._sum(self._partials)]

    def total(self):
        """(serialized total ciphertexts, number of uploads summed)."""
        if self._pending:
            self._reduce_pending()
        if not self._partials:
            raise VectorSumError("the server received no upload")
        self._partials = [self._sum(self._partials)]
        total = P.EncryptedTensor(self._partials[0][0], self.pk.n_bytes)
        return io.serialize(total), self.count


def decrypt_total(private_key: P.PrivateKey, spec: VectorSumSpec, blob: bytes,
                  count: int) -> np.ndarray:
    """The key holder: decrypts the total (CRT) and unpacks exact sums."""
    if not isinstance(private_key, P.PrivateKey):
        raise TypeError(f"decrypt_total needs the PrivateKey, got {type(private_key).__name__}")
    count = _check_int(count, "count", 1)
    if count > spec.max_users:
        raise VectorSumError(f"{count} users exceed max_users = {spec.max_users}")
    total = io.deserialize(blob, private_key.public_key)
    if tuple(total.shape) != (spec.plaintexts_per_user,):
        raise VectorSumError(f"the total has shape {tuple(total.shape)}, the spec needs "
                             f"[{spec.plaintexts_per_user}]")
    ints = P.decrypt_ints(private_key, total, signed=False)
    return unpack(spec, ints.tolist(), count)


# ------------------------------------------------------------------ driver
@dataclasses.dataclass
class VectorSumResult:
    """totals: int64 [dim], the exact sums. timings (s): users_pack,
    users_encrypt (encryption + serialization), server, key_holder, total.
    upload_bytes_per_user: one user's serialized upload; bytes_per_value =
    upload_bytes_per_user / dim."""
    totals: np.ndarray
    users: int
    spec: VectorSumSpec
    noise: str
    timings: dict
    upload_bytes_per_user: int

    @property
    def bytes_per_value(self) -> float:
        return self.upload_bytes_per_user / self.spec.dim

    def __repr__(self) -> str:
        return (f"<VectorSumResult users={self.users} dim={self.spec.dim} "
                f"{self.bytes_per_value:.2f} B/value total {self.timings['total']:.2f}s>")


def vector_sum(vectors: Any, max_value: int, key: P.PrivateKey, *,
               max_users: Optional[int] = None, noise: Any = None, users_per_batch: int = 256,
               fan_in: int = 256, progress: Progress = False) -> VectorSumResult:
    """Simulates the whole protocol in one process (users, server, key
    holder); see tf_privpy.he.vector_sum."""
    if not isinstance(key, P.PrivateKey):
        raise TypeError("vector_sum needs the key holder's PrivateKey (users get only its "
                        "public key)")
    t_start = time.perf_counter()
    if tf.is_tensor(vectors):
        vectors = vectors.numpy()
    a = np.asarray(vectors)
    if a.ndim != 2:
        raise VectorSumError(f"vectors must have shape [users, dim], got {a.shape}")
    users, dim = a.shape
    if users < 1:
        raise VectorSumError("vector_sum needs at least one user")
    spec = VectorSumSpec(dim, max_value, users if max_users is None else max_users,
                         key.public_key.bits)
    if users > spec.max_users:
        raise VectorSumError(f"{users} users exceed max_users = {spec.max_users}")
    check_vectors(spec, a)                   # every user's values, before anything runs
    batch = _check_int(users_per_batch, "users_per_batch", 1)
    pk = key.public_key
    server = Server(pk, spec, fan_in)
    t_users = t_server = 0.0
    upload_bytes = None
    prog = ProgressReporter(progress, users, "vector sum", "users encrypted and summed")
    for start in range(0, users, batch):
        t0 = time.perf_counter()
        uploads = encrypt_users(pk, spec, a[start:start + batch], noise, first_user=start)
        t_users += time.perf_counter() - t0
        upload_bytes = len(uploads[0]) if upload_bytes is None else upload_bytes
        t0 = time.perf_counter()
        server.receive(uploads)
        t_server += time.perf_counter() - t0
        prog.update(min(start + batch, users))
    t0 = time.perf_counter()
    blob, count = server.total()
    t_server += time.perf_counter() - t0
    t0 = time.perf_counter()
    totals = decrypt_total(key, spec, blob, count)
    t_key = time.perf_counter() - t0
    noise_name = "generic" if noise is None else (noise if isinstance(noise, str)
                                                  else type(noise).__name__)
    timings = {"users_encrypt": t_users, "server": t_server, "key_holder": t_key,
               "total": time.perf_counter() - t_start}
    return VectorSumResult(totals, users, spec, noise_name, timings, upload_bytes)


__all__ = [
    "PACKERS", "Server", "VectorSumError", "VectorSumResult", "VectorSumSpec", "check_vectors",
    "decrypt_total", "deserialize_rows", "encrypt_users", "pack", "serialize_rows", "unpack",
    "vector_sum",
]
