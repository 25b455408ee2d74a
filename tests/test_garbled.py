"""Pregarbled comparators are single-use (DESIGN §6: garble in a setup phase,
keep only labels online; a batch of garbled tables is evaluated once).

Each server enforces it with one atomic test-and-set kernel (TakeOnce), so it
holds across re-runs of a tf.function, across tf.functions sharing the batch
and across threads racing to use it. The check used to be three ops,
read -> Assert -> assign; `old_take` below keeps that sequence and
`test_old_read_assert_assign_lets_two_racers_pass` shows, deterministically,
that two racers both pass it. Without the barrier the race is timing-bound:
measured on 2 cores, 8 eager racers of `old_take` let two or more pass in
about 60% of rounds (so `test_take_once_lets_exactly_one_racer_pass[eager]`,
10 rounds, catches it almost surely), but 8 racing tf.function calls of it
almost never do; only the barrier version is a deterministic proof.
"""
import re
import threading

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp

from tf_privpy.protocols.mpc.runtime import kernels as K
from tf_privpy.protocols.mpc.privpy.garbled import ALREADY_USED

USED = re.escape(ALREADY_USED)
THREADS = 8
ROUNDS = 3
X = np.array([-2.0, 0.0, 5.0, -1e-3, 7.5])  # exactly representable
SHAPE = tf.TensorShape([len(X)])


def race(fns):
    """Runs each of fns in its own thread, all released at once by a barrier.

    Returns (results, errors): the values of the calls that returned, the
    exceptions of those that raised."""
    start = threading.Barrier(len(fns))
    results, errors, lock = [], [], threading.Lock()

    def worker(fn):
        start.wait(timeout=60)
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - every outcome is checked by the caller
            with lock:
                errors.append(e)
        else:
            with lock:
                results.append(r)

    threads = [threading.Thread(target=worker, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a racer hung"
    return results, errors


def assert_all_already_used(errors):
    for e in errors:
        assert isinstance(e, tf.errors.InvalidArgumentError), repr(e)
        assert re.search(USED, str(e)), str(e)


def old_take(fresh, nonce, between=lambda: None):
    """The replaced check of Pregarbled.consume, op for op: read, Assert,
    assign, then read the nonce. `between` runs after the read."""
    ok = fresh.read_value()
    between()
    check = tf.debugging.Assert(ok, [ALREADY_USED])
    with tf.control_dependencies([check]):
        with tf.control_dependencies([fresh.assign(False)]):
            return tf.identity(nonce.read_value())


def test_old_read_assert_assign_lets_two_racers_pass():
    """Why one kernel: with the old sequence, two racers that both read the
    flag before either writes it both pass (made deterministic by a barrier
    between the read and the write), although sequential uses are caught."""
    fresh, nonce = tf.Variable(True), tf.Variable(tf.constant(5, tf.int64))
    both_read = threading.Barrier(2)
    results, errors = race([lambda: old_take(fresh, nonce, lambda: both_read.wait(timeout=60))] * 2)
    assert not errors and [int(r) for r in results] == [5, 5], "the race did not happen"
    with pytest.raises(tf.errors.InvalidArgumentError, match=USED):
        old_take(fresh, nonce)


@pytest.mark.parametrize("mode", ["eager", "tf_function"])
def test_take_once_lets_exactly_one_racer_pass(mode):
    take = lambda f, v: K.take_once(f, v, ALREADY_USED)  # noqa: E731
    if mode == "tf_function":
        take = tf.function(take)
    for i in range(10):
        fresh, nonce = tf.Variable(True), tf.Variable(tf.constant(i, tf.int64))
        results, errors = race([lambda: take(fresh, nonce)] * THREADS)
        assert [int(r) for r in results] == [i] and len(errors) == THREADS - 1
        assert_all_already_used(errors)
        assert not fresh.numpy()


def sh(a):
    return tp.share(tf.constant(a, tf.float64))


def test_single_use(ring, mode):
    px = sh(X)
    g = tp.garble_comparisons([len(X)])
    less = lambda a: tp.less(a, 1.0, pregarbled=g)  # noqa: E731
    f = tf.function(less) if mode == "tf_function" else less
    np.testing.assert_array_equal(f(px).reveal(), X < 1.0)
    # the same call again (a re-run of the same tf.function), another
    # tf.function sharing the batch, an eager use: all refused
    for use in (lambda: f(px), lambda: tf.function(less)(px),
                lambda: tp.greater(px, 0.0, pregarbled=g)):
        with pytest.raises(tf.errors.InvalidArgumentError, match=USED):
            use()


def test_s2_takes_only_after_s1(ring, mode):
    """S2's take is ordered after S1's (as eagerly), so a run that S1 refuses
    never marks the batch used on S2: concurrent runs cannot each win one
    server and all fail."""
    g = tp.garble_comparisons([len(X)])
    consume = lambda: g.consume(SHAPE, 1)[1][1]  # noqa: E731
    if mode == "tf_function":
        consume = tf.function(consume)
        takes = [op for op in consume.get_concrete_function().graph.get_operations()
                 if op.type == "TfPrivpy>TakeOnce"]
        rt = tp.get_runtime().runtime
        on = {party: [op for op in takes if op.device == rt.device(party)]
              for party in ("S1", "S2")}
        assert len(takes) == 2 and len(on["S1"]) == len(on["S2"]) == 1, takes
        assert on["S1"][0] in on["S2"][0].control_inputs, "S2's take is not after S1's"
    g._fresh[0].assign(False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=USED):
        consume()
    assert g._fresh[1].numpy(), "S2 took the batch although S1 refused the run"


def stream_counters():
    rt = tp.get_runtime().runtime
    return {(pair, party): int(v.numpy())
            for pair, by_party in rt._counters.items() for party, v in by_party.items()}


def test_refused_run_advances_no_stream(ring, mode):
    """A refused run leaves every pair's stream counters as they were: one
    side of a pair advancing alone would make the next protocol calls of
    that pair use different nonces on its two sides (wrong results)."""
    px = sh(X)
    g = tp.garble_comparisons([len(X)])
    less = lambda a: tp.less(a, 1.0, pregarbled=g)  # noqa: E731
    f = tf.function(less) if mode == "tf_function" else less
    f(px)
    before = stream_counters()
    for _ in range(3):
        with pytest.raises(tf.errors.InvalidArgumentError, match=USED):
            f(px)
    assert stream_counters() == before
    with tp.comparison("garbled"):   # the garbled comparator's streams still agree
        np.testing.assert_array_equal(tp.less(px, 1.0).reveal(), X < 1.0)


def test_racing_consumers_exactly_one_succeeds(ring):
    """Threads race Pregarbled.consume in a tf.function on one batch."""
    for _ in range(3 * ROUNDS):
        g = tp.garble_comparisons([len(X)])
        consume = tf.function(lambda: g.consume(SHAPE, 1)[1])
        consume.get_concrete_function()  # trace before the race
        results, errors = race([consume] * THREADS)
        assert len(results) == 1 and len(errors) == THREADS - 1
        assert_all_already_used(errors)
        assert int(results[0][0]) == int(g._nonce[0].numpy())
        assert int(results[0][1]) == int(g._nonce[1].numpy())


def test_racing_comparisons_exactly_one_succeeds(ring):
    """Threads race tp.less(..., pregarbled=g) on one batch through two
    tf.functions sharing it: one comparison runs (and is right), every other
    gets the clear error, and the batch stays used."""
    px = sh(X)
    for _ in range(ROUNDS):
        g = tp.garble_comparisons([len(X)])
        fs = [tf.function(lambda a: tp.less(a, 1.0, pregarbled=g)) for _ in range(2)]
        for f in fs:
            f.get_concrete_function(px)  # trace before the race
        results, errors = race([lambda f=f: f(px).reveal().numpy()
                                for f in fs * (THREADS // 2)])
        assert len(results) == 1 and len(errors) == THREADS - 1
        np.testing.assert_array_equal(results[0], X < 1.0)
        assert_all_already_used(errors)
        with pytest.raises(tf.errors.InvalidArgumentError, match=USED):
            tp.less(px, 1.0, pregarbled=g)
