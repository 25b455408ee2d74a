"""Converted Keras models (DESIGN §8): private inference time per image by
batch size, and graph build time, beside plaintext Keras in the same run and
PrivPy's Table 6 (seed 000; 4 servers of 8 vCPUs each, 1 GbE).

Embedded four-server runtime; each model is one of tp.models, trained once on
the shipped MNIST digits (cached), converted with tp.keras.convert; every
time is the best of --reps predict calls on real test digits after one
warm-up call. "build s" is the conversion plus the first trace of the
private graph at that batch size (PrivateModel.concrete: nothing runs);
"first run s" the warm-up call that follows, on that trace:

    python benchmarks/converter.py                          # FFNN, LeNet-5, LeNet-5+BN, ViT
    python benchmarks/converter.py --rings=64 --batches=1,10 --models=lenet5 --reps=1

ResNet50 (issue 27; seeded weights, one 224x224 image, --resnet50) runs in a
process of its own per ring (converter_resnet50.py): time per image, first
call, peak memory, bill and argmax against Keras on 10 images, beside
TF-Encrypted's figure and the issue's targets.

Results go to benchmarks/results/converter.json and converter.png.
"""
import os
import time

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("rings", ["128", "64"], "rings to measure")
flags.DEFINE_list("models", ["ffnn", "lenet5", "lenet5_sigmoid", "lenet5_bn", "vit"],
                  "tp.models names (lenet5_sigmoid / lenet5_bn: PrivPy's sigmoid, sum-pool "
                  "LeNet-5 without / with BatchNorm; vit: the Vision Transformer)")
flags.DEFINE_list("batches", ["1", "10", "100", "1000"], "images per predict call (PrivPy "
                  "Table 6's batches)")
flags.DEFINE_list("vit_batches", ["1", "32"], "the ViT's batches (issue 27's: 1 and 32; at "
                  "1,000 its 91 million comparisons would not fit in memory at once)")
flags.DEFINE_integer("reps", 3, "timed repetitions (best is reported)")
flags.DEFINE_bool("resnet50", True, "also ResNet50 (seeded weights, 224x224, batch 1), each "
                  "ring in a process of its own (converter_resnet50.py): several minutes")
flags.DEFINE_integer("resnet50_images", 10, "ResNet50's images compared with Keras")
flags.DEFINE_bool("resnet50_processes", True, "ResNet50 on four server processes on loopback "
                  "too (issue 27's target: at most 3x embedded)")
flags.DEFINE_bool("untrained", False, "seeded, untrained weights (the smoke test's: the "
                  "time does not depend on the values, and training LeNet-5 on a fresh "
                  "machine took longer than the rest of the smoke run)")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for converter.json / .png")
F = flags.FLAGS

# PrivPy Table 6, seconds per image at batch 1 / 10 / 100 / 1000 (ANCHORS.md)
PRIVPY = {"ffnn": (1.48, 0.31, 0.06, 0.04), "lenet5_sigmoid": (1.57, 0.23, 0.1, 0.1),
          "lenet5_bn": (1.58, 0.32, 0.17, 0.16)}
#: issue 10's targets on 2 cores, 128-bit ring, embedded (ms per image)
TARGETS = {("lenet5", 1): 40.0, ("lenet5", 100): 12.0}
#: CrypTen's LeNet-5 on this machine, two processes (issue 10's figures, ms per
#: image at batch 1 and 100): a peer measured here once, not re-run each time
CRYPTEN_MS = {("lenet5", 1): 475.0, ("lenet5", 100): 55.0}


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf
    from _report import bar_png, machine, print_table, timing_stats, write_json
    tf.get_logger().setLevel("ERROR")
    res = {"machine": machine(), "anchor": "PrivPy Table 6 (s per image)", "rows": []}
    for bits in map(int, F.rings):
        tp.reset()
        tp.init(tp.Config(ring_bits=bits))
        (x, y), (xt, _) = tp.datasets.load_mnist(flatten=False)
        for name in F.models:
            if F.untrained:
                tf.keras.utils.set_random_seed(0)
                model = tp.models.BUILDERS[name]()
            else:
                model = tp.models.train(name, x, y)
            t0 = time.perf_counter()
            private = tp.keras.convert(model)
            t_convert = time.perf_counter() - t0
            for b in map(int, F.vit_batches if name == "vit" else F.batches):
                xb = xt[:b].reshape((-1,) + model.input_shape[1:])
                t0 = time.perf_counter()
                with tp.profiling.guard_time() as guard:
                    private.concrete(b)               # the first trace
                t_build = t_convert + time.perf_counter() - t0
                t0 = time.perf_counter()
                private.predict(xb).share0.numpy()    # reuses that trace
                t_first = time.perf_counter() - t0
                st_priv = timing_stats(lambda: private.predict(xb).share0.numpy(), F.reps)
                t_priv = st_priv["min_s"]
                plain = tf.function(lambda v: model(v, training=False))
                st_plain = timing_stats(lambda: plain(xb).numpy(), F.reps)
                t_plain = st_plain["min_s"]
                bill = private.cost(b)
                anchor = PRIVPY.get(name, (None,) * 4)[
                    {1: 0, 10: 1, 100: 2, 1000: 3}[b]] if b in (1, 10, 100, 1000) else None
                res["rows"].append({
                    "ring": bits, "model": name, "batch": b,
                    "private_ms_per_image": 1e3 * t_priv / b,
                    # per call (b images): median, min, max for benchmarks/report.py
                    "private_s": st_priv, "plaintext_s": st_plain,
                    "plaintext_ms_per_image": 1e3 * t_plain / b,
                    "privpy_ms_per_image": None if anchor is None else 1e3 * anchor,
                    "target_ms_per_image": TARGETS.get((name, b)) if bits == 128 else None,
                    "crypten_ms_per_image": CRYPTEN_MS.get((name, b)),
                    "build_s": t_build, "guard_s": guard[0], "first_run_s": t_first,
                    "rounds": bill.rounds,
                    "comparisons": bill.comparisons, "MB_between_servers": sum(
                        v[1] for k, v in bill.links.items() if "client" not in k) / 1e6})
                print(f"  ring {bits} {name} batch {b}: {1e3 * t_priv / b:.1f} ms/image",
                      flush=True)
    rows = [[r["ring"], r["model"], r["batch"], f"{r['private_ms_per_image']:.1f}",
             f"{r['plaintext_ms_per_image']:.3f}",
             "-" if r["privpy_ms_per_image"] is None else f"{r['privpy_ms_per_image']:.0f}",
             "-" if r["crypten_ms_per_image"] is None else f"{r['crypten_ms_per_image']:.0f}",
             "-" if r["target_ms_per_image"] is None else f"{r['target_ms_per_image']:.0f}",
             f"{r['build_s']:.1f}", f"{r['guard_s']:.2f}", f"{r['first_run_s']:.1f}",
             r["rounds"], r["comparisons"],
             f"{r['MB_between_servers']:.1f}"] for r in res["rows"]]
    print_table("Private inference of converted models (embedded, ms per image)",
                ["ring", "model", "batch", "private", "plaintext TF", "PrivPy", "CrypTen", "target",
                 "build s", "guard s", "first run s", "rounds", "comparisons",
                 "MB between servers"], rows)
    if F.resnet50:
        res["resnet50"] = [_resnet50(bits, procs) for bits in map(int, F.rings)
                           for procs in (False, True)[:1 + F.resnet50_processes]]
        print_table("ResNet50, one 224x224 image (TF-Encrypted: 3 x 4-core machines)",
                    ["ring", "servers", "s/image", "TFE s", "target s", "first call s", "trace s",
                     "peak GB", "bill GB", "rounds", "comparisons", "argmax equal",
                     "max error"],
                    [[r["ring"], r["servers"], f"{r['s_per_image']:.2f}", r["tfe"]["s_per_image"],
                      r["targets"]["s_per_image"], f"{r['first_call_s']:.1f}",
                      f"{r['trace_s']:.1f}", f"{r['peak_gb']:.1f}", f"{r['bill_gb']:.2f}",
                      r["rounds"], r["comparisons"], f"{r['argmax_equal']}/{r['images']}",
                      f"{r['max_logit_error']:.1e}"] if "error" not in r else
                     [r["ring"], r["servers"], "failed: " + r["error"]] + [""] * 10
                     for r in res["resnet50"]])
    write_json(os.path.join(F.out, "converter.json"), res)
    sel = [r for r in res["rows"] if r["ring"] == int(F.rings[0])]
    bar_png(os.path.join(F.out, "converter.png"),
            f"ms per image, ring {F.rings[0]}",
            [f"{r['model']} b{r['batch']}" for r in sel],
            {"tf_privpy": [r["private_ms_per_image"] for r in sel],
             "PrivPy (paper)": [r["privpy_ms_per_image"] or np.nan for r in sel],
             "plaintext TF": [r["plaintext_ms_per_image"] for r in sel]}, "ms per image")


def _resnet50(bits: int, processes: bool) -> dict:
    """converter_resnet50.py's row in a process of its own (its peak memory)."""
    import json
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(here, "converter_resnet50.py"),
                        f"--ring={bits}", f"--images={F.resnet50_images}",
                        "--processes" if processes else "--noprocesses"],
                       capture_output=True, text=True, timeout=3600)
    rows = [line[4:] for line in r.stdout.splitlines() if line.startswith("ROW ")]
    if r.returncode or not rows:
        return {"ring": bits, "servers": "4 processes" if processes else "embedded",
                "error": (r.stderr or r.stdout)[-300:]}
    return json.loads(rows[-1])


if __name__ == "__main__":
    app.run(main)
