"""The rows of benchmarks/REPORT.md: which results-file field answers which
anchor. Every reader is defensive (a results file may be missing, from an
older program, or from --quick sizes): a missing figure becomes "not run",
never a number."""
import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

NOT_RUN = "not run"


# ------------------------------------------------------------------ values
def fmt_value(v, unit: str) -> str:
    """A figure with its unit scaled for reading: s -> h/min/s/ms/µs/ns,
    1/s -> /s with k/M, B -> B/KB/MB, x -> 23x."""
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return "–"
    if unit == "s":
        for scale, name in ((3600, "h"), (60, "min"), (1, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(v) >= scale or (scale == 1e-6 and v):
                return f"{v / scale:.3g} {name}"
        return f"{v * 1e9:.3g} ns"
    if unit == "1/s":
        for scale, name in ((1e9, "G/s"), (1e6, "M/s"), (1e3, "k/s")):
            if v >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v:.3g} /s"
    if unit == "B":
        for scale, name in ((2**20, "MB"), (2**10, "KB")):
            if v >= scale:
                return f"{v / scale:.3g} {name}"
        return f"{v:.3g} B"
    if unit == "x":
        return f"{v:.3g}x"
    return f"{v:.3g} {unit}"


@dataclass
class Measure:
    """A figure of ours or of plaintext TF: median with min and max (of the
    figure itself: for a rate, min comes from the slowest call)."""
    median: float
    lo: Optional[float] = None
    hi: Optional[float] = None
    note: str = ""

    def text(self, unit: str) -> str:
        s = fmt_value(self.median, unit)
        if self.lo is not None and self.hi is not None and self.lo != self.hi:
            s += f" ({fmt_value(self.lo, unit)}-{fmt_value(self.hi, unit)})"
        return s + (f", {self.note}" if self.note else "")


def stats_measure(st: Optional[dict], per: float = 1.0, rate_n: Optional[float] = None,
                  note: str = "") -> Optional[Measure]:
    """A Measure from a {min_s, median_s, max_s} dict: time per `per` units,
    or with rate_n a rate (rate_n per call)."""
    if not isinstance(st, dict) or st.get("median_s") is None:
        return None
    med, lo, hi = st["median_s"], st.get("min_s"), st.get("max_s")
    if rate_n:
        return Measure(rate_n / med, rate_n / hi if hi else None, rate_n / lo if lo else None,
                       note)
    return Measure(med / per, lo / per if lo is not None else None,
                   hi / per if hi is not None else None, note)


@dataclass
class Row:
    workload: str
    unit: str                                  # of every figure of the row
    anchors: Sequence[str] = ()                # keys of anchors.json; the first is the basis
    ours: Optional[Measure] = None
    status: str = NOT_RUN                      # what to print when ours is None
    plaintext: Optional[Measure] = None
    peer: str = "–"
    comparable: bool = True                    # same workload size as the anchor's
    differs: str = "other size"                # how it is not comparable, when it is not
    anchor_table: Dict[str, dict] = field(default_factory=dict, repr=False)

    def anchor_text(self) -> Tuple[str, str]:
        if not self.anchors:
            return "no published figure", "–"
        figs, srcs = [], []
        for k in self.anchors:
            a = self.anchor_table.get(k)
            if a is None:
                figs.append(f"({k}: not in anchors.json)")
                continue
            v = fmt_value(a["value"], a["unit"])
            if "low" in a and a["low"] != a["high"]:
                v = f"{fmt_value(a['low'], a['unit'])}-{fmt_value(a['high'], a['unit'])}"
            figs.append(f"{re.split(r' [(]|[:,]', a['system'])[0]} {v}")
            srcs.append(f"{a['system']}; ANCHORS.md:{','.join(map(str, a['source']['lines']))}")
        return "; ".join(figs), " / ".join(dict.fromkeys(srcs))

    def ratio(self) -> str:
        if self.ours is None or not self.anchors or self.anchors[0] not in self.anchor_table:
            return "–"
        if not self.comparable:
            return f"{self.differs}: no ratio"
        a = self.anchor_table[self.anchors[0]]
        v, ref = self.ours.median, a["value"]
        if not v or not ref:
            return "–"
        if self.unit == "x":   # a ratio published as a range
            lo, hi = a.get("low", ref), a.get("high", ref)
            return ("within the published range" if lo <= v <= hi else
                    "above the published range" if v > hi else "below the published range")
        better = v / ref if self.unit == "1/s" else ref / v
        word = {"B": ("fewer bytes", "more bytes")}.get(self.unit, ("faster", "slower"))
        x = better if better >= 1 else 1 / better
        num = f"{x:.2f}" if x < 10 else f"{x:.3g}" if x < 1000 else f"{x:,.0f}"
        return f"{num}x {word[0] if better >= 1 else word[1]}"

    def cells(self) -> List[str]:
        fig, src = self.anchor_text()
        ours = self.ours.text(self.unit) if self.ours else self.status
        plain = self.plaintext.text(self.unit) if self.plaintext else "–"
        return [self.workload, fig, src, ours, plain, self.peer, self.ratio()]


# ------------------------------------------------------------------ peers
#: peer workload names as the peer driver may spell them -> ours
PEER_ALIASES = {
    "mul": ("mul", "multiplication", "multiply", "elementwisemul"),
    "matmul": ("matmul", "matrixmultiplication"),
    "compare": ("compare", "comparison", "less", "lt"),
    "relu": ("relu",), "sigmoid": ("sigmoid",), "reciprocal": ("reciprocal",),
    "exp": ("exp",), "sort": ("sort",), "max": ("max", "max4", "reducemax"),
    "lr_step": ("lrstep", "lr", "logisticregressionstep", "lrtrainingstep"),
    "lenet5": ("lenet5", "lenet5inference"), "graph_build": ("graphbuild",),
}


def _norm(s) -> str:
    return re.sub(r"[^a-z0-9]", "", str(s).lower())


def peer_data(res: dict) -> Optional[dict]:
    """{"rows": [...], "failed": {peer: reason}, "ours": [...]} from
    results/peers.json, whichever of a few layouts the peer driver wrote (ours:
    the tf_privpy rows peers_run.py times beside the peers); None if absent."""
    raw = res.get("peers")
    if raw is None:
        return None
    if "_unreadable" in raw:
        return {"rows": [], "failed": {"peers.json": raw["_unreadable"]}}
    rows = raw.get("rows", []) if isinstance(raw, dict) else list(raw)
    failed = {}
    # benchmarks/peers_run.py: "failed" per peer ({peer, status, reason}), "errors" per
    # workload a peer lacks ({peer, protocol, workload, n, reason})
    for key in ("failed", "errors", "unavailable", "skipped"):
        v = raw.get(key) if isinstance(raw, dict) else None
        if isinstance(v, dict):
            failed.update({str(k): str(w) for k, w in v.items()})
        elif isinstance(v, list):
            for p in v:
                if not isinstance(p, dict):
                    continue
                who = " ".join(str(p[k]) for k in ("peer", "protocol", "workload")
                               if p.get(k)) + (f" n={p['n']}" if p.get("n") else "")
                why = str(p.get("reason") or p.get("note", ""))
                failed[who or "?"] = f"{p['status']}: {why}" if p.get("status") else why
    good, ours = [], []
    for r in rows:
        if not isinstance(r, dict):
            continue
        # peers_run.py times tf_privpy beside the peers: ours, not a peer
        if r.get("peer") == "tf_privpy":
            ours.append(r)
            continue
        if r.get("median_s") is None and r.get("best_s") is None:
            failed.setdefault(str(r.get("peer", "?")), str(r.get("reason") or r.get("note", "")))
        else:
            good.append(r)
    return {"rows": good, "failed": failed, "ours": ours}


def peer_rows(res: dict, workload: str, n=None) -> List[dict]:
    peers = peer_data(res) or {"rows": []}
    names = PEER_ALIASES.get(workload, (workload,))
    return [r for r in peers["rows"] if _norm(r.get("workload")) in names
            and (n is None or r.get("n") == n)]


def peer_cell(res: dict, workload: str, n=None, per: float = 1.0, unit: str = "s",
              rate_n: Optional[float] = None) -> str:
    """Peers' medians for this workload and size, in the row's unit."""
    if res.get("peers") is None:
        return "no peers.json (peers_run.py was not part of this run)"
    rows = peer_rows(res, workload, n)
    if not rows:
        return "no peer row at this size"
    out = []
    for r in rows:
        med = r.get("median_s", r.get("best_s"))
        v = (rate_n / med) if rate_n else med / per
        who = f"{r.get('peer')}" + (f" ({r['protocol']})" if r.get("protocol") else "")
        # a fast wrong answer is not a result: say so where the time is shown
        bad = (r.get("max_rel_error") or 0) > 0.1 and (r.get("max_abs_error") or 0) > 0.1
        out.append(f"{who} {fmt_value(v, unit)}" +
                   (f" (inaccurate: max abs error {r['max_abs_error']:.2g}, relative "
                    f"{r['max_rel_error']:.2g})" if bad else ""))
    return "; ".join(out)


# ------------------------------------------------------------------ groups
def _pick(rows, **want) -> Optional[dict]:
    for r in rows or ():
        if isinstance(r, dict) and all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def _rings(rows, default=(128, 64)) -> List[int]:
    found = sorted({r.get("ring") for r in rows or () if isinstance(r, dict) and r.get("ring")},
                   reverse=True)
    return found or list(default)


def _missing(res, name, what="") -> str:
    if name not in res:
        return NOT_RUN
    if "_unreadable" in res[name]:
        return "not run (results unreadable)"
    return NOT_RUN + (f": {what}" if what else "")


def group_single_ops(res, A) -> List[Row]:
    rows = []
    micro, cmp_ = res.get("micro", {}), res.get("compare", {})
    for ring in _rings(micro.get("mul")):
        r = _pick(micro.get("mul"), ring=ring, n=1)
        ours = None
        if r:
            ours = Measure(r["median_s"], r.get("min_s", r.get("best_s")), r.get("max_s"))
        rows.append(Row(f"one multiplication (latency of a 1-element call), {ring}-bit",
                        "s", ["privpy_mul_latency"], ours,
                        _missing(res, "micro", "micro.py --mul_n without 1"),
                        plaintext=Measure(r["plaintext_median_s"]) if r and r.get(
                            "plaintext_median_s") else None,
                        anchor_table=A, peer=peer_cell(res, "mul", 1)))
    for ring in _rings(cmp_.get("compare")):
        r = _pick(cmp_.get("compare"), ring=ring, n=1)
        rows.append(Row(f"one comparison (latency of a 1-element call), {ring}-bit", "s",
                        ["privpy_compare_latency"],
                        stats_measure(r.get("tf_function_s")) if r else None,
                        _missing(res, "compare", "compare.py --sizes without 1"),
                        plaintext=Measure(r["plaintext_median_s"]) if r and r.get(
                            "plaintext_median_s") else None,
                        anchor_table=A, peer=peer_cell(res, "compare", 1)))
    for r in micro.get("mul", []):
        if r.get("n", 0) < 100:
            continue
        n = r["n"]
        st = {"median_s": r["median_s"], "min_s": r.get("min_s", r.get("best_s")),
              "max_s": r.get("max_s")}
        plain = Measure(n / r["plaintext_median_s"]) if r.get("plaintext_median_s") else (
            Measure(r["plaintext_mul_per_s"], note="best") if r.get("plaintext_mul_per_s")
            else None)
        rows.append(Row(f"multiplication throughput, {n:,} elements, {r['ring']}-bit", "1/s",
                        ["privpy_mul_per_s", "spdz_mul_per_s"], stats_measure(st, rate_n=n),
                        plaintext=plain, anchor_table=A,
                        peer=peer_cell(res, "mul", n, unit="1/s", rate_n=n)))
    if not micro.get("mul"):
        rows.append(Row("multiplication throughput", "1/s", ["privpy_mul_per_s"],
                        status=_missing(res, "micro"), anchor_table=A))
    for r in cmp_.get("compare", []):
        n = r["n"]
        if n < 100:
            continue
        ours = stats_measure(r.get("tf_function_s"), rate_n=n) or (
            Measure(r["with_garbling_tf_function_per_s"], note="best")
            if r.get("with_garbling_tf_function_per_s") else None)
        plain = (Measure(n / r["plaintext_median_s"]) if r.get("plaintext_median_s") else
                 Measure(r["plaintext_per_s"], note="best") if r.get("plaintext_per_s") else None)
        rows.append(Row(f"comparison throughput (garbling included, tf.function), {n:,}, "
                        f"{r['ring']}-bit", "1/s", ["privpy_compare_per_s",
                                                    "obliv_c_compare_per_s"], ours,
                        plaintext=plain, anchor_table=A,
                        peer=peer_cell(res, "compare", n, unit="1/s", rate_n=n)))
        if r.get("online_per_s") and n == max(x["n"] for x in cmp_["compare"]):
            rows.append(Row(f"comparison throughput, online phase only (garbled ahead), "
                            f"{n:,}, {r['ring']}-bit", "1/s", ["privpy_compare_per_s"],
                            Measure(r["online_per_s"], note="best"), anchor_table=A))
    if not cmp_.get("compare"):
        rows.append(Row("comparison throughput", "1/s", ["privpy_compare_per_s"],
                        status=_missing(res, "compare"), anchor_table=A))
    for r in micro.get("matmul", []):
        s = r["size"]
        st = {"median_s": r["median_s"], "min_s": r.get("min_s", r.get("best_s")),
              "max_s": r.get("max_s")}
        rows.append(Row(f"matmul {s}x{s} (both private), {r['ring']}-bit", "s", (),
                        stats_measure(st), plaintext=Measure(r["plaintext_s"], note="best"),
                        peer=peer_cell(res, "matmul", s), anchor_table=A))
    return rows


CRYPTEN_OPS = ("mul", "compare", "relu", "sigmoid", "reciprocal")
DERIVED = ("exp", "reciprocal", "divide", "sqrt", "rsqrt", "log", "sigmoid", "tanh", "softmax",
           "log_softmax")


def _fn_row(res, fn, ring, n):
    """functions.json's row for (fn, ring, n): ours, not a peer's; the
    default method (binary_search) first; tf.function mode when modes differ."""
    cands = [r for r in res.get("functions", {}).get("rows", [])
             if isinstance(r, dict) and r.get("fn") == fn and r.get("ring") == ring
             and r.get("n") == n and not r.get("peer")]
    cands.sort(key=lambda r: (r.get("method") not in (None, "binary_search"),
                              "function" not in str(r.get("mode", "tf_function"))))
    return cands[0] if cands else None


def group_elementwise(res, A) -> List[Row]:
    """µs per element at 10^4 elements: CrypTen's published ops, and our
    derived functions at every size functions.py ran."""
    rows, n = [], 10_000
    micro, cmp_, fns = res.get("micro", {}), res.get("compare", {}), res.get("functions", {})
    for ring in _rings(micro.get("mul") or cmp_.get("compare") or fns.get("rows")):
        r = _pick(micro.get("mul"), ring=ring, n=n)
        rows.append(Row(f"mul, 10^4 elements, {ring}-bit", "s", ["crypten_mul_1e4"],
                        Measure(r["median_s"], r.get("min_s", r.get("best_s")), r.get("max_s"))
                        if r else None, _missing(res, "micro", "no 10^4 size"),
                        plaintext=Measure(r["plaintext_median_s"]) if r and r.get(
                            "plaintext_median_s") else None,
                        peer=peer_cell(res, "mul", n), anchor_table=A))
        r = _pick(cmp_.get("compare"), ring=ring, n=n)
        rows.append(Row(f"compare, 10^4 elements, {ring}-bit", "s", ["crypten_compare_1e4"],
                        stats_measure(r.get("tf_function_s")) if r else None,
                        _missing(res, "compare", "no 10^4 size"),
                        plaintext=Measure(r["plaintext_median_s"]) if r and r.get(
                            "plaintext_median_s") else None,
                        peer=peer_cell(res, "compare", n), anchor_table=A))
        r = _pick(cmp_.get("relu"), ring=ring)
        rows.append(Row(f"relu, {r['n']:,} elements (per 10^4), {ring}-bit" if r else
                        f"relu, {ring}-bit", "s", ["crypten_relu_1e4"],
                        stats_measure(r.get("s"), per=r["n"] / n) if r and r.get("s") else (
                            Measure(n / r["per_s"], note="best") if r else None),
                        _missing(res, "compare"), peer=peer_cell(res, "relu", n),
                        comparable=bool(r) and r["n"] == n, anchor_table=A))
        for fn in ("sigmoid", "reciprocal"):
            r = _fn_row(res, fn, ring, n)
            rows.append(Row(f"{fn}, 10^4 elements, {ring}-bit", "s", [f"crypten_{fn}_1e4"],
                            _fn_measure(r, n), _missing(res, "functions", "no 10^4 size"),
                            plaintext=Measure(r["tf_plaintext_us_per_elt"] * n * 1e-6) if r and
                            r.get("tf_plaintext_us_per_elt") else None,
                            peer=peer_cell(res, fn, n), anchor_table=A))
    return rows


def _fn_measure(r, per_n) -> Optional[Measure]:
    """functions.json records best and median µs per element (no max)."""
    if not r or r.get("us_per_elt") is None:
        return None
    med = r.get("median_us_per_elt", r["us_per_elt"]) * per_n * 1e-6
    best = r["us_per_elt"] * per_n * 1e-6
    return Measure(med, best, r.get("max_us_per_elt", r["us_per_elt"]) * per_n * 1e-6
                   if r.get("max_us_per_elt") else None,
                   "" if r.get("max_us_per_elt") else f"best {best * 1e6 / per_n:.3g} µs/el")


def group_derived(res, A) -> List[Row]:
    rows = []
    fns = res.get("functions", {}).get("rows", [])
    if not fns:
        return [Row("derived functions (exp, reciprocal, divide, sigmoid, ...)", "s",
                    ["privpy_derived_latency"], status=_missing(res, "functions"),
                    anchor_table=A)]
    ns = sorted({r["n"] for r in fns if isinstance(r, dict) and "n" in r})
    for ring in _rings(fns):
        for fn in DERIVED:
            for n in ns:
                r = _fn_row(res, fn, ring, n)
                if r is None:
                    continue
                anchors = ["privpy_derived_latency"] if fn in ("divide", "sigmoid") else []
                rows.append(Row(f"{fn}, one call of {n:,} elements, {ring}-bit", "s", anchors,
                                _fn_measure(r, n),
                                plaintext=Measure(r["tf_plaintext_us_per_elt"] * n * 1e-6)
                                if r.get("tf_plaintext_us_per_elt") else None,
                                peer=peer_cell(res, fn, n), comparable=n == 1, anchor_table=A))
    return rows


def group_lr(res, A) -> List[Row]:
    rows, tr = [], res.get("training", {})
    for ring in _rings(tr.get("lr_per_instance")):
        for b in (1, 10, 100, 1000):
            r = _pick(tr.get("lr_per_instance"), ring=ring, batch=b)
            ours = plain = None
            if r:
                ours = stats_measure(r.get("step_s"), per=b) or Measure(
                    r["ms_per_instance"] * 1e-3, note="best")
                plain = stats_measure(r.get("plaintext_step_s"), per=b) or Measure(
                    r["plaintext_ms_per_instance"] * 1e-3, note="best")
            rows.append(Row(f"LR SGD step per instance, MNIST 0-4 vs 5-9 (784 features), "
                            f"batch {b}, {ring}-bit", "s", [f"privpy_lr_b{b}"], ours,
                            _missing(res, "training", f"batch {b} not in --lr_batches"),
                            plaintext=plain, peer=peer_cell(res, "lr_step", b, per=b),
                            anchor_table=A))
    return rows


TABLE6 = (("ffnn", "FFNN 784-625-625-10", "privpy_ffnn"),
          ("lenet5_sigmoid", "LeNet-5 (PrivPy's: sigmoid, sum pooling)", "privpy_lenet5_sigmoid"),
          ("lenet5_bn", "LeNet-5 + BatchNorm (sigmoid, sum pooling)", "privpy_lenet5_bn"),
          ("lenet5", "LeNet-5 (ReLU, max pooling)", None))


def group_inference(res, A) -> List[Row]:
    rows, cv = [], res.get("converter", {})
    for ring in _rings(cv.get("rows")):
        for model, label, akey in TABLE6:
            for b in (1, 10, 100, 1000):
                r = _pick(cv.get("rows"), ring=ring, model=model, batch=b)
                ours = plain = None
                if r:
                    ours = stats_measure(r.get("private_s"), per=b) or Measure(
                        r["private_ms_per_image"] * 1e-3, note="best")
                    plain = stats_measure(r.get("plaintext_s"), per=b) or Measure(
                        r["plaintext_ms_per_image"] * 1e-3, note="best")
                    if r.get("build_s") is not None:
                        ours.note = (ours.note + ", " if ours.note else "") + \
                            f"build {r['build_s']:.1f} s"
                # the peers run the ReLU LeNet-5: PrivPy's (sigmoid) figure is shown beside
                # it, without a ratio
                akeys = [f"{akey or 'privpy_lenet5_sigmoid'}_b{b}"]
                rows.append(Row(f"{label}, per image, batch {b}, {ring}-bit", "s", akeys, ours,
                                _missing(res, "converter", f"batch {b} / {model} not chosen"),
                                plaintext=plain,
                                peer=peer_cell(res, "lenet5", b, per=b) if model == "lenet5"
                                else "–", comparable=akey is not None,
                                differs="PrivPy's LeNet-5 is the sigmoid one", anchor_table=A))
        rows += lenet5_build_rows(res, A, ring)
    return rows


def lenet5_build_rows(res, A, ring) -> List[Row]:
    """LeNet-5 (ReLU)'s graph build, ours (tp.keras.convert + the first trace, from
    converter.json) beside the peers' (their convert, compile or construction: peers.json's
    graph_build rows), at each batch both measured."""
    rows = []
    for r in res.get("converter", {}).get("rows", []):
        if not (isinstance(r, dict) and r.get("model") == "lenet5" and r.get("ring") == ring
                and r.get("build_s") is not None):
            continue
        b = r["batch"]
        cell = peer_cell(res, "graph_build", b)
        if b != 1 and cell == "no peer row at this size":
            continue   # the peers build at batch 1 by default: one row is enough
        rows.append(Row(f"LeNet-5 (ReLU, max pooling) graph build (convert + first trace), "
                        f"batch {b}, {ring}-bit", "s", (), Measure(r["build_s"], note="once"),
                        peer=cell, anchor_table=A))
    if not rows:   # ours not run: the peers' builds still have their row
        rows.append(Row(f"LeNet-5 (ReLU, max pooling) graph build (convert + first trace), "
                        f"batch 1, {ring}-bit", "s", (), None,
                        _missing(res, "converter", "batch 1 / lenet5 not chosen"),
                        peer=peer_cell(res, "graph_build", 1), anchor_table=A))
    return rows


def group_tfe(res, A) -> List[Row]:
    rows, cmp_, tr = [], res.get("compare", {}), res.get("training", {})
    for ring in _rings(cmp_.get("sort_graph") or cmp_.get("tasks"), default=(128,)):
        g = _pick(cmp_.get("sort_graph"), ring=ring, n=65536)
        ours = Measure(g["run_s"], g.get("run_min_s"), g.get("run_max_s")) if g else None
        if ours is None:
            t = _pick(cmp_.get("tasks"), ring=ring, task="sort 65536")
            ours = Measure(t["s"], note="eager, best") if t else None
        rows.append(Row(f"sort 2^16 (tf.function), {ring}-bit", "s", ["tfe_sort_65536"], ours,
                        _missing(res, "compare", "65536 not in --sort_graph_sizes"),
                        plaintext=stats_measure(g.get("plaintext_s")) if g else None,
                        peer=peer_cell(res, "sort", 65536), anchor_table=A))
        rows.append(Row(f"sort 2^16 graph build (trace + first-call setup), {ring}-bit", "s",
                        ["tfe_sort_65536_build"],
                        Measure(g["trace_s"] + g.get("setup_s", 0)) if g else None,
                        _missing(res, "compare", "65536 not in --sort_graph_sizes"),
                        peer="peers' builds: the LeNet-5 graph-build row (Table 6)",
                        anchor_table=A))
        t = _pick(cmp_.get("tasks"), ring=ring, task="max of 65536 groups of 4")
        rows.append(Row(f"max of 2^16 groups of 4, {ring}-bit", "s", ["tfe_max_65536x4"],
                        (stats_measure(t.get("stats")) or Measure(t["s"], note="best"))
                        if t else None, _missing(res, "compare", "65536 not in --max_groups"),
                        plaintext=stats_measure(t.get("plaintext_s")) if t else None,
                        peer=peer_cell(res, "max", 65536), anchor_table=A))
        rows += sort_max_smaller(res, A, ring)
    nets = {"lr": "LR on MNIST 0-4 vs 5-9", "network_a": "network A 784-128-128-10",
            "network_b": "network B (MiniONN conv)", "network_c": "network C (LeNet conv)",
            "network_d": "network D (Chameleon conv)"}
    for ring in _rings(tr.get("per_step")):
        for model, name in nets.items():
            akeys = (["tfe_lr_step_b128"] if model == "lr" else
                     [f"tfe_{model}_b128", f"mpspdz_{model}_b128"])
            r = _pick(tr.get("per_step"), ring=ring, model=model)
            ours = plain = None
            if r:
                ours = stats_measure(r.get("step_s")) or Measure(r["ms_per_step"] * 1e-3,
                                                                 note="best")
                plain = stats_measure(r.get("plaintext_step_s")) or Measure(
                    r["plaintext_ms_per_step"] * 1e-3, note="best")
            rows.append(Row(f"{name}, SGD step, batch 128, {ring}-bit", "s", akeys, ours,
                            _missing(res, "training", f"{model} not in --models"),
                            plaintext=plain, anchor_table=A,
                            peer=peer_cell(res, "lr_step", 128) if model == "lr" else "–"))
    return rows


def sort_max_smaller(res, A, ring) -> List[Row]:
    """TF-Encrypted's sort and max tasks at the other sizes compare.py ran (the peers' smaller
    sizes too), beside the 2^16 anchor without a ratio."""
    rows, cmp_ = [], res.get("compare", {})
    for g in cmp_.get("sort_graph") or ():
        if isinstance(g, dict) and g.get("ring") == ring and g.get("n") != 65536:
            rows.append(Row(f"sort {g['n']:,} (tf.function), {ring}-bit", "s",
                            ["tfe_sort_65536"], Measure(g["run_s"], g.get("run_min_s"),
                                                        g.get("run_max_s")),
                            plaintext=stats_measure(g.get("plaintext_s")),
                            peer=peer_cell(res, "sort", g["n"]), comparable=False,
                            anchor_table=A))
    for t in cmp_.get("tasks") or ():
        m = re.fullmatch(r"max of (\d+) groups of 4", str(t.get("task"))) if isinstance(
            t, dict) else None
        if m and t.get("ring") == ring and int(m.group(1)) != 65536:
            n = int(m.group(1))
            rows.append(Row(f"max of {n:,} groups of 4, {ring}-bit", "s", ["tfe_max_65536x4"],
                            stats_measure(t.get("stats")) or Measure(t["s"], note="best"),
                            plaintext=stats_measure(t.get("plaintext_s")),
                            peer=peer_cell(res, "max", n), comparable=False, anchor_table=A))
    return rows


def group_batchcrypt(res, A) -> List[Row]:
    rows, he = [], res.get("he", {})
    a, b = he.get("a"), he.get("b")
    note = "quick sizes" if he.get("quick") else ""
    if a:
        gm = [r for r in a.get("phe", []) if r.get("gmpy2")] or a.get("phe", [])
        peer = "; ".join(f"BatchCrypt on phe {r.get('phe_version', '')} ({r.get('where', '')}) "
                         f"{fmt_value(r['batchcrypt_us_per_value'] * 1e-6, 's')}" for r in gm) \
            or "phe not measured"
        rows.append(Row(f"BatchCrypt client cost per value (encode + CRT encrypt + decrypt + "
                        f"decode), 2048-bit, r=16, m={a.get('m')}, {a['values']:,} values", "s",
                        ["batchcrypt_phe_per_value", "phe_per_value"],
                        Measure(a["ours_us_per_value"] * 1e-6, note="best of 2" +
                                (f", {note}" if note else "")), peer=peer, anchor_table=A))
        rows.append(Row("the same, online (noise made ahead in a NoisePool)", "s",
                        ["batchcrypt_phe_per_value"],
                        Measure(a["ours_online_us_per_value"] * 1e-6, note="best of 2"),
                        anchor_table=A))
        rows.append(Row("BatchCrypt ciphertext bytes per value", "B",
                        ["batchcrypt_phe_bytes_per_value"], Measure(a["ours_bytes_per_value"]),
                        anchor_table=A))
    else:
        rows.append(Row("BatchCrypt client cost per value", "s", ["batchcrypt_phe_per_value"],
                        status=_missing(res, "he", "section a not chosen"), anchor_table=A))
    if b:
        runs = b["runs"]
        label = (f"{b['clients']} clients, MNIST, FC 784-{b['hidden']}-10 ({b['params']:,} "
                 f"params), {b['key_bits']}-bit")
        for agg in ("batchcrypt", "paillier"):
            r = runs.get(agg)
            if r:
                rows.append(Row(f"FL round, {agg} aggregation, {label}", "s", (),
                                Measure(r["round_s"], note="one round" +
                                        (f", {note}" if note else "")),
                                plaintext=Measure(runs["plaintext"]["round_s"])
                                if runs.get("plaintext") else None,
                                peer="per-value Paillier: row below" if agg == "batchcrypt"
                                else "–", anchor_table=A))
        rows.append(Row("FL round: HE time, per-value Paillier / BatchCrypt", "x",
                        ["batchcrypt_fl_time_x"], Measure(b["he_time_x"]), anchor_table=A))
        rows.append(Row("FL round: traffic, per-value Paillier / BatchCrypt", "x",
                        ["batchcrypt_fl_traffic_x"], Measure(b["traffic_x"]), anchor_table=A))
    else:
        rows.append(Row("FL round (BatchCrypt vs per-value Paillier)", "x",
                        ["batchcrypt_fl_time_x"], status=_missing(res, "he", "section b"),
                        anchor_table=A))
    pa = res.get("paillier", {}).get("ops", {}).get("2048")
    for op, akey, ph in (("encrypt, CRT (key holder)", "phe_encrypt_2048", "phe encrypt"),
                         ("decrypt, CRT", "phe_decrypt_2048", "phe decrypt")):
        v = pa.get(op) if pa else None
        rows.append(Row(f"Paillier 2048-bit {op}, per element (batched)", "s", [akey],
                        Measure(v, note="best") if v else None, _missing(res, "paillier"),
                        peer=f"phe {fmt_value(pa[ph], 's')} (this venv)" if pa and pa.get(ph)
                        else "–", anchor_table=A))
    codec = res.get("batchcrypt_codec", {}).get("steps", {})
    enc, dec = codec.get("encode = quantize + pack"), codec.get("decode = unpack + dequantize")
    rows.append(Row("BatchCrypt codec alone (encode + decode), per value", "s", (),
                    Measure((enc["s"] + dec["s"]) / res["batchcrypt_codec"]["values"],
                            note="best") if enc and dec else None,
                    _missing(res, "batchcrypt_codec"), anchor_table=A))
    return rows


def group_scalar_product(res, A) -> List[Row]:
    c = res.get("he", {}).get("c")
    if not c:
        return [Row("scalar product, 200,000 binary, 1024-bit", "s", ["sp_naive_1024"],
                    status=_missing(res, "he", "section c"), anchor_table=A)]
    n, same = c["n"], c["n"] == 200_000
    phe = c.get("phe_gmpy2")
    rows = []
    for kind, t, akeys, pkey in (
            ("naive (Bob encrypts online)", c["naive"]["total"],
             ["sp_naive_1024", "sp_phe_naive_1024"], "naive_scaled_s"),
            ("online, precomputed encryptions", c["online"]["total"],
             ["sp_online_1024", "sp_phe_online_1024"], "online_scaled_s")):
        rows.append(Row(f"scalar product {kind}, {n:,} binary elements, 1024-bit", "s", akeys,
                        Measure(t, note="one run"), plaintext=Measure(c["plaintext_s"]),
                        peer=(f"phe + gmpy2 {fmt_value(phe[pkey], 's')} (scaled from "
                              f"{phe.get('n', '?'):,})") if phe else "phe + gmpy2 not run "
                        "(no .venv-bench)", comparable=same, anchor_table=A))
    if c.get("two_clients_own_keys"):
        rows.append(Row(f"scalar product, 2 clients with own keys, naive, {n:,}", "s", (),
                        Measure(c["two_clients_own_keys"]["total"], note="one run"),
                        anchor_table=A))
    return rows


def group_vector_sum(res, A) -> List[Row]:
    d = res.get("he", {}).get("d")
    if not d:
        return [Row("vector sum, 8,000 users x 100 values", "s", ["vs_seal_8000x100"],
                    status=_missing(res, "he", "section d"), anchor_table=A)]
    same = d["users"] == 8000 and d["dim"] == 100
    g = d["runs"].get("generic") or next(iter(d["runs"].values()))
    phe = d.get("phe_gmpy2")
    label = f"{d['users']:,} users x {d['dim']} values in [0, {d['max_value']}], 2048-bit"
    return [
        Row(f"vector sum, total (users' encryption included), {label}", "s",
            ["vs_seal_8000x100"], Measure(g["timings"]["total"], note="one run"),
            plaintext=Measure(d["plaintext_s"]),
            peer=(f"phe + gmpy2, same packing {fmt_value(phe['total_scaled_s'], 's')} (scaled "
                  f"from {phe.get('users', '?')} users)") if phe else "phe + gmpy2 not run",
            comparable=same, anchor_table=A),
        Row("vector sum, upload bytes per value", "B",
            ["vs_seal_bytes_per_value", "vs_lattice_bytes_per_value"],
            Measure(g["bytes_per_value"]), anchor_table=A),
    ]


def _times_measure(ts) -> Optional[Measure]:
    if not ts:
        return None
    s = sorted(ts)
    return Measure(s[len(s) // 2], s[0], s[-1], note=f"{len(s)} calls")


def group_distributed(res, A) -> List[Row]:
    d = res.get("distributed", {})
    st, sizes = d.get("settings", {}), d.get("sizes", {})
    names = ("mul", "matmul", "less", "lenet5", "lr_step")
    if not st:
        why = "; ".join(f"{k}: {v}" for k, v in d.get("errors", {}).items())
        return [Row("mul, matmul, less, LeNet-5, LR step: embedded vs loopback, LAN, WAN", "s",
                    (), status=(f"not run: {why}"[:200] if why else _missing(res, "distributed")),
                    anchor_table=A)]
    rows = []
    emb = st.get("embedded", {}).get("workloads", {})
    for name in names:
        size = sizes.get(name, "?")
        size_text = f"{size:,}" if isinstance(size, int) else str(size)
        base = _times_measure(emb.get(name, {}).get("times_s"))
        plain = _times_measure(emb.get(name, {}).get("plaintext_times_s"))
        for part in ("embedded", "loopback", "lan", "wan"):
            w = st.get(part, {}).get("workloads", {}).get(name)
            ours = _times_measure(w.get("times_s")) if w else None
            why = d.get("errors", {}).get(part) or d.get("skipped", {}).get(part)
            if w is None and not why and part not in (d.get("parts") or ()):
                continue   # a setting this run did not ask for
            status = (f"not run: {why}" if why else _missing(res, "distributed"))
            rel = (f" ({ours.median / base.median:.2f}x embedded)" if ours and base
                   and part != "embedded" else "")
            akeys = []
            if name == "lr_step" and part in ("lan", "wan") and size == 128:
                akeys = ["tfe_lr_step_b128" if part == "lan" else "tfe_lr_step_b128_wan"]
            rows.append(Row(f"{name} ({size_text}), {part}{rel}", "s", akeys, ours, status[:160],
                            plaintext=plain if part == "embedded" else None, anchor_table=A))
    return rows


def groups(res: dict, anchors: Dict[str, dict]):
    """(title, rows, note) of every row group, in the report's order."""
    quick = " Results from --quick sizes: ratios to the anchors are shown only for equal sizes."
    he_q = quick if res.get("he", {}).get("quick") else ""
    return [
        ("PrivPy Tables 1-3: single operations and throughput", group_single_ops(res, anchors),
         "PrivPy: 4 servers of 8 vCPUs on 1 GbE; ours: the four servers embedded in one process "
         "on this machine. Throughput rows are tf.function calls of n elements."),
        ("Element-wise operations at 10^4 elements (CrypTen's published ops)",
         group_elementwise(res, anchors), "Time per call of 10^4 elements."),
        ("Derived functions (PrivPy: about 30 ms per division or sigmoid)",
         group_derived(res, anchors), "Time per tf.function call; PrivPy's figure is one "
         "operation, so the ratio is given only for 1-element calls."),
        ("PrivPy Table 4: logistic-regression training, per instance", group_lr(res, anchors),
         "PrivPy trains on Adult and Creditcard; ours on MNIST 0-4 vs 5-9 (784 features): "
         "the anchor is PrivPy's faster dataset."),
        ("PrivPy Table 6: private inference, per image", group_inference(res, anchors),
         "Real MNIST test digits through tp.keras.convert."),
        ("TF-Encrypted's tasks (ABY3, 3 machines, LAN)", group_tfe(res, anchors), None),
        ("BatchCrypt: per-element cost and FL round", group_batchcrypt(res, anchors),
         "Peers here are python-paillier runs made by benchmarks/he.py in the same run." + he_q),
        ("Scalar product (seed 004)", group_scalar_product(res, anchors), he_q.strip() or None),
        ("Many-user vector sum (seed 002)", group_vector_sum(res, anchors), he_q.strip() or None),
        ("Distributed vs embedded", group_distributed(res, anchors),
         "benchmarks/distributed.py: the same workloads embedded, on four server processes over "
         "loopback, and on shaped LAN/WAN namespaces; the calls of each setting interleaved."
         + (quick if res.get("distributed", {}).get("quick") else "")),
    ]
