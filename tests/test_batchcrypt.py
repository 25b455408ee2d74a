"""BatchCrypt's codec (protocols/he/batchcrypt.py, ops/batchcrypt): packing,
exact decoding of sums for any number of clients, overflow reporting,
stochastic rounding and the layer-wise API.

Sums of packed plaintexts are computed as Python ints: that is exactly what
decrypting the product of their Paillier ciphertexts gives (the codec keeps
sums below n). One test runs real Paillier (phe) end to end.
"""
import math
import os
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from tf_privpy.he import batchcrypt as bc
from tf_privpy.protocols.he import kernels

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BITS = (8, 16, 32)


# ----------------------------------------------------- python references
def ref_pack(q, w, k, nbytes):
    """P_j = (sum_i q[j k + i] 2^(w i)) mod 2^(k w), big-endian bytes."""
    q = [int(v) for v in np.asarray(q).reshape(-1)]
    out = []
    for j in range(0, len(q), k):
        p = sum(v << (w * i) for i, v in enumerate(q[j:j + k])) % (1 << (k * w))
        out.append(p.to_bytes(nbytes, "big"))
    return out


def ref_unpack(sums, w, k, count, bound):
    """The specified decoder, on Python ints: d = T mod 2^w read as signed,
    T = (T - d) / 2^w; |d| > bound is an overflow (value 0, counted); a
    nonzero padding slot (past count) is counted by its sign."""
    values, mask, pos, neg = [], [], 0, 0
    for j, t in enumerate(sums):
        t %= 1 << (k * w)
        for i in range(k):
            d = t & ((1 << w) - 1)
            if d >= 1 << (w - 1):
                d -= 1 << w
            t = (t - d) >> w
            limit = bound if j * k + i < count else 0
            pos += d > limit
            neg += d < -limit
            if j * k + i < count:
                over = abs(d) > bound
                values.append(0 if over else d)
                mask.append(over)
    return values, mask, pos, neg


def int_sum(batches):
    """Elementwise integer sums of plaintext vectors (what Paillier decrypts)."""
    return [sum(int.from_bytes(bytes(p), "big") for p in col)
            for col in zip(*[np.asarray(b) for b in batches])]


# ------------------------------------- BatchCrypt's released decoder (model)
def released_encode(q, bit_width, pad_zero, batch_size):
    """Model of BatchCrypt's release (marcoszh/BatchCrypt,
    FATE_plugin/federatedml/secureprotol/batch_encryption.py,
    encrypt_matrix_batch without the encryption): values in
    [-(2^(bit_width-1) - 1), 2^(bit_width-1) - 1], negatives written as
    2^(bit_width+1) + v (true_to_two_comp_), slots of bit_width + pad_zero
    bits, the first value most significant."""
    q = [int(v) for v in q]
    q += [0] * (-len(q) % batch_size)
    q = [v if v >= 0 else (1 << (bit_width + 1)) + v for v in q]
    out = []
    for j in range(0, len(q), batch_size):
        p = 0
        for v in q[j:j + batch_size]:
            p = p * (1 << (bit_width + pad_zero)) + v
        out.append(p)
    return out


def released_two_comp_to_true(two_comp, bit_width, pad_zero):
    """two_comp_to_true_ of the release, verbatim in logic."""
    sign = two_comp >> (bit_width - 1)
    literal = two_comp & (2 ** (bit_width - 1) - 1)
    if sign in (0, 4):                      # positive value (0000, 0100)
        return literal
    if sign == 1:                           # positive overflow: clamped
        return 2 ** (bit_width - 1) - 1
    if sign in (3, 7):                      # negative value (0011, 0111)
        return -(2 ** (bit_width - 1) - literal)
    return -(2 ** (bit_width - 1) - 1)      # negative or "unrecognized" overflow


def released_decode(sums, bit_width, pad_zero, batch_size, count):
    """restore_shape of the release: each slot on its own (mask and shift)."""
    w = bit_width + pad_zero
    out = []
    for t in sums:
        slots = [released_two_comp_to_true((t >> (w * i)) & ((1 << w) - 1), bit_width, pad_zero)
                 for i in range(batch_size)]
        out.extend(reversed(slots))
    return out[:count]


def released_wrong_slots(q, m, r):
    """Slots the released decoder gets wrong for clients' values q [m, n]
    (its bit_width = r - 1 gives the same qmax, pad_zero = ceil(log2 m) + 1
    the same slot width as ours)."""
    codec = bc.BatchCryptCodec(r, m, 2048)
    bw, pz, k = r - 1, codec.pad_bits + 1, codec.slots_per_plaintext
    sums = [sum(col) for col in zip(*[released_encode(c, bw, pz, k) for c in q])]
    got = np.array(released_decode(sums, bw, pz, k, q.shape[1]))
    return int((got != q.sum(axis=0)).sum())


# -------------------------------------------------------------- helpers
def client_values(rng, m, n, qmax):
    """[m, n] slot values in [-qmax, qmax] with extremes: uniform, all +qmax,
    all -qmax, alternating signs, and draws from {0, +-1, +-qmax}."""
    q = rng.integers(-qmax, qmax + 1, size=(m, n))
    kind = rng.integers(0, 5, size=n)
    q[:, kind == 1] = qmax
    q[:, kind == 2] = -qmax
    alt = np.where(np.arange(m)[:, None] % 2 == 0, qmax, -qmax)
    q[:, kind == 3] = np.broadcast_to(alt, (m, n))[:, kind == 3]
    pick = np.array([0, 1, -1, qmax, -qmax])
    q[:, kind == 4] = pick[rng.integers(0, 5, size=(m, int((kind == 4).sum())))]
    return q


def decode_ints(codec, sums, n_summands, count):
    return codec.unpack_sum([int(t) for t in sums], n_summands, count)


# ------------------------------------------------------------ properties
@pytest.mark.parametrize("r", BITS)
@pytest.mark.parametrize("m", range(2, 65))
def test_sum_of_m_plaintexts_decodes_exactly(m, r):
    """m clients' random slot values with extremes (+-qmax in every client,
    alternating signs): the integer sum of their packed plaintexts decodes
    to the exact slot sums, with m, 1 and m/2 summands, and no overflow; the
    released BatchCrypt decoder gets some of the same kind of sums wrong."""
    rng = np.random.default_rng(1000 * r + m)
    codec = bc.BatchCryptCodec(r, m, 2048)
    k = codec.slots_per_plaintext
    count = 2 * k + k // 2 + 1                      # a partial last plaintext
    q = client_values(rng, m, count, codec.qmax)
    packed = [codec.pack(c) for c in q]
    if m % 8 == 2:                                  # kernel bytes = reference bytes
        assert list(packed[0].numpy()) == ref_pack(q[0], codec.slot_bits, k,
                                                   codec.plaintext_bytes)
    for n in (m, 1, max(1, m // 2)):                # fewer summands than m too
        res = codec.unpack_sum(bc.sum_plaintexts(packed[:n], codec.plaintext_bytes), n, count)
        np.testing.assert_array_equal(res.values, q[:n].sum(axis=0))
        assert res.positive_overflows == res.negative_overflows == 0
        assert not res.overflow_mask.any()
    if m >= 3:  # BatchCrypt's released decoder on the same clients (advance-scaled values)
        v = max(1, codec.qmax // m)
        assert released_wrong_slots(rng.integers(-v, v + 1, size=(m, count)), m, r) > 0


def test_released_decoder_model_is_right_for_two_clients_only():
    """The model reproduces the release's one working case, m = 2 with
    advance scaling (|sum| <= qmax), and fails for m >= 3 in every slot where
    two or more summands are negative and the sum is not negative, or three
    or more are (measured: 18 % of slots at m = 3, 50 % at m = 4, 97 % at
    m = 9, BatchCrypt's own setting), while our decoder is exact on the same
    values."""
    rng = np.random.default_rng(7)
    for r in BITS:
        qmax = (1 << (r - 2)) - 1
        q = rng.integers(-(qmax // 2), qmax // 2 + 1, size=(2, 500))
        assert released_wrong_slots(q, 2, r) == 0
        for m in (3, 4, 9, 16, 64):
            v = max(1, qmax // m)
            q = rng.integers(-v, v + 1, size=(m, 500))
            assert released_wrong_slots(q, m, r) > 50       # of 500
            codec = bc.BatchCryptCodec(r, m, 2048)
            res = decode_ints(codec, int_sum([codec.pack(c) for c in q]), m, 500)
            np.testing.assert_array_equal(res.values, q.sum(axis=0))


def test_decoding_without_borrow_is_wrong_even_for_one_client():
    """Reading each w-bit field of our plaintexts on its own (no borrow) is
    off by one in every slot above a negative lower part."""
    codec = bc.BatchCryptCodec(16, 4, 2048)
    w, k = codec.slot_bits, codec.slots_per_plaintext
    q = np.array([-5, 3, 0, -1, 7] + [0] * (k - 5))
    t = int.from_bytes(codec.pack(q).numpy()[0], "big")
    fields = [(t >> (w * i)) & ((1 << w) - 1) for i in range(5)]
    naive = [f - (1 << w) if f >= 1 << (w - 1) else f for f in fields]
    assert naive == [-5, 2, 0, -1, 6]
    assert list(decode_ints(codec, [t], 1, k).values[:5]) == [-5, 3, 0, -1, 7]


@pytest.mark.parametrize("r", BITS)
@pytest.mark.parametrize("m", [1, 2, 3, 5, 9, 16, 33, 64])
def test_more_summands_than_m_are_counted_by_sign(m, r):
    """N > m summands: sums beyond +-m qmax are flagged positive/negative;
    every value returned is the exact sum."""
    rng = np.random.default_rng(m * r)
    codec = bc.BatchCryptCodec(r, m, 1024)   # (2048 bits leave r = 32, m = 2 no slack)
    n_sum = codec.max_summands
    assert n_sum > m
    count = 3 * codec.slots_per_plaintext
    q = client_values(rng, n_sum, count, codec.qmax)
    s = q.sum(axis=0)
    res = decode_ints(codec, int_sum([codec.pack(c) for c in q]), n_sum, count)
    over = np.abs(s) > codec.bound
    assert over.any()
    np.testing.assert_array_equal(res.overflow_mask, over)
    np.testing.assert_array_equal(res.values, np.where(over, 0, s))
    assert res.positive_overflows == int((s > codec.bound).sum())
    assert res.negative_overflows == int((s < -codec.bound).sum())


@pytest.mark.parametrize("r", BITS)
@pytest.mark.parametrize("m", [2, 3, 7, 16, 64])
def test_out_of_range_values_never_yield_a_wrong_sum(m, r):
    """Plaintexts with arbitrary slot values (beyond +-qmax, packed by the
    kernel directly): as long as slot sums stay inside the w-bit range, every
    value is either the exact sum or flagged with its sign."""
    rng = np.random.default_rng(m + 100 * r)
    codec = bc.BatchCryptCodec(r, m, 2048)
    w, k, count = codec.slot_bits, codec.slots_per_plaintext, 2 * codec.slots_per_plaintext
    lim = ((1 << (w - 1)) - 1) // m
    q = rng.integers(-lim, lim + 1, size=(m, count))
    q[:, :20] = rng.integers(-codec.qmax, codec.qmax + 1, size=(m, 20))   # legal
    q[0, 20:30] = codec.qmax + 1                                       # just beyond
    pts = [kernels.batchcrypt_pack(c, w, k, codec.plaintext_bytes) for c in q]
    s = q.sum(axis=0)
    res = decode_ints(codec, int_sum(pts), m, count)
    over = np.abs(s) > codec.bound
    np.testing.assert_array_equal(res.overflow_mask, over)
    np.testing.assert_array_equal(res.values, np.where(over, 0, s))
    assert (res.positive_overflows, res.negative_overflows) == (int((s > codec.bound).sum()),
                                                                int((s < -codec.bound).sum()))


def test_single_excess_value_is_flagged():
    codec = bc.BatchCryptCodec(16, 3, 1024)
    w, k, qm = codec.slot_bits, codec.slots_per_plaintext, codec.qmax
    a = np.zeros(k, np.int64)
    b = np.zeros(k, np.int64)
    # Two summands: bound 2 qm. Slot 3: 2 qm + 1 - 1 (a value beyond qmax,
    # but a legal sum: returned exactly); slot 4: beyond; slot 5: at the bound.
    a[[3, 4, 5]] = [2 * qm + 1, -2 * qm - 1, 2 * qm]
    b[3] = -1
    pts = [kernels.batchcrypt_pack(x, w, k, codec.plaintext_bytes) for x in (a, b)]
    res = decode_ints(codec, int_sum(pts), 2, k)
    assert (res.positive_overflows, res.negative_overflows) == (0, 1)
    assert list(np.flatnonzero(res.overflow_mask)) == [4]
    assert res.values[3] == 2 * qm and res.values[5] == 2 * qm
    res = decode_ints(codec, int_sum(pts[:1]), 1, k)        # bound qm for one summand
    assert (res.positive_overflows, res.negative_overflows) == (2, 1)


# -------------------------------------------------- kernels vs reference
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pack_kernel_matches_reference(dtype):
    rng = np.random.default_rng(3)
    for _ in range(150):
        w = int(rng.integers(2, 63 if dtype == np.int64 else 33))
        k = int(rng.integers(1, 70))
        nbytes = -(-k * w // 8) + int(rng.integers(0, 4))
        n = int(rng.integers(0, 4 * k))
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        q = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)
        q[rng.random(n) < 0.2] = lo
        q[rng.random(n) < 0.2] = hi
        q = q.astype(dtype)
        got = kernels.batchcrypt_pack(q.reshape(-1, 1) if n % 2 else q, w, k, nbytes)
        assert got.shape == [-(-n // k)]
        assert list(got.numpy()) == ref_pack(q, w, k, nbytes)


def test_unpack_kernel_matches_reference_on_arbitrary_integers():
    """Arbitrary big integers (random bits, any length, shorter or longer than
    the plaintext width), arbitrary bounds: values, mask and counts agree."""
    rng = np.random.default_rng(4)
    for _ in range(150):
        w = int(rng.integers(2, 63))
        k = int(rng.integers(1, 60))
        count = int(rng.integers(0, 3 * k + 1))
        nct = -(-count // k)
        bound = int(rng.integers(0, 1 << (w - 1)))
        lens = rng.integers(0, -(-k * w // 8) + 6, size=nct)
        raw = [bytes(rng.integers(0, 256, size=int(n), dtype=np.uint8)) for n in lens]
        v, p, n, mask = kernels.batchcrypt_unpack(tf.constant(raw, tf.string, [nct]), w, k,
                                                  count, bound)
        rv, rm, rp, rn = ref_unpack([int.from_bytes(b, "big") for b in raw], w, k, count, bound)
        assert list(v.numpy()) == rv and list(mask.numpy()) == rm
        assert (int(p), int(n)) == (rp, rn)


def test_kernels_in_tf_function_and_shapes():
    @tf.function
    def round_trip(q):
        pts = kernels.batchcrypt_pack(q, 20, 102, 256)
        return pts, kernels.batchcrypt_unpack(pts, 20, 102, 250, 9 * 16383)

    q = tf.constant(np.arange(-125, 125, dtype=np.int32).reshape(10, 25))
    pts, (v, p, n, mask) = round_trip(q)
    assert pts.shape == [3] and all(len(b) == 256 for b in pts.numpy())
    np.testing.assert_array_equal(v.numpy(), np.arange(-125, 125))
    assert int(p) == int(n) == 0 and not mask.numpy().any()
    empty = kernels.batchcrypt_pack(np.zeros([0], np.int32), 20, 102, 256)
    assert empty.shape == [0]
    assert kernels.batchcrypt_unpack(empty, 20, 102, 0, 1)[0].shape == [0]


def test_kernel_errors():
    err = tf.errors.InvalidArgumentError
    with pytest.raises(err, match="does not fit a signed 4-bit slot"):
        kernels.batchcrypt_pack(np.array([1, 8], np.int32), 4, 3, 2)
    with pytest.raises(err, match="at flat index 2"):
        kernels.batchcrypt_pack(np.array([1, -8, -9], np.int64), 4, 3, 2)
    with pytest.raises(err, match="do not fit"):
        kernels.batchcrypt_pack(np.array([1], np.int32), 20, 103, 256)
    with pytest.raises(err, match="slot_bits"):
        kernels.batchcrypt_pack(np.array([1], np.int64), 63, 1, 8)
    with pytest.raises((err, ValueError), match="slots_per_plaintext"):
        kernels.batchcrypt_pack(np.array([1], np.int32), 8, 0, 8)
    with pytest.raises((err, ValueError)):
        kernels.batchcrypt_unpack(tf.constant([b"\x01"] * 2), 8, 4, 9, 10)
    with pytest.raises(err, match="bound"):
        kernels.batchcrypt_unpack(tf.constant([b"\x01"]), 8, 4, 3, 128)
    with pytest.raises((err, ValueError)):
        kernels.batchcrypt_unpack(tf.constant([[b"\x01"]]), 8, 4, 3, 10)


def test_standalone_cc_test():
    # built once into build/cc-tests/batchcrypt (`make cc-tests`); make rebuilds on change
    out = os.path.join(ROOT, "build", "cc-tests", "batchcrypt")
    r = subprocess.run(["make", "-s", "-f", "ops/batchcrypt/Makefile.standalone", "test",
                        f"OUT={out}"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), r.stdout


# -------------------------------------------------- stochastic rounding
def test_stochastic_rounding_is_unbiased():
    """q = floor(y) + Bernoulli(frac(y)): each draw has variance p (1 - p),
    so the mean of N draws deviates from y by at most 5 sqrt(p (1-p) / N)
    except with probability 6e-7 (normal tail; N = 2e5 makes the CLT exact
    enough). Checked per fractional position, and over Gaussian data."""
    r, alpha, n = 16, 1.0, 200_000
    qmax = (1 << (r - 2)) - 1
    rng = np.random.default_rng(11)
    for y in (10.1, 10.5, -3.9, 0.3, -0.75, qmax - 0.01):
        q = bc.quantize(np.full(n, y * alpha / qmax), alpha, r, rng)
        p = y - math.floor(y)
        assert set(np.unique(q)) <= {math.floor(y), math.floor(y) + 1}
        assert abs(q.mean() - y) < 5 * math.sqrt(p * (1 - p) / n) + 1e-9, y
    x = rng.normal(0, 1, n)
    q = bc.quantize(x, 3.0, 8, rng)
    err = q * (3.0 / 63) - np.clip(x, -3.0, 3.0)            # per-value rounding error
    assert abs(err.mean()) < 5 * (3.0 / 63) / 2 / math.sqrt(n)
    # Round-to-nearest would be biased on this input; stochastic rounding is not.
    assert abs(bc.quantize(np.full(n, 0.3 / 63), 1.0, 8, rng).mean() - 0.3) < 0.01


def test_quantize_range_and_randomness():
    for r in BITS:
        qmax = (1 << (r - 2)) - 1
        x = np.array([-1e30, -2.0, -1.0, -np.nextafter(1.0, 0), 0.0, np.nextafter(1.0, 0), 1.0,
                      2.0, 1e30])
        q = bc.quantize(x, 1.0, r)
        assert q.dtype == np.int32 and q.min() == -qmax and q.max() == qmax
        assert q[4] == 0 and q[6] == qmax and q[2] == -qmax
    x = np.random.default_rng(0).normal(size=2000)
    assert not np.array_equal(bc.quantize(x, 2.0, 8), bc.quantize(x, 2.0, 8))   # not seeded
    np.testing.assert_array_equal(bc.quantize(x, 2.0, 8, 5), bc.quantize(x, 2.0, 8, 5))
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    np.testing.assert_array_equal(bc.quantize(x, 2.0, 8, g1), bc.quantize(x, 2.0, 8, g2))
    assert bc.quantize(x.astype(np.float32).reshape(40, 50), 2.0, 16).shape == (40, 50)


# ------------------------------------------------------------- capacity
def test_capacity_figures():
    codec = bc.BatchCryptCodec(r=16, m=16, key_bits=2048)
    assert (codec.qmax, codec.pad_bits, codec.slot_bits) == (16383, 4, 20)
    assert (codec.slots_per_plaintext, codec.plaintext_bytes) == (102, 256)
    assert codec.bytes_per_value == pytest.approx(512 / 102) and codec.bytes_per_value <= 5.2
    for m in range(1, 17):
        c = bc.BatchCryptCodec(16, m, 2048)
        assert c.bytes_per_value <= 5.2
        # the sum of 2^p plaintexts stays below 2^(key_bits - 1) <= n
        assert (1 << c.pad_bits) * (1 << c.plaintext_bits) <= 1 << (c.key_bits - 1)
        assert c.max_summands >= 2 * (1 << c.pad_bits) > m
    # r = 32, m = 2: k = 62 slots fill 2046 of 2047 bits, so a sum of 3
    # plaintexts could exceed n: only 2 summands are decodable.
    assert bc.BatchCryptCodec(32, 2, 2048).max_summands == 2
    c9 = bc.BatchCryptCodec(16, 9, 2048)
    assert (c9.slot_bits, c9.slots_per_plaintext, c9.max_summands) == (20, 102, 32)
    assert bc.BatchCryptCodec(32, 64, 2048).slot_bits == 38
    assert bc.BatchCryptCodec(8, 1, 2048).slots_per_plaintext == 255
    assert bc.BatchCryptCodec(16, 2, 19).slots_per_plaintext == 1      # smallest key
    assert bc.BatchCryptCodec(32, 2 ** 30, 4096).slot_bits == 62
    assert bc.BatchCryptCodec(*np.array([16, 16, 2048])).slots_per_plaintext == 102


# ------------------------------------------------------ layer-wise API
def simulate_round(codec, updates, rng):
    stats = bc.merge_stats([bc.layer_stats(u) for u in updates])
    alphas = codec.alphas(stats)
    encoded = [codec.encode(u, alphas, rng=rng) for u in updates]
    assert all(lay == encoded[0][1] for _, lay in encoded)
    total = bc.sum_plaintexts([p for p, _ in encoded], codec.plaintext_bytes)
    return total, encoded[0][1], alphas


def test_encode_decode_round_mean_and_sum():
    rng = np.random.default_rng(21)
    m = 5
    shapes = [(30, 20), (20,), (4, 3, 3, 2), (1,)]
    scales = [0.01, 0.5, 3.0, 1.0]
    updates = [[rng.normal(0.1 * s, s, sh).astype(np.float32) for sh, s in zip(shapes, scales)]
               for _ in range(m)]
    for u in updates:
        u[1] = u[1].astype(np.float64)
    codec = bc.BatchCryptCodec(16, m, 1024)
    total, layout, alphas = simulate_round(codec, updates, rng)
    assert layout.shapes == tuple(shapes) and layout.count == 600 + 20 + 72 + 1
    assert total.shape == [codec.num_plaintexts(layout.count)]
    mean = codec.decode(total, layout, m)
    tot = codec.decode(total, layout, m, reduce="sum")
    for i, (a, sh) in enumerate(zip(alphas, shapes)):
        clipped = np.mean([np.clip(u[i].astype(np.float64), -a, a) for u in updates], axis=0)
        step = a / codec.qmax
        assert mean[i].shape == sh and mean[i].dtype == updates[0][i].dtype
        # each client's stochastic rounding error is below one step
        assert np.abs(mean[i] - clipped).max() < step * (1 + 1e-3)
        np.testing.assert_allclose(tot[i], mean[i] * m, rtol=1e-6, atol=1e-6 * a)
    # decode_sum: the same result from one unpacking whose counts the caller reads
    res = codec.unpack_sum(total, m, layout.count)
    assert res.positive_overflows == res.negative_overflows == 0
    for a, b in zip(codec.decode_sum(res, layout, m), mean):
        np.testing.assert_array_equal(a, b)


def test_decode_overflow_raise_and_nan():
    rng = np.random.default_rng(5)
    m = 3
    codec = bc.BatchCryptCodec(8, m, 512)
    updates = [[np.full((4, 5), 10.0), rng.normal(size=7)] for _ in range(2 * m)]
    updates[0][1][2] = -50.0
    total, layout, alphas = simulate_round(codec, updates, rng)
    assert alphas[0] == 10.0
    with pytest.raises(bc.BatchCryptOverflowError) as e:
        codec.decode(total, layout, 2 * m)
    err = e.value
    assert isinstance(err, OverflowError) and err.positive == 20 and err.negative == 0
    assert "20 positive and 0 negative" in str(err) and "m >= 6" in str(err)
    assert err.per_layer == [("layer 0", 20), ("layer 1", 0)]
    out = codec.decode(total, layout, 2 * m, on_overflow="nan")
    assert np.isnan(out[0]).all() and not np.isnan(out[1]).any()


def test_decode_rejects_mismatched_plaintexts():
    codec = bc.BatchCryptCodec(16, 4, 1024)
    layout = codec.encode([np.ones(10)], [1.0], rng=0)[1]
    garbage = [(1 << 1000) + 12345]                 # nonzero padding slots
    with pytest.raises(bc.BatchCryptOverflowError, match="padding"):
        codec.decode(garbage, layout, 2, on_overflow="nan")
    res = codec.unpack_sum(garbage, 2, 10)
    assert res.positive_overflows + res.negative_overflows > res.overflow_mask.sum()
    with pytest.raises(ValueError, match="take 1 plaintexts"):
        codec.unpack_sum(garbage * 2, 2, 10)
    with pytest.raises(ValueError, match="exceed what this codec decodes"):
        codec.unpack_sum(garbage, codec.max_summands + 1, 10)


def test_real_paillier_sum_decodes():
    """phe (python-paillier) raw encryption of our plaintexts: the product of
    ciphertexts decrypts to the plaintext sum, which decodes exactly."""
    phe = pytest.importorskip("phe")
    pub, priv = phe.paillier.generate_paillier_keypair(n_length=1024)
    assert pub.n.bit_length() == 1024
    m, rng = 3, np.random.default_rng(8)
    codec = bc.BatchCryptCodec(16, m, 1024)
    count = codec.slots_per_plaintext + 5
    q = client_values(rng, m, count, codec.qmax)
    cts = [[pub.raw_encrypt(int.from_bytes(p, "big")) for p in codec.pack(c).numpy()] for c in q]
    summed = [math.prod(col) % pub.nsquare for col in zip(*cts)]
    plain = [priv.raw_decrypt(c).to_bytes(codec.plaintext_bytes, "big") for c in summed]
    res = codec.unpack_sum(tf.constant(plain), m, count)
    np.testing.assert_array_equal(res.values, q.sum(axis=0))


def test_bad_inputs():
    codec = bc.BatchCryptCodec(16, 4, 2048)
    bad = [np.zeros(3), np.array([1.0, np.nan, np.inf])]
    with pytest.raises(ValueError, match="'?grad/b'? has 1 NaN and 1 infinite"):
        bc.layer_stats(bad, names=["grad/w", "grad/b"])
    gen = np.random.default_rng(1)
    before = gen.bit_generator.state
    with pytest.raises(ValueError, match="layer 1 has 1 NaN.*Nothing was encoded"):
        codec.encode(bad, [1.0, 1.0], rng=gen)
    assert gen.bit_generator.state == before          # nothing was quantized
    for r in (2, 33, 16.0, True, None):
        with pytest.raises(ValueError, match="quantization width r"):
            bc.BatchCryptCodec(r, 4, 2048)
    for m in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="number of clients m"):
            bc.BatchCryptCodec(16, m, 2048)
    with pytest.raises(ValueError, match="too small for one 20-bit slot"):
        bc.BatchCryptCodec(16, 16, 24)
    with pytest.raises(ValueError, match="2\\^30"):
        bc.BatchCryptCodec(8, 2 ** 30 + 1, 2048)
    for a in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="clipping threshold"):
            codec.encode([np.zeros(3)], [a])
    with pytest.raises(ValueError, match="2 thresholds for 1 layers"):
        codec.encode([np.zeros(3)], [1.0, 1.0])
    with pytest.raises(ValueError, match="must lie in"):
        codec.pack(np.array([codec.qmax + 1]))
    with pytest.raises(TypeError):
        codec.pack(np.array([0.5]))
    with pytest.raises(ValueError, match="x has 1 NaN"):
        bc.quantize([np.nan], 1.0, 8)
    with pytest.raises(TypeError, match="rng"):
        bc.quantize([0.0], 1.0, 8, rng="seed")
    layout = codec.encode([np.zeros(3)], [1.0], rng=0)[1]
    pts = codec.encode([np.zeros(3)], [1.0], rng=0)[0]
    with pytest.raises(ValueError, match="reduce"):
        codec.decode(pts, layout, 1, reduce="max")
    with pytest.raises(ValueError, match="on_overflow"):
        codec.decode(pts, layout, 1, on_overflow="ignore")
    for n in (0, -2, 1.5):
        with pytest.raises(ValueError, match="num_summands"):
            codec.decode(pts, layout, n)
    with pytest.raises(ValueError, match="different numbers of layers"):
        bc.merge_stats([bc.layer_stats([np.ones(2)]), bc.layer_stats([np.ones(2)] * 2)])


def test_codec_throughput_is_negligible_next_to_paillier():
    """10^6 values, r = 16, m = 9, 2048-bit plaintexts: pack and unpack well
    below 1 us per value (Paillier encryption costs ~20 us per value even
    batched). A loose bound: the machine is shared; the figures are in the
    report of benchmarks/batchcrypt_codec.py."""
    codec = bc.BatchCryptCodec(16, 9, 2048)
    q = np.random.default_rng(0).integers(-codec.qmax, codec.qmax + 1, 10 ** 6).astype(np.int32)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        pts = codec.pack(q)
        res = codec.unpack_sum(pts, 1, q.size)
        best = min(best, time.perf_counter() - t0)
    np.testing.assert_array_equal(res.values, q)
    assert best / q.size < 1e-6
