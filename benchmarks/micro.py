"""Micro-benchmark of the foundation: private multiplication and matmul.

Embedded four-server runtime on this machine, both rings, beside plaintext
TensorFlow measured in the same run and beside PrivPy's published figure
(shared/ANCHORS.md: 2,583,158 multiplications/s on four 8-vCPU servers).

    python benchmarks/micro.py                       # what `make bench` runs
    python benchmarks/micro.py --sizes=256 --mul_n=100000 --reps=2   # quick

It also measures the data owners' share service (docs/share_service.md) with
S1's and S2's services as local processes over TLS: one owner's upload, the
servers' tp.load and tp.publish, the owner's fetch of an array of --share_mib
MiB per share, and --share_clients concurrent uploads of 1 MiB shares.

Targets (issue #2, 2 cores): >= 20 M mult/s (64-bit ring), >= 8 M/s (128-bit);
1024^2 matmul within 30x (64-bit) / 100x (128-bit) of float32 tf.matmul.
"""
import os

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("rings", ["128", "64"], "rings to measure")
flags.DEFINE_list("mul_n", ["1", "100", "10000", "1000000"],
                  "elements of the elementwise multiplication (one row per size: the report's "
                  "time-against-size plot)")
flags.DEFINE_list("sizes", ["256", "512", "1024"], "square matmul sizes")
flags.DEFINE_integer("reps", 5, "timed repetitions (best and median are reported)")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for micro.json and micro.png")
flags.DEFINE_integer("share_mib", 16, "MiB per share of the share-service row (128-bit "
                     "ring); 0 skips the row")
flags.DEFINE_integer("share_clients", 50, "concurrent owners uploading 1 MiB shares")
F = flags.FLAGS

PRIVPY_MUL_PER_S = 2_583_158  # shared/ANCHORS.md, seed 000 Table 2
TARGET_MUL = {64: 20e6, 128: 8e6}
TARGET_MM_RATIO = {64: 30, 128: 100}


def main(argv):
    del argv
    tp.init()
    import numpy as np
    import tensorflow as tf

    from _report import bar_png, machine, print_table, timing_stats, timings, write_json

    tf.get_logger().setLevel("ERROR")  # one tf.function per size is intended
    rng = np.random.default_rng(0)
    results = {"machine": machine(), "anchor_privpy_mul_per_s": PRIVPY_MUL_PER_S,
               "mul": [], "matmul": []}

    # plaintext baselines, same run
    mul_sizes = [int(n) for n in F.mul_n]
    plain_mul = tf.function(lambda a, b: a * b)
    pm = {}
    for n in mul_sizes:
        xf = tf.constant(rng.normal(0, 1, n), tf.float32)
        pm[n] = timing_stats(lambda: plain_mul(xf, xf).numpy(), F.reps)
    plain_mm = {}
    for s in map(int, F.sizes):
        m = tf.constant(rng.normal(0, 1, (s, s)), tf.float32)
        f = tf.function(lambda a, b: tf.matmul(a, b))
        plain_mm[s] = timings(lambda: f(m, m).numpy(), F.reps)[0]

    for bits in map(int, F.rings):
        tp.reset()
        tp.init(tp.Config(ring_bits=bits))
        for n in mul_sizes:
            x = tp.share(rng.normal(0, 10, n))
            y = tp.share(rng.normal(0, 10, n))
            mul = tf.function(lambda a, b: a * b)
            st = timing_stats(lambda: mul(x, y).share0.shape, F.reps)
            best = st["min_s"]
            results["mul"].append({
                "ring": bits, "n": n, "best_s": best, "median_s": st["median_s"],
                "min_s": best, "max_s": st["max_s"], "reps": st["reps"],
                "mul_per_s": n / best, "target_mul_per_s": TARGET_MUL[bits],
                "plaintext_mul_per_s": n / pm[n]["min_s"],
                "plaintext_median_s": pm[n]["median_s"],
                "vs_privpy": n / best / PRIVPY_MUL_PER_S})
        for s in map(int, F.sizes):
            a = tp.share(rng.normal(0, 1, (s, s)))
            b = tp.share(rng.normal(0, 1, (s, s)))
            mm = tf.function(lambda u, v: u @ v)
            st = timing_stats(lambda: mm(a, b).share0.shape, max(2, F.reps // 2))
            best = st["min_s"]
            results["matmul"].append({
                "ring": bits, "size": s, "best_s": best, "median_s": st["median_s"],
                "min_s": best, "max_s": st["max_s"], "reps": st["reps"],
                "plaintext_s": plain_mm[s], "ratio": best / plain_mm[s],
                "target_ratio": TARGET_MM_RATIO[bits] if s == 1024 else None})

    print_table(
        f"Private elementwise multiplication, embedded, "
        f"{os.cpu_count()} cores (PrivPy anchor: {PRIVPY_MUL_PER_S / 1e6:.2f} M/s on 4x8 vCPU)",
        ["ring", "n", "M mult/s", "target", "x PrivPy", "plaintext tf M/s", "best ms", "median ms"],
        [[r["ring"], f"{r['n']:,}", f"{r['mul_per_s'] / 1e6:.1f}", f"{r['target_mul_per_s'] / 1e6:.0f}",
          f"{r['vs_privpy']:.1f}", f"{r['plaintext_mul_per_s'] / 1e6:.0f}",
          f"{r['best_s'] * 1e3:.1f}", f"{r['median_s'] * 1e3:.1f}"] for r in results["mul"]])
    print_table(
        "Private square matmul (both operands private) vs float32 tf.matmul, same run",
        ["ring", "n", "private ms", "plaintext ms", "ratio", "target"],
        [[r["ring"], r["size"], f"{r['best_s'] * 1e3:.1f}", f"{r['plaintext_s'] * 1e3:.2f}",
          f"{r['ratio']:.1f}x", f"<= {r['target_ratio']}x" if r["target_ratio"] else "-"]
         for r in results["matmul"]])

    if F.share_mib:
        results["share_service"] = share_service_rows(rng)
        print_table(
            f"Share service, S1's and S2's services as local processes (TLS), 128-bit ring; "
            f"MiB counts both shares",
            ["step", "MiB", "seconds", "MiB/s"],
            [[r["step"], f"{r['mib']:.1f}", f"{r['seconds']:.2f}", f"{r['mib_per_s']:.1f}"]
             for r in results["share_service"]])

    write_json(os.path.join(F.out, "micro.json"), results)
    labels = [f"{r['ring']}-bit {r['size']}" for r in results["matmul"]]
    bar_png(os.path.join(F.out, "micro.png"), "Private matmul vs plaintext (ms)", labels,
            {"tf_privpy": [r["best_s"] * 1e3 for r in results["matmul"]],
             "plaintext tf.matmul": [r["plaintext_s"] * 1e3 for r in results["matmul"]]}, "ms")


def share_service_rows(rng):
    """upload -> tp.load -> tp.publish -> fetch of one array, then concurrent
    uploads; rows of MiB (both shares), seconds and MiB/s."""
    import tempfile
    import time

    from tf_privpy.deploy.service.local import LocalShareServices, concurrent_uploads

    n = F.share_mib * 2**20 // 16  # 16 bytes per element and share in the 128-bit ring
    mib = 2 * n * 16 / 2**20
    x = rng.normal(0, 1, n)
    rows = []

    def timed(step, fn, size=mib):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        rows.append({"step": step, "mib": size, "seconds": dt, "mib_per_s": size / dt})
        return out

    with tempfile.TemporaryDirectory() as d:
        with LocalShareServices(os.path.join(d, "certs"), os.path.join(d, "stores")) as svc:
            cluster = svc.cluster("bench")
            tp.reset()
            tp.init(share_stores={"S1": svc[0].store_dir, "S2": svc[1].store_dir})
            timed("upload (owner, TLS)", lambda: tp.client.upload(
                "bench-x", x, cluster=cluster, progress=False))
            p = timed("tp.load (S1, S2 stores)", lambda: tp.load("bench-x"))
            timed("tp.publish (S1, S2 stores)", lambda: tp.publish(p, "bench-y", owner="bench"))
            timed("fetch (owner, TLS)", lambda: tp.client.fetch("bench-y", cluster=cluster))
            r = concurrent_uploads(cluster, F.share_clients, 1 << 20, verify=False)
            if r["errors"]:
                raise RuntimeError(f"concurrent uploads failed: {r['errors'][:3]}")
            rows.append({"step": f"{F.share_clients} concurrent uploads of 1 MiB shares",
                         "mib": r["mib"], "seconds": r["seconds"], "mib_per_s": r["mib_per_s"]})
            tp.reset()
            tp.init()
    return rows


if __name__ == "__main__":
    app.run(main)
