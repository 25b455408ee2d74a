"""Thin wrappers around the HE kernels (batchcrypt and paillier families)."""
from __future__ import annotations

import tensorflow as tf

from ..loader import ops as _ops

# ---------------------------------------------------------- batchcrypt family
def batchcrypt_pack(slots, slot_bits: int, slots_per_plaintext: int, plaintext_bytes: int):
    """Slot values (int32/int64, any shape, read flat) -> string [ceil(N/k)]:
    plaintext j = (sum_i q[j k + i] 2^(w i)) mod 2^(k w), big-endian bytes."""
    return _ops().tf_privpy_batchcrypt_pack(slots=slots, slot_bits=slot_bits,
                                            slots_per_plaintext=slots_per_plaintext,
                                            plaintext_bytes=plaintext_bytes)


def batchcrypt_unpack(plaintexts, slot_bits: int, slots_per_plaintext: int, count: int,
                      bound: int):
    """Sums of plaintexts (string [ceil(count/k)]) -> (values int64 [count],
    positive_overflows, negative_overflows, overflow_mask bool [count])."""
    return _ops().tf_privpy_batchcrypt_unpack(plaintexts=plaintexts, slot_bits=slot_bits,
                                              slots_per_plaintext=slots_per_plaintext,
                                              count=count, bound=bound)


# ------------------------------------------------------------ paillier family
# Big integers are tf.string elements of big-endian bytes (ops/paillier/
# paillier_ops.cc): n, p, q string scalars; ciphertexts 2*ceil(bits/8) bytes;
# plaintexts int64 (signed) or string (unsigned, < n).
def paillier_keygen(bits: int):
    """A fresh key: (n, p, q) string scalars."""
    return _ops().tf_privpy_paillier_keygen(bits=bits)


def paillier_encrypt(n, plaintext, method: str = "generic"):
    """Public-key encryption; noise r^n mod n^2 ("generic") or DJN's ("djn")."""
    return _ops().tf_privpy_paillier_encrypt(n=n, plaintext=plaintext, method=method)


def paillier_encrypt_crt(n, p, q, plaintext):
    """Encryption by the private-key holder (CRT noise, same distribution)."""
    return _ops().tf_privpy_paillier_encrypt_crt(n=n, p=p, q=q, plaintext=plaintext)


def paillier_noise(n, count, method: str = "generic"):
    """count fresh noise values (encryptions of 0), string [count]."""
    return _ops().tf_privpy_paillier_noise(n=n, count=tf.cast(count, tf.int64), method=method)


def paillier_noise_crt(n, p, q, count):
    return _ops().tf_privpy_paillier_noise_crt(n=n, p=p, q=q, count=tf.cast(count, tf.int64))


def paillier_encrypt_with_noise(n, plaintext, noise):
    """(1 + m n) noise mod n^2; noise must never be used twice."""
    return _ops().tf_privpy_paillier_encrypt_with_noise(n=n, plaintext=plaintext, noise=noise)


def paillier_decrypt(n, p, q, ciphertext, out_type=tf.int64):
    return _ops().tf_privpy_paillier_decrypt(n=n, p=p, q=q, ciphertext=ciphertext,
                                             out_type=out_type)


def paillier_add(n, a, b):
    return _ops().tf_privpy_paillier_add(n=n, a=a, b=b)


def paillier_mul_plain(n, ciphertext, k):
    return _ops().tf_privpy_paillier_mul_plain(n=n, ciphertext=ciphertext, k=k)


def paillier_rerandomize(n, ciphertext, method: str = "generic"):
    return _ops().tf_privpy_paillier_rerandomize(n=n, ciphertext=ciphertext, method=method)


def paillier_reduce_sum(n, ciphertext):
    """Homomorphic sums of the rows of an [outer, inner] ciphertext matrix."""
    return _ops().tf_privpy_paillier_reduce_sum(n=n, ciphertext=ciphertext)


def paillier_validate(n, ciphertext):
    """bool: well-formed ciphertext of n (right width, in Z*_{n^2})."""
    return _ops().tf_privpy_paillier_validate(n=n, ciphertext=ciphertext)
