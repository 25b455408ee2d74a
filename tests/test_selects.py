"""Selects by a shared comparison bit never need truncation (issue 15).

max, ReLU, where and sort multiply a comparison bit c by a difference d:
select(c, a, b) = b + c·(a - b) (DESIGN §6, "Derived"). When c came back as
a fixed-point share c·2^f, the product c·2^f·d·2^f had to be truncated
locally, which fails with probability about |d|·2^(2f)/2^(l-1) per element
(DESIGN §3): in the 64-bit ring (f = 16), about 2^-15 for values near the
bound 2^15, one output off by 2^(l-2f) = 2^32 in tens of thousands. With c a
plain integer share (0/1, no 2^f) the ring product c·d is the exact
fixed-point encoding of the selected difference: no truncation at all.

Values are drawn over the whole share-time range (|x| < the bound, up to
0.999·B). The comparison itself is exact unless the 64-bit sum of the
shares' low halves wraps (DESIGN §6), with probability about |d|·2^f/2^63:
below 2^-31 here in both rings (the 128-bit ring is tested at the 64-bit
ring's bound 2^15; at its own bound 2^23 the comparison's wrap rate, 2^-19,
is a separate matter from truncation).

Every output is checked against numpy with a bound far below the 2^(l-2f)
error of a truncation failure, and must match exactly (selected values are
shares of the input encodings, nothing is rounded).

10^6 outputs per op per ring, split over several calls of <= 2^18 inputs to
bound memory (garbled tables take 2 KB per comparison)."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import case_fixtures

N = 10 ** 6
SMALL = 2 ** 16  # outputs per op of the CI version
CALL = 2 ** 18  # inputs per call


case, ring_case = case_fixtures([("privpy", 64), ("privpy", 128)])


@pytest.fixture(scope="module")
def small_runs():
    """{(ring, op): (errors, seen)} among the first SMALL outputs of a
    million run: the same inputs (one seeded stream, drawn in order) the
    small test would draw, so it checks them instead of running again when
    the million ran first (`make test`; `make test-fast` runs it alone)."""
    return {}


def _values(cfg, rng, n):
    """Exactly encodable values over the 64-bit ring's whole range
    (|x| < 2^15), so a selected value reveals as exactly its input."""
    b = min(cfg.bound, 2.0 ** 15) * 0.999
    x = rng.uniform(-b, b, n)
    return np.round(x * 2 ** cfg.frac_bits) / 2 ** cfg.frac_bits


def _max_ref(x):
    return x.max(axis=1)


def _relu_ref(x):
    return np.maximum(x, 0.0)


def _where_ref(x):
    return np.where(x[:, 0] > x[:, 1], x[:, 0], x[:, 1])


def _sort_ref(x):
    return np.sort(x, axis=1)


def _where(p):
    a, b = p[:, 0], p[:, 1]
    return tp.where(a > b, a, b)


# (tp function, numpy reference, inputs per row, outputs per row)
CASES = {
    "max4": (lambda p: tp.reduce_max(p, axis=1), _max_ref, 4),
    "relu": (tp.nn.relu, _relu_ref, 1),
    "where": (_where, _where_ref, 2),
    "sort": (lambda p: tp.sort(p, axis=1), _sort_ref, 8),
}


def _run_case(cfg, name, total=N):
    """(errors, seen) over `total` outputs, and the same over the first SMALL
    outputs (the rows drawn first, whatever the call size)."""
    fn, ref, width = CASES[name]
    rng = np.random.default_rng(15)
    f = tf.function(fn)
    per_row = 1 if ref in (_max_ref, _where_ref) else width
    rows_per_call = max(1, CALL // width)
    errors, seen, first = 0, 0, None
    while seen < total:
        rows = min(rows_per_call, -(-(total - seen) // per_row))
        x = _values(cfg, rng, rows * width).reshape(rows, width)
        got = np.asarray(f(tp.share(tf.constant(x, tf.float64))).reveal().numpy(), np.float64)
        want = ref(x)
        if first is None:  # a prefix of rows: the small run's inputs and outputs
            k = -(-SMALL // per_row)
            assert k <= rows
            first = (int(np.sum(got[:k] != want[:k])), want[:k].size)
        errors += int(np.sum(got != want))
        seen += want.size
    return errors, seen, first


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("name", sorted(CASES))
def test_million_selects_exact(ring_case, name, small_runs):
    cfg = ring_case.config
    errors, seen, first = _run_case(cfg, name)
    small_runs[(cfg.ring_bits, name)] = first
    assert seen >= N
    assert errors == 0, (f"{name}: {errors} of {seen} outputs wrong in the "
                         f"{cfg.ring_bits}-bit ring")


@pytest.mark.parametrize("name", sorted(CASES))
def test_selects_exact_small(ring_case, name, small_runs):
    """The CI version: 2^16 outputs per op (the million is the slow test;
    when it ran, its first 2^16 outputs are these, from the same inputs)."""
    cfg = ring_case.config
    errors, seen = small_runs.get((cfg.ring_bits, name)) or _run_case(cfg, name, SMALL)[:2]
    assert seen >= SMALL
    assert errors == 0, f"{name}: {errors} of {seen} outputs wrong"


def test_comparison_bits_are_integer_and_lift_exactly(ring_case):
    """tp.less holds its bits as integer shares (frac_bits 0) for exact
    selects, and still behaves as 0.0/1.0 wherever it enters arithmetic."""
    cfg = ring_case.config
    x = np.array([-3.0, -0.5, 0.0, 0.25, 7.0, 2.0 ** 14])
    y = np.array([1.0, -0.5, -1.0, 0.5, 7.5, -2.0 ** 14])
    px, py = tp.share(tf.constant(x)), tp.share(tf.constant(y))
    c = tp.less(px, py)
    assert c.frac_bits == 0 and c.dtype == tf.bool
    np.testing.assert_array_equal(c.reveal().numpy(), x < y)
    np.testing.assert_array_equal((c * 3.0).reveal().numpy(), 3.0 * (x < y))
    np.testing.assert_array_equal((c + px).reveal().numpy(), (x < y) + x)
    np.testing.assert_array_equal(tp.logical_not(c).reveal().numpy(), ~(x < y))
    np.testing.assert_array_equal(tp.not_equal(px, py).reveal().numpy(), x != y)
    np.testing.assert_array_equal(tp.less_equal(px, py).reveal().numpy(), x <= y)
    np.testing.assert_array_equal(tp.where(c, px, py).reveal().numpy(), np.where(x < y, x, y))
    # a broadcast condition stays integer; a reshaped one is fixed point again
    c0 = tp.less(px[:1], py[:1])
    np.testing.assert_array_equal(tp.where(c0, px, py).reveal().numpy(),
                                  np.where(x[0] < y[0], x, y))
    cr = tp.reshape(tp.reshape(c, [2, 3]), [6])
    assert cr.frac_bits == cfg.frac_bits
    np.testing.assert_array_equal(tp.where(cr, px, py).reveal().numpy(), np.where(x < y, x, y))
    got = tf.function(lambda a, b: tp.where(a < b, a, b))(px, py).reveal().numpy()
    np.testing.assert_array_equal(got, np.minimum(x, y))
