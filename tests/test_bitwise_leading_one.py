"""The bitwise leading one (protocols/mpc/bitwise/leading_one.py,
ops/bitwise/leading_one.h; its outputs equal the garbled circuit's bit for
bit: tests/test_bitwise_circuits.py::test_leading_one_equals_the_garbled_circuit),
chunked batches, its declared cost equal to the channel's counters, each
party's view uniform and independent of the secrets, masks fresh, the
dealer's streams checked, and the setting choosing it."""
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

import tf_privpy as tp
from billcheck import assert_bill_equals_counts
from conftest import case_fixtures
from test_bitwise import ALPHA, assert_all_differ, assert_views_uniform_and_alike, byte_hist
from test_bitwise_circuits import edge_ints, garbled, bitwise, shares_of
from tf_privpy.protocols.mpc.bitwise import backend as bw_backend
from tf_privpy.protocols.mpc.bitwise import leading_one as BL
from tf_privpy.protocols.mpc.privpy import leading_one as LO
from tf_privpy.protocols.mpc.runtime import cost

case, ring_case = case_fixtures([("privpy", 128), ("privpy", 64)])


def test_big_batches_go_in_chunks(ring_case, monkeypatch):
    """Batches over CHUNK elements are dealt in chunks, same bits and a
    bill that still equals the channel's counters."""
    monkeypatch.setattr(BL, "CHUNK", 64)
    b = tp.get_runtime().backend
    w = LO.default_width(b.cfg)
    ints = edge_ints(w, -(1 << (w - 2)))[:150]
    x = shares_of(ints)
    want = garbled(lambda: b.leading_one(x, [0, 7, w - 2, w - 1], True))
    with cost.record() as bill, tp.stats() as counted:
        got = bitwise(lambda: BL.leading_one(b, x, [0, 7, w - 2, w - 1], True, w))
    np.testing.assert_array_equal(got, want)
    assert {k: tuple(v) for k, v in bill.links.items()} == counted.links
    assert counted.links[("T1", "S2")][0] == 3          # three dealt chunks


@pytest.mark.parametrize("fn", ["sqrt", "reciprocal"])
def test_declared_cost_equals_channel_counts(case, fn):
    """sqrt (plain leading one) and reciprocal (magnitude) under the
    defaults, eagerly and in a tf.function: the bill is the channel's
    counts, and the leading one ran as a decomposition (its rounds)."""
    func = {"sqrt": tp.sqrt, "reciprocal": tp.math.reciprocal}[fn]
    x = tp.share(np.linspace(0.5, 30, 40).reshape(4, 10))
    with tp.comparison("bitwise"):
        bill = assert_bill_equals_counts(lambda v: func(v), x, case.mode)
    w = LO.default_width(tp.get_runtime().backend.cfg)
    assert bill.rounds > BL.rounds(w)


def test_cost_per_element(ring_case):
    """What one element costs at the default width: 8·(3A + 2O + 1) bytes
    each way between the servers, 8·(2A + O) of product words and one ring
    element per column from T1, A + O + 2 rounds (the module doc's
    figures: 248 and 144 bytes, 14 rounds at W = 46 and W = 34)."""
    b = tp.get_runtime().backend
    w = LO.default_width(b.cfg)
    n, cols = 1000, [0, 3, 9, w - 1]
    x = shares_of(np.arange(n, dtype=np.int64) * 977 - 300000)
    with tp.comparison("bitwise"), tp.stats() as s:
        BL.leading_one(b, x, cols, True, w)
    assert s.rounds == BL.rounds(w) == 14
    assert s.links[("S1", "S2")][1] == s.links[("S2", "S1")][1] == n * 248
    assert s.links[("T1", "S2")][1] == n * (144 + len(cols) * b.bits // 8) + cost.NONCE_BYTES


def views(ints, magnitude=True):
    rt, b = tp.get_runtime().runtime, tp.get_runtime().backend
    w = LO.default_width(b.cfg)
    x = shares_of(ints)
    seen = {}
    with tp.comparison("bitwise"), \
            rt.observe(lambda src, dst, t: seen.setdefault(dst, []).append((src, t))):
        BL.leading_one(b, x, list(range(w)), magnitude, w)
    return seen


def test_every_view_is_uniform_and_secret_independent(ring_case):
    """What each party receives, for all-zero secrets and for random ones
    of every size: every message's bytes uniform and equally distributed
    (the nonce headers are public counters). Only S1 and S2 receive (T1
    deals, T2 takes no part). The check can fail: the servers' low words
    themselves, what a message without its stream mask would carry, are
    far from uniform."""
    n = 1 << 12
    rng = np.random.default_rng(5)
    w = LO.default_width(tp.get_runtime().backend.cfg)
    secrets = rng.integers(-(1 << (w - 2)), 1 << (w - 2), n) >> rng.integers(0, w - 2, n)
    v0, v1 = views(np.zeros(n, np.int64)), views(secrets)
    assert sorted(v0) == ["S1", "S2"]
    assert_views_uniform_and_alike(v0, v1)
    # the deliberately broken variant: an unmasked level-0 word (x's low
    # bits, here S2's share of small secrets minus S1's random one) fails
    assert stats.chisquare(byte_hist(tf.constant(secrets))).pvalue < ALPHA


def test_masks_are_fresh_on_every_run(ring_case):
    """The same secrets twice: every message differs (a reused stream
    word or dealt mask would repeat it)."""
    ints = np.arange(256, dtype=np.int64) - 128
    assert_all_differ(views(ints), views(ints))


@pytest.mark.parametrize("pair", [("S1", "T1"), ("S2", "T1")])
def test_a_dealer_stream_out_of_step_is_refused(ring_case, pair):
    """One end of a server's stream with the dealer advanced alone: the
    call fails saying so instead of returning wrong bits."""
    rt, b = tp.get_runtime().runtime, tp.get_runtime().backend
    w = LO.default_width(b.cfg)
    x = shares_of(np.arange(8, dtype=np.int64) - 4)
    rt.key_material(pair[0], pair[1], pair[0])       # advance one end only
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of step"):
        bitwise(lambda: BL.leading_one(b, x, [0, 1], True, w))


def test_the_setting_chooses_the_route(ring_case):
    """Above the bitwise_circuits limit the leading one runs as a
    decomposition by default and as the garbled circuit when
    bitwise_leading_one says "garbled"; the garbled family ignores it; a
    width over 63 and bad values are refused with what to do."""
    b = tp.get_runtime().backend
    w = LO.default_width(b.cfg)
    x = shares_of(np.arange(-5, 5, dtype=np.int64) << 10)
    cols = list(range(w))                              # far above the limit of 16
    with tp.comparison("bitwise"), cost.record() as bill:
        b.leading_one(x, cols, True)
    assert bill.rounds == BL.rounds(w)
    assert bw_backend.circuit_rounds(b.cfg, "leading_one", 60, w) == BL.rounds(w)
    ring = str(b.cfg.ring_bits)
    cfg = b.cfg.replace(functions={"common": {"bitwise_leading_one": {ring: "garbled"}}})
    assert bw_backend.circuit_route(cfg, "leading_one", 60, w) == "garbled"
    assert bw_backend.circuit_route(b.cfg, "leading_one", 60, 64) == "garbled"   # too wide
    assert bw_backend.circuit_route(b.cfg, "leading_one", 3, w) == "comparisons"
    with tp.comparison("garbled"), cost.record() as bill:
        b.leading_one(x, cols, True)
    assert bill.rounds == cost.CIRCUIT_ROUNDS
    for bad in ("fast", 3, {ring: "adder"}):
        cfg = b.cfg.replace(functions={"common": {"bitwise_leading_one": bad}})
        with pytest.raises(ValueError, match="must be 'decomposition' or 'garbled'"):
            bw_backend.bitwise_leading_one(cfg)
    with pytest.raises(ValueError, match="widths 3..63"):
        BL.leading_one(b, x, [0], False, 64)
