"""The one loader of the op library and thin wrappers around its ops.

Every protocol calls kernels through this module, never through the generated
op module. The library is loaded once, on first use; if it is missing or was
built for another TensorFlow, this raises with the command that rebuilds it.
There is no fallback: a privacy library that silently swapped its kernels for
something else would silently weaken its guarantees.
"""
from __future__ import annotations

import json
import os
import threading
from typing import Sequence

import tensorflow as tf

LIB_NAME = "_tf_privpy_ops.so"
# The range of TensorFlow versions the library is built for (setup.py).
TF_MIN, TF_MAX = (2, 14, 0), (2, 15, 0)
_REBUILD = ("Rebuild it against the TensorFlow you run: `make build` in a source "
            "checkout (python setup.py build_ext --inplace), or "
            "`pip install --no-build-isolation --force-reinstall .`.")

_lock = threading.Lock()
_lib = None


class OpLibraryError(ImportError):
    """The op library is missing, or was built for another TensorFlow."""


def _package_dir() -> str:
    # protocols/ is installed as tf_privpy.protocols; in a source tree it sits
    # beside tf_privpy/. The library is built into tf_privpy/ in both cases.
    here = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(here)
    if os.path.basename(parent) == "tf_privpy":  # installed layout
        return parent
    return os.path.join(parent, "tf_privpy")  # source tree


def _version_tuple(v: str) -> tuple:
    parts = []
    for p in v.split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def library_path() -> str:
    return os.environ.get("TF_PRIVPY_OPS_LIBRARY") or os.path.join(_package_dir(), LIB_NAME)


def load_library():
    """Loads the op library once (thread-safe) and returns its op module."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tf_ver = tf.__version__
        if "dev" in tf_ver or not (TF_MIN <= _version_tuple(tf_ver) < TF_MAX):
            raise OpLibraryError(
                f"tf_privpy's kernels need TensorFlow >=2.14.0,<2.15.0; this is "
                f"TensorFlow {tf_ver}. Install tensorflow==2.14.1 and rebuild. " + _REBUILD)
        path = library_path()
        if not os.path.exists(path):
            raise OpLibraryError(f"tf_privpy's op library {path} does not exist. " + _REBUILD)
        info_path = os.path.join(os.path.dirname(path), "_build_info.json")
        if os.path.exists(info_path):
            with open(info_path) as f:
                built_for = json.load(f).get("tf_version")
            if built_for and built_for != tf_ver:
                raise OpLibraryError(
                    f"{path} was built for TensorFlow {built_for}, but TensorFlow {tf_ver} "
                    "is running. " + _REBUILD)
        try:
            _lib = tf.load_op_library(path)
        except tf.errors.NotFoundError as e:
            raise OpLibraryError(
                f"TensorFlow {tf_ver} could not load {path} ({e}). The library was "
                "probably built for another TensorFlow or with other compiler flags. "
                + _REBUILD) from e
        return _lib


def _ops():
    return load_library()


# ---------------------------------------------------------------- ring family
def ring_encode(x: tf.Tensor, ring_bits: int, frac_bits: int, bound: float,
                tensor_name: str = "") -> tf.Tensor:
    """round(x * 2^frac_bits) in the ring; rejects NaN/Inf/|x| >= bound."""
    return _ops().tf_privpy_ring_encode(x=x, ring_bits=ring_bits, frac_bits=frac_bits,
                                        bound=bound, tensor_name=tensor_name)


def ring_decode(x: tf.Tensor, ring_bits: int, frac_bits: int) -> tf.Tensor:
    return _ops().tf_privpy_ring_decode(encoded=x, ring_bits=ring_bits, frac_bits=frac_bits)


def ring_add(x, y, ring_bits: int):
    return _ops().tf_privpy_ring_add(x=x, y=y, ring_bits=ring_bits)


def ring_sub(x, y, ring_bits: int):
    return _ops().tf_privpy_ring_sub(x=x, y=y, ring_bits=ring_bits)


def ring_neg(x, ring_bits: int):
    return _ops().tf_privpy_ring_neg(x=x, ring_bits=ring_bits)


def ring_truncate(x, ring_bits: int, party: int, frac_bits: int):
    return _ops().tf_privpy_ring_truncate(x=x, ring_bits=ring_bits, party=party,
                                          frac_bits=frac_bits)


def ring_reduce_sum(x, ring_bits: int):
    """Sums a logical [outer, inner] ring matrix over its last axis."""
    return _ops().tf_privpy_ring_reduce_sum(x=x, ring_bits=ring_bits)


def ring_bilinear(x, y, ring_bits: int, kind: str, strides: Sequence[int] = (1, 1),
                  padding: Sequence[int] = (0, 0, 0, 0), truncate_party: int = -1,
                  frac_bits: int = 0):
    return _ops().tf_privpy_ring_bilinear(
        x=x, y=y, ring_bits=ring_bits, kind=kind, strides=list(strides),
        padding=list(padding), truncate_party=truncate_party, frac_bits=frac_bits)


# ----------------------------------------------------------------- prg family
def random_key() -> tf.Tensor:
    """A fresh 128-bit key (int64[2]) from the OS CSPRNG of the current device."""
    return _ops().tf_privpy_random_key()


def stream_next(key_var: tf.Variable, counter_var: tf.Variable):
    """(key, nonce): reads a pair key and takes its stream's next nonce, in
    one stateful kernel on the variables' device."""
    return _ops().tf_privpy_stream_next(key=key_var.handle, counter=counter_var.handle)


def prg_ring(key, nonce, shape, ring_bits: int, offset: int = 0):
    return _ops().tf_privpy_prg_ring(key=key, nonce=nonce,
                                     shape=tf.cast(shape, tf.int64),
                                     ring_bits=ring_bits, offset=offset)


def share_split(x, ring_bits: int):
    return _ops().tf_privpy_share_split(x=x, ring_bits=ring_bits)


# ----------------------------------------------------------------- mul family
def mul_mask(x, y, key12, nonce12, ring_bits: int, party: int):
    return _ops().tf_privpy_mul_mask(x=x, y=y, key12=key12, nonce12=nonce12,
                                     ring_bits=ring_bits, party=party)


def mul_assist(left, right, key, nonce, ring_bits: int, kind: str,
               strides=(1, 1), padding=(0, 0, 0, 0)):
    return _ops().tf_privpy_mul_assist(left=left, right=right, key=key, nonce=nonce,
                                       ring_bits=ring_bits, kind=kind,
                                       strides=list(strides), padding=list(padding))


def mul_finish(x, y, x_masked, message, key12, nonce12, key_t, nonce_t, ring_bits: int,
               party: int, frac_bits: int, kind: str, strides=(1, 1),
               padding=(0, 0, 0, 0)):
    return _ops().tf_privpy_mul_finish(
        x=x, y=y, x_masked=x_masked, message=message, key12=key12, nonce12=nonce12,
        key_t=key_t, nonce_t=nonce_t, ring_bits=ring_bits, party=party,
        frac_bits=frac_bits, kind=kind, strides=list(strides), padding=list(padding))


# ------------------------------------------------------------------ gc family
def gc_garble(key12, nonce, n):
    """S1: garbled comparators for n comparisons -> (tables [n,64,4], decode [n])."""
    return _ops().tf_privpy_gc_garble(key12=key12, nonce=nonce, n=tf.cast(n, tf.int64))


def gc_encode_input(key12, nonce, values, role: str):
    """Active input labels [n,64,2] of int64 values; role "y" = S1's x1,
    role "x" = S2's -x2 (the circuit outputs [y < x] as signed integers)."""
    return _ops().tf_privpy_gc_encode_input(key12=key12, nonce=nonce, values=values, role=role)


def gc_evaluate(tables, decode, labels_x, labels_y, nonce, first_index):
    """T1/T2: the masked comparison bits b XOR m (uint8 [n]) of comparisons
    first_index, first_index + 1, ... of the garbled batch."""
    return _ops().tf_privpy_gc_evaluate(tables=tables, decode=decode, labels_x=labels_x,
                                        labels_y=labels_y, nonce=nonce,
                                        first_index=tf.cast(first_index, tf.int64))


def gc_output_mask(key12, nonce, n):
    """S1/S2: the output mask bits m (uint8 [n])."""
    return _ops().tf_privpy_gc_output_mask(key12=key12, nonce=nonce, n=tf.cast(n, tf.int64))


# ----------------------------------------------------------------- b2a family
def bit_share_assist(bits, key, nonce, ring_bits: int, frac_bits: int):
    return _ops().tf_privpy_bit_share_assist(bits=bits, key=key, nonce=nonce,
                                             ring_bits=ring_bits, frac_bits=frac_bits)


def bit_unmask(share, mask, ring_bits: int, frac_bits: int, party: int):
    return _ops().tf_privpy_bit_unmask(share=share, mask=mask, ring_bits=ring_bits,
                                       frac_bits=frac_bits, party=party)


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
