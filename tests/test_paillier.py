"""tp.he.paillier: the typed API over the Paillier kernels. Keys, plaintext
encodings and ranges, homomorphic ops, key identity, serialization with
tamper detection, the noise pool, tf.function, and interoperability with
python-paillier (phe) in both directions. Results are exact integers."""
import threading
import warnings

import numpy as np
import phe
import pytest
import tensorflow as tf

from tf_privpy.he import paillier as P

I64 = np.iinfo(np.int64)
# 1024-bit keys keep this file fast; their InsecureKeyWarning is tested where it matters.
pytestmark = pytest.mark.filterwarnings(
    "ignore::tf_privpy.protocols.he.paillier.InsecureKeyWarning")


def _keygen(bits):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.InsecureKeyWarning)
        return P.keygen(bits)


@pytest.fixture(scope="module")
def keys():
    return _keygen(1024)


@pytest.fixture(scope="module")
def keys2048():
    return P.keygen()


@pytest.fixture(scope="module")
def other_keys():
    return _keygen(1024)


@pytest.fixture(scope="module")
def phe_keys():
    """A key pair made by python-paillier itself (pure Python: 1024 bits)."""
    return phe.generate_paillier_keypair(n_length=1024)


# ------------------------------------------------------------------ keys
def test_keygen_sizes(keys2048):
    pk, sk = keys2048
    assert pk.bits == 2048 and sk.public_key == pk and sk.p * sk.q == pk.n and sk.p < sk.q
    assert len(pk.fingerprint) == 8 and pk.ciphertext_bytes == 512
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 2048: no warning
        P.keygen(2048)
    with pytest.warns(P.InsecureKeyWarning, match="seed 004"):
        pk1, _ = P.keygen(1024)
    assert pk1.bits == 1024
    pk3, sk3 = P.keygen(3072)
    assert pk3.bits == 3072
    assert P.decrypt(sk3, P.encrypt(pk3, [-5, 6])).numpy().tolist() == [-5, 6]


@pytest.mark.parametrize("bits", [512, 1000, 1023, 2047, 3071, 0, -2048])
def test_keygen_rejects_bad_sizes(bits):
    with pytest.raises(ValueError, match="even number of bits"):
        P.keygen(bits)


def test_keygen_rejects_non_int():
    for bits in ("2048", 2048.0, True):
        with pytest.raises(TypeError):
            P.keygen(bits)


def test_keys_repr_hides_secrets_and_validate(keys):
    pk, sk = keys
    assert str(sk.p) not in repr(sk) and str(sk.q) not in repr(sk)
    assert pk.fingerprint.hex() in repr(sk)
    with pytest.raises(P.KeyMismatchError):
        P.PrivateKey(pk, sk.p, sk.q + 2)
    with pytest.raises(P.PaillierError):
        P.PublicKey(pk.n * 2)
    with pytest.raises(P.PaillierError, match="bits"):
        P.PublicKey(2 ** 511 + 1)
    assert P.PrivateKey(pk, sk.q, sk.p) == sk  # normalized to p < q


# ------------------------------------------------------------ round trips
EDGES = [0, 1, -1, 2, -2, I64.max, I64.min, 123456789, -987654321]


@pytest.mark.parametrize("holder", ["public", "private"])
def test_round_trip_int64(keys, holder):
    pk, sk = keys
    key = pk if holder == "public" else sk
    c = P.encrypt(key, EDGES)
    assert isinstance(c, P.EncryptedTensor) and c.shape == [len(EDGES)]
    assert P.decrypt(sk, c).numpy().tolist() == EDGES
    x = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    assert (P.decrypt(sk, P.encrypt(key, x)).numpy() == x).all()
    assert P.decrypt(sk, P.encrypt(key, tf.constant(7, tf.int16))).numpy() == 7  # scalar


def test_round_trip_python_ints_at_the_range_edges(keys):
    pk, sk = keys
    half = pk.max_int  # (n - 1) // 2: the largest |x|
    values = [0, -1, 1, half, -half, half - 1, -(half - 1), 2 ** 200, -(2 ** 200)]
    for key in (pk, sk):
        assert P.decrypt_ints(sk, P.encrypt(key, values)).tolist() == values
    unsigned = P.decrypt_ints(sk, P.encrypt(pk, [-1, half]), signed=False).tolist()
    assert unsigned == [pk.n - 1, half]


def test_big_integer_plaintexts(keys):
    pk, sk = keys
    ms = [0, pk.n - 1, pk.n // 2, 2 ** 1000 + 17]
    x = P.ints_to_tensor(ms, pk.plaintext_bytes)
    for key in (pk, sk):
        out = P.decrypt(sk, P.encrypt(key, x), out_type=tf.string)
        assert P.tensor_to_ints(out).tolist() == ms
    with pytest.raises(P.PlaintextOutOfRangeError, match="element 1 .*>= n"):
        P.encrypt(pk, P.ints_to_tensor([1, pk.n], pk.plaintext_bytes))


def test_plaintext_out_of_range_and_types(keys):
    pk, sk = keys
    for bad in ([0, pk.max_int + 1], [0, -(pk.max_int + 1)], [0, pk.n], [0, 2 ** 2000]):
        with pytest.raises(P.PlaintextOutOfRangeError, match="element 1 .*n/2"):
            P.encrypt(pk, bad)
    for bad in ([1.5], np.array([1.0]), tf.constant([1.0]), [True], ["1"], [None]):
        with pytest.raises(TypeError, match="integer"):
            P.encrypt(pk, bad)
    with pytest.raises(P.PlaintextOutOfRangeError, match="element 1 does not fit in int64"):
        P.decrypt(sk, P.encrypt(pk, [1, 2 ** 63]))


# ---------------------------------------------------------- homomorphic ops
def test_add_subtract_broadcast(keys):
    pk, sk = keys
    a = P.encrypt(pk, [[1, -2, 3], [4, 5, -6]])
    b = P.encrypt(sk, [10, 20, 30])
    assert P.decrypt(sk, P.add(pk, a, b)).numpy().tolist() == [[11, 18, 33], [14, 25, 24]]
    assert P.decrypt(sk, P.add(pk, a, 100)).numpy().tolist() == [[101, 98, 103],
                                                                 [104, 105, 94]]
    assert P.decrypt(sk, P.subtract(pk, b, a)).numpy().tolist() == [[9, 22, 27], [6, 15, 36]]
    assert P.decrypt(sk, P.subtract(pk, b, [1, 2, 3])).numpy().tolist() == [9, 18, 27]
    big = P.decrypt_ints(sk, P.add(pk, P.encrypt(pk, [2 ** 100]), [2 ** 100])).tolist()
    assert big == [2 ** 101]
    # Sums wrap mod n like the scheme: a signed overflow is an error at int64 decrypt.
    top = P.encrypt(pk, [I64.max])
    with pytest.raises(P.PlaintextOutOfRangeError):
        P.decrypt(sk, P.add(pk, top, top))
    assert P.decrypt_ints(sk, P.add(pk, top, top)).tolist() == [2 * int(I64.max)]


def test_mul_plain(keys):
    pk, sk = keys
    a = P.encrypt(pk, [3, -4, 5, 0])
    want = [3 * -7, -4 * 2, 5 * 0, 0]
    assert P.decrypt(sk, P.mul_plain(pk, a, [-7, 2, 0, 9])).numpy().tolist() == want
    assert P.decrypt(sk, P.mul_plain(pk, a, -1)).numpy().tolist() == [-3, 4, -5, 0]
    k = 2 ** 300 + 1  # beyond int64: reduced mod n, same plaintext product
    got = P.decrypt_ints(sk, P.mul_plain(pk, a, k)).tolist()
    assert got == [(v * k + pk.n // 2) % pk.n - pk.n // 2 for v in (3, -4, 5, 0)]


def _ints(encrypted):
    return [int.from_bytes(b, "big") for b in encrypted.ciphertext.numpy().reshape(-1)]


@pytest.mark.parametrize("holder", ["public", "private"])
def test_mul_plain_by_zero_is_never_the_noiseless_encryption(keys, holder):
    """c^0 = 1 for every c: the raw kernel's product is the ciphertext 1,
    which anyone recognises. mul_plain refreshes exactly those elements."""
    from tf_privpy.protocols.he import kernels as K
    pk, sk = keys
    key = pk if holder == "public" else sk
    a = P.encrypt(pk, [3, -4, 5])
    raw = K.paillier_mul_plain(pk.n_tensor(), a.ciphertext, tf.zeros([3], tf.int64))
    assert [int.from_bytes(b, "big") for b in raw.numpy()] == [1, 1, 1]   # the problem
    z1, z2 = P.mul_plain(key, a, 0), P.mul_plain(key, a, [0, 0, 0])
    for z in (z1, z2):
        assert all(1 < v < pk.nsquare for v in _ints(z)), _ints(z)
        assert P.decrypt(sk, z).numpy().tolist() == [0, 0, 0]
        assert [P.to_phe(sk).decrypt(e) for e in P.to_phe(z)] == [0, 0, 0]   # phe agrees
    assert not set(_ints(z1)) & set(_ints(z2))   # fresh noise each call
    # Mixed factors: the nonzero ones are untouched c^k (the fast path), the
    # zeros fresh; k = 0 mod n given as a big integer or as bytes counts too.
    c = _ints(a)
    n2 = pk.nsquare
    mixed = P.mul_plain(key, a, [0, 2, pk.n])
    got = _ints(mixed)
    assert got[1] == pow(c[1], 2, n2) and got[0] != 1 and got[2] != 1
    assert P.decrypt(sk, mixed).numpy().tolist() == [0, -8, 0]
    zero_bytes = P.ints_to_tensor([0, 0, 7], pk.plaintext_bytes)
    by_bytes = P.mul_plain(key, a, zero_bytes)
    assert 1 not in _ints(by_bytes)
    assert P.decrypt(sk, by_bytes).numpy().tolist() == [0, 0, 35]
    # Inside tf.function (the zeros are found at run time) and broadcasting.
    f = tf.function(lambda x, k: P.mul_plain(key, x, k))
    zf = f(a, tf.constant([[0], [1]], tf.int64))
    assert zf.shape == [2, 3] and 1 not in _ints(zf)
    assert P.decrypt(sk, zf).numpy().tolist() == [[0, 0, 0], [3, -4, 5]]
    assert not set(_ints(f(a, tf.constant([[0], [1]], tf.int64))[0])) & set(_ints(zf[0]))


def test_reduce_sum_axes(keys):
    pk, sk = keys
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 10
    c = P.encrypt(sk, x)
    assert P.decrypt(sk, P.reduce_sum(pk, c)).numpy() == x.sum()
    assert P.decrypt(sk, P.sum(pk, c)).numpy() == x.sum()
    for axis in (0, 1, 2, -1):
        got = P.decrypt(sk, P.reduce_sum(pk, c, axis=axis)).numpy()
        np.testing.assert_array_equal(got, x.sum(axis=axis))
    empty = P.encrypt(pk, np.zeros([0], np.int64))
    assert P.decrypt(sk, P.reduce_sum(pk, empty)).numpy() == 0
    with pytest.raises(ValueError, match="out of range"):
        P.reduce_sum(pk, c, axis=3)


@pytest.mark.parametrize("how", ["public", "private", "pool"])
def test_rerandomize(keys, how):
    pk, sk = keys
    a = P.encrypt(pk, [5, -6, 7])
    if how == "pool":
        pool = P.NoisePool(pk, 3, progress=False)
        b = P.rerandomize(pk, a, noise=pool)
    else:
        b = P.rerandomize(pk if how == "public" else sk, a)
    assert P.decrypt(sk, b).numpy().tolist() == [5, -6, 7]
    assert not set(a.ciphertext.numpy().tolist()) & set(b.ciphertext.numpy().tolist())


def test_indexing_and_reshape(keys):
    pk, sk = keys
    c = P.encrypt(pk, [[1, 2, 3], [4, 5, 6]])
    assert P.decrypt(sk, c[1]).numpy().tolist() == [4, 5, 6]
    assert P.decrypt(sk, c[:, 2]).numpy().tolist() == [3, 6]
    assert P.decrypt(sk, c.reshape([3, 2])).numpy().tolist() == [[1, 2], [3, 4], [5, 6]]
    assert "fingerprint" in repr(c) and c.public_key == pk


# --------------------------------------------------- key identity and errors
def test_wrong_key_is_detected(keys, other_keys):
    pk, sk = keys
    pk2, sk2 = other_keys
    c = P.encrypt(pk, [1, 2])
    with pytest.raises(P.KeyMismatchError, match=pk.fingerprint.hex()):
        P.decrypt(sk2, c)
    with pytest.raises(P.KeyMismatchError):
        P.add(pk2, c, c)
    with pytest.raises(P.KeyMismatchError):
        P.add(pk, c, P.encrypt(pk2, [1, 2]))
    with pytest.raises(P.KeyMismatchError):
        P.mul_plain(pk2, c, 2)
    with pytest.raises(TypeError, match="EncryptedTensor"):
        P.decrypt(sk, c.ciphertext)
    with pytest.raises(TypeError, match="PrivateKey"):
        P.decrypt(pk, c)


def test_invalid_ciphertexts_are_errors_naming_the_element(keys):
    pk, sk = keys
    good = P.encrypt(pk, [1, 2, 3, 4]).ciphertext.numpy().tolist()
    bad = {"zero": bytes(pk.ciphertext_bytes),
           "n2": pk.nsquare.to_bytes(pk.ciphertext_bytes, "big"),
           "mult_p": (sk.p * 3).to_bytes(pk.ciphertext_bytes, "big"),
           "mult_q": (sk.q * 5).to_bytes(pk.ciphertext_bytes, "big"),
           "width": good[0][1:]}
    for name, b in bad.items():
        c = P.EncryptedTensor(tf.constant(good[:2] + [b] + good[3:]), pk.n_bytes)
        for op in (lambda: P.decrypt(sk, c), lambda: P.add(pk, c, c),
                   lambda: P.mul_plain(pk, c, 3), lambda: P.reduce_sum(pk, c),
                   lambda: P.rerandomize(pk, c)):
            with pytest.raises(P.CorruptCiphertextError, match="element 2"):
                op()
        assert P.validate(pk, c).numpy().tolist() == [True, True, False, True]


# ------------------------------------------------------------ serialization
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3)])
def test_serialize_round_trip(keys, shape):
    pk, sk = keys
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) - 2
    c = P.encrypt(pk, x)
    blob = P.serialize(c)
    assert blob[:4] == b"TPHE" and pk.fingerprint in blob[:20]
    d = P.deserialize(blob, sk)
    assert d.shape == shape and (P.decrypt(sk, d).numpy() == x).all()


def test_serialize_detects_every_flipped_byte(keys):
    pk, _ = keys
    blob = P.serialize(P.encrypt(pk, [1, 2]))
    rng = np.random.default_rng(7)
    positions = sorted(set(range(0, 40)) | set(rng.integers(40, len(blob), 60).tolist()) |
                       set(range(len(blob) - 16, len(blob))))
    for i in positions:
        bad = bytearray(blob)
        bad[i] ^= 1 << int(rng.integers(8))
        with pytest.raises(P.CorruptCiphertextError):
            P.deserialize(bytes(bad), pk)
    for cut in (blob[:-1], blob[:10], b"", blob + b"\x00"):
        with pytest.raises(P.CorruptCiphertextError):
            P.deserialize(cut, pk)


def test_serialize_wrong_key_and_invalid(keys, other_keys):
    pk, sk = keys
    blob = P.serialize(P.encrypt(pk, [1, 2]))
    with pytest.raises(P.KeyMismatchError, match="fingerprint"):
        P.deserialize(blob, other_keys[1])
    zero = P.EncryptedTensor(tf.constant([bytes(pk.ciphertext_bytes)]), pk.n_bytes)
    with pytest.raises(P.CorruptCiphertextError, match="element 0"):
        P.serialize(zero)


# ---------------------------------------------------------------- noise pool
def test_noise_pool_hands_out_each_value_once(keys):
    pk, sk = keys
    pool = P.NoisePool(pk, 10, chunk=3, progress=False)
    first = pool.take(4).numpy().tolist()
    second = pool.take(6).numpy().tolist()
    assert len(set(first + second)) == 10 and pool.available == 0 and pool.handed_out == 10
    with pytest.raises(P.NoisePoolExhaustedError, match="refill"):
        pool.take(1)
    pool.refill(2)
    third = pool.take(2).numpy().tolist()
    assert not set(third) & set(first + second)
    with pytest.raises(P.NoisePoolExhaustedError):
        pool.take(1)
    for v in first + second + third:  # each an encryption of 0
        c = P.EncryptedTensor(tf.constant([v]), pk.n_bytes)
        assert P.decrypt(sk, c).numpy().tolist() == [0]


def test_noise_pool_encrypt_progress_and_crt(keys):
    pk, sk = keys
    calls = []
    pool = P.NoisePool(sk, 6, chunk=4, progress=lambda d, t, s: calls.append((d, t)))
    c = P.encrypt(pk, [3, -4, 5, 6, 7], noise=pool)  # waits for the filler
    assert P.decrypt(sk, c).numpy().tolist() == [3, -4, 5, 6, 7]
    pool.wait(timeout=60)
    assert calls[-1] == (6, 6) and pool.available == 1
    with pytest.raises(P.NoisePoolExhaustedError):
        P.encrypt(pk, [1, 2], noise=pool)
    assert pool.available == 1  # a failed take takes nothing
    pool.close()


def test_noise_pool_concurrent_takers_get_disjoint_values(keys):
    pk, _ = keys
    pool = P.NoisePool(pk, 24, chunk=8, progress=False)
    got, errors = [], []

    def taker():
        try:
            for _ in range(4):
                got.extend(pool.take(2).numpy().tolist())
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=taker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(got) == 24 and len(set(got)) == 24


def test_noise_pool_refuses_tf_function(keys):
    pk, _ = keys
    pool = P.NoisePool(pk, 2, progress=False)

    @tf.function
    def f(x):
        return P.encrypt(pk, x, noise=pool).ciphertext

    # (autograph re-raises the PaillierError as a StagingError with its message)
    with pytest.raises(Exception, match="would bake the noise into the traced graph"):
        f(tf.constant([1, 2], tf.int64))
    pool.wait(timeout=60)
    assert pool.available == 2


# ------------------------------------------------------------- tf.function
def test_inside_tf_function(keys):
    pk, sk = keys

    @tf.function
    def step(a, b, x):
        s = P.add(pk, a, P.encrypt(pk, x))
        return P.decrypt(sk, P.mul_plain(pk, P.add(pk, s, b), 2)), P.encrypt(sk, x)

    a, b = P.encrypt(pk, [1, 2]), P.encrypt(sk, [10, 20])
    out, e1 = step(a, b, tf.constant([100, 200], tf.int64))
    _, e2 = step(a, b, tf.constant([100, 200], tf.int64))
    assert out.numpy().tolist() == [222, 444]
    assert set(e1.ciphertext.numpy().tolist()).isdisjoint(e2.ciphertext.numpy().tolist())
    spec = P.EncryptedTensor.Spec(ciphertext=tf.TensorSpec([None], tf.string), n=pk.n_bytes)
    dec = tf.function(lambda c: P.decrypt(sk, c), input_signature=[spec])
    assert dec(P.encrypt(pk, [4, 5, 6])).numpy().tolist() == [4, 5, 6]


# ------------------------------------------------------------ phe interop
def test_keys_convert_both_ways(keys, phe_keys):
    pk, sk = keys
    ppk, psk = P.to_phe(pk), P.to_phe(sk)
    assert isinstance(ppk, phe.PaillierPublicKey) and ppk.n == pk.n
    assert isinstance(psk, phe.PaillierPrivateKey) and (psk.p, psk.q) == (sk.p, sk.q)
    assert P.from_phe(ppk) == pk and P.from_phe(psk) == sk
    phe_pk, phe_sk = phe_keys
    with pytest.warns(P.InsecureKeyWarning):
        mine = P.from_phe(phe_sk)
    assert mine.public_key.n == phe_pk.n and P.to_phe(mine).p == phe_sk.p


def test_ours_to_phe_and_back(keys, phe_keys):
    pk, sk = keys
    psk = P.to_phe(sk)
    values = [0, 1, -1, 123456789, -(2 ** 62), I64.max]
    for key in (pk, sk):
        nums = P.to_phe(P.encrypt(key, values))
        assert nums.shape == (len(values),)
        assert [psk.decrypt(e) for e in nums] == values
    # A phe-made key: phe encrypts, we decrypt; we encrypt, phe decrypts.
    phe_pk, phe_sk = phe_keys
    with pytest.warns(P.InsecureKeyWarning):
        our_pk, our_sk = P.from_phe(phe_pk), P.from_phe(phe_sk)
        enc = P.from_phe([phe_pk.encrypt(v) for v in values])
    assert P.decrypt(our_sk, enc).numpy().tolist() == values
    assert [phe_sk.decrypt(e) for e in P.to_phe(P.encrypt(our_pk, values))] == values
    # CRT encryption with a phe-made private key (s^p noise where p - 1 does not factor).
    assert [phe_sk.decrypt(e) for e in P.to_phe(P.encrypt(our_sk, values))] == values
    small = phe_pk.max_int  # phe's own range edge
    with pytest.warns(P.InsecureKeyWarning):
        enc = P.from_phe(np.array([[phe_pk.encrypt(small)], [phe_pk.encrypt(-small)]]))
    assert enc.shape == (2, 1)
    assert P.decrypt_ints(our_sk, enc).tolist() == [[small], [-small]]


def test_homomorphic_add_across_libraries(keys):
    pk, sk = keys
    ppk, psk = P.to_phe(pk), P.to_phe(sk)
    ours = P.encrypt(pk, [5, -7])
    theirs = [ppk.encrypt(v) for v in (-20, 30)]
    mixed = P.add(pk, ours, P.from_phe(theirs))       # in tf_privpy
    assert P.decrypt(sk, mixed).numpy().tolist() == [-15, 23]
    in_phe = [a + b for a, b in zip(P.to_phe(ours), theirs)]   # in phe
    assert [psk.decrypt(e) for e in in_phe] == [-15, 23]
    back = P.from_phe(in_phe)  # phe marks sums un-obfuscated: from_phe rerandomizes
    assert P.decrypt(sk, back).numpy().tolist() == [-15, 23]
    assert [psk.decrypt(e) for e in P.to_phe(mixed)] == [-15, 23]
    scaled = P.from_phe([e * 3 for e in theirs], be_secure=False)
    assert P.decrypt(sk, scaled).numpy().tolist() == [-60, 90]


def test_from_phe_exponents_and_keys(keys, other_keys):
    pk, sk = keys
    ppk = P.to_phe(pk)
    up = phe.EncryptedNumber(ppk, ppk.raw_encrypt(3), exponent=2)  # 3 * 16^2
    assert P.decrypt(sk, P.from_phe([up])).numpy().tolist() == [3 * 16 ** 2]
    with pytest.raises(P.PaillierError, match="float"):
        P.from_phe([ppk.encrypt(0.5)])
    with pytest.raises(P.KeyMismatchError):
        P.from_phe([ppk.encrypt(1), P.to_phe(other_keys[0]).encrypt(1)])
    with pytest.raises(TypeError):
        P.from_phe([1, 2])
    assert P.decrypt(sk, P.from_phe(ppk.encrypt(9))).numpy() == 9  # a single number


def test_public_api_surface():
    import tf_privpy.he
    assert tf_privpy.he.paillier is P
    for name in P.__all__:
        assert getattr(P, name).__doc__, name
    assert issubclass(P.CorruptCiphertextError, ValueError)


def test_djn_noise_opt_in(keys):
    pk, sk = keys
    c = P.encrypt(pk, [1, -2, 3], noise="djn")
    assert P.decrypt(sk, c).numpy().tolist() == [1, -2, 3]
    assert P.decrypt(sk, P.rerandomize(pk, c, noise="djn")).numpy().tolist() == [1, -2, 3]
    pool = P.NoisePool(pk, 4, method="djn", progress=False)
    d = P.encrypt(pk, [7, 8, 9, 10], noise=pool)
    assert P.decrypt(sk, d).numpy().tolist() == [7, 8, 9, 10]
    psk = P.to_phe(sk)
    assert [psk.decrypt(e) for e in P.to_phe(c)] == [1, -2, 3]  # phe reads them
    with pytest.raises(ValueError, match="noise must be one of"):
        P.encrypt(pk, [1], noise="fast")
