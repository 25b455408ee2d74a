"""Each kernel against a plain reference (python ints, numpy, or an
independent AES implementation)."""
import os

import numpy as np
import pytest
import tensorflow as tf
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tf_privpy.protocols.mpc.runtime import kernels as K

import portable_aes

RINGS = [64, 128]


def to_storage(vals, bits, shape):
    """python ints (mod 2^bits) -> int64 share tensor."""
    vals = [v % (1 << bits) for v in vals]
    if bits == 64:
        arr = np.array([v - (1 << 64) if v >= 1 << 63 else v for v in vals], np.int64)
        return tf.constant(arr.reshape(shape))
    lo = [v & ((1 << 64) - 1) for v in vals]
    hi = [v >> 64 for v in vals]
    to_i = lambda u: u - (1 << 64) if u >= 1 << 63 else u  # noqa: E731
    arr = np.array([[to_i(a), to_i(b)] for a, b in zip(lo, hi)], np.int64)
    return tf.constant(arr.reshape(list(shape) + [2]))


def from_storage(t, bits):
    a = t.numpy()
    if bits == 64:
        return [int(v) % (1 << 64) for v in a.reshape(-1)]
    a = a.reshape(-1, 2)
    return [(int(lo) % (1 << 64)) | ((int(hi) % (1 << 64)) << 64) for lo, hi in a]


def rand_ring(rng, n, bits):
    return [int.from_bytes(rng.bytes(bits // 8), "little") for _ in range(n)]


def signed(v, bits):
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


@pytest.mark.parametrize("bits", RINGS)
def test_add_sub_neg(bits):
    rng = np.random.default_rng(0)
    a, b = rand_ring(rng, 50, bits), rand_ring(rng, 50, bits)
    ta, tb = to_storage(a, bits, [5, 10]), to_storage(b, bits, [5, 10])
    m = 1 << bits
    assert from_storage(K.ring_add(ta, tb, bits), bits) == [(x + y) % m for x, y in zip(a, b)]
    assert from_storage(K.ring_sub(ta, tb, bits), bits) == [(x - y) % m for x, y in zip(a, b)]
    assert from_storage(K.ring_neg(ta, bits), bits) == [(-x) % m for x in a]


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("party", [0, 1])
def test_truncate(bits, party):
    rng = np.random.default_rng(1)
    a = rand_ring(rng, 64, bits) + [0, 1, (1 << bits) - 1, 1 << (bits - 1)]
    out = from_storage(K.ring_truncate(to_storage(a, bits, [len(a)]), bits, party, 20), bits)
    m = 1 << bits
    for v, o in zip(a, out):
        # party 0: arithmetic shift; party 1: -((-v) >> f)
        want = signed(v, bits) >> 20 if party == 0 else -(signed((-v) % m, bits) >> 20)
        assert o == want % m


@pytest.mark.parametrize("bits", RINGS)
def test_reduce_sum(bits):
    rng = np.random.default_rng(2)
    a = rand_ring(rng, 3 * 7, bits)
    out = from_storage(K.ring_reduce_sum(to_storage(a, bits, [3, 7]), bits), bits)
    assert out == [sum(a[i * 7:(i + 1) * 7]) % (1 << bits) for i in range(3)]


def ref_matmul(a, b, m, k, n, bits):
    return [sum(a[i * k + t] * b[t * n + j] for t in range(k)) % (1 << bits)
            for i in range(m) for j in range(n)]


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("mkn", [(1, 1, 1), (3, 5, 2), (17, 33, 9), (0, 4, 3), (4, 0, 3)])
def test_bilinear_matmul(bits, mkn):
    m, k, n = mkn
    rng = np.random.default_rng(3)
    a, b = rand_ring(rng, m * k, bits), rand_ring(rng, k * n, bits)
    out = K.ring_bilinear(to_storage(a, bits, [m, k]), to_storage(b, bits, [k, n]), bits,
                          "matmul")
    assert from_storage(out, bits) == ref_matmul(a, b, m, k, n, bits)


@pytest.mark.parametrize("bits", RINGS)
def test_bilinear_mul_and_batched_matmul(bits):
    rng = np.random.default_rng(4)
    a, b = rand_ring(rng, 24, bits), rand_ring(rng, 24, bits)
    out = K.ring_bilinear(to_storage(a, bits, [4, 6]), to_storage(b, bits, [4, 6]), bits, "mul")
    assert from_storage(out, bits) == [(x * y) % (1 << bits) for x, y in zip(a, b)]
    out = K.ring_bilinear(to_storage(a, bits, [2, 3, 4]), to_storage(b, bits, [2, 4, 3]), bits,
                          "matmul")
    want = ref_matmul(a[:12], b[:12], 3, 4, 3, bits) + ref_matmul(a[12:], b[12:], 3, 4, 3, bits)
    assert from_storage(out, bits) == want


@pytest.mark.parametrize("bits", RINGS)
def test_bilinear_conv2d(bits):
    rng = np.random.default_rng(5)
    # Small exact integers: compare with TF's float conv (exact below 2^53).
    x = rng.integers(-50, 50, (2, 5, 6, 3))
    w = rng.integers(-50, 50, (3, 2, 3, 4))
    for strides, pad, tfpad in [((1, 1), (0, 0, 0, 0), "VALID"),
                                ((2, 1), (1, 1, 0, 1), [[0, 0], [1, 1], [0, 1], [0, 0]])]:
        want = tf.nn.conv2d(x.astype(np.float64), w.astype(np.float64), strides, tfpad).numpy()
        out = K.ring_bilinear(to_storage(x.reshape(-1).tolist(), bits, x.shape),
                              to_storage(w.reshape(-1).tolist(), bits, w.shape), bits, "conv2d",
                              strides, pad)
        got = [signed(v, bits) for v in from_storage(out, bits)]
        assert got == want.reshape(-1).astype(np.int64).tolist()
    # pointwise (1x1) filters: stride 1 unpadded is one matrix product of the
    # image itself (no im2col copy), a batch of two included; strided is not
    w1 = rng.integers(-50, 50, (1, 1, 3, 4))
    for strides in [(1, 1), (2, 2)]:
        want = tf.nn.conv2d(x.astype(np.float64), w1.astype(np.float64), strides, "VALID").numpy()
        out = K.ring_bilinear(to_storage(x.reshape(-1).tolist(), bits, x.shape),
                              to_storage(w1.reshape(-1).tolist(), bits, w1.shape), bits,
                              "conv2d", strides, (0, 0, 0, 0))
        got = [signed(v, bits) for v in from_storage(out, bits)]
        assert got == want.reshape(-1).astype(np.int64).tolist()
    # big ring values: conv == matmul of im2col patches, against python ints
    xs = rand_ring(rng, 1 * 3 * 3 * 2, bits)
    ws = rand_ring(rng, 2 * 2 * 2 * 1, bits)
    out = from_storage(K.ring_bilinear(to_storage(xs, bits, [1, 3, 3, 2]),
                                       to_storage(ws, bits, [2, 2, 2, 1]), bits, "conv2d"), bits)
    want = []
    for oh in range(2):
        for ow in range(2):
            acc = 0
            for kh in range(2):
                for kw in range(2):
                    for c in range(2):
                        acc += xs[((oh + kh) * 3 + ow + kw) * 2 + c] * ws[(kh * 2 + kw) * 2 + c]
            want.append(acc % (1 << bits))
    assert out == want


@pytest.mark.parametrize("bits", RINGS)
def test_bilinear_truncates_per_party(bits):
    a = to_storage([3 << 20, (-5 << 20)], bits, [2])
    b = to_storage([2 << 20, 7 << 20], bits, [2])
    out = K.ring_bilinear(a, b, bits, "mul", truncate_party=0, frac_bits=20)
    assert [signed(v, bits) for v in from_storage(out, bits)] == [6 << 20, -35 << 20]


@pytest.mark.parametrize("bits", RINGS)
def test_encode_decode(bits):
    x = tf.constant([0.0, 1.5, -2.25, 1e-6, -1000.125], tf.float64)
    enc = K.ring_encode(x, bits, 16, 32768.0)
    assert [signed(v, bits) for v in from_storage(enc, bits)] == \
        [round(v * 2 ** 16) for v in x.numpy()]
    np.testing.assert_array_equal(K.ring_decode(enc, bits, 16).numpy(),
                                  np.round(x.numpy() * 2 ** 16) / 2 ** 16)
    ints = K.ring_encode(tf.constant([-3, 4], tf.int32), bits, 16, 32768.0)
    assert [signed(v, bits) for v in from_storage(ints, bits)] == [-3 << 16, 4 << 16]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 40000.0, -32768.0])
def test_encode_rejects(bad):
    with pytest.raises(tf.errors.InvalidArgumentError, match="'feat'.*32768"):
        K.ring_encode(tf.constant([1.0, bad]), 64, 16, 32768.0, tensor_name="feat")


def aes_ctr_ref(key: bytes, nonce: int, nbytes: int, offset: int = 0) -> bytes:
    iv = nonce.to_bytes(8, "big") + (0).to_bytes(8, "big")
    enc = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()
    return enc.update(b"\0" * (offset + nbytes))[offset:]


def key_bytes(k):
    return k.numpy().astype("<i8").tobytes()


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("n,offset", [(1, 0), (3, 1), (1000, 0), (70001, 5), (5, 70001)])
def test_prg_matches_aes_ctr(bits, n, offset):
    key = K.random_key()
    out = K.prg_ring(key, tf.constant(77, tf.int64), [n], bits, offset=offset)
    want = aes_ctr_ref(key_bytes(key), 77, n * bits // 8, offset * bits // 8)
    assert out.numpy().astype("<i8").tobytes() == want


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("n,block,shift", [(1, 0, 0), (3, 0, 1), (2049, 0, 7), (70001, 3, 5),
                                           (37, 2 ** 32, -5), (301, 2 ** 40, -1)])
def test_prg_vaes_matches_evp(bits, n, block, shift, monkeypatch):
    """PrgFill's VAES path and its EVP path (BoringSSL inside TF) agree, also
    across the 2^32 and 2^40 block-index carries (TF_PRIVPY_DISABLE_VAES is
    read per call)."""
    key = K.random_key()
    offset = block * 128 // bits + shift
    streams = []
    for disable in ("1", "0"):
        monkeypatch.setenv("TF_PRIVPY_DISABLE_VAES", disable)
        streams.append(K.prg_ring(key, tf.constant(-3, tf.int64), [n], bits,
                                  offset=offset).numpy())
    np.testing.assert_array_equal(streams[0], streams[1])


def test_random_key_is_fresh():
    keys = {key_bytes(K.random_key()) for _ in range(50)}
    assert len(keys) == 50


@pytest.mark.parametrize("mode", ["eager", "tf_function"])
def test_stream_next_many_advances_each_counter_once(mode):
    """StreamNextMany of N streams = N StreamNext: each key read, each
    counter taken and advanced by one, per call (fresh nonces per run)."""
    keys = [tf.Variable(tf.constant([3 * i + 1, -i], tf.int64)) for i in range(3)]
    counters = [tf.Variable(tf.constant(v, tf.int64)) for v in (0, 5, 2 ** 40)]
    take = lambda: K.stream_next_many(keys, counters)  # noqa: E731
    if mode == "tf_function":
        take = tf.function(take)
    for call in range(3):
        got = take()
        assert [k.numpy().tolist() for k, _ in got] == [[3 * i + 1, -i] for i in range(3)]
        assert [int(n) for _, n in got] == [v + call for v in (0, 5, 2 ** 40)]
    assert [int(c.numpy()) for c in counters] == [3, 8, 2 ** 40 + 3]


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("k,n", [(None, 1), (None, 130), (1, 64), (3, 65), (2, 200)])
def test_bw_select_matches_reference(bits, k, n):
    """BwSelect = v - w where bit i of own ^ received is set, else w
    (k operands [k, n], or one [n] for k None), against a plain reference."""
    rng = np.random.default_rng(n)
    blocks = (n + 63) // 64
    own = rng.integers(-2 ** 63, 2 ** 63, (blocks, 1), np.int64, endpoint=False)
    recv = rng.integers(-2 ** 63, 2 ** 63, (blocks, 1), np.int64, endpoint=False)
    rows = 1 if k is None else k
    shape = [n] if k is None else [k, n]
    v, w = rand_ring(rng, rows * n, bits), rand_ring(rng, rows * n, bits)
    got = from_storage(K.bw_select(tf.constant(own), tf.constant(recv), to_storage(v, bits, shape),
                                   to_storage(w, bits, shape), bits), bits)
    words = [(int(a) ^ int(b)) % (1 << 64) for a, b in zip(own[:, 0], recv[:, 0])]
    want = []
    for f in range(rows * n):
        i = f % n
        bit = (words[i // 64] >> (i % 64)) & 1
        want.append((v[f] - w[f]) % (1 << bits) if bit else w[f])
    assert got == want


class TakeOnceRef:
    """Plain reference of TakeOnce: the value while fresh, then used for good."""

    def __init__(self, value):
        self.fresh, self.value = True, value

    def take(self):
        if not self.fresh:
            raise LookupError("already taken")
        self.fresh = False
        return self.value


@pytest.mark.parametrize("mode", ["eager", "tf_function"])
@pytest.mark.parametrize("value", [0, 7, -1, 2 ** 63 - 1, -2 ** 63])
def test_take_once(mode, value):
    take = lambda f, v: K.take_once(f, v, "batch 3 was already used")  # noqa: E731
    if mode == "tf_function":
        take = tf.function(take)
    fresh, var = tf.Variable(True), tf.Variable(tf.constant(value, tf.int64))
    ref = TakeOnceRef(value)
    for _ in range(3):
        try:
            want = ref.take()
        except LookupError:
            with pytest.raises(tf.errors.InvalidArgumentError, match="batch 3 was already used"):
                take(fresh, var)
        else:
            assert int(take(fresh, var)) == want
        assert bool(fresh.numpy()) == ref.fresh and int(var.numpy()) == value


@pytest.mark.parametrize("fresh_init,value_init,error", [
    (True, tf.constant(1, tf.int32), r"value variable must hold an int64 scalar, got int32"),
    (True, tf.constant([1, 2], tf.int64), r"must hold an int64 scalar, got int64 \[2\]"),
    (tf.constant(1, tf.int64), tf.constant(1, tf.int64), r"fresh variable must hold a bool"),
    ([True], tf.constant(1, tf.int64), r"must hold a bool scalar, got bool \[1\]"),
])
def test_take_once_rejects(fresh_init, value_init, error):
    fresh, var = tf.Variable(fresh_init), tf.Variable(value_init)
    with pytest.raises(tf.errors.InvalidArgumentError, match=error):
        K.take_once(fresh, var, "used")
    # a failed take changes nothing (a malformed value does not burn the flag)
    assert fresh.numpy().tolist() == tf.constant(fresh_init).numpy().tolist()
    assert var.numpy().tolist() == value_init.numpy().tolist()


def test_take_once_needs_a_message():
    fresh = tf.Variable(True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="message must not be empty"):
        K.take_once(fresh, tf.Variable(tf.constant(1, tf.int64)), "")
    assert fresh.numpy()


def test_prg_portable_path_matches():
    """The VAES path (where the CPU has it), OpenSSL's EVP path and EVP's portable
    AES (AES-NI masked off) give the same stream. The first two run here
    (the variable is read per call); the masked one in the process
    tests/portable_aes.py shares with test_gc_kernels' portable test."""
    outs = [portable_aes.prg_hex_here("0"), portable_aes.prg_hex_here("1"),
            portable_aes.capped_outputs()["prg"]]
    assert outs[0] == outs[1] == outs[2] and len(outs[0]) == 4099 * 32
    want = aes_ctr_ref(np.array([123456789, -987654321], "<i8").tobytes(), 5, 4099 * 16)
    assert bytes.fromhex(outs[0]) == want


@pytest.mark.parametrize("bits", RINGS)
def test_share_split(bits):
    rng = np.random.default_rng(6)
    a = rand_ring(rng, 100, bits)
    t = to_storage(a, bits, [100])
    s0, s1 = K.share_split(t, bits)
    s0b, _ = K.share_split(t, bits)
    assert [(x + y) % (1 << bits) for x, y in zip(from_storage(s0, bits), from_storage(s1, bits))] == a
    assert from_storage(s0, bits) != from_storage(s0b, bits)  # fresh seed per call


MATMUL_SHAPES = {"matmul": ([4, 3], [3, 4]),          # general path
                 "matvec": ([40, 3], [3, 1]),         # skinny finish, N <= 2
                 "vecmat": ([2, 9], [9, 300])}        # skinny finish, M <= 2


def _mul_by_protocol(rng, xv, yv, shp_x, shp_y, bits, kind, f):
    """MulMask/MulAssist/MulFinish composed by hand on fresh shares of the
    python ints xv, yv: the revealed products mod 2^bits."""
    nx, ny = len(xv), len(yv)
    x0, y0 = rand_ring(rng, nx, bits), rand_ring(rng, ny, bits)
    x1 = [(v - s) for v, s in zip(xv, x0)]
    y1 = [(v - s) for v, s in zip(yv, y0)]
    X0, X1 = to_storage(x0, bits, shp_x), to_storage(x1, bits, shp_x)
    Y0, Y1 = to_storage(y0, bits, shp_y), to_storage(y1, bits, shp_y)
    k12, k1, k2 = K.random_key(), K.random_key(), K.random_key()
    n = tf.constant(9, tf.int64)
    a0, b0 = K.mul_mask(X0, Y0, k12, n, bits, 0)
    a1, b1 = K.mul_mask(X1, Y1, k12, n, bits, 1)
    m_to_s2 = K.mul_assist(a0, b1, k1, n, bits, kind)  # T1
    m_to_s1 = K.mul_assist(a1, b0, k2, n, bits, kind)  # T2
    z0 = K.mul_finish(X0, Y0, a0, m_to_s1, k12, n, k1, n, bits, 0, f, kind)
    z1 = K.mul_finish(X1, Y1, a1, m_to_s2, k12, n, k2, n, bits, 1, f, kind)
    return [(u + v) % (1 << bits) for u, v in zip(from_storage(z0, bits), from_storage(z1, bits))]


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("kind", ["mul", "matmul", "matvec", "vecmat"])
def test_mul_protocol_kernels(bits, kind):
    """MulMask/MulAssist/MulFinish composed by hand give trunc(x*y)."""
    rng = np.random.default_rng(7)
    shp_x, shp_y = ([4, 3], [4, 3]) if kind == "mul" else MATMUL_SHAPES[kind]
    kind = "mul" if kind == "mul" else "matmul"
    # local truncation fails with probability ~|z|/2^bits per element: in the
    # 64-bit ring 10 fractional bits keep |z| < 2^38 (2^-26 per element)
    f = 20 if bits == 128 else 10
    nx, ny = int(np.prod(shp_x)), int(np.prod(shp_y))
    xv = [int(v) << f for v in rng.integers(-100, 100, nx)]
    yv = [int(v) << f for v in rng.integers(-100, 100, ny)]
    z = [signed(v, bits) for v in _mul_by_protocol(rng, xv, yv, shp_x, shp_y, bits, kind, f)]
    xs = np.array([v >> f for v in xv]).reshape(shp_x)
    ys = np.array([v >> f for v in yv]).reshape(shp_y)
    want = (xs * ys if kind == "mul" else xs @ ys).reshape(-1)
    # exact integers: the only error is the truncation's 1 ulp
    assert all(abs(g - (int(w) << f)) <= 1 for g, w in zip(z, want))


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("kind", ["mul", "matmul", "matvec", "vecmat"])
def test_mul_protocol_kernels_untruncated(bits, kind):
    """With frac_bits = 0, MulFinish does no truncation: the shares sum to
    x·y mod 2^bits exactly, for any ring elements. Selects multiply an
    integer comparison bit (0/1) by a fixed-point difference this way
    (issue 15): the product is already the fixed-point result."""
    rng = np.random.default_rng(17)
    shp_x, shp_y = ([6, 5], [6, 5]) if kind == "mul" else MATMUL_SHAPES[kind]
    kind = "mul" if kind == "mul" else "matmul"
    nx, ny = int(np.prod(shp_x)), int(np.prod(shp_y))
    # x: integer bits (as selects use them); y: arbitrary ring elements
    xv = [int(v) for v in rng.integers(0, 2, nx)]
    yv = rand_ring(rng, ny, bits)
    z = _mul_by_protocol(rng, xv, yv, shp_x, shp_y, bits, kind, 0)
    xs = np.array(xv, dtype=object).reshape(shp_x)
    ys = np.array(yv, dtype=object).reshape(shp_y)
    want = (xs * ys if kind == "mul" else xs.dot(ys)).reshape(-1)
    assert z == [int(w) % (1 << bits) for w in want]


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("frac_bits", [0, 16])
def test_bit_to_arithmetic(bits, frac_bits):
    """BitShareAssist + BitUnmask (DESIGN §6 steps 4-5) give shares of
    b·2^frac_bits for b = b' XOR m; frac_bits = 0 gives the plain integer
    bit that selects multiply by without truncation (issue 15)."""
    rng = np.random.default_rng(18)
    n_ = 64
    b_masked = rng.integers(0, 2, n_).astype(np.uint8)
    m = rng.integers(0, 2, n_).astype(np.uint8)
    key, nonce = K.random_key(), tf.constant(5, tf.int64)
    beta = K.prg_ring(key, nonce, tf.constant([n_], tf.int64), bits)  # the server's share
    msg = K.bit_share_assist(tf.constant(b_masked), key, nonce, bits, frac_bits)
    s0 = K.bit_unmask(beta, tf.constant(m), bits, frac_bits, party=0)
    s1 = K.bit_unmask(msg, tf.constant(m), bits, frac_bits, party=1)
    got = [(u + v) % (1 << bits) for u, v in zip(from_storage(s0, bits), from_storage(s1, bits))]
    assert got == [int(bb ^ mm) << frac_bits for bb, mm in zip(b_masked, m)]


@pytest.mark.parametrize("bits", RINGS)
def test_bit_unmask_table_matches_python_ints(bits):
    """BitUnmaskTable (the range reductions' fused last step) on shares in
    three parts along axis 0: the reconstruction is exactly b @ table[:K] +
    table[K] mod 2^bits in python ints, b = b' XOR m, with negative and
    52-bit table entries; it refuses mismatched parts, masks and tables."""
    rng = np.random.default_rng(19)
    n_, k_, j_ = 37, 9, 3
    b = rng.integers(0, 2, (n_, k_))
    m = rng.integers(0, 2, (n_, k_)).astype(np.uint8)
    table = rng.integers(-2**52, 2**52, (k_ + 1, j_), dtype=np.int64)
    table[0, 0], table[-1, -1] = -1, 2**52 - 1
    r = rand_ring(rng, n_ * k_, bits)                           # s0 + s1 = b XOR m
    s1 = [(int(v) - u) % (1 << bits) for v, u in zip((b ^ m).reshape(-1), r)]
    cuts = [0, 5, 30, n_]
    outs = []
    for party, vals in ((0, r), (1, s1)):
        parts = [to_storage(vals[lo * k_:hi * k_], bits, [hi - lo, k_])
                 for lo, hi in zip(cuts, cuts[1:])]
        outs.append(from_storage(K.bit_unmask_table(parts, tf.constant(m), tf.constant(table),
                                                    bits, party=party), bits))
    got = [(u + v) % (1 << bits) for u, v in zip(*outs)]
    want = [(sum(int(b[i, k]) * int(table[k, j]) for k in range(k_)) + int(table[k_, j]))
            % (1 << bits) for i in range(n_) for j in range(j_)]
    assert got == want
    part = to_storage(r[:n_ * k_], bits, [n_, k_])
    with pytest.raises(tf.errors.InvalidArgumentError, match="table must be"):
        K.bit_unmask_table([part], tf.constant(m), tf.constant(table[1:]), bits, party=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="rows, the mask"):
        K.bit_unmask_table([part, part], tf.constant(m), tf.constant(table), bits, party=0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="party"):
        K.bit_unmask_table([part], tf.constant(m), tf.constant(table), bits, party=2)


@pytest.mark.parametrize("bits", RINGS)
@pytest.mark.parametrize("shape", ["matvec", "vecmat"])
def test_mul_finish_skinny_matches_general(bits, shape, monkeypatch):
    """The fused skinny MulFinish gives the general path's shares bit for bit
    (same masks, exact ring arithmetic)."""
    rng = np.random.default_rng(8)
    shp_x, shp_y = MATMUL_SHAPES[shape]
    nx, ny = int(np.prod(shp_x)), int(np.prod(shp_y))
    X = to_storage(rand_ring(rng, nx, bits), bits, shp_x)
    Y = to_storage(rand_ring(rng, ny, bits), bits, shp_y)
    A = to_storage(rand_ring(rng, nx, bits), bits, shp_x)
    msg = to_storage(rand_ring(rng, shp_x[0] * shp_y[1], bits), bits,
                     [shp_x[0], shp_y[1]])
    k12, kt, n = K.random_key(), K.random_key(), tf.constant(11, tf.int64)
    outs = []
    for disabled in ("0", "1"):
        monkeypatch.setenv("TF_PRIVPY_DISABLE_SKINNY_FINISH", disabled)
        outs.append([K.mul_finish(X, Y, A, msg, k12, n, kt, n, bits, p, 20, "matmul").numpy()
                     for p in (0, 1)])
    for fused, general in zip(*outs):
        np.testing.assert_array_equal(fused, general)
