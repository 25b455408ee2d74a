"""Paillier encryption on TF tensors: `tp.he.paillier` (DESIGN §9).

Ciphertexts are `EncryptedTensor`s: a tf.string tensor of ciphertexts (same
shape as the plaintext) plus the identity of their key, usable eagerly and
inside tf.function. Kernels are C++ on GMP, parallel over elements.

    >>> import tf_privpy as tp
    >>> from tf_privpy.he import paillier
    >>> pk, sk = paillier.keygen()                  # 2048 bits
    >>> a = paillier.encrypt(pk, [1, -2, 3])         # anyone with pk
    >>> b = paillier.encrypt(sk, [10, 20, 30])       # the key holder: CRT, ~4x faster
    >>> paillier.decrypt(sk, paillier.add(pk, a, b))
    <tf.Tensor: shape=(3,), dtype=int64, numpy=array([11, 18, 33])>
    >>> paillier.decrypt(sk, paillier.mul_plain(pk, a, -3))
    <tf.Tensor: shape=(3,), dtype=int64, numpy=array([-3,  6, -9])>

EncryptedTensors also take python-paillier's operators, with the key taken
from the operands: `a + b`, `a + [1, 2, 3]`, `a - b`, `2 * a`, `-a`, and
`paillier.reduce_sum(a)`:

    >>> paillier.decrypt(sk, 2 * (a - b) + 1)
    <tf.Tensor: shape=(3,), dtype=int64, numpy=array([-17, -43, -53])>
    >>> paillier.decrypt(sk, paillier.reduce_sum(-a))
    <tf.Tensor: shape=(), dtype=int64, numpy=-2>

Operands of different keys raise KeyMismatchError; `a * b` of two
EncryptedTensors raises TypeError (Paillier is additively homomorphic only).

Plaintexts are integers: int64 (or smaller int) tensors and arrays, python
ints (|x| < n/2, negatives encoded as n + x like python-paillier), or
tf.string tensors of unsigned big-endian integers in [0, n) (packed values;
`ints_to_tensor` makes them). Floats must be encoded as fixed point first.

Speed: the key holder encrypts with CRT noise and decrypts with CRT; a party
that only has the public key pays a full exponentiation per encryption (as
python-paillier does), precomputes it with a `NoisePool` in the background,
or opts into DJN's fixed-base noise (`noise="djn"`, about 10x cheaper, one
more assumption). Measured figures: README, "Paillier".

Errors are `PaillierError` (a ValueError) subclasses: `KeyMismatchError`
(ciphertext of another key), `CorruptCiphertextError` (not in Z*_{n^2}, wrong
width, bad checksum), `PlaintextOutOfRangeError`, `NoisePoolExhaustedError`.
Raw ciphertext tensors carry no key: a ciphertext of another key is not
always detected there, which is why this API only takes EncryptedTensors.
Tracing a tf.function that uses a PrivateKey embeds p and q in the graph as
constants: do not export such graphs.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.he import paillier as _p
from tf_privpy.protocols.he import paillier_io as _io
from tf_privpy.protocols.he.paillier import (CorruptCiphertextError, EncryptedTensor,
                                          InsecureKeyWarning, KeyMismatchError,
                                          NoisePoolExhaustedError, PaillierError,
                                          PlaintextOutOfRangeError, PrivateKey, PublicKey,
                                          ints_to_tensor, tensor_to_ints)
from tf_privpy.protocols.he.paillier_pool import NoisePool

Key = Union[PublicKey, PrivateKey]
Noise = Union[NoisePool, tf.Tensor, str, None]

__all__ = [
    "CorruptCiphertextError", "EncryptedTensor", "InsecureKeyWarning", "KeyMismatchError",
    "NoisePool", "NoisePoolExhaustedError", "PaillierError", "PlaintextOutOfRangeError",
    "PrivateKey", "PublicKey", "add", "decrypt", "decrypt_ints", "deserialize", "encrypt",
    "from_phe", "ints_to_tensor", "keygen", "mul_plain", "reduce_sum", "rerandomize",
    "serialize", "subtract", "sum", "tensor_to_ints", "to_phe", "validate",
]


def keygen(bits: int = 2048) -> Tuple[PublicKey, PrivateKey]:
    """A fresh key pair from the OS CSPRNG.

    Args:
      bits: modulus size: 2048 (default) or 3072 (4096 works too). 1024 is
        accepted with an InsecureKeyWarning, for comparison with seed 004 only;
        fewer than 1024 or odd sizes raise ValueError.

    Example:
      >>> pk, sk = tp.he.paillier.keygen(3072)
      >>> pk.bits, pk.fingerprint.hex()
      (3072, '5f0c...')
    """
    return _p.keygen(bits)


def encrypt(key: Key, plaintext: Any, noise: Noise = None) -> EncryptedTensor:
    """Encrypts integers.

    Args:
      key: a PrivateKey encrypts with CRT noise (the fast path for the key
        holder); a PublicKey with fresh r^n mod n^2 (same distribution).
      plaintext: int64 / smaller int tensor or array, python ints (|x| < n/2),
        or a tf.string tensor of unsigned big-endian integers in [0, n).
      noise: None (the default noise of the key, above); "djn" for DJN
        fixed-base noise (several times faster for public-key holders, but
        resting on DJN's short-exponent assumption on top of Paillier's:
        opt-in); a NoisePool to take precomputed noise from (one value per
        element, never reused; eager only); or a tf.string tensor of noise
        values that you guarantee are used only here.

    Example:
      >>> c = tp.he.paillier.encrypt(pk, tf.constant([[1, 2], [3, -4]], tf.int64))
      >>> c.shape
      TensorShape([2, 2])
    """
    return _p.encrypt(key, plaintext, noise)


def decrypt(key: PrivateKey, encrypted: EncryptedTensor,
            out_type: tf.DType = tf.int64) -> tf.Tensor:
    """Decrypts with CRT.

    Args:
      out_type: tf.int64 (signed: values above (n-1)/2 are negative; an error
        names any element that does not fit in int64) or tf.string (unsigned
        big-endian integers in [0, n), ceil(bits/8) bytes each).

    Raises KeyMismatchError if `encrypted` belongs to another key, and
    CorruptCiphertextError naming the element if a ciphertext is not in
    Z*_{n^2}.

    Example:
      >>> tp.he.paillier.decrypt(sk, tp.he.paillier.encrypt(pk, [7, -7]))
      <tf.Tensor: shape=(2,), dtype=int64, numpy=array([ 7, -7])>
    """
    return _p.decrypt(key, encrypted, out_type)


def decrypt_ints(key: PrivateKey, encrypted: EncryptedTensor, signed: bool = True) -> np.ndarray:
    """Decrypts to a numpy object array of python ints (eager): signed
    (-n/2, n/2) by default, or unsigned [0, n).

    Example:
      >>> tp.he.paillier.decrypt_ints(sk, tp.he.paillier.encrypt(pk, [2**100, -1]))
      array([1267650600228229401496703205376, -1], dtype=object)
    """
    return _p.decrypt_ints(key, encrypted, signed)


def add(key: Key, a: EncryptedTensor, b: Any) -> EncryptedTensor:
    """Homomorphic a + b with broadcasting; b is an EncryptedTensor of the same
    key or a plaintext (added without new noise: a's noise hides the sum).

    Example:
      >>> s = tp.he.paillier.add(pk, a, b)              # Enc(a + b)
      >>> t = tp.he.paillier.add(pk, a, [100, 200, 300])  # Enc(a + [100, 200, 300])
    """
    return _p.add(key, a, b)


def subtract(key: Key, a: EncryptedTensor, b: Any) -> EncryptedTensor:
    """Homomorphic a - b; b an EncryptedTensor or a plaintext."""
    return _p.subtract(key, a, b)


def mul_plain(key: Key, a: EncryptedTensor, k: Any) -> EncryptedTensor:
    """Homomorphic a * k for plaintext integers k (negative too), with
    broadcasting. Constant-time in k's bits (not its sign). `a * k` does the
    same with the key taken from `a`.

    Never returns the noiseless encryption of 0: c^0 is the ciphertext 1 for
    every c, which anyone recognises, so the elements where k is 0 (mod n)
    get fresh noise (from the private key's CRT path when `key` is one). The
    other elements are c^k, noised by c's own noise, as in python-paillier;
    `rerandomize` the result before sending it if it must be unlinkable to
    `a` for someone who knows k.

    Example:
      >>> tp.he.paillier.decrypt(sk, tp.he.paillier.mul_plain(pk, a, [2, -1, 0]))
      <tf.Tensor: shape=(3,), dtype=int64, numpy=array([ 2,  2,  0])>
    """
    return _p.mul_plain(key, a, k)


def rerandomize(key: Key, encrypted: EncryptedTensor, noise: Noise = None) -> EncryptedTensor:
    """The same plaintexts under fresh noise (unlinkable to the input): CRT
    noise with a PrivateKey, r^n with a PublicKey; noise as in encrypt."""
    return _p.rerandomize(key, encrypted, noise)


def reduce_sum(key_or_encrypted: Union[Key, EncryptedTensor],
               encrypted: Union[EncryptedTensor, int, None] = None,
               axis: Optional[int] = None) -> EncryptedTensor:
    """Homomorphic sum over one axis, or over all elements (axis=None), in
    C++ (rows split over the thread pool): use it to aggregate many
    ciphertexts rather than chains of add.

    Called as `reduce_sum(a, axis=None)` it takes the key from `a` (like the
    operators); `reduce_sum(key, a, axis=None)` checks `a` against `key`.

    Example:
      >>> tp.he.paillier.decrypt(sk, tp.he.paillier.reduce_sum(a))
      <tf.Tensor: shape=(), dtype=int64, numpy=2>
      >>> tp.he.paillier.decrypt(sk, tp.he.paillier.reduce_sum(pk, a, axis=0))
      <tf.Tensor: shape=(), dtype=int64, numpy=2>
    """
    if isinstance(key_or_encrypted, EncryptedTensor):
        if encrypted is not None and axis is not None:
            raise TypeError("reduce_sum(a, axis) got the axis twice; call reduce_sum(a, axis=k) "
                            "or reduce_sum(key, a, axis=k)")
        if isinstance(encrypted, EncryptedTensor):
            raise TypeError("reduce_sum sums one EncryptedTensor: call reduce_sum(a, axis=k), "
                            "or reduce_sum(key, a, axis=k); add two with a + b")
        a = key_or_encrypted
        return _p.reduce_sum(a.public_key, a, axis if encrypted is None else encrypted)
    if encrypted is None:
        raise TypeError("reduce_sum(key, a, axis=None) needs the EncryptedTensor a; or call "
                        "reduce_sum(a, axis=None), which takes the key from a")
    return _p.reduce_sum(key_or_encrypted, encrypted, axis)


sum = reduce_sum  # noqa: A001  (tp.he.paillier.sum reads naturally)


def validate(key: Key, encrypted: Union[EncryptedTensor, tf.Tensor]) -> tf.Tensor:
    """bool tensor: which elements are well-formed ciphertexts of the key
    (right width, in Z*_{n^2}). Cannot tell a ciphertext of another key of the
    same size; the fingerprint in EncryptedTensor and serialize() does."""
    return _p.validate(key, encrypted)


def serialize(encrypted: EncryptedTensor) -> bytes:
    """Bytes carrying the key fingerprint, the shape, the ciphertexts and a
    SHA-256 checksum (format in tf_privpy.protocols.he.paillier_io).

    Example:
      >>> blob = tp.he.paillier.serialize(c)
      >>> tp.he.paillier.deserialize(blob, pk).shape
      TensorShape([3])
    """
    return _io.serialize(encrypted)


def deserialize(data: bytes, key: Key) -> EncryptedTensor:
    """The EncryptedTensor of serialize()'s bytes. Raises
    CorruptCiphertextError for damaged bytes and KeyMismatchError for
    ciphertexts of another key."""
    return _io.deserialize(data, key)


def to_phe(obj: Union[PublicKey, PrivateKey, EncryptedTensor]):
    """To python-paillier: PublicKey -> phe.PaillierPublicKey, PrivateKey ->
    phe.PaillierPrivateKey, EncryptedTensor -> numpy object array of
    phe.EncryptedNumber (exponent 0). phe decodes |x| <= n/3 - 1 only.

    Example:
      >>> phe_sk = tp.he.paillier.to_phe(sk)
      >>> [phe_sk.decrypt(e) for e in tp.he.paillier.to_phe(c)]
      [1, -2, 3]
    """
    return _io.to_phe(obj)


def from_phe(obj: Any, be_secure: bool = True):
    """From python-paillier: keys, or an EncryptedNumber / list / array of them
    (one key) -> EncryptedTensor. Numbers that phe has not rerandomized are
    obfuscated first unless be_secure=False (phe's own default and flag).

    Example:
      >>> phe_pk, phe_sk = phe.generate_paillier_keypair(n_length=2048)
      >>> pk, sk = tp.he.paillier.from_phe(phe_pk), tp.he.paillier.from_phe(phe_sk)
      >>> tp.he.paillier.decrypt(sk, tp.he.paillier.from_phe([phe_pk.encrypt(5)]))
      <tf.Tensor: shape=(1,), dtype=int64, numpy=array([5])>
    """
    return _io.from_phe(obj, be_secure)
