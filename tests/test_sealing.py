"""Sealed links (protocols/mpc/runtime/sealing.py, keying.py): every message between
two servers as one AES-GCM ciphertext, opened on the receiver (issue 11).

Here in the embedded runtime with tp.Config(encrypt_links=True); the
distributed runtime turns it on by itself (tests/test_distributed.py runs a
tampered message across real processes).

The attack tests show both sides: an interceptor that flips one bit of what
crosses S1 -> T1 silently changes the result when links are not sealed, and
is rejected by the receiving kernel, naming the link, when they are.
"""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime.runtime import canonical_device
from tolerances import mul_tol

F = 20


@pytest.fixture
def sealed():
    tp.reset()
    tp.init(tp.Config(encrypt_links=True))
    yield tp.get_runtime().runtime
    tp.reset()
    tp.init()


def _grid(a):
    return np.round(np.asarray(a, np.float64) * 2.0 ** F) / 2.0 ** F


RNG = np.random.default_rng(5)
X = _grid(RNG.normal(0, 3, (4, 5)))
Y = _grid(RNG.normal(0, 3, (4, 5)))


def test_every_link_is_sealed(sealed):
    parties = ("client", "S1", "S2", "T1", "T2")
    assert sealed.channels.secured() == sorted(
        f"{a}->{b}" for a in parties for b in parties if a != b)


def test_sealed_results_and_traffic_equal_the_unsealed(sealed):
    """Sealing changes no result and no counted byte: the counters count the
    plaintext, which the cost model predicts."""
    def run():
        x, y = tp.share(X), tp.share(Y)
        before = tp.get_runtime().runtime.channels.counts()
        out = {"mul": tp.reveal(x * y).numpy(), "less": tp.reveal(tp.less(x, y)).numpy(),
               "relu": tp.reveal(tp.nn.relu(x)).numpy(),
               "matmul": tp.reveal(tp.matmul(x, tp.transpose(y))).numpy()}
        after = tp.get_runtime().runtime.channels.counts()
        return out, {k: (after[k][0] - before[k][0], after[k][1] - before[k][1])
                     for k in after}
    got, traffic = run()
    np.testing.assert_array_less(np.abs(got["mul"] - X * Y), mul_tol(X, Y, F))
    np.testing.assert_array_equal(got["less"], X < Y)
    tp.reset()
    tp.init()
    plain, plain_traffic = run()
    assert traffic == plain_traffic
    np.testing.assert_array_equal(got["less"], plain["less"])


@pytest.mark.parametrize("dtype", [tf.int64, tf.int32, tf.uint8, tf.bool, tf.float32,
                                   tf.float64, tf.uint64, tf.int16])
def test_seal_open_roundtrip_of_every_dtype_and_dynamic_shapes(sealed, dtype):
    """Tensors of any numeric dtype, static or unknown shape, several per
    message, come out bit for bit as they went in."""
    ch = sealed.channels
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2 ** 15, (3, 7)).astype(dtype.as_numpy_dtype)
    b = rng.integers(0, 2 ** 15, (5,)).astype(dtype.as_numpy_dtype)
    c = np.zeros((0, 2), dtype.as_numpy_dtype)  # empty tensors too
    d = np.array(a.flat[3])  # and scalars

    @tf.function(input_signature=[tf.TensorSpec([None, 7], dtype), tf.TensorSpec(None, dtype),
                                  tf.TensorSpec([0, 2], dtype)])
    def dynamic(a, b, c):
        b = tf.reshape(b, [-1])
        return ch.send("S1", "T1", a, b, tf.reshape(b[3], []), headers=[c])

    eager = ch.send("S2", "T2", a, b, d, headers=[c])
    assert canonical_device(eager[0][0].device) == canonical_device(sealed.devices["T2"])
    for payload, headers in (eager, dynamic(a, b, c)):
        np.testing.assert_array_equal(payload[0].numpy(), a)
        np.testing.assert_array_equal(payload[1].numpy(), b)
        assert payload[2].shape == () and payload[2].numpy() == (d if payload is eager[0]
                                                                 else b[3])
        np.testing.assert_array_equal(headers[0].numpy(), c)


def test_multi_chunk_messages_of_every_shape(sealed):
    """Messages above the kernel's 1 MiB chunk (several GCM chunks): sizes
    around the chunk boundaries, statically and dynamically shaped."""
    ch = sealed.channels
    rng = np.random.default_rng(2)
    f = tf.function(lambda a: ch.send1("S1", "T2", a),
                    input_signature=[tf.TensorSpec([None], tf.int64)])
    for n in (2 ** 17 - 1, 2 ** 17, 2 ** 17 + 1, 3 * 2 ** 17 + 5):
        a = rng.integers(-2 ** 62, 2 ** 62, n)
        np.testing.assert_array_equal(ch.send1("S1", "T2", a).numpy(), a)
        np.testing.assert_array_equal(f(a).numpy(), a)
    for n in (2 ** 20 + 3, 2 ** 20 + 16):  # uint8 with a tail to pad, and without
        b = rng.integers(0, 255, (n // 8, 8) if n % 8 == 0 else n).astype(np.uint8)
        np.testing.assert_array_equal(ch.send1("T2", "S2", b).numpy(), b)


@pytest.mark.parametrize("sizes", [
    [8192, 2, 1],            # a product's message and its two nonce headers: a view, two slices
    [8192, 3, 4096],         # views around an unaligned part: slices
    [2, 8192, 1],            # a big part after an unaligned start: copied (split)
    [4096, 4096, 8, 5],      # two views, then the headers
    [100, 7, 4000],          # all small: one split
])
def test_opened_parts_are_views_where_aligned(sealed, sizes):
    """A large part of an opened message whose ends sit on 64-byte
    boundaries is a dim-0 slice of the opened words (a view: TF's aligned
    slice copies nothing), never a SplitV (which copies every byte); every
    part equals its words either way."""
    from tf_privpy.protocols.mpc.runtime import sealing
    words = np.arange(sum(sizes), dtype=np.int64) * 7 - 3
    f = tf.function(lambda w: sealing._parts(w, sizes))
    got = f(tf.constant(words))
    want = np.split(words, np.cumsum(sizes)[:-1])
    assert len(got) == len(sizes)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w)
    graph = f.get_concrete_function(tf.TensorSpec([sum(sizes)], tf.int64)).graph
    starts = np.cumsum([0] + sizes[:-1])
    views = [int(n) for a, n in zip(starts, sizes)
             if n >= sealing._VIEW_WORDS and a % 8 == 0 and (a + n) % 8 == 0]
    split_sizes = [list(op.inputs[1].op.get_attr("value").int64_val)
                   or list(tf.make_ndarray(op.inputs[1].op.get_attr("value")))
                   for op in graph.get_operations() if op.type == "SplitV"]
    # no split carries a view's part (a split copies it)
    assert not any(v in [int(x) for x in s] for s in split_sizes for v in views), split_sizes
    slices = [op for op in graph.get_operations() if op.type == "StridedSlice"]
    assert len(slices) >= len(views)


def test_strings_are_refused(sealed):
    with pytest.raises(TypeError, match="seals numeric and bool tensors only"):
        sealed.channels.send1("S1", "T1", tf.constant(["a"]))


def _mul_with_attacker(target, offset=8):
    """x * y with the attacker active; flips bit 0 of the byte at `offset` of
    the sealed message (after the 8-byte counter: inside the ciphertext)."""
    ch = tp.get_runtime().runtime.channels

    def intercept(src, dst, tensors):
        if (src, dst) != target:
            return tensors
        return flip_bit(tensors, offset)
    with ch.intercept(intercept):
        return tp.reveal(tp.share(X) * tp.share(Y)).numpy()


def flip_bit(tensors, offset):
    """Flips bit 0 of byte `offset` of a sealed message (of element 0 of an
    unsealed payload); tests/distributed_driver.py uses it too."""
    t = tensors[0]
    flat = tf.reshape(t, [-1])
    if t.dtype != tf.uint8:
        offset = 0
    one = tf.one_hot(offset, tf.size(flat), on_value=tf.constant(1, t.dtype),
                     off_value=tf.constant(0, t.dtype), dtype=t.dtype)
    return [tf.reshape(tf.bitwise.bitwise_xor(flat, one), tf.shape(t))] + tensors[1:]


def _traffic_links():
    """The server links a multiplication uses (where the attacker can sit)."""
    seen = set()
    rt = tp.get_runtime().runtime

    def record(src, dst, _t):
        seen.add((src, dst))
    with rt.observe(record):
        tp.reveal(tp.share(X) * tp.share(Y))
    return sorted(seen)


def test_a_flipped_bit_is_rejected_naming_the_link(sealed):
    """On every link a multiplication uses. A rejection may leave a pair's
    PRG streams out of step (the next call then fails: DESIGN §4), so each
    attack gets fresh keys."""
    links = _traffic_links()
    assert len(links) >= 6 and ("client", "S1") in links and ("S1", "client") in links, links
    for src, dst in links:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=f"{src}->{dst}.*failed authentication"):
            _mul_with_attacker((src, dst))
        tp.reset()
        tp.init(tp.Config(encrypt_links=True))
    got = tp.reveal(tp.share(X) * tp.share(Y)).numpy()
    np.testing.assert_array_less(np.abs(got - X * Y), mul_tol(X, Y, F))


def test_without_sealing_the_same_attack_goes_unnoticed():
    """The deliberately broken variant: the same bit flip on an unsealed link
    changes the product and nothing notices (why links are sealed)."""
    tp.reset()
    tp.init()
    src, dst = _traffic_links()[0]
    got = _mul_with_attacker((src, dst))
    assert np.max(np.abs(got - X * Y)) > 1e-3 or not np.all(np.isfinite(got))


def test_a_replayed_message_is_rejected(sealed):
    """An attacker who records a sealed S1 -> T1 message and delivers it again
    in place of the next one: the receiver's counter state refuses it."""
    rt = sealed
    recorded = {}

    def record(src, dst, tensors):
        if (src, dst) == ("S1", "T1") and "m" not in recorded:
            recorded["m"] = tf.Variable(tensors[0], trainable=False)
        return tensors

    def replay(src, dst, tensors):
        if (src, dst) == ("S1", "T1"):
            return [recorded["m"].read_value()] + tensors[1:]
        return tensors
    x, y = tp.share(X), tp.share(Y)
    with rt.channels.intercept(record):
        tp.reveal(x * y)
    assert "m" in recorded
    with rt.channels.intercept(replay):
        with pytest.raises(tf.errors.InvalidArgumentError, match="S1->T1.*(replay|order)"):
            tp.reveal(x * y)


def test_encrypt_links_false_is_refused_with_a_cluster(tmp_path):
    with pytest.raises(ValueError, match="in the clear"):
        tp.init(tp.Config(encrypt_links=False), cluster=str(tmp_path / "none.json"))
    assert tp.get_runtime() is not None  # the current runtime is kept


def test_config_rejects_non_bool():
    with pytest.raises(ValueError, match="encrypt_links"):
        tp.Config(encrypt_links="yes")
