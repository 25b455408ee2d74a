"""tp.he.scalar_product (Wright-Yang, seed 004) and tp.he.vector_sum (seed 002).

Expected values are computed with numpy / python ints. Scalar-product tests
use 1024-bit keys for speed (seed 004's size); one runs at 2048 bits."""
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.he import paillier as P
from tf_privpy.he import tasks
from tf_privpy.protocols.he import paillier_io as io
from tf_privpy.protocols.he import scalar_product as sp_proto
from tf_privpy.protocols.he import vector_sum as vs_proto


def _keygen(bits):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.InsecureKeyWarning)
        return P.keygen(bits)


@pytest.fixture(scope="module")
def key1024():
    return _keygen(1024)


@pytest.fixture(scope="module")
def other1024():
    return _keygen(1024)


@pytest.fixture(scope="module")
def third1024():
    return _keygen(1024)


def dot(x, y):
    return sum(int(a) * int(b) for a, b in zip(x, y))


# ------------------------------------------------------------ scalar product
@pytest.mark.parametrize("clients", [1, 2, 3])
@pytest.mark.parametrize("chunk", [64, 10_000], ids=["chunked", "unchunked"])
def test_binary_shares_reconstruct(key1024, clients, chunk):
    pk, sk = key1024
    rng = np.random.default_rng(clients * 7 + chunk)
    x, y = rng.integers(0, 2, 301), rng.integers(0, 2, 301)
    x0, y0 = x.copy(), y.copy()
    r = tp.he.scalar_product(x, y, sk, clients=clients, chunk_size=chunk)
    assert r.kind == "binary" and r.clients == clients and r.modulus == pk.n
    assert 0 <= r.alice_share < pk.n and 0 <= r.bob_share < pk.n
    assert (r.alice_share + r.bob_share) % pk.n == dot(x, y)
    assert r.reconstruct() == dot(x, y)
    assert (x == x0).all() and (y == y0).all()          # inputs untouched
    n_chunks = sum(-(-s // chunk) for s in sp_proto.split_sizes(301, clients))
    sent = [m for m in r.transcript.messages if m[2] == "EncryptedTensor" and
            m[0].startswith("bob")]
    assert len(sent) == n_chunks and sum(m[3] for m in sent) == 301


@pytest.mark.parametrize("clients", [1, 2, 3])
@pytest.mark.parametrize("chunk", [50, 10_000], ids=["chunked", "unchunked"])
def test_integer_shares_reconstruct_with_negatives(key1024, clients, chunk):
    _, sk = key1024
    rng = np.random.default_rng(100 + clients + chunk)
    x = rng.integers(-2 ** 20, 2 ** 20, 203)
    y = rng.integers(-2 ** 30, 2 ** 30, 203)
    x[:5] = [0, 1, -1, 0, 2 ** 20 - 1]
    r = tp.he.scalar_product(x, y, sk, clients=clients, chunk_size=chunk)
    assert r.kind == "integer"
    assert r.reconstruct() == dot(x, y)
    neg = tp.he.scalar_product([-3, 0, 2], [5, 9, -7], sk, clients=min(clients, 3))
    assert neg.reconstruct() == -29


def test_booleans_and_tensors_and_2048_bits():
    pk, sk = P.keygen(2048)
    x = tf.constant([True, False, True, True])
    y = np.array([1, 1, 0, 1], np.int8)
    r = tp.he.scalar_product(x, y, sk, pipeline=False)
    assert r.reconstruct() == 2 and r.modulus == pk.n
    r = tp.he.scalar_product([7, -3], [2, 5], sk, alice_noise="djn")
    assert r.reconstruct() == -1


def test_per_client_keys_share_modulo_power_of_two(key1024, other1024, third1024):
    keys = [key1024[1], other1024[1], third1024[1]]
    rng = np.random.default_rng(5)
    x, y = rng.integers(-100, 100, 90), rng.integers(-100, 100, 90)
    r = tp.he.scalar_product(x, y, keys, chunk_size=16)
    assert r.clients == 3 and r.modulus == 1 << (1024 - 43)
    assert r.reconstruct() == dot(x, y)
    r64 = tp.he.scalar_product(x, y, keys[:2], share_bits=64)       # shares in Z_2^64
    assert r64.modulus == 2 ** 64 and (r64.alice_share + r64.bob_share) % 2 ** 64 == \
        dot(x, y) % 2 ** 64
    fps = {m[0]: m for m in r.transcript.messages if m[2] == "VectorHeader"}
    assert len(fps) == 3


def test_precomputed_online_phase(key1024):
    pk, sk = key1024
    rng = np.random.default_rng(9)
    x, y = rng.integers(0, 2, 500), rng.integers(0, 2, 500)
    ev = tp.he.encrypt_vector(sk, y, chunk_size=128)
    assert ev.header.length == 500 and ev.header.kind == "binary" and not ev.used
    r = tp.he.scalar_product(x, key=sk, precomputed=ev)
    assert r.reconstruct() == dot(x, y)
    assert r.timings["bob_encrypt"] == 0.0                   # nothing encrypted online
    with pytest.raises(tasks.ScalarProductError, match="already used"):
        tp.he.scalar_product(x, key=sk, precomputed=ev)
    parts = tp.he.encrypt_vector(sk, y, clients=2)
    assert len(parts) == 2 and [p.header.length for p in parts] == [250, 250]
    assert tp.he.scalar_product(x, key=sk, precomputed=parts).reconstruct() == dot(x, y)
    yi = rng.integers(-50, 50, 500)
    assert tp.he.scalar_product(x * 3 - 1, key=sk, precomputed=tp.he.encrypt_vector(
        sk, yi)).reconstruct() == dot(x * 3 - 1, yi)


def test_precomputed_noise_pool(key1024):
    _, sk = key1024
    pool = P.NoisePool(sk, 130, progress=False)
    pool.wait()
    rng = np.random.default_rng(11)
    x, y = rng.integers(0, 2, 130), rng.integers(0, 2, 130)
    r = tp.he.scalar_product(x, y, sk, bob_noise=pool, chunk_size=40)
    assert r.reconstruct() == dot(x, y) and pool.available == 0
    with pytest.raises(P.NoisePoolExhaustedError):
        tp.he.scalar_product(x, y, sk, bob_noise=pool)


def test_alice_sees_only_ciphertexts(key1024):
    pk, sk = key1024
    x, y = np.array([1, 0, 1, 1, 0, 1]), np.array([1, 1, 1, 1, 0, 1])
    with pytest.raises(TypeError, match="only Bob's PublicKey"):
        tasks.ScalarProductAlice(sk, x, tasks.VectorHeader(6, "binary", 1, pk.fingerprint))
    bob = tasks.ScalarProductBob(sk, y, "binary", None)
    header = bob.header
    assert dataclass_fields(header) == {"length": 6, "kind": "binary", "bound": 1,
                                        "fingerprint": pk.fingerprint}
    alice = tasks.ScalarProductAlice(pk, x, header)
    received = []
    for chunk in bob.chunks(4):
        received.append(chunk)
        assert isinstance(chunk, P.EncryptedTensor) and chunk.ciphertext.dtype == tf.string
        alice.absorb(chunk)
    # Equal plaintexts (five 1s) under different, valid ciphertexts: semantic security.
    cts = np.concatenate([c.ciphertext.numpy() for c in received])
    assert len(set(cts.tolist())) == 6 and P.validate(pk, received[0]).numpy().all()
    mask = sp_proto.draw_mask(pk.n)
    blinded = alice.finish(mask)
    assert isinstance(blinded, P.EncryptedTensor) and blinded.shape == []
    s = bob.decrypt(blinded)
    assert (mask + s) % pk.n == dot(x, y)
    r = tp.he.scalar_product(x, y, sk, clients=2)
    assert r.transcript.received_by("alice") == ["EncryptedTensor", "VectorHeader"]
    assert r.transcript.received_by("bob") == ["EncryptedTensor", "int"]    # + the chain
    assert r.bytes_bob_to_alice == 2 * (sp_proto.serialized_bytes(pk, 3) + len(pk.fingerprint)
                                        + 24)


def dataclass_fields(obj):
    import dataclasses
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def test_mask_is_fresh_uniform_from_secrets(key1024, monkeypatch):
    pk, sk = key1024
    calls = []
    real = sp_proto.secrets.randbelow

    def spy(bound):
        calls.append(bound)
        return real(bound)

    monkeypatch.setattr(sp_proto.secrets, "randbelow", spy)
    x = y = [1, 1, 0]
    shares = [tp.he.scalar_product(x, y, sk) for _ in range(4)]
    assert calls == [pk.n] * 4                                  # R uniform in Z_n, per call
    alice = {r.alice_share for r in shares}
    bob = {r.bob_share for r in shares}
    assert len(alice) == 4 and len(bob) == 4                    # never reused
    assert all(r.reconstruct() == 2 for r in shares)
    assert max(alice).bit_length() > 1000                       # full-size masks
    calls.clear()
    tp.he.scalar_product([1, 2, 3], [1, 1, 1], sk, clients=3)
    assert calls == [pk.n] * 3                                  # one R_i per client


def test_bad_inputs_raise(key1024, other1024):
    pk, sk = key1024
    E = tasks.ScalarProductError
    with pytest.raises(E, match="same length"):
        tp.he.scalar_product([1, 0], [1, 0, 1], sk)
    with pytest.raises(E, match="binary"):
        tp.he.scalar_product([1, 2, 0], [1, 1, 1], sk, kind="binary")
    with pytest.raises(E, match="binary"):
        tp.he.scalar_product([1, 1, 0], [1, -1, 1], sk, kind="binary")
    with pytest.raises(TypeError, match="integer"):
        tp.he.scalar_product([0.5, 1.0], [1, 1], sk)
    with pytest.raises(E, match="1-D"):
        tp.he.scalar_product([[1, 0]], [[1, 0]], sk)
    with pytest.raises(E, match="2\\^62"):
        tp.he.scalar_product([2 ** 62], [1], sk)
    with pytest.raises(E, match="y_bound"):
        tp.he.scalar_product([1, 1], [5, 9], sk, y_bound=8)
    with pytest.raises(E, match="M/2"):                          # |x·y| could wrap
        tp.he.scalar_product([100, 100], [1, 1], [sk, other1024[1]], share_bits=8)
    with pytest.raises(E, match="at least one element"):
        tp.he.scalar_product([1, 0], [1, 1], sk, clients=3)
    with pytest.raises(TypeError, match="PrivateKey"):
        tp.he.scalar_product([1], [1], pk)
    with pytest.raises(ValueError, match="chunk_size"):
        tp.he.scalar_product([1], [1], sk, chunk_size=0)
    with pytest.raises(ValueError, match="kind"):
        tp.he.scalar_product([1], [1], sk, kind="ternary")
    with pytest.raises(ValueError, match="share_bits"):
        tp.he.scalar_product([1, 1], [1, 1], [sk, other1024[1]], share_bits=2000)
    with pytest.raises(P.KeyMismatchError):
        tp.he.scalar_product([1, 1], key=other1024[1], precomputed=tp.he.encrypt_vector(sk, [1, 1]))
    with pytest.raises(E, match="same length"):
        tp.he.scalar_product([1, 1, 1], key=sk, precomputed=tp.he.encrypt_vector(sk, [1, 1]))
    alice = tasks.ScalarProductAlice(pk, np.array([1, 1]), tasks.VectorHeader(
        2, "binary", 1, pk.fingerprint))
    with pytest.raises(E, match="of the 2 elements"):
        alice.finish(1)                                          # Bob sent nothing yet


def test_progress_reports(key1024):
    _, sk = key1024
    seen = []
    tp.he.scalar_product(np.ones(300, int), np.ones(300, int), sk, chunk_size=100,
                         progress=lambda done, total, s: seen.append((done, total)))
    assert seen and seen[-1] == (300, 300)
    seen.clear()
    v = np.ones((5, 4), int)
    tp.he.vector_sum(v, 1, sk, users_per_batch=2,
                     progress=lambda done, total, s: seen.append((done, total)))
    assert seen and seen[-1] == (5, 5)


def test_progress_reporter_prints_at_most_once_a_second_and_at_the_end(capsys):
    from tf_privpy.protocols.he.progress import ProgressReporter
    rep = ProgressReporter(True, 10, "demo", "items")
    for _ in range(10):
        rep.add(1)
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1].startswith("demo: 10/10 items (100%)") and len(lines) <= 2
    rep = ProgressReporter(False, 10, "silent")
    rep.add(10)
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------ vector sum
def test_vector_sum_exact_against_numpy(key1024):
    pk, sk = key1024
    rng = np.random.default_rng(3)
    v = rng.integers(0, 21, (37, 300))
    v[0] = 20                                              # the largest values too
    r = tp.he.vector_sum(v, 20, sk, max_users=8000, users_per_batch=8, fan_in=3)
    assert r.totals.dtype == np.int64 and (r.totals == v.sum(axis=0)).all()
    spec = r.spec
    assert spec.slot_bits == 18 and spec.slots_per_plaintext == 1023 // 18
    assert spec.plaintexts_per_user == 6
    assert r.upload_bytes_per_user == spec.upload_bytes == len(io.serialize(
        P.encrypt(pk, [1] * 6)))
    assert r.users == 37 and r.timings["total"] >= r.timings["users_encrypt"]


def test_vector_sum_2048_bytes_per_value_and_djn():
    pk, sk = P.keygen(2048)
    v = np.random.default_rng(4).integers(0, 21, (12, 100))
    r = tp.he.vector_sum(v, 20, sk, max_users=8000, noise="djn")
    assert (r.totals == v.sum(axis=0)).all()
    assert r.spec.plaintexts_per_user == 1 and r.bytes_per_value <= 6.0


def test_packers_agree_and_unpack_is_exact():
    spec = tasks.VectorSumSpec(250, 1000, 3, 1024)
    v = np.random.default_rng(8).integers(0, 1001, (5, 250))
    a, b = tasks.pack(spec, v, "numpy").numpy(), tasks.pack(spec, v, "kernel").numpy()
    assert (a == b).all() and a.shape == (5, spec.plaintexts_per_user)
    ints = [[int.from_bytes(t, "big") for t in row] for row in a]
    totals = [sum(col) for col in zip(*ints[:3])]
    assert (tasks.unpack(spec, totals, 3) == v[:3].sum(axis=0)).all()
    one = tasks.VectorSumSpec(40, 7, 1, 1024)                 # w = 3: numpy only
    with pytest.raises(tasks.VectorSumError, match="numpy"):
        tasks.pack(one, np.zeros((1, 40), int), "kernel")
    assert (tasks.unpack(one, [int.from_bytes(tasks.pack(one, np.full((1, 40), 7)).numpy()[0, 0],
                                              "big")], 1) == 7).all()


def test_overflow_guards(key1024):
    pk, sk = key1024
    v = np.random.default_rng(6).integers(0, 21, (4, 10))
    v[2, 7] = 21
    with pytest.raises(tasks.VectorSumError, match="user 2 has 21 at index 7"):
        tp.he.vector_sum(v, 20, sk)
    with pytest.raises(tasks.VectorSumError, match="outside"):
        tp.he.vector_sum(-np.ones((2, 10), int), 20, sk)
    with pytest.raises(tasks.VectorSumError, match="max_users"):
        tp.he.vector_sum(np.ones((5, 10), int), 20, sk, max_users=4)
    with pytest.raises(TypeError, match="integers"):
        tp.he.vector_sum(np.ones((2, 10)) * 0.5, 20, sk)
    spec = tasks.VectorSumSpec(10, 20, 2, 1024)
    server = tasks.VectorSumServer(pk, spec)
    server.receive(tasks.encrypt_users(pk, spec, np.full((2, 10), 20)))
    with pytest.raises(tasks.VectorSumError, match="exceed max_users"):
        server.receive(tasks.encrypt_users(pk, spec, np.ones((1, 10), int)))
    # Three full users summed behind the server's back overflow a slot: detected.
    w = spec.slot_bits
    bad_total = 3 * sum(20 << (w * i) for i in range(10))
    with pytest.raises(tasks.VectorSumError, match="exceeds"):
        tasks.unpack(spec, [bad_total], 2)
    blob, count = server.total()
    assert count == 2 and (tasks.decrypt_total(sk, spec, blob, count) == 40).all()
    with pytest.raises(tasks.VectorSumError, match="max_users"):
        tasks.decrypt_total(sk, spec, blob, 3)


def test_server_handles_only_ciphertexts(key1024, other1024):
    pk, sk = key1024
    spec = tasks.VectorSumSpec(20, 20, 100, 1024)
    with pytest.raises(TypeError, match="PUBLIC key"):
        tasks.VectorSumServer(sk, spec)
    with pytest.raises(TypeError, match="PUBLIC key"):
        tasks.encrypt_users(sk, spec, np.ones((1, 20), int))
    uploads = tasks.encrypt_users(pk, spec, np.arange(40).reshape(2, 20) % 21)
    assert all(isinstance(u, bytes) for u in uploads)
    # What the server gets is exactly paillier_io's format: valid ciphertexts of pk.
    for u in uploads:
        enc = io.deserialize(u, pk)
        assert enc.shape == [1] and P.validate(pk, enc).numpy().all()
    server = tasks.VectorSumServer(pk, spec, fan_in=2)
    server.receive(uploads)
    corrupted = bytearray(uploads[0])
    corrupted[40] ^= 1
    with pytest.raises(P.CorruptCiphertextError):
        server.receive([bytes(corrupted)])              # checked on receipt
    assert server.count == 2                             # nothing of a bad batch counted
    foreign = tasks.encrypt_users(other1024[0], spec, np.ones((1, 20), int))
    server2 = tasks.VectorSumServer(pk, spec, fan_in=2)
    with pytest.raises(P.KeyMismatchError):
        server2.receive(foreign + foreign)
    server3 = tasks.VectorSumServer(pk, spec)
    server3.receive(uploads)
    blob, count = server3.total()
    assert count == 2 and isinstance(blob, bytes)
    assert (tasks.decrypt_total(sk, spec, blob, count) == (np.arange(40).reshape(2, 20) % 21)
            .sum(axis=0)).all()


def test_serialize_rows_matches_paillier_io(key1024):
    pk, _ = key1024
    enc = P.encrypt(pk, tf.reshape(tf.range(6, dtype=tf.int64), [3, 2]))
    rows = vs_proto.serialize_rows(enc)
    assert rows == [io.serialize(enc[i]) for i in range(3)]
    back = vs_proto.deserialize_rows(rows, pk, 2)
    assert (back.ciphertext.numpy() == enc.ciphertext.numpy()).all()


def test_pipeline_bounded_and_errors_surface():
    made = []

    def producer():
        for i in range(100):
            made.append(i)
            yield i
        raise RuntimeError("bob failed")

    it = sp_proto.pipelined(producer(), depth=2)
    assert next(it) == 0
    import time as _t
    _t.sleep(0.3)
    assert len(made) <= 4                       # at most depth items ahead (+1 in hand)
    it.close()                                  # consumer stops early: no hang
    with pytest.raises(RuntimeError, match="bob failed"):
        list(sp_proto.pipelined(producer()))
