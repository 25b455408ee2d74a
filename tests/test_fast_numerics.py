"""Fast-mode numerics (protocols/mpc/fixedpoint/fast_numerics.py, issue 14): each
function against numpy on its stated domain (edges included) in both rings,
eagerly and in tf.function, with the tolerances of tests/tolerances.py
(FAST_TOL); what happens outside the domains; and the three ways to select
the mode (per call, config, converter policy)."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.fixedpoint import fast_numerics as FN
from tf_privpy.protocols.mpc.fixedpoint import numerics as N

from conftest import case_fixtures, run
from tolerances import FAST_TOL, TRUNC_ULPS, ulp

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])

EXP_N = {128: 8, 64: 6}          # defaults.json: functions.exp.fast.iterations


def _sigmoid(v):
    return 0.5 * (1 + np.tanh(v / 2))


def _softmax(v):
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _check(got, want, tol, what, scale=None):
    kind, bound = tol
    got = np.asarray(got, np.float64)
    err = np.abs(got - want)
    if kind == "rel":
        err = err / (np.abs(want) if scale is None else scale)
    i = int(np.argmax(err))
    assert err.max() <= bound, (f"{what}: {kind} error {err.max():.3g} > {bound:g} at "
                                f"input #{i} (got {got.flat[i]:.7g}, want {want.flat[i]:.7g})")


def _cases(bits):
    """(name, tp function with mode="fast", reference, inputs [rows, cols])."""
    big = 1.8 * 2 ** EXP_N[bits]
    rng = np.random.default_rng(7)

    def grid(lo, hi, n=2000):
        return np.linspace(lo, hi, n).reshape(-1, 10)
    return [
        ("exp", lambda a: tp.exp(a, mode="fast"), np.exp, grid(-5, 5)),
        ("reciprocal", lambda a: tp.math.reciprocal(a, mode="fast"), lambda v: 1 / v,
         grid(0.5, 50)),
        ("sigmoid", lambda a: tp.sigmoid(a, mode="fast"), _sigmoid, grid(-big, big)),
        ("sigmoid", lambda a: tp.sigmoid(a, mode="fast"), _sigmoid, grid(-8, 8)),
        ("tanh", lambda a: tp.tanh(a, mode="fast"), np.tanh, grid(-big / 2, big / 2)),
        ("tanh", lambda a: tp.tanh(a, mode="fast"), np.tanh, grid(-4, 4)),
        ("log", lambda a: tp.math.log(a, mode="fast"), np.log, grid(0.05, 200)),
        ("sqrt", lambda a: tp.sqrt(a, mode="fast"), np.sqrt, grid(0.5, 50)),
        ("rsqrt", lambda a: tp.math.rsqrt(a, mode="fast"), lambda v: v ** -0.5, grid(0.5, 50)),
        ("softmax", lambda a: tp.nn.softmax(a, mode="fast"), _softmax,
         rng.uniform(-10, 10, (200, 10))),
        ("log_softmax", lambda a: tp.nn.log_softmax(a, mode="fast"),
         lambda v: np.log(_softmax(v)), rng.uniform(-10, 10, (200, 10))),
    ]


@pytest.fixture(scope="module")
def traced():
    """{(runtime, function name): tp.function}: sigmoid and tanh are checked
    on two domains of the same shape, and one trace serves both."""
    return {}


@pytest.mark.parametrize("i", range(11))
def test_fast_functions_on_their_domains(case, i, traced):
    ring, mode = case.ring, case.mode
    name, fn, ref, x = _cases(ring)[i]
    if mode == "tf_function":
        fn = traced.setdefault((tp.get_runtime().runtime, name), tp.function(fn))
        got = tp.reveal(fn(tp.share(x))).numpy()
    else:
        got = tp.reveal(run(mode, fn, tp.share(x))).numpy()
    _check(got, ref(x), FAST_TOL[ring][name], f"{name} ring {ring} {mode}")


def test_fast_divide(case):
    ring, mode = case.ring, case.mode
    rng = np.random.default_rng(3)
    y = np.concatenate([[0.5, 50.0], rng.uniform(0.5, 50, 998)]).reshape(-1, 10)
    x = rng.uniform(-10, 10, y.shape)
    got = tp.reveal(run(mode, lambda a, b: tp.divide(a, b, mode="fast"),
                        tp.share(x), tp.share(y))).numpy()
    # x·(1/y): the reciprocal's absolute error times |x|, and the last
    # product's truncation (TRUNC_ULPS)
    err = np.abs(got - x / y) - TRUNC_ULPS * ulp(tp.get_runtime().runtime.config.frac_bits)
    kind, bound = FAST_TOL[ring]["reciprocal"]
    assert np.all(err <= bound * np.maximum(np.abs(x), 1)), err.max()


def test_fast_exp_outside_its_relative_domain(ring_case):
    """Below -5 the error is absolute: within e^-5 times the relative bound
    down to -1.8·2^n (the base 1 + u + u²/2 <= 0.82 there); above 5 it grows
    as x^3/(6·4^n) up to ln B (the ring's range)."""
    ring = ring_case.ring
    n = EXP_N[ring]
    x = np.linspace(-1.8 * 2 ** n, -5, 1000)
    got = tp.reveal(tp.exp(tp.share(x), mode="fast")).numpy()
    kind, rel = FAST_TOL[ring]["exp"]
    assert np.abs(got - np.exp(x)).max() <= rel * np.exp(-5)
    hi = np.log(tp.get_runtime().runtime.config.bound) - 0.01
    x = np.linspace(5, hi, 200)
    got = tp.reveal(tp.exp(tp.share(x), mode="fast")).numpy()
    bound = hi ** 3 / (6 * 4.0 ** n)
    assert np.all(np.abs(got / np.exp(x) - 1) <= bound + rel), bound


def test_fast_reciprocal_outside_its_domain(ring_case):
    """(1 - q(x)^(2^k))/x everywhere: below lo it stays close to 1/x a while,
    then levels off at a finite value at 0 (no division by zero); the
    documented domain is [lo, hi]."""
    ring = ring_case.ring
    x = np.linspace(0.3, 0.5, 101)
    got = tp.reveal(tp.math.reciprocal(tp.share(x), mode="fast")).numpy()
    assert np.all(np.abs(got * x - 1) <= 1e-3)
    g, c, h, k = FN.recip_plan(0.5, 50.0, 1e-5)
    top = 2 ** (k + 1) * np.polynomial.polynomial.polyval(-c / h, g)
    got = tp.reveal(tp.math.reciprocal(tp.share(np.array([0.0, 1e-3, 0.01])),
                                       mode="fast")).numpy()
    assert np.all(np.isfinite(got)) and np.all(got >= 0) and np.all(got <= top + 1e-3), got


def test_fast_roots_plan_and_outside_their_domain(ring_case):
    """The plan reaches its relative error by the recurrence it assumes
    (checked here in float64 from the guess itself); sqrt(0) = 0 (g = x·y0)
    and 1 % outside [0.5, 50] stays close; further out it is wrong,
    as documented."""
    ring = ring_case.ring
    g, c, h, k = FN.rsqrt_plan(0.5, 50.0, 1e-5)
    x = np.linspace(0.5, 50, 20001)
    y = np.polynomial.polynomial.polyval((x - c) / h, g)
    gg, hh = x * y, y / 2
    for _ in range(k):
        r = 0.5 - gg * hh
        gg, hh = gg * (1 + r), hh * (1 + r)
    assert np.abs(gg / np.sqrt(x) - 1).max() <= 1e-5 and np.abs(2 * hh * np.sqrt(x) - 1).max() <= 1e-5
    v = np.array([0.0, 0.45, 50.5])
    got = tp.reveal(tp.sqrt(tp.share(v), mode="fast")).numpy()
    assert got[0] == 0 and np.all(np.abs(got[1:] / np.sqrt(v[1:]) - 1) <= 1e-3), got


def test_fast_sigmoid_saturates_within_its_domain(ring_case):
    ring = ring_case.ring
    big = 1.8 * 2 ** EXP_N[ring]
    got = tp.reveal(tp.sigmoid(tp.share(np.array([-big, -60.0, 60.0, big])),
                               mode="fast")).numpy()
    np.testing.assert_allclose(got, [0, 0, 1, 1], atol=FAST_TOL[ring]["sigmoid"][1])


def _cost(fn, x, **kw):
    b = tp.get_runtime().backend
    p = tp.share(x)
    return N.measure(b, lambda be, v: fn(be, v, **kw), (p.share0, p.share1))


def _comparisons(fn, x, **kw):
    return _cost(fn, x, **kw)["comparisons"]


def _fast_sigmoid(fn, x, **kw) -> bool:
    """Which sigmoid/tanh ran: both cost one comparison (fast: the sign;
    exact: one window-thresholds circuit for all breakpoints), but the exact
    piecewise polynomial takes 6 rounds (its circuit beside the products:
    docs/numerics.md), 10 under the default bitwise family (the breakpoints
    as one batch of bitwise comparisons), the fast one (exp's limit and a
    division) 24 or more."""
    rounds = _cost(fn, x, **kw)["rounds"]
    assert rounds <= 10 or rounds >= 20, rounds
    return rounds >= 20


def test_mode_per_call_and_comparison_counts(ring_case):
    ring = ring_case.ring
    x = np.linspace(0.5, 5, 20)
    for fn in (N.exp, N.reciprocal, N.log, N.sqrt, N.rsqrt):
        assert _comparisons(fn, x, mode="fast") == 0, fn.__name__
        assert _comparisons(fn, x, mode="exact") >= 1, fn.__name__
    for fn in (N.sigmoid, N.tanh):
        assert _comparisons(fn, x, mode="fast") == 1 and _fast_sigmoid(fn, x, mode="fast")
        assert not _fast_sigmoid(fn, x)                       # default: exact


def _init(**functions):
    tp.reset()
    tp.init(tp.Config(functions=functions))


def test_mode_from_the_config():
    x = np.linspace(0.5, 5, 20)
    try:
        _init(common={"mode": "fast"})
        assert _comparisons(N.exp, x) == 0 and _fast_sigmoid(N.sigmoid, x)
        assert _comparisons(N.exp, x, mode="exact") >= 1     # the call overrides
        assert _comparisons(N.sqrt, x) == 0 and _comparisons(N.rsqrt, x) == 0
        _init(exp={"mode": "fast"})
        assert _comparisons(N.exp, x) == 0 and not _fast_sigmoid(N.sigmoid, x)
        _init(common={"mode": "fast"}, exp={"mode": "exact"})
        assert _comparisons(N.exp, x) >= 1 and _fast_sigmoid(N.sigmoid, x)
        # a fast setting overridden in the config: a narrower reciprocal domain
        _init(reciprocal={"mode": "fast", "fast": {"domain": [1.0, 10.0]}})
        got = tp.reveal(tp.math.reciprocal(tp.share(np.array([1.0, 3.0, 10.0])))).numpy()
        np.testing.assert_allclose(got, [1, 1 / 3, 0.1], atol=FAST_TOL[128]["reciprocal"][1])
    finally:
        tp.reset()
        tp.init()


def test_bad_mode_names_raise():
    x = tp.share([1.0, 2.0])
    with pytest.raises(ValueError, match="unknown numerics mode 'quick' for exp.*'fast'"):
        tp.exp(x, mode="quick")
    with pytest.raises(ValueError, match="Policy.numerics_mode must be"):
        tp.Policy(numerics_mode="quick")
    try:
        _init(common={"mode": "Fast"})
        with pytest.raises(ValueError, match="unknown numerics mode 'Fast' for sigmoid"):
            tp.sigmoid(tp.share([1.0]))
    finally:
        tp.reset()
        tp.init()
    with pytest.raises(ValueError, match="domain 0 < lo < hi"):
        FN.recip_plan(0.0, 10.0, 1e-5)


def test_converter_policy_selects_the_mode():
    """Policy(numerics_mode=...) reaches the converted sigmoid and softmax
    (the cost bill's comparisons tell the modes apart)."""
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3),
                                 tf.keras.layers.Activation("sigmoid"),
                                 tf.keras.layers.Dense(5, activation="softmax")])
    x = np.random.default_rng(0).uniform(-1, 1, (8, 4)).astype(np.float32)
    want = model(x).numpy()
    bills = {}
    for m in ("exact", "fast"):
        # the garbled family: one circuit counts one comparison per element
        # (under the bitwise one the breakpoints are 13 comparisons each)
        pm = tp.keras.convert(model, policy=tp.Policy(numerics_mode=m, comparison="garbled"))
        bills[m] = pm.cost(8).comparisons
        got = pm.predict(x, reveal=True).numpy()
        np.testing.assert_allclose(got, want, atol=2 * FAST_TOL[128]["softmax"][1] + 1e-4)
    # fast: one sign per sigmoid element and the softmax's max tree (4 per
    # row of 5), no range reduction; exact: one window-thresholds circuit per
    # sigmoid element, the same tree, and the range reductions of exp (one
    # circuit per element) and of the row sums' reciprocal (one leading-one
    # circuit per row)
    assert bills["fast"] == 8 * 3 + 8 * 4, bills
    assert bills["exact"] == 8 * 3 + 8 * 4 + 8 * 5 + 8, bills


def test_training_policy_selects_the_mode():
    """convert_training under Policy(numerics_mode=...): the LR step's
    sigmoid costs one comparison per example in either mode (fast: the sign;
    exact: one window-thresholds circuit) but more rounds in fast mode (exp's
    limit and a division against a degree-4 polynomial), and one
    step moves the weights as the exact one does, up to lr·|x|·(the fast
    sigmoid's error) per weight."""
    tf.keras.utils.set_random_seed(0)
    model = tp.models.logistic_regression(4)
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (8, 4)).astype(np.float32)
    y = (rng.uniform(size=(8, 1)) > 0.5).astype(np.float32)
    bills, weights = {}, {}
    for m in ("exact", "fast"):
        w0 = model.get_weights()
        trainer = tp.keras.convert_training(model, tf.keras.losses.BinaryCrossentropy(),
                                            tf.keras.optimizers.SGD(0.1),
                                            policy=tp.Policy(numerics_mode=m,
                                                             comparison="garbled"))
        c = trainer.cost(8)
        bills[m] = (c.comparisons, c.rounds > 20)
        trainer.step(x, y)
        weights[m] = np.concatenate([np.ravel(v) for v in trainer.weights(reveal=True)])
        model.set_weights(w0)
    assert bills == {"exact": (8, False), "fast": (8, True)}, bills
    tol = 0.1 * (FAST_TOL[128]["sigmoid"][1] + 1e-4) + 4 * ulp(20)
    np.testing.assert_allclose(weights["fast"], weights["exact"], atol=tol)
