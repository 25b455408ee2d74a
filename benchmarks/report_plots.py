"""The plots of benchmarks/REPORT.md: time against size per operation (ours,
plaintext TF, peers; CrypTen's published 10^4 point), and LeNet-5 time per
image against batch size. Only measured points are drawn."""
import os
from typing import Dict, List

from report_rows import PEER_ALIASES, _norm, peer_data

OPS = ("mul", "compare", "exp", "sigmoid", "reciprocal", "divide")
CRYPTEN = {"mul": "crypten_mul_1e4", "compare": "crypten_compare_1e4",
           "sigmoid": "crypten_sigmoid_1e4", "reciprocal": "crypten_reciprocal_1e4"}


def _series_ours(res, op) -> Dict[str, List[tuple]]:
    """{label: [(n, median_s, min_s, max_s)]} per call, ours and plaintext."""
    out: Dict[str, List[tuple]] = {}

    def put(label, n, med, lo=None, hi=None):
        out.setdefault(label, []).append((n, med, lo if lo is not None else med,
                                          hi if hi is not None else med))
    if op == "mul":
        for r in res.get("micro", {}).get("mul", []):
            put(f"ours {r['ring']}-bit", r["n"], r["median_s"], r.get("min_s"), r.get("max_s"))
            if r.get("plaintext_median_s") and r["ring"] == res["micro"]["mul"][0]["ring"]:
                put("plaintext TF", r["n"], r["plaintext_median_s"])
    elif op == "compare":
        rows = res.get("compare", {}).get("compare", [])
        for r in rows:
            st = r.get("tf_function_s")
            if st:
                put(f"ours {r['ring']}-bit", r["n"], st["median_s"], st["min_s"], st["max_s"])
            else:
                put(f"ours {r['ring']}-bit", r["n"], r["n"] / r["with_garbling_tf_function_per_s"])
            if r.get("plaintext_median_s") and r["ring"] == rows[0]["ring"]:
                put("plaintext TF", r["n"], r["plaintext_median_s"])
    else:
        rows = [r for r in res.get("functions", {}).get("rows", [])
                if isinstance(r, dict) and r.get("fn") == op]
        first_ring = rows[0]["ring"] if rows else None
        methods = {r.get("method") for r in rows if not r.get("peer")}
        method = next((m for m in ("leading_one", None, "binary_search") if m in methods), None)
        for r in rows:
            n, us = r["n"], 1e-6 * r["n"]
            if r.get("peer"):     # a peer row functions.py may write
                if r.get("us_per_elt") is not None:
                    put(f"{r['peer']}", n, r.get("median_us_per_elt", r["us_per_elt"]) * us)
                continue
            # one series per ring: functions.py's default method, exact numerics
            # and the circuit thresholds (other choices are its own tables' rows)
            if r.get("method") != method or r.get("mode") not in (None, "exact") or \
                    r.get("threshold_bits") not in (None, "circuit"):
                continue
            med = r.get("median_us_per_elt", r["us_per_elt"]) * us
            # functions.json has best and median only: no upper bar without a max
            put(f"ours {r['ring']}-bit", n, med, r["us_per_elt"] * us,
                r["max_us_per_elt"] * us if r.get("max_us_per_elt") else med)
            if r.get("tf_plaintext_us_per_elt") and r["ring"] == first_ring:
                put("plaintext TF", n, r["tf_plaintext_us_per_elt"] * us)
    # Sizes functions.py does not reach (10^6) but peers_run.py timed ours at,
    # beside the peers: its exact-mode rows, as their own series so that the
    # two runners' points are never mistaken for one.
    peers = peer_data(res) or {"rows": [], "ours": []}
    have = {label: {p[0] for p in pts} for label, pts in out.items()}
    for r in peers.get("ours", []):
        ring = str(r.get("protocol", "")).rsplit("-", 1)[-1]  # "-fast": the fast mode's
        if _norm(r.get("workload")) in PEER_ALIASES.get(op, (op,)) and r.get("n") and \
                ring.isdigit() and r["n"] not in have.get(f"ours {ring}-bit", ()):
            put(f"ours {ring}-bit (peers_run.py)", r["n"], r.get("median_s", r.get("best_s")),
                r.get("min_s"), r.get("max_s"))
    for r in peers["rows"]:
        if _norm(r.get("workload")) in PEER_ALIASES.get(op, (op,)) and r.get("n"):
            put(f"{r.get('peer')}" + (f" {r['protocol']}" if r.get("protocol") else ""),
                r["n"], r.get("median_s", r.get("best_s")), r.get("min_s"), r.get("max_s"))
    for k in out:
        out[k] = sorted(set(out[k]))
    return out


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def time_vs_size(res, anchors, path) -> bool:
    data = {op: _series_ours(res, op) for op in OPS}
    data = {op: s for op, s in data.items() if s}
    if not data:
        return False
    plt = _plt()
    cols = min(3, len(data))
    rows = (len(data) + cols - 1) // cols
    # one colour per series across all panels (ours first), one legend under
    # them: a dozen series overflow the default ten-colour cycle and the axes
    labels = sorted({lb for s in data.values() for lb in s},
                    key=lambda lb: (not lb.startswith("ours"), lb != "plaintext TF", lb))
    palette = plt.get_cmap("tab20").colors
    color = {lb: palette[i % len(palette)] for i, lb in enumerate(labels)}
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows + 1.2), squeeze=False)
    handles = {}
    for ax, (op, series) in zip(axes.flat, data.items()):
        for label, pts in series.items():
            n = [p[0] for p in pts]
            med = [p[1] for p in pts]
            # (clamped: a median above a recorded max cannot be drawn as a bar)
            err = [[max(0.0, p[1] - p[2]) for p in pts], [max(0.0, p[3] - p[1]) for p in pts]]
            style = "--" if label == "plaintext TF" else "-"
            handles[label] = ax.errorbar(n, med, yerr=err, fmt="o" + style, ms=3, capsize=2,
                                         color=color[label],
                                         lw=2 if label.startswith("ours") else 1)
        a = anchors.get(CRYPTEN.get(op, ""))
        if a:
            handles["CrypTen (published, its hardware)"], = ax.plot(
                [1e4], [a["value"]], "*", ms=10, color="k")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(50, 2e6)
        ax.set_title(op)
        ax.set_xlabel("elements per call")
        ax.set_ylabel("seconds per call (median; bars: min-max)")
        ax.grid(True, which="major", alpha=0.3)
    for ax in list(axes.flat)[len(data):]:
        ax.axis("off")
    order = [lb for lb in labels if lb in handles] + [lb for lb in handles if lb not in labels]
    fig.legend([handles[lb] for lb in order], order, loc="lower center", ncol=4, fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, 1.2 / (3.6 * rows + 1.2), 1, 1))
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def lenet_vs_batch(res, anchors, path) -> bool:
    rows = [r for r in res.get("converter", {}).get("rows", [])
            if isinstance(r, dict) and str(r.get("model", "")).startswith("lenet5")]
    if not rows:
        return False
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    # sixteen lines or so: twenty colours (paired shades: a model's two rings)
    ax.set_prop_cycle(color=plt.get_cmap("tab20").colors)
    keys = sorted({(r["model"], r["ring"]) for r in rows})
    for model, ring in keys:
        pts = sorted((r["batch"], r) for r in rows if r["model"] == model and r["ring"] == ring)
        b = [p[0] for p in pts]
        med, lo, hi = [], [], []
        for bb, r in pts:
            st = r.get("private_s")
            if st:
                med.append(st["median_s"] / bb)
                lo.append(st["median_s"] / bb - st["min_s"] / bb)
                hi.append(st["max_s"] / bb - st["median_s"] / bb)
            else:
                med.append(r["private_ms_per_image"] * 1e-3)
                lo.append(0.0)
                hi.append(0.0)
        ax.errorbar(b, med, yerr=[lo, hi], fmt="o-", ms=3, capsize=2, lw=2,
                    label=f"ours {model}, {ring}-bit")
    ring0 = keys[0][1]
    for model in sorted({k[0] for k in keys}):
        pts = sorted((r["batch"], r) for r in rows if r["model"] == model and r["ring"] == ring0)
        ax.plot([p[0] for p in pts],
                [(p[1]["plaintext_s"]["median_s"] if p[1].get("plaintext_s") else
                  p[1]["plaintext_ms_per_image"] * 1e-3 * p[0]) / p[0] for p in pts],
                "x--", label=f"plaintext TF {model}")
    pp = [(b, anchors[f"privpy_lenet5_sigmoid_b{b}"]["value"]) for b in (1, 10, 100, 1000)
          if f"privpy_lenet5_sigmoid_b{b}" in anchors]
    if pp:
        ax.plot([p[0] for p in pp], [p[1] for p in pp], "s:", color="k",
                label="PrivPy LeNet-5, sigmoid + sum pool (published, 4x8 vCPU)")
    peers = {}   # one line per peer and protocol across its batches
    for r in (peer_data(res) or {"rows": []})["rows"]:
        if _norm(r.get("workload")) in PEER_ALIASES["lenet5"] and r.get("n"):
            who = f"{r.get('peer')}" + (f" {r['protocol']}" if r.get("protocol") else "")
            peers.setdefault(who, []).append(
                (r["n"], r.get("median_s", r.get("best_s")) / r["n"]))
    for who, pts in sorted(peers.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "^-.", ms=4, lw=1,
                label=f"{who} (peer, same run)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size (images per call)")
    ax.set_ylabel("seconds per image (median; bars: min-max)")
    ax.set_title("LeNet-5 private inference, time per image")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def write_all(res, anchors, plot_dir) -> Dict[str, str]:
    """{title: path} of the plots written (none for lack of data)."""
    os.makedirs(plot_dir, exist_ok=True)
    out = {}
    for title, fname, fn in (
            ("Time against size per operation", "time_vs_size.png", time_vs_size),
            ("LeNet-5 time per image against batch size", "lenet5_batch.png", lenet_vs_batch)):
        path = os.path.join(plot_dir, fname)
        if fn(res, anchors, path):
            out[title] = path
        elif os.path.exists(path):
            os.remove(path)   # a stale plot must not outlive its data
    return out
