"""Keras recurrent layers through the converter (issue 27): LSTM, GRU (both
reset_after settings) and SimpleRNN become a tf.while_loop over
PrivateTensors run by each share holder (converters/loops.py), their
TensorLists dense with public indices (protocols/mpc/api/sequence_adapters.py).

Each model is checked in both rings against rnn_tol (tests/tolerances.py):
the error bound propagated through the recurrence step by step from the
fixed-point precision and sigmoid's and tanh's documented targets."""
import numpy as np
import pytest
import tensorflow as tf

import graphcheck
import tf_privpy as tp
from kerasutil import seeded
from tolerances import encode_tol, keras_tol, public_mul_tol, rnn_tol
from tf_privpy.protocols.mpc.api import sequence_adapters
from tf_privpy.protocols.mpc.api.ops import _common as C
from conftest import session_ring_fixture

L = tf.keras.layers
#: ring cases in the session's runtime of their ring, not a tp.init() each
ring = session_ring_fixture()
STEPS, FEATURES, UNITS = 5, 2, 3

LAYERS = {
    "lstm": lambda: [L.LSTM(UNITS)],
    "gru": lambda: [L.GRU(UNITS)],
    "gru_reset_before": lambda: [L.GRU(UNITS, reset_after=False)],
    "simple_rnn_dense": lambda: [L.SimpleRNN(UNITS), L.Dense(2)],
    "lstm_sequences_backwards": lambda: [L.LSTM(UNITS, return_sequences=True,
                                                go_backwards=True)],
    "gru_sequences": lambda: [L.GRU(UNITS, return_sequences=True)],
    "stacked_lstm": lambda: [L.LSTM(UNITS, return_sequences=True), L.LSTM(2)],
    "bidirectional_gru": lambda: [L.Bidirectional(L.GRU(UNITS))],
}


def _x(batch=2, steps=STEPS, seed=1):
    return np.random.default_rng(seed).uniform(-2, 2, (batch, steps, FEATURES)).astype(
        np.float32)


def _sequential(case, steps=STEPS):
    return seeded(lambda: tf.keras.Sequential([L.InputLayer((steps, FEATURES))] +
                                              LAYERS[case]()))


def _check_bound(model, x, got, ring):
    want = model(x, training=False).numpy()
    cfg = tp.get_runtime().config
    tol = keras_tol(model, x, cfg.frac_bits, ring)
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= tol), (np.abs(got - want).max(), tol.min())


#: gru_sequences' bound is checked by test_cost_equals_a_run, on the very
#: predict whose bill it checks (issue 25: one conversion of it per ring, not two)
@pytest.mark.parametrize("case", sorted(set(LAYERS) - {"gru_sequences"}))
def test_recurrent_layers_within_their_bound(ring, case):
    model = _sequential(case)
    x = _x()
    _check_bound(model, x, tp.keras.convert(model).predict(x, reveal=True).numpy(), ring)


def test_return_state_of_a_functional_model(ring):
    """LSTM(return_sequences=True, return_state=True): the sequence and both
    final states, each within rnn_tol (h is the sequence's last step; c's
    bound is h's over the output gate, bounded here by the sequence's)."""
    inp = tf.keras.Input((STEPS, FEATURES))
    layer = L.LSTM(UNITS, return_sequences=True, return_state=True)
    model = seeded(lambda: tf.keras.Model(inp, layer(inp)))
    x = _x()
    got = [v.numpy() for v in tp.keras.convert(model).predict(x, reveal=True)]
    want = [v.numpy() for v in model(x)]
    cfg = tp.get_runtime().config
    _, tol = rnn_tol(layer, x, encode_tol(cfg.frac_bits), cfg.frac_bits, ring)
    for g, w, t in zip(got[:2], want[:2], (tol, tol[:, -1])):
        assert np.all(np.abs(g - w) <= t), (np.abs(g - w).max(), t.min())
    # the cell state: c = f·c + i·g without the output gate's damping, so
    # bounded by the same recurrence's error before tanh and o (tanh' <= 1,
    # o < 1 only shrink it): checked against twice h's bound, loosely
    assert np.abs(got[2] - want[2]).max() <= 2 * tol[:, -1].max() + 1e-3


def _n_ops(graph_def) -> int:
    return len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


def test_graph_does_not_grow_with_the_steps():
    """The converted loop holds the body once: 3 or 12 time steps give the
    same graph (a SimpleRNN: the loop is the same for every cell, and its
    body the quickest to trace)."""
    counts = {}
    for steps in (3, 12):
        model = _sequential("simple_rnn_dense", steps)
        counts[steps] = _n_ops(tp.keras.convert(model).graph(batch_size=2))
    assert counts[3] == counts[12], counts


def test_cost_equals_a_run(ring):
    """The bill of one predict (declared while tracing: the body's bill
    once per iteration) equals what a run's channel and counters record;
    the first predict is also gru_sequences' case of
    test_recurrent_layers_within_their_bound (its bound, checked here)."""
    model = _sequential("gru_sequences")
    private = tp.keras.convert(model)
    x = _x()
    _check_bound(model, x, private.predict(x, reveal=True).numpy(), ring)
    with tp.stats() as s:
        private.predict(x)
    assert private._fn.experimental_get_tracing_count() == 1
    bill = private.cost(batch_size=2)
    assert (s.rounds, s.multiplications, s.comparisons) == (
        bill.rounds, bill.multiplications, bill.comparisons)
    assert s.links == {k: tuple(v) for k, v in bill.links.items()}
    assert bill.multiplications >= 3 * STEPS   # per step: r·h, z·h, (1 - z)·hh at least


def _placement(model, x):
    """(traced-graph violations with the loop's body and condition followed,
    int64 tensors the client received in a run) of a predict on x."""
    private = tp.keras.convert(model)
    concrete = private.concrete(batch_size=x.shape[0])
    assert any(op.type in graphcheck.WHILE_OPS for op in concrete.graph.get_operations())
    bad = graphcheck.graph_violations(concrete, tp.servers(), {})
    _, got = graphcheck.client_received(lambda a: private.predict(a), x)
    return bad, got


def test_loop_placement():
    """Every op of the loop that reads a share runs on its holder (the
    traced graph, loop body followed), and a run's client partition
    receives no share: only the public loop condition and control edges.
    test_loop_placement_check_fails_on_a_misplaced_gather runs the same
    checks on a deliberately broken TensorList read, which they catch."""
    model = seeded(lambda: tf.keras.Sequential([
        L.InputLayer((STEPS, FEATURES)),
        L.SimpleRNN(UNITS, return_sequences=True, go_backwards=True)]))
    bad, got = _placement(model, _x())
    assert not bad, "\n".join(bad[:20])
    assert got == [], got


def test_loop_placement_check_fails_on_a_misplaced_gather(monkeypatch):
    """The broken variant: a TensorList read that gathers both shares
    outside their holders' device scopes (so on the client, inside the
    loop body). The trace-time guard refuses it; with the guard silenced,
    the graph check and the run's partitions both see the shares reach the
    client."""
    def misplaced(x, index):
        h = C.handle_of(x)
        return C.wrap(h, [tf.gather(s, index, axis=0) for s in C.shares(x)], x.dtype)

    monkeypatch.setattr(sequence_adapters, "_get", misplaced)
    model = _sequential("simple_rnn_dense")
    with pytest.raises(Exception, match="client|place"):
        tp.keras.convert(model).predict(_x())
    from tf_privpy.protocols.mpc.runtime import placement
    monkeypatch.setattr(placement, "install", lambda *a, **k: None)
    bad, got = _placement(model, _x())
    assert bad and got, (bad, got)


def test_unsupported_recurrent_settings_are_refused_before_running():
    """What the converter cannot compute exactly is refused by convert, with
    what to do: a masked sequence (each step would select by a private
    mask), a stateful layer (each call updates its state variables), a
    ragged input (it would be read dense, padding included)."""
    masked = seeded(lambda: tf.keras.Sequential([
        L.InputLayer((STEPS, FEATURES)), L.Masking(0.0), L.LSTM(UNITS)]))
    with pytest.raises(tp.UnsupportedOpError, match="masked sequence.*What to do: drop"):
        tp.keras.convert(masked)
    stateful = seeded(lambda: tf.keras.Sequential([
        L.InputLayer((STEPS, FEATURES), batch_size=2), L.GRU(UNITS, stateful=True)]))
    with pytest.raises(tp.UnsupportedOpError, match="stateful.*What to do: build"):
        tp.keras.convert(stateful)
    inp = tf.keras.Input((None, FEATURES), ragged=True)
    ragged = seeded(lambda: tf.keras.Model(inp, L.LSTM(UNITS)(inp)))
    with pytest.raises(tp.UnsupportedOpError, match="ragged.*What to do: pad"):
        tp.keras.convert(ragged)


def test_a_private_loop_condition_stays_refused():
    """A loop whose condition reads a private value (the servers would have
    to reveal it to decide) is refused with what to do; the same loop over
    a public count converts and runs on the holders."""
    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def private_cond(x):
        return tf.while_loop(lambda v: tf.reduce_sum(v) < 100.0, lambda v: v * 2.0, [x])[0]

    with pytest.raises(tp.UnsupportedOpError, match="condition depends on a private value"):
        tp.convert(private_cond)

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def public_count(x):
        return tf.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, v * 0.5 + 1.0),
                             [tf.constant(0), x])[1]

    x = np.array([0.5, -1.25, 2.0], np.float32)
    got = tp.convert(public_count).predict(x, reveal=True).numpy()
    f = tp.get_runtime().config.frac_bits
    want, tol = x.astype(np.float64), encode_tol(f)
    for _ in range(4):   # a product by the public 0.5, plus the encoded 1.0
        tol = tol * 0.5 + public_mul_tol(want, 0.5, f) + encode_tol(f)
        want = want * 0.5 + 1.0
    assert np.all(np.abs(got - want) <= tol), (np.abs(got - want), tol)


def test_peeled_first_iteration(monkeypatch):
    """When shape inference cannot say a reserved list's element shape, the
    first iteration runs before the loop (converters/loops.py): same bound,
    and the bill (one iteration in the graph, the rest per loop iteration)
    still equals a run's counters."""
    from tf_privpy.converters import loops
    monkeypatch.setattr(loops, "_written_shapes", lambda *a: None)
    model = _sequential("simple_rnn_dense")
    private = tp.keras.convert(model)
    x = _x()
    got = private.predict(x, reveal=True).numpy()
    cfg = tp.get_runtime().config
    tol = keras_tol(model, x, cfg.frac_bits, cfg.ring_bits)
    assert np.all(np.abs(got - model(x).numpy()) <= tol)
    with tp.stats() as s:
        private.predict(x)
    bill = private.cost(batch_size=2)
    assert (s.rounds, s.multiplications) == (bill.rounds, bill.multiplications)
    assert s.links == {k: tuple(v) for k, v in bill.links.items()}


@pytest.mark.parametrize("policy", ["public_weights", "public_inputs", "all_public"])
def test_policies(policy):
    """Public weights (products by them local), public inputs (the number of
    steps then comes from a public tensor's static shape), or nothing
    private (the loop runs as plain TF): each within the same bound."""
    kw = {"public_weights": dict(weights="public"), "public_inputs": dict(inputs="public"),
          "all_public": dict(inputs="public", weights="public")}[policy]
    model = _sequential("gru_sequences")
    x = _x()
    out = tp.keras.convert(model, policy=tp.Policy(**kw)).predict(x)
    got = (out.reveal() if isinstance(out, tp.PrivateTensor) else out).numpy()
    assert isinstance(out, tp.PrivateTensor) == (policy != "all_public")
    cfg = tp.get_runtime().config
    tol = keras_tol(model, x, cfg.frac_bits, cfg.ring_bits)
    assert np.all(np.abs(got - model(x).numpy()) <= tol)
