"""ResNet50 through the converter (issue 27): tf.keras.applications.ResNet50
with seeded weights (weights=None: no download), one 224x224 image per
predict, in a process of its own so its peak memory is its own.

    python benchmarks/converter_resnet50.py --ring=128 --images=10
    python benchmarks/converter_resnet50.py --ring=64 --images=2 --processes

Embedded by default; --processes runs the four servers as processes on
loopback (the peak memory is then the client's). Prints one JSON row:
conversion, first trace (PrivateModel.concrete), first call, best of
--reps calls, the process's peak resident memory, the bill (bytes between
the servers, rounds, comparisons) and, on --images seeded images, whether
the private argmax equals Keras's and the largest logit error.
benchmarks/converter.py runs it per ring (and per mode) and tables the rows
beside TF-Encrypted's published figure and issue 27's targets.
"""
import json
import resource
import time

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_integer("ring", 128, "ring bits")
flags.DEFINE_integer("images", 10, "seeded images whose argmax is compared with Keras's")
flags.DEFINE_integer("reps", 2, "timed calls after the first (best is reported)")
flags.DEFINE_bool("processes", False, "four server processes on loopback (LocalCluster, "
                  "sealed links; this process the client) instead of the embedded servers")
F = flags.FLAGS

#: TF-Encrypted's ResNet50 on one image (its benchmark, seed 001: three
#: 4-core machines) and its graph build, seconds
TFE = {"s_per_image": 13.55, "build_s": 58.0}
#: issue 27's targets on 2 cores
TARGETS = {"s_per_image": 5.0, "first_call_s": 15.0, "peak_gb": 6.0, "bill_gb": 5.0}


def main(argv):
    del argv
    cluster = None
    if F.processes:
        from tf_privpy.deploy.cluster import LocalCluster
        cluster = LocalCluster().start()
    tp.init(tp.Config(ring_bits=F.ring), **({"cluster": cluster.path} if cluster else {}))
    import numpy as np
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.ResNet50(weights=None)
    rng = np.random.default_rng(0)
    images = tf.keras.applications.resnet50.preprocess_input(
        rng.uniform(0, 255, (F.images, 224, 224, 3)).astype(np.float32))
    t0 = time.perf_counter()
    private = tp.keras.convert(model)
    convert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    private.concrete(1)
    trace_s = time.perf_counter() - t0
    x = images[:1]
    t0 = time.perf_counter()
    private.predict(x).share0.numpy()
    first_s = time.perf_counter() - t0
    best = min(_timed(lambda: private.predict(x).share0.numpy()) for _ in range(F.reps))
    bill = private.cost(1)
    got = np.concatenate([private.predict(images[i:i + 1], reveal=True).numpy()
                          for i in range(F.images)])
    want = model.predict(images, verbose=0)
    row = {
        "model": "resnet50", "ring": F.ring, "batch": 1, "images": F.images,
        "servers": "4 processes on loopback" if F.processes else "embedded",
        "convert_s": convert_s, "trace_s": trace_s, "first_call_s": first_s,
        "s_per_image": best,
        "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "bill_gb": sum(v[1] for k, v in bill.links.items() if "client" not in k) / 1e9,
        "rounds": bill.rounds, "comparisons": bill.comparisons,
        "argmax_equal": int(np.sum(got.argmax(-1) == want.argmax(-1))),
        "max_logit_error": float(np.abs(got - want).max()),
        "tfe": TFE, "targets": TARGETS}
    print("ROW " + json.dumps(row), flush=True)
    if cluster is not None:
        tp.reset()
        cluster.stop()


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    app.run(main)
