"""The two parties of the private scalar product (protocols.he.scalar_product,
seed 004): the checks of their inputs, the messages they exchange (header,
transcript), Bob (the key holder: encrypts y, decrypts the blinded result)
and Alice (folds Bob's ciphertexts with x and blinds the product). The
driver that runs them, and the entry points, are in scalar_product.py, which
re-exports every name here.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Iterator, List, Optional

import numpy as np
import tensorflow as tf

from . import paillier as P
from . import paillier_io as io

KINDS = ("auto", "binary", "integer")
DEFAULT_CHUNK = 4096
SIGMA = 40            # statistical hiding 2^-SIGMA of the per-client-key blinding
_INT64_LIMIT = 1 << 62



class ScalarProductError(ValueError):
    """Invalid inputs or a protocol misuse (lengths, ranges, reuse)."""


# ------------------------------------------------------------------ inputs
def as_int_vector(v: Any, name: str) -> np.ndarray:
    """A 1-D int64 numpy array; booleans become 0/1. Raises on floats, NaN,
    values beyond +-2^62 and non-vectors."""
    if tf.is_tensor(v):
        v = v.numpy()
    a = np.asarray(v)
    if a.dtype == object:
        try:
            a = np.array([int(e) for e in a.reshape(-1)], dtype=object).reshape(a.shape)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} must hold integers: {e}") from None
        if a.size and max(abs(int(e)) for e in a.reshape(-1)) >= _INT64_LIMIT:
            raise ScalarProductError(f"{name} has values of magnitude >= 2^62; the scalar "
                                     "product takes int64 vectors")
        a = a.astype(np.int64)
    if a.dtype == np.bool_:
        a = a.astype(np.int64)
    if not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{name} must be an integer or boolean vector, got dtype {a.dtype}; "
                        "encode reals as fixed-point integers first")
    if a.ndim != 1:
        raise ScalarProductError(f"{name} must be a vector (1-D), got shape {a.shape}")
    if a.dtype == np.uint64 and a.size and int(a.max()) >= _INT64_LIMIT:
        raise ScalarProductError(f"{name} has values >= 2^62")
    a = a.astype(np.int64, copy=False)
    if a.size and (int(a.max()) >= _INT64_LIMIT or int(a.min()) <= -_INT64_LIMIT):
        raise ScalarProductError(f"{name} has values of magnitude >= 2^62; the scalar product "
                                 "takes int64 vectors")
    return a


def abs_sum(a: np.ndarray) -> int:
    """sum |a_i| exactly (int64 when it cannot overflow, python ints otherwise)."""
    if a.size == 0:
        return 0
    m = int(np.abs(a).max())
    if m * a.size < _INT64_LIMIT:
        return int(np.abs(a).sum())
    return int(np.abs(a).astype(object).sum())


def is_binary(a: np.ndarray) -> bool:
    return bool(a.size == 0 or (a.min() >= 0 and a.max() <= 1))


def resolve_kind(kind: str, *vectors: np.ndarray) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if kind == "auto":
        return "binary" if all(is_binary(v) for v in vectors) else "integer"
    if kind == "binary":
        for i, v in enumerate(vectors):
            if not is_binary(v):
                bad = int(np.flatnonzero((v < 0) | (v > 1))[0])
                raise ScalarProductError(
                    f"kind='binary' but {('x', 'y')[i] if len(vectors) > 1 else 'the vector'} "
                    f"has {v[bad]} at index {bad}; binary vectors hold only 0 and 1 (use "
                    "kind='integer')")
    return kind


def split_sizes(n: int, k: int) -> List[int]:
    """Seed 004 §3.4: k parts of ceil(n/k) or floor(n/k) elements."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"clients must be an integer >= 1, got {k!r}")
    if k > max(n, 1):
        raise ScalarProductError(f"{k} clients for a vector of {n} elements: each client "
                                 "needs at least one element")
    q, r = divmod(n, k)
    return [q + 1 if i < r else q for i in range(k)]


def check_chunk(chunk_size: int) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) \
            or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    return int(chunk_size)


def default_bound(y: np.ndarray, kind: str) -> int:
    """1 for binary vectors; else max|y| rounded up to a power of two (only
    its bit length is announced)."""
    if kind == "binary":
        return 1
    m = int(np.abs(y).max()) if y.size else 0
    return 1 << m.bit_length() if m else 1


# ------------------------------------------------------------------ messages
@dataclasses.dataclass(frozen=True)
class VectorHeader:
    """What Bob announces with his encrypted vector (public): its length,
    kind, the bound on |y_i| and the key fingerprint."""
    length: int
    kind: str
    bound: int
    fingerprint: bytes


def serialized_bytes(pk: P.PublicKey, count: int, ndim: int = 1) -> int:
    """Length of paillier_io.serialize() of `count` ciphertexts (rank ndim)."""
    return io._HEADER.size + ndim * io._DIM.size + count * pk.ciphertext_bytes + \
        io.CHECKSUM_BYTES


@dataclasses.dataclass
class Transcript:
    """What crossed between the parties: (sender, receiver, what, count, bytes)
    per message kind, with bytes as paillier_io.serialize() would send."""
    messages: List[tuple] = dataclasses.field(default_factory=list)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def record(self, sender: str, receiver: str, obj: Any, nbytes: int) -> None:
        what = type(obj).__name__
        count = int(np.prod(obj.shape)) if isinstance(obj, P.EncryptedTensor) else 1
        with self._lock:
            self.messages.append((sender, receiver, what, count, int(nbytes)))

    def bytes(self, sender: Optional[str] = None, receiver: Optional[str] = None) -> int:
        return sum(m[4] for m in self.messages
                   if (sender is None or m[0].startswith(sender))
                   and (receiver is None or m[1].startswith(receiver)))

    def received_by(self, party: str) -> List[str]:
        """Type names of everything `party` received."""
        return sorted({m[2] for m in self.messages if m[1].startswith(party)})


# ------------------------------------------------------------------ Bob
class EncryptedVector:
    """Bob's vector encrypted ahead of time (seed 004 §3.3): ciphertext chunks
    of one key, with the public header. Single use: a second protocol run
    would show Alice the same ciphertexts again, so `take()` refuses."""

    def __init__(self, public_key: P.PublicKey, header: VectorHeader,
                 chunks: List[P.EncryptedTensor], offset: int = 0):
        self.public_key, self.header, self.offset = public_key, header, offset
        self._chunks: Optional[List[P.EncryptedTensor]] = chunks
        self._lock = threading.Lock()

    @property
    def used(self) -> bool:
        return self._chunks is None

    def take(self) -> List[P.EncryptedTensor]:
        with self._lock:
            if self._chunks is None:
                raise ScalarProductError(
                    "this EncryptedVector was already used in a scalar product; encrypt the "
                    "vector again (fresh ciphertexts) for another run")
            chunks, self._chunks = self._chunks, None
        return chunks

    def __repr__(self) -> str:
        return (f"<EncryptedVector length={self.header.length} kind={self.header.kind} "
                f"key={self.public_key.bits}-bit used={self.used}>")


class Bob:
    """The key holder: encrypts y (CRT with his private key, or a NoisePool)
    and decrypts the blinded product."""

    def __init__(self, key: P.PrivateKey, y: np.ndarray, kind: str, bound: Optional[int],
                 noise: Any = None):
        if not isinstance(key, P.PrivateKey):
            raise TypeError(f"Bob needs his PrivateKey, got {type(key).__name__}")
        self.key, self.pk, self.y, self.noise = key, key.public_key, y, noise
        if bound is None:
            bound = default_bound(y, kind)
        if isinstance(bound, bool) or not isinstance(bound, (int, np.integer)) or bound < 1:
            raise ValueError(f"y_bound must be an integer >= 1, got {bound!r}")
        bound = int(bound)
        if kind == "binary" and bound != 1:
            raise ScalarProductError("binary vectors have y_bound 1")
        if y.size and int(np.abs(y).max()) > bound:
            bad = int(np.argmax(np.abs(y)))
            raise ScalarProductError(f"y[{bad}] = {y[bad]} exceeds the declared y_bound {bound}")
        self.header = VectorHeader(len(y), kind, bound, self.pk.fingerprint)

    def encrypt(self, start: int, stop: int) -> P.EncryptedTensor:
        return P.encrypt(self.key, self.y[start:stop], self.noise)

    def chunks(self, chunk_size: int) -> Iterator[P.EncryptedTensor]:
        for start in range(0, len(self.y), chunk_size):
            yield self.encrypt(start, min(start + chunk_size, len(self.y)))

    def decrypt(self, blinded: P.EncryptedTensor) -> int:
        """The signed integer in (-n/2, n/2) that Alice's ciphertext holds."""
        return int(P.decrypt_ints(self.key, blinded.reshape([1]))[0])


# ------------------------------------------------------------------ Alice
class Alice:
    """Holds x and Bob's public key; folds Bob's ciphertext chunks into one
    product and blinds it. Never holds a private key."""

    def __init__(self, public_key: P.PublicKey, x: np.ndarray, header: VectorHeader,
                 noise: Any = None, limit: Optional[int] = None, kind: str = "auto"):
        if isinstance(public_key, P.PrivateKey) or not isinstance(public_key, P.PublicKey):
            raise TypeError("Alice holds only Bob's PublicKey, got "
                            f"{type(public_key).__name__}")
        if header.fingerprint != public_key.fingerprint:
            raise P.KeyMismatchError("Bob's header names another key than the public key given")
        if len(x) != header.length:
            raise ScalarProductError(f"x has {len(x)} elements but Bob's vector has "
                                     f"{header.length}; the vectors must have the same length")
        if kind == "binary":
            resolve_kind("binary", x)
        self.pk, self.x, self.header, self.noise = public_key, x, header, noise
        # |partial| <= sum|x_i| * bound: must stay below `limit` (n/2 by default).
        self.partial_bound = abs_sum(x) * header.bound
        limit = public_key.max_int if limit is None else limit
        if self.partial_bound > limit:
            raise ScalarProductError(
                f"|x·y| could reach {self.partial_bound.bit_length()} bits (sum|x_i| times Bob's "
                f"bound {header.bound}), beyond the {limit.bit_length()} bits the key's "
                "plaintexts hold without wrapping; use smaller values or a larger key")
        self._binary_x = is_binary(x)
        self._offset = 0
        self._acc: Optional[P.EncryptedTensor] = None

    def absorb(self, chunk: P.EncryptedTensor) -> None:
        """Multiplies chunk_i^(x_i) for the next len(chunk) indices into the
        running product (C++ reduce_sum; mul_plain first for integer x)."""
        P.check_encrypted(self.pk, chunk, "Bob's chunk")
        n = int(chunk.shape[0])
        xs = self.x[self._offset:self._offset + n]
        if len(xs) != n:
            raise ScalarProductError(f"Bob sent more than the {self.header.length} elements he "
                                     "announced")
        self._offset += n
        if self._binary_x:
            idx = np.flatnonzero(xs)
            if idx.size == 0:
                return
            sel = chunk if idx.size == n else P.EncryptedTensor(
                tf.gather(chunk.ciphertext, idx), chunk.n)
            part = P.reduce_sum(self.pk, sel)
        else:
            nz = np.flatnonzero(xs)
            if nz.size == 0:
                return
            sel = P.EncryptedTensor(tf.gather(chunk.ciphertext, nz), chunk.n)
            part = P.reduce_sum(self.pk, P.mul_plain(self.pk, sel, tf.constant(xs[nz])))
        self._acc = part if self._acc is None else P.add(self.pk, self._acc, part)

    def finish(self, mask: int) -> P.EncryptedTensor:
        """prod · E(-mask) with fresh noise: the ciphertext Alice sends Bob."""
        if self._offset != self.header.length:
            raise ScalarProductError(f"Bob sent {self._offset} of the {self.header.length} "
                                     "elements he announced")
        neg = P.ints_to_tensor([(-mask) % self.pk.n], self.pk.plaintext_bytes)
        blind = P.encrypt(self.pk, neg, self.noise)       # fresh noise: rerandomizes
        out = blind if self._acc is None else P.add(self.pk, self._acc, blind)
        self._acc = None
        return out.reshape([])
