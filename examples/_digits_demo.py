"""The part the private-inference demos share (lenet5_private_inference.py,
vit_private_inference.py): the model owner converts the trained Keras model,
the data owner classifies digits privately in batches, and the report sets
the private predictions beside plaintext Keras."""
import time

import numpy as np
from absl import flags

import tf_privpy as tp

# the demos' common flags (each adds its own)
flags.DEFINE_integer("images", 100, "test digits to classify privately")
flags.DEFINE_integer("batch", 50, "digits per private predict call")
flags.DEFINE_integer("ring_bits", 128, "ring: 128 (default) or 64 (fast mode)")


def start():
    """tp.init in the --ring_bits ring (before any other TF op) and the
    shipped digits as images: ((x_train, y_train), (x_test, y_test))."""
    tp.init(tp.Config(ring_bits=flags.FLAGS.ring_bits))
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    return tp.datasets.load_mnist(flatten=False)


def convert_and_classify(model, x_test, y_test, images: int, batch: int) -> None:
    """Converts `model`, classifies the first `images` digits of x_test
    privately, `batch` per predict call, and prints the bill, the times and
    how the private classes compare with Keras's and with the labels."""
    t0 = time.perf_counter()
    private = tp.keras.convert(model)
    print(f"\nconverted in {time.perf_counter() - t0:.2f} s (traced, frozen, rewritten; "
          f"weights shared once)")
    print(private.summary(batch_size=batch))

    n, b = min(images, len(x_test)), batch
    x, y = x_test[:n], y_test[:n]
    print(f"\ndata owner: classifying {n} test digits privately, {b} per call ...", flush=True)
    t0 = time.perf_counter()
    private.predict(x[:b], reveal=True)  # first call traces the private graph
    t_trace = time.perf_counter() - t0
    scores, t_run = [], 0.0
    for start in range(0, n, b):
        t0 = time.perf_counter()
        scores.append(private.predict(x[start:start + b], reveal=True).numpy())
        t_run += time.perf_counter() - t0
        print(f"  {start + len(scores[-1])}/{n} digits", flush=True)
    scores = np.concatenate(scores)
    plain = model.predict(x, verbose=0)
    pred, plain_pred = scores.argmax(-1), plain.argmax(-1)

    print(f"\n  first call (tracing the private graph): {t_trace:.1f} s")
    print(f"  time per image: {1e3 * t_run / n:.1f} ms private, at batch {b}")
    print(f"  accuracy: private {np.mean(pred == y):.1%}, plaintext Keras "
          f"{np.mean(plain_pred == y):.1%}")
    print(f"  private predictions equal to plaintext: {np.mean(pred == plain_pred):.1%}")
    print(f"  max |private - plaintext| score: {np.abs(scores - plain).max():.2e}")
    for i in range(min(5, n)):
        print(f"  digit {i}: label {y[i]}, private {pred[i]}, plaintext {plain_pred[i]}")
