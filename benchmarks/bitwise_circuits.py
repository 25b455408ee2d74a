"""The derived functions' circuits under the bitwise comparison family
(issue 26): time, bytes and rounds of each function under

  garbled      comparison="garbled" (every comparison and circuit garbled),
  bw+gc        "bitwise" comparisons, the leading-one and window-thresholds
               circuits kept garbled (functions.common.bitwise_circuits
               limit 0),
  bw+cmp       "bitwise" with those circuits as batched bitwise comparisons
               (protocols/mpc/bitwise/circuits.py, no limit),
  bw+dec       "bitwise" with the defaults: the circuits as comparisons up to
               16 per element, the leading one above that as one bit
               decomposition (protocols/mpc/bitwise/leading_one.py),

embedded, both rings, the three settings interleaved call by call in one
run (same process, same load), best and median of --reps timed calls of a
tf.function after a warm-up. Bytes and rounds are tp.stats() of one call.
The decision per circuit is in protocols/defaults.json
(functions.common.bitwise_circuits) and docs/comparisons_functions.md.

    python benchmarks/bitwise_circuits.py --sizes=1000,100000 --reps=3

Results go to benchmarks/results/bitwise_circuits.json.
"""
import os

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("rings", ["128", "64"], "rings to measure")
flags.DEFINE_list("sizes", ["1000", "100000"], "elements per call (softmax: rows of 10)")
flags.DEFINE_list("functions", ["exp", "log", "reciprocal", "sqrt", "rsqrt", "sigmoid", "tanh",
                                "softmax"], "functions to time")
flags.DEFINE_integer("reps", 3, "timed repetitions per setting, interleaved")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for bitwise_circuits.json")
F = flags.FLAGS

DOMAINS = {"exp": (-20, 10), "reciprocal": (0.01, 1000), "sqrt": (0.01, 1000),
           "rsqrt": (0.01, 1000), "log": (0.01, 1000), "sigmoid": (-30, 30),
           "tanh": (-30, 30), "softmax": (-15, 15)}
#: setting -> (comparison family, bitwise_circuits limit of both circuits:
#: 0 keeps them garbled, a big one runs them as comparisons, the leading
#: one's route above the limit: functions.common.bitwise_leading_one)
SETTINGS = {"garbled": ("garbled", 0, "garbled"), "bw+gc": ("bitwise", 0, "garbled"),
            "bw+cmp": ("bitwise", 10 ** 6, "garbled"),
            "bw+dec": ("bitwise", 16, "decomposition")}


def traced(fn):
    """A fresh tf.function of fn (its own trace cache)."""
    import tensorflow as tf
    return tf.function(lambda a: fn(a))


def main(argv):
    del argv
    import time

    import numpy as np
    import tensorflow as tf

    from _report import cpu_model, machine, print_table, write_json
    tf.get_logger().setLevel("ERROR")
    fns = {"exp": tp.exp, "reciprocal": tp.math.reciprocal, "sqrt": tp.sqrt,
           "rsqrt": tp.math.rsqrt, "log": tp.math.log, "sigmoid": tp.sigmoid, "tanh": tp.tanh,
           "softmax": tp.nn.softmax}
    rng = np.random.default_rng(0)
    res = {"machine": dict(machine(), cpu=cpu_model()), "rows": []}
    for bits in map(int, F.rings):
        tp.reset()
        # the runtime's own dict: the benchmark switches the circuits'
        # choice between traces (each tf.function keeps the one it was
        # traced with)
        choice = {"leading_one": 0, "thresholds": 0}
        route = {"128": "garbled", "64": "garbled"}
        tp.init(tp.Config(ring_bits=bits, functions={"common": {
            "bitwise_circuits": choice, "bitwise_leading_one": route}}))
        for n in map(int, F.sizes):
            for name in F.functions:
                lo, hi = DOMAINS[name]
                vals = rng.uniform(lo, hi, (max(n // 10, 1), 10))
                v = tp.share(vals)
                conc, outs, stats = {}, {}, {}
                for s, (family, circ, lo_route) in SETTINGS.items():
                    choice.update(leading_one=circ, thresholds=circ)
                    route.update({"128": lo_route, "64": lo_route})
                    f = traced(fns[name])
                    with tp.comparison(family):
                        f.get_concrete_function(v)   # traced with this setting
                    conc[s] = f
                    with tp.stats() as st:
                        outs[s] = tp.reveal(conc[s](v)).numpy()   # the warm-up call
                    stats[s] = st
                times = {s: [] for s in SETTINGS}
                for _ in range(F.reps):                  # interleaved
                    for s in SETTINGS:
                        t0 = time.perf_counter()
                        conc[s](v).share0.numpy()[:1]
                        times[s].append(time.perf_counter() - t0)
                for s in SETTINGS:
                    st = stats[s]
                    res["rows"].append(dict(
                        ring=bits, n=vals.size, function=name, setting=s,
                        best_ms=min(times[s]) * 1e3, median_ms=float(np.median(times[s])) * 1e3,
                        bytes=st.bytes, rounds=st.rounds, comparisons=st.comparisons,
                        diff_vs_bw_gc=float(np.max(np.abs(outs[s] - outs["bw+gc"])))))
                print(name, bits, n, {s: round(min(times[s]) * 1e3, 1) for s in SETTINGS},
                      flush=True)
    rows = [[r["ring"], r["n"], r["function"], r["setting"], f"{r['best_ms']:.1f}",
             f"{r['median_ms']:.1f}", f"{r['bytes'] / r['n']:.0f}", r["rounds"],
             f"{r['diff_vs_bw_gc']:.2g}"] for r in res["rows"]]
    print_table(f"derived functions under the comparison families ({res['machine']['cpu']}, "
                f"{res['machine']['cpus']} cores)",
                ["ring", "n", "function", "setting", "best ms", "median ms", "B/elt", "rounds",
                 "|d| vs bw+gc"], rows)
    write_json(os.path.join(F.out, "bitwise_circuits.json"), res)


if __name__ == "__main__":
    app.run(main)
