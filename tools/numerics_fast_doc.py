"""The "Fast mode" section of docs/numerics.md (protocols/mpc/fixedpoint/fast_numerics.py,
issue 14): each fast function's method, stated domain, rounds, comparisons
and products per element, and its max error on a grid of the domain, in both
rings. Called by tools/gen_numerics_doc.py; alone it rewrites only this
section of an existing docs/numerics.md (the rest takes much longer):

    python tools/numerics_fast_doc.py                     # privpy backend, 4001 points
    python tools/numerics_fast_doc.py --points 20001
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_privpy as tp  # noqa: E402
from tf_privpy.protocols.mpc.fixedpoint import fast_numerics as FN  # noqa: E402
from tf_privpy.protocols.mpc.fixedpoint import numerics as N  # noqa: E402
from gen_numerics_doc import _log_softmax, _sig, _softmax  # noqa: E402  (beside this file)

TITLE = "## Fast mode"
ROWS = 10  # softmax row length


def _big(ring):
    """1.8·2^n: the end of the exp's absolute-error domain (exp's fast n)."""
    return 1.8 * 2 ** FN.setting(tp.get_runtime().backend, "exp", "iterations")


# name, protocol function, reference, domain (lo, hi) or a function of the ring,
# spacing, error kind, peer (name, error) from issue 14
FAST = [
    ("exp", N.exp, np.exp, (-5.0, 5.0), "lin", "rel", ("CrypTen", 5.4e-2)),
    ("exp (x ≤ -5)", N.exp, np.exp, lambda r: (-_big(r), -5.0), "lin", "abs", None),
    ("reciprocal", N.reciprocal, lambda x: 1 / x, (0.5, 50.0), "lin", "abs",
     ("TF-Encrypted ABY3", 7.6e-5)),
    ("sigmoid", N.sigmoid, _sig, lambda r: (-_big(r), _big(r)), "lin", "abs",
     ("CrypTen", 2.9e-3)),
    ("tanh", N.tanh, np.tanh, lambda r: (-_big(r) / 2, _big(r) / 2), "lin", "abs", None),
    ("log", N.log, np.log, (0.05, 200.0), "lin", "abs", None),
    ("sqrt", N.sqrt, np.sqrt, (0.5, 50.0), "lin", "abs", ("CrypTen", 9.4e-3)),
    ("rsqrt", N.rsqrt, lambda x: x ** -0.5, (0.5, 50.0), "lin", "abs", ("CrypTen", 1.5e-3)),
    ("softmax", N.softmax, _softmax, (-15.0, 15.0), "rows", "abs", None),
    ("log_softmax", N.log_softmax, _log_softmax, (-15.0, 15.0), "rows", "abs", None),
]

METHODS = {
    "exp": "(1 + u + u²/2)^(2^n), u = x/2^n: n + 1 squarings-deep products, no comparison",
    "reciprocal": "Chebyshev-optimal public polynomial guess on [lo, hi], then Goldschmidt "
                  "(+ one Newton step in the 64-bit ring); also divide",
    "sigmoid": "sign β = [x < 0] (1 comparison), \\|x\\| = x - 2βx, 1/(1 + e^-\\|x\\|) by "
               "Goldschmidt from a linear guess on [1, 2], sign folded in",
    "tanh": "2·sigmoid(2x) - 1",
    "log": "CrypTen's Householder: y0 = x/120 - 20e^(-2x-1) + 3, 2 iterations of order 8",
    "sqrt": "near-minimax public polynomial guess of 1/sqrt on [lo, hi], then Goldschmidt's "
            "square root g -> sqrt x, 2h -> 1/sqrt x (+ one Heron step in the 64-bit ring)",
    "rsqrt": "as sqrt, output 2h",
    "softmax": "the exact mode's max tree, fast exp of x - max, fast reciprocal of the row sum "
               "on [1, n]",
    "log_softmax": "the exact mode's max tree, fast exp, fast log of the row sum",
}


def _init(ring, backend):
    tp.reset()
    tp.init(tp.Config(ring_bits=ring, backend=backend, functions={"common": {"mode": "fast"}}))
    return tp.get_runtime()


def _domain(entry, ring):
    d = entry[3]
    return d(ring) if callable(d) else d


def _inputs(entry, ring, points, frac_bits):
    lo, hi = _domain(entry, ring)
    q = lambda v: np.round(v * 2.0 ** frac_bits) / 2.0 ** frac_bits  # noqa: E731
    if entry[4] == "rows":
        return q(np.random.default_rng(0).uniform(lo, hi, (max(points // ROWS, 1), ROWS)))
    return q(np.linspace(lo, hi, points))


def measure(entry, ring, backend, points):
    """Costs (instrumented, 64 elements) and the max error on the domain."""
    h = _init(ring, backend)
    x = _inputs(entry, ring, points, h.config.frac_bits)
    small = x[:8] if x.ndim == 2 else x[:: max(len(x) // 64, 1)][:64]
    p = tp.share(tf.constant(small))
    m = N.measure(h.backend, lambda b, v: entry[1](b, v), (p.share0, p.share1))
    p = tp.share(tf.constant(x))
    got = _reveal(h, entry[1](h.backend, (p.share0, p.share1)))
    want = entry[2](x)
    err = np.abs(got - want)
    if entry[5] == "rel":
        err = err / np.abs(want)
    return {"rounds": m["rounds"], "comparisons": m["comparisons"], "products": m["products"],
            "err": float(err.max()), "domain": _domain(entry, ring)}


def _reveal(h, shares):
    from tf_privpy.protocols.mpc.api.ops import _common as C
    return tp.reveal(C.wrap(h, shares, tf.float64)).numpy()


def section(results, backend, points):
    """The section's markdown lines from {name: {ring: measure(...)}}."""
    lines = [TITLE, "",
             "`mode=\"fast\"` per call, `tp.Config(functions={\"common\": {\"mode\": \"fast\"}})` "
             "(or a `\"mode\"` under one function) per runtime, "
             "`tp.Policy(numerics_mode=\"fast\")` "
             "for the converter (inference and `convert_training`). Methods in "
             "`protocols/mpc/fixedpoint/fast_numerics.py`; settings under `\"fast\"` in "
             "`protocols/defaults.json`.",
             "", "| function | method |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in METHODS.items()]
    lines += ["", f"Measured on the {backend} backend, {points} points of each domain (softmax: "
              f"rows of {ROWS}); costs per element by instrumentation (as above). The peer "
              "errors are issue 14's, same machine.", "",
              "| function | ring | domain | rounds | comparisons | products | max error | "
              "peer |", "|---|---|---|---|---|---|---|---|"]
    for e in FAST:
        for ring in (128, 64):
            r = results[e[0]][ring]
            lo, hi = r["domain"]
            peer = "" if e[6] is None else f"{e[6][0]} {e[6][1]:.2g}"
            lines.append(f"| {e[0]} | {ring} | [{lo:g}, {hi:g}] | {r['rounds']} | "
                         f"{r['comparisons']:g} | {r['products']:.1f} | "
                         f"{r['err']:.2g} {e[5]} | {peer} |")
    lines += ["", "Outside the domains (no comparison can clamp a comparison-free method; "
              "tests/test_fast_numerics.py checks the exp, reciprocal and sigmoid rows that "
              "are not \"wrong\"; the wrong ones are where a method's assumption fails):", "",
              "| function | input | result |", "|---|---|---|",
              "| exp | x in [-1.8·2^n, -5] | within e^-5 × the relative bound of e^x (≈ 0) |",
              "| exp | x > 5 | relative error grows as x³/(6·4^n) up to ln B |",
              "| exp | x < -2·2^n | wrong (the base exceeds 1) |",
              "| reciprocal, divide | 0 ≤ y < lo | (1 - q(y)^(2^k))/y: close to 1/y just "
              "below lo, then levelling off to a finite value ≤ 2^(k+1)·g(0) at y = 0 |",
              "| reciprocal, divide | y > hi or y < 0 | wrong (the guess's error exceeds 1) |",
              "| sigmoid, tanh | \\|x\\| ≥ 2·2^n (\\|2x\\| for tanh) | wrong |",
              "| log | x ≤ 0, x > 230 | wrong |",
              "| sqrt, rsqrt | x within 1 % outside [lo, hi] | close (relative error ≤ 1e-3); "
              "sqrt(0) = 0 |",
              "| sqrt, rsqrt | further out, rsqrt(x ≤ 0) | wrong (the guess is extrapolated) |",
              "| softmax, log_softmax | a row with max - x > 1.8·2^n | wrong |", ""]
    return lines


def all_results(backend, points):
    res = {}
    for e in FAST:
        res[e[0]] = {}
        for ring in (128, 64):
            res[e[0]][ring] = measure(e, ring, backend, points)
            print(f"fast {e[0]:14s} ring {ring}: {res[e[0]][ring]}", flush=True)
    return res


def splice(path, lines):
    """Replaces the section (from its title to the end) of the file at path,
    or appends it."""
    text = open(path).read() if os.path.exists(path) else ""
    i = text.find("\n" + TITLE + "\n")
    head = text if i < 0 else text[:i + 1]
    with open(path, "w") as f:
        f.write(head.rstrip("\n") + "\n\n" + "\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="privpy", choices=["privpy", "plaintext"])
    ap.add_argument("--points", type=int, default=4001)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "numerics.md"))
    a = ap.parse_args(argv)
    tp.init()
    lines = section(all_results(a.backend, a.points), a.backend, a.points)
    splice(a.out, lines)
    print(f"wrote the fast-mode section of {a.out}")


if __name__ == "__main__":
    main()
