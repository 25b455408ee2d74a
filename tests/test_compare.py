"""Comparison (PrivPy Protocol 2, DESIGN §6) and everything built on it,
against numpy, in both rings and both backends, eagerly and in tf.function.

The comparison is exact except when the 64-bit integer sum of the low share
halves wraps, which happens with probability about |x|·2^f / 2^63 per
comparison (DESIGN §6): under 2^-33 for |x| < 1000, under 2^-20 at the
128-bit ring's bound 2^23. Random tests therefore use |x| < 1000."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import case_fixtures, run
from tolerances import encode_tol, select_tol, ulp

from tf_privpy.protocols.mpc.privpy.compare import batcher_pairs


# the 64-bit ring in privpy only: the plaintext backend's comparison does not
# depend on the ring
case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64), ("plaintext", 128)])


def exact(cfg, a):
    """Values exactly representable in the encoding (so comparisons of the
    encoded values equal numpy's)."""
    return np.round(np.asarray(a, np.float64) * 2 ** cfg.frac_bits) / 2 ** cfg.frac_bits


def sh(a):
    return tp.share(tf.constant(a, tf.float64))


def test_edge_comparisons(case):
    cfg, mode = case.config, case.mode
    u = ulp(cfg.frac_bits)
    big = cfg.bound - u
    vals = exact(cfg, [0.0, u, -u, 2 * u, 1.0, -1.0, big, -big, 123.5, -123.5])
    x, y = np.meshgrid(vals, vals)
    px, py = sh(x), sh(y)
    for fn, want in [(lambda a, b: a < b, x < y), (lambda a, b: a <= b, x <= y),
                     (lambda a, b: a > b, x > y), (lambda a, b: a >= b, x >= y),
                     (tp.equal, x == y), (tp.not_equal, x != y)]:
        got = run(mode, fn, px, py).reveal().numpy()
        assert got.dtype == bool
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_million_random_comparisons(ring_case):
    cfg = ring_case.config
    rng = np.random.default_rng(7)
    n = 10 ** 6
    x = exact(cfg, rng.uniform(-1000, 1000, n))
    y = exact(cfg, np.where(rng.random(n) < 0.01, x, rng.uniform(-1000, 1000, n)))
    got = tp.less(sh(x), sh(y)).reveal().numpy()
    assert int(np.sum(got != (x < y))) == 0


def test_sign_abs_relu_where(case, rng):
    cfg, mode = case.config, case.mode
    x = exact(cfg, np.concatenate([rng.normal(0, 50, 20), [0.0, ulp(cfg.frac_bits)]]))
    f = cfg.frac_bits
    p = sh(x)
    np.testing.assert_array_equal(run(mode, tp.sign, p).reveal().numpy(), np.sign(x))
    np.testing.assert_allclose(run(mode, tp.abs, p).reveal().numpy(), np.abs(x),
                               atol=select_tol(2, f), rtol=0)
    np.testing.assert_allclose(run(mode, tp.nn.relu, p).reveal().numpy(), np.maximum(x, 0),
                               atol=select_tol(1, f), rtol=0)
    np.testing.assert_allclose(run(mode, tf.nn.relu, p).reveal().numpy(), np.maximum(x, 0),
                               atol=select_tol(1, f), rtol=0)
    y = exact(cfg, rng.normal(0, 50, x.shape))
    got = run(mode, lambda a, b: tp.where(a > b, a, b * 2.0), p, sh(y)).reveal().numpy()
    np.testing.assert_allclose(got, np.where(x > y, x, 2 * y), atol=select_tol(1, f), rtol=0)
    got = run(mode, lambda a: tp.where(np.array(x > 0), a, 0.0), p).reveal().numpy()
    np.testing.assert_allclose(got, np.where(x > 0, x, 0.0), atol=2 * ulp(f), rtol=0)


def test_maximum_minimum(case, rng):
    cfg, mode = case.config, case.mode
    x, y = exact(cfg, rng.normal(0, 50, (4, 5))), exact(cfg, rng.normal(0, 50, (1, 5)))
    tol = select_tol(1, cfg.frac_bits)
    np.testing.assert_allclose(run(mode, tp.maximum, sh(x), sh(y)).reveal(), np.maximum(x, y),
                               atol=tol, rtol=0)
    np.testing.assert_allclose(run(mode, tf.minimum, sh(x), sh(y)).reveal(), np.minimum(x, y),
                               atol=tol, rtol=0)
    np.testing.assert_allclose(run(mode, lambda a: tp.maximum(a, 0.5), sh(x)).reveal(),
                               np.maximum(x, 0.5), atol=tol, rtol=0)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), (-1, False),
                                           ((0, 2), False)])
def test_reduce_max_min(case, rng, axis, keepdims):
    cfg, mode = case.config, case.mode
    x = exact(cfg, rng.normal(0, 50, (3, 7, 5)))
    tol = select_tol(7, cfg.frac_bits)  # tree depth <= ceil(log2(105))
    np.testing.assert_allclose(run(mode, lambda a: tp.reduce_max(a, axis, keepdims), sh(x))
                               .reveal(), x.max(axis=axis, keepdims=keepdims), atol=tol, rtol=0)
    np.testing.assert_allclose(run(mode, lambda a: tf.reduce_min(a, axis, keepdims), sh(x))
                               .reveal(), x.min(axis=axis, keepdims=keepdims), atol=tol, rtol=0)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_argmax_argmin(case, rng, axis):
    cfg, mode = case.config, case.mode
    x = exact(cfg, rng.permutation(60).reshape(4, 15) * 1.5 - 20)
    np.testing.assert_array_equal(run(mode, lambda a: tp.argmax(a, axis), sh(x)).reveal(),
                                  np.argmax(x, axis))
    np.testing.assert_array_equal(run(mode, lambda a: tp.argmin(a, axis), sh(x)).reveal(),
                                  np.argmin(x, axis))
    ties = np.zeros((3, 6))
    np.testing.assert_array_equal(tp.argmax(sh(ties), 1).reveal(), np.zeros(3))  # first wins


@pytest.mark.parametrize("n", [1, 2, 5, 16, 33])
def test_sort_and_top_k(case, rng, n):
    cfg, mode = case.config, case.mode
    x = exact(cfg, rng.normal(0, 50, (3, n)))
    tol = select_tol(max(1, len(batcher_pairs(max(n, 3)))), cfg.frac_bits)
    np.testing.assert_allclose(run(mode, tp.sort, sh(x)).reveal(), np.sort(x, -1), atol=tol,
                               rtol=0)
    np.testing.assert_allclose(
        run(mode, lambda a: tp.sort(a, 0, "DESCENDING"), sh(x)).reveal(),
        -np.sort(-x, 0), atol=tol, rtol=0)
    k = min(3, n)
    v, i = run(mode, lambda a: tp.math.top_k(a, k), sh(x))
    want_v, want_i = tf.math.top_k(x, k)
    np.testing.assert_allclose(v.reveal(), want_v, atol=tol, rtol=0)
    np.testing.assert_array_equal(i.reveal(), want_i)


@pytest.mark.parametrize("padding,ksize,strides", [("VALID", 2, 2), ("SAME", 3, 2),
                                                   ("VALID", 3, 1)])
def test_max_pool(case, rng, padding, ksize, strides):
    cfg, mode = case.config, case.mode
    x = exact(cfg, rng.normal(0, 50, (2, 6, 7, 3)))
    want = tf.nn.max_pool2d(x, ksize, strides, padding).numpy()
    tol = select_tol(4, cfg.frac_bits)  # tree over <= 9 taps
    got = run(mode, lambda a: tp.nn.max_pool2d(a, ksize, strides, padding), sh(x)).reveal()
    np.testing.assert_allclose(got, want, atol=tol, rtol=0)
    got = run(mode, lambda a: tp.nn.max_pool2d_relu(a, ksize, strides, padding), sh(x)).reveal()
    np.testing.assert_allclose(got, np.maximum(want, 0), atol=tol, rtol=0)


def test_bits_in_arithmetic(ring_case):
    cfg = ring_case.config
    x = exact(cfg, np.array([-2.0, 3.0, 0.5]))
    c = tp.greater(sh(x), 0.0)
    # a private bit is a fixed-point 0/1: count the positives
    np.testing.assert_allclose(tp.reduce_sum(c * 1.0).reveal(), 2.0, atol=encode_tol(20) * 3)


def test_pregarbled_comparisons(case):
    cfg, mode = case.config, case.mode
    if cfg.backend != "privpy":
        with pytest.raises(ValueError, match="privpy"):
            tp.garble_comparisons([3])
        return
    x = exact(cfg, np.array([-2.0, 0.0, 5.0, -1e-3, 7.5]))
    px = sh(x)
    g = tp.garble_comparisons([5])
    f = (lambda a: tp.less(a, 1.0, pregarbled=g)) if mode == "eager" else \
        tf.function(lambda a: tp.less(a, 1.0, pregarbled=g))
    np.testing.assert_array_equal(f(px).reveal(), x < 1.0)
    # single use, enforced in TF state: also a re-run of the same tf.function
    with pytest.raises(tf.errors.InvalidArgumentError, match="already used"):
        f(px)
    with pytest.raises(ValueError, match="for 5 comparisons, not 3"):
        tp.less(sh(x[:3]), 1.0, pregarbled=tp.garble_comparisons([5]))


def test_ops_are_not_converted_by_autograph():
    """Every tp op (the registry's implementations, hence tp.*, tp.nn.*,
    tp.math.*) is left alone by AutoGraph inside a user's tf.function, as TF's
    own APIs are: converting the protocol code made every trace about 3x
    slower. Fails on the code before opdef.accepting_variables was marked
    do_not_convert (only tp.sort's internals were)."""
    from tensorflow.python.autograph.impl.api import is_autograph_artifact
    from tf_privpy.protocols.mpc.api import registry
    impls = [op.impl for op in registry.ops() if op.impl is not None]
    assert impls and all(is_autograph_artifact(f) for f in impls), \
        [f.__name__ for f in impls if not is_autograph_artifact(f)]
    assert is_autograph_artifact(tp.reduce_max) and is_autograph_artifact(tp.nn.relu)


def test_autograph_converts_only_the_users_function():
    """Inside a user's tf.function with AutoGraph on, the only code AutoGraph
    generates is the user's own function, whether the ops are called by
    name or passed in as arguments (a default value, a Python argument).
    TF's trace types follow `__wrapped__`, so before
    opdef._without_wrapped an op passed as an argument reached the function
    as its bare implementation, and AutoGraph converted all of tp.exp's
    protocol code (15 s of trace for a 2x10 exp instead of 0.6 s): on that
    code this test lists tf__exp, tf___unary and others."""
    import sys
    tp.reset()
    tp.init(tp.Config(backend="plaintext"))
    try:
        x, v = sh([[0.5, -1.0]]), tp.Variable(tf.constant([[2.0, 3.0]], tf.float64))

        @tf.function(autograph=True)
        def user_fn(a, b, fn=tp.exp, other=None):
            return fn(a), other(b), tp.nn.relu(a)

        generated = set()

        def watch(frame, event, _):
            code = frame.f_code
            if (event == "call" and "__autograph_generated" in code.co_filename
                    and code.co_name.startswith("tf__")):  # not the module's factories
                generated.add(code.co_name)
        sys.setprofile(watch)
        try:
            e, r, relu = user_fn(x, v, other=tp.nn.relu)
        finally:
            sys.setprofile(None)
        assert generated == {"tf__user_fn"}, sorted(generated)
        np.testing.assert_allclose(r.reveal().numpy(), [[2.0, 3.0]])  # a variable read by the op
        np.testing.assert_allclose(e.reveal().numpy(), np.exp([[0.5, -1.0]]), rtol=1e-4)
        np.testing.assert_allclose(relu.reveal().numpy(), [[0.5, 0.0]])
    finally:
        tp.reset()


def test_tf_dispatch_of_nonlinear_functions(rng):
    """tf.* non-linear functions accept PrivateTensors (plaintext oracle: the
    protocols themselves are tested above and in test_numerics.py)."""
    tp.reset()
    tp.init(tp.Config(backend="plaintext"))
    try:
        x = np.array([[0.5, 2.0, 3.0], [1.5, 0.25, 4.0]])
        p = sh(x)
        for fn, want, tol in [
                (tf.math.exp, np.exp(x), 1e-4 * np.exp(x)), (tf.math.log, np.log(x), 1e-4),
                (tf.math.sqrt, np.sqrt(x), 1e-4 * np.sqrt(x)),
                (tf.math.rsqrt, 1 / np.sqrt(x), 1e-4 / np.sqrt(x)),
                (tf.math.reciprocal, 1 / x, 1e-4 / x), (tf.math.sigmoid, 1 / (1 + np.exp(-x)), 1e-4),
                (tf.math.tanh, np.tanh(x), 1e-4), (lambda a: a / a, np.ones_like(x), 1e-4),
                (tf.nn.softmax, np.exp(x) / np.exp(x).sum(-1, keepdims=True), 1e-4),
                (lambda a: tf.math.top_k(a, 2)[0], -np.sort(-x)[:, :2], 1e-5),
                (lambda a: tf.argmin(a, 1), np.argmin(x, 1), 0),
                (lambda a: tf.nn.max_pool2d(tf.reshape(a, [1, 2, 3, 1]), 2, 1, "VALID"),
                 tf.nn.max_pool2d(x.reshape(1, 2, 3, 1), 2, 1, "VALID").numpy(), 1e-5)]:
            got = fn(p)
            assert isinstance(got, tp.PrivateTensor)
            np.testing.assert_allclose(got.reveal(), want, atol=np.max(tol) + 1e-6, rtol=0)
        np.testing.assert_array_equal(tf.math.equal(p, 2.0).reveal(), x == 2.0)
    finally:
        tp.reset()
        tp.init()


@pytest.mark.parametrize("bits", [128, 64])
def test_big_batches_run_in_chunks(bits, mode):
    """Config.comparison_batch chunks the garbled comparator (pinned to that
    family; the bitwise family's chunks: tests/test_bitwise.py)."""
    tp.reset()
    tp.init(tp.Config(ring_bits=bits, comparison="garbled", comparison_batch=16))
    try:
        cfg = tp.get_runtime().config
        x = exact(cfg, np.random.default_rng(5).normal(0, 100, (5, 11)))
        px = sh(x)
        with tp.stats() as s:
            got = run(mode, lambda a: a < 1.0, px).reveal().numpy()
        np.testing.assert_array_equal(got, x < 1.0)
        # 55 comparisons in chunks of 16: 4 garbled batches, each one message
        # S1 -> T1 of tables and decoding bits and one of S1's labels
        assert s.links[("S1", "T1")][0] == 4 * 2
        assert s.comparisons == 55 and s.rounds == 4 * 2 + 1  # + the reveal
    finally:
        tp.reset()
        tp.init()
