"""Benchmark of the comparison protocol and what is built on it.

Embedded four-server runtime, both rings, beside plaintext TensorFlow in the
same run, and beside the peers' published figures (shared/ANCHORS.md):
PrivPy 150,125 comparisons/s (four 8-vCPU servers), Obliv-C 78,431/s;
TF-Encrypted (3 machines, LAN): sort 2^16 in 7.37 s, max of 2^16 groups of 4
in 0.29 s.

    python benchmarks/compare.py                  # what `make bench` runs
    python benchmarks/compare.py --sizes=1000,100000 --reps=2   # quick
    python benchmarks/compare.py --scale_sort_sizes= --scale_max_groups=  # no task 1 at scale

Task 1 at the article's scale (issue 28; --scale_*): sort of 10^6 in a
tf.function (the loop network) beside the same sort eagerly (the unrolled
network) and max of 2^16 groups of 4, both rings, each in a process of its
own for its peak memory (benchmarks/_task1_scale.py), beside TF-Encrypted's
figures (sort of 10^6: 117.45 s LAN, graph build 74.7 s) and issue 28's
targets (sort <= 117 s, max <= 0.15 s).

Targets (issue #3, 2 cores): >= 500,000 comparisons/s online and >= 250,000/s
with garbling, <= 2.1 KB online per comparison.
"""
import os
import time

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("rings", ["128", "64"], "rings to measure")
# 1: the latency of one comparison (PrivPy Table 1's 870 us row)
flags.DEFINE_list("sizes", ["1", "100", "1000", "10000", "100000", "1000000"],
                  "comparison batch sizes")
flags.DEFINE_integer("reps", 3, "timed repetitions (best is reported)")
flags.DEFINE_list("sort_sizes", ["1024", "65536"], "sort lengths (TF-Encrypted task)")
flags.DEFINE_list("sort_graph_sizes", ["1024", "4096", "16384", "65536"],
                  "sort lengths timed inside a tf.function: graph build and run (issue 15)")
flags.DEFINE_list("max_groups", ["1024", "65536"], "number of groups of 4 for max")
# TF-Encrypted's task 1 at the article's scale (issue 28), a process per measurement
# (benchmarks/_task1_scale.py) so that each peak memory is its own
flags.DEFINE_list("scale_sort_sizes", ["1000000"],
                  "sort lengths at scale: tf.function (the loop) and, with --scale_unrolled, "
                  "eagerly (the unrolled network); empty: none")
flags.DEFINE_bool("scale_unrolled", True, "also time the unrolled (eager) sort at scale")
flags.DEFINE_list("scale_max_groups", ["65536"], "groups of 4 for max at scale; empty: none")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for compare.json and compare.png")
F = flags.FLAGS

ANCHORS = {"privpy_cmp_per_s": 150_125, "obliv_c_cmp_per_s": 78_431,
           "tfe_sort_65536_s": 7.37, "tfe_max_65536x4_s": 0.29,
           # CrypTen, 10^4-element ops on its own hardware (ms per 10^4 -> us per element)
           "crypten_us_per_elt": {"sigmoid": 5.2, "reciprocal": 7.6, "relu": 2.76,
                                  "compare": 2.58}}
flags.DEFINE_integer("fn_n", 10_000, "elements for the derived-function timings")
flags.DEFINE_list("functions", [],
                  "derived functions to time, by their first word (reciprocal, sqrt, rsqrt, exp, "
                  "log, sigmoid, tanh, softmax, log_softmax); default: all nine")


def _sort_graph_times(v, reps: int) -> dict:
    """Trace time, first-call setup (first call minus a run) and median run
    time of tp.sort(v) as a tf.function."""
    import numpy as np
    import tensorflow as tf
    f = tf.function(lambda a: tp.sort(a))
    t0 = time.perf_counter()
    f.get_concrete_function(v)
    t1 = time.perf_counter()
    f(v).share0.numpy()
    first = time.perf_counter() - t1
    runs = []
    for _ in range(max(1, reps)):
        t = time.perf_counter()
        f(v).share0.numpy()
        runs.append(time.perf_counter() - t)
    run = float(np.median(runs))
    return {"trace_s": t1 - t0, "setup_s": max(0.0, first - run), "run_s": run,
            "run_min_s": min(runs), "run_max_s": max(runs), "reps": len(runs)}


def _scale(rings) -> list:
    """Task 1 at scale, a subprocess per measurement (_task1_scale.py):
    per ring, the sort's loop then its unrolled network back to back, then
    the max."""
    from _task1_scale import measure
    out = []
    for bits in map(int, rings):
        start = len(out)
        for n in map(int, F.scale_sort_sizes):
            out.append(measure("sort", bits, n, "loop", reps=1))
            if F.scale_unrolled:
                out.append(measure("sort", bits, n, "unrolled"))
        for g in map(int, F.scale_max_groups):
            out.append(measure("max", bits, g, reps=5))
        for r in out[start:]:
            print(f"  ring {bits} scale {r['task']} {r['n']:,} {r.get('mode', '')}: "
                  f"{r.get('run_s', r.get('error'))}", flush=True)
    return out


def _plain_stats(fn, x, reps: int) -> dict:
    """The same task in plaintext TF (a tf.function on float64), for the report's column."""
    import tensorflow as tf
    from _report import timing_stats
    f, c = tf.function(fn), tf.constant(x)
    return timing_stats(lambda: f(c).numpy(), reps)


def main(argv):
    del argv
    tp.init()
    import numpy as np
    import tensorflow as tf

    from _report import (bar_png, best_time, machine, print_table,
                         timing_stats, write_json)
    tf.get_logger().setLevel("ERROR")
    rng = np.random.default_rng(0)
    res = {"machine": machine(), "anchors": ANCHORS, "compare": [], "relu": [], "tasks": [],
           "functions": [], "sort_graph": []}
    for bits in map(int, F.rings):
        tp.reset()
        tp.init(tp.Config(ring_bits=bits))
        for n in map(int, F.sizes):
            x = tp.share(rng.uniform(-100, 100, n))
            y = tp.share(rng.uniform(-100, 100, n))
            # both modes eagerly, so that they differ only in the garbling
            t_full = best_time(lambda: tp.less(x, y).share0.numpy()[:1], F.reps)
            # and with garbling inside one tf.function: no eager per-op dispatch
            less_fn = tf.function(lambda a, b: tp.less(a, b))
            st_graph = timing_stats(lambda: less_fn(x, y).share0.numpy()[:1], F.reps)
            t_graph = st_graph["min_s"]
            t_online = float("inf")
            for _ in range(F.reps):
                g = tp.garble_comparisons([n])  # setup phase, not timed
                t0 = time.perf_counter()
                tp.less(x, y, pregarbled=g).share0.numpy()[:1]
                t_online = min(t_online, time.perf_counter() - t0)
                del g
            g = tp.garble_comparisons([n])
            with tp.stats() as online:
                tp.less(x, y, pregarbled=g)
            online_bytes = sum(b for _, b in online.between_servers().values()) / n
            with tp.stats() as offline:
                tp.garble_comparisons([n])
            offline_bytes = offline.bytes / n
            plain = tf.function(lambda a, b: a < b)
            xf = tf.constant(rng.uniform(-100, 100, n))
            st_plain = timing_stats(lambda: plain(xf, xf).numpy(), F.reps)
            t_plain = st_plain["min_s"]
            res["compare"].append({"ring": bits, "n": n, "with_garbling_per_s": n / t_full,
                                   "with_garbling_tf_function_per_s": n / t_graph,
                                   "online_per_s": n / t_online,
                                   "online_bytes_per_cmp": online_bytes,
                                   "offline_bytes_per_cmp": offline_bytes,
                                   "plaintext_per_s": n / t_plain,
                                   # seconds per call, for benchmarks/report.py
                                   "tf_function_s": st_graph,
                                   "plaintext_median_s": st_plain["median_s"]})
            print(f"  ring {bits} compare {n:,}: {n / t_graph:,.0f}/s (tf.function)", flush=True)
        n = int(F.sizes[-1])
        x = tp.share(rng.uniform(-100, 100, n))
        relu = tf.function(lambda a: tp.nn.relu(a))
        st = timing_stats(lambda: relu(x).share0.shape, F.reps)
        res["relu"].append({"ring": bits, "n": n, "per_s": n / st["min_s"], "s": st})
        fns = {"reciprocal": (tp.math.reciprocal, tf.math.reciprocal, (0.01, 1000)),
               "sqrt": (tp.sqrt, tf.sqrt, (0.01, 1000)),
               "rsqrt": (tp.math.rsqrt, tf.math.rsqrt, (0.01, 1000)),
               "exp": (tp.exp, tf.exp, (-20, 10)), "log": (tp.math.log, tf.math.log, (0.01, 1000)),
               "sigmoid": (tp.sigmoid, tf.sigmoid, (-30, 30)), "tanh": (tp.tanh, tf.tanh, (-30, 30)),
               "softmax (rows of 10)": (tp.nn.softmax, tf.nn.softmax, (-15, 15)),
               "log_softmax (rows of 10)": (tp.nn.log_softmax, tf.nn.log_softmax, (-15, 15))}
        unknown = set(F.functions) - {k.split(" ")[0] for k in fns}
        if unknown:
            raise ValueError(f"--functions: no derived function {sorted(unknown)}")
        if F.functions:
            fns = {k: v for k, v in fns.items() if k.split(" ")[0] in F.functions}
        for name, (fn, tf_fn, (lo, hi)) in fns.items():
            vals = rng.uniform(lo, hi, (F.fn_n // 10, 10))
            v = tp.share(vals)
            f = tf.function(lambda a, fn=fn: fn(a))
            t = best_time(lambda: f(v).share0.shape, max(1, F.reps - 1))
            pf = tf.function(lambda a, tf_fn=tf_fn: tf_fn(a))
            tv = tf.constant(vals, tf.float32)
            tpl = best_time(lambda: pf(tv).numpy(), F.reps)
            res["functions"].append({"ring": bits, "fn": name, "us_per_elt": t / F.fn_n * 1e6,
                                     "plaintext_us": tpl / F.fn_n * 1e6,
                                     "crypten": ANCHORS["crypten_us_per_elt"].get(name)})
        for m in map(int, F.sort_sizes):
            # eagerly (the layers unrolled); inside a tf.function: sort_graph below
            v = tp.share(rng.uniform(-100, 100, m))
            res["tasks"].append({"ring": bits, "task": f"sort {m}",
                                 "s": best_time(lambda: tp.sort(v).share0.numpy()[:1], 1),
                                 "tfe_lan_s": ANCHORS["tfe_sort_65536_s"] if m == 65536 else None})
        print(f"  ring {bits}: derived functions done; sort and max next", flush=True)
        for m in map(int, F.sort_graph_sizes):
            v = rng.uniform(-100, 100, m)
            res["sort_graph"].append(dict(ring=bits, n=m, **_sort_graph_times(
                tp.share(v), F.reps), plaintext_s=_plain_stats(tf.sort, v, F.reps)))
        for g in map(int, F.max_groups):
            x = rng.uniform(-100, 100, (g, 4))
            v = tp.share(x)
            f = tf.function(lambda a: tp.reduce_max(a, axis=1))
            st = timing_stats(lambda: f(v).share0.shape, F.reps)
            res["tasks"].append({"ring": bits, "task": f"max of {g} groups of 4",
                                 "s": st["min_s"], "stats": st, "plaintext_s": _plain_stats(
                                     lambda a: tf.reduce_max(a, axis=1), x, F.reps),
                                 "tfe_lan_s": ANCHORS["tfe_max_65536x4_s"] if g == 65536 else None})

    res["scale"] = _scale(F.rings)
    if res["scale"]:
        from _task1_scale import rows
        print_table("TF-Encrypted's task 1 at scale (issue 28): a process each, peak RSS its "
                    "own; sort run: the tf.function's second call, max: best of 5 (TF-Encrypted: "
                    "3 machines x 4 cores, LAN; targets for 2 cores)",
                    ["ring", "task", "graph build s", "run s", "peak RSS MiB", "target s",
                     "TF-Encrypted LAN s", "load"], rows(res["scale"]))
    print_table(f"Derived functions, {F.fn_n:,} elements, tf.function (CrypTen: its own "
                "hardware, 10^4 elements)",
                ["ring", "function", "us/element", "plaintext us/element", "CrypTen us/element"],
                [[r["ring"], r["fn"], f"{r['us_per_elt']:.2f}", f"{r['plaintext_us']:.4f}",
                  r["crypten"] if r["crypten"] else "-"] for r in res["functions"]])
    print_table("Private comparison x < y, embedded, 2 cores (PrivPy 150,125/s on 4x8 vCPU; "
                "Obliv-C 78,431/s)",
                ["ring", "batch", "online /s", "with garbling /s",
                 "with garbling, tf.function /s", "online B/cmp", "offline B/cmp",
                 "plaintext /s"],
                [[r["ring"], f"{r['n']:,}", f"{r['online_per_s']:,.0f}",
                  f"{r['with_garbling_per_s']:,.0f}",
                  f"{r['with_garbling_tf_function_per_s']:,.0f}",
                  f"{r['online_bytes_per_cmp']:.0f}",
                  f"{r['offline_bytes_per_cmp']:.0f}", f"{r['plaintext_per_s']:,.0f}"]
                 for r in res["compare"]])
    print_table("ReLU", ["ring", "n", "ReLU /s"],
                [[r["ring"], f"{r['n']:,}", f"{r['per_s']:,.0f}"] for r in res["relu"]])
    print_table("tp.sort inside a tf.function: graph build (trace; first-call setup = first "
                "call - run) and run, median (issue 15 target: build < 10 s at 2^16)",
                ["ring", "n", "trace s", "first-call setup s", "run s"],
                [[r["ring"], f"{r['n']:,}", f"{r['trace_s']:.2f}", f"{r['setup_s']:.2f}",
                  f"{r['run_s']:.3f}"] for r in res["sort_graph"]])
    print_table("TF-Encrypted benchmark tasks (TFE: 3 machines, LAN)",
                ["ring", "task", "tf_privpy s", "TF-Encrypted s"],
                [[r["ring"], r["task"], f"{r['s']:.3f}",
                  f"{r['tfe_lan_s']}" if r["tfe_lan_s"] else "-"] for r in res["tasks"]])
    write_json(os.path.join(F.out, "compare.json"), res)
    rows = [r for r in res["compare"] if r["n"] >= 100]  # n = 1 is a latency, not a rate
    bar_png(os.path.join(F.out, "compare.png"), "Comparisons per second",
            [f"{r['ring']}-bit {r['n']:,}" for r in rows],
            {"online": [r["online_per_s"] for r in rows],
             "with garbling": [r["with_garbling_per_s"] for r in rows],
             "PrivPy (paper)": [ANCHORS["privpy_cmp_per_s"]] * len(rows)}, "comparisons/s")


if __name__ == "__main__":
    app.run(main)
