"""Convert any saved Keras model and run it privately beside plaintext Keras.

User story: you have a trained model on disk (.keras, .h5 or a SavedModel
folder) and want to know what private inference costs and whether it gives
the same answers. This program loads it, converts it (every unsupported
layer is listed at once if any), prints the summary and cost bill, then
classifies inputs privately and compares with plaintext Keras. Without
--model it uses the reference network B (tp.models, trained once on the
shipped MNIST digits and cached).

    python examples/keras_convert.py --model=my_model.keras --samples=16
    python examples/keras_convert.py --weights=public --ring_bits=64
"""
import sys

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_string("model", None, "a saved Keras model; default: tp.models network_b")
flags.DEFINE_integer("samples", 20, "inputs to run privately")
flags.DEFINE_integer("ring_bits", 128, "ring: 128 (default) or 64 (fast mode)")
flags.DEFINE_enum("weights", "private", ["private", "public"], "are the weights private?")
F = flags.FLAGS


def main(argv):
    del argv
    tp.init(tp.Config(ring_bits=F.ring_bits))
    import numpy as np
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    if F.model:
        model = tf.keras.models.load_model(F.model, compile=False)
        shape = model.input_shape[1:]
        if None in shape:
            sys.exit(f"{F.model}: give the model a fixed input shape to convert it")
        x = np.random.default_rng(0).uniform(-1, 1, (F.samples,) + shape).astype(np.float32)
        print(f"loaded {F.model}; random inputs in [-1, 1]")
    else:
        (xtr, ytr), (xt, _) = tp.datasets.load_mnist(flatten=False)
        model = tp.models.train("network_b", xtr, ytr)
        x = xt[:F.samples]
        print("reference network B on real test digits")
    try:
        private = tp.keras.convert(model, policy=tp.Policy(weights=F.weights))
    except tp.UnsupportedOpError as e:
        sys.exit(str(e))
    print(private.summary(batch_size=len(x)))
    got = private.predict(x, reveal=True).numpy()
    want = model.predict(x, verbose=0)
    err = float(np.abs(got - want).max())
    print(f"\nmax |private - plaintext| output: {err:.2e}")
    if want.ndim == 2 and want.shape[1] > 1:
        # A random model can score two classes (near-)equal, e.g. a ReLU layer that is all
        # zero makes the output the bias alone. Where plaintext's top two differ by no more
        # than the two outputs differ, either class is right; such ties are counted apart.
        rows = np.arange(len(want))
        top2 = np.sort(want, axis=-1)[:, -2:]
        tie = top2[:, 1] - top2[:, 0] <= 2 * err
        same = got.argmax(-1) == want.argmax(-1)
        ok = same | (tie & (want[rows, got.argmax(-1)] >= top2[:, 1] - 2 * err))
        print(f"same class as plaintext: {np.mean(ok):.1%}"
              f" ({int(tie.sum())} of {len(want)} a tie in plaintext within the output error;"
              f" {int(same.sum())} identical argmax)")


if __name__ == "__main__":
    app.run(main)
