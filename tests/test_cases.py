"""The `case` fixture (tests/conftest.py): one runtime per (backend, ring)
for the whole session, made current per case by tf_privpy.runtime.activate,
and nothing of one case reaching the next through the reused runtime:
counters start as tp.init() left them, the config is the case's, the nonce
streams never rewind (and one put out of step is replaced), tensors of
another runtime are refused, and no channel hook stays.

(Seen failing with activate() not resetting the counters: the stats checks of
test_reused_runtime_starts_clean and
test_activate_refuses_open_hooks_and_other_objects fail.)"""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import _RUNTIMES, activate_runtime
from tf_privpy import runtime as tp_runtime


def _nonces(rt):
    """Every nonce counter of the runtime, read eagerly."""
    return {(pair, p): int(v.numpy()) for pair, per in rt._counters.items()
            for p, v in per.items()}


def _fresh(s):
    """tp.stats() of a runtime tp.init() just made: the key set-up's one
    message of 16 bytes per server pair, nothing else."""
    pairs = {("S1", "S2"), ("S1", "T1"), ("S1", "T2"), ("S2", "T1"), ("S2", "T2"),
             ("T1", "T2")}
    return (s.links, s.rounds, s.multiplications, s.comparisons) == (
        {p: (1, 16) for p in pairs}, 0, 0, 0)


def test_fresh_runtime_stats():
    """What _fresh compares a reused runtime with: a new tp.init()."""
    tp.init(tp.Config(ring_bits=64))
    assert _fresh(tp.stats()), tp.stats()


def test_each_case_starts_from_fresh(ring_case, request):
    """Each (backend, ring) case finds the session's one runtime for it,
    counters as tp.init() left them, and leaves traffic behind for the next user."""
    h = tp.get_runtime()
    assert h is request.config.stash[_RUNTIMES][(ring_case.backend, ring_case.ring)]
    assert (h.config.backend, h.config.ring_bits) == (ring_case.backend, ring_case.ring)
    assert _fresh(tp.stats()), tp.stats()
    x = tp.share([1.0, -2.0])
    np.testing.assert_allclose((x * x).reveal(), [1.0, 4.0], atol=1e-3)
    assert tp.stats().messages > 0


def test_reused_runtime_starts_clean(request):
    """A case that counted traffic, then tp.init()'d a config of its own,
    hands the next case of its (backend, ring) the same runtime with the
    counters of a fresh one, its own config, nonces that went on from where they were, and
    refuses the other runtime's tensors."""
    h = activate_runtime(request.config, "privpy", 64)
    rt = h.runtime
    x = tp.share([3.0])
    with tp.stats() as s:
        np.testing.assert_allclose((x * x).reveal(), [9.0], atol=1e-3)
    assert s.multiplications == 1 and tp.stats().rounds > 0
    before = _nonces(rt)
    assert any(before.values())
    tp.init(tp.Config(ring_bits=128, frac_bits=24))  # the test's own runtime
    other = tp.share([1.0])

    again = activate_runtime(request.config, "privpy", 64)
    assert again is h and tp.get_runtime() is h
    assert (h.config.ring_bits, h.config.frac_bits) == (64, 16)
    assert _fresh(tp.stats()), tp.stats()
    after = _nonces(rt)
    assert after == before  # not rewound (nothing ran since)
    with pytest.raises(Exception, match="runtime"):
        (other * other).reveal()
    # the old tensors of this runtime work again, and the streams go on
    np.testing.assert_allclose((x + x).reveal(), [6.0], atol=1e-3)
    (x * x).reveal()
    assert all(after[k] <= v for k, v in _nonces(rt).items())
    assert _nonces(rt) != after


def test_activate_refuses_open_hooks_and_other_objects(request):
    """A channel hook still open (an observe or intercept block a case left)
    would follow the runtime into the next case: activate() refuses."""
    h = activate_runtime(request.config, "privpy", 128)
    with pytest.raises(TypeError, match="runtime handle"):
        tp_runtime.activate(h.runtime)
    with h.runtime.channels.intercept(lambda src, dst, t: t):
        with pytest.raises(RuntimeError, match="still open"):
            tp_runtime.activate(h)
    with h.runtime.observe(lambda *a: None):
        with pytest.raises(RuntimeError, match="still open"):
            tp_runtime.reset_stats()
    tp_runtime.activate(h)
    x = tp.share([2.0])
    (x * x).reveal()
    tp_runtime.reset_stats()
    assert _fresh(tp.stats())


def test_case_ids():
    """The ids name backend, ring and mode (e.g. privpy-ring128-tf_function)."""
    from conftest import cases
    ids = [p.id for p in cases()]
    assert ids[:2] == ["privpy-ring128-eager", "privpy-ring128-tf_function"]
    assert len(ids) == 8 and "plaintext-ring64-eager" in ids
    assert [p.id for p in cases([("privpy", 64)], modes=(None,))] == ["privpy-ring64"]


def test_default_runtime_after_cases():
    """A test without a case after case tests gets a fresh default runtime."""
    cfg = tp.get_runtime().config
    assert (cfg.backend, cfg.ring_bits) == ("privpy", 128) and _fresh(tp.stats())
    assert isinstance(tf.constant(1), tf.Tensor)


def test_a_runtime_out_of_step_is_replaced(request):
    """A case that desynchronised a PRG stream on purpose (test_channel) does
    not hand it on: activate() refuses it, the fixture makes a new one."""
    h = activate_runtime(request.config, "privpy", 64)
    h.runtime.nonce("S1", "T1", "T1")  # T1 advances alone
    assert not h.runtime.streams_in_step()
    with pytest.raises(RuntimeError, match="out of step"):
        tp_runtime.activate(h)
    new = activate_runtime(request.config, "privpy", 64)
    assert new is not h and new.runtime.streams_in_step()
    assert request.config.stash[_RUNTIMES][("privpy", 64)] is new
    x = tp.share([2.0])
    np.testing.assert_allclose((x * x).reveal(), [4.0], atol=1e-3)
