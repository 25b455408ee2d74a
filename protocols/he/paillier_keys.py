"""Paillier keys and errors (DESIGN §9): the key types, their checks, the
exception classes and the translation of the kernels' errors into them.
`protocols.he.paillier` re-exports every name here; import them from there.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import math
import re
import warnings
from typing import Union

import numpy as np
import tensorflow as tf

DEFAULT_BITS = 2048
MIN_BITS = 1024
MAX_BITS = 16384
SAFE_BITS = 2048  # smaller keys (1024: seed 004's comparison only) warn


class PaillierError(ValueError):
    """A Paillier operation got an invalid key, ciphertext or plaintext."""


class KeyMismatchError(PaillierError):
    """A ciphertext was used with a key other than the one it was made with."""


class CorruptCiphertextError(PaillierError):
    """A ciphertext is malformed or corrupted (not in Z*_{n^2}, bad width,
    bad checksum)."""


class PlaintextOutOfRangeError(PaillierError):
    """A plaintext does not fit the key's plaintext range (|x| < n/2 signed,
    [0, n) unsigned) or a decrypted value does not fit the requested dtype."""


class NoisePoolExhaustedError(PaillierError):
    """A NoisePool cannot hand out as many noise values as were asked for."""


class InsecureKeyWarning(UserWarning):
    """A key shorter than 2048 bits was made or imported."""


def check_key_bits(bits: int, what: str = "key") -> None:
    """Rejects key sizes under 1024 bits or odd; warns under 2048."""
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)):
        raise TypeError(f"{what} size must be an int number of bits, got {bits!r}")
    bits = int(bits)
    if bits < MIN_BITS or bits > MAX_BITS or bits % 2:
        raise ValueError(f"{what} size must be an even number of bits in [{MIN_BITS}, "
                         f"{MAX_BITS}] (2048 or 3072 recommended), got {bits}")
    if bits < SAFE_BITS:
        warnings.warn(
            f"a {bits}-bit Paillier key gives under 112-bit security: 1024 bits is for "
            "comparison with seed 004 only. Use 2048 bits (the default) or more.",
            InsecureKeyWarning, stacklevel=3)


def _minimal_bytes(x: int) -> bytes:
    return x.to_bytes((x.bit_length() + 7) // 8, "big")


@dataclasses.dataclass(frozen=True)
class PublicKey:
    """A Paillier public key: the modulus n (g = n + 1 is implied).

    Attributes derived once: `bits`, `n_bytes` (minimal big-endian bytes of n,
    the form the kernels take), `nsquare`, `fingerprint` (first 8 bytes of
    SHA-256(n_bytes): the key identity written into serialized ciphertexts),
    `max_int` = (n - 1) // 2 (the largest |x| of a signed plaintext).
    """
    n: int
    bits: int = dataclasses.field(init=False, repr=False, compare=False)
    n_bytes: bytes = dataclasses.field(init=False, repr=False, compare=False)
    nsquare: int = dataclasses.field(init=False, repr=False, compare=False)
    fingerprint: bytes = dataclasses.field(init=False, repr=False, compare=False)
    max_int: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        n = self.n
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be a python int, got {type(n).__name__}")
        if n <= 0 or n % 2 == 0:
            raise PaillierError("n must be a positive odd integer (n = p q for odd primes)")
        if not MIN_BITS <= n.bit_length() <= MAX_BITS:
            raise PaillierError(f"n has {n.bit_length()} bits; Paillier keys here have "
                                f"{MIN_BITS} to {MAX_BITS} bits")
        nb = _minimal_bytes(n)
        for name, value in (("bits", n.bit_length()), ("n_bytes", nb), ("nsquare", n * n),
                            ("fingerprint", hashlib.sha256(nb).digest()[:8]),
                            ("max_int", (n - 1) // 2)):
            object.__setattr__(self, name, value)

    @property
    def plaintext_bytes(self) -> int:
        """Width of big-integer plaintexts: ceil(bits / 8)."""
        return len(self.n_bytes)

    @property
    def ciphertext_bytes(self) -> int:
        """Width of ciphertexts: 2 ceil(bits / 8)."""
        return 2 * len(self.n_bytes)

    @property
    def public_key(self) -> "PublicKey":
        return self

    def n_tensor(self) -> tf.Tensor:
        return tf.constant(self.n_bytes, tf.string)

    def __repr__(self) -> str:
        return f"PublicKey(<{self.bits}-bit, fingerprint {self.fingerprint.hex()}>)"


@dataclasses.dataclass(frozen=True, repr=False)
class PrivateKey:
    """A Paillier private key: the public key and its primes p < q.

    The repr shows no secret. Checks p q = n, p != q and gcd(n, (p-1)(q-1)) = 1
    here; primality is checked by the kernels the first time the key is used.
    """
    public_key: PublicKey
    p: int
    q: int

    def __post_init__(self):
        p, q, n = self.p, self.q, self.public_key.n
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (p, q)):
            raise TypeError("p and q must be python ints")
        if p * q != n:
            raise KeyMismatchError("p q != n: these primes do not belong to this public key")
        if p == q or min(p, q) < 3:
            raise PaillierError("p and q must be distinct odd primes")
        if math.gcd(n, (p - 1) * (q - 1)) != 1:
            raise PaillierError("gcd(n, (p-1)(q-1)) != 1: not a valid Paillier key")
        if q < p:  # phe's order: p < q
            object.__setattr__(self, "p", q)
            object.__setattr__(self, "q", p)

    @property
    def fingerprint(self) -> bytes:
        return self.public_key.fingerprint

    def key_tensors(self):
        """(n, p, q) string scalars for the private kernels."""
        return (self.public_key.n_tensor(), tf.constant(_minimal_bytes(self.p), tf.string),
                tf.constant(_minimal_bytes(self.q), tf.string))

    def __repr__(self) -> str:
        pk = self.public_key
        return f"PrivateKey(<{pk.bits}-bit, fingerprint {pk.fingerprint.hex()}>)"

    __str__ = __repr__


AnyKey = Union[PublicKey, PrivateKey]


@functools.lru_cache(maxsize=64)
def public_key_from_bytes(n_bytes: bytes) -> PublicKey:
    return PublicKey(int.from_bytes(n_bytes, "big"))


def as_public_key(key: AnyKey) -> PublicKey:
    if isinstance(key, PrivateKey):
        return key.public_key
    if isinstance(key, PublicKey):
        return key
    raise TypeError(f"expected a tp.he.paillier PublicKey or PrivateKey, got "
                    f"{type(key).__name__} (convert phe keys with from_phe)")


_TF_NOISE = re.compile(r"^\{\{function_node [^}]*\}\}\s*|\s*\[Op:[^\]]*\](\s*name:.*)?$")


@contextlib.contextmanager
def kernel_errors():
    """Turns the kernels' InvalidArgument errors into PaillierError subclasses
    (eager mode; in a tf.function they surface as tf.errors at run time)."""
    try:
        yield
    except tf.errors.InvalidArgumentError as e:
        msg = _TF_NOISE.sub("", e.message).strip()
        if re.search(r"\b(plaintext|decrypted|k) element", msg):
            cls = PlaintextOutOfRangeError
        elif re.search(r"\b(ciphertext|noise|a|b) element", msg):
            cls = CorruptCiphertextError
            msg += (". Check that it was made with this key and not altered; serialized "
                    "ciphertexts are checksummed (deserialize)")
        else:
            cls = PaillierError
        raise cls(msg) from e
