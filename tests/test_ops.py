"""Every PrivateTensor operation against numpy, in both rings, eagerly and
inside tf.function, with the tolerances of tests/tolerances.py."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import case_fixtures, run
from tolerances import (encode_tol, linear_tol, matmul_tol, mul_tol, public_mul_tol,
                        ulp)

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])


def frac():
    return tp.get_runtime().config.frac_bits


def close(got, want, tol):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want)
    bad = err > tol
    assert not bad.any(), (f"max error {err.max():.3g} > tol at {np.argwhere(bad)[:3]}: "
                           f"got {got[bad][:3]} want {want[bad][:3]}")


def share64(a):
    return tp.share(tf.constant(a, tf.float64))


def test_share_reveal_roundtrip(ring_case, rng):
    ring = ring_case.ring
    x = rng.normal(0, 100, (3, 4))
    p = share64(x)
    assert p.shape == (3, 4) and p.dtype == tf.float64
    close(p.reveal(), x, encode_tol(frac()))
    # dtype is preserved: float32 and integers
    assert tp.reveal(tp.share(tf.constant([1.5], tf.float32))).dtype == tf.float32
    ints = tp.reveal(tp.share(tf.constant([-3, 0, 7], tf.int32)))
    assert ints.dtype == tf.int32 and ints.numpy().tolist() == [-3, 0, 7]


def test_edge_values_roundtrip(ring_case):
    ring = ring_case.ring
    cfg = tp.get_runtime().config
    u = ulp(cfg.frac_bits)
    b = cfg.bound
    edge = np.array([0.0, u, -u, u / 2, 1.0, -1.0, b - u, -(b - u), 123.456])
    close(share64(edge).reveal(), edge, encode_tol(cfg.frac_bits))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "neg"])
def test_elementwise_private(case, rng, op):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 10, (4, 5))
    y = rng.normal(0, 10, (4, 5))
    fns = {
        "add": (lambda a, b: a + b, x + y, linear_tol(frac())),
        "sub": (lambda a, b: a - b, x - y, linear_tol(frac())),
        "mul": (lambda a, b: a * b, x * y, mul_tol(x, y, frac())),
        "neg": (lambda a, b: -a, -x, encode_tol(frac())),
    }
    fn, want, tol = fns[op]
    close(run(mode, fn, share64(x), share64(y)).reveal(), want, tol)


def test_broadcasting(case, rng):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 5, (3, 1))
    y = rng.normal(0, 5, (1, 4))
    close(run(mode, lambda a, b: a * b, share64(x), share64(y)).reveal(), x * y,
          mul_tol(x * np.ones((1, 4)), y * np.ones((3, 1)), frac()))
    close(run(mode, lambda a, b: a + b, share64(x), share64(y)).reveal(), x + y,
          linear_tol(frac()))


def test_mixed_public(case, rng):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 10, (2, 3))
    c = rng.normal(0, 3, (2, 3))
    f = frac()
    p = share64(x)
    close(run(mode, lambda a: a + c, p).reveal(), x + c, linear_tol(f))
    close(run(mode, lambda a: c - a, p).reveal(), c - x, linear_tol(f))
    close(run(mode, lambda a: a - 2.5, p).reveal(), x - 2.5, linear_tol(f))
    close(run(mode, lambda a: a * c, p).reveal(), x * c, public_mul_tol(x, c, f))
    close(run(mode, lambda a: c * a, p).reveal(), x * c, public_mul_tol(x, c, f))
    # numpy on the left defers to PrivateTensor
    close((c * p).reveal(), x * c, public_mul_tol(x, c, f))
    close((c + p).reveal(), x + c, linear_tol(f))
    # Python floats are encoded from their exact (float64) value, not float32's:
    # float32(1000.1) is 3e-5 off, 32 ulps in the 128-bit ring
    close(run(mode, lambda a: a + 1000.1, p).reveal(), x + 1000.1, linear_tol(f))
    close(run(mode, lambda a: a * 1000.1, p).reveal(), x * 1000.1, public_mul_tol(x, 1000.1, f))
    assert (tp.share(np.float32([1.0])) + 1000.1).dtype == tf.float32   # TF's dtype rule


def test_divide_by_public(case, rng):
    # 2,000 values: a float32 reciprocal once cost up to 5 ulps on ~5 % of them
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 100, (2000,))
    f = frac()
    extra = f + 20 if tp.get_runtime().config.ring_bits == 128 else f
    for d in (3.0, 7.0, 1000.0):
        close(run(mode, lambda a: a / d, share64(x)).reveal(), x / d,
              public_mul_tol(x, 1 / d, f, extra))
    close(run(mode, lambda a: a / 0.25, share64(x)).reveal(), x / 0.25,
          public_mul_tol(x, 4.0, f))


def test_matmul_private(case, rng):
    ring, mode = case.ring, case.mode
    a = rng.normal(0, 3, (5, 7))
    b = rng.normal(0, 3, (7, 3))
    pa, pb = share64(a), share64(b)
    tol = matmul_tol(a, b, frac())
    close(run(mode, lambda u, v: u @ v, pa, pb).reveal(), a @ b, tol)
    close(run(mode, lambda u, v: tp.matmul(u, v), pa, pb).reveal(), a @ b, tol)
    close(run(mode, lambda u, v: tf.matmul(u, v), pa, pb).reveal(), a @ b, tol)
    close(run(mode, lambda u, v: tp.matmul(v, u, transpose_a=True, transpose_b=True),
              pa, pb).reveal(), (a @ b).T, tol.T)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("kinds", ["pp", "pc", "cp"])
def test_matmul_transposes(case, rng, ta, tb, kinds):
    """Every transpose combination, private or public operands, on skinny
    shapes where computing (op'(b)·op'(a))^T transposes less (a dense
    layer's gradient x^T·g); the product is the same."""
    ring, mode = case.ring, case.mode
    a = rng.normal(0, 2, (9, 4))            # op(a): 9x4, or 4x9 transposed
    b = rng.normal(0, 2, (9, 1) if ta else (4, 1))
    b = b.T if tb else b
    want = (a.T if ta else a) @ (b.T if tb else b)
    ops = [share64(a) if kinds[0] == "p" else a, share64(b) if kinds[1] == "p" else b]
    f = frac()
    tol = matmul_tol(a.T if ta else a, b.T if tb else b, f)
    tol = tol + np.abs(a.T if ta else a) @ np.abs(b.T if tb else b) * ulp(f) + ulp(f)
    got = run(mode, lambda u, v: tp.matmul(u, v, transpose_a=ta, transpose_b=tb), *ops)
    close(got.reveal(), want, tol)


def test_matmul_transposes_the_smaller_side():
    """x^T·g with x [128, 50] and g [128, 1] private: the graph transposes g
    and the [1, 50] result, never x (two 6,400-element copies per server)."""
    x = share64(np.ones((128, 50)))
    g = share64(np.ones((128, 1)))
    graph = tf.function(lambda u, v: tp.matmul(u, v, transpose_a=True).reveal()) \
        .get_concrete_function(x, g).graph
    sizes = [op.inputs[0].shape.num_elements() for op in graph.get_operations()
             if op.type == "Transpose"]
    assert sizes and max(sizes) <= 128 * 2, sizes


def test_matmul_batched_and_public(case, rng):
    ring, mode = case.ring, case.mode
    a = rng.normal(0, 2, (2, 3, 4))
    b = rng.normal(0, 2, (2, 4, 5))
    close(run(mode, lambda u, v: u @ v, share64(a), share64(b)).reveal(), a @ b,
          matmul_tol(a, b, frac()))
    w = rng.normal(0, 2, (4, 6))
    f = frac()
    tol = matmul_tol(a, w, f) + np.abs(a) @ np.ones_like(w) * ulp(f) / 2
    close(run(mode, lambda u: u @ w, share64(a)).reveal(), a @ w, tol)
    close(run(mode, lambda u: tf.matmul(w.T, u, transpose_b=True), share64(a)).reveal(),
          np.swapaxes(a @ w, -1, -2), np.swapaxes(tol, -1, -2))


def test_tensordot_dot_outer(case, rng):
    ring, mode = case.ring, case.mode
    a = rng.normal(0, 2, (3, 4, 5))
    b = rng.normal(0, 2, (5, 4, 2))
    want = np.tensordot(a, b, axes=[[1, 2], [1, 0]])
    got = run(mode, lambda u, v: tp.tensordot(u, v, [[1, 2], [1, 0]]), share64(a), share64(b))
    close(got.reveal(), want, matmul_tol(a.reshape(3, 20), b.transpose(1, 0, 2).reshape(20, 2),
                                         frac()))
    v1, v2 = rng.normal(0, 2, 6), rng.normal(0, 2, 6)
    close(run(mode, tp.dot, share64(v1), share64(v2)).reveal(), np.dot(v1, v2),
          matmul_tol(v1[None], v2[:, None], frac())[0, 0])
    close(run(mode, tp.outer, share64(v1), share64(v2)).reveal(), np.outer(v1, v2),
          matmul_tol(v1[:, None], v2[None], frac()))
    m = rng.normal(0, 2, (3, 6))
    close(run(mode, tp.dot, share64(m), share64(v1)).reveal(), m @ v1,
          matmul_tol(m, v1[:, None], frac())[:, 0])


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ((0, 2), False),
                                           (-1, False)])
def test_reductions(case, rng, axis, keepdims):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 10, (3, 4, 5))
    n = x.size if axis is None else np.prod(np.array(x.shape)[list(np.atleast_1d(axis))])
    got = run(mode, lambda a: tp.reduce_sum(a, axis, keepdims), share64(x))
    close(got.reveal(), x.sum(axis=axis, keepdims=keepdims), n * encode_tol(frac()))
    got = run(mode, lambda a: tf.reduce_sum(a, axis=axis, keepdims=keepdims), share64(x))
    close(got.reveal(), x.sum(axis=axis, keepdims=keepdims), n * encode_tol(frac()))
    got = run(mode, lambda a: tp.reduce_mean(a, axis, keepdims), share64(x))
    close(got.reveal(), x.mean(axis=axis, keepdims=keepdims),
          encode_tol(frac()) + np.abs(x).max() * ulp(frac()) + 2 * ulp(frac()))


def test_shape_ops(case, rng):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 10, (2, 3, 4))
    y = rng.normal(0, 10, (2, 3, 4))
    t = encode_tol(frac())
    cases = [
        (lambda a: tp.reshape(a, [6, 4]), x.reshape(6, 4)),
        (lambda a: tf.reshape(a, [4, -1]), x.reshape(4, -1)),
        (lambda a: tp.transpose(a), x.T),
        (lambda a: tf.transpose(a, [1, 0, 2]), x.transpose(1, 0, 2)),
        (lambda a: a[1], x[1]),
        (lambda a: a[:, 1:3, ::2], x[:, 1:3, ::2]),
        (lambda a: a[..., 0], x[..., 0]),
        (lambda a: a[0, ..., None], x[0, ..., None]),
        (lambda a: a[-1, :, -1], x[-1, :, -1]),
        (lambda a: tp.tile(a, [1, 2, 1]), np.tile(x, [1, 2, 1])),
        (lambda a: tp.repeat(a, 2, axis=1), np.repeat(x, 2, axis=1)),
        (lambda a: tp.repeat(a, 2), np.repeat(x, 2)),
        (lambda a: tp.expand_dims(a, -1), x[..., None]),
        (lambda a: tp.squeeze(tp.expand_dims(a, 0)), x),
        (lambda a: tf.squeeze(tp.expand_dims(a, 1), axis=1), x),
        (lambda a: tp.pad(a, [[0, 0], [1, 2], [0, 1]]), np.pad(x, [[0, 0], [1, 2], [0, 1]])),
        (lambda a: tp.gather(a, [2, 0], axis=1), x[:, [2, 0]]),
        (lambda a: tp.broadcast_to(a[:1], [3, 3, 4]), np.broadcast_to(x[:1], (3, 3, 4))),
    ]
    for fn, want in cases:
        close(run(mode, fn, share64(x)).reveal(), want, t)
    for fn, want in [
        (lambda a, b: tp.concat([a, b], axis=1), np.concatenate([x, y], 1)),
        (lambda a, b: tf.concat([a, b], axis=-1), np.concatenate([x, y], -1)),
        (lambda a, b: tp.stack([a, b], axis=1), np.stack([x, y], 1)),
        (lambda a, b: tf.stack([a, b]), np.stack([x, y])),
    ]:
        close(run(mode, fn, share64(x), share64(y)).reveal(), want, t)


@pytest.mark.parametrize("padding,strides", [("VALID", 1), ("SAME", 1), ("SAME", 2),
                                              ([[0, 0], [1, 0], [2, 1], [0, 0]], (2, 1))])
def test_conv2d(case, rng, padding, strides):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 2, (2, 7, 6, 3))
    w = rng.normal(0, 1, (3, 3, 3, 4))
    want = tf.nn.conv2d(x, w, strides, padding).numpy()
    # per-output error bound: sum over the window of |x| and |w| terms
    absconv = tf.nn.conv2d(np.abs(x), np.ones_like(w), strides, padding).numpy() + \
        tf.nn.conv2d(np.ones_like(x), np.abs(w), strides, padding).numpy()
    f = frac()
    tol = absconv * ulp(f) / 2 + 27 * ulp(f) ** 2 / 4 + 2 * ulp(f)
    got = run(mode, lambda a, b: tp.nn.conv2d(a, b, strides, padding), share64(x), share64(w))
    close(got.reveal(), want, tol)
    got = run(mode, lambda a: tp.nn.conv2d(a, w, strides, padding), share64(x))
    close(got.reveal(), want, tol + absconv * ulp(f))
    got = run(mode, lambda b: tp.nn.conv2d(x, b, strides, padding), share64(w))
    close(got.reveal(), want, tol + absconv * ulp(f))


@pytest.mark.parametrize("padding,ksize,strides", [("VALID", 2, 2), ("SAME", 3, 2), ("VALID", 3, 1)])
def test_avg_pool(case, rng, padding, ksize, strides):
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 10, (2, 6, 7, 3))
    want = tf.nn.avg_pool2d(x, ksize, strides, padding).numpy()
    got = run(mode, lambda a: tp.nn.avg_pool2d(a, ksize, strides, padding), share64(x))
    f = frac()
    close(got.reveal(), want, ksize * ksize * encode_tol(f) + 2 * ulp(f) +
          np.abs(want) * ksize * ksize * ulp(f))


def test_multiply_many(case, rng):
    ring, mode = case.ring, case.mode
    pairs = [(rng.normal(0, 5, (3, 2)), rng.normal(0, 5, (3, 2))),
             (rng.normal(0, 5, (4,)), rng.normal(0, 5, (4,))),
             (rng.normal(0, 5, (1, 4)), rng.normal(0, 5, (3, 1)))]

    def fn(*ps):
        return tuple(tp.multiply_many([(ps[0], ps[1]), (ps[2], ps[3]), (ps[4], ps[5])]))

    outs = run(mode, fn, *[share64(v) for p in pairs for v in p])
    for (a, b), out in zip(pairs, outs):
        aa, bb = np.broadcast_arrays(a, b)
        close(out.reveal(), a * b, mul_tol(aa, bb, frac()))


def test_multiply_many_is_one_protocol_call(ring_case, rng):
    ring = ring_case.ring
    xs = [share64(rng.normal(0, 1, (5,))) for _ in range(4)]
    with tp.stats() as s:
        tp.multiply_many([(xs[0], xs[1]), (xs[2], xs[3])])
    # one multiplication = 6 messages: S1->T1, S2->T1, S2->T2, S1->T2, T1->S2, T2->S1
    assert s.messages == 6 and s.rounds == 2 and s.multiplications == 10


def test_plaintext_backend_agrees(rng):
    """The plaintext backend (test oracle) gives the same results as privpy."""
    x = rng.normal(0, 5, (4, 4))
    y = rng.normal(0, 5, (4, 4))
    results = {}
    for backend in ("privpy", "plaintext"):
        tp.reset()
        tp.init(tp.Config(backend=backend))
        a, b = share64(x), share64(y)
        results[backend] = [(a * b + a).reveal().numpy(), (a @ b).reveal().numpy(),
                            tp.reduce_mean(a / 3.0, 0).reveal().numpy()]
    tp.reset()
    tp.init()
    for got, want in zip(results["privpy"], results["plaintext"]):
        # identical up to the truncation of each protocol (<= 2 ulps per product)
        close(got, want, 3 * ulp(20))


def test_scalar_and_empty(case):
    ring, mode = case.ring, case.mode
    s = run(mode, lambda a, b: a * b, share64(3.0), share64(-2.5))
    close(s.reveal(), -7.5, mul_tol(3.0, 2.5, frac()))
    e = run(mode, lambda a, b: a * b, share64(np.zeros((0, 3))), share64(np.zeros((0, 3))))
    assert e.reveal().shape == (0, 3)


def test_tf_api_dispatch(case, rng):
    """TensorFlow's own functions accept PrivateTensors (and mixed operands)."""
    ring, mode = case.ring, case.mode
    x = rng.normal(0, 5, (3, 4))
    c = tf.constant(rng.normal(0, 5, (3, 4)))
    f = frac()
    p = share64(x)
    cases = [
        (lambda a: tf.add(a, c), x + c.numpy(), linear_tol(f)),
        (lambda a: tf.add(c, a), x + c.numpy(), linear_tol(f)),
        (lambda a: c + a, x + c.numpy(), linear_tol(f)),
        (lambda a: tf.subtract(c, a), c.numpy() - x, linear_tol(f)),
        (lambda a: tf.multiply(a, a), x * x, mul_tol(x, x, f)),
        (lambda a: tf.multiply(c, a), x * c.numpy(), public_mul_tol(x, c.numpy(), f)),
        (lambda a: tf.negative(a), -x, encode_tol(f)),
        (lambda a: tf.reduce_mean(a, axis=1), x.mean(1),
         4 * encode_tol(f) + np.abs(x).max() * ulp(f) + 2 * ulp(f)),
        (lambda a: tf.expand_dims(a, 0), x[None], encode_tol(f)),
        (lambda a: tf.tile(a, [2, 1]), np.tile(x, [2, 1]), encode_tol(f)),
        (lambda a: tf.pad(a, [[1, 0], [0, 0]]), np.pad(x, [[1, 0], [0, 0]]), encode_tol(f)),
        (lambda a: tf.tensordot(a, a, [[1], [1]]), x @ x.T, matmul_tol(x, x.T, f)),
    ]
    for fn, want, tol in cases:
        close(run(mode, fn, p).reveal(), want, tol)
    assert isinstance(tf.matmul(p, tf.transpose(p)), tp.PrivateTensor)


def test_private_tensor_as_tf_function_signature(ring_case):
    """A PrivateTensor TypeSpec works in input_signature; one trace serves
    every call."""
    ring = ring_case.ring
    spec = tp.share(np.zeros((2, 2))).__class__.Spec
    p = tp.share(np.eye(2))

    @tf.function(input_signature=[tf.nest.map_structure(lambda t: t, p._type_spec)])
    def sq(a):
        return a @ a

    for k in (1.0, 2.0):
        close(sq(tp.share(np.eye(2) * k)).reveal(), np.eye(2) * k * k, 3 * ulp(frac()))
    assert sq.experimental_get_tracing_count() == 1
    assert spec is not None


def test_edge_products(case):
    """0, ±1 ulp, ±1 and the largest operands whose product stays in range."""
    ring, mode = case.ring, case.mode
    cfg = tp.get_runtime().config
    u = ulp(cfg.frac_bits)
    big = float(np.floor(np.sqrt(cfg.bound))) - 1
    vals = np.array([0.0, u, -u, 1.0, -1.0, 0.5, big, -big, big / 3, 2 * u])
    x, y = np.meshgrid(vals, vals)
    got = run(mode, lambda a, b: a * b, share64(x), share64(y)).reveal()
    close(got, x * y, mul_tol(x, y, cfg.frac_bits))
    got = run(mode, lambda a, b: a @ b, share64(x), share64(y)).reveal()
    close(got, x @ y, matmul_tol(x, y, cfg.frac_bits))
