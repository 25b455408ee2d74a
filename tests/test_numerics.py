"""Private non-linear functions (protocols/mpc/api/ops/math_fns.py,
protocols/mpc/fixedpoint/numerics.py): accuracy targets over their domains,
out-of-domain rules, settings and overrides, shapes, and the rounds/costs
published in docs/numerics.md.

Both rings and both backends. The 128-bit targets are the issue's; the
64-bit bounds (no enforced target: 16 fractional bits, no extra precision)
are twice the errors measured in docs/numerics.md (sigmoid, tanh, erf: twice
the maxima of 1.2 million points, functions.common.power_range's _why; with
power_range 1 they measure 1.6e-3, 4.3e-3, 9.7e-4 and fail here). Inputs lie on the
fixed-point grid so that the errors measured are the functions' own.
"""
import math
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import activate_runtime, run
from tf_privpy.protocols.mpc.api.ops import math_fns as M
from tf_privpy.protocols.mpc.bitwise import protocol as bitwise
from tf_privpy.protocols.mpc.bitwise import backend as BW
from tf_privpy.protocols.mpc.bitwise import leading_one as BL
from tf_privpy.protocols.mpc.privpy import leading_one as LO
from tf_privpy.protocols.mpc.fixedpoint import lifted as L
from tf_privpy.protocols.mpc.fixedpoint import numerics as N
from tf_privpy.protocols.mpc.fixedpoint import series as S
from tf_privpy.protocols.mpc.runtime import cost as C
from tf_privpy.protocols.mpc.fixedpoint import range_reduction as R
from tolerances import ulp, wrapped_points_allowed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_numerics_doc as G  # noqa: E402

BACKENDS = ["plaintext", "privpy"]


@pytest.fixture(params=[(r, b) for r in (128, 64) for b in BACKENDS],
                ids=lambda p: f"ring{p[0]}-{p[1]}")
def rt(request):
    """backend x ring on the session's runtimes (conftest.activate_runtime)."""
    ring, backend = request.param
    activate_runtime(request.config, backend, ring)
    return ring


@pytest.fixture(params=BACKENDS)
def rt128(request):
    activate_runtime(request.config, request.param, 128)
    return 128


def frac():
    return tp.get_runtime().config.frac_bits


def share(a, dtype=tf.float64):
    return tp.share(tf.constant(a, dtype))


def on_grid(x):
    f = frac()
    return np.round(np.asarray(x, np.float64) * 2.0 ** f) / 2.0 ** f


# (rel, ulps) for "rel or ulps" targets, abs for abs targets; per ring
TARGETS = {
    128: {"exp": ("rel", 1e-4, 2), "reciprocal": ("rel", 1e-4, 2), "divide": ("rel", 1e-4, 2),
          "sqrt": ("rel", 1e-4, 2), "rsqrt": ("rel", 1e-4, 2), "log": ("abs", 1e-4),
          "sigmoid": ("abs", 1e-4), "tanh": ("abs", 1e-4), "erf": ("abs", 1e-4),
          "softmax": ("abs", 1e-4),
          "log_softmax": ("abs", 1e-4)},
    64: {"exp": ("rel", 1e-3, 8), "reciprocal": ("rel", 1e-3, 8), "divide": ("rel", 1e-3, 8),
         "sqrt": ("rel", 1e-3, 8), "rsqrt": ("rel", 1e-3, 8), "log": ("abs", 2e-4),
         "sigmoid": ("abs", 4e-4), "tanh": ("abs", 7e-4), "erf": ("abs", 3e-4),
         "softmax": ("abs", 3e-4),
         "log_softmax": ("abs", 5e-4)},
}


def check(got, want, target, what="", wraps=False):
    """Every point within target; `wraps`: a whole-domain check, where the
    64-bit ring may wrap a few points (tolerances.wrapped_points_allowed:
    none in the 128-bit ring)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    err = np.abs(got - want)
    if target[0] == "abs":
        bad = err > target[1]
    else:
        bad = (err > target[1] * np.abs(want)) & (err > target[2] * ulp(frac()))
    allowed = wrapped_points_allowed(bad.size, tp.get_runtime().config.ring_bits) if wraps else 0
    if bad.any() and bad.sum() <= allowed:
        print(f"\n{what}: {bad.sum()} of {bad.size} points wrapped (at most {allowed} allowed "
              f"in this ring): errors {err[bad]}")
    assert bad.sum() <= allowed, (
        f"{what}: {bad.sum()} points off target {target} ({allowed} allowed); worst at "
        f"x-index {np.argmax(err)}: err {err.max():.3g}, got "
        f"{got.ravel()[np.argmax(err)]}, want {want.ravel()[np.argmax(err)]}")


def test_check_allows_only_the_documented_wraps(rt):
    """check()'s allowance for whole-domain checks: in the 64-bit ring 3
    wrapped points of 3,001 pass (P(more) < 1e-6 at RING64_WRAP_RATE) and a
    4th fails; in the 128-bit ring one fails; without `wraps` one fails."""
    want = np.linspace(1.0, 2.0, 3001)
    for n_bad in (1, 3, 4):
        got = want.copy()
        got[:n_bad * 700:700] += 2.0 ** 32        # a wrapped truncation's error
        if n_bad <= wrapped_points_allowed(want.size, rt):
            check(got, want, TARGETS[rt]["exp"], "wrapped", wraps=True)
        else:
            with pytest.raises(AssertionError, match="points off target"):
                check(got, want, TARGETS[rt]["exp"], "wrapped", wraps=True)
        with pytest.raises(AssertionError, match="points off target"):
            check(got, want, TARGETS[rt]["exp"], "wrapped")
    assert wrapped_points_allowed(want.size, 64) == 3 and wrapped_points_allowed(want.size, 128) == 0


DOMAIN_CASES = [
    ("exp", M.exp, np.exp, lambda: np.linspace(-20, 10, 3001)),
    ("reciprocal", M.reciprocal, lambda x: 1 / x, lambda: np.geomspace(1e-3, 1e4, 3001)),
    ("reciprocal", M.reciprocal, lambda x: 1 / x, lambda: -np.geomspace(1e-3, 1e4, 1001)),
    ("sqrt", M.sqrt, np.sqrt, lambda: np.geomspace(1e-3, 1e4, 3001)),
    ("rsqrt", M.rsqrt, lambda x: 1 / np.sqrt(x), lambda: np.geomspace(1e-3, 1e4, 3001)),
    ("log", M.log, np.log, lambda: np.geomspace(1e-3, 1e4, 3001)),
    ("sigmoid", M.sigmoid, G._sig, lambda: np.linspace(-30, 30, 3001)),
    ("tanh", M.tanh, np.tanh, lambda: np.linspace(-30, 30, 3001)),
    ("erf", M.erf, np.vectorize(math.erf), lambda: np.linspace(-30, 30, 3001)),
]


@pytest.mark.parametrize("name,fn,ref,xs", DOMAIN_CASES,
                         ids=[c[0] + ("_neg" if i == 2 else "") for i, c in
                              enumerate(DOMAIN_CASES)])
def test_domain_targets(rt, name, fn, ref, xs):
    x = on_grid(xs())
    check(fn(share(x)).reveal(), ref(x), TARGETS[rt][name], name, wraps=True)


def test_sqrt_and_rsqrt_from_one_range_reduction(rt):
    """tp.math.sqrt_and_rsqrt: both roots within sqrt's and rsqrt's targets
    on their domain, 0 at x <= 0, for little more than one root's bytes
    (one leading-one circuit: Adam's update, converters/optimizers.py)."""
    x = on_grid(np.concatenate([np.geomspace(1e-3, 1e4, 1001), [0.0, -2.0]]))
    s, r = M.sqrt_and_rsqrt(share(x))
    pos = x > 0
    check(s.reveal().numpy()[pos], np.sqrt(x[pos]), TARGETS[rt]["sqrt"], "sqrt", wraps=True)
    check(r.reveal().numpy()[pos], 1 / np.sqrt(x[pos]), TARGETS[rt]["rsqrt"], "rsqrt",
          wraps=True)
    np.testing.assert_array_equal(s.reveal().numpy()[~pos], 0)
    np.testing.assert_array_equal(r.reveal().numpy()[~pos], 0)
    v = share(x[:100])
    both, one = tp.cost(M.sqrt_and_rsqrt, v), tp.cost(M.sqrt, v)
    assert both.rounds == one.rounds and both.comparisons == one.comparisons
    if rt == 128 and tp.get_runtime().config.backend == "privpy":
        # measured 3.5 against 2.5 KB an element with the leading one
        # decomposed (7.2 against 6.2 with it garbled); apart, 5.0
        assert both.bytes < 1.5 * one.bytes


def test_divide_private(rt, rng):
    x = on_grid(rng.uniform(-10, 10, 2000))
    y = on_grid(np.geomspace(0.01, 100, 2000) * rng.choice([-1.0, 1.0], 2000))
    check(M.divide(share(x), share(y)).reveal(), x / y, TARGETS[rt]["divide"], "divide",
          wraps=True)
    # public numerator, public divisor
    check(M.divide(3.0, share(y[:50])).reveal(), 3.0 / y[:50], TARGETS[rt]["divide"])
    check(M.divide(share(x[:50]), 4.0).reveal(), x[:50] / 4.0, ("abs", 2 * ulp(frac())))


@pytest.mark.parametrize("fn,ref,name", [(M.softmax, G._softmax, "softmax"),
                                         (M.log_softmax, G._log_softmax, "log_softmax")])
def test_softmax_range_30(rt, rng, fn, ref, name):
    x = on_grid(rng.uniform(-15, 15, (300, 10)))
    x[:, 0] = 15.0  # inputs spanning the full range 30
    x[:, 1] = -15.0
    check(fn(share(x)).reveal(), ref(x), TARGETS[rt][name], name, wraps=True)


def test_softmax_axes_and_shapes(rt128, rng, mode):
    x = on_grid(rng.normal(0, 4, (3, 5, 4)))
    got = run(mode, lambda a: tp.nn.softmax(a, axis=1), share(x)).reveal()
    check(got, np.moveaxis(G._softmax(np.moveaxis(x, 1, -1)), -1, 1), ("abs", 1e-4),
          "softmax axis 1")
    got = run(mode, lambda a: tp.nn.log_softmax(a, axis=0), share(x)).reveal()
    want = np.moveaxis(G._log_softmax(np.moveaxis(x, 0, -1)), -1, 0)
    check(got, want, ("abs", 1e-4), "log_softmax axis 0")
    # one element per row: softmax 1, log_softmax 0
    one = share(on_grid(rng.normal(0, 3, (4, 1))))
    check(M.softmax(one).reveal(), np.ones((4, 1)), ("abs", 1e-4))
    check(M.log_softmax(one).reveal(), np.zeros((4, 1)), ("abs", 1e-4))


# tp.math.*, as a user's tf.function calls them (left alone by AutoGraph)
@pytest.mark.parametrize("fn,ref", [(tp.math.exp, np.exp), (tp.math.sigmoid, G._sig),
                                    (tp.math.tanh, np.tanh), (tp.math.log, np.log),
                                    (tp.math.sqrt, np.sqrt),
                                    (tp.math.rsqrt, lambda v: v ** -0.5),
                                    (tp.math.reciprocal, lambda v: 1 / v)])
def test_shapes_dtypes_and_tf_function(rt128, mode, rng, fn, ref):
    x = on_grid(rng.uniform(0.1, 5, (2, 3, 4)))
    got = run(mode, fn, share(x, tf.float32))
    assert got.shape == (2, 3, 4) and got.dtype == tf.float32
    check(got.reveal(), ref(x), ("abs", 2e-4 * max(1.0, np.abs(ref(x)).max())))
    ints = fn(tp.share(tf.constant([[1, 2], [3, 4]], tf.int32)))
    assert ints.dtype == tf.float64  # non-linear functions of integers are real


def test_bad_inputs(rt):
    f = frac()
    u = ulp(f)
    bound = tp.get_runtime().config.bound
    zero_tol = ("abs", 1.0 * u)
    # reciprocal and division by zero: 0
    check(M.reciprocal(share([0.0, 0.0])).reveal(), [0.0, 0.0], zero_tol, "1/0")
    check(M.reciprocal(share([0.0, -2.0]), signed=False).reveal(), [0.0, 0.0], zero_tol,
          "unsigned 1/x for x <= 0")
    check(M.divide(share([5.0, -3.0]), share([0.0, 0.0])).reveal(), [0.0, 0.0], zero_tol, "x/0")
    # sqrt and rsqrt of non-positive values: 0
    neg = share([-5.0, -u, 0.0, -(bound - 1)])
    check(M.sqrt(neg).reveal(), np.zeros(4), zero_tol, "sqrt(x <= 0)")
    check(M.rsqrt(neg).reveal(), np.zeros(4), zero_tol, "rsqrt(x <= 0)")
    # log of non-positive values: ln(2^-(f+1)), half an ulp
    check(M.log(neg).reveal(), np.full(4, -(f + 1) * math.log(2)), ("abs", 1e-4), "log(x<=0)")
    # exp saturates: 0 below one ulp, B = 2^floor(log2 B) above
    cap = 2.0 ** math.floor(math.log2(bound))
    lo = -(f + 1) * math.log(2)
    hi = math.floor(math.log2(bound)) * math.log(2) + 0.01
    got = M.exp(share([lo, -30.0, -(bound - 1), hi, bound - 1])).reveal().numpy()
    np.testing.assert_allclose(got, [0.0, 0.0, 0.0, cap, cap], atol=u)
    # sigmoid/tanh saturate exactly, even at the bound (powers wrap, times an exact 0)
    big = share([-(bound - 1), -1000.0, -11.5, 11.0, 1000.0, bound - 1])
    np.testing.assert_array_equal(M.sigmoid(big).reveal().numpy(), [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(M.tanh(big).reveal().numpy(), [-1, -1, -1, 1, 1, 1])


def test_smallest_and_largest_inputs(rt):
    f = frac()
    u = ulp(f)
    bound = tp.get_runtime().config.bound
    x = on_grid([u, 2 * u, 3 * u, bound / 2, bound - 1])
    tol = ("rel", 1e-3, 2 if rt == 128 else 4)  # truncation floors: up to 4 ulps low at f=16
    check(M.reciprocal(share(x)).reveal(), 1 / x, tol, "reciprocal extremes")
    check(M.sqrt(share(x)).reveal(), np.sqrt(x), tol, "sqrt extremes")
    check(M.log(share(x)).reveal(), np.log(x), ("abs", 1e-3), "log extremes")


def test_settings_and_overrides(rt128):
    x = on_grid(np.geomspace(0.01, 100, 400))
    p = share(x)
    err = lambda got, want: np.max(np.abs(got.reveal().numpy() - want) / np.abs(want))  # noqa
    # fewer iterations, worse reciprocal: (1/3)^(2^k) decides
    e1 = err(M.reciprocal(p, iterations=1), 1 / x)
    e2 = err(M.reciprocal(p, iterations=2), 1 / x)
    e4 = err(M.reciprocal(p), 1 / x)
    assert e1 > 0.05 and 5e-3 < e2 < 0.02 and e4 < 1e-4, (e1, e2, e4)
    # classic Newton: same iterates, two rounds each
    assert err(M.reciprocal(p, method="newton"), 1 / x) < 1e-4
    with pytest.raises(ValueError, match="unknown reciprocal method"):
        M.reciprocal(p, method="bisection")
    # lower degree, worse exp
    xe = on_grid(np.linspace(-3, 3, 400))
    assert err(M.exp(share(xe), degree=2), np.exp(xe)) > 1e-3
    assert err(M.exp(share(xe)), np.exp(xe)) < 1e-4
    # per-runtime settings through tp.Config(functions=...)
    backend = tp.get_runtime().config.backend
    tp.reset()
    tp.init(tp.Config(ring_bits=128, backend=backend,
                      functions={"reciprocal": {"iterations": 1}}))
    assert err(M.reciprocal(share(x)), 1 / x) > 0.05


def test_type_errors(rt128):
    with pytest.raises(TypeError, match="PrivateTensor"):
        M.exp(tf.constant([1.0]))


def _doc_costs():
    text = open(os.path.join(ROOT, "docs", "numerics.md")).read()
    rows, methods = {}, {}
    for line in text.splitlines():
        m = re.match(r"\| (.+?) \| `(.+?)` \| (\d+) \((\d+) \+ (\d+)\) \| "
                     r"(\d+) \((\d+) \+ (\d+)\) \| (\S+) / (\S+) \| (\S+) / (\S+) \|", line)
        if m:
            g = m.groups()
            rows[g[0]] = {128: (int(g[2]), int(g[3]), int(g[4]), float(g[8]), float(g[10])),
                          64: (int(g[5]), int(g[6]), int(g[7]), float(g[9]), float(g[11]))}
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        k = len(G.RANGE_REDUCTIONS)
        if len(cells) == 1 + 3 * k and all(re.fullmatch(r"\S+ / \S+", c) for c in cells[1:]):
            pairs = [tuple(float(v) for v in c.split(" / ")) for c in cells[1:]]
            methods[cells[0]] = {m: {ring: (pairs[i][r], pairs[k + i][r], pairs[2 * k + i][r])
                                     for r, ring in enumerate((128, 64))}
                                 for i, m in enumerate(G.RANGE_REDUCTIONS)}
    return rows, methods


def test_published_costs_match_instrumentation():
    """docs/numerics.md's rounds and per-element counts are what the code does,
    for the defaults and for both range reductions."""
    doc, methods = _doc_costs()
    assert set(doc) == {e[0] for e in G.FUNCTIONS}
    assert set(methods) == {e[0] for e in G.FUNCTIONS if any(k in e[0] for k in G.REDUCED)}
    try:
        for name in doc:
            for ring in (128, 64):
                c = G.costs(name, ring)
                got = (c["rounds"], c["mul_rounds"], c["cmp_rounds"], c["comparisons"],
                       c["products"])
                assert got == pytest.approx(doc[name][ring]), (name, ring, got, doc[name][ring])
        for name in methods:
            for m in G.RANGE_REDUCTIONS:
                for ring in (128, 64):
                    c = G.costs(name, ring, range_reduction=m)
                    got = (c["rounds"], c["comparisons"], c["products"])
                    assert got == pytest.approx(methods[name][m][ring], abs=0.051), \
                        (name, m, ring, got)
    finally:
        tp.reset()
        tp.init()
    # the round budget: fewer than PrivPy's 50 for sigmoid; 3 with the
    # default "piecewise_poly" (one window-thresholds circuit), 4 folded
    # the breakpoints' comparisons (one bitwise batch, 8 rounds, under the
    # default family) beside the powers, then the selection
    limit = bitwise.BITWISE_ROUNDS + 2
    assert doc["sigmoid"][128][0] <= limit and doc["tanh"][128][0] <= limit


def test_rounds_are_the_critical_path():
    """The tracker counts parallel work once and refuses unknown values."""
    tp.reset()
    tp.init(tp.Config(ring_bits=128, backend="plaintext"))
    try:
        b = tp.get_runtime().backend
        x = share([1.0, 2.0])
        s = (x.share0, x.share1)

        def two_parallel_then_one(be, v):
            a, c = be.mul_many([(v, v), (v, v)])
            d = be.ltz(v)                       # in parallel with the products
            return be.mul(be.add(a, c), d)

        m = N.measure(b, two_parallel_then_one, s)
        # 2 per mul; the comparison (the default bitwise family's 8 rounds)
        # is longer than the products beside it: it, then the last product
        r = N.FAMILY_ROUNDS["bitwise"]
        assert (m["rounds"], m["mul_rounds"], m["cmp_rounds"]) == (r + 2, 2, r)
        assert m["products"] == 3 and m["comparisons"] == 1
        tr = N.CostTracker(b)
        with pytest.raises(KeyError, match="unknown origin"):
            tr.mul(s, s)
    finally:
        tp.reset()
        tp.init()


# ------------------------------------------------------------ range reduction
RANGE_REDUCTIONS = ["binary_search", "thresholds", "leading_one"]
#: the functions whose range reduction is the leading-one circuit under
#: "leading_one" (log: plus one comparison); exp's pieces take the
#: window-thresholds circuit under it
OCTAVE_FNS = ("reciprocal", "divide", "sqrt", "rsqrt", "log")


def _init_rr(ring, backend, rr):
    tp.reset()
    tp.init(tp.Config(ring_bits=ring, backend=backend,
                      functions={k: {"range_reduction": rr} for k in G.REDUCED}))


@pytest.fixture(params=[(r, m) for r in (128, 64) for m in RANGE_REDUCTIONS],
                ids=lambda p: f"ring{p[0]}-{p[1]}")
def rt_rr(request):
    """The privpy runtime with every range reduction set to one method."""
    ring, rr = request.param
    _init_rr(ring, "privpy", rr)
    yield ring
    tp.reset()
    tp.init()


REDUCED_CASES = [(c, c[0] + ("_neg" if i == 2 else "")) for i, c in enumerate(DOMAIN_CASES)
                 if c[0] in G.REDUCED]


@pytest.mark.parametrize("name,fn,ref,xs", [c for c, _ in REDUCED_CASES],
                         ids=[i for _, i in REDUCED_CASES])
def test_domain_targets_both_range_reductions(rt_rr, name, fn, ref, xs):
    """Every method meets the targets (the defaults are also tested above,
    on both backends); a third of the grid of test_domain_targets."""
    x = on_grid(xs()[::3])
    check(fn(share(x)).reveal(), ref(x), TARGETS[rt_rr][name], name, wraps=True)


def test_piece_boundaries(rt_rr):
    """Where a binary search's later levels could misplace an element: the
    octave boundaries 2^j and 2^(j -/+ 1/2) (log) and one or two ulps around
    them, over the whole range, and t = x·log2 e next to every integer (exp).
    Each point repeated, as the shares (and truncation errors) differ."""
    ring = rt_rr
    f, u = frac(), ulp(frac())
    bound = tp.get_runtime().config.bound
    js = np.arange(-f, int(math.log2(bound)))
    x = np.concatenate([2.0 ** js + d for d in (-u, 0.0, u)] +
                       [2.0 ** (js + h) + d for h in (-0.5, 0.5) for d in (-u, 0.0, u)])
    x = np.tile(np.unique(on_grid(x[(x >= u) & (x < bound)])), 4)
    xs = share(x)
    # 1/x in range with room: in the 64-bit ring a product near 2^15 fails local
    # truncation with probability ~2^-17 (README), which is not what this tests
    xr = x[1 / x < bound / 8]
    rel = TARGETS[ring]["reciprocal"]
    check(M.reciprocal(share(xr)).reveal(), 1 / xr, rel, "reciprocal at octave boundaries")
    check(M.reciprocal(share(-xr)).reveal(), -1 / xr, rel, "reciprocal at -boundaries")
    check(M.sqrt(xs).reveal(), np.sqrt(x), TARGETS[ring]["sqrt"], "sqrt at boundaries")
    check(M.rsqrt(xs).reveal(), x ** -0.5, TARGETS[ring]["rsqrt"], "rsqrt at boundaries")
    check(M.log(xs).reveal(), np.log(x), TARGETS[ring]["log"], "log at boundaries")
    ks = np.arange(-f - 1, int(math.log2(bound)) + 1)
    xe = on_grid(np.concatenate([ks * math.log(2) + d for d in (-2 * u, -u, 0.0, u, 2 * u)]))
    t = on_grid(on_grid(xe) * math.log2(math.e))                   # what the protocol compares
    hi = math.floor(math.log2(bound))
    want = np.where(t < -f, 0.0, np.where(t >= hi, 2.0 ** hi, np.exp(xe)))
    keep = (want < bound / 8) | (t >= hi)                          # as for reciprocal
    xe, want = xe[keep], want[keep]
    got = M.exp(share(np.tile(xe, 4))).reveal().numpy()
    check(got, np.tile(want, 4), TARGETS[ring]["exp"], "exp at piece boundaries")


def test_smallest_log_input_both_methods(rt_rr):
    """log(1 ulp): the thresholds' boundary 2^(-f+1/2) = 1.41 ulp is rounded up
    to the grid (2 ulps), not to the nearest point (1 ulp), which misplaced
    x = 1 ulp into the octave above (error 2.8e-4) before."""
    f = frac()
    x = np.full(8, ulp(f))
    check(M.log(share(x)).reveal(), np.log(x), TARGETS[rt_rr]["log"], "log(ulp)")


# comparisons per element: binary search / thresholds, from protocols/defaults.json's
# ring parameters (128: octaves 2^-20..2^22, 43 pieces; 64: 2^-16..2^14, 31 pieces)
EXPECTED_COMPARISONS = {
    128: {"exp": (7, 23), "reciprocal": (8, 86), "divide": (8, 86), "sqrt": (7, 43),
          "rsqrt": (7, 43), "log": (7, 44)},
    64: {"exp": (7, 17), "reciprocal": (8, 62), "divide": (8, 62), "sqrt": (7, 31),
         "rsqrt": (7, 31), "log": (7, 32)},
}


@pytest.mark.parametrize("ring", [128, 64])
def test_range_reduction_comparison_counts(ring):
    """CostTracker's comparisons per element: ~log2(#octaves) + 1 with binary
    search instead of one per octave boundary, and one comparison round per
    level (the critical path has at most as many rounds as levels + 2)."""
    try:
        for name, (want_bs, want_th) in EXPECTED_COMPARISONS[ring].items():
            bs = G.costs(name, ring, range_reduction="binary_search")
            th = G.costs(name, ring, range_reduction="thresholds")
            assert (bs["comparisons"], th["comparisons"]) == (want_bs, want_th), name
            # thresholds: one batched comparison (the default family's rounds)
            assert th["cmp_rounds"] == N.FAMILY_ROUNDS["bitwise"]
            assert 1 <= bs["cmp_rounds"] <= bs["rounds"]
            # one leading-one circuit per element (log: and one comparison); exp:
            # one window-thresholds circuit
            lo = G.costs(name, ring, range_reduction="leading_one")
            assert lo["comparisons"] == (2 if name == "log" else 1), name
            assert lo["rounds"] < bs["rounds"] and lo["products"] < bs["products"], name
            # the octave's circuit: exp's window thresholds garbled (2
            # rounds), the others' leading one decomposed on boolean shares
            # (bitwise_leading_one); log: its half-octave comparison follows
            # it on the critical path under the bitwise family's 8 rounds
            circ = 2 if name == "exp" else BL.rounds(LO.default_width(tp.Config(ring_bits=ring)))
            want = circ + N.FAMILY_ROUNDS["bitwise"] if name == "log" else circ
            assert lo["cmp_rounds"] == want, name
        # unsigned reciprocal: no sign comparison
        for rr, want in (("binary_search", 7), ("thresholds", 43 if ring == 128 else 31)):
            _init_rr(ring, "plaintext", rr)
            b = tp.get_runtime().backend
            s = share(on_grid(np.geomspace(1e-3, 1e3, 64)))
            m = N.measure(b, lambda be, v: N.reciprocal(be, v, signed=False),
                          (s.share0, s.share1))
            assert m["comparisons"] == want, (rr, m["comparisons"])
    finally:
        tp.reset()
        tp.init()


def test_radices():
    """Levels of a search: the first level's blocks are at most `window`
    octaves, then halving; tiny searches and "thresholds" are one level."""
    plan = lambda k, h=1: R.Plan("mul", K=k, jlo=0, h=h)  # noqa: E731
    assert R.radices(plan(43), "binary_search", 22) == [2] * 6
    assert R.radices(plan(31), "binary_search", 8) == [4, 2, 2, 2]
    assert R.radices(plan(22, 2), "binary_search", 22) == [2] * 5      # exp, 2-octave pieces
    assert R.radices(plan(5), "binary_search", 22) == [5]             # saves < 2 comparisons
    assert R.radices(plan(43), "thresholds", 22) == [43]
    with pytest.raises(ValueError, match="unknown range_reduction"):
        R.radices(plan(43), "bisection", 22)


def test_terms_schedule_and_values():
    """_terms: scale·e^i (or e^i) by depth; a scale one round late still gives
    degree 6 two rounds after it; values are the powers."""
    tp.reset()
    tp.init(tp.Config(ring_bits=128, backend="plaintext"))
    try:
        b = tp.get_runtime().backend
        ev, sv = np.linspace(-0.9, 0.9, 16), np.linspace(0.5, 3.0, 16)
        e0, s0, one = share(ev), share(sv), share(np.ones(16))

        def run_terms(be, e, s, o, degree, lag, scaled=True):
            ctx = L.Ctx(be)
            el, sl = ctx.lift(e), ctx.lift(s)
            if lag:
                sl = be.mul(sl, o)                      # the scale one round late
            terms = S.power_terms(ctx, el, degree, scale=sl if scaled else None, lag=lag)
            run_terms.out = [None if t is None else ctx.lower(t) for t in terms]
            z = run_terms.out[-1]
            for t in run_terms.out[:-1]:
                if t is not None:
                    z = be.add(z, be.sub(t, t))         # every term on the measured path
            return z

        args = [(e0.share0, e0.share1), (s0.share0, s0.share1), (one.share0, one.share1)]
        for degree, lag, scaled, rounds, products in ((6, 1, True, 6, 8 + 1), (7, 0, True, 6, 9),
                                                      (8, 0, False, 6, 7), (4, 0, False, 4, 3)):
            m = N.measure(b, lambda be, e, s, o: run_terms(be, e, s, o, degree, lag, scaled),
                          *args)
            assert (m["rounds"], m["products"]) == (rounds, products), (degree, lag, scaled, m)
            for i, t in enumerate(run_terms.out):
                if t is None:
                    continue
                got = b.decode(b.reveal(t)).numpy()
                want = (sv if scaled else 1.0) * ev ** i
                np.testing.assert_allclose(got, want, atol=1e-5)
    finally:
        tp.reset()
        tp.init()


def test_range_reduction_setting_and_override(rt128):
    """leading_one is the default of every range reduction; per call and per
    runtime overridable; the methods agree to the targets; a bad name raises."""
    cfg = tp.get_runtime().config
    assert {k: cfg.function_setting(k, "range_reduction") for k in G.REDUCED} == \
        {k: "leading_one" for k in G.REDUCED}
    x = on_grid(np.geomspace(0.01, 100, 200))
    p = share(x)
    for fn, ref in ((M.reciprocal, 1 / x), (M.sqrt, np.sqrt(x)), (M.log, np.log(x)),
                    (M.exp, np.exp(-x / 10))):
        arg = share(on_grid(-x / 10)) if fn is M.exp else p
        target = TARGETS[128]["log" if fn is M.log else "exp"]
        for rr in RANGE_REDUCTIONS:
            check(fn(arg, range_reduction=rr).reveal(), ref, target, f"{fn.__name__} {rr}")
    check(M.divide(p, p, range_reduction="thresholds").reveal(), np.ones_like(x),
          TARGETS[128]["divide"])
    with pytest.raises(ValueError, match="unknown range_reduction"):
        M.exp(p, range_reduction="bisection")
    backend = cfg.backend
    tp.reset()
    tp.init(tp.Config(ring_bits=128, backend=backend,
                      functions={"reciprocal": {"range_reduction": "thresholds"}}))
    b = tp.get_runtime().backend
    m = N.measure(b, lambda be, v: N.reciprocal(be, v), (p.share0, p.share1))
    assert m["comparisons"] == 86


def comparison_rounds(cfg) -> int:
    """A comparison's rounds in the configured family (the default bitwise
    8, garbled 2); the plaintext oracle's tracker counts the same."""
    return {"bitwise": bitwise.BITWISE_ROUNDS, "garbled": C.CIRCUIT_ROUNDS}[cfg.comparison]


@pytest.mark.parametrize("name,fn,ref", [("sigmoid", M.sigmoid, G._sig), ("tanh", M.tanh, np.tanh)])
def test_sigmoid_tanh_methods(rt, name, fn, ref):
    """Plain pieces (default) and folded pieces, with the breakpoints found
    by the window-thresholds circuit (threshold_bits "circuit", default: one
    circuit per element, folded: and the sign) or by comparators (13 against
    7 per element): same targets, exact saturation. Rounds, with R a
    comparison's (the default bitwise family's 8; the garbled family's 2):
    plain max(4, R) + 2 with comparators (the powers' 4 beside them, then
    the selection), max(4, T) + 2 with the circuit; folded max(4, R + 2 + T) + 2 (the
    sign, |x|'s product, then T = the circuit's 2 or a comparator's R)."""
    cfg = tp.get_runtime().config
    bound = cfg.bound
    assert cfg.function_setting(name, "method") == "piecewise_poly"
    assert cfg.function_setting("common", "threshold_bits") == "circuit"
    x = on_grid(np.linspace(-30, 30, 1201))
    big = [-(bound - 1), -1000.0, -11.5, 11.0, 1000.0, bound - 1]
    sat = [0, 0, 0, 1, 1, 1] if name == "sigmoid" else [-1, -1, -1, 1, 1, 1]
    try:
        # T: the window-thresholds circuit's rounds for the folded 7 and the
        # plain 13 breakpoints: under the bitwise family as one batch of
        # comparisons (within functions.common.bitwise_circuits' limit)
        r = comparison_rounds(cfg)
        t7, t13 = (BW.circuit_rounds(cfg, "thresholds", k) for k in (7, 13))
        for tb, counts in (("circuit", {"folded_piecewise_poly": (max(4, r + 2 + t7) + 2, 2),
                                        "piecewise_poly": (max(4, t13) + 2, 1)}),
                           ("comparisons", {"folded_piecewise_poly": (max(4, r + 2 + r) + 2, 7),
                                            "piecewise_poly": (max(4, r) + 2, 13)})):
            tp.reset()
            tp.init(tp.Config(ring_bits=rt, backend=cfg.backend,
                              functions={"common": {"threshold_bits": tb}}))
            b = tp.get_runtime().backend
            for method, (rounds, cmps) in counts.items():
                check(fn(share(x), method=method).reveal(), ref(x), TARGETS[rt][name],
                      f"{method} {tb}")
                np.testing.assert_array_equal(fn(share(big), method=method).reveal().numpy(),
                                              sat)
                s = share(x[:64])
                m = N.measure(b, lambda be, v: getattr(N, name)(be, v, method=method),
                              (s.share0, s.share1))
                assert (m["rounds"], m["comparisons"]) == (rounds, cmps), (method, tb, m)
        with pytest.raises(ValueError, match="symmetric"):
            fn(share(x), method="folded_piecewise_poly", breakpoints=[-3, 0, 1, 3])
        with pytest.raises(ValueError, match="unknown"):
            fn(share(x), method="euler")
        tp.reset()
        tp.init(tp.Config(ring_bits=rt, backend=cfg.backend,
                          functions={"common": {"threshold_bits": "gates"}}))
        with pytest.raises(ValueError, match="unknown threshold_bits"):
            fn(share(x))
    finally:
        tp.reset()
        tp.init(tp.Config(ring_bits=rt, backend=cfg.backend))


def test_exp_threshold_bits(rt128):
    """exp under "leading_one": its pieces by one window-thresholds circuit
    (threshold_bits "circuit": 1 comparison per element, one circuit's 2
    rounds) or, with "comparisons", by the binary search (7 comparisons per
    element); same targets. The binary search's path holds five comparison
    calls and three products: 5 R + 6 rounds for R a comparison's. With the
    garbled comparator (R = 2) it ties at 16 with the products' path (12 +
    two comparisons' 4), which the tracker reports; with the bitwise
    family's R = 8 it is the critical path (46 rounds, 40 of comparisons)."""
    cfg = tp.get_runtime().config
    x = on_grid(np.linspace(-20, 10, 1501))
    try:
        r = comparison_rounds(cfg)
        search = 4 if r == C.CIRCUIT_ROUNDS else 5 * r
        for tb, (cmps, crounds) in (("circuit", (1, C.CIRCUIT_ROUNDS)),
                                    ("comparisons", (7, search))):
            tp.reset()
            tp.init(tp.Config(ring_bits=128, backend=cfg.backend,
                              functions={"common": {"threshold_bits": tb}}))
            check(M.exp(share(x)).reveal(), np.exp(x), TARGETS[128]["exp"], tb)
            s = share(x[:64])
            m = N.measure(tp.get_runtime().backend, N.exp, (s.share0, s.share1))
            assert (m["comparisons"], m["cmp_rounds"]) == (cmps, crounds), (tb, m)
    finally:
        tp.reset()
        tp.init(tp.Config(ring_bits=128, backend=cfg.backend))
