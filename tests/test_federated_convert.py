"""tp.federated.convert (issue 30): a federated step's cross-client reduction,
found in the traced graph and replaced by a secure aggregation (mpc: the four
servers; batchcrypt: Paillier), against the plaintext step on real updates
(Keras gradients of a small model on sklearn digits split across 3 clients),
with tolerances from the fixed-point encoding (tests/tolerances.py); dropped
clients; refusals; declared bytes == measured; FedAvg accuracy against the
plain step and TFF's own FedAvg; and what each party sees (a child process with one device per data owner)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
import tolerances as T
from tf_privpy.he import batchcrypt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M = 3
WEIGHTS = [30.0, 50.0, 20.0]      # public weights (e.g. the clients' example counts)


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    train = [(x[i * 500:(i + 1) * 500], y[i * 500:(i + 1) * 500]) for i in range(M)]
    return train, (x[1500:], y[1500:])


def _keras_grad_step():
    """The step: each client's Keras gradient on its batch, times its public
    weight, summed and divided by the total weight."""
    init = tf.keras.initializers.GlorotUniform(seed=1)
    model = tf.keras.Sequential([tf.keras.layers.InputLayer((64,)),
                                 tf.keras.layers.Dense(16, activation="relu",
                                                       kernel_initializer=init),
                                 tf.keras.layers.Dense(10, kernel_initializer=init)])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def client_grads(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=False))
        return tape.gradient(loss, model.trainable_variables)

    def step(x0, y0, x1, y1, x2, y2):
        gs = [client_grads(x0, y0), client_grads(x1, y1), client_grads(x2, y2)]
        total = sum(WEIGHTS)
        return [tf.add_n([w * g[k] for w, g in zip(WEIGHTS, gs)]) / total
                for k in range(len(gs[0]))]
    return step, client_grads


def _specs(n=40):
    return [tf.TensorSpec([n, 64], tf.float32), tf.TensorSpec([n], tf.int32)] * M


def _args(train, n=40, off=0):
    return [a for x, y in train for a in (x[off:off + n], y[off:off + n])]


def _terms(client_grads, args, weights=WEIGHTS):
    """Each client's weighted gradient w_i * g_i as the client computes it (float32)."""
    out = []
    for i, w in enumerate(weights):
        g = client_grads(tf.constant(args[2 * i]), tf.constant(args[2 * i + 1]))
        out.append([np.float32(w) * v.numpy() for v in g])
    return out


def test_mpc_weighted_mean_of_keras_gradients_within_the_encoding(digits):
    step, client_grads = _keras_grad_step()
    fed = tp.federated.convert(step, _specs(), tp.federated.FederatedPolicy(clients=M))
    summary = fed.summary()
    assert summary.count("sum of 3 clients' updates") == 4, summary   # kernel, bias x 2 layers
    assert "AddN" in summary and "truediv" in summary
    args = _args(digits[0])
    got, report = fed.run(*args)
    terms = _terms(client_grads, args)
    f = tp.get_runtime().config.frac_bits
    for k, g in enumerate(got):
        s = sum(np.asarray(t[k], np.float64) for t in terms)
        want = s / sum(WEIGHTS)
        # M encodings (ulp/2 each), then the public product by 1/total (one truncation)
        tol = T.linear_tol(f, M) / sum(WEIGHTS) + T.public_mul_tol(
            s, 1 / sum(WEIGHTS), f) + np.abs(want) * 2.0 ** -23
        assert np.all(np.abs(got[k] - want) <= tol), (k, np.max(np.abs(got[k] - want)))
    assert report.present == [0, 1, 2] and report.factors and set(report.factors.values()) == {1.0}
    # the declared bytes per client (the child process, one device per
    # client, checks them against the channels' counts)
    assert report.bytes_up_per_client == fed.bytes_per_client()[0] == \
        2 * 16 * (64 * 16 + 16 + 16 * 10 + 10)


def test_mpc_dropped_client_renormalises_the_weights(digits):
    step, client_grads = _keras_grad_step()
    fed = tp.federated.convert(step, _specs(), tp.federated.FederatedPolicy(clients=M))
    args = _args(digits[0])
    dropped = list(args)
    dropped[2:4] = [None, None]                      # client 1's update never arrives
    got, report = fed.run(*dropped)
    assert report.present == [0, 2]
    terms = _terms(client_grads, args)
    f = tp.get_runtime().config.frac_bits
    here = WEIGHTS[0] + WEIGHTS[2]
    for k, g in enumerate(got):
        s = np.asarray(terms[0][k], np.float64) + terms[2][k]
        want = s / here                               # the mean over the present clients
        tol = (T.linear_tol(f, 2) + T.public_mul_tol(s, sum(WEIGHTS) / here, f)) / sum(
            WEIGHTS) + T.public_mul_tol(s * sum(WEIGHTS) / here, 1 / sum(WEIGHTS), f) \
            + np.abs(want) * 2.0 ** -23
        assert np.all(np.abs(g - want) <= tol), (k, np.max(np.abs(g - want)))
    assert report.factors[next(iter(report.factors))] == pytest.approx(sum(WEIGHTS) / here)
    with pytest.raises(ValueError, match="present must name"):
        fed.run(*args, present=[0, 7])


def test_mean_over_a_stack_of_clients_updates():
    def step(u0, u1, u2):
        return tf.reduce_mean(tf.stack([u0, u1, u2]), axis=0) * 0.5
    spec = tf.TensorSpec([4, 3], tf.float32)
    fed = tp.federated.convert(step, [spec] * 3, tp.federated.FederatedPolicy(clients=3))
    assert "Mean" in fed.summary() and "x 0.333333" in fed.summary()
    us = [np.random.default_rng(i).normal(size=(4, 3)).astype(np.float32) for i in range(3)]
    np.testing.assert_allclose(fed(*us), step(*us).numpy(), atol=1e-5)
    np.testing.assert_allclose(fed(us[0], us[1], None), (us[0] + us[1]) / 4, atol=1e-5)


def test_nonlinear_cross_client_ops_and_private_weights_are_refused():
    spec = tf.TensorSpec([5], tf.float32)

    def bad(u0, u1, u2):
        top = tf.maximum(u0, u1)                                  # nonlinear across clients
        n = [tf.reduce_sum(tf.abs(u)) for u in (u0, u1, u2)]      # private weights
        mean = (n[0] * u0 + n[1] * u1 + n[2] * u2) / tf.add_n(n)
        return top + mean, u2 * 2.0                               # a client's own value out

    with pytest.raises(tp.federated.FederatedConversionError) as e:
        tp.federated.convert(bad, [spec] * 3, tp.federated.FederatedPolicy(clients=3))
    msg = str(e.value)
    assert "Maximum [Maximum]: combines the values of clients [0, 1] by a nonlinear" in msg
    assert "divides by a value aggregated across clients (a private weight)" in msg
    assert "output 1 is client 2's own value" in msg
    assert len(e.value.problems) == 3, msg
    with pytest.raises(ValueError, match="no reduction across clients"):
        tp.federated.convert(lambda a, b: tf.size(a) + tf.size(b), [spec] * 2,
                             tp.federated.FederatedPolicy(clients=[0, 1]))
    with pytest.raises(ValueError, match="equal groups"):
        tp.federated.FederatedPolicy(clients=2).arg_clients(3)


def test_batchcrypt_backend_within_its_quantization(digits):
    step, client_grads = _keras_grad_step()
    pol = tp.federated.FederatedPolicy(clients=M, backend="batchcrypt", seed=1)
    fed = tp.federated.convert(step, _specs(), pol)
    assert "positive_overflows, negative_overflows, clipped" in fed.summary()
    args = _args(digits[0])
    got, report = fed.run(*args)
    terms = _terms(client_grads, args)
    # the aggregator quantizes each client's update scaled by 1/M (uniform
    # weights: the graph's weights are already in the terms) with a per-layer
    # step alpha/qmax; the mean is within M steps, the sum (x M) within M^2
    scaled = [[t / M for t in ts] for ts in terms]
    codec = batchcrypt.BatchCryptCodec(16, M, 2048)
    alphas = codec.alphas(batchcrypt.merge_stats([batchcrypt.layer_stats(u) for u in scaled]))
    for k, g in enumerate(got):
        want = sum(np.asarray(t[k], np.float64) for t in terms) / sum(WEIGHTS)
        tol = M * M * alphas[k] / codec.qmax / sum(WEIGHTS) + 1e-7
        assert np.all(np.abs(g - want) <= tol), (k, np.max(np.abs(g - want)), tol)
    assert report.positive_overflows == report.negative_overflows == report.clipped == 0
    assert (report.bytes_up_per_client, report.bytes_down_per_client) == fed.bytes_per_client()


@pytest.mark.parametrize("backend", ["paillier", "plaintext"])
def test_paillier_and_plaintext_backends(backend):
    """build_batchcrypt_fed_avg's other aggregations, as backends of the pass:
    one ciphertext per fixed-point value (exact to 2^-24 per client) and the
    unprotected reference; the bytes declared before the round are the
    messages' lengths."""
    def step(u0, u1, u2):
        return (2. * u0 + 3. * u1 + 5. * u2) / 10.
    spec = tf.TensorSpec([4, 3], tf.float32)
    fed = tp.federated.convert(step, [spec] * 3,
                               tp.federated.FederatedPolicy(clients=3, backend=backend))
    assert ("NO protection" in fed.summary()) == (backend == "plaintext")
    us = [np.random.default_rng(i).normal(size=(4, 3)).astype(np.float32) for i in range(3)]
    got, report = fed.run(*us)
    want = step(*map(tf.constant, us)).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=3 * 2.0 ** -24 + 1e-6)
    assert (report.bytes_up_per_client, report.bytes_down_per_client) == fed.bytes_per_client()
    assert report.aggregation.values == 12


def _fedavg_step(lr=1.0):
    """Softmax regression; each client's gradient on its batch; the global
    model's update W - lr * weighted mean, all in the step."""
    def grads(w, b, x, y):
        with tf.GradientTape() as tape:
            tape.watch([w, b])
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, x @ w + b))
        return tape.gradient(loss, [w, b])

    def step(w, b, x0, y0, x1, y1, x2, y2):
        gs = [grads(w, b, x0, y0), grads(w, b, x1, y1), grads(w, b, x2, y2)]
        mean = [tf.add_n([c * g[k] for c, g in zip(WEIGHTS, gs)]) / sum(WEIGHTS)
                for k in range(2)]
        return w - lr * mean[0], b - lr * mean[1]
    specs = [tf.TensorSpec([64, 10], tf.float32), tf.TensorSpec([10], tf.float32)] + _specs(100)
    return step, specs


def _accuracy(w, b, test):
    x, y = test
    return float(np.mean(np.argmax(x @ w + b, axis=1) == y))


@pytest.mark.parametrize("backend", ["mpc", "batchcrypt"])
def test_fedavg_rounds_reach_plaintext_accuracy(digits, backend):
    step, specs = _fedavg_step()
    pol = tp.federated.FederatedPolicy(clients=[None, None] + [0, 0, 1, 1, 2, 2],
                                       backend=backend, seed=2)
    fed = tp.federated.convert(step, specs, pol)
    plain = tf.function(step, input_signature=specs)
    train, test = digits
    w = b = None
    ws = [np.zeros((64, 10), np.float32), np.zeros(10, np.float32)]
    wp = list(ws)
    for r in range(8):
        batch = _args(train, 100, (r * 100) % 500)
        ws = list(fed(*ws, *batch))
        wp = [v.numpy() for v in plain(*wp, *batch)]
    w, b = ws
    acc, ref = _accuracy(w, b, test), _accuracy(*wp, test)
    assert ref > 0.8, ref
    assert abs(acc - ref) <= 0.01, (acc, ref)


COUNTS = [50, 100, 25]    # each client's examples per round: FedAvg's (public) weights
LOCAL_STEPS, ROUNDS, CLIENT_LR = 5, 10, 1.0


def _local_fedavg_step():
    """FedAvg (McMahan et al. 2017, Algorithm 1) of softmax regression as TFF's
    build_weighted_fed_avg runs it with client SGD(CLIENT_LR), server SGD(1)
    and NUM_EXAMPLES weighting: each client takes LOCAL_STEPS SGD steps on
    its round's examples (its own nodes, run on its device); its model delta
    (TFF's sign: initial - trained) is weighted by its example count; the
    global model moves by the weighted mean (the rewritten reduction)."""
    def local(w, b, x, y):
        for xb, yb in zip(tf.split(x, LOCAL_STEPS), tf.split(y, LOCAL_STEPS)):
            with tf.GradientTape() as tape:
                tape.watch([w, b])
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(yb, xb @ w + b))
            gw, gb = tape.gradient(loss, [w, b])
            w, b = w - CLIENT_LR * gw, b - CLIENT_LR * gb
        return w, b

    def step(w, b, x0, y0, x1, y1, x2, y2):
        trained = [local(w, b, x0, y0), local(w, b, x1, y1), local(w, b, x2, y2)]
        deltas = [(w - tw, b - tb) for tw, tb in trained]
        mean = [tf.add_n([n * d[k] for n, d in zip(COUNTS, deltas)]) / sum(COUNTS)
                for k in range(2)]
        return w - mean[0], b - mean[1]
    specs = [tf.TensorSpec([64, 10], tf.float32), tf.TensorSpec([10], tf.float32)]
    for n in COUNTS:
        specs += [tf.TensorSpec([n, 64], tf.float32), tf.TensorSpec([n], tf.int32)]
    return step, specs


def _round_data(train, r):
    """Round r's examples of each client: the next COUNTS[c] of its 500
    (again from the first after the last)."""
    return [(x[o:o + n], y[o:o + n]) for (x, y), n in zip(train, COUNTS)
            for o in [(r * n) % len(x)]]


@pytest.fixture(scope="module")
def reference_accuracies(digits, reap_tff_worker):
    """Test accuracy after ROUNDS rounds of (TFF's own weighted FedAvg, the
    plain step in TF): the same clients, data, model and rounds."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_federated as tff
    train, test = digits
    spec = (tf.TensorSpec([None, 64], tf.float32), tf.TensorSpec([None], tf.int32))

    def model_fn():
        keras = tf.keras.Sequential([tf.keras.layers.InputLayer((64,)),
                                     tf.keras.layers.Dense(10, kernel_initializer="zeros")])
        return tff.learning.models.from_keras_model(
            keras, input_spec=spec,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    proc = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(CLIENT_LR),
        tff.learning.optimizers.build_sgdm(1.0))
    state = proc.initialize()
    step, specs = _local_fedavg_step()
    plain = tf.function(step, input_signature=specs)
    wp = [np.zeros((64, 10), np.float32), np.zeros(10, np.float32)]
    for r in range(ROUNDS):
        data = _round_data(train, r)
        state = proc.next(state, [tf.data.Dataset.from_tensor_slices(d).batch(
            n // LOCAL_STEPS) for d, n in zip(data, COUNTS)]).state
        wp = [v.numpy() for v in plain(*wp, *[a for d in data for a in d])]
    wt = proc.get_model_weights(state).trainable
    # the two references are the same algorithm: equal to float32 rounding
    for a, b in zip(wt, wp):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    return {"tff": _accuracy(*wt, test), "plaintext": _accuracy(*wp, test)}


@pytest.mark.parametrize("backend", ["mpc", "batchcrypt"])
def test_rewritten_fedavg_matches_tff_and_plaintext_accuracy(digits, reference_accuracies,
                                                             backend):
    """Issue 30's criterion: the rewritten step (3 clients, real digits,
    ROUNDS rounds of local training) reaches TFF's FedAvg accuracy and the plain
    step's within 1 %, for each backend."""
    step, specs = _local_fedavg_step()
    pol = tp.federated.FederatedPolicy(clients=[None, None] + [0, 0, 1, 1, 2, 2],
                                       backend=backend, seed=4)
    fed = tp.federated.convert(step, specs, pol)
    train, test = digits
    ws = [np.zeros((64, 10), np.float32), np.zeros(10, np.float32)]
    for r in range(ROUNDS):
        ws = list(fed(*ws, *[a for d in _round_data(train, r) for a in d]))
    acc = _accuracy(*ws, test)
    ref = reference_accuracies
    print(f"accuracy after {ROUNDS} rounds: {backend} {acc:.4f}, TFF {ref['tff']:.4f}, "
          f"plaintext {ref['plaintext']:.4f}")
    assert ref["tff"] > 0.8, ref
    assert abs(acc - ref["tff"]) <= 0.01 and abs(acc - ref["plaintext"]) <= 0.01, (acc, ref)


def test_the_servers_see_only_shares_and_a_leak_is_caught():
    """Partition graphs of one mpc round (TF run metadata), one device per
    data owner: all that leaves a client's device is ShareSplit's output to
    S1 or S2; the same round with a client's plaintext update also sent to
    S1 is reported."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    child = os.path.join(ROOT, "tests", "federated_placement_child.py")
    out = {}
    for variant in ("honest", "broken"):
        r = subprocess.run([sys.executable, child, variant], env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        out[variant] = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["honest"] == []
    leaks = [v for v in out["broken"] if "is sent to S1" in v]
    assert len(leaks) == 3, out["broken"]     # one per client; the channel counted its bytes too
    assert any(v.startswith("measured") for v in out["broken"]), out["broken"]


def test_share_owner_and_reveal_to_refuse_unknown_parties():
    with pytest.raises(ValueError, match="data owner"):
        tp.share([1.0], owner="S1")
    with pytest.raises(ValueError, match="data owner"):
        tp.reveal(tp.share([1.0]), to="T1")
