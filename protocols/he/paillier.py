"""Paillier encryption on tensors (DESIGN §9): keys, the EncryptedTensor value
type, and typed operations composed from the ops/paillier kernels.

Conventions (the same as python-paillier, `phe`, so the two interoperate):
g = n + 1; a signed plaintext x with |x| < n/2 is the residue x mod n (a
negative x is n + x); big-integer plaintexts are unsigned integers in [0, n)
held as big-endian bytes in tf.string tensors.

Key identity. Every EncryptedTensor carries the modulus n of its key, and
every operation checks it against the key it is given, so decrypting with the
wrong key raises KeyMismatchError instead of returning garbage. Raw ciphertext
tensors carry no key: a ciphertext of another key of the same size is
usually, but NOT always, rejected by the kernels (about half of them are
>= n^2), and may otherwise decrypt to a wrong number. Keep ciphertexts in
EncryptedTensors (or serialized with `protocols.paillier_io`), never bare.

The key types, the exceptions and the translation of kernel errors are in
paillier_keys.py; this module re-exports them.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import tensorflow as tf

from . import kernels as K
from .paillier_keys import (  # noqa: F401  (re-exported: the public names live here)
    DEFAULT_BITS, MAX_BITS, MIN_BITS, SAFE_BITS, AnyKey, CorruptCiphertextError,
    InsecureKeyWarning, KeyMismatchError, NoisePoolExhaustedError, PaillierError,
    PlaintextOutOfRangeError, PrivateKey, PublicKey, as_public_key,
    check_key_bits, kernel_errors, public_key_from_bytes)


class EncryptedTensor(tf.experimental.ExtensionType):
    """Paillier ciphertexts of a tensor, with the identity of their key.

    `ciphertext` is a tf.string tensor of the plaintext's shape, each element
    the 2 ceil(bits/8) big-endian bytes of one ciphertext; `n` is the key's
    modulus (minimal big-endian bytes). Works eagerly and in tf.function (n
    is static: part of the type). Index with `[...]` and `reshape`.

    Arithmetic as python-paillier's EncryptedNumber, key from the operands:
    `a + b`, `a - b` (b an EncryptedTensor of the same key or plaintext
    integers), `a * k`, `k * a` (plaintext integers k), `-a`; with `[...]`,
    reduce_sum(a) and broadcasting. Mixed keys raise KeyMismatchError,
    `a * b` of two EncryptedTensors raises TypeError.
    """
    __name__ = "tf_privpy.he.paillier.EncryptedTensor"
    ciphertext: tf.Tensor
    n: bytes

    def __validate__(self):
        if self.ciphertext.dtype != tf.string:
            raise TypeError(f"ciphertext must be a tf.string tensor, got {self.ciphertext.dtype}")

    @property
    def public_key(self) -> PublicKey:
        return public_key_from_bytes(self.n)

    @property
    def fingerprint(self) -> bytes:
        return self.public_key.fingerprint

    @property
    def shape(self) -> tf.TensorShape:
        return self.ciphertext.shape

    def reshape(self, shape) -> "EncryptedTensor":
        return EncryptedTensor(tf.reshape(self.ciphertext, shape), self.n)

    def __getitem__(self, key) -> "EncryptedTensor":
        return EncryptedTensor(self.ciphertext[key], self.n)

    # ---------------------------------------------------------- arithmetic
    # Operators in the manner of python-paillier's EncryptedNumber: the key is
    # the operands' own (every EncryptedTensor carries its modulus), so no key
    # argument. Operands of different keys raise KeyMismatchError; products of
    # two ciphertexts raise TypeError. Broadcasting as in add / mul_plain.
    # Numpy defers to these methods instead of looping over its own elements:
    __array_ufunc__ = None

    def __add__(self, other: Any) -> "EncryptedTensor":
        """Enc(a + b): `other` an EncryptedTensor of the same key, or plaintext
        integers (encrypted with noise 1, as phe does: a's noise hides the
        sum).

        >>> pk, sk = keygen()
        >>> a, b = encrypt(pk, [1, -2]), encrypt(pk, [10, 20])
        >>> decrypt(sk, a + b).numpy().tolist(), decrypt(sk, a + [5, 5]).numpy().tolist()
        ([11, 18], [6, 3])
        """
        return add(self.public_key, self, _same_key(self, other, "+"))

    __radd__ = __add__

    def __sub__(self, other: Any) -> "EncryptedTensor":
        """Enc(a - b), `other` an EncryptedTensor of the same key or plaintext.

        >>> decrypt(sk, a - b).numpy().tolist(), decrypt(sk, a - 1).numpy().tolist()
        ([-9, -22], [0, -3])
        """
        return subtract(self.public_key, self, _same_key(self, other, "-"))

    def __rsub__(self, other: Any) -> "EncryptedTensor":
        """Enc(k - a) for plaintext k: `[5, 5] - a`."""
        return add(self.public_key, -self, other)

    def __mul__(self, k: Any) -> "EncryptedTensor":
        """Enc(a k) for plaintext integers k (any sign, broadcast). Never the
        noiseless Enc(0): see mul_plain. EncryptedTensor * EncryptedTensor is
        a TypeError (Paillier is additively homomorphic only).

        >>> decrypt(sk, a * 3).numpy().tolist(), decrypt(sk, [0, -1] * a).numpy().tolist()
        ([3, -6], [0, 2])
        """
        if isinstance(k, EncryptedTensor):
            raise TypeError(
                "cannot multiply two EncryptedTensors: Paillier is additively homomorphic "
                "only (ciphertexts add, and multiply by plaintext integers). Multiply by a "
                "plaintext, or use a protocol for products of private values: tp.share (MPC) "
                "or tp.he.scalar_product")
        return mul_plain(self.public_key, self, k)

    __rmul__ = __mul__

    def __neg__(self) -> "EncryptedTensor":
        """Enc(-a).

        >>> decrypt(sk, -a).numpy().tolist()
        [-1, 2]
        """
        return mul_plain(self.public_key, self, -1)

    def __repr__(self) -> str:
        pk = self.public_key
        return (f"<EncryptedTensor shape={self.shape} key={pk.bits}-bit "
                f"fingerprint {pk.fingerprint.hex()}>")

    __str__ = __repr__


# ------------------------------------------------------------------- checks
def check_encrypted(key: AnyKey, x: Any, what: str = "ciphertext") -> EncryptedTensor:
    """x must be an EncryptedTensor of `key`; raises KeyMismatchError if not."""
    if not isinstance(x, EncryptedTensor):
        raise TypeError(f"{what} must be an EncryptedTensor (from encrypt or deserialize), got "
                        f"{type(x).__name__}; wrap raw ciphertext tensors with "
                        "EncryptedTensor(ciphertext, public_key.n_bytes)")
    pk = as_public_key(key)
    if x.n != pk.n_bytes:
        raise KeyMismatchError(
            f"{what} was encrypted under the key with fingerprint {x.fingerprint.hex()}, but "
            f"the key given has fingerprint {pk.fingerprint.hex()}; use the matching key")
    return x


def _same_key(a: EncryptedTensor, other: Any, op: str) -> Any:
    """`other`, after checking that an EncryptedTensor operand has a's key."""
    if isinstance(other, EncryptedTensor) and other.n != a.n:
        raise KeyMismatchError(
            f"a {op} b: the operands were encrypted under different keys (fingerprints "
            f"{a.fingerprint.hex()} and {other.fingerprint.hex()}). Ciphertexts combine only "
            "under one key: have the key holder decrypt one and re-encrypt it under the "
            "other's key")
    return other



# --------------------------------------------------------------- plaintexts
_SMALL_INTS = (tf.int8, tf.int16, tf.int32, tf.uint8, tf.uint16, tf.uint32)


def ints_to_tensor(values, width: int) -> tf.Tensor:
    """Non-negative python ints (array-like) -> tf.string of width-byte
    big-endian integers, same shape."""
    arr = np.asarray(values, dtype=object)
    flat = [int(v).to_bytes(width, "big") for v in arr.reshape(-1)]
    return tf.reshape(tf.constant(flat, tf.string, shape=[len(flat)]), arr.shape)


def tensor_to_ints(t) -> np.ndarray:
    """tf.string tensor of big-endian unsigned integers -> numpy object array
    of python ints (eager)."""
    arr = np.asarray(t.numpy() if hasattr(t, "numpy") else t, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for idx, b in np.ndenumerate(arr):
        out[idx] = int.from_bytes(b, "big")
    return out


def plaintext_tensor(pk: PublicKey, x: Any) -> tf.Tensor:
    """A plaintext for the kernels: int64 (signed) or tf.string (unsigned
    big integers in [0, n)). Python ints beyond int64 are signed, |x| < n/2."""
    if isinstance(x, EncryptedTensor):
        raise TypeError("expected a plaintext, got an EncryptedTensor")
    if tf.is_tensor(x):
        if x.dtype in (tf.int64, tf.string):
            return x
        if x.dtype in _SMALL_INTS:
            return tf.cast(x, tf.int64)
        raise TypeError(f"plaintexts are integers: int64 (or a smaller int dtype) tensors, or "
                        f"tf.string tensors of big-endian unsigned integers; got {x.dtype}. "
                        "Encode floats as fixed-point integers first")
    if isinstance(x, np.ndarray) and x.dtype != object:
        if x.dtype.kind == "i" or (x.dtype.kind == "u" and x.dtype.itemsize < 8):
            return tf.constant(x.astype(np.int64))
        if x.dtype.kind != "u":
            raise TypeError(f"plaintexts are integers, got a numpy {x.dtype} array; encode "
                            "floats as fixed-point integers first")
    arr = np.array(x, dtype=object)
    flat = arr.reshape(-1)
    for i, v in enumerate(flat):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"plaintext element {i} is {type(v).__name__} {v!r}; plaintexts "
                            "are integers (encode floats as fixed-point integers first)")
    ints = [int(v) for v in flat]
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    if all(lo <= v <= hi for v in ints):
        return tf.constant(np.array(ints, dtype=np.int64).reshape(arr.shape))
    for i, v in enumerate(ints):
        if abs(v) > pk.max_int:
            raise PlaintextOutOfRangeError(
                f"plaintext element {i} ({v.bit_length()} bits) is out of range: a signed "
                f"plaintext of this {pk.bits}-bit key needs |x| < n/2. For unsigned values in "
                "[0, n) pass a tf.string tensor (ints_to_tensor)")
    return _residues(pk, ints, arr.shape)


def _residues(pk: PublicKey, ints, shape) -> tf.Tensor:
    residues = np.empty(len(ints), dtype=object)
    residues[:] = [v % pk.n for v in ints]
    return ints_to_tensor(residues.reshape(shape), pk.plaintext_bytes)


def factor_tensor(pk: PublicKey, k: Any) -> tf.Tensor:
    """A multiplier for mul_plain: int64 (any sign) or tf.string in [0, n).
    Python ints beyond int64 are reduced mod n (c^(k mod n) decrypts to the
    same k m mod n as c^k)."""
    if tf.is_tensor(k) or (isinstance(k, np.ndarray) and k.dtype != object):
        return plaintext_tensor(pk, k)
    arr = np.array(k, dtype=object)
    ints = []
    for i, v in enumerate(arr.reshape(-1)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"factor element {i} is {type(v).__name__} {v!r}; mul_plain "
                            "multiplies by integers")
        ints.append(int(v))
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    if all(lo <= v <= hi for v in ints):
        return tf.constant(np.array(ints, dtype=np.int64).reshape(arr.shape))
    return _residues(pk, ints, arr.shape)


def _broadcast(a: tf.Tensor, b: tf.Tensor):
    if a.shape.is_fully_defined() and b.shape.is_fully_defined() and a.shape == b.shape:
        return a, b
    shape = tf.broadcast_dynamic_shape(tf.shape(a), tf.shape(b))
    return tf.broadcast_to(a, shape), tf.broadcast_to(b, shape)


# --------------------------------------------------------------- operations
def keygen(bits: int = DEFAULT_BITS):
    """(PublicKey, PrivateKey) of a fresh key from the OS CSPRNG (eager).

    Up to 4096 bits, each prime is p = 2 k p' + 1 with p' a random prime of
    bits/2 - 40 bits and k < 2^40 2^20-smooth, so that the kernels can factor
    p - 1 and give the key holder exact fixed-base CRT noise (several times
    cheaper encryption); see ops/paillier/paillier_fixed_base.cc for why
    this structure does not weaken the key."""
    check_key_bits(bits)
    if not tf.executing_eagerly():
        raise PaillierError("keygen runs eagerly (keys are python values); call it outside "
                            "tf.function and pass the keys in")
    n, p, q = (int.from_bytes(t.numpy(), "big") for t in K.paillier_keygen(int(bits)))
    pk = PublicKey(n)
    return pk, PrivateKey(pk, p, q)


NOISE_METHODS = ("generic", "djn")


def _method(noise: Any) -> Optional[str]:
    """The kernel noise method named by `noise`, or None for a pool/tensor."""
    if noise is None:
        return "generic"
    if isinstance(noise, str):
        if noise not in NOISE_METHODS:
            raise ValueError(f"noise must be one of {NOISE_METHODS}, a NoisePool or a tf.string "
                             f"tensor, got {noise!r}")
        return noise
    return None


def encrypt(key: AnyKey, plaintext: Any, noise: Any = None) -> EncryptedTensor:
    """Encrypts; PrivateKey -> CRT noise (fast; fastest, from per-key
    fixed-base tables, for keys of `keygen`), PublicKey -> generic r^n;
    noise="djn" -> DJN fixed-base noise (public key, opt-in), or `noise` a
    NoisePool or a string tensor of unused noise values."""
    pk = as_public_key(key)
    m = plaintext_tensor(pk, plaintext)
    method = _method(noise)
    with kernel_errors():
        if method is None:
            r = take_noise(noise, m)
            c = K.paillier_encrypt_with_noise(pk.n_tensor(), m, r)
        elif isinstance(key, PrivateKey) and method == "generic":
            c = K.paillier_encrypt_crt(*key.key_tensors(), m)
        else:
            c = K.paillier_encrypt(pk.n_tensor(), m, method=method)
    return EncryptedTensor(c, pk.n_bytes)


def take_noise(noise: Any, like: tf.Tensor) -> tf.Tensor:
    """Noise values shaped like `like`: from a pool (taken, so never reused) or
    a string tensor the caller guarantees is unused."""
    if hasattr(noise, "take"):  # a NoisePool
        size = like.shape.num_elements()
        if size is None:
            raise PaillierError("encrypting with a NoisePool needs a statically known shape")
        return tf.reshape(noise.take(size), tf.shape(like))
    if tf.is_tensor(noise) and noise.dtype == tf.string:
        return tf.reshape(noise, tf.shape(like))
    raise TypeError(f"noise must be a NoisePool or a tf.string tensor, got {type(noise).__name__}")


def decrypt(key: PrivateKey, x: EncryptedTensor, out_type: tf.DType = tf.int64) -> tf.Tensor:
    """Decrypts to int64 (signed; error if it does not fit) or tf.string
    (unsigned big-endian integers in [0, n))."""
    if not isinstance(key, PrivateKey):
        raise TypeError(f"decrypt needs a PrivateKey, got {type(key).__name__}")
    check_encrypted(key, x)
    out_type = tf.as_dtype(out_type)
    if out_type not in (tf.int64, tf.string):
        raise TypeError(f"out_type must be tf.int64 or tf.string, got {out_type}")
    with kernel_errors():
        return K.paillier_decrypt(*key.key_tensors(), x.ciphertext, out_type=out_type)


def decrypt_ints(key: PrivateKey, x: EncryptedTensor, signed: bool = True) -> np.ndarray:
    """Decrypts to a numpy object array of python ints (eager): signed values
    in (-n/2, n/2), or unsigned in [0, n)."""
    ints = tensor_to_ints(decrypt(key, x, tf.string))
    if signed:
        n, half = key.public_key.n, key.public_key.max_int
        for idx, v in np.ndenumerate(ints):
            if v > half:
                ints[idx] = v - n
    return ints


def add(key: AnyKey, a: EncryptedTensor, b: Any) -> EncryptedTensor:
    """a + b with broadcasting; b an EncryptedTensor or a plaintext."""
    pk = as_public_key(key)
    check_encrypted(pk, a, "a")
    with kernel_errors():
        if isinstance(b, EncryptedTensor):
            check_encrypted(pk, b, "b")
            x, y = _broadcast(a.ciphertext, b.ciphertext)
            c = K.paillier_add(pk.n_tensor(), x, y)
        else:  # (1 + m n) c: adds m, keeps c's noise
            m = plaintext_tensor(pk, b)
            x, y = _broadcast(a.ciphertext, m)
            c = K.paillier_encrypt_with_noise(pk.n_tensor(), y, x)
    return EncryptedTensor(c, pk.n_bytes)


def _mul_plain_raw(pk: PublicKey, c: tf.Tensor, k: Any) -> tf.Tensor:
    """c^k mod n^2, broadcast; may be the noiseless 1 (k = 0): internal only."""
    x, y = _broadcast(c, factor_tensor(pk, k))
    with kernel_errors():
        return K.paillier_mul_plain(pk.n_tensor(), x, y)


def trivial_zero(pk: PublicKey) -> bytes:
    """The ciphertext 1 (ciphertext_bytes wide): Enc(0) with noise 1, which
    anyone recognises."""
    return b"\x00" * (pk.ciphertext_bytes - 1) + b"\x01"


def refresh_trivial(key: AnyKey, c: tf.Tensor) -> tf.Tensor:
    """c with every element equal to 1 (the noiseless encryption of 0)
    replaced by a fresh encryption of 0; the other elements untouched.

    Cost: one string comparison per element, plus one noise value per element
    that was 1. Eagerly, nothing else runs when no element is 1; in a graph
    the gather / scatter run on empty tensors."""
    pk = as_public_key(key)
    trivial = tf.equal(c, tf.constant(trivial_zero(pk)))
    if tf.executing_eagerly() and not bool(tf.reduce_any(trivial)):
        return c
    where = tf.where(trivial)
    # rerandomize(1) = 1 * r^n: the noise itself, a fresh encryption of 0.
    fresh = rerandomize(key, EncryptedTensor(tf.gather_nd(c, where), pk.n_bytes)).ciphertext
    return tf.tensor_scatter_nd_update(c, where, fresh)


def mul_plain(key: AnyKey, a: EncryptedTensor, k: Any) -> EncryptedTensor:
    """a * k for plaintext integers k (any sign), with broadcasting.

    Never returns the noiseless encryption of 0. c^0 = 1 whatever c is, so a
    zero factor would yield the ciphertext 1, which tells anyone that this
    plaintext is 0 (and that k was 0). Every output element equal to 1 gets
    fresh noise (refresh_trivial): that is exactly the zero factors (also
    k = n, or a big-integer k = 0 mod n) and any input that was itself 1.
    Testing the output rather than k works for every k encoding (int64,
    big-endian strings) and inside tf.function. Other elements keep c^k's
    noise r^k, as phe's products do: it hides the plaintext as well as c's
    noise did; rerandomize before sending if c^k must not be linkable to c.
    """
    pk = as_public_key(key)
    check_encrypted(pk, a)
    c = _mul_plain_raw(pk, a.ciphertext, k)
    with kernel_errors():
        c = refresh_trivial(key, c)
    return EncryptedTensor(c, pk.n_bytes)


def subtract(key: AnyKey, a: EncryptedTensor, b: Any) -> EncryptedTensor:
    """a - b; b an EncryptedTensor or a plaintext.

    Negates with the raw c^-1 (not mul_plain): its output is 1 only where b
    is, and the sum carries a's noise, so there is nothing to refresh."""
    pk = as_public_key(key)
    check_encrypted(pk, a, "a")
    if isinstance(b, EncryptedTensor):
        check_encrypted(pk, b, "b")
        neg = _mul_plain_raw(pk, b.ciphertext, -1)
    else:
        neg = _mul_plain_raw(pk, encrypt_trivial(pk, b).ciphertext, -1)
    return add(pk, a, EncryptedTensor(neg, pk.n_bytes))


def encrypt_trivial(pk: PublicKey, plaintext: Any) -> EncryptedTensor:
    """(1 + m n) mod n^2: the encryption of m with noise 1. NOT hiding; only
    for combining with real ciphertexts."""
    m = plaintext_tensor(pk, plaintext)
    one = tf.fill(tf.shape(m), tf.constant(trivial_zero(pk)))
    with kernel_errors():
        return EncryptedTensor(K.paillier_encrypt_with_noise(pk.n_tensor(), m, one), pk.n_bytes)


def rerandomize(key: AnyKey, a: EncryptedTensor, noise: Any = None) -> EncryptedTensor:
    """The same plaintexts under fresh noise (CRT noise for a PrivateKey)."""
    pk = as_public_key(key)
    check_encrypted(pk, a)
    method = _method(noise)
    with kernel_errors():
        if method is None:
            c = K.paillier_add(pk.n_tensor(), a.ciphertext, take_noise(noise, a.ciphertext))
        elif isinstance(key, PrivateKey) and method == "generic":
            size = tf.size(a.ciphertext, tf.int64)
            r = tf.reshape(K.paillier_noise_crt(*key.key_tensors(), size), tf.shape(a.ciphertext))
            c = K.paillier_add(pk.n_tensor(), a.ciphertext, r)
        else:
            c = K.paillier_rerandomize(pk.n_tensor(), a.ciphertext, method=method)
    return EncryptedTensor(c, pk.n_bytes)


def reduce_sum(key: AnyKey, a: EncryptedTensor, axis=None) -> EncryptedTensor:
    """Homomorphic sum over `axis` (an int or None for all elements)."""
    pk = as_public_key(key)
    check_encrypted(pk, a)
    c = a.ciphertext
    rank = c.shape.rank
    if rank is None:
        raise PaillierError("reduce_sum needs a ciphertext of known rank")
    if axis is None:
        out_shape, mat = [], tf.reshape(c, [1, -1])
    else:
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"axis must be an int or None, got {axis!r}")
        ax = int(axis)
        if not -rank <= ax < rank:
            raise ValueError(f"axis {axis} is out of range for a rank-{rank} ciphertext")
        ax %= rank
        perm = [i for i in range(rank) if i != ax] + [ax]
        moved = tf.transpose(c, perm)
        out_shape = tf.shape(moved)[:-1]
        mat = tf.reshape(moved, [-1, tf.shape(c)[ax]])
    with kernel_errors():
        s = K.paillier_reduce_sum(pk.n_tensor(), mat)
    return EncryptedTensor(tf.reshape(s, out_shape), pk.n_bytes)


def validate(key: AnyKey, a: Any) -> tf.Tensor:
    """bool tensor: which elements are well-formed ciphertexts of the key."""
    pk = as_public_key(key)
    c = a.ciphertext if isinstance(a, EncryptedTensor) else a
    return K.paillier_validate(pk.n_tensor(), c)
