"""Paillier kernels (ops/paillier) against python-int reference math: every
output is compared exactly with pow(...) and friends on python ints.
Keys are 1024-bit (2048 where the size matters) to keep the file fast."""
import functools
import math
import os
import pickle
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from phe import util as phe_util

from tf_privpy.protocols.he import kernels as K

I64 = np.iinfo(np.int64)
SYS = random.SystemRandom()


class Key:
    """A key made by the keygen kernel, with python-int reference math."""

    def __init__(self, bits):
        n, p, q = K.paillier_keygen(bits)
        self.tn, self.tp, self.tq = n, p, q
        self.n, self.p, self.q = (int.from_bytes(t.numpy(), "big") for t in (n, p, q))
        self.n2 = self.n * self.n
        self.nb = (self.n.bit_length() + 7) // 8
        self.cb = 2 * self.nb
        self.lam = math.lcm(self.p - 1, self.q - 1)
        self.mu = pow((pow(self.n + 1, self.lam, self.n2) - 1) // self.n, -1, self.n)

    def rand_unit(self):
        while True:
            r = SYS.randrange(1, self.n)
            if math.gcd(r, self.n) == 1:
                return r

    def enc(self, m, r=None):
        r = self.rand_unit() if r is None else r
        return (1 + (m % self.n) * self.n) * pow(r, self.n, self.n2) % self.n2

    def dec(self, c):
        return (pow(c, self.lam, self.n2) - 1) // self.n * self.mu % self.n

    def signed(self, m):
        return m - self.n if m > (self.n - 1) // 2 else m

    def cbytes(self, values, width=None):
        w = self.cb if width is None else width
        return tf.constant([v.to_bytes(w, "big") for v in values], tf.string,
                           shape=[len(values)])

    def ints(self, t):
        return [int.from_bytes(b, "big") for b in t.numpy().reshape(-1)]


@pytest.fixture(scope="module")
def key():
    return Key(1024)


@pytest.fixture(scope="module")
def key2048():
    return Key(2048)


EDGES = [0, 1, -1, 2, -2, 12345, -12345, I64.max, I64.min, I64.max - 1, I64.min + 1, 1 << 40]


def test_keygen_properties(key, key2048):
    for k, bits in ((key, 1024), (key2048, 2048)):
        assert k.n.bit_length() == bits and k.p * k.q == k.n and k.p != k.q
        assert k.p.bit_length() == k.q.bit_length() == bits // 2
        assert math.gcd(k.n, (k.p - 1) * (k.q - 1)) == 1
        assert phe_util.is_prime(k.p) and phe_util.is_prime(k.q)
        assert len(k.tn.numpy()) == bits // 8 and k.tn.numpy()[0] != 0  # minimal bytes
    assert Key(1024).n != key.n  # fresh randomness


@pytest.mark.parametrize("bits", [512, 1022 + 1, 1000, 16386])
def test_keygen_rejects_bad_sizes(bits):
    with pytest.raises(tf.errors.InvalidArgumentError, match="bits must be even"):
        K.paillier_keygen(bits)


@functools.lru_cache(maxsize=1)
def small_primes(bound=1 << 20):
    """The primes below 2^20: the kernels' trial-division bound."""
    sieve = bytearray([1]) * bound
    sieve[:2] = b"\0\0"
    for i in range(2, math.isqrt(bound) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytes(len(range(i * i, bound, i)))
    return [i for i in range(bound) if sieve[i]]


def split_p_minus_1(p):
    """p - 1 = (its 2^20-smooth part) * cofactor."""
    m, smooth = p - 1, 1
    for r in small_primes():
        while m % r == 0:
            m //= r
            smooth *= r
    return smooth, m


def unfactorable_prime(bits):
    """A prime p of `bits` bits (two top bits set) with p - 1 = 2 a c, a a
    prime of bits/2 bits and c with a prime factor over 2^20: trial division
    does not factor p - 1, as for almost every prime of python-paillier."""
    a = phe_util.getprimeover(bits // 2)
    lo, hi = -(-(3 << (bits - 3)) // a), (1 << (bits - 1)) // a
    while True:
        c = SYS.randrange(lo, hi)
        p = 2 * a * c + 1
        if p.bit_length() == bits and p >> (bits - 2) == 3 and phe_util.is_prime(p):
            smooth, cofactor = split_p_minus_1(p)
            if cofactor != a:  # c has a factor > 2^20 besides: a c is composite
                return p


def test_keygen_primes_let_p_minus_1_factor(key, key2048):
    """Keygen's primes are p = 2 k p' + 1 with p' a prime of bits/2 - 40 bits
    and k < 2^40 2^20-smooth: trial division by the primes below 2^20 leaves
    exactly p', which is how the kernels find p - 1's factorization (for the
    key holder's fixed-base noise) from p alone."""
    for k in (key, key2048):
        half = k.n.bit_length() // 2
        for prime in (k.p, k.q):
            assert prime.bit_length() == half and prime >> (half - 2) == 3
            smooth, cofactor = split_p_minus_1(prime)
            assert smooth % 2 == 0 and smooth < 1 << 41  # 2 k, k < 2^40
            assert cofactor.bit_length() == half - 40 and phe_util.is_prime(cofactor)
            assert smooth * cofactor == prime - 1


@pytest.mark.parametrize("which", ["both", "p", "q"])
def test_crt_encryption_of_keys_whose_p_minus_1_does_not_factor(key, which):
    """Keys of other origin (python-paillier, older keys) keep the s^p noise
    for each prime whose p - 1 does not factor; the other prime of a mixed key
    gets its table. Either way: n-th residues, and encryptions decrypt."""
    p_odd = unfactorable_prime(512)
    assert not phe_util.is_prime(split_p_minus_1(p_odd)[1])  # the kernels cannot factor it
    if which == "both":
        q_odd = unfactorable_prime(512)
        p, q = p_odd, q_odd
    else:
        p, q = (p_odd, key.q) if which == "p" else (key.p, p_odd)
    n = p * q
    assert n.bit_length() == 1024 and math.gcd(n, (p - 1) * (q - 1)) == 1
    tn, tp, tq = (tf.constant(v.to_bytes((v.bit_length() + 7) // 8, "big")) for v in (n, p, q))
    n2, lam = n * n, math.lcm(p - 1, q - 1)
    mu = pow((pow(n + 1, lam, n2) - 1) // n, -1, n)
    ints = lambda t: [int.from_bytes(b, "big") for b in t.numpy().reshape(-1)]  # noqa: E731
    dec = lambda c: (pow(c, lam, n2) - 1) // n * mu % n  # noqa: E731
    c = ints(K.paillier_encrypt_crt(tn, tp, tq, tf.constant(EDGES, tf.int64)))
    assert [v - n if v > n // 2 else v for v in map(dec, c)] == EDGES
    noise = ints(K.paillier_noise_crt(tn, tp, tq, 6))
    assert len(set(noise)) == 6
    for v in noise:
        assert pow(v, p - 1, p * p) == 1 and pow(v, q - 1, q * q) == 1 and dec(v) == 0


@pytest.mark.parametrize("crt", [False, True], ids=["generic", "crt"])
def test_encrypt_decrypts_under_reference(key, crt):
    x = tf.constant(EDGES, tf.int64)
    c = (K.paillier_encrypt_crt(key.tn, key.tp, key.tq, x) if crt
         else K.paillier_encrypt(key.tn, x))
    assert c.shape == x.shape and all(len(b) == key.cb for b in c.numpy())
    assert [key.signed(key.dec(v)) for v in key.ints(c)] == EDGES
    # Fresh noise: the same plaintext twice gives different ciphertexts.
    c2 = (K.paillier_encrypt_crt(key.tn, key.tp, key.tq, x) if crt
          else K.paillier_encrypt(key.tn, x))
    assert not set(key.ints(c)) & set(key.ints(c2))


@pytest.mark.parametrize("crt", [False, True], ids=["generic", "crt"])
def test_encrypt_big_integer_plaintexts(key, crt):
    ms = [0, 1, key.n - 1, key.n // 2, (key.n - 1) // 2, SYS.randrange(key.n)]
    widths = [1, 1, key.nb, key.nb, key.nb, key.nb]  # 1 to n_bytes bytes accepted
    x = tf.constant([m.to_bytes(w, "big") for m, w in zip(ms, widths)])
    c = (K.paillier_encrypt_crt(key.tn, key.tp, key.tq, x) if crt
         else K.paillier_encrypt(key.tn, x))
    assert [key.dec(v) for v in key.ints(c)] == ms


@pytest.mark.parametrize("crt", [False, True], ids=["generic", "crt"])
def test_noise_values_are_nth_residues(key, crt):
    """(CRT noise of keygen's keys: the fixed-base tables.)"""
    t = (K.paillier_noise_crt(key.tn, key.tp, key.tq, 8) if crt
         else K.paillier_noise(key.tn, 8))
    values = key.ints(t)
    assert t.shape == [8] and len(set(values)) == 8
    for v in values:
        assert 0 < v < key.n2 and math.gcd(v, key.n) == 1
        assert key.dec(v) == 0  # an n-th residue: the encryption of 0
        # n-th residue test with the factorization: v^(phi(n)) = 1 mod n^2.
        assert pow(v, (key.p - 1) * (key.q - 1), key.n2) == 1
    assert K.paillier_noise(key.tn, 0).shape == [0]


def test_encrypt_with_noise_is_the_formula(key):
    rs = [key.rand_unit() for _ in EDGES]
    noise = key.cbytes([pow(r, key.n, key.n2) for r in rs])
    c = K.paillier_encrypt_with_noise(key.tn, tf.constant(EDGES, tf.int64), noise)
    assert key.ints(c) == [key.enc(m, r) for m, r in zip(EDGES, rs)]
    big = [key.n - 1, 5]
    c = K.paillier_encrypt_with_noise(key.tn, tf.constant([m.to_bytes(key.nb, "big")
                                                            for m in big]), noise[:2])
    assert key.ints(c) == [key.enc(m, r) for m, r in zip(big, rs)]


def test_decrypt_matches_reference(key):
    ms = [0, 1, key.n - 1, 12345, key.n - 12345, (key.n - 1) // 2, (key.n + 1) // 2,
          I64.max, key.n + I64.min, SYS.randrange(key.n)]
    c = key.cbytes([key.enc(m) for m in ms])
    out = K.paillier_decrypt(key.tn, key.tp, key.tq, c, out_type=tf.string)
    assert all(len(b) == key.nb for b in out.numpy()) and key.ints(out) == ms
    small = K.paillier_decrypt(key.tn, key.tp, key.tq, key.cbytes([key.enc(m) for m in EDGES]))
    assert small.dtype == tf.int64 and small.numpy().tolist() == EDGES
    # Values that do not fit int64: an error naming the element, never a wrong number.
    for m in [(key.n - 1) // 2, 1 << 63, key.n - (1 << 63) - 1]:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"decrypted element 1 does not fit in int64"):
            K.paillier_decrypt(key.tn, key.tp, key.tq, key.cbytes([key.enc(1), key.enc(m)]))


def test_crt_noise_2048_is_in_the_subgroups(key2048):
    """The fixed-base noise at 2048 bits: v^(p-1) = 1 mod p^2 and v^(q-1) = 1
    mod q^2 (the n-th residues are the product of those subgroups), distinct,
    and CRT encryptions decrypt."""
    k = key2048
    values = k.ints(K.paillier_noise_crt(k.tn, k.tp, k.tq, 8))
    assert len(set(values)) == 8
    for v in values:
        assert pow(v, k.p - 1, k.p * k.p) == 1 and pow(v, k.q - 1, k.q * k.q) == 1
        assert math.gcd(v, k.n) == 1 and k.dec(v) == 0
    c = K.paillier_encrypt_crt(k.tn, k.tp, k.tq, tf.constant(EDGES, tf.int64))
    assert [k.signed(k.dec(v)) for v in k.ints(c)] == EDGES


def test_decrypt_2048_and_phe_ciphertexts(key2048):
    from phe import paillier as phe
    pub = phe.PaillierPublicKey(key2048.n)
    values = [0, -1, 1, 987654321, -(1 << 62)]
    c = key2048.cbytes([pub.encrypt(v).ciphertext() for v in values])
    out = K.paillier_decrypt(key2048.tn, key2048.tp, key2048.tq, c)
    assert out.numpy().tolist() == values


def test_add_matches_reference(key):
    a = [key.enc(m) for m in EDGES]
    b = [key.enc(m) for m in reversed(EDGES)]
    s = K.paillier_add(key.tn, key.cbytes(a), key.cbytes(b))
    assert key.ints(s) == [x * y % key.n2 for x, y in zip(a, b)]
    two_d = K.paillier_add(key.tn, tf.reshape(key.cbytes(a), [3, 4]),
                           tf.reshape(key.cbytes(b), [3, 4]))
    assert two_d.shape == [3, 4] and key.ints(two_d) == key.ints(s)


def test_mul_plain_matches_reference(key):
    ks = [0, 1, -1, 2, -7, I64.max, I64.min, 1 << 40]
    c = [key.enc(SYS.randrange(key.n)) for _ in ks]
    out = K.paillier_mul_plain(key.tn, key.cbytes(c), tf.constant(ks, tf.int64))
    assert key.ints(out) == [pow(x, k, key.n2) for x, k in zip(c, ks)]  # k < 0: inverse
    big = [0, key.n - 1, SYS.randrange(key.n)]
    out = K.paillier_mul_plain(key.tn, key.cbytes(c[:3]),
                               tf.constant([k.to_bytes(key.nb, "big") for k in big]))
    assert key.ints(out) == [pow(x, k, key.n2) for x, k in zip(c, big)]


def test_rerandomize(key):
    c = [key.enc(m) for m in EDGES]
    out = key.ints(K.paillier_rerandomize(key.tn, key.cbytes(c)))
    for old, new in zip(c, out):
        assert new != old and key.dec(new) == key.dec(old)
        assert key.dec(new * pow(old, -1, key.n2) % key.n2) == 0  # times an n-th residue


@pytest.mark.parametrize("shape", [(3, 50), (1, 333), (70, 2), (2, 0), (0, 4), (1, 1)])
def test_reduce_sum_matches_reference(key, shape):
    outer, inner = shape
    # Ciphertext-like units (any element of Z*_{n^2} works for a product).
    vals = [key.rand_unit() * key.rand_unit() % key.n2 for _ in range(outer * inner)]
    got = K.paillier_reduce_sum(key.tn, tf.reshape(key.cbytes(vals), shape))
    want = [math.prod(vals[r * inner:(r + 1) * inner]) % key.n2 for r in range(outer)]
    assert got.shape == [outer] and key.ints(got) == want


def bad_values(key):
    """Invalid ciphertexts, as (name, bytes)."""
    return [("zero", bytes(key.cb)), ("n2", key.n2.to_bytes(key.cb, "big")),
            ("over_n2", (key.n2 + 5).to_bytes(key.cb, "big")),
            ("max", b"\xff" * key.cb),
            ("mult_p", (key.p * key.rand_unit()).to_bytes(key.cb, "big")),
            ("mult_q", (key.q * 12345).to_bytes(key.cb, "big")),
            ("n", key.n.to_bytes(key.cb, "big")),
            ("short", key.enc(3).to_bytes(key.cb, "big")[1:]),
            ("long", b"\x00" + key.enc(3).to_bytes(key.cb, "big")),
            ("empty", b"")]


def test_validate(key):
    bad = bad_values(key)
    good = [key.enc(m).to_bytes(key.cb, "big") for m in (0, 1, -1)] + [b"\x00" * (key.cb - 1)
                                                                     + b"\x01"]
    valid = K.paillier_validate(key.tn, tf.constant([b for _, b in bad] + good)).numpy()
    assert valid.tolist() == [False] * len(bad) + [True] * len(good)


OPS = {
    "decrypt": lambda k, c: K.paillier_decrypt(k.tn, k.tp, k.tq, c),
    "add_a": lambda k, c: K.paillier_add(k.tn, c, k.good(c)),
    "add_b": lambda k, c: K.paillier_add(k.tn, k.good(c), c),
    "mul_plain": lambda k, c: K.paillier_mul_plain(k.tn, c, tf.fill(tf.shape(c), np.int64(3))),
    "mul_plain_neg": lambda k, c: K.paillier_mul_plain(k.tn, c,
                                                       tf.fill(tf.shape(c), np.int64(-3))),
    "rerandomize": lambda k, c: K.paillier_rerandomize(k.tn, c),
    "reduce_sum": lambda k, c: K.paillier_reduce_sum(k.tn, tf.reshape(c, [1, -1])),
    "noise": lambda k, c: K.paillier_encrypt_with_noise(k.tn, tf.zeros(tf.shape(c), tf.int64),
                                                        c),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_invalid_ciphertexts_raise_naming_the_element(key, op):
    key.good = lambda c: key.cbytes([key.enc(1)] * int(tf.size(c)))
    ok = [key.enc(m).to_bytes(key.cb, "big") for m in (4, 5)]
    for name, b in bad_values(key):
        if op == "mul_plain_neg" and name in ("mult_p", "mult_q", "n"):
            pattern = r"element 2 .*(not invertible|shares a factor)"
        else:
            pattern = r"element 2 "
        with pytest.raises(tf.errors.InvalidArgumentError, match=pattern):
            OPS[op](key, tf.constant(ok + [b, ok[0]]))


def test_error_names_multi_dimensional_index(key):
    c = [key.enc(1).to_bytes(key.cb, "big")] * 6
    c[4] = bytes(key.cb)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"element 4 \(index \[1, 1\]\)"):
        K.paillier_decrypt(key.tn, key.tp, key.tq, tf.reshape(tf.constant(c), [2, 3]))


def test_plaintext_errors(key):
    noise = key.cbytes([1, 1])
    for b in [key.n.to_bytes(key.nb, "big"), b"\xff" * key.nb, b"\x01" * (key.nb + 1), b""]:
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"plaintext element 1"):
            K.paillier_encrypt(key.tn, tf.constant([b"\x01", b]))
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"plaintext element 1"):
            K.paillier_encrypt_with_noise(key.tn, tf.constant([b"\x01", b]), noise)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"k element 0 .*>= n"):
        K.paillier_mul_plain(key.tn, noise[:1], tf.constant([key.n.to_bytes(key.nb, "big")]))


def test_bad_keys(key):
    m = tf.constant([1], tf.int64)
    cases = {
        "even": (key.n * 2).to_bytes(key.nb + 1, "big").lstrip(b"\0"),
        "512 bits": (2 ** 511 + 1).to_bytes(64, "big"),
        "leading zero": b"\x00" + key.tn.numpy(),
        "empty": b"",
    }
    for name, nb in cases.items():
        with pytest.raises(tf.errors.InvalidArgumentError, match="public key"):
            K.paillier_encrypt(tf.constant(nb), m)
    c = K.paillier_encrypt(key.tn, m)
    one = (1).to_bytes(1, "big")
    for p, q, msg in [(key.tp, tf.constant(one), "p q != n"),
                      (tf.constant(one), key.tn, "not prime"),
                      (key.tq, key.tp, None)]:  # swapped primes are fine
        if msg is None:
            assert K.paillier_decrypt(key.tn, p, q, c).numpy().tolist() == [1]
        else:
            with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
                K.paillier_decrypt(key.tn, p, q, c)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="scalar|rank"):
        K.paillier_encrypt(tf.stack([key.tn, key.tn]), m)


def test_dtype_and_shape_errors(key):
    c = K.paillier_encrypt(key.tn, tf.constant([1, 2], tf.int64))
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="shape"):
        K.paillier_add(key.tn, c, c[:1])
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        K.paillier_encrypt(key.tn, tf.constant([1.0]))
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        K.paillier_decrypt(key.tn, key.tp, key.tq, c, out_type=tf.int32)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="rank|matrix"):
        K.paillier_reduce_sum(key.tn, c)


def test_kernels_in_tf_function_are_not_folded(key):
    @tf.function
    def enc_twice(x):
        return K.paillier_encrypt(key.tn, x), K.paillier_encrypt(key.tn, x)

    a, b = enc_twice(tf.constant([7], tf.int64))
    a2, _ = enc_twice(tf.constant([7], tf.int64))
    assert len({key.ints(a)[0], key.ints(b)[0], key.ints(a2)[0]}) == 3
    assert {key.dec(v) for v in key.ints(a) + key.ints(b)} == {7}


_SINGLE_THREAD = """
import pickle, sys, tensorflow as tf
from tf_privpy.protocols.he import kernels as K
with open(sys.argv[1], "rb") as f:
    n, p, q, c, k = pickle.load(f)
n, p, q = (tf.constant(v) for v in (n, p, q))
c = tf.constant(c); k = tf.constant(k)
out = [K.paillier_decrypt(n, p, q, c, out_type=tf.string), K.paillier_add(n, c, c[::-1]),
       K.paillier_mul_plain(n, c, k), K.paillier_reduce_sum(n, tf.reshape(c, [1, -1])),
       K.paillier_encrypt_with_noise(n, k, c)]
with open(sys.argv[2], "wb") as f:
    pickle.dump([o.numpy().tolist() for o in out], f)
"""


def test_multithreaded_equals_single_threaded(key, tmp_path):
    """The deterministic kernels give the same bytes on TF's 2-thread pool as
    in a process whose intra-op pool has one thread."""
    count = 64
    c = key.cbytes([key.enc(SYS.randrange(key.n)) for _ in range(count)])
    k = tf.constant([SYS.randrange(-2**62, 2**62) for _ in range(count)], tf.int64)
    inp, outp = tmp_path / "in.pkl", tmp_path / "out.pkl"
    with open(inp, "wb") as f:
        pickle.dump([key.tn.numpy(), key.tp.numpy(), key.tq.numpy(), c.numpy().tolist(),
                     k.numpy().tolist()], f)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_NUM_INTRAOP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=root)
    r = subprocess.run([sys.executable, "-c", _SINGLE_THREAD, str(inp), str(outp)], env=env,
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(outp, "rb") as f:
        single = pickle.load(f)
    multi = [K.paillier_decrypt(key.tn, key.tp, key.tq, c, out_type=tf.string),
             K.paillier_add(key.tn, c, c[::-1]), K.paillier_mul_plain(key.tn, c, k),
             K.paillier_reduce_sum(key.tn, tf.reshape(c, [1, -1])),
             K.paillier_encrypt_with_noise(key.tn, k, c)]
    for s, m in zip(single, multi):
        assert s == m.numpy().tolist()
    # ... and one batched call equals element-by-element calls.
    one_by_one = [K.paillier_mul_plain(key.tn, c[i:i + 1], k[i:i + 1]).numpy()[0]
                  for i in range(8)]
    assert one_by_one == multi[2].numpy()[:8].tolist()


def test_djn_noise_and_encryption(key):
    """DJN noise (opt-in): n-th residues, all distinct, ciphertexts decrypt."""
    t = K.paillier_noise(key.tn, 16, method="djn")
    values = key.ints(t)
    assert len(set(values)) == 16
    for v in values:
        assert 0 < v < key.n2 and math.gcd(v, key.n) == 1
        assert pow(v, (key.p - 1) * (key.q - 1), key.n2) == 1 and key.dec(v) == 0
    c = K.paillier_encrypt(key.tn, tf.constant(EDGES, tf.int64), method="djn")
    assert [key.signed(key.dec(v)) for v in key.ints(c)] == EDGES
    r = key.ints(K.paillier_rerandomize(key.tn, c, method="djn"))
    assert [key.signed(key.dec(v)) for v in r] == EDGES and not set(r) & set(key.ints(c))


def test_standalone_cc_test():
    """ops/paillier/paillier_test.cc: toy primes exhaustively (factorization
    of p - 1, generator test against brute-force orders, the table path a
    bijection onto T_p, chi-square of samples), real keys (prime structure,
    table == mpz_powm, noise subgroups, round trips), fallback keys. Built once
    into build/cc-tests/paillier (`make cc-tests`); make rebuilds on change."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(["make", "-s", "-f", "ops/paillier/Makefile.standalone", "test",
                        f"OUT={_cc_out(root)}"], cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), r.stdout


def _cc_out(root):
    return os.path.join(root, "build", "cc-tests", "paillier")


def test_standalone_bench_builds_and_checks_its_results():
    """ops/paillier/Makefile.standalone (no TensorFlow) builds, and the bench's
    built-in checks (decrypt(encrypt(m)) = m for CRT and DJN encryptions, the
    mul_plain result) pass on a 1024-bit key."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run(["make", "-s", "-f", "ops/paillier/Makefile.standalone", "bench",
                        "BITS=1024", "COUNT=4", f"OUT={_cc_out(root)}"], cwd=root,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "OK", r.stdout
