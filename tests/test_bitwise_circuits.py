"""The derived functions' circuits under the bitwise family (issue 26;
protocols/mpc/bitwise/circuits.py): `thresholds` and `leading_one` as one
batched bitwise comparison give the garbled circuits' outputs bit for bit
on edge values in both rings (magnitude or not, integer or fixed point,
with and without a fused table; the leading one also as a bit
decomposition), the derived functions agree under every choice, the
setting picks the protocol, and the declared cost equals the channel's
counters."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from billcheck import assert_bill_equals_counts
from conftest import case_fixtures
from scipy.special import softmax
from test_numerics import TARGETS
from tf_privpy.protocols.mpc.bitwise import backend as bw_backend
from tf_privpy.protocols.mpc.bitwise import circuits as BC
from tf_privpy.protocols.mpc.bitwise import leading_one as BL
from tf_privpy.protocols.mpc.bitwise import protocol
from tf_privpy.protocols.mpc.privpy import leading_one as LO
from tf_privpy.protocols.mpc.runtime import cost

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])
#: the setting's reader, before `choose` replaces it
SETTING = bw_backend.bitwise_circuit_limit
#: (bitwise_circuits limit, bitwise_leading_one) that make every circuit run
#: garbled / as comparisons / the leading one as a bit decomposition (the
#: thresholds garbled)
CHOICES = {"garbled": (0, "garbled"), "comparisons": (10 ** 6, "garbled"),
           "decomposition": (0, "decomposition")}


def edge_ints(width: int, low: int):
    """Ring integers in [low, 2^(W-1)): 0, ±1, ±2^j, ±2^j ± 1 at every
    position, the ends of the range, random values of every size."""
    v = [0, 1, -1, 2, -2, 3, -3, low, low + 1, (1 << (width - 1)) - 1, (1 << (width - 1)) - 2]
    for j in range(width - 1):
        v += [1 << j, -(1 << j), (1 << j) + 1, (1 << j) - 1, -(1 << j) + 1, -(1 << j) - 1]
    rng = np.random.default_rng(width)
    v += [int(r) >> int(s) for r, s in zip(rng.integers(-(1 << (width - 1)), 1 << (width - 1), 200),
                                          rng.integers(0, width, 200))]
    return np.array(sorted({x for x in v if low <= x < 1 << (width - 1)}), np.int64)


def shares_of(ints):
    """Shares of exact ring integers (no fixed-point encoding)."""
    b = tp.get_runtime().backend
    enc = ints if b.bits == 64 else np.stack([ints, np.where(ints < 0, -1, 0)], 1)
    return b.share(tf.constant(enc, tf.int64))


def ring_values(s):
    """The revealed ring values as Python ints mod 2^l (both limbs)."""
    b = tp.get_runtime().backend
    v = b.reveal(s).numpy()
    if b.bits == 128:
        v = (v[..., 0].astype(object) % 2 ** 64) + (v[..., 1].astype(object) << 64)
    return v.astype(object) % 2 ** b.bits


def garbled(fn):
    with tp.comparison("garbled"):
        return ring_values(fn())


def bitwise(fn):
    with tp.comparison("bitwise"):
        return ring_values(fn())


#: the bitwise family's two ways to the leading one: batched comparisons
#: (circuits.py) and one bit decomposition per element (leading_one.py)
LEADING_ONE = {"comparisons": BC.leading_one, "decomposition": BL.leading_one}


@pytest.mark.parametrize("route", sorted(LEADING_ONE))
@pytest.mark.parametrize("magnitude", [True, False], ids=["magnitude", "plain"])
def test_leading_one_equals_the_garbled_circuit(ring_case, magnitude, route):
    """All W columns on edge integers (the plain circuit's domain starts at
    -2^(W-2): leading_one.default_width), then a column subset in any order
    with a fused table of big entries, and fixed-point values: by
    comparisons and by the bit decomposition, bit for bit."""
    impl = LEADING_ONE[route]
    b = tp.get_runtime().backend
    w = LO.default_width(b.cfg)
    ints = edge_ints(w, -(1 << (w - 1)) + 1 if magnitude else -(1 << (w - 2)))
    x = shares_of(ints)
    cols = list(range(w))
    want = garbled(lambda: b.leading_one(x, cols, magnitude))
    got = bitwise(lambda: impl(b, x, cols, magnitude, w))
    bad = ~np.all(got == want, axis=1)
    assert not bad.any(), f"differs at x = {ints[bad][:5]}"
    cols = [w - 1, 0, 5, w - 2, 17]
    table = np.random.default_rng(5).integers(-2 ** 62, 2 ** 62, (len(cols) + 1, 3),
                                              dtype=np.int64)
    want = garbled(lambda: b.leading_one(x, cols, magnitude, table=table))
    np.testing.assert_array_equal(
        bitwise(lambda: impl(b, x, cols, magnitude, w, table=table)), want)
    v = np.array([0.0, 1.0, -1.0, 0.5, -0.5, 2.0 ** -b.cfg.frac_bits, b.cfg.bound - 1,
                  1 - b.cfg.bound, 3.75, -1024.0])
    px = tp.share(v)
    xs = (px.share0, px.share1)
    np.testing.assert_array_equal(bitwise(lambda: impl(b, xs, cols, magnitude, w)),
                                  garbled(lambda: b.leading_one(xs, cols, magnitude)))


def test_thresholds_equal_the_garbled_circuit(ring_case):
    """Integer and fixed-point bits, and the fused table, for windows at
    every scale: around zero, fixed-point breakpoints, near the width's
    bound; |x| < 2^(W-1), the circuit's domain."""
    b = tp.get_runtime().backend
    w, f = LO.default_width(b.cfg), b.cfg.frac_bits
    ints = edge_ints(w, -(1 << (w - 1)) + 1)
    x = shares_of(ints)
    half = 1 << (w - 2)
    for points in ([-1, 0, 1, 7], [-(3 << f), 0, 3 << f, 5 << f], [-half, half // 2, half]):
        for integer in (True, False):
            want = garbled(lambda: b.thresholds(x, points, integer=integer))
            got = bitwise(lambda: BC.thresholds(b, x, points, w, integer))
            bad = ~np.all(got == want, axis=1)
            assert not bad.any(), f"{points}, integer={integer}: differs at x = {ints[bad][:5]}"
        table = np.random.default_rng(6).integers(-2 ** 62, 2 ** 62, (len(points) + 1, 2),
                                                  dtype=np.int64)
        np.testing.assert_array_equal(
            bitwise(lambda: BC.thresholds(b, x, points, w, True, table=table)),
            garbled(lambda: b.thresholds(x, points, integer=True, table=table)))
    with pytest.raises(ValueError, match="do not fit a window"):
        BC.thresholds(b, x, [1 << w], w, True)
    with pytest.raises(ValueError, match=r"K \+ 1"):
        BC.thresholds(b, x, [0, 1], w, True, table=np.zeros((2, 1), np.int64))


@pytest.fixture
def choose(monkeypatch):
    """choose("garbled", "comparisons" or "decomposition"): the bitwise
    family's choice for both circuits, whatever their number of comparisons."""
    def set_choice(value):
        limit, route = CHOICES[value]
        monkeypatch.setattr(bw_backend, "bitwise_circuit_limit", lambda cfg, circuit: limit)
        monkeypatch.setattr(bw_backend, "bitwise_leading_one", lambda cfg: route)
    return set_choice


def run_bitwise(fn, *args):
    with tp.comparison("bitwise"):
        return fn(*args)


FUNCTIONS = {
    "exp": (tp.exp, np.exp, (-20, 10)),
    "log": (tp.math.log, np.log, (0.01, 1000)),
    "reciprocal": (tp.math.reciprocal, lambda v: 1 / v, (-1000, 1000)),
    "sqrt": (tp.sqrt, np.sqrt, (0.01, 1000)),
    "rsqrt": (tp.math.rsqrt, lambda v: v ** -0.5, (0.01, 1000)),
    "sigmoid": (tp.sigmoid, lambda v: 1 / (1 + np.exp(-v)), (-30, 30)),
    "tanh": (tp.tanh, np.tanh, (-30, 30)),
    "softmax": (tp.nn.softmax, lambda v: softmax(v, -1), (-15, 15)),
}


def check(got, want, target, ulp, what):
    """tests/test_numerics.py's check: `target` is ("abs", a) or ("rel", r,
    ulps), met by every element."""
    err = np.abs(got - want)
    if target[0] == "abs":
        bad = err > target[1]
    else:
        bad = (err > target[1] * np.abs(want)) & (err > target[2] * ulp)
    assert not bad.any(), f"{what}: {bad.sum()} off {target}, worst err {err.max():.3g}"


@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_derived_functions_agree_under_both_choices(ring_case, choose, fn):
    """Each function with the circuits garbled and as comparisons, on its
    domain and at the octave and piece boundaries (2^j, 2^j ± 1 ulp), meets
    the target tests/test_numerics.py states for it (TARGETS, per ring)
    either way. The circuits' bits are the same (above), so the two differ
    only by the local truncations' run-to-run rounding (up to 1e-3 apart in
    the 64-bit ring's sigmoid, as two garbled runs do); a wrong bit would
    move a value by a whole piece."""
    cfg = tp.get_runtime().config
    func, ref, (lo, hi) = FUNCTIONS[fn]
    u = 2.0 ** -cfg.frac_bits
    rng = np.random.default_rng(7)
    js = 2.0 ** np.arange(-6, 10)
    v = np.concatenate([rng.uniform(lo, hi, 30), js, js + u, js - u, -js])
    v = np.round(v[(v >= lo) & (v <= hi)] / u) * u
    v = v[: len(v) // 10 * 10].reshape(-1, 10)
    x = tp.share(v)
    target = TARGETS[cfg.ring_bits][fn]
    for choice in CHOICES:
        choose(choice)
        check(run_bitwise(func, x).reveal().numpy(), ref(v), target, u, f"{fn} {choice}")


def test_the_setting_picks_the_protocol(ring_case, choose, monkeypatch):
    """Within bitwise_circuits' limit: one bitwise ltz (8 rounds, one
    comparison per threshold and element); above it: the garbled circuit
    (2 rounds, one per element), the leading one by bitwise_leading_one;
    the garbled family ignores it; bad values and circuit names are
    refused."""
    b = tp.get_runtime().backend
    f = b.cfg.frac_bits
    x = shares_of(np.arange(-5, 5, dtype=np.int64) << f)
    pts = [-(2 << f), 0, 2 << f]
    monkeypatch.setattr(bw_backend, "bitwise_leading_one", lambda cfg: "garbled")
    for limit, want in ((3, (protocol.BITWISE_ROUNDS, 10 * len(pts))),
                        (2, (cost.CIRCUIT_ROUNDS, 10))):
        monkeypatch.setattr(bw_backend, "bitwise_circuit_limit", lambda cfg, c, n=limit: n)
        with tp.comparison("bitwise"), cost.record() as bill:
            b.thresholds(x, pts)
        assert (bill.rounds, bill.comparisons) == want
        # columns 0 and 3 of the plain leading one: [x < 1], [x < 8], [x < 0]
        with tp.comparison("bitwise"), cost.record() as bill:
            b.leading_one(x, [0, 3])
        assert (bill.rounds, bill.comparisons) == want
    choose("comparisons")
    with tp.comparison("garbled"), cost.record() as bill:
        b.thresholds(x, pts)
    assert (bill.rounds, bill.comparisons) == (cost.CIRCUIT_ROUNDS, 10)
    ring = str(b.cfg.ring_bits)
    for bad in ("comparisons", -1, {ring: 2.5}, True):
        cfg = b.cfg.replace(functions={"common": {"bitwise_circuits": {"thresholds": bad}}})
        with pytest.raises(ValueError, match="must be a count"):
            SETTING(cfg, "thresholds")
    cfg = b.cfg.replace(functions={"common": {"bitwise_circuits": {"thresholds": {ring: 7}}}})
    assert SETTING(cfg, "thresholds") == 7
    assert SETTING(cfg, "leading_one") >= 0          # from defaults.json
    with pytest.raises(ValueError, match="no circuit"):
        SETTING(cfg, "sort")


@pytest.mark.parametrize("fn", ["sigmoid", "reciprocal"])
def test_declared_cost_equals_channel_counts(case, choose, fn):
    """A function whose circuits run as bitwise comparisons declares what
    the channel counts (thresholds: sigmoid; magnitude leading one:
    reciprocal), eagerly and in a tf.function."""
    choose("comparisons")
    x = tp.share(np.linspace(-3, 3, 40).reshape(4, 10) + 0.01)
    func = FUNCTIONS[fn][0]
    with tp.comparison("bitwise"):
        assert_bill_equals_counts(lambda v: func(v), x, case.mode)
