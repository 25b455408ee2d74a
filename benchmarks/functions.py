"""Derived functions (DESIGN §7): µs per element at several batch sizes.

Embedded four-server runtime, both rings, each function as a tf.function on
shares of n elements (rows of 10 for softmax), best of --reps timed calls
after a warm-up (the median is recorded too). Compares the range-reduction
methods of protocols/mpc/fixedpoint/range_reduction.py ("thresholds": one comparison
per octave threshold in one round; "binary_search": one comparison per
level, a few levels; "leading_one": one garbled leading-one circuit per
element for the octave functions, one window-thresholds circuit for exp's
pieces) and, with --threshold_bits, how several thresholds are found (one
window-thresholds circuit per element, or one comparator each):

    python benchmarks/functions.py                                   # the defaults
    python benchmarks/functions.py --sizes=10000 --methods=thresholds,binary_search --reps=2
    python benchmarks/functions.py --sizes=100000 --methods=binary_search,leading_one \
        --functions=reciprocal,divide,sqrt,rsqrt --reps=5
    python benchmarks/functions.py --sizes=100000 --modes=exact,fast   # issue 14
    python benchmarks/functions.py --rings=128 --sizes=100000 --methods=leading_one \
        --threshold_bits=comparisons,circuit --functions=exp,sigmoid,tanh --reps=3

--modes times the numerics modes side by side (protocols/mpc/fixedpoint/fast_numerics.py):
"fast" rows use the fast methods' stated domains for their inputs (the time of
a private function does not depend on the values) and have no range
reduction, so they are timed once per ring. Every row has its mode and the
max error against numpy (absolute; relative for exp).

Results go to benchmarks/results/functions.json.
"""
import os

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("rings", ["128", "64"], "rings to measure")
flags.DEFINE_list("sizes", ["100", "10000", "100000"], "elements per call")
flags.DEFINE_list("methods", ["leading_one"],
                  "range_reduction settings: binary_search, thresholds (the one-round "
                  "method, ~10x slower), leading_one")
flags.DEFINE_list("functions", ["exp", "reciprocal", "divide", "sqrt", "rsqrt", "log",
                                "sigmoid", "tanh", "softmax", "log_softmax"],
                  "functions to time (also sigmoid_folded, tanh_folded: "
                  "method=folded_piecewise_poly)")
flags.DEFINE_list("modes", ["exact"], "numerics modes: exact, fast")
flags.DEFINE_list("threshold_bits", ["circuit"],
                  "functions.common.threshold_bits settings: circuit (one garbled "
                  "window-thresholds circuit per element for several thresholds: sigmoid, "
                  "tanh, exp's pieces), comparisons (one comparator per threshold)")
flags.DEFINE_integer("reps", 3, "timed repetitions (best is reported)")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for functions.json")
flags.DEFINE_string("peers", None, "peers.json of benchmarks/peers_run.py to print and record "
                    "the peers' time and error beside ours (default: results/peers.json if "
                    "present)")
F = flags.FLAGS

# CrypTen, 10^4-element ops on its own hardware (ms per 10^4 -> µs per element)
CRYPTEN_US = {"sigmoid": 5.2, "reciprocal": 7.6}
DOMAINS = {"exp": (-20, 10), "reciprocal": (0.01, 1000), "divide": (0.01, 1000),
           "sqrt": (0.01, 1000), "rsqrt": (0.01, 1000), "log": (0.01, 1000),
           "sigmoid": (-30, 30), "tanh": (-30, 30), "softmax": (-15, 15),
           "log_softmax": (-15, 15), "sigmoid_folded": (-30, 30), "tanh_folded": (-30, 30)}
#: the fast methods' stated domains (docs/numerics.md, "Fast mode")
FAST_DOMAINS = {"exp": (-5, 5), "reciprocal": (0.5, 50), "divide": (0.5, 50),
                "sqrt": (0.5, 50), "rsqrt": (0.5, 50),
                "log": (0.05, 200), "sigmoid": (-30, 30), "tanh": (-30, 30),
                "softmax": (-15, 15), "log_softmax": (-15, 15)}
# sigmoid and tanh have no range reduction: timed with the first method only
NO_RANGE_REDUCTION = ("sigmoid", "tanh", "sigmoid_folded", "tanh_folded")


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    from _report import best_time, machine, print_table, timings, write_json
    tf.get_logger().setLevel("ERROR")
    from scipy.special import log_softmax as np_log_softmax, softmax as np_softmax
    refs = {"exp": np.exp, "reciprocal": lambda v: 1 / v, "sqrt": np.sqrt,
            "rsqrt": lambda v: v ** -0.5, "log": np.log, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
            "tanh": np.tanh, "softmax": lambda v: np_softmax(v, -1),
            "log_softmax": lambda v: np_log_softmax(v, -1)}
    refs["sigmoid_folded"], refs["tanh_folded"] = refs["sigmoid"], refs["tanh"]
    fns = {"exp": tp.exp, "reciprocal": tp.math.reciprocal, "sqrt": tp.sqrt,
           "rsqrt": tp.math.rsqrt, "log": tp.math.log, "sigmoid": tp.sigmoid, "tanh": tp.tanh,
           "softmax": tp.nn.softmax, "log_softmax": tp.nn.log_softmax,
           "sigmoid_folded": lambda a: tp.sigmoid(a, method="folded_piecewise_poly"),
           "tanh_folded": lambda a: tp.tanh(a, method="folded_piecewise_poly")}
    tf_fns = {"exp": tf.exp, "reciprocal": tf.math.reciprocal, "sqrt": tf.sqrt,
              "rsqrt": tf.math.rsqrt, "log": tf.math.log, "sigmoid": tf.sigmoid,
              "tanh": tf.tanh, "softmax": tf.nn.softmax, "log_softmax": tf.nn.log_softmax,
              "sigmoid_folded": tf.sigmoid, "tanh_folded": tf.tanh}
    plain_us = {}

    def plaintext_us(name, vals, other):
        """Plaintext TF on the same values (float64, tf.function), same run."""
        key = (name, vals.size)
        if key not in plain_us:
            a = tf.constant(vals)
            if name == "divide":
                g = tf.function(lambda x, y: tf.divide(y, x))
                b = tf.constant(other)
                t = best_time(lambda: g(a, b).numpy()[:1], F.reps)
            else:
                g = tf.function(lambda x, fn=tf_fns[name]: fn(x))
                t = best_time(lambda: g(a).numpy()[:1], F.reps)
            plain_us[key] = t / vals.size * 1e6
        return plain_us[key]

    rng = np.random.default_rng(0)
    res = {"machine": machine(), "crypten_us_per_elt": CRYPTEN_US, "rows": []}
    # fast rows have no range reduction and no thresholds: once per ring
    runs = [(bits, method, mode, tb) for bits in map(int, F.rings) for mode in F.modes
            for method in (F.methods if mode == "exact" else F.methods[:1])
            for tb in (F.threshold_bits if mode == "exact" else F.threshold_bits[:1])]
    for bits, method, mode, tb in runs:
        tp.reset()
        funcs = {k: {"range_reduction": method} for k in DOMAINS
                 if k not in NO_RANGE_REDUCTION}
        funcs["common"] = {"mode": mode, "threshold_bits": tb}
        tp.init(tp.Config(ring_bits=bits, functions=funcs))
        for n in map(int, F.sizes):
            for name in F.functions:
                if name in NO_RANGE_REDUCTION and method != F.methods[0]:
                    continue
                if mode == "fast" and name not in FAST_DOMAINS:
                    continue
                lo, hi = (FAST_DOMAINS if mode == "fast" else DOMAINS)[name]
                shape = (max(n // 10, 1), 10)
                vals = rng.uniform(lo, hi, shape)
                v = tp.share(vals)
                wv = rng.uniform(-10, 10, shape)
                if name == "divide":
                    w = tp.share(wv)
                    f = tf.function(lambda a, b: tp.divide(b, a))
                    t, med = timings(lambda: f(v, w).share0.numpy()[:1], F.reps)
                    out, want = f(v, w), wv / vals
                else:
                    f = tf.function(lambda a, fn=fns[name]: fn(a))
                    t, med = timings(lambda: f(v).share0.numpy()[:1], F.reps)
                    out, want = f(v), refs[name](vals)
                err = np.abs(tp.reveal(out).numpy() - want)
                if name == "exp":  # relative, below e^-5 absolute (times e^5)
                    err = err / np.maximum(want, np.exp(-5))
                m = int(np.prod(shape))
                row = {"ring": bits, "method": "-" if mode == "fast" else method,
                       "mode": mode, "threshold_bits": "-" if mode == "fast" else tb,
                       "n": m, "fn": name,
                       "max_err": float(err.max()),
                       "err_kind": "rel" if name == "exp" else "abs",
                       "ms": t * 1e3, "us_per_elt": t / m * 1e6,
                       "median_us_per_elt": med / m * 1e6,
                       "tf_plaintext_us_per_elt": plaintext_us(name, vals, wv),
                       "crypten_us_per_elt": CRYPTEN_US.get(name.split("_")[0])}
                res["rows"].append(row)
                print(row, flush=True)
    print_table("Derived functions, tf.function, embedded runtime, best of "
                f"{F.reps} (CrypTen: its own hardware, 10^4 elements)",
                ["ring", "mode", "method", "threshold bits", "n", "function", "max err", "ms",
                 "µs/element", "median µs/el",
                 "TF plaintext µs/el",
                 "CrypTen µs/el"],
                [[r["ring"], r["mode"], r["method"], r["threshold_bits"], f"{r['n']:,}", r["fn"],
                  f"{r['max_err']:.2g} {r['err_kind']}", f"{r['ms']:.1f}",
                  f"{r['us_per_elt']:.2f}", f"{r['median_us_per_elt']:.2f}",
                  f"{r['tf_plaintext_us_per_elt']:.4f}",
                  "" if r["crypten_us_per_elt"] is None else r["crypten_us_per_elt"]]
                 for r in res["rows"]])
    import _peers
    _peers.attach(res, _peers.load(F.peers))
    _peers.print_beside(res, print_table,
                        label=lambda r: f"{r['ring']} {r['mode']} {r['method']}")
    write_json(os.path.join(F.out, "functions.json"), res)


if __name__ == "__main__":
    app.run(main)
