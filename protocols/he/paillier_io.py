"""Paillier ciphertexts and keys in and out of the process: a checksummed,
key-bound serialization of EncryptedTensors, and conversion to and from
python-paillier (`phe`) objects.

Serialized form (version 1), all integers big-endian:

    offset  size      field
    0       4         magic b"TPHE"
    4       1         version (1)
    5       1         kind (1 = Paillier ciphertexts)
    6       2         ndim
    8       8         key fingerprint: SHA-256(n's minimal bytes)[:8]
    16      4         width: bytes per ciphertext (2 ceil(bits(n) / 8))
    20      8 ndim    shape
    ...     w count   ciphertexts, row-major, each `width` bytes
    end-16  16        checksum: SHA-256(every byte before it)[:16]

The checksum detects accidental corruption (a flipped byte passes with
probability 2^-128). It is a hash, not a MAC: whoever can modify the bytes
can recompute it, so it does not authenticate the sender; that needs a key
the two ends share (or a signature), which this format leaves to the
transport. SHA-256 (hashlib) rather than CRC32C because CRC32C is not in the
standard library and 32 bits would let one corrupted blob in 4 billion
through; hashing costs about 2 ms per MB, small beside the encryption.
A corrupted ciphertext can still be a valid element of Z*_{n^2} and would then
decrypt to a wrong number: the checksum is what rules that out.
"""
from __future__ import annotations

import hashlib
import struct
from typing import Any

import numpy as np
import tensorflow as tf

from . import kernels as K
from .paillier import (AnyKey, CorruptCiphertextError, EncryptedTensor, KeyMismatchError,
                       PaillierError, PrivateKey, PublicKey, as_public_key, check_encrypted,
                       check_key_bits)

MAGIC = b"TPHE"
VERSION = 1
KIND_PAILLIER = 1
CHECKSUM_BYTES = 16
_HEADER = struct.Struct(">4sBBH8sI")
_DIM = struct.Struct(">Q")


def _checksum(body: bytes) -> bytes:
    return hashlib.sha256(body).digest()[:CHECKSUM_BYTES]


def _eager(what: str) -> None:
    if not tf.executing_eagerly():
        raise PaillierError(f"{what} works on concrete values: call it eagerly, outside "
                            "tf.function")


def serialize(x: EncryptedTensor) -> bytes:
    """The bytes of an EncryptedTensor (see the module docstring)."""
    _eager("serialize")
    if not isinstance(x, EncryptedTensor):
        raise TypeError(f"serialize takes an EncryptedTensor, got {type(x).__name__}")
    pk = x.public_key
    valid = K.paillier_validate(pk.n_tensor(), x.ciphertext).numpy()
    if not valid.all():
        bad = int(np.flatnonzero(valid.reshape(-1) == 0)[0])
        raise CorruptCiphertextError(f"ciphertext element {bad} is not a valid ciphertext of "
                                     "its key; refusing to serialize it")
    arr = np.asarray(x.ciphertext.numpy(), dtype=object)  # a scalar is bytes
    header = _HEADER.pack(MAGIC, VERSION, KIND_PAILLIER, arr.ndim, pk.fingerprint,
                          pk.ciphertext_bytes)
    body = b"".join([header] + [_DIM.pack(d) for d in arr.shape] + arr.reshape(-1).tolist())
    return body + _checksum(body)


def deserialize(data: bytes, key: AnyKey) -> EncryptedTensor:
    """An EncryptedTensor from serialize()'s bytes, for `key` (its public key
    is enough). Raises CorruptCiphertextError if the bytes are damaged and
    KeyMismatchError if they were made under another key."""
    _eager("deserialize")
    pk = as_public_key(key)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"deserialize takes bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < _HEADER.size + CHECKSUM_BYTES or data[:4] != MAGIC:
        raise CorruptCiphertextError("not a serialized tf_privpy Paillier ciphertext (bad magic "
                                     "or too short)")
    body, checksum = data[:-CHECKSUM_BYTES], data[-CHECKSUM_BYTES:]
    if _checksum(body) != checksum:
        raise CorruptCiphertextError(
            "checksum mismatch: the serialized ciphertext was corrupted or altered in transit; "
            "ask the sender to send it again")
    _, version, kind, ndim, fingerprint, width = _HEADER.unpack_from(body)
    if version != VERSION or kind != KIND_PAILLIER:
        raise PaillierError(f"serialized ciphertext has version {version} kind {kind}; this "
                            f"tf_privpy reads version {VERSION} kind {KIND_PAILLIER}")
    if fingerprint != pk.fingerprint:
        raise KeyMismatchError(
            f"the ciphertext was made under the key with fingerprint {fingerprint.hex()}, not "
            f"this key ({pk.fingerprint.hex()}); deserialize it with the matching key")
    off = _HEADER.size
    if width != pk.ciphertext_bytes or len(body) < off + ndim * _DIM.size:
        raise CorruptCiphertextError("inconsistent header: element width or shape")
    shape = [_DIM.unpack_from(body, off + i * _DIM.size)[0] for i in range(ndim)]
    off += ndim * _DIM.size
    count = int(np.prod(shape, dtype=object)) if shape else 1
    if len(body) - off != count * width:
        raise CorruptCiphertextError(f"payload has {len(body) - off} bytes; shape {shape} of "
                                     f"{width}-byte ciphertexts needs {count * width}")
    flat = [body[off + i * width: off + (i + 1) * width] for i in range(count)]
    c = tf.reshape(tf.constant(flat, tf.string, shape=[count]), shape)
    valid = K.paillier_validate(pk.n_tensor(), c).numpy().reshape(-1)
    if not valid.all():
        raise CorruptCiphertextError(f"ciphertext element {int(np.flatnonzero(~valid)[0])} "
                                     "is not in Z*_{n^2}")
    return EncryptedTensor(c, pk.n_bytes)


# ------------------------------------------------------------------ phe interop
def _phe():
    try:
        import phe  # noqa: PLC0415 (optional until used)
    except ImportError as e:
        raise ImportError("python-paillier is needed for to_phe/from_phe: pip install "
                          "phe==1.5.0 (requirements/base.txt pins it)") from e
    return phe


def to_phe(obj: Any):
    """PublicKey -> phe.PaillierPublicKey; PrivateKey -> phe.PaillierPrivateKey;
    EncryptedTensor -> numpy object array (same shape) of phe.EncryptedNumber
    with exponent 0 (eager). phe decodes |x| <= n/3 - 1 (its max_int); values
    beyond that (we allow up to n/2) raise OverflowError in phe."""
    phe = _phe()
    if isinstance(obj, PublicKey):
        return phe.PaillierPublicKey(obj.n)
    if isinstance(obj, PrivateKey):
        return phe.PaillierPrivateKey(phe.PaillierPublicKey(obj.public_key.n), obj.p, obj.q)
    if isinstance(obj, EncryptedTensor):
        _eager("to_phe")
        pub = phe.PaillierPublicKey(obj.public_key.n)
        arr = obj.ciphertext.numpy()
        out = np.empty(arr.shape, dtype=object)
        for idx, b in np.ndenumerate(arr):
            out[idx] = phe.EncryptedNumber(pub, int.from_bytes(b, "big"), 0)
        return out
    raise TypeError(f"to_phe converts PublicKey, PrivateKey or EncryptedTensor, got "
                    f"{type(obj).__name__}")


def from_phe(obj: Any, be_secure: bool = True):
    """phe.PaillierPublicKey -> PublicKey; phe.PaillierPrivateKey -> PrivateKey;
    a phe.EncryptedNumber or (nested) list / array of them, all of one key ->
    EncryptedTensor. Numbers with a positive exponent are brought to exponent
    0 (exact); negative exponents (phe's floats) are refused. be_secure is
    passed to phe's EncryptedNumber.ciphertext: True obfuscates numbers that
    phe has not yet rerandomized (results of phe arithmetic)."""
    phe = _phe()
    if isinstance(obj, phe.PaillierPublicKey):
        check_key_bits(obj.n.bit_length(), "phe key")
        return PublicKey(obj.n)
    if isinstance(obj, phe.PaillierPrivateKey):
        check_key_bits(obj.public_key.n.bit_length(), "phe key")
        return PrivateKey(PublicKey(obj.public_key.n), obj.p, obj.q)
    arr = np.empty((), dtype=object)
    if isinstance(obj, phe.EncryptedNumber):
        arr[()] = obj
    else:
        arr = np.array(obj, dtype=object)
    if arr.size == 0:
        raise PaillierError("from_phe needs at least one EncryptedNumber (the key comes "
                            "from them)")
    first = arr.reshape(-1)[0]
    if not isinstance(first, phe.EncryptedNumber):
        raise TypeError(f"from_phe converts phe keys or EncryptedNumbers, got "
                        f"{type(first).__name__}")
    pk = PublicKey(first.public_key.n)
    check_key_bits(pk.bits, "phe key")
    flat = []
    for i, e in enumerate(arr.reshape(-1)):
        if not isinstance(e, phe.EncryptedNumber):
            raise TypeError(f"element {i} is {type(e).__name__}, not a phe.EncryptedNumber")
        if e.public_key.n != pk.n:
            raise KeyMismatchError(f"element {i} is under another phe key than element 0; "
                                   "an EncryptedTensor holds ciphertexts of one key")
        if e.exponent < 0:
            raise PaillierError(
                f"element {i} has exponent {e.exponent}: phe encoded a float. Paillier "
                "ciphertexts here hold integers; encrypt fixed-point integers in phe instead")
        if e.exponent > 0:
            e = e.decrease_exponent_to(0)
        flat.append(e.ciphertext(be_secure=be_secure).to_bytes(pk.ciphertext_bytes, "big"))
    c = tf.reshape(tf.constant(flat, tf.string, shape=[len(flat)]), arr.shape)
    out = EncryptedTensor(c, pk.n_bytes)
    valid = K.paillier_validate(pk.n_tensor(), c).numpy().reshape(-1)
    if not valid.all():
        raise CorruptCiphertextError(f"phe ciphertext {int(np.flatnonzero(~valid)[0])} is "
                                     "not in Z*_{n^2}")
    return check_encrypted(pk, out)
