"""Private training in each numerics mode (issue 14): logistic regression
(MNIST 0-4 vs 5-9, sigmoid + binary cross-entropy, SGD 0.1) and network A
(TF-Encrypted's 784-128-128-10 ReLU network, softmax cross-entropy, SGD
0.05), --steps SGD steps of batch 128 with tp.keras.convert_training under
Policy(numerics_mode=...) ("exact" or "fast": the sigmoid of LR's
gradient, the softmax of network A's), then test accuracy of the revealed
weights beside plaintext Keras trained on the same batches.

    python benchmarks/training_modes.py                       # 1,000 steps, both rings
    python benchmarks/training_modes.py --steps=100 --rings=64 --models=lr

Results go to benchmarks/results/training_modes.json.
"""
import os
import time

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("rings", ["128", "64"], "rings to train in")
flags.DEFINE_list("modes", ["exact", "fast"], "numerics modes (Policy(numerics_mode=...))")
flags.DEFINE_list("models", ["lr", "network_a"], "lr and/or network_a")
flags.DEFINE_integer("steps", 1000, "SGD steps of batch --batch")
flags.DEFINE_integer("batch", 128, "examples per step")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for training_modes.json")
F = flags.FLAGS


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf
    from _report import machine, print_table, write_json
    tp.init()                       # splits the CPU before any TF op runs
    tf.get_logger().setLevel("ERROR")
    (x, y), (xt, yt) = tp.datasets.load_mnist()
    data = {"lr": (tp.datasets.mnist_binary(x, y), tp.datasets.mnist_binary(xt, yt)),
            "network_a": ((x, np.eye(10)[y]), (xt, np.eye(10)[yt]))}

    def setup(name):
        tf.keras.utils.set_random_seed(0)
        if name == "lr":
            return (tp.models.logistic_regression(784), tf.keras.losses.BinaryCrossentropy(),
                    lambda: tf.keras.optimizers.SGD(0.1))
        return (tp.models.network_a(),
                tf.keras.losses.CategoricalCrossentropy(from_logits=True),
                lambda: tf.keras.optimizers.SGD(0.05))

    def accuracy(name, model, xs, ys):
        p = model.predict(xs.astype(np.float32), verbose=0)
        if name == "lr":
            return float(np.mean((p.ravel() > 0.5) == (ys.ravel() > 0.5)))
        return float(np.mean(p.argmax(1) == ys.argmax(1)))

    res = {"machine": machine(), "steps": F.steps, "batch": F.batch, "rows": []}
    for name in F.models:
        (xs, ys), (xte, yte) = data[name]
        xs, ys = xs.astype(np.float32), ys.reshape(len(xs), -1).astype(np.float32)
        rng = np.random.default_rng(0)
        batches = [rng.choice(len(xs), F.batch, replace=False) for _ in range(F.steps)]
        model, loss, opt = setup(name)
        plain = tf.keras.models.clone_model(model)
        plain.set_weights(model.get_weights())
        plain.compile(opt(), loss)
        for idx in batches:
            plain.train_on_batch(xs[idx], ys[idx])
        plain_acc = accuracy(name, plain, xte, yte)
        for bits in map(int, F.rings):
            tp.reset()
            tp.init(tp.Config(ring_bits=bits))
            for mode in F.modes:
                model, loss, opt = setup(name)
                trainer = tp.keras.convert_training(model, loss, opt(),
                                                    policy=tp.Policy(numerics_mode=mode))
                t0 = time.perf_counter()
                for i, idx in enumerate(batches):
                    trainer.step(xs[idx], ys[idx])
                    if (i + 1) % max(1, F.steps // 10) == 0:
                        print(f"  {name} ring {bits} {mode}: step {i + 1}/{F.steps}", flush=True)
                secs = time.perf_counter() - t0
                acc = accuracy(name, trainer.assign_to(model), xte, yte)
                row = {"model": name, "ring": bits, "mode": mode, "steps": F.steps,
                       "accuracy": acc, "plaintext_accuracy": plain_acc,
                       "ms_per_step": 1e3 * secs / max(F.steps, 1)}
                res["rows"].append(row)
                print(row, flush=True)
                write_json(os.path.join(F.out, "training_modes.json"), res)
    print_table(f"Test accuracy after {F.steps} SGD steps of batch {F.batch} (MNIST), per "
                "numerics mode", ["model", "ring", "mode", "accuracy", "plaintext Keras",
                                  "ms/step (incl. tracing)"],
                [[r["model"], r["ring"], r["mode"], f"{r['accuracy']:.2%}",
                  f"{r['plaintext_accuracy']:.2%}", f"{r['ms_per_step']:.0f}"]
                 for r in res["rows"]])
    write_json(os.path.join(F.out, "training_modes.json"), res)


if __name__ == "__main__":
    app.run(main)
