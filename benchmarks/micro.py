"""Micro-benchmark of the foundation: private multiplication and matmul.

Embedded four-server runtime on this machine, both rings, beside plaintext
TensorFlow measured in the same run and beside PrivPy's published figure
(shared/ANCHORS.md: 2,583,158 multiplications/s on four 8-vCPU servers).

    python benchmarks/micro.py                       # what `make bench` runs
    python benchmarks/micro.py --sizes=256 --mul_n=100000 --reps=2   # quick

Targets (issue #2, 2 cores): >= 20 M mult/s (64-bit ring), >= 8 M/s (128-bit);
1024^2 matmul within 30x (64-bit) / 100x (128-bit) of float32 tf.matmul.
"""
import os

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("rings", ["128", "64"], "rings to measure")
flags.DEFINE_integer("mul_n", 10 ** 6, "elements of the elementwise multiplication")
flags.DEFINE_list("sizes", ["256", "512", "1024"], "square matmul sizes")
flags.DEFINE_integer("reps", 5, "timed repetitions (best and median are reported)")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for micro.json and micro.png")
F = flags.FLAGS

PRIVPY_MUL_PER_S = 2_583_158  # shared/ANCHORS.md, seed 000 Table 2
TARGET_MUL = {64: 20e6, 128: 8e6}
TARGET_MM_RATIO = {64: 30, 128: 100}


def main(argv):
    del argv
    tp.init()
    import numpy as np
    import tensorflow as tf

    from _report import bar_png, machine, print_table, timings, write_json

    tf.get_logger().setLevel("ERROR")  # one tf.function per size is intended
    rng = np.random.default_rng(0)
    results = {"machine": machine(), "anchor_privpy_mul_per_s": PRIVPY_MUL_PER_S,
               "mul": [], "matmul": []}

    # plaintext baselines, same run
    xf = tf.constant(rng.normal(0, 1, F.mul_n), tf.float32)
    plain_mul = tf.function(lambda a, b: a * b)
    pm_best, _ = timings(lambda: plain_mul(xf, xf).numpy(), F.reps)
    plain_mm = {}
    for s in map(int, F.sizes):
        m = tf.constant(rng.normal(0, 1, (s, s)), tf.float32)
        f = tf.function(lambda a, b: tf.matmul(a, b))
        plain_mm[s] = timings(lambda: f(m, m).numpy(), F.reps)[0]

    for bits in map(int, F.rings):
        tp.reset()
        tp.init(tp.Config(ring_bits=bits))
        x = tp.share(rng.normal(0, 10, F.mul_n))
        y = tp.share(rng.normal(0, 10, F.mul_n))
        mul = tf.function(lambda a, b: a * b)
        best, med = timings(lambda: mul(x, y).share0.shape, F.reps)
        results["mul"].append({
            "ring": bits, "n": F.mul_n, "best_s": best, "median_s": med,
            "mul_per_s": F.mul_n / best, "target_mul_per_s": TARGET_MUL[bits],
            "plaintext_mul_per_s": F.mul_n / pm_best,
            "vs_privpy": F.mul_n / best / PRIVPY_MUL_PER_S})
        for s in map(int, F.sizes):
            a = tp.share(rng.normal(0, 1, (s, s)))
            b = tp.share(rng.normal(0, 1, (s, s)))
            mm = tf.function(lambda u, v: u @ v)
            best, med = timings(lambda: mm(a, b).share0.shape, max(2, F.reps // 2))
            results["matmul"].append({
                "ring": bits, "size": s, "best_s": best, "median_s": med,
                "plaintext_s": plain_mm[s], "ratio": best / plain_mm[s],
                "target_ratio": TARGET_MM_RATIO[bits] if s == 1024 else None})

    print_table(
        f"Private elementwise multiplication, {F.mul_n:,} elements, embedded, "
        f"{os.cpu_count()} cores (PrivPy anchor: {PRIVPY_MUL_PER_S / 1e6:.2f} M/s on 4x8 vCPU)",
        ["ring", "M mult/s", "target", "x PrivPy", "plaintext tf M/s", "best ms", "median ms"],
        [[r["ring"], f"{r['mul_per_s'] / 1e6:.1f}", f"{r['target_mul_per_s'] / 1e6:.0f}",
          f"{r['vs_privpy']:.1f}", f"{r['plaintext_mul_per_s'] / 1e6:.0f}",
          f"{r['best_s'] * 1e3:.1f}", f"{r['median_s'] * 1e3:.1f}"] for r in results["mul"]])
    print_table(
        "Private square matmul (both operands private) vs float32 tf.matmul, same run",
        ["ring", "n", "private ms", "plaintext ms", "ratio", "target"],
        [[r["ring"], r["size"], f"{r['best_s'] * 1e3:.1f}", f"{r['plaintext_s'] * 1e3:.2f}",
          f"{r['ratio']:.1f}x", f"<= {r['target_ratio']}x" if r["target_ratio"] else "-"]
         for r in results["matmul"]])

    write_json(os.path.join(F.out, "micro.json"), results)
    labels = [f"{r['ring']}-bit {r['size']}" for r in results["matmul"]]
    bar_png(os.path.join(F.out, "micro.png"), "Private matmul vs plaintext (ms)", labels,
            {"tf_privpy": [r["best_s"] * 1e3 for r in results["matmul"]],
             "plaintext tf.matmul": [r["plaintext_s"] * 1e3 for r in results["matmul"]]}, "ms")


if __name__ == "__main__":
    app.run(main)
