"""Private logistic-regression training on MNIST 0-4 vs 5-9 (TF-Encrypted's task).

User story: data owners share their digits, the model owner shares an initial
model, and the servers run SGD with tp.keras.convert_training: the weights
stay secret-shared between S1 and S2 from step to step, and only the final
weights are revealed to the model owner. The same steps run in plaintext
float64 Keras from the same start on the same batches, and the program
prints how far apart the two end (RRMSE of the weights) and both test
accuracies.

    python examples/lr_private_training.py                  # 200 steps of batch 128
    python examples/lr_private_training.py --steps=1000 --ring_bits=64
    python examples/lr_private_training.py --dataset=breast_cancer --batch=32
"""
import time

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_enum("dataset", "mnist", ["mnist", "breast_cancer"], "training data")
flags.DEFINE_integer("steps", 200, "SGD steps")
flags.DEFINE_integer("batch", 128, "examples per step")
flags.DEFINE_float("lr", 0.1, "SGD learning rate")
flags.DEFINE_integer("ring_bits", 128, "ring: 128 (default) or 64 (fast mode)")
F = flags.FLAGS


def main(argv):
    del argv
    tp.init(tp.Config(ring_bits=F.ring_bits))
    import numpy as np
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    if F.dataset == "mnist":
        (x, y), (xt, yt) = tp.datasets.load_mnist()
        (x, y), (xt, yt) = tp.datasets.mnist_binary(x, y), tp.datasets.mnist_binary(xt, yt)
    else:
        (x, y), (xt, yt) = tp.datasets.load_breast_cancer()
    x, xt = x.astype(np.float32), xt.astype(np.float32)
    y, yt = y.reshape(-1, 1).astype(np.float32), yt.reshape(-1, 1).astype(np.float32)

    tf.keras.utils.set_random_seed(0)
    model = tp.models.logistic_regression(x.shape[1])
    # Plaintext reference: the same SGD in float64 from the same weights.
    w = [v.astype(np.float64) for v in model.get_weights()]
    loss = tf.keras.losses.BinaryCrossentropy()
    trainer = tp.keras.convert_training(model, loss, tf.keras.optimizers.SGD(F.lr))
    print(trainer.summary(batch_size=F.batch))

    rng = np.random.default_rng(0)
    t_private = 0.0
    print(f"\n{F.steps} steps of batch {F.batch} ...", flush=True)
    for step in range(F.steps):
        idx = rng.choice(len(x), F.batch, replace=False)
        xb, yb = x[idx], y[idx]
        t0 = time.perf_counter()
        trainer.step(xb, yb)
        t_private += time.perf_counter() - t0 if step else 0.0  # step 0 traces
        p = 1 / (1 + np.exp(-(xb.astype(np.float64) @ w[0] + w[1])))
        g = (p - yb) / F.batch
        w = [w[0] - F.lr * xb.T.astype(np.float64) @ g, w[1] - F.lr * g.sum(0)]
        if (step + 1) % max(1, F.steps // 5) == 0:
            print(f"  step {step + 1}/{F.steps}", flush=True)
    got = [np.asarray(v, np.float64) for v in trainer.weights(reveal=True)]
    flat_got, flat_ref = np.concatenate([v.ravel() for v in got]), np.concatenate(
        [v.ravel() for v in w])
    rrmse = np.sqrt(np.mean((flat_got - flat_ref) ** 2)) / np.sqrt(np.mean(flat_ref ** 2))

    def accuracy(weights):
        z = xt.astype(np.float64) @ weights[0] + weights[1]
        return np.mean((z > 0) == (yt > 0.5))

    print(f"\n  time per step (batch {F.batch}): {1e3 * t_private / max(1, F.steps - 1):.1f} ms")
    print(f"  RRMSE of the private weights against plaintext float64 SGD: {rrmse:.2e}")
    print(f"  test accuracy: private {accuracy(got):.2%}, plaintext {accuracy(w):.2%}")


if __name__ == "__main__":
    app.run(main)
