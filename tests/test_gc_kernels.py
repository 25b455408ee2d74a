"""Garbled-circuit comparison kernels (ops/gc, DESIGN §6): the one op set
GcGarble / GcEncode / GcEvaluate / GcMask with circuit="compare": GcGarble
on S1, GcEncode on S1 (role a, values y = x1) and S2 (role b, values x =
-x2), GcEvaluate on an assistant, GcMask on S1/S2. The op set's own checks
(unknown circuits, parameters of another circuit, shape functions of every
circuit) are at the end.

Contract tested here: GcEvaluate(...) XOR GcMask(...) equals [y < x] as a
SIGNED int64 comparison, i.e. [x1 < -x2]."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tf_privpy.protocols.loader import load_library
from tf_privpy.protocols.mpc.runtime import kernels as K

import portable_aes

LIB = load_library()
I64 = np.iinfo(np.int64)
FIXED_KEY = bytes.fromhex("243F6A8885A308D313198A2E03707344")  # garble.h kFixedAesKey


def rand_key(rng):
    return tf.constant(rng.integers(I64.min, I64.max, 2, dtype=np.int64, endpoint=True))


def c64(v):
    return tf.constant(v, tf.int64)


CMP = "compare"


def garble(key, nonce, n, first=0, count=None):
    """S1: the comparators [first, first + count) of a batch of n (count: all)."""
    return K.gc_garble(key, nonce, n, first, n if count is None else count, CMP)


def encode(key, nonce, values, role, n=None, first=0):
    """Labels of role "y" (S1's x1: the op's role a) or "x" (S2's -x2: role b)."""
    n = tf.shape(values, out_type=tf.int64)[0] if n is None else n
    return K.gc_encode(key, nonce, values, n, first, CMP, {"y": "a", "x": "b"}.get(role, role))


def ev(t, d, lx, ly, nonce, first=c64(0)):
    """T: b' from S2's labels lx and S1's ly (the op takes S1's first)."""
    return K.gc_evaluate(t, d, ly, lx, nonce, first, CMP)


def mask(key, nonce, n):
    return K.gc_mask(key, nonce, n, CMP)


def garble_eval(key, nonce, y, x):
    """Runs the four kernels; returns (b' = evaluate output, m, garble outputs, labels)."""
    n = len(y)
    nonce = c64(nonce)
    tables, decode = garble(key, nonce, c64(n))
    lx = encode(key, nonce, c64(x), role="x")  # S2: -x2
    ly = encode(key, nonce, c64(y), role="y")  # S1: x1
    bits = ev(tables, decode, lx, ly, nonce, c64(0))
    m = mask(key, nonce, c64(n))
    return bits.numpy(), m.numpy(), (tables.numpy(), decode.numpy()), (lx.numpy(), ly.numpy())


EDGES = [0, 1, -1, 2, -2, I64.min, I64.max, I64.min + 1, I64.max - 1, 1 << 62, -(1 << 62),
         (1 << 32), -(1 << 32)]


def test_edge_pairs_exact():
    rng = np.random.default_rng(1)
    y, x = np.array([(a, b) for a in EDGES for b in EDGES], dtype=np.int64).T
    bits, m, _, _ = garble_eval(rand_key(rng), 12345, y, x)
    assert bits.dtype == np.uint8 and set(np.unique(bits)) <= {0, 1}
    np.testing.assert_array_equal(bits ^ m, (y < x).astype(np.uint8))


def test_random_pairs_exact():
    rng = np.random.default_rng(2)
    n = 100_000
    y = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)  # full range
    x = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    q = n // 4
    x[q:2 * q] = y[q:2 * q]  # equal values
    x[2 * q:3 * q] = y[2 * q:3 * q] + rng.integers(-1, 2, q)  # neighbours (wraps at the ends)
    y[3 * q:] = rng.integers(-1000, 1000, n - 3 * q)  # small values of both signs
    x[3 * q:] = rng.integers(-1000, 1000, n - 3 * q)
    bits, m, _, _ = garble_eval(rand_key(rng), int(rng.integers(0, 1 << 62)), y, x)
    want = (y < x).astype(np.uint8)
    assert 0.3 < want.mean() < 0.7
    np.testing.assert_array_equal(bits ^ m, want)


def test_protocol_use_gives_sign_of_shared_value():
    """DESIGN §6: S1 feeds x1 as role y, S2 feeds -x2 as role x, b = [x < 0]."""
    rng = np.random.default_rng(3)
    n = 5000
    x = rng.integers(-(1 << 40), 1 << 40, n)
    x[:3] = [0, -1, 1]
    x1 = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    with np.errstate(over="ignore"):
        x2 = x - x1  # shares mod 2^64
        neg_x2 = -x2
    bits, m, _, _ = garble_eval(rand_key(rng), 99, x1, neg_x2)
    # Exact when x1 + x2 does not wrap as signed integers (probability ~1 - 2^-23 here).
    ok = (x1.astype(object) + x2.astype(object)) == x.astype(object)
    assert ok.mean() > 0.999
    np.testing.assert_array_equal((bits ^ m)[ok], (x < 0)[ok].astype(np.uint8))


@pytest.mark.slow
def test_million_comparisons():
    """A batch of 10^6 comparisons (2 GB of tables) garbles and evaluates exactly."""
    rng = np.random.default_rng(12)
    n = 1_000_000
    y = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    x = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    x[::3] = y[::3]
    key, nonce = rand_key(rng), c64(77)
    tables, decode = garble(key, nonce, c64(n))
    bits = ev(
        tables, decode, encode(key, nonce, c64(x), role="x"),
        encode(key, nonce, c64(y), role="y"), nonce, c64(0))
    del tables
    m = mask(key, nonce, c64(n))
    np.testing.assert_array_equal(bits.numpy() ^ m.numpy(), (y < x).astype(np.uint8))


def test_n_zero():
    rng = np.random.default_rng(4)
    bits, m, (t, d), (lx, ly) = garble_eval(rand_key(rng), 1, np.zeros(0, np.int64),
                                            np.zeros(0, np.int64))
    assert bits.shape == (0,) and m.shape == (0,) and t.shape == (0, 64, 4)
    assert d.shape == (0,) and lx.shape == (0, 64, 2) and ly.shape == (0, 64, 2)


def test_determinism_and_nonce_separation():
    rng = np.random.default_rng(5)
    key = rand_key(rng)
    n = 4000
    y = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    x = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    b1, m1, g1, l1 = garble_eval(key, 10, y, x)
    b2, m2, g2, l2 = garble_eval(key, 10, y, x)
    # Same (key, nonce): identical garbling, labels and masks (S1 and S2 rely on it).
    for a, b in zip(g1 + l1 + (m1,), g2 + l2 + (m2,)):
        np.testing.assert_array_equal(a, b)
    b3, m3, g3, l3 = garble_eval(key, 11, y, x)
    np.testing.assert_array_equal(b3 ^ m3, (y < x).astype(np.uint8))
    # Another nonce: nothing reused.
    assert np.mean(g1[0] == g3[0]) < 1e-3
    assert np.mean(l1[0] == l3[0]) < 1e-3 and np.mean(l1[1] == l3[1]) < 1e-3
    assert 0.45 < np.mean(m1 != m3) < 0.55
    # Another key, same nonce: also fresh.
    _, m4, g4, _ = garble_eval(rand_key(rng), 10, y, x)
    assert np.mean(g1[0] == g4[0]) < 1e-3 and 0.45 < np.mean(m1 != m4) < 0.55


def test_mask_looks_uniform():
    rng = np.random.default_rng(6)
    key = rand_key(rng)
    n = 200_000
    m = mask(key, c64(3), c64(n)).numpy()
    assert set(np.unique(m)) == {0, 1}
    assert abs(m.mean() - 0.5) < 5 * 0.5 / np.sqrt(n)
    pairs = m[:-1] * 2 + m[1:]  # no serial correlation
    counts = np.bincount(pairs, minlength=4) / (n - 1)
    assert np.all(np.abs(counts - 0.25) < 0.01)
    # Decode bits must look uniform too (they are lsb(output label) ^ m).
    _, d = garble(key, c64(3), c64(20000))
    assert abs(d.numpy().mean() - 0.5) < 0.03
    # The masks of the first k comparisons depend on n (the layout includes n),
    # but are reproducible for the same n.
    m2 = mask(key, c64(3), c64(n)).numpy()
    np.testing.assert_array_equal(m, m2)


def test_split_evaluation_across_assistants():
    """DESIGN §6: T1 evaluates rows [0, f), T2 rows [f, n) of one garbled batch;
    T2 passes first_index=f (the comparison index fixes the hash tweaks)."""
    rng = np.random.default_rng(11)
    n, f = 3000, 1234
    y = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    x = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    key = rand_key(rng)
    _, m, (t, d), (lx, ly) = garble_eval(key, 31, y, x)
    # S1 garbles T2's part apart, S1 and S2 encode it apart: slices of the batch
    t2, d2 = garble(key, c64(31), n, f, n - f)
    np.testing.assert_array_equal(t2, t[f:])
    np.testing.assert_array_equal(d2, d[f:])
    np.testing.assert_array_equal(encode(key, c64(31), c64(x[f:]), "x", n, f),
                                  lx[f:])
    with pytest.raises(tf.errors.InvalidArgumentError, match="must lie in the batch"):
        garble(key, c64(31), n, f, n)
    b1 = ev(t[:f], d[:f], lx[:f], ly[:f], c64(31), c64(0)).numpy()
    b2 = ev(t[f:], d[f:], lx[f:], ly[f:], c64(31), c64(f)).numpy()
    np.testing.assert_array_equal(np.concatenate([b1, b2]) ^ m, (y < x).astype(np.uint8))
    wrong = ev(t[f:], d[f:], lx[f:], ly[f:], c64(31), c64(0)).numpy()  # wrong first_index
    assert np.mean((wrong ^ m[f:]) == (y[f:] < x[f:])) < 0.6
    with pytest.raises(tf.errors.InvalidArgumentError, match="first_index must be in"):
        ev(t, d, lx, ly, c64(31), c64(-1))

    # In a graph with a dynamic batch size, first_index is a tensor (n // 2).
    @tf.function(input_signature=[tf.TensorSpec([None, 64, 4], tf.int64),
                                  tf.TensorSpec([None], tf.uint8),
                                  tf.TensorSpec([None, 64, 2], tf.int64),
                                  tf.TensorSpec([None, 64, 2], tf.int64)])
    def halves(t, d, lx, ly):
        h = tf.shape(d, out_type=tf.int64)[0] // 2
        return tf.concat([ev(t[:h], d[:h], lx[:h], ly[:h], c64(31), c64(0)),
                          ev(t[h:], d[h:], lx[h:], ly[h:], c64(31), h)], 0)

    np.testing.assert_array_equal(halves(t, d, lx, ly).numpy() ^ m, (y < x).astype(np.uint8))


def test_standalone_cc_program():
    """ops/gc/garble_test.cc, leading_one_test.cc, thresholds_test.cc and
    circuit_table_test.cc (no TensorFlow, system OpenSSL: each circuit, and
    each through the ops' circuit table, against a plain reference) pass.
    Built once into build/cc-tests/gc (`make cc-tests`); make rebuilds on change."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(root, "build", "cc-tests", "gc")
    r = subprocess.run(["make", "-s", "-f", "ops/gc/Makefile.standalone", "test",
                        f"OUT={out}"], cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    summaries = [ln for ln in r.stdout.splitlines() if " passed, " in ln]
    assert len(summaries) == 4, r.stdout
    for last in summaries:
        assert last.endswith(" 0 failed") and not last.startswith("0 passed"), r.stdout


def test_wrong_label_gives_garbage():
    rng = np.random.default_rng(7)
    n = 20000
    y = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    x = rng.integers(I64.min, I64.max, n, dtype=np.int64, endpoint=True)
    key = rand_key(rng)
    _, m, (t, d), (lx, ly) = garble_eval(key, 21, y, x)
    want = (y < x).astype(np.uint8)
    bad = lx.copy()
    bad[:, 7, 1] ^= 1 << 20  # one bit of one label of every comparison (not the lsb)
    b = ev(t, d, bad, ly, c64(21), c64(0)).numpy()
    assert 0.45 < np.mean((b ^ m) == want) < 0.55
    # Evaluating with another nonce (wrong tweaks) gives garbage as well.
    b = ev(t, d, lx, ly, c64(22), c64(0)).numpy()
    assert 0.45 < np.mean((b ^ m) == want) < 0.55


def _stream(key_np, nonce, nbytes):
    iv = nonce.to_bytes(8, "big") + bytes(8)
    enc = Cipher(algorithms.AES(key_np.astype("<i8").tobytes()), modes.CTR(iv)).encryptor()
    return enc.update(bytes(nbytes))


def _blk(b):
    return int.from_bytes(b, "little")


def test_matches_documented_spec():
    """A pure-Python half-gates garbler written from garble.h's description (stream
    layout, sigma, tweaks, fixed AES key) gives bit-identical tables, decode bits,
    input labels and masks."""
    rng = np.random.default_rng(8)
    key = rand_key(rng)
    key_np = key.numpy()
    nonce, n = int(rng.integers(0, 1 << 62)), 3
    y = np.array([-5, I64.max, 17], np.int64)
    x = np.array([3, I64.min, 17], np.int64)
    s = _stream(key_np, nonce, 16 + 2049 * n)
    delta = _blk(s[:16]) | 1
    lab = lambda base, i, g: _blk(s[base + 16 * (64 * i + g):base + 16 * (64 * i + g + 1)])
    x0 = [[lab(16, i, g) for g in range(64)] for i in range(n)]
    y0 = [[lab(16 + 1024 * n, i, g) for g in range(64)] for i in range(n)]
    m = np.array([s[16 + 2048 * n + i] & 1 for i in range(n)], np.uint8)
    ecb = Cipher(algorithms.AES(FIXED_KEY), modes.ECB()).encryptor()
    mask128 = (1 << 128) - 1

    def sigma(v):
        lo, hi = v & (2**64 - 1), v >> 64
        return hi | ((hi ^ lo) << 64)

    def hashes(vals_tweaks):
        ins = [sigma(v) ^ j for v, j in vals_tweaks]
        out = ecb.update(b"".join(i.to_bytes(16, "little") for i in ins))
        return [_blk(out[16 * k:16 * k + 16]) ^ ins[k] for k in range(len(ins))]

    tables = np.zeros((n, 64, 4), np.uint64)
    decode = np.zeros(n, np.uint8)
    for i in range(n):
        c = 0
        for g in range(64):
            a, b = x0[i][g] ^ c, y0[i][g] ^ c
            jg = (nonce << 64) | (i << 7) | (g << 1)
            ha0, ha1, hb0, hb1 = hashes([(a, jg), (a ^ delta, jg), (b, jg | 1), (b ^ delta, jg | 1)])
            pa, pb = a & 1, b & 1
            tg = ha0 ^ ha1 ^ (delta if pb else 0)
            wg0 = ha0 ^ (tg if pa else 0)
            te = hb0 ^ hb1 ^ a
            we0 = hb0 ^ ((te ^ a) if pb else 0)
            c = (x0[i][g] ^ wg0 ^ we0) & mask128
            tables[i, g] = [tg & (2**64 - 1), tg >> 64, te & (2**64 - 1), te >> 64]
        decode[i] = (c & 1) ^ m[i]

    bits, m_k, (t_k, d_k), (lx_k, ly_k) = garble_eval(key, nonce, y, x)
    np.testing.assert_array_equal(t_k.view(np.uint64), tables)
    np.testing.assert_array_equal(d_k, decode)
    np.testing.assert_array_equal(m_k, m)

    def labels(zero, vals):
        out = np.zeros((n, 64, 2), np.uint64)
        for i in range(n):
            u = (int(vals[i]) & (2**64 - 1)) ^ (1 << 63)
            for g in range(64):
                v = zero[i][g] ^ (delta if (u >> g) & 1 else 0)
                out[i, g] = [v & (2**64 - 1), v >> 64]
        return out

    np.testing.assert_array_equal(lx_k.view(np.uint64), labels(x0, x))
    np.testing.assert_array_equal(ly_k.view(np.uint64), labels(y0, y))
    np.testing.assert_array_equal(bits ^ m, (y < x).astype(np.uint8))


def test_graph_mode_static_shapes():
    rng = np.random.default_rng(9)
    key = rand_key(rng)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)] * 2)
    def fn(y, x):
        nonce = c64(4)
        n = tf.shape(y, out_type=tf.int64)[0]
        t, d = garble(key, nonce, n)
        lx = encode(key, nonce, x, role="x")
        ly = encode(key, nonce, y, role="y")
        assert t.shape.as_list() == [None, 64, 4] and lx.shape.as_list() == [None, 64, 2]
        b = ev(t, d, lx, ly, nonce, c64(0))
        assert b.shape.as_list() == [None] and b.dtype == tf.uint8
        return b ^ mask(key, nonce, n)

    y = np.array([1, -3, 8, I64.min], np.int64)
    x = np.array([2, -4, 8, I64.max], np.int64)
    np.testing.assert_array_equal(fn(c64(y), c64(x)).numpy(), (y < x).astype(np.uint8))

    seen = {}

    @tf.function
    def const_shapes():
        t, d = garble(key, c64(1), c64(5))
        seen["t"], seen["d"] = t.shape.as_list(), d.shape.as_list()
        return t, d

    const_shapes.get_concrete_function()
    assert seen == {"t": [5, 64, 4], "d": [5]}


def test_tampered_shapes_are_rejected():
    rng = np.random.default_rng(10)
    key = rand_key(rng)
    n = 6
    y = rng.integers(-9, 9, n)
    _, _, (t, d), (lx, ly) = garble_eval(key, 1, y, y)
    nonce = c64(1)
    cases = [
        (lambda: ev(t[:, :63], d, lx, ly, nonce), r"tables must have shape \[n, 64, 4\]"),
        (lambda: ev(t[..., :2], d, lx, ly, nonce), r"tables must have shape \[n, 64, 4\]"),
        (lambda: ev(t, d[:5], lx, ly, nonce), r"decode must have shape \[6\]"),
        (lambda: ev(t, d, lx[:5], ly, nonce), r"labels_b must have shape \[6, 64, 2\]"),
        (lambda: ev(t, d, lx, ly[..., :1], nonce), r"labels_a must have shape \[6, 64, 2\]"),
        (lambda: ev(t, d, lx, ly, c64([1, 2])), r"nonce must be an int64 scalar"),
        (lambda: ev(t, d, lx, ly, nonce, c64([0])), r"first_index must be an int64 scalar"),
        (lambda: garble(key, nonce, c64(-1)), r"n .* must be in \[0, "),
        (lambda: garble(key, nonce, c64([3])), r"n must be an int64 scalar"),
        (lambda: garble(key[:1], nonce, c64(3)), r"key12 must be an int64 tensor of 2"),
        (lambda: mask(key, nonce, c64(-5)), r"must be in \[0, "),
        (lambda: encode(key, nonce, c64([[1, 2]]), role="x"),
         r"values must be a vector \[n\]"),
    ]
    for fn, msg in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
            fn()
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)):
        encode(key, nonce, c64([1]), role="z")

    # In a graph, the shape functions reject mismatches before anything runs.
    with pytest.raises(ValueError, match="must be equal|Dimensions must be equal|Shape must be"):
        tf.function(lambda: ev(t, d, lx[:5], ly, nonce)).get_concrete_function()


def test_portable_aes_path_matches():
    """OpenSSL's portable AES (AES-NI and AVX masked off) garbles and evaluates
    bit-identically to the AES-NI/VAES path. The unmasked run is in this
    process; the masked one in the process tests/portable_aes.py shares with
    test_kernels' portable PRG test, which also garbles with
    TF_PRIVPY_DISABLE_VAES=1 (EVP's portable AES for the fixed-key hash even
    where the CPU has VAES). Each run asserts its 300 comparisons are right."""
    here = portable_aes.gc_hex_here(os.environ.get("TF_PRIVPY_DISABLE_VAES"))
    capped = portable_aes.capped_outputs()
    outs = [here, capped["gc"]]
    assert outs[0] == outs[1] and len(outs[0]) == 2 * (300 * 64 * 32 + 300 + 2 * 300 * 64 * 16 + 600)
    assert capped["gc_evp"] == outs[0]


# ------------------------------------------------ the op set, every circuit
SPECS = {"compare": {}, "leading_one": dict(width=10, magnitude=True, columns=[1, 9]),
         "thresholds": dict(width=46, lo=19, window=6, points=[-3, 0, 3])}


def test_unknown_circuits_and_foreign_parameters_are_refused():
    """One op set for every circuit: a name outside the table, a parameter
    of another circuit or a missing width is refused, not ignored."""
    key, nonce = c64([1, 2]), c64(1)
    cases = [
        (lambda: K.gc_mask(key, nonce, 4, "comparison"), "unknown garbled circuit 'comparison'"),
        (lambda: K.gc_mask(key, nonce, 4, "compare", columns=[1]), "takes no columns"),
        (lambda: K.gc_mask(key, nonce, 4, "compare", width=46), "width must be 64"),
        (lambda: K.gc_mask(key, nonce, 4, "leading_one"), "needs its width"),
        (lambda: K.gc_garble(key, nonce, 4, 0, 4, "thresholds", magnitude=True,
                             **SPECS["thresholds"]), "takes no magnitude"),
        (lambda: K.gc_encode(key, nonce, c64([1]), 1, 0, "leading_one", "a", width=10,
                             points=[1]), "takes no points"),
    ]
    for fn, msg in cases:
        with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
            fn()
    with pytest.raises(ValueError, match="unknown garbled circuit"):   # the shape function
        tf.function(lambda: K.gc_mask(key, nonce, 4, "nope")).get_concrete_function()


@pytest.mark.parametrize("circuit", sorted(SPECS))
def test_shape_functions_of_every_circuit(circuit):
    """In a graph, each op's static shapes are the kernel's: tables [n, G, 4],
    labels [n, W, 2], bits [n, K] ([n] for the comparator); and mismatched
    labels are rejected before anything runs."""
    from tf_privpy.protocols.mpc.runtime import cost
    p = SPECS[circuit]
    w = p.get("width", 64)
    gates = {"compare": 64, "leading_one": cost.leading_one_gates(10, True),
             "thresholds": cost.thresholds_gates(46, 19, 6, [-3, 0, 3])}[circuit]
    bits = [5] if circuit == "compare" else [5, len(p.get("columns") or p.get("points"))]
    key, nonce, seen = c64([3, 4]), c64(2), {}

    @tf.function
    def run():
        t, d = K.gc_garble(key, nonce, c64(5), c64(0), c64(5), circuit, **p)
        la = K.gc_encode(key, nonce, c64([1, 2, 3, 4, 5]), c64(5), c64(0), circuit, "a", **p)
        lb = K.gc_encode(key, nonce, c64([5, 4, 3, 2, 1]), c64(5), c64(0), circuit, "b", **p)
        b = K.gc_evaluate(t, d, la, lb, nonce, c64(0), circuit, **p)
        m = K.gc_mask(key, nonce, c64(5), circuit, **p)
        seen.update(t=t.shape.as_list(), d=d.shape.as_list(), la=la.shape.as_list(),
                    b=b.shape.as_list(), m=m.shape.as_list())
        return b ^ m

    out = run().numpy()
    assert seen == {"t": [5, gates, 4], "d": bits, "la": [5, w, 2], "b": bits, "m": bits}
    assert list(out.shape) == bits
    t, d = K.gc_garble(key, nonce, 5, 0, 5, circuit, **p)
    la = tf.zeros([5, w - 1, 2], tf.int64)
    with pytest.raises(ValueError, match=f"Dimension must be {w} but is {w - 1}"):
        tf.function(lambda: K.gc_evaluate(t, d, la, la, nonce, 0, circuit, **p)
                    ).get_concrete_function()
