"""Generates docs/numerics.md: method, rounds, comparisons and products per
element, and the measured error of every private non-linear function over
its stated domain, in both rings.

    python tools/gen_numerics_doc.py                      # privpy backend, 20001 points
    python tools/gen_numerics_doc.py --backend plaintext --points 5001 --out /tmp/n.md

Costs are in the one cost model's rounds (protocols/mpc/runtime/cost.py, numerics.measure):
the rounds are the critical path of batched multiplications and batched
comparisons. Errors are measured by running the private function on a dense
grid of its domain (points rounded to the fixed-point grid, so the error is
the function's own, not the input's encoding) against float64 numpy.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_privpy as tp  # noqa: E402
from tf_privpy.protocols.mpc.api.ops import math_fns as M  # noqa: E402
from tf_privpy.protocols.mpc.runtime import cost as COST  # noqa: E402
from tf_privpy.protocols.mpc.privpy import leading_one as LO  # noqa: E402
from tf_privpy.protocols.mpc.fixedpoint import lifted as L  # noqa: E402
from tf_privpy.protocols.mpc.privpy import thresholds as TH  # noqa: E402
from tf_privpy.protocols.mpc.fixedpoint import numerics as N  # noqa: E402

SOFTMAX_N = 10  # row length of the softmax rows


def _sig(x):
    return 0.5 * (1 + np.tanh(x / 2))


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _log_softmax(x):
    d = x - x.max(-1, keepdims=True)
    return d - np.log(np.exp(d).sum(-1, keepdims=True))


# name, public API, protocol fn (for costs), reference, domain, spacing, target kind
# target kinds: ("abs", a): abs error <= a;  ("rel_or_ulp", r, k): rel <= r or abs <= k ulp
FUNCTIONS = [
    ("exp", "tp.exp", N.exp, np.exp, (-20.0, 10.0), "lin", ("rel_or_ulp", 1e-4, 2)),
    ("reciprocal", "tp.math.reciprocal", N.reciprocal, lambda x: 1 / x, (1e-3, 1e4), "log",
     ("rel_or_ulp", 1e-4, 2)),
    ("reciprocal (x < 0)", "tp.math.reciprocal", N.reciprocal, lambda x: 1 / x, (-1e4, -1e-3),
     "log", ("rel_or_ulp", 1e-4, 2)),
    ("divide", "tp.divide", None, None, ((-10.0, 10.0), (0.01, 100.0)), "div",
     ("rel_or_ulp", 1e-4, 2)),
    ("sqrt", "tp.sqrt", N.sqrt, np.sqrt, (1e-3, 1e4), "log", ("rel_or_ulp", 1e-4, 2)),
    ("rsqrt", "tp.math.rsqrt", N.rsqrt, lambda x: 1 / np.sqrt(x), (1e-3, 1e4), "log",
     ("rel_or_ulp", 1e-4, 2)),
    ("log", "tp.math.log", N.log, np.log, (1e-3, 1e4), "log", ("abs", 1e-4)),
    ("sigmoid", "tp.sigmoid", N.sigmoid, _sig, (-30.0, 30.0), "lin", ("abs", 1e-4)),
    ("tanh", "tp.tanh", N.tanh, np.tanh, (-30.0, 30.0), "lin", ("abs", 1e-4)),
    ("erf", "tp.math.erf", N.erf, np.vectorize(math.erf), (-30.0, 30.0), "lin", ("abs", 1e-4)),
    ("gelu", "tp.nn.gelu", N.gelu, _gelu, (-30.0, 30.0), "lin", ("abs", 1e-4)),
    ("gelu (tanh form)", "tp.nn.gelu", lambda b, x: N.gelu(b, x, approximate=True), _gelu_tanh,
     (-10.0, 10.0), "lin", ("abs", 1e-4)),
    ("softmax", "tp.nn.softmax", N.softmax, _softmax, (-15.0, 15.0), "rows", ("abs", 1e-4)),
    ("log_softmax", "tp.nn.log_softmax", N.log_softmax, _log_softmax, (-15.0, 15.0), "rows",
     ("abs", 1e-4)),
]

SETTING_KEYS = ("method", "range_reduction", "degree", "piece_octaves", "iterations",
                "log_degree")
RANGE_REDUCTIONS = ("binary_search", "thresholds", "leading_one")
# functions whose range reduction is configurable (protocols/defaults.json)
REDUCED = ("exp", "log", "reciprocal", "divide", "sqrt", "rsqrt", "softmax", "log_softmax")


def init(ring: int, backend: str, range_reduction: str = None, threshold_bits: str = None):
    """A fresh runtime; range_reduction (None: the defaults) for every
    function; threshold_bits (None: the default) for all."""
    tp.reset()
    funcs = ({k: {"range_reduction": range_reduction} for k in REDUCED}
             if range_reduction else {})
    if threshold_bits:
        funcs["common"] = {"threshold_bits": threshold_bits}
    tp.init(tp.Config(ring_bits=ring, backend=backend, **({"functions": funcs} if funcs else {})))
    return tp.get_runtime()


def grid(domain, spacing, points, frac_bits, seed=0):
    """Inputs on the fixed-point grid: (x,) or (x, y) as float64 arrays."""
    q = lambda v: np.round(v * 2.0 ** frac_bits) / 2.0 ** frac_bits  # noqa: E731
    if spacing == "lin":
        return (q(np.linspace(domain[0], domain[1], points)),)
    if spacing == "log":
        a, b = sorted(abs(v) for v in domain)
        x = np.geomspace(a, b, points) * (1 if domain[0] > 0 else -1)
        return (q(x),)
    rng = np.random.default_rng(seed)
    if spacing == "rows":
        rows = max(points // SOFTMAX_N, 1)
        return (q(rng.uniform(domain[0], domain[1], (rows, SOFTMAX_N))),)
    if spacing == "div":
        (xa, xb), (ya, yb) = domain
        x = rng.uniform(xa, xb, points)
        y = np.geomspace(ya, yb, points) * rng.choice([-1.0, 1.0], points)
        return q(x), q(y)
    raise ValueError(spacing)


def costs(name, ring, backend="plaintext", range_reduction=None):
    """Rounds and per-element counts of one function, by instrumentation."""
    h = init(ring, backend, range_reduction)
    f = h.config.frac_bits
    entry = next(e for e in FUNCTIONS if e[0] == name)
    small = tuple(v[:64] if v.ndim == 1 else v[:8] for v in grid(entry[4], entry[5], 512, f))
    shares = [(s.share0, s.share1) for s in (tp.share(tf.constant(v)) for v in small)]
    if name == "divide":
        fn = lambda b, x, y: N.divide(b, x, y)  # noqa: E731
    else:
        fn = lambda b, x: entry[2](b, x)  # noqa: E731
    m = N.measure(h.backend, fn, *shares)
    return {k: m[k] for k in ("rounds", "mul_rounds", "cmp_rounds", "products", "comparisons")}


def errors(name, ring, backend, points, range_reduction=None):
    h = init(ring, backend, range_reduction)
    f = h.config.frac_bits
    ulp = 2.0 ** -f
    entry = next(e for e in FUNCTIONS if e[0] == name)
    _, api, _, ref, domain, spacing, target = entry
    xs = grid(domain, spacing, points, f)
    priv = [tp.share(tf.constant(v)) for v in xs]
    if name == "divide":
        got = M.divide(*priv).reveal().numpy()
        want = xs[0] / xs[1]
    else:
        fn = {"tp.exp": M.exp, "tp.math.reciprocal": M.reciprocal, "tp.sqrt": M.sqrt,
              "tp.math.rsqrt": M.rsqrt, "tp.math.log": M.log, "tp.sigmoid": M.sigmoid,
              "tp.tanh": M.tanh, "tp.math.erf": M.erf, "tp.nn.softmax": M.softmax,
              "tp.nn.log_softmax": M.log_softmax, "tp.nn.gelu": M.gelu}[api]
        if name == "gelu (tanh form)":
            fn = lambda x: M.gelu(x, approximate=True)  # noqa: E731
        got = fn(priv[0]).reveal().numpy()
        want = ref(xs[0])
    err = np.abs(got - want)
    aw = np.abs(want)
    out = {"abs": float(err.max()), "abs_ulps": float(err.max() / ulp),
           "points": int(np.size(want))}
    if target[0] == "rel_or_ulp":
        r, k = target[1], target[2]
        floor = k * ulp / r  # below |f| = floor, k ulps are more than r relative
        big = aw >= floor
        out["rel_floor"] = floor
        out["rel_big"] = float((err[big] / aw[big]).max()) if big.any() else float("nan")
        out["abs_small_ulps"] = float(err[~big].max() / ulp) if (~big).any() else 0.0
        out["met"] = bool(np.all((err <= r * aw) | (err <= k * ulp)))
        if spacing == "lin" and (~big).any():
            out["rel_from"] = float(xs[0][big].min()) if big.any() else float("nan")
    else:
        out["met"] = bool(err.max() <= target[1])
    return out


def settings_text(name, cfg):
    key = {"reciprocal (x < 0)": "reciprocal"}.get(name, name)
    parts = []
    for k in SETTING_KEYS:
        try:
            v = cfg.function_setting(key, k)
        except KeyError:
            continue
        parts.append(f"{v}" if k in ("method", "range_reduction") else
                     f"{k.replace('_', ' ')} {v}")
    if name.startswith("gelu"):
        return ("tanh's, x³ by 2 products, then x·tanh" if "tanh" in name
                else "erf's, then x·erf")
    if name in ("sigmoid", "tanh", "erf"):
        bp = cfg.function_setting(key, "breakpoints")
        parts.append(f"{len(bp)} breakpoints ±{max(bp):g}")
    return ", ".join(parts)


def static_table(rings=(128, 64), range_reduction=None):
    """Rows of the cost table: {name: {ring: costs}} (backend-independent)."""
    return {e[0]: {r: costs(e[0], r, range_reduction=range_reduction) for r in rings}
            for e in FUNCTIONS}


def fmt_num(v):
    return f"{v:g}" if abs(v - round(v)) > 1e-9 else f"{int(round(v))}"


def _rounds(c):
    return f"{c['rounds']} ({c['mul_rounds']} + {c['cmp_rounds']})"


def cost_rows(static):
    lines = ["| function | public name | rounds on the critical path (mult + cmp), 128-bit | "
             "rounds, 64-bit | comparisons / element (128-bit / 64-bit) | "
             "products / element (128 / 64) |",
             "|---|---|---|---|---|---|"]
    for e in FUNCTIONS:
        c128, c64 = static[e[0]][128], static[e[0]][64]
        lines.append(
            f"| {e[0]} | `{e[1]}` | {_rounds(c128)} | {_rounds(c64)} | "
            f"{fmt_num(c128['comparisons'])} / {fmt_num(c64['comparisons'])} | "
            f"{fmt_num(c128['products'])} / {fmt_num(c64['products'])} |")
    return lines


def method_rows(tables):
    """The range reductions side by side: {method: static table}."""
    ms = " | ".join(RANGE_REDUCTIONS)
    lines = [f"| function | rounds (128 / 64): {ms} | comparisons / element (128 / 64): {ms} | "
             f"products / element (128 / 64): {ms} |",
             "|---|" + "---|" * (3 * len(RANGE_REDUCTIONS))]
    for e in FUNCTIONS:
        if not any(k in e[0] for k in REDUCED):
            continue
        cells = []
        for key in ("rounds", "comparisons", "products"):
            for m in RANGE_REDUCTIONS:
                c = tables[m][e[0]]
                cells.append(f"{fmt_num(c[128][key])} / {fmt_num(c[64][key])}")
        lines.append(f"| {e[0]} | " + " | ".join(cells) + " |")
    return lines


def circuit_rows():
    """The garbled circuits of the range reductions, per element: AND gates
    and bytes (cost.py's declarations, without the 8-byte stream headers)."""
    lines = ["| ring | circuit | input bits W | AND gates | garbled tables + decoding bits "
             "(bytes / element, S1 → T) | input labels (bytes / element, S1 + S2 → T) | "
             "re-shared output (bytes / output bit, T → S) |", "|---|---|---|---|---|---|---|"]
    for ring in (128, 64):
        h = init(ring, "plaintext")
        w = LO.default_width(h.config)
        # outputs decoded per element (one byte each) for the octave plan of 1/x, sqrt
        # and rsqrt: boundaries 2^j, j = -f + 1 .. ceil(log2 B) - 1, the zero row and the
        # x < 0 row (or the sign)
        octs = int(math.ceil(math.log2(h.config.bound))) + h.config.frac_bits
        lines.append(f"| {ring} | comparator [x1 < -x2] (DESIGN §6) | 64 | 64 | "
                     f"{COST.GC_TABLE_BYTES + COST.GC_DECODE_BYTES} | {2 * COST.GC_LABEL_BYTES} | "
                     f"{ring // 8} |")
        for mag, what in ((False, "leading one of x (sqrt, rsqrt, log, softmax, unsigned 1/x)"),
                          (True, "leading one of x XOR sign (\\|x\\| - 1 for x < 0) and "
                                 "the sign (1/x, divide)")):
            g = COST.leading_one_gates(w, mag)
            lines.append(f"| {ring} | {what} | {w} | {g} | {g * 32 + octs + 1} | {2 * w * 16} | "
                         f"{ring // 8} |")
        for what, pts in window_circuits(h):
            lo, m = TH.window(pts, w)
            g = COST.thresholds_gates(w, lo, m, [p >> lo for p in pts])
            lines.append(f"| {ring} | {what}: K = {len(pts)}, window bits [{lo}, {lo + m}) | "
                         f"{w} | {g} | {g * 32 + len(pts)} | {2 * w * 16} | {ring // 8} |")
    return lines


def window_circuits(h):
    """(description, integer thresholds) of the window-thresholds circuits
    the defaults use: exp's piece boundaries (with its below/above rows),
    sigmoid's and tanh's breakpoints."""
    ctx = L.Ctx(h.backend)
    cfg = h.config
    piece = int(cfg.function_setting("exp", "piece_octaves"))
    jhi = int(math.floor(math.log2(cfg.bound)))
    exp_thr = list(range(-ctx.f, jhi, piece)) + [jhi]
    out = [("window thresholds of t = x·log2 e (exp)", ctx.grid_ints(exp_thr))]
    for name in ("sigmoid", "tanh"):
        out.append((f"window thresholds of x ({name}'s breakpoints)",
                    ctx.grid_ints(cfg.function_setting(name, "breakpoints"))))
    return out


BYTES_FUNCTIONS = ("reciprocal", "divide", "sqrt", "rsqrt", "log", "softmax", "log_softmax")
#: functions whose thresholds go to the window circuit (threshold_bits)
WINDOW_FUNCTIONS = ("exp", "sigmoid", "tanh", "softmax", "log_softmax")


def function_bytes(name, ring, range_reduction, threshold_bits=None):
    """Bytes on the wire per element of one call (all links, tp.cost's
    declared bill of a traced call, privpy backend)."""
    h = init(ring, "privpy", range_reduction, threshold_bits)
    entry = next(e for e in FUNCTIONS if e[0] == name)
    xs = [tp.share(tf.constant(v)) for v in grid(entry[4], entry[5], 1000, h.config.frac_bits)]
    fn = (lambda a, b: M.divide(a, b)) if name == "divide" else \
        {"reciprocal": M.reciprocal, "sqrt": M.sqrt, "rsqrt": M.rsqrt, "log": M.log,
         "softmax": M.softmax, "log_softmax": M.log_softmax, "exp": M.exp,
         "sigmoid": M.sigmoid, "tanh": M.tanh}[name]
    return tp.cost(fn, *xs).bytes / xs[-1].shape.num_elements()


def bytes_rows():
    lines = ["| function | bytes / element, 128-bit: binary_search | leading_one | "
             "bytes / element, 64-bit: binary_search | leading_one |", "|---|---|---|---|---|"]
    for name in BYTES_FUNCTIONS:
        cells = [f"{function_bytes(name, ring, m):,.0f}" for ring in (128, 64)
                 for m in ("binary_search", "leading_one")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def window_bytes_rows():
    """exp, sigmoid, tanh and softmax's exp with their defaults, thresholds by
    comparators or by the window circuit."""
    lines = ["| function | bytes / element, 128-bit: comparisons | circuit | "
             "bytes / element, 64-bit: comparisons | circuit |", "|---|---|---|---|---|"]
    for name in WINDOW_FUNCTIONS:
        cells = [f"{function_bytes(name, ring, None, tb):,.0f}" for ring in (128, 64)
                 for tb in ("comparisons", "circuit")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def domain_text(e):
    d = e[4]
    if e[5] == "div":
        return f"x in [{d[0][0]:g}, {d[0][1]:g}], \\|y\\| in [{d[1][0]:g}, {d[1][1]:g}]"
    if e[5] == "rows":
        return f"rows of {SOFTMAX_N}, uniform in [{d[0]:g}, {d[1]:g}]"
    return f"[{d[0]:g}, {d[1]:g}]"


def target_text(t):
    if t[0] == "abs":
        return f"abs ≤ {t[1]:g}"
    return f"rel ≤ {t[1]:g} or abs ≤ {t[2]} ulp"


def error_rows(errs):
    lines = ["| function | domain | target | ring | max abs error (ulps) | max rel error where "
             "\\|f\\| ≥ 2 ulp / 1e-4 | max abs error (ulps) where \\|f\\| < 2 ulp / 1e-4 | "
             "target met |", "|---|---|---|---|---|---|---|---|"]
    for e in FUNCTIONS:
        if e[0] not in errs:
            continue
        for ring in (128, 64):
            r = errs[e[0]][ring]
            rel = (f"{r['rel_big']:.2e} (\\|f\\| ≥ {r['rel_floor']:.3g})"
                   if "rel_big" in r else "")
            small = f"{r['abs_small_ulps']:.2f}" if "abs_small_ulps" in r else ""
            met = "yes" if r["met"] else "**no**"
            lines.append(f"| {e[0]} | {domain_text(e)} | {target_text(e[6])} | {ring} | "
                         f"{r['abs']:.2e} ({r['abs_ulps']:.1f}) | {rel} | {small} | {met} |")
    return lines


HEADER = """# Private non-linear functions: methods, rounds, errors

Generated by `tools/gen_numerics_doc.py` (`make docs`); do not edit by hand. Methods,
degrees and iteration counts are the defaults of `protocols/defaults.json` ("functions"),
overridable per call (e.g. `tp.math.reciprocal(x, iterations=5, range_reduction="thresholds")`)
or per runtime (`tp.Config(functions=...)`). Implementation: `protocols/mpc/fixedpoint/numerics.py`.

## How they work

- **Range reduction.** reciprocal, divide, sqrt, rsqrt and log first find the octave
  [2^j, 2^(j+1)) of x (j from -f to log2 B: 43 octaves in the 128-bit ring, 31 in the 64-bit
  ring), exp the piece of t = x·log2 e; then piecewise-constant values (initial guesses 2^-j,
  2^k, k, m·ln 2) follow from the comparison bits. Comparisons dominate the cost (a bitwise
  comparison each by default: about 100 bytes in 8 rounds; a garbled 64-bit comparator with
  `comparison="garbled"`, DESIGN §6: ~2 KB online in 2 rounds), so there are three methods
  (`range_reduction`):
  - **`leading_one` (default).** ONE garbled circuit per element (below:
    89-90 AND gates in the 128-bit ring, 65-66 in the 64-bit ring, against 64 for one
    comparator) gives, as integer bit shares, [|x| ≥ 2^j] for every octave boundary at once;
    every value of the octave is an exact local matmul of these bits: one comparison round and
    one circuit instead of 7-8 comparators. log's pieces [2^(j-1/2), 2^(j+1/2)) take one more
    comparison, c = [x ≥ 2^(q+1/2)] on the octave q with a threshold that is a table of the
    circuit's bits (local); then m = q + c and z = x·2^-q·(1 - c/2) (c·z exact). exp's pieces
    of t = x·log2 e are not octaves: all their boundaries go to ONE garbled window-thresholds
    circuit per element (below; `threshold_bits` = `circuit`, the default), so exp also costs
    one circuit round; with `threshold_bits` = `comparisons` it uses `binary_search`.
  - **`binary_search`.** A few levels of ONE comparison per element each (the first
    level adds the x ≤ 0 / saturation rows and, for signed inputs, the sign): each level halves
    the candidate range and renormalizes x into it (z ← z·2^-offset, an exact power of two
    taken from a table of the level's bit, one multiplication), so the next level compares z with
    a public boundary. Level l+1 compares z before level l's rescaling with a threshold that is
    a table of level l's bit, so each level is one comparison round and the rescaling runs
    beside the next comparison. Values exponential in the piece index (2^-j, 2^k) are products
    of one factor per level, all ≤ 1 (truncation errors are never multiplied up); values linear
    in it (k, m·ln 2) are sums of per-level tables (local). The first level's blocks are at
    most 22 octaves (128-bit) / 8 octaves (64-bit) wide, which keeps the normalized value, the
    comparator inputs and, in the 64-bit ring, the products small (DESIGN §3). reciprocal:
    9 comparisons per element instead of 86 (signed), sqrt/rsqrt/log: 7 instead of 43-44,
    exp: 7 instead of 44; about log2(#octaves) + 1 comparison rounds.
  - **`thresholds`.** x is compared with every boundary at once (one batched `ltz` on an
    [N, K] tensor), the values are public linear combinations of the K bits (one local matmul):
    1 comparison round, K comparisons per element. Fewer rounds, many more comparisons.
- **Several thresholds in one circuit (`threshold_bits`).** Where x is placed among K public
  thresholds at once (sigmoid's and tanh's breakpoints, exp's pieces under `leading_one`), the
  default (`circuit`) is ONE garbled window-thresholds circuit per element when the thresholds,
  as ring integers, are multiples of 2^lo whose quotients fit an m-bit window and the circuit
  has fewer AND gates than K comparators (table below); `comparisons` uses one comparator per
  threshold. Both take one comparison round and give the same exact bits.
  Boundaries are compared on the fixed-point grid (rounded up to it; the leading-one thresholds
  are exact bit positions), so the first levels are exact; later levels see z with truncation errors of a few units of 2^-(f+8), which can only
  move an element sitting within ~2^-f·z of a boundary to the neighbouring piece, whose
  approximation is as good there.
- **Products in batches.** Independent products of a step go in one multiplication round;
  a power tree gives the terms s·e^i of a degree-d polynomial times a scale s in
  ceil(log2(d + 1)) rounds (2 rounds after the scale for d ≤ 6 when the scale comes one round
  after e).
- **exp(x)** = 2^t, t = x·log2 e in a piece [e_i, e_i + 2) two octaves wide (`piece_octaves`):
  2^t = 2^(e_i + 1)·p(w), w = t - e_i - 1 in [-1, 1), p a degree-6 Chebyshev fit of 2^w; the scale
  2^(e_i + 1) is folded into the power tree (terms all ≤ the scale). Two-octave pieces halve the
  pieces for one more degree.
- **reciprocal, divide**: initial guess (2/3)·2^-j on the octave of |y| (so |1 - y·g| ≤ 1/3),
  then Newton-Raphson in Goldschmidt's form: the iterates of y_{i+1} = y_i(2 - y·y_i) are
  g·Π(1 + e^(2^i)) with e = 1 - y·g, and squaring e instead of recomputing it lets the two
  chains run side by side, one round per iteration (classic Newton, 2 rounds per iteration,
  is `method="newton"`). 4 iterations: error (1/3)^16 = 2·10^-8. The numerator of a division
  enters in the first round, so x / y costs what 1/y costs. g's own rounding only enters e.
- **sqrt, rsqrt**: u = x·2^-j in [1, 2) (the range reduction's normalized value), e = 1 - (2/3)u,
  x^-1/2 = sqrt(2/3)·2^-j/2·(1 - e)^-1/2 and x^1/2 = sqrt(3/2)·2^j/2·(1 - e)^1/2, each a
  degree-7 polynomial in e times the scale 2^∓j/2 (a product of per-level factors).
- **log**: x = 2^m·u with u in [2^-1/2, 2^1/2) (boundaries 2^(j-1/2)), ln x = m·ln 2 + P(u - 1),
  P a degree-8 Chebyshev fit of ln(1 + z).
- **sigmoid, tanh**: piecewise degree-4 polynomials in w = x/(s/R) on 12 intervals (s the
  outermost breakpoint, R = `functions.common.power_range`: 1 in the 128-bit ring, 2 in the
  64-bit one, where it shrinks the coefficients that multiply the powers' truncation errors
  by 2^k: sigmoid 1.4e-3 -> 1.3e-4, tanh 4.1e-3 -> 3.0e-4), constant
  0/-1 and 1 outside; the coefficients are public linear combinations of comparison bits.
  Default (`piecewise_poly`): x is placed among all 13 breakpoints by ONE window-thresholds
  circuit per element, in parallel with the powers: **3 rounds, one circuit**. With
  `folded_piecewise_poly`, by symmetry, f(x) = A + s·(F(|x|) - A) (A = 1/2 for
  sigmoid, 0 for tanh, s = ±1 the sign), so only |x| = s·x is placed among the 6 positive
  breakpoints: 7 comparisons instead of 13. s·(F(|x|) - A) = Σ c_k·m_k with m_k = w^k for odd k
  and s·w^k for even k, so the powers never wait for |x|: sign, |x|, the comparisons (beside
  s·w⁴), the coefficient products: **4 rounds, against PrivPy's 50 Euler steps** (100
  sequential multiplications in `examples/private_logistic.py`); it was the default while the
  breakpoints took one comparator each (7 instead of 13).
- **softmax, log_softmax**: max along the axis by a comparison tree
  (`protocols.mpc.privpy.compare.reduce_max_last`, ceil(log2 n) levels of one comparison and one
  multiplication round), exp of the non-positive differences (pieces only on [-f, 0]),
  the row sum s in [1, n]; softmax divides by s (ceil(log2 n) + 1 octaves per row),
  log_softmax subtracts ln s.
- **Extra precision (128-bit ring).** Intermediates carry 8 more fractional bits (values
  times 2^8 at the config's f bits, truncated locally once more after each product). They
  stay below 2^87, so local truncation keeps failing with probability ≤ 2^-40 (DESIGN §3).
  The 64-bit ring (f = 16) has no room for this and computes at its own 16 bits.

## Rounds and costs

Rounds are the one cost model's (protocols/mpc/runtime/cost.py, the same figure as tp.stats(),
tp.cost, the converter's bill and docs/supported_ops.md): message hops on the critical path.
A batched private multiplication is 2 (PrivPy's protocol: one message from S to T and one
back), a batched comparison 8 by default (the bitwise family, protocols/mpc/bitwise/; 2 with
`tp.Config(comparison="garbled")`: one garbled-circuit evaluation), a leading-one or
window-thresholds circuit 2 (garbled in either family), counted as one comparison per element
(its AND gates and bytes are in the circuit table below); the (mult + cmp) split is that of
one longest path (`protocols.mpc.fixedpoint.numerics.CostTracker`; tests/test_cost_model.py
checks it against the declared cost). Comparisons and, with binary search, rounds
depend on the ring (the number of octaves from one ulp to the bound B). softmax and
log_softmax: rows of n = {n};
their rounds include the max tree (4 levels for n = 10). Defaults:

"""

ERR_HEAD = """
## Errors

Measured with the **{backend}** backend on {points} points of each domain (grid points
rounded to the fixed-point grid, so the error is the function's own), against float64.
ulp = 2^-20 (128-bit ring) and 2^-16 (64-bit ring). Tests (`tests/test_numerics.py`)
enforce the 128-bit targets.

Relative error is only meaningful where it can be met: a fixed-point output has an absolute
resolution of one ulp, so where |f(x)| < 2 ulp / 10^-4 (0.019 in the 128-bit ring) no
encoding reaches 10^-4 relative error (exp(-20) = 2·10^-9 is not even representable, and
1/10^4 = 10^-4 is 105 ulps). The targets of exp, reciprocal, divide, sqrt and rsqrt are
therefore "relative error ≤ 10^-4 or absolute error ≤ 2 ulp": the table shows the relative
error where |f| is large enough and the absolute error (in ulps) below that.

"""

RULES = """
## Out-of-domain inputs

A private value cannot raise an error without revealing itself, so every function has a
defined result everywhere in |x| < B (the share bound), by construction of the tables:

| function | input | result |
|---|---|---|
| reciprocal, divide | y = 0 | 0 (x / 0 = 0) |
| reciprocal (signed = False) | y ≤ 0 | 0 |
| sqrt | x ≤ 0 | 0 |
| rsqrt | x ≤ 0 | 0 |
| log | x ≤ 0 | ln(2^-(f+1)) = ln of half an ulp: -14.556 (128-bit), -11.784 (64-bit) |
| exp | x·log2 e < -f | 0 (e^x is below one ulp) |
| exp | x·log2 e ≥ floor(log2 B) | 2^floor(log2 B) = B (2^23 in the 128-bit ring, 2^15 in the 64-bit ring) |
| sigmoid | x < -11, x ≥ 11 (x ≤ -11 with `folded_piecewise_poly`) | exactly 0, exactly 1 (error ≤ 1.7·10^-5) |
| tanh | x < -6, x ≥ 6 (x ≤ -6 with `folded_piecewise_poly`) | exactly -1, exactly 1 (error ≤ 1.2·10^-5) |

Quotients must themselves be in range: x / y with |x / y| ≥ B wraps like any overflow.
"""


METHODS_HEAD = """
### The three range reductions

The same functions with `range_reduction` = `binary_search`, `thresholds` (one comparison per
boundary, all in one round) and `leading_one` (one garbled leading-one circuit per element, log
one comparison more; exp, whose pieces are not octaves, and log_softmax's short log of the row
sums: one window-thresholds circuit per element). Measured µs per element:
`benchmarks/functions.py` and the README. Errors of the defaults and of `thresholds` are in the
tables below.

"""

CIRCUIT_HEAD = """
### The leading-one circuit

`protocols/mpc/privpy/leading_one.py`, `ops/gc/leading_one.h` (issue 14). One garbled circuit per
element rebuilds x mod 2^W from the low W bits of the two shares (a ripple-carry adder inside
the circuit: exact, as reduction mod 2^W is a ring homomorphism), for signed inputs takes the
one's complement v = x XOR sign (free: |x| - 1 for x < 0, so x = -2^j exactly gets the octave
below, where 1/x's guess still has |1 - x·g| = 1/3, the bound its iterations assume; the sign
ORed into o_0, one AND gate, keeps x = -1 ulp out of the zero row; two's complement |x| would
cost an incrementer, W - 2 AND gates), and a prefix OR gives the thresholds o_j = [v ≥ 2^j] for
every bit position j < W - 1 (and the sign). Only the columns the caller uses are decoded,
masked and re-shared. W = ceil(log2 B) + f + 3 holds every value below 2B. The
assistants decode the o_j of the octave boundaries masked by bits of the S1-S2 stream and
re-share them as integer bits, exactly as a comparison re-shares its bit (DESIGN §6); every
table of the octave (2^-j, 2^(-j/2), the initial guess of 1/x) is then r_0 + Σ_k (r_(k+1) -
r_k)·o_k, exact integer arithmetic done in the servers' pass that unmasks the bits
(`BitUnmaskTable`: no [n, K] ring tensor of the bits is stored). Without |x| a negative x sets
o_(W-2) (the x ≤ 0 row) for free.

Under the default bitwise comparison family the same outputs come, bit for bit, from ONE bit
decomposition per element on boolean shares instead (`protocols/mpc/bitwise/leading_one.py`,
`ops/bitwise/leading_one.h`; `functions.common.bitwise_leading_one`): a Kogge-Stone adder
of the two low words, the magnitude, a suffix OR and a B2A of the requested bits, every AND a
Beaver triple dealt by T1 from the PRG streams: 14 rounds instead of 2, about 1.4 KB per element
for sqrt's 45 columns in the 128-bit ring instead of about 6 KB, and 1.8-2.5x faster embedded
(docs/comparisons_functions.md). The rounds in the tables here are the default's.

The window-thresholds circuit (`protocols/mpc/privpy/thresholds.py`, `ops/gc/thresholds.h`) gives
[x < θ_k] for K public thresholds θ_k = c_k·2^lo: after the same adder, it drops the lo low
bits of x (an exact floor), clamps the quotient to an m-bit window (an OR of the bits above the
window XOR the sign, then m - 1 multiplexers; the top bit is the sign either way) and compares
it with each constant c_k (at most m - 1 AND gates each, none below the lowest set bit of
c_k + 2^(m-1)); the outputs are re-shared as fixed-point bits, as a comparison's.

Garbling, hashing and the no-OT label scheme are the comparator's (half-gates, free XOR, fixed-key
AES); XOR and NOT gates are free, so the cost is the AND gates (two 16-byte ciphertexts each):

"""

BYTES_HEAD = """
All bytes on the wire per element of a whole call (every link; the declared bill of a traced
call, `tp.cost`), binary search against the leading-one circuit:

"""

WINDOW_BYTES_HEAD = """
And with the defaults, the thresholds of exp's pieces, sigmoid's and tanh's breakpoints by
comparators (`threshold_bits` = `comparisons`; exp then by binary search) against the
window-thresholds circuit:

"""


def render(static, errs, backend, points, tables=None, errs_alt=None, circuits=None,
           fbytes=None, wbytes=None):
    lines = [HEADER.replace("{n}", str(SOFTMAX_N))]
    cfg = tp.get_runtime().config
    lines.append("| function | method and settings |")
    lines.append("|---|---|")
    for e in FUNCTIONS:
        lines.append(f"| {e[0]} | {settings_text(e[0], cfg)} |")
    lines.append("")
    lines += cost_rows(static)
    if tables is not None:
        lines.append(METHODS_HEAD)
        lines += method_rows(tables)
    if circuits is not None:
        lines.append(CIRCUIT_HEAD)
        lines += circuits
    if fbytes is not None:
        lines.append(BYTES_HEAD)
        lines += fbytes
    if wbytes is not None:
        lines.append(WINDOW_BYTES_HEAD)
        lines += wbytes
    if errs is not None:
        lines.append(ERR_HEAD.replace("{backend}", backend).replace("{points}", str(points)))
        lines += error_rows(errs)
        lines.append("")
        if errs_alt is not None:
            lines.append("With `range_reduction = \"thresholds\"` (same points):")
            lines.append("")
            lines += error_rows(errs_alt)
            lines.append("")
        lines += summary(errs)
    lines.append(RULES)
    return "\n".join(lines)


def summary(errs):
    out = ["Notes:", ""]
    e = errs["exp"][128]
    out.append(f"- exp (128-bit): relative error {e['rel_big']:.1e} wherever e^x ≥ "
               f"{e['rel_floor']:.3g} (x ≥ {math.log(e['rel_floor']):.2f}); below, the "
               f"absolute error is at most {e['abs_small_ulps']:.2f} ulp. The 10^-4 relative "
               "target holds only where it is representable; computing internally with more "
               "fractional bits would not help, since the output has 20.")
    missed = [f"{n} ({r})" for n in errs for r in (128, 64) if not errs[n][r]["met"]]
    out.append("- Targets missed: " + (", ".join(missed) if missed else "none") +
               " (the 64-bit ring has no enforced target: 16 fractional bits, no extra "
               "precision).")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="privpy", choices=["privpy", "plaintext"])
    ap.add_argument("--points", type=int, default=20001)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "numerics.md"))
    ap.add_argument("--static-only", action="store_true", help="skip the error measurement")
    a = ap.parse_args(argv)
    tp.init()
    static = static_table()
    tables = {m: static_table(range_reduction=m) for m in RANGE_REDUCTIONS}
    circuits, fbytes, wbytes = circuit_rows(), bytes_rows(), window_bytes_rows()
    errs = errs_alt = None
    if not a.static_only:
        errs, errs_alt = {}, {}
        for e in FUNCTIONS:
            errs[e[0]], errs_alt[e[0]] = {}, {}
            for ring in (128, 64):
                errs[e[0]][ring] = errors(e[0], ring, a.backend, a.points)
                print(f"{e[0]:20s} ring {ring}: {errs[e[0]][ring]}", flush=True)
                if any(k in e[0] for k in REDUCED):
                    errs_alt[e[0]][ring] = errors(e[0], ring, a.backend, a.points, "thresholds")
                    print(f"{e[0]:20s} ring {ring} thresholds: {errs_alt[e[0]][ring]}",
                          flush=True)
        errs_alt = {k: v for k, v in errs_alt.items() if v}
    init(128, a.backend)
    text = render(static, errs, a.backend, a.points, tables, errs_alt, circuits, fbytes, wbytes)
    if not a.static_only:
        import numerics_fast_doc as fast  # the "Fast mode" section (issue 14), beside this file
        text += "\n\n" + "\n".join(fast.section(fast.all_results(a.backend, a.points),
                                                 a.backend, a.points))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
