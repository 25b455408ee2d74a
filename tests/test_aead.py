"""The aead kernels (ops/aead): AES-128-GCM of the tensors that cross between
servers, under per-link keys derived from the pair keys, with nonces from
counters in TF state and replay rejection on the receiver.

The known-answer tests recompute every message independently in Python: the
link key with `hmac` (SP 800-108 counter-mode KDF, HMAC-SHA256) and the GCM
with the `cryptography` package (its own OpenSSL), so they also check that
the EVP calls work against the BoringSSL inside TensorFlow. The tamper tests
were checked against a library whose open ignored the tag (see
test_tamper_check_detects_an_opener_without_authentication for the in-file
version of that check, and the commit message for the library mutation).

Messages of more than K.AEAD_CHUNK_BYTES plaintext bytes are sealed in
chunks (aead.h): the tests around chunk boundaries check sizes, counters,
known answers against a chunk-by-chunk reference, and that chunks cannot be
changed, moved, dropped, cut or taken from another message. The window
splice test was checked against a library whose chunk AAD left out the
index (the commit message has that run).

Two implementations run the GCM: our VAES/VPCLMULQDQ code (ops/aead/
gcm_fast.cc; on AVX-512 registers, or on AVX2 ones where the CPU has VAES but
no AVX-512, TF_PRIVPY_AEAD_YMM=1 forcing the latter) on CPUs that have it,
else EVP (TF's BoringSSL). The test hook
TF_PRIVPY_AEAD_EVP=1 (read at every kernel call) forces EVP: the `impl`
fixture runs the tamper tests under both, and the cross-check below requires
byte-identical messages from both and from `cryptography`. Odd byte lengths
(the kernels seal int64 tensors, so multiples of 8 here) and the GCM
specification's vectors are checked by ops/aead/gcm_fast_test.cc
(test_cc_programs.py::test_aead_cc). These were checked against a library
whose fast GHASH skipped the final (length) block (commit message).
"""
from __future__ import annotations

import hashlib
import hmac
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional, Sequence

import numpy as np
import pytest
import tensorflow as tf
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from conftest import run
from tf_privpy.protocols.mpc.runtime import kernels as K

LINK = "S1->T1"
KDF_LABEL = b"tf_privpy channel key AES-128-GCM v1"
AAD_LABEL = b"tf_privpy aead v1"
INT64_MAX = 2**63 - 1
C = K.AEAD_CHUNK_BYTES
CW = C // 8  # int64 words of one chunk


# ------------------------------------------------------------ references
def link_key(pair: bytes, link: str) -> bytes:
    """SP 800-108r1 counter mode, PRF = HMAC-SHA256, i = 1, L = 128."""
    data = ((1).to_bytes(4, "big") + KDF_LABEL + b"\0" + link.encode()
            + (128).to_bytes(4, "big"))
    return hmac.new(pair, data, hashlib.sha256).digest()[:16]


def nonce(stream: int, counter: int) -> bytes:
    return stream.to_bytes(4, "big") + counter.to_bytes(8, "big")


def aad(link: str, stream: int, shape: Sequence[int]) -> bytes:
    return (AAD_LABEL + b"\0" + link.encode() + b"\0" + stream.to_bytes(4, "big")
            + len(shape).to_bytes(4, "big") + b"".join(int(d).to_bytes(8, "big") for d in shape))


def reference_seal_single(pair: bytes, link: str, stream: int, counter: int,
                          x: np.ndarray) -> bytes:
    """The format from before chunking, one GCM invocation: counter (8,
    big-endian) || GCM ciphertext || tag. Single-chunk messages still are
    exactly this."""
    body = AESGCM(link_key(pair, link)).encrypt(
        nonce(stream, counter), np.ascontiguousarray(x, "<i8").tobytes(),
        aad(link, stream, x.shape))
    return counter.to_bytes(8, "big") + body


def chunk_aad(base: bytes, i: int, k: int) -> bytes:
    return base if k == 1 else base + i.to_bytes(8, "big") + k.to_bytes(8, "big")


def reference_seal(pair: bytes, link: str, stream: int, counter: int, x: np.ndarray) -> bytes:
    """The wire message (aead.h): counter (8, big-endian) || ct_0 || tag_0 ||
    ... || ct_{K-1} || tag_{K-1}, chunk i sealed under counter + i and the AAD
    extended by [i]_64 || [K]_64 (K = 1: no extension)."""
    p = np.ascontiguousarray(x, "<i8").tobytes()
    gcm, base = AESGCM(link_key(pair, link)), aad(link, stream, x.shape)
    k = max(1, -(-len(p) // C))
    return counter.to_bytes(8, "big") + b"".join(
        gcm.encrypt(nonce(stream, counter + i), p[i * C:(i + 1) * C], chunk_aad(base, i, k))
        for i in range(k))


def unauthenticated_open(pair: bytes, link: str, stream: int, message: bytes) -> np.ndarray:
    """A deliberately broken opener: GCM's CTR part (SP 800-38D §7.2, counter
    blocks from inc32(J0) = nonce || 2) without looking at the tag."""
    counter = int.from_bytes(message[:8], "big")
    dec = Cipher(algorithms.AES(link_key(pair, link)),
                 modes.CTR(nonce(stream, counter) + (2).to_bytes(4, "big"))).decryptor()
    return np.frombuffer(dec.update(message[8:-16]) + dec.finalize(), "<i8")


def key_bytes(key: tf.Tensor) -> bytes:
    return key.numpy().astype("<i8").tobytes()


def flip(message: np.ndarray, bit: int) -> np.ndarray:
    m = np.array(message, np.uint8)
    m[bit // 8] ^= np.uint8(1 << (bit % 8))
    return m


def expect_auth_failure(open_fn: Callable[[np.ndarray], object], message: np.ndarray,
                        link: str = LINK) -> None:
    pattern = re.escape(f"message on link {link}") + r" \(stream \d+\) failed authentication"
    with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
        open_fn(message)


class Chan:
    """One link: a pair key, the sender's counter and the receiver's state."""

    def __init__(self, link: str = LINK, stream: int = 0, key: Optional[tf.Tensor] = None):
        self.link, self.stream = link, stream
        self.key = K.random_key() if key is None else key
        self.counter = tf.Variable(tf.constant(0, tf.int64), trainable=False)
        self.state = tf.Variable(tf.constant(0, tf.int64), trainable=False)

    def seal(self, x) -> tf.Tensor:
        return K.aead_seal(self.key, self.counter, x, self.link, self.stream)

    def open(self, m, shape, link: Optional[str] = None, stream: Optional[int] = None,
             key: Optional[tf.Tensor] = None) -> tf.Tensor:
        return K.aead_open(self.key if key is None else key, self.state, m, shape,
                           self.link if link is None else link,
                           self.stream if stream is None else stream)


def ring_values(rng, shape) -> np.ndarray:
    return np.asarray(rng.integers(-2**63, INT64_MAX, size=shape, dtype=np.int64,
                                   endpoint=True))


EVP_ENV = "TF_PRIVPY_AEAD_EVP"  # test hook of ops/aead/gcm_fast.h: forces EVP
YMM_ENV = "TF_PRIVPY_AEAD_YMM"  # test hook: the YMM code on a CPU with AVX-512 too


def cpu_has_fast_gcm() -> bool:
    """What gcm_fast.cc's CPUID check wants (the kernel also asks the OS, by
    XGETBV, whether it saves the ZMM state; Linux does wherever these flags
    show)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return False
    # the ZMM code (AVX-512) or the same method on YMM registers (AVX2)
    return {"aes", "pclmulqdq", "vaes", "vpclmulqdq"} <= set(flags) and (
        {"avx512f", "avx512bw", "avx512vl"} <= set(flags) or "avx2" in set(flags))


@pytest.fixture(params=["fast", "evp"])
def impl(request, monkeypatch):
    """Runs a test with the VAES path (skipped where the CPU lacks it) and
    with the EVP path forced by the test hook."""
    if request.param == "evp":
        monkeypatch.setenv(EVP_ENV, "1")
    else:
        if not cpu_has_fast_gcm():
            pytest.skip("this CPU lacks VAES/VPCLMULQDQ: the EVP path only")
        monkeypatch.delenv(EVP_ENV, raising=False)
    return request.param


# ------------------------------------------------------------- round trips
# Around the chunk boundaries: C - 8, C, C + 8, 3C + 8 bytes (1, 1, 2, 4 chunks).
BOUNDARY_SHAPES = [[CW - 1], [CW], [CW + 1], [3 * CW + 1], [2, CW]]


@pytest.mark.parametrize("shape", [[], [0], [3, 4, 2], [1_000_000]] + BOUNDARY_SHAPES,
                         ids=str)
def test_round_trip(shape, mode, rng):
    ch = Chan()
    x = ring_values(rng, shape)

    def fn(x):
        m = ch.seal(x)
        return m, ch.open(m, tf.shape(x))

    m, y = run(mode, fn, tf.constant(x))
    n, k = 8 * x.size, K.aead_chunk_count(8 * x.size)
    assert m.dtype == tf.uint8 and m.shape == [8 + n + 16 * k] == [K.aead_message_bytes(n)]
    if n <= C:
        assert k == 1 and m.shape == [K.AEAD_OVERHEAD + n]
    assert y.dtype == tf.int64 and y.shape == x.shape
    np.testing.assert_array_equal(y.numpy(), x)
    # K counters taken on the sender, K consumed on the receiver
    assert int(ch.counter.numpy()) == k and int(ch.state.numpy()) == k


def test_size_helpers():
    """aead_message_bytes / aead_plaintext_words / aead_chunk_count: the
    formulas of aead.h, inverse to each other, on ints and on tensors (as
    sealing.py uses them, inside a tf.function)."""
    words = sorted({w for b in range(5) for w in range(max(0, b * CW - 3), b * CW + 4)})
    sizes = [K.aead_message_bytes(8 * w) for w in words]
    for w, m in zip(words, sizes):
        k = max(1, -(-8 * w // C))
        assert K.aead_chunk_count(8 * w) == k and m == 8 + 8 * w + 16 * k
        assert K.aead_plaintext_words(m) == w
        assert K.aead_plaintext_words(np.int64(m)) == w
    assert K.aead_message_bytes(C) == C + K.AEAD_OVERHEAD
    assert K.aead_message_bytes(C + 8) == C + 8 + 8 + 32
    # as before chunking up to one chunk, even for sizes no message has
    for m in range(0, C + 25, 8191):
        assert K.aead_plaintext_words(m) == (m - K.AEAD_OVERHEAD) // 8
    fn = tf.function(lambda m: (K.aead_plaintext_words(m), K.aead_message_bytes(8 * m)))
    for m_dtype in (tf.int64, tf.int32):
        got_words, _ = fn(tf.constant(sizes, m_dtype))
        np.testing.assert_array_equal(got_words.numpy(), words)
    _, got_sizes = fn(tf.constant(words, tf.int64))
    np.testing.assert_array_equal(got_sizes.numpy(), sizes)


def test_words_from_the_message_size_open_it(rng):
    """What sealing.py does: the receiver knows only the message's length."""
    ch = Chan()

    @tf.function
    def fn(x):
        m = ch.seal(x)
        n = K.aead_plaintext_words(tf.size(m, out_type=tf.int64))
        return ch.open(m, tf.reshape(n, [1]))

    for w in (0, 5, CW, CW + 1, 2 * CW, 3 * CW + 1):
        x = ring_values(rng, [w])
        np.testing.assert_array_equal(fn(tf.constant(x)).numpy(), x)


def test_static_shape_inference():
    ch = Chan()

    @tf.function
    def fn(x, big):
        m = ch.seal(x)
        assert m.shape == [K.AEAD_OVERHEAD + 8 * 12]
        y = ch.open(m, [3, 4])
        assert y.shape == [3, 4]
        mb = ch.seal(big)
        assert mb.shape == [8 + 3 * C + 8 + 16 * 4]
        assert ch.open(mb, [3 * CW + 1]).shape == [3 * CW + 1]
        return y

    fn(tf.zeros([3, 4], tf.int64), tf.zeros([3 * CW + 1], tf.int64))


def test_counter_advances_every_run(rng):
    """Two runs of the same tf.function: two nonces, two ciphertexts."""
    ch = Chan()
    x = tf.constant(ring_values(rng, [64]))
    seal = tf.function(ch.seal)
    m0, m1 = seal(x).numpy(), seal(x).numpy()
    assert int.from_bytes(m0[:8].tobytes(), "big") == 0
    assert int.from_bytes(m1[:8].tobytes(), "big") == 1
    assert not np.array_equal(m0[8:], m1[8:])
    assert int(ch.counter.numpy()) == 2
    open_ = tf.function(lambda m: ch.open(m, [64]))
    for m in (m0, m1):
        np.testing.assert_array_equal(open_(tf.constant(m)).numpy(), x.numpy())
    with pytest.raises(tf.errors.InvalidArgumentError, match="replayed or reordered"):
        open_(tf.constant(m1))


def test_concurrent_seals_take_distinct_counters():
    ch = Chan()
    x = tf.zeros([1000], tf.int64)
    seal = tf.function(lambda: ch.seal(x))
    seal()  # trace once, outside the threads
    with ThreadPoolExecutor(4) as ex:
        msgs = list(ex.map(lambda _: seal().numpy(), range(64)))
    counters = sorted(int.from_bytes(m[:8].tobytes(), "big") for m in msgs)
    assert counters == list(range(1, 65))
    assert len({m[8:].tobytes() for m in msgs}) == 64


def test_concurrent_opens_of_one_message_accept_it_once():
    ch = Chan()
    m = ch.seal(tf.range(100, dtype=tf.int64))
    ok, replays = [], []
    lock = threading.Lock()

    def try_open(_):
        try:
            ch.open(m, [100])
            with lock:
                ok.append(1)
        except tf.errors.InvalidArgumentError as e:
            assert "replayed or reordered" in e.message
            with lock:
                replays.append(1)

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(try_open, range(16)))
    assert (len(ok), len(replays)) == (1, 15)


# ------------------------------------------------------------ known answers
@pytest.mark.parametrize("link,stream,shape", [
    ("S1->T1", 0, [3, 4, 2]), ("T2->S2", 7, []), ("S2->T1", 2**32 - 1, [0]),
    ("client->S1", 1, [1000]), ("T1->T2", 3, [1_000_000]),
])
def test_known_answer(link, stream, shape, rng):
    """Byte for byte against hmac + the `cryptography` package's AES-GCM, both
    ways: kernel-sealed messages equal the reference, and reference messages
    open with the kernel."""
    ch = Chan(link, stream)
    pair = key_bytes(ch.key)
    x = ring_values(rng, shape)
    k = K.aead_chunk_count(8 * x.size)
    for counter in (0, k):  # the second seal takes the counters after the first's
        assert ch.seal(tf.constant(x)).numpy().tobytes() == reference_seal(
            pair, link, stream, counter, x)
    for counter in (5, 9 + k):
        ref = np.frombuffer(reference_seal(pair, link, stream, counter, x), np.uint8)
        np.testing.assert_array_equal(ch.open(tf.constant(ref), shape).numpy(), x)
        assert int(ch.state.numpy()) == counter + k


@pytest.mark.parametrize("shape", [[3, 4, 2], [CW - 1], [CW]], ids=str)
def test_single_chunk_messages_are_unchanged(shape, rng):
    """Up to one chunk, byte for byte the format from before chunking (one
    GCM invocation, the plain AAD, one tag)."""
    ch = Chan("T1->S2", 9)
    pair = key_bytes(ch.key)
    x = ring_values(rng, shape)
    for counter in (0, 1):
        assert ch.seal(tf.constant(x)).numpy().tobytes() == reference_seal_single(
            pair, "T1->S2", 9, counter, x)


@pytest.mark.parametrize("shape", [[CW + 1], [3 * CW + 1], [3, CW]], ids=str)
def test_known_answer_chunked(shape, rng):
    ch = Chan("S2->T2", 4)
    pair = key_bytes(ch.key)
    x = ring_values(rng, shape)
    k = K.aead_chunk_count(8 * x.size)
    for counter in (0, k):
        assert ch.seal(tf.constant(x)).numpy().tobytes() == reference_seal(
            pair, "S2->T2", 4, counter, x)
    ref = np.frombuffer(reference_seal(pair, "S2->T2", 4, 100, x), np.uint8)
    np.testing.assert_array_equal(ch.open(tf.constant(ref), shape).numpy(), x)
    assert int(ch.state.numpy()) == 100 + k


def test_link_key_vector():
    """The derivation of ops/aead/aead_test.cc's vector, by the same formula."""
    pair = bytes(range(16))
    assert link_key(pair, "S1->T1").hex() == "d8194092be79d6e111dbd1c2ba41abd3"
    key = tf.constant(np.frombuffer(pair, "<i8"))
    ch = Chan(key=key)
    x = np.arange(4, dtype=np.int64)
    assert ch.seal(tf.constant(x)).numpy().tobytes() == reference_seal(pair, LINK, 0, 0, x)


def test_directions_and_streams_use_different_keys_or_nonces(rng):
    key = K.random_key()
    x = tf.constant(ring_values(rng, [16]))
    bodies = {Chan(link, stream, key).seal(x).numpy()[8:].tobytes()
              for link, stream in [("S1->T1", 0), ("T1->S1", 0), ("S1->T1", 1), ("S1->T2", 0)]}
    assert len(bodies) == 4  # all at counter 0, same key and plaintext


# The sizes around gcm_fast.cc's branches (16-byte blocks, 64-byte registers,
# 256-byte iterations, the chunk), ranks 0-4 (AAD lengths 34-66 bytes), and
# random sizes.
CROSS_SHAPES = ([[], [0], [1], [2], [3], [7], [8], [9], [31], [32], [33], [2, 3, 5],
                 [1, 1, 1, 61], [511], [512], [513], [CW - 1], [CW], [CW + 1],
                 [3 * CW + 7]]
                + [[int(n)] for n in np.random.default_rng(11).integers(1, 40_000, 8)])


@pytest.mark.parametrize("shape", CROSS_SHAPES, ids=str)
def test_fast_and_evp_paths_make_identical_messages(shape, rng, monkeypatch):
    """The VAES path and EVP (forced by the test hook) seal byte-identical
    messages, equal to `cryptography`'s, and each opens the other's."""
    if not cpu_has_fast_gcm():
        pytest.skip("this CPU lacks VAES/VPCLMULQDQ: the EVP path only")
    key = K.random_key()
    x = ring_values(rng, shape)
    msgs = {}

    def use(impl):
        # "fast": the ZMM code where the CPU has AVX-512, else the YMM code;
        # "ymm": the YMM code in any case (TF_PRIVPY_AEAD_YMM, gcm_fast.h)
        monkeypatch.setenv(EVP_ENV, "1") if impl == "evp" else monkeypatch.delenv(
            EVP_ENV, raising=False)
        monkeypatch.setenv(YMM_ENV, "1") if impl == "ymm" else monkeypatch.delenv(
            YMM_ENV, raising=False)

    impls = ("evp", "fast", "ymm")
    for impl in impls:
        use(impl)
        msgs[impl] = Chan("T2->S1", 3, key).seal(tf.constant(x)).numpy()
    assert msgs["fast"].tobytes() == msgs["evp"].tobytes() == msgs["ymm"].tobytes() == \
        reference_seal(key_bytes(key), "T2->S1", 3, 0, x)
    for impl in impls:
        use(impl)
        for other in impls:
            y = Chan("T2->S1", 3, key).open(tf.constant(msgs[other]), shape)
            np.testing.assert_array_equal(y.numpy(), x)


# ------------------------------------------------------------- tampering
def test_every_bit_flip_is_rejected(rng, impl):
    ch = Chan()
    x = ring_values(rng, [2])
    m = ch.seal(tf.constant(x)).numpy()
    for bit in range(8 * m.size):  # counter, ciphertext and tag
        expect_auth_failure(lambda t: ch.open(tf.constant(t), [2]), flip(m, bit))
    assert int(ch.state.numpy()) == 0  # failures never advance the receiver
    np.testing.assert_array_equal(ch.open(tf.constant(m), [2]).numpy(), x)


def test_bit_flips_in_a_large_message_are_rejected(rng):
    n = 1_000_000
    ch = Chan()
    m = ch.seal(tf.constant(ring_values(rng, [n]))).numpy()
    last = 8 * m.size - 1
    for bit in [0, 63, 64, 65, 8 * 4_000_000 + 5, last - 128, last - 127, last]:
        expect_auth_failure(lambda t: ch.open(tf.constant(t), [n]), flip(m, bit))
    ch.open(tf.constant(m), [n])


class ChunkedPair:
    """Two 3-chunk messages a and b (3 full chunks each, so whole chunks can
    be moved), b sealed right after a: counters 0..2 and 3..5."""

    def __init__(self, rng):
        self.ch = Chan()
        self.x = ring_values(rng, [3 * CW])
        self.a = self.ch.seal(tf.constant(self.x)).numpy()
        self.b = self.ch.seal(tf.constant(ring_values(rng, [3 * CW]))).numpy()
        assert int(self.ch.counter.numpy()) == 6

    @staticmethod
    def at(i: int) -> int:
        return 8 + i * (C + 16)

    def chunk(self, m: np.ndarray, i: int) -> np.ndarray:
        return m[self.at(i):self.at(i + 1)]

    def open(self, m: np.ndarray, shape=None):
        return self.ch.open(tf.constant(m), [3 * CW] if shape is None else shape)

    def rejected(self, m: np.ndarray, shape=None) -> None:
        expect_auth_failure(lambda t: self.open(t, shape), m)
        assert int(self.ch.state.numpy()) == 0  # failures never advance the receiver


def test_every_chunk_and_tag_tampered_is_rejected(rng, impl):
    ch = Chan()
    x = ring_values(rng, [3 * CW + 1])  # 4 chunks, the last of 8 bytes
    m = ch.seal(tf.constant(x)).numpy()
    for i in range(4):
        start, n = 8 + i * (C + 16), min(C, 8 * x.size - i * C)
        for pos in (0, n // 2, n - 1, n, n + 15):  # ciphertext, then tag
            expect_auth_failure(lambda t: ch.open(tf.constant(t), x.shape),
                                flip(m, 8 * (start + pos) + 2))
    assert int(ch.state.numpy()) == 0
    np.testing.assert_array_equal(ch.open(tf.constant(m), x.shape).numpy(), x)


def test_swapped_chunks_are_rejected(rng):
    p = ChunkedPair(rng)
    for i, j in ((0, 1), (1, 2), (0, 2)):
        m = p.a.copy()
        m[p.at(i):p.at(i + 1)], m[p.at(j):p.at(j + 1)] = p.chunk(p.a, j), p.chunk(p.a, i)
        p.rejected(m)
    np.testing.assert_array_equal(p.open(p.a).numpy(), p.x)


def test_chunk_of_another_message_is_rejected(rng):
    p = ChunkedPair(rng)
    for i in range(3):
        m = p.a.copy()
        m[p.at(i):p.at(i + 1)] = p.chunk(p.b, i)
        p.rejected(m)


def test_window_splice_is_rejected(rng):
    """Chunks 1, 2 of a and chunk 0 of b were sealed under the counters 1, 2,
    3: behind the header counter 1 their nonces fit. Only the chunk index in
    the AAD rejects them (a library without it accepts this message)."""
    p = ChunkedPair(rng)
    m = np.concatenate([np.frombuffer((1).to_bytes(8, "big"), np.uint8),
                        p.chunk(p.a, 1), p.chunk(p.a, 2), p.chunk(p.b, 0)])
    assert m.size == p.a.size
    p.rejected(m)


def test_dropped_or_cut_chunks_are_rejected(rng):
    p = ChunkedPair(rng)
    dropped = p.a[:p.at(2)]  # two whole chunks: a 2-chunk message's size
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            f"message on link {LINK} (stream 0) has {dropped.size} bytes")):
        p.open(dropped)
    p.rejected(dropped, [2 * CW])  # a receiver that expects the smaller shape
    # the last chunk cut to 8 bytes (its tag kept): the size of 2 C + 8 bytes
    cut = np.concatenate([p.a[:p.at(2) + 8], p.a[-16:]])
    assert cut.size == K.aead_message_bytes(2 * C + 8)
    p.rejected(cut, [2 * CW + 1])
    p.rejected(p.a[:p.at(1)], [CW])  # the first chunk alone
    np.testing.assert_array_equal(p.open(p.a).numpy(), p.x)


def test_multi_chunk_counters_and_replay(rng):
    """A K-chunk message takes K counters; the receiver then accepts only
    counters from first + K on."""
    ch = Chan()
    small, big = tf.range(3, dtype=tf.int64), tf.constant(ring_values(rng, [3 * CW + 1]))
    m0, m1, m2 = ch.seal(small), ch.seal(big), ch.seal(small)
    first = [int.from_bytes(m.numpy()[:8].tobytes(), "big") for m in (m0, m1, m2)]
    assert first == [0, 1, 5] and int(ch.counter.numpy()) == 6
    ch.open(m0, [3])
    ch.open(m1, [3 * CW + 1])
    assert int(ch.state.numpy()) == 5
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            f"message on link {LINK} (stream 0) was replayed or reordered: its counter "
            "is 1 but every counter below 5")):
        ch.open(m1, [3 * CW + 1])
    ch.open(m2, [3])
    assert int(ch.state.numpy()) == 6


def test_truncated_or_extended_message_is_rejected():
    ch = Chan()
    m = ch.seal(tf.range(12, dtype=tf.int64)).numpy()
    for bad in (m[:-1], m[:-8], np.concatenate([m, np.zeros(8, np.uint8)])):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=re.escape(f"message on link {LINK} (stream 0) has")):
            ch.open(tf.constant(bad), [12])


def test_wrong_key_is_rejected(impl):
    ch = Chan()
    m = ch.seal(tf.range(8, dtype=tf.int64))
    expect_auth_failure(lambda t: ch.open(t, [8], key=K.random_key()), m)
    one_bit_off = tf.constant(np.bitwise_xor(ch.key.numpy(), np.array([1, 0], np.int64)))
    expect_auth_failure(lambda t: ch.open(t, [8], key=one_bit_off), m)


@pytest.mark.parametrize("link,stream", [("T1->S1", 0), ("S1->T2", 0), ("S2->T1", 0),
                                         ("S1->T1", 1)])
def test_message_for_another_link_or_stream_is_rejected(link, stream, impl):
    """An S1->T1 message opened in the other direction, on another link or
    another stream (same pair key, same counter) fails."""
    ch = Chan()
    m = ch.seal(tf.range(8, dtype=tf.int64))
    expect_auth_failure(lambda t: ch.open(t, [8], link=link, stream=stream), m, link)


def test_message_of_another_shape_is_rejected(impl):
    ch = Chan()
    m = ch.seal(tf.zeros([3, 4], tf.int64))
    for shape in ([4, 3], [12], [2, 6, 1]):  # same bytes, another tensor
        expect_auth_failure(lambda t: ch.open(t, shape), m)
    ch.open(m, [3, 4])


def test_replay_and_reorder_are_rejected():
    ch = Chan()
    x = tf.range(10, dtype=tf.int64)
    m0, m1, m2, m3 = (ch.seal(x) for _ in range(4))
    ch.open(m0, [10])
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
            f"message on link {LINK} (stream 0) was replayed or reordered: its counter "
            "is 0 but every counter below 1")):
        ch.open(m0, [10])
    ch.open(m2, [10])  # a gap (a run aborted before its open) is allowed
    with pytest.raises(tf.errors.InvalidArgumentError, match="its counter is 1 but every "
                       "counter below 3"):
        ch.open(m1, [10])  # ... but then m1 is out of order
    ch.open(m3, [10])
    assert int(ch.state.numpy()) == 4


def test_replay_inside_tf_function_is_rejected():
    ch = Chan()
    m = ch.seal(tf.range(5, dtype=tf.int64))
    open_ = tf.function(lambda: ch.open(m, [5]))
    open_()
    with pytest.raises(tf.errors.InvalidArgumentError, match="replayed or reordered"):
        open_()


def test_tamper_check_detects_an_opener_without_authentication(rng):
    """The tamper tests can fail: a broken opener (GCM's CTR decryption with
    the tag ignored) accepts a tampered message, and expect_auth_failure
    reports that. It also shows that the kernel's ciphertext is exactly the
    SP 800-38D CTR keystream XOR the plaintext."""
    ch = Chan()
    x = ring_values(rng, [32])
    m = ch.seal(tf.constant(x)).numpy()
    pair = key_bytes(ch.key)
    broken = lambda t: unauthenticated_open(pair, LINK, 0, t.tobytes())  # noqa: E731
    np.testing.assert_array_equal(broken(m), x)
    tampered = flip(m, 8 * 8 + 3)  # first ciphertext byte
    assert broken(tampered)[0] == x[0] ^ 8  # silently wrong data
    with pytest.raises(pytest.fail.Exception):
        expect_auth_failure(broken, tampered)
    expect_auth_failure(lambda t: ch.open(tf.constant(t), [32]), tampered)


# ---------------------------------------------------- limits and misuse
def test_counter_exhaustion():
    ch = Chan()
    ch.counter.assign(INT64_MAX)
    with pytest.raises(tf.errors.ResourceExhaustedError, match=re.escape(LINK)):
        ch.seal(tf.zeros([2], tf.int64))
    assert int(ch.counter.numpy()) == INT64_MAX
    ch.counter.assign(INT64_MAX - 1)  # the last usable counter
    m = ch.seal(tf.zeros([2], tf.int64))
    assert int.from_bytes(m.numpy()[:8].tobytes(), "big") == INT64_MAX - 1
    ch.open(m, [2])
    assert int(ch.state.numpy()) == INT64_MAX
    with pytest.raises(tf.errors.ResourceExhaustedError):
        ch.seal(tf.zeros([2], tf.int64))


def test_counter_exhaustion_of_multi_chunk_messages():
    """A 2-chunk message needs two counters below INT64_MAX."""
    ch = Chan()
    x = tf.zeros([CW + 1], tf.int64)
    ch.counter.assign(INT64_MAX - 1)
    with pytest.raises(tf.errors.ResourceExhaustedError, match=re.escape(LINK)):
        ch.seal(x)
    assert int(ch.counter.numpy()) == INT64_MAX - 1
    ch.seal(tf.zeros([2], tf.int64))  # a single chunk still fits
    ch.counter.assign(INT64_MAX - 2)
    m = ch.seal(x)
    assert int(ch.counter.numpy()) == INT64_MAX
    ch.open(m, [CW + 1])
    assert int(ch.state.numpy()) == INT64_MAX
    # a receiver never accepts a message whose counters pass INT64_MAX - 1
    rx = Chan(key=ch.key)
    ref = reference_seal(key_bytes(ch.key), LINK, 0, INT64_MAX - 1,
                         np.zeros([CW + 1], np.int64))
    with pytest.raises(tf.errors.InvalidArgumentError, match="replayed or reordered"):
        rx.open(tf.constant(np.frombuffer(ref, np.uint8)), [CW + 1])
    assert int(rx.state.numpy()) == 0


# Several tensors in one message: the seal kernel reads them in place (issue
# 26: no packing concat on the sender), sealing their flat concatenation.
@pytest.mark.parametrize("shapes", [[[3], [5]], [[CW - 1], [2], [CW + 3]], [[0], [7]],
                                    [[1], [1], [1]], [[2, 3], [CW], [4, 1]], [[CW], [CW]]],
                         ids=str)
def test_several_tensors_seal_as_their_concatenation(shapes, rng, impl):
    key = K.random_key()
    xs = [ring_values(rng, s) for s in shapes]
    flat = np.concatenate([x.reshape(-1) for x in xs])
    many, one = Chan(key=key), Chan(key=key)
    m = many.seal([tf.constant(x) for x in xs])
    # the bytes of the concatenated vector's message, with its AAD ([words]),
    # the counters taken alike, and the independent reference's bytes
    assert m.numpy().tobytes() == one.seal(tf.constant(flat)).numpy().tobytes()
    assert int(many.counter.numpy()) == int(one.counter.numpy()) == K.aead_chunk_count(
        8 * flat.size)
    assert m.numpy().tobytes() == reference_seal(key_bytes(key), LINK, 0, 0, flat)
    np.testing.assert_array_equal(many.open(m, [flat.size]).numpy(), flat)
    # tampering is caught as for one tensor
    rx = Chan(key=key)
    expect_auth_failure(lambda msg: rx.open(tf.constant(msg), [flat.size]),
                        flip(m.numpy(), 8 * m.shape[0] - 1))


@pytest.mark.parametrize("link", ["S1T1", "S1->S1", "->T1", "S1->", "S1->T1->T2", "S 1->T1"])
def test_bad_link_is_refused(link):
    ch = Chan()
    with pytest.raises(tf.errors.InvalidArgumentError, match="link"):
        K.aead_seal(ch.key, ch.counter, tf.zeros([1], tf.int64), link)
    assert int(ch.counter.numpy()) == 0


@pytest.mark.parametrize("stream", [-1, 2**32])
def test_bad_stream_is_refused(stream):
    ch = Chan()
    with pytest.raises(tf.errors.InvalidArgumentError, match="stream"):
        K.aead_seal(ch.key, ch.counter, tf.zeros([1], tf.int64), LINK, stream)


@pytest.mark.parametrize("value", [tf.constant(0.0), tf.constant([0, 0], tf.int64),
                                   tf.constant(-1, tf.int64)], ids=["float", "vector", "neg"])
def test_bad_counter_or_state_is_refused(value):
    ch = Chan()
    bad = tf.Variable(value, trainable=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(LINK)):
        K.aead_seal(ch.key, bad, tf.zeros([1], tf.int64), LINK)
    m = ch.seal(tf.zeros([1], tf.int64))
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(LINK)):
        K.aead_open(ch.key, bad, m, [1], LINK)


def test_bad_key_or_message_is_refused():
    ch = Chan()
    with pytest.raises(tf.errors.InvalidArgumentError, match="128-bit key"):
        K.aead_seal(tf.zeros([3], tf.int64), ch.counter, tf.zeros([1], tf.int64), LINK)
    assert int(ch.counter.numpy()) == 0  # refused before taking a counter
    m = ch.seal(tf.zeros([1], tf.int64))
    with pytest.raises(tf.errors.InvalidArgumentError, match="uint8 vector"):
        ch.open(tf.reshape(m, [4, 8]), [1])
