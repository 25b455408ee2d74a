"""EncryptedTensor's python-paillier-style operators (`a + b`, `a - b`,
`a * k`, `k * a`, `-a`, `reduce_sum(a)`): the key comes from the operands.
Every result is checked exactly against python ints and against phe's
EncryptedNumber arithmetic on the same ciphertexts (phe decrypts ours)."""
import warnings

import numpy as np
import phe
import pytest
import tensorflow as tf

from tf_privpy.he import paillier as P

pytestmark = pytest.mark.filterwarnings(
    "ignore::tf_privpy.protocols.he.paillier.InsecureKeyWarning")

A = [7, -3, 0, 2 ** 40, -(2 ** 62)]
B = [-5, 11, 0, 9, 2 ** 61]


def _keygen():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.InsecureKeyWarning)
        return P.keygen(1024)


@pytest.fixture(scope="module")
def keys():
    return _keygen()


@pytest.fixture(scope="module")
def other_keys():
    return _keygen()


@pytest.fixture(scope="module")
def enc(keys):
    pk, sk = keys
    return P.encrypt(pk, A), P.encrypt(sk, B)


def _dec(sk, x):
    return P.decrypt_ints(sk, x).tolist()


def _phe(sk, x):
    """The phe EncryptedNumbers of x's ciphertexts."""
    return list(P.to_phe(x).reshape(-1))


def test_add_two_ciphertexts_matches_python_and_phe(keys, enc):
    pk, sk = keys
    a, b = enc
    want = [x + y for x, y in zip(A, B)]
    assert _dec(sk, a + b) == want
    phe_sk = P.to_phe(sk)
    assert [phe_sk.decrypt(x + y) for x, y in zip(_phe(sk, a), _phe(sk, b))] == want
    assert [phe_sk.decrypt(e) for e in _phe(sk, a + b)] == want   # phe reads our sum


def test_add_plaintext_both_sides(keys, enc):
    pk, sk = keys
    a, _ = enc
    k = [1, -1, 0, -(2 ** 40), 5]
    want = [x + y for x, y in zip(A, k)]
    assert _dec(sk, a + k) == want
    assert _dec(sk, k + a) == want                          # list + a: __radd__
    assert _dec(sk, a + np.array(k, np.int64)) == want
    assert _dec(sk, np.array(k, np.int64) + a) == want      # numpy defers to __radd__
    assert _dec(sk, a + tf.constant(k, tf.int64)) == want
    assert _dec(sk, tf.constant(k, tf.int64) + a) == want
    assert _dec(sk, a + 3) == [x + 3 for x in A]             # broadcast scalar
    phe_sk = P.to_phe(sk)
    assert [phe_sk.decrypt(e + y) for e, y in zip(_phe(sk, a), k)] == want


def test_subtract(keys, enc):
    pk, sk = keys
    a, b = enc
    assert _dec(sk, a - b) == [x - y for x, y in zip(A, B)]
    assert _dec(sk, b - a) == [y - x for x, y in zip(A, B)]
    assert _dec(sk, a - 10) == [x - 10 for x in A]
    assert _dec(sk, 10 - a) == [10 - x for x in A]
    assert _dec(sk, np.array(B, np.int64) - a) == [y - x for x, y in zip(A, B)]
    assert _dec(sk, a - a) == [0] * len(A)
    phe_sk = P.to_phe(sk)
    assert [phe_sk.decrypt(x - y) for x, y in zip(_phe(sk, a), _phe(sk, b))] == \
        [x - y for x, y in zip(A, B)]


def test_multiply_by_plaintext_both_sides(keys, enc):
    pk, sk = keys
    a, _ = enc
    k = [3, -2, 5, -1, 0]
    want = [x * y for x, y in zip(A, k)]
    for got in (a * k, k * a, a * np.array(k, np.int64), np.array(k, np.int64) * a,
                tf.constant(k, tf.int64) * a):
        assert _dec(sk, got) == want
    assert _dec(sk, a * -7) == [-7 * x for x in A]
    assert _dec(sk, 2 * a) == [2 * x for x in A]
    # Big factors: exact mod n, as phe's EncryptedNumber * int.
    big = 2 ** 200 + 3
    n, half = pk.n, pk.max_int
    assert _dec(sk, a[:2] * big) == [((x * big) % n + half) % n - half for x in A[:2]]
    phe_sk = P.to_phe(sk)
    assert [phe_sk.decrypt(e * y) for e, y in zip(_phe(sk, a), k)] == want
    # By zero: a fresh encryption of 0, never the ciphertext 1.
    z = a * 0
    assert 1 not in [int.from_bytes(c, "big") for c in z.ciphertext.numpy()]
    assert _dec(sk, z) == [0] * len(A)


def test_negate_and_compose(keys, enc):
    pk, sk = keys
    a, b = enc
    assert _dec(sk, -a) == [-x for x in A]
    assert _dec(sk, -(-a)) == A
    assert _dec(sk, 2 * (a - b) + 1) == [2 * (x - y) + 1 for x, y in zip(A, B)]
    phe_sk = P.to_phe(sk)
    assert [phe_sk.decrypt(e * -1) for e in _phe(sk, a)] == [-x for x in A]   # phe: no unary -


def test_broadcasting(keys):
    pk, sk = keys
    m = P.encrypt(pk, [[1, 2, 3], [4, 5, 6]])
    row = P.encrypt(pk, [10, -20, 30])
    assert _dec(sk, m + row) == [[11, -18, 33], [14, -15, 36]]
    assert _dec(sk, m * [[2], [-1]]) == [[2, 4, 6], [-4, -5, -6]]


def test_reduce_sum_takes_the_key_from_the_operand(keys):
    pk, sk = keys
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.int64)
    c = P.encrypt(pk, x)
    assert int(P.decrypt(sk, P.reduce_sum(c))) == int(x.sum())
    for axis in (0, 1, -1):
        np.testing.assert_array_equal(P.decrypt(sk, P.reduce_sum(c, axis=axis)),
                                      x.sum(axis=axis))
    np.testing.assert_array_equal(P.decrypt(sk, P.reduce_sum(c, 1)), x.sum(axis=1))
    np.testing.assert_array_equal(P.decrypt(sk, P.reduce_sum(pk, c, axis=0)), x.sum(axis=0))
    assert int(P.decrypt(sk, P.sum(c))) == int(x.sum())
    phe_sk = P.to_phe(sk)
    assert phe_sk.decrypt(sum(_phe(sk, c)[1:], _phe(sk, c)[0])) == int(x.sum())
    with pytest.raises(TypeError, match="axis twice"):
        P.reduce_sum(c, 0, axis=0)
    with pytest.raises(TypeError, match="needs the EncryptedTensor"):
        P.reduce_sum(pk)


def test_operators_inside_tf_function(keys, enc):
    pk, sk = keys
    a, b = enc

    @tf.function
    def f(x, y):
        return P.reduce_sum(3 * (x - y) + [1, 1, 1, 1, 1])

    assert int(P.decrypt_ints(sk, f(a, b))) == sum(3 * (x - y) + 1 for x, y in zip(A, B))


def test_mixed_keys_raise_key_mismatch(keys, other_keys, enc):
    a, _ = enc
    c = P.encrypt(other_keys[0], [1, 2, 3, 4, 5])
    for op in (lambda: a + c, lambda: c + a, lambda: a - c, lambda: c - a):
        with pytest.raises(P.KeyMismatchError, match="different keys.*re-encrypt"):
            op()
    assert issubclass(P.KeyMismatchError, ValueError)


def test_ciphertext_times_ciphertext_is_a_type_error(enc):
    a, b = enc
    with pytest.raises(TypeError, match="additively homomorphic only"):
        a * b
    with pytest.raises(TypeError, match="additively homomorphic only"):
        b * a
    with pytest.raises(TypeError, match="integers"):
        a * 1.5
    with pytest.raises(TypeError, match="integer"):
        a + [0.5] * 5


def test_phe_numbers_agree_with_python_ints(keys):
    """The same expression on phe's own EncryptedNumbers (phe's key and
    encryption) and on ours after from_phe, against python ints."""
    phe_pk, phe_sk = phe.generate_paillier_keypair(n_length=1024)
    xs, ys = [12, -7, 2 ** 50], [-3, 4, -(2 ** 49)]
    ex = P.from_phe([phe_pk.encrypt(v) for v in xs])
    ey = P.from_phe([phe_pk.encrypt(v) for v in ys])
    sk = P.from_phe(phe_sk)
    want = [5 * x - y + 2 for x, y in zip(xs, ys)]
    assert P.decrypt_ints(sk, 5 * ex - ey + 2).tolist() == want
    assert [phe_sk.decrypt(5 * phe_pk.encrypt(x) - phe_pk.encrypt(y) + 2)
            for x, y in zip(xs, ys)] == want
