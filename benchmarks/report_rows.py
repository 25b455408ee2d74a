"""The rows of benchmarks/REPORT.md: which results-file field answers which
anchor. Every reader is defensive (a results file may be missing, from an
older program, or from --quick sizes): a missing figure becomes "not run",
never a number."""
import re
from typing import Dict, List, Optional

# The cells and readers (report_cells) and the HE groups (report_rows_he) are
# re-exported: report.py, report_plots.py and the tests import them from here.
from report_cells import (  # noqa: F401
    NOT_RUN, PEER_ALIASES, Measure, Row, _missing, _norm, _pick, _rings, fmt_value, peer_cell,
    peer_data, peer_rows, stats_measure)
from report_rows_he import group_batchcrypt, group_scalar_product, group_vector_sum  # noqa: F401


# ------------------------------------------------------------------ groups
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
        rows += sort_at_scale(res, A, ring)
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


def group_tfe_suite(res, A) -> List[Row]:
    """benchmarks/tfe_suite.py: every (model, optimizer) row of the article's
    training table beside its best LAN figures (MP-SPDZ's first for the
    networks: the faster; LR: TF-Encrypted's only)."""
    rows, st = [], res.get("tfe_suite", {})
    names = {"lr": "LR (0-4 vs 5-9)", "network_a": "network A", "network_b": "network B",
             "network_c": "network C", "network_d": "network D"}
    for r in st.get("rows") or ():
        if not isinstance(r, dict) or r.get("model") not in names:
            continue
        m, o = r["model"], r["optimizer"]
        keys = [k for k in (f"mpspdz_train_{m}_{o}_lan", f"tfe_train_{m}_{o}_lan") if k in A]
        acc = ("" if "accuracy" not in r else
               f", accuracy {100 * r['accuracy']:.1f} % (plaintext "
               f"{100 * r['plaintext_accuracy']:.1f} %, {r['trained_steps']} steps)")
        rows.append(Row(f"{names[m]}, {o} step, batch 128, {r['ring']}-bit{acc}", "s", keys,
                        stats_measure(r.get("step_s")), plaintext=stats_measure(
                            r.get("plaintext_step_s")), anchor_table=A))
    return rows


def sort_at_scale(res, A, ring) -> List[Row]:
    """compare.py's scale rows (issue 28, _task1_scale.py: a process per
    measurement): the sort of 10^6 in its while-loop network, run and graph
    build, beside TF-Encrypted's LAN figures (seed 001's table)."""
    rows = []
    for r in res.get("compare", {}).get("scale") or ():
        if not (isinstance(r, dict) and r.get("task") == "sort" and r.get("ring") == ring
                and r.get("n") == 1_000_000 and r.get("mode", "loop") == "loop"):
            continue
        why = f"failed: {r['error']}" if "error" in r else None
        exact = "" if r.get("exact", True) else " NOT EXACT"
        note = f"peak {r['peak_rss_mib']:.0f} MiB{exact}" if "peak_rss_mib" in r else exact
        rows.append(Row(f"sort 10^6 (tf.function, while-loop network), {ring}-bit", "s",
                        ["tfe_sort_1e6"], None if why else Measure(r["run_s"], note=note),
                        why or NOT_RUN, anchor_table=A))
        rows.append(Row(f"sort 10^6 graph build, {ring}-bit", "s", ["tfe_sort_1e6_build"],
                        None if why or "trace_s" not in r else Measure(r["trace_s"]),
                        why or NOT_RUN, anchor_table=A))
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


def _times_measure(ts) -> Optional[Measure]:
    if not ts:
        return None
    s = sorted(ts)
    return Measure(s[len(s) // 2], s[0], s[-1], note=f"{len(s)} calls")


def group_distributed(res, A) -> List[Row]:
    d = res.get("distributed", {})
    st, sizes = d.get("settings", {}), d.get("sizes", {})
    names = ("mul", "matmul", "less", "relu", "lenet5", "lr_step")
    if not st:
        why = "; ".join(f"{k}: {v}" for k, v in d.get("errors", {}).items())
        return [Row("mul, matmul, less, LeNet-5, LR step: embedded vs loopback, LAN, WAN", "s",
                    (), status=(f"not run: {why}"[:200] if why else _missing(res, "distributed")),
                    anchor_table=A)]
    rows = []
    emb = st.get("embedded", {}).get("workloads", {})
    # the comparing workloads are timed once per comparison family
    # ("less:bitwise"); results from before the families name them "less"
    keys = []
    for name in names:
        fams = [k for k in (f"{name}:{f}" for f in d.get("comparisons", ()))
                if any(k in s.get("workloads", {}) for s in st.values())]
        keys += fams or ([name] if name != "relu" or name in sizes else [])
    for key in keys:
        name, _, family = key.partition(":")
        size = sizes.get(name, "?")
        size_text = f"{size:,}" if isinstance(size, int) else str(size)
        size_text += f", {family}" if family else ""
        base = _times_measure(emb.get(key, {}).get("times_s"))
        plain = _times_measure(emb.get(key, {}).get("plaintext_times_s"))
        for part in ("embedded", "loopback", "lan", "wan"):
            w = st.get(part, {}).get("workloads", {}).get(key)
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


def group_comparisons(res, A) -> List[Row]:
    """benchmarks/comparisons.py: per ring and family, bytes per comparison
    (against SPU SEMI2K's published cost model), comparisons per second at
    the largest size, ReLU and LeNet-5 per image, embedded."""
    c = res.get("comparisons", {})
    if not c.get("rows"):
        return [Row("comparison families: bytes per comparison, less, ReLU, LeNet-5", "B",
                    ["spu_semi2k_bytes_per_cmp"], status=_missing(res, "comparisons"),
                    anchor_table=A)]
    rows = []
    top = max(map(int, c["sizes"]))
    for r in c["rows"]:
        ring, fam = r["ring"], r["family"]
        p = _pick(c.get("plaintext"), ring=ring) or {}
        rows.append(Row(f"bytes per comparison, all phases, {fam}, {ring}-bit "
                        f"({r['rounds']} rounds)", "B", ["spu_semi2k_bytes_per_cmp"],
                        Measure(r["bytes_per_cmp"]), anchor_table=A))
        less = r.get(f"less_{top}")
        rows.append(Row(f"tp.less of {top:,}, {fam}, {ring}-bit", "1/s", [],
                        stats_measure(less, rate_n=top) if less else None,
                        plaintext=stats_measure(p.get(f"less_{top}"), rate_n=top),
                        anchor_table=A))
        rows.append(Row(f"ReLU of {c['relu_n']:,}, {fam}, {ring}-bit", "s", [],
                        stats_measure(r.get("relu")), plaintext=stats_measure(p.get("relu")),
                        anchor_table=A))
        b = c["lenet_batch"]
        rows.append(Row(f"LeNet-5 per image, batch {b}, {fam}, {ring}-bit "
                        f"({r['lenet5']['bytes_per_image'] / 1e6:.2f} MB per image)", "s", [],
                        stats_measure(r.get("lenet5"), per=b),
                        plaintext=stats_measure(p.get("lenet5"), per=b), anchor_table=A))
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
        ("TF-Encrypted's training table (seed 001, task 3): per optimizer",
         group_tfe_suite(res, anchors), "benchmarks/tfe_suite.py: ours embedded (four "
         "servers in one process), plaintext Keras in the same run from the same weights; "
         "the article: 3 machines x 4 cores, LAN 40 Gbps. WAN figures: results/tfe_suite.json."),
        ("BatchCrypt: per-element cost and FL round", group_batchcrypt(res, anchors),
         "Peers here are python-paillier runs made by benchmarks/he.py in the same run." + he_q),
        ("Scalar product (seed 004)", group_scalar_product(res, anchors), he_q.strip() or None),
        ("Many-user vector sum (seed 002)", group_vector_sum(res, anchors), he_q.strip() or None),
        ("Comparison families (garbled circuits, bitwise)", group_comparisons(res, anchors),
         "benchmarks/comparisons.py: both families embedded, timed interleaved call by call; "
         "bytes are what tp.stats counts between the servers for one tp.less of 10^5 (all "
         "phases: garbling or the dealer's triples included). SPU's figure is its published "
         "cost model, not a run."
         + (quick if res.get("comparisons", {}).get("quick") else "")),
        ("Distributed vs embedded", group_distributed(res, anchors),
         "benchmarks/distributed.py: the same workloads embedded, on four server processes over "
         "loopback, and on shaped LAN/WAN namespaces; the calls of each setting interleaved, "
         "and the comparing workloads (less, ReLU, LeNet-5) under each comparison family, "
         "the families' calls interleaved too."
         + (quick if res.get("distributed", {}).get("quick") else "")),
    ]
