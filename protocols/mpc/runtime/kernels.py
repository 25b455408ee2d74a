"""Thin wrappers around the MPC kernels (ring, prg, mul, gc, b2a, bitwise, aead, kex, check
families)."""
from __future__ import annotations

from typing import Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from ...loader import ops as _ops

def _int64(x):
    """x as an int64 tensor: a Python int (or list of them) as one Const,
    where tf.cast makes a Const and a Cast (tracing costs per op)."""
    if isinstance(x, (int, np.integer)) or (
            isinstance(x, (list, tuple)) and all(isinstance(v, (int, np.integer)) for v in x)):
        return tf.constant(x, tf.int64)
    return tf.cast(x, tf.int64)


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


def stream_next_many(key_vars: Sequence[tf.Variable], counter_vars: Sequence[tf.Variable]):
    """[(key, nonce)] of N streams held on one device, in one stateful kernel
    (each counter advances once, as N `stream_next` would)."""
    keys, nonces = _ops().tf_privpy_stream_next_many(
        keys=[v.handle for v in key_vars], counters=[v.handle for v in counter_vars])
    return list(zip(keys, nonces))


def take_once(fresh_var: tf.Variable, value_var: tf.Variable, message: str) -> tf.Tensor:
    """value_var's int64 scalar, if fresh_var (bool) is still True; sets it to
    False in the same kernel, atomically, so of concurrent runs exactly one
    passes. Raises InvalidArgumentError(message) once it is False."""
    return _ops().tf_privpy_take_once(fresh=fresh_var.handle, value=value_var.handle,
                                      message=message)


def prg_ring(key, nonce, shape, ring_bits: int, offset: int = 0):
    return _ops().tf_privpy_prg_ring(key=key, nonce=nonce,
                                     shape=_int64(shape),
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
# One op set for every garbled circuit (ops/gc/gc_ops.cc): `circuit` names a
# row of ops/gc/circuit_table.cc ("compare", "leading_one", "thresholds") and
# **params are its parameters (width, magnitude, columns; width, lo, window,
# points), the same for the four kernels of one batch. Output bits are
# uint8 [n, K], or [n] for the comparator.
def _gc_params(params: dict) -> dict:
    """The circuit parameters as op attributes (lists for the list attrs)."""
    return {k: (list(v) if k in ("columns", "points") else v) for k, v in params.items()}


def gc_garble(key12, nonce, n, first_index, count, circuit: str, **params):
    """S1: garbled circuits [first_index, first_index + count) of a batch of
    n -> (tables int64 [count, G, 4], decode bits [count, K])."""
    return _ops().tf_privpy_gc_garble(
        key12=key12, nonce=nonce, n=_int64(n),
        first_index=_int64(first_index), count=_int64(count),
        circuit=circuit, **_gc_params(params))


def gc_encode(key12, nonce, values, n, first_index, circuit: str, role: str, **params):
    """Active input labels [len(values), W, 2] of int64 values, elements
    first_index, ... of a garbled batch of n; role "a" = S1's share x1,
    role "b" = S2's share x2 (-x2 for the comparator, whose output is
    [a < b] as signed integers)."""
    return _ops().tf_privpy_gc_encode(
        key12=key12, nonce=nonce, values=values, n=_int64(n),
        first_index=_int64(first_index), circuit=circuit, role=role,
        **_gc_params(params))


def gc_evaluate(tables, decode, labels_a, labels_b, nonce, first_index, circuit: str,
                **params):
    """T1/T2: the masked output bits (uint8 [n, K] or [n]) of elements
    first_index, first_index + 1, ... of the garbled batch; labels_a are
    S1's, labels_b S2's."""
    return _ops().tf_privpy_gc_evaluate(
        tables=tables, decode=decode, labels_a=labels_a, labels_b=labels_b, nonce=nonce,
        first_index=_int64(first_index), circuit=circuit, **_gc_params(params))


def gc_mask(key12, nonce, n, circuit: str, **params):
    """S1/S2: the output mask bits (uint8 [n, K] or [n])."""
    return _ops().tf_privpy_gc_mask(key12=key12, nonce=nonce, n=_int64(n),
                                    circuit=circuit, **_gc_params(params))


# ----------------------------------------------------------------- b2a family
def bit_share_assist(bits, key, nonce, ring_bits: int, frac_bits: int):
    return _ops().tf_privpy_bit_share_assist(bits=bits, key=key, nonce=nonce,
                                             ring_bits=ring_bits, frac_bits=frac_bits)


def bit_unmask(share, mask, ring_bits: int, frac_bits: int, party: int):
    return _ops().tf_privpy_bit_unmask(share=share, mask=mask, ring_bits=ring_bits,
                                       frac_bits=frac_bits, party=party)


def bit_unmask_table(shares, mask, table, ring_bits: int, party: int):
    """BitUnmask of integer bits whose shares come in parts along axis 0 (a
    list: T1's and T2's), fused with a public int64 table [K + 1, J]:
    shares of b @ table[:K] + table[K] ([n, J])."""
    return _ops().tf_privpy_bit_unmask_table(shares=list(shares), mask=mask, table=table,
                                             ring_bits=ring_bits, party=party)


# ------------------------------------------------------------ bitwise family
# The bitwise comparison (ops/bitwise/bitwise.h): states and messages are
# int64 words, [blocks, words], blocks = ceil(n / 64).
def bw_deal(key_s1, nonce_s1, key_s2, nonce_s2, n, ring_bits: int, frac_bits: int):
    """The dealer T: (S2's corrections [words], S2's ring shares of r·2^f [n])."""
    return _ops().tf_privpy_bw_deal(key_s1=key_s1, nonce_s1=nonce_s1, key_s2=key_s2,
                                    nonce_s2=nonce_s2, n=_int64(n),
                                    ring_bits=ring_bits, frac_bits=frac_bits)


def bw_input(low, key, nonce, party: int):
    """Server `party`, step 0: (state, message) from the flat low halves."""
    return _ops().tf_privpy_bw_input(low=low, key=key, nonce=nonce, party=party)


def bw_step(state, received, key, nonce, corrections, step: int, party: int):
    """Server `party`, step 1-7: (state, message)."""
    return _ops().tf_privpy_bw_step(state=state, received=received, key=key, nonce=nonce,
                                    corrections=corrections, step=step, party=party)


def bw_finish(own, received, key, nonce, ring, n, ring_bits: int, frac_bits: int,
              party: int):
    """Server `party`: its arithmetic share [n] of the bit, scaled by 2^frac_bits."""
    return _ops().tf_privpy_bw_finish(own=own, received=received, key=key, nonce=nonce,
                                      ring=ring, n=_int64(n), ring_bits=ring_bits,
                                      frac_bits=frac_bits, party=party)


def bw_select(own, received, v, w, ring_bits: int):
    """A server after a comparison's opening: its share [k, n] (or [n]) of [x < 0]·v
    from both step-7 messages and its shares of v and of [r·v] (v - w where
    the opened bit is 1, w where it is 0)."""
    return _ops().tf_privpy_bw_select(own=own, received=received, v=v, w=w,
                                      ring_bits=ring_bits)


def bw_lo_deal(key_s1, nonce_s1, key_s2, nonce_s2, n, width: int, columns, magnitude: bool,
               ring_bits: int):
    """The bitwise leading one's dealer T (ops/bitwise/leading_one.h): (S2's
    product words [n, words], S2's ring shares [n, K] of the mask bits)."""
    return _ops().tf_privpy_bw_leading_one_deal(
        key_s1=key_s1, nonce_s1=nonce_s1, key_s2=key_s2, nonce_s2=nonce_s2, n=_int64(n),
        width=width, columns=[int(c) for c in columns], magnitude=bool(magnitude),
        ring_bits=ring_bits)


def bw_lo_step(state, received, key, nonce, corrections, width: int, magnitude: bool,
               step: int, party: int):
    """Server `party`, step `step` of the bitwise leading one: (state, message);
    step 0 takes the flat low words as `state`."""
    return _ops().tf_privpy_bw_leading_one_step(
        state=state, received=received, key=key, nonce=nonce, corrections=corrections,
        width=width, magnitude=bool(magnitude), step=step, party=party)


def bw_lo_finish(own, received, key, nonce, ring, width: int, columns, magnitude: bool,
                 ring_bits: int, party: int, table=None):
    """Server `party`: its integer shares [n, K] of the leading-one columns;
    with `table`, a public int64 [K + 1, J], its shares [n, J] of
    bits @ table[:K] + table[K] (fused: the bits are never stored)."""
    fused = {} if table is None else dict(
        table=[int(v) for v in np.asarray(table, np.int64).ravel()],
        table_columns=int(np.shape(table)[1]))
    return _ops().tf_privpy_bw_leading_one_finish(
        own=own, received=received, key=key, nonce=nonce, ring=ring, width=width,
        columns=[int(c) for c in columns], magnitude=bool(magnitude), ring_bits=ring_bits,
        party=party, **fused)


# ---------------------------------------------------------------- aead family
# Wire format (ops/aead/aead.h): a plaintext of n bytes is sealed as
# K = max(1, ceil(n / AEAD_CHUNK_BYTES)) chunks, each its own GCM invocation
# (the chunks of one message run in parallel), into
#   [first counter]_64 || ct_0 || tag_0 || ... || ct_{K-1} || tag_{K-1},
# i.e. 8 + n + 16 K bytes. Up to AEAD_CHUNK_BYTES (K = 1) that is the
# single-invocation format counter || ciphertext || tag, 24 bytes more than
# the plaintext. The helpers below take Python ints or integer tensors.

#: plaintext bytes of one chunk (ops/aead/aead.h kChunkBytes; the size
#: tests in tests/test_aead.py pin the two together)
AEAD_CHUNK_BYTES = 1 << 20
#: bytes a single-chunk message (plaintext of at most AEAD_CHUNK_BYTES) adds
#: to its payload: the 8-byte counter and the 16-byte GCM tag. A K-chunk
#: message adds 8 + 16 K: use aead_message_bytes / aead_plaintext_words.
AEAD_OVERHEAD = 24
_AEAD_COUNTER_BYTES, _AEAD_TAG_BYTES = 8, 16


def _int_or_int64(n):
    return n if isinstance(n, (int, np.integer)) else _int64(n)


def _at_least_one(k):
    return max(k, 1) if isinstance(k, (int, np.integer)) else tf.maximum(k, 1)


def aead_chunk_count(n_plain_bytes):
    """K, the number of chunks (and of counters taken) of a sealed plaintext
    of `n_plain_bytes` bytes: max(1, ceil(n / AEAD_CHUNK_BYTES))."""
    n = _int_or_int64(n_plain_bytes)
    return _at_least_one((n + AEAD_CHUNK_BYTES - 1) // AEAD_CHUNK_BYTES)


def aead_message_bytes(n_plain_bytes):
    """The size of the sealed message of `n_plain_bytes` plaintext bytes:
    8 + n + 16 K (n + AEAD_OVERHEAD when n <= AEAD_CHUNK_BYTES)."""
    n = _int_or_int64(n_plain_bytes)
    return _AEAD_COUNTER_BYTES + n + _AEAD_TAG_BYTES * aead_chunk_count(n)


def aead_plaintext_words(message_bytes):
    """The number of int64 words of the plaintext whose sealed message has
    `message_bytes` bytes: the exact inverse of aead_message_bytes(8 * words).

    K = max(1, ceil((m - 8) / (AEAD_CHUNK_BYTES + 16))) and words =
    (m - 8 - 16 K) // 8, so up to AEAD_CHUNK_BYTES + 24 bytes this is
    (m - AEAD_OVERHEAD) // 8 as before chunking. A size that no plaintext has
    (cut or padded in flight) still gives a number; the open kernel then
    finds that the message does not have the size of that shape and fails
    naming the link."""
    m = _int_or_int64(message_bytes)
    k = _at_least_one((m - _AEAD_COUNTER_BYTES + AEAD_CHUNK_BYTES + _AEAD_TAG_BYTES - 1)
                      // (AEAD_CHUNK_BYTES + _AEAD_TAG_BYTES))
    return (m - _AEAD_COUNTER_BYTES - _AEAD_TAG_BYTES * k) // 8


def aead_seal(key: tf.Tensor, counter_var: tf.Variable,
              plaintext: Union[tf.Tensor, Sequence[tf.Tensor]], link: str,
              stream: int = 0) -> tf.Tensor:
    """Encrypts and authenticates an int64 tensor for `link` ("S1->T1").

    `plaintext` may be a list of int64 tensors: the kernel reads each in
    place and seals their concatenation (flattened, in order), with the
    message and authenticated shape of that one int64 vector, so a message
    of several tensors needs no packing copy on the sender.

    AES-128-GCM under the link key derived from the pair key `key` (int64[2],
    the pair's PRG key) with the SP 800-108 KDF (HMAC-SHA256, context = link).
    The nonce is `stream` (32 bits) || the counter taken from `counter_var`
    (an int64 scalar variable on the sender, starting at 0), which the kernel
    advances atomically: every run, eager or traced, gets a fresh nonce. Use
    one counter variable per (link, stream). Run it on the sender's device.

    Returns the message: uint8 [8 + 8 * size + 16] = big-endian counter ||
    ciphertext || tag when 8 * size <= AEAD_CHUNK_BYTES. A larger plaintext
    is sealed as K = aead_chunk_count(8 * size) chunks on the CPU thread
    pool, taking the K counters counter .. counter + K - 1 at once: uint8
    [aead_message_bytes(8 * size)] = first counter || chunk 0 || tag 0 ||
    ... . The plaintext's shape is authenticated, not sent.
    """
    parts = list(plaintext) if isinstance(plaintext, (list, tuple)) else [plaintext]
    return _ops().tf_privpy_aead_seal(key=key, counter=counter_var.handle,
                                      plaintext=parts, link=link, stream=stream)


def aead_open(key: tf.Tensor, state_var: tf.Variable, message: tf.Tensor, shape,
              link: str, stream: int = 0) -> tf.Tensor:
    """Verifies and decrypts a message of `aead_seal` into an int64 tensor of
    `shape` (the receiver's own static knowledge). Run it on the receiver.

    `state_var` (an int64 scalar variable on the receiver, starting at 0)
    holds the lowest counter still acceptable; a message is accepted only if
    its (first) counter is at least that, after which it becomes counter + K
    (K = aead_chunk_count(8 * size), 1 up to AEAD_CHUNK_BYTES), in the same
    kernel. Every chunk's tag is verified before any plaintext is output.
    Raises InvalidArgumentError naming the link when the message fails
    authentication (tampered, another key, link, stream or shape; a chunk
    changed, moved, dropped or taken from another message) or is replayed
    or reordered; no plaintext is output then. The number of int64 words a
    message of unknown shape carries is aead_plaintext_words(its size).
    """
    if not (isinstance(shape, tf.Tensor) and shape.dtype == tf.int64):
        shape = _int64(shape)
    return _ops().tf_privpy_aead_open(key=key, state=state_var.handle, message=message,
                                      shape=shape, link=link,
                                      stream=stream)


# ----------------------------------------------------------------- kex family
# X25519 (RFC 7748) keys are uint8[32] tensors. Run every op that takes or
# returns a private key in a tf.device scope of the server that owns it.
Bytes = Union[bytes, bytearray, tf.Tensor, np.ndarray]


def _u8(x: Bytes) -> tf.Tensor:
    """bytes -> uint8 vector; tensors pass through."""
    if isinstance(x, (bytes, bytearray)):
        return tf.constant(np.frombuffer(bytes(x), np.uint8))
    return x


def x25519_keypair() -> Tuple[tf.Tensor, tf.Tensor]:
    """(private, public) X25519 key pair from the OS CSPRNG of the current device."""
    return _ops().tf_privpy_x25519_keypair()


def x25519_read_private_key(path) -> Tuple[tf.Tensor, tf.Tensor]:
    """(private, public) of an identity key file, read by the current device
    (the server's own file system); refuses files readable by group/others."""
    return _ops().tf_privpy_x25519_read_private_key(path=path)


def x25519_public_key(private_key: Bytes) -> tf.Tensor:
    """X25519(private_key, 9)."""
    return _ops().tf_privpy_x25519_public_key(private_key=_u8(private_key))


def x25519(private_key: Bytes, peer_public_key: Bytes) -> tf.Tensor:
    """Raw X25519 (RFC 7748 §5), for known-answer tests; protocols use
    kex_derive. Raises InvalidArgumentError for a small-order peer key."""
    return _ops().tf_privpy_x25519(private_key=_u8(private_key),
                                   peer_public_key=_u8(peer_public_key))


def hkdf_sha256(ikm: Bytes, salt: Bytes, info: Bytes, length: int) -> tf.Tensor:
    """HKDF-SHA256 (RFC 5869): `length` bytes (uint8) of Expand(Extract(salt, ikm), info)."""
    return _ops().tf_privpy_hkdf_sha256(ikm=_u8(ikm), salt=_u8(salt), info=_u8(info),
                                        length=length)


def kex_derive(own_static_private, own_ephemeral_private, peer_static_public: Bytes,
               peer_ephemeral_public, own_role: str, peer_role: str,
               context: str = "") -> tf.Tensor:
    """The int64[2] pair key of the authenticated X25519 exchange between
    own_role and peer_role (formula in ops/kex/kex.h), computed on own_role's
    device from its private keys and the peer's public keys."""
    return _ops().tf_privpy_kex_derive(
        own_static_private=own_static_private, own_ephemeral_private=own_ephemeral_private,
        peer_static_public=_u8(peer_static_public),
        peer_ephemeral_public=_u8(peer_ephemeral_public),
        own_role=own_role, peer_role=peer_role, context=context)


# --------------------------------------------------------------- stats family
def count_message(counter_var: tf.Variable, tensors: Sequence[tf.Tensor],
                  static_bytes: int) -> tf.Operation:
    """Adds one message of `static_bytes` plus the bytes of `tensors` (their
    sizes, not values: elements times dtype size, strings by length) to the
    int64[2] variable counter_var, in one stateful op on its device."""
    return _ops().tf_privpy_count_message(counter=counter_var.handle, tensors=list(tensors),
                                          static_bytes=int(static_bytes))


# --------------------------------------------------------------- check family
def check(condition: tf.Tensor, x: tf.Tensor, message: str, *data: tf.Tensor) -> tf.Tensor:
    """x unchanged when the scalar bool `condition` holds; otherwise the run
    fails with InvalidArgumentError: `message` and the values of `data`.

    Use the result in place of x. Unlike tf.raw_ops.Assert this op is
    stateless, so a tf.function's automatic control dependencies do not chain
    it to every other check in program order across servers (which cost a
    network trip per protocol round: ops/check/check_ops.cc)."""
    return _ops().tf_privpy_check(condition=condition, input=x, data=list(data),
                                  message=message)


def check_equal(own: tf.Tensor, received: tf.Tensor, x: tf.Tensor, message: str) -> tf.Tensor:
    """`check` of own == received (int64, same shape), compared in the kernel:
    x unchanged, or the run fails with `message` and both values."""
    return _ops().tf_privpy_check_equal(own=own, received=received, input=x, message=message)
