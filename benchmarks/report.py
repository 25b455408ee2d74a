"""One benchmark report: benchmarks/REPORT.md and its plots (benchmarks/report/*.png).

Reads what the benchmark programs wrote to benchmarks/results/ (micro, compare,
functions, converter, training, he, distributed, comparisons, paillier,
batchcrypt_codec),
the peers' rows (results/peers.json, written by the peer driver), the record
of the last `make bench` (results/run.json, written by benchmarks/run_all.py)
and the anchors' published figures (benchmarks/anchors.json, copied with their
source lines from the project's ANCHORS.md). Each row: the workload, the
anchor's figure and source, ours (median, min and max of repeated runs),
plaintext TF and a peer in the same run, and how ours compares. It measures
nothing itself: a row whose benchmark did not run says "not run".

    python benchmarks/report.py                     # after benchmarks/run_all.py
    python benchmarks/report.py --results=DIR --out=DIR/REPORT.md
"""
import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import report_rows  # noqa: E402  (the row groups: one module of data, this one of output)
from _report import cpu_model  # noqa: E402
from report_rows import Row, fmt_value  # noqa: E402

#: what each results file comes from (for "not run" and the sources list)
PROGRAMS = {
    "micro": "benchmarks/micro.py", "compare": "benchmarks/compare.py",
    "functions": "benchmarks/functions.py", "converter": "benchmarks/converter.py",
    "training": "benchmarks/training.py", "he": "benchmarks/he.py",
    "tfe_suite": "benchmarks/tfe_suite.py",
    "privpy_table4": "benchmarks/privpy_table4.py",
    "distributed": "benchmarks/distributed.py", "paillier": "benchmarks/paillier.py",
    "comparisons": "benchmarks/comparisons.py",
    "batchcrypt_codec": "benchmarks/batchcrypt_codec.py", "aead_gcm": "benchmarks/aead_gcm.py",
    "federated": "benchmarks/federated.py",
    "peers": "benchmarks/peers_run.py (results/peers.json)",
}


def load_results(results_dir: str) -> Dict[str, dict]:
    """{name: parsed JSON} of the results present; a file that does not parse
    is reported as such (a failed run can leave half a file)."""
    out = {}
    files = {"he": ["he.json", "he_quick.json"],
             "paillier": [f"paillier_{t}t.json" for t in (os.cpu_count() or 2, 2, 1)]}
    for name in PROGRAMS:
        for fname in files.get(name, [f"{name}.json"]):
            path = os.path.join(results_dir, fname)
            if not os.path.exists(path):
                continue
            try:
                with open(path) as f:
                    out[name] = json.load(f)
            except (OSError, ValueError) as e:
                out[name] = {"_unreadable": f"{fname}: {e}"}
            out[name]["_file"] = fname
            break
    run = os.path.join(results_dir, "run.json")
    if os.path.exists(run):
        with open(run) as f:
            out["_run"] = json.load(f)
    return out


def load_anchors(path: str) -> Dict[str, dict]:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: it ships with the repository "
                                "(benchmarks/anchors.json); restore it with git checkout")
    with open(path) as f:
        return json.load(f)["anchors"]


# ------------------------------------------------------------------ header
def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return (sha or "unknown") + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"


def program_sizes(p: dict) -> str:
    """"full", "--quick" or "custom": the sizes a run_all.py record ran at."""
    import run_all  # noqa: E402  (it imports this module only inside its main)
    name = os.path.basename(p.get("program", ""))[:-3]
    spec = {n: (full, quick) for n, full, quick in run_all.PROGRAMS}.get(name)
    args = p.get("args", [])
    if spec is None:
        return "custom"
    return "full" if args == spec[0] else "--quick" if args == spec[1] else "custom"


def _run_lines(run: dict) -> List[str]:
    """The run's sizes and load. A run joined from partial re-runs (run_all
    --only) says which programs ran at which sizes and when, and takes the
    load from each program's own record where it has one."""
    progs = [p for p in run.get("programs", []) if p.get("status") != "absent"]
    sizes = {program_sizes(p) for p in progs} or {"--quick" if run.get("quick") else "full"}
    if len(sizes) == 1:
        what = f", {sizes.pop()} sizes"
    else:
        parts = [f"`{p['program']}` at {program_sizes(p)} sizes ({p.get('started', '?')})"
                 for p in progs if program_sizes(p) != "full"]
        what = "; " + ", ".join(parts) + (", the rest at full sizes" if "full" in sizes else "")
    lines = [f"| `make bench` run | {run.get('started', '?')} to {run.get('finished', '?')}"
             f"{what} |"]
    # Only a load measured before a run started tells of other work: a load
    # taken after a program includes the benchmarks' own processes.
    cores = os.cpu_count() or 1
    before = run.get("loadavg_before")
    flag = (" (LOADED: other work shared the cores)"
            if before is not None and before > 0.5 * cores else "")
    own = [p["loadavg"] for p in progs if len(p.get("loadavg", [])) == 2]
    if own:
        loads = [v for pair in own for v in pair]
        lines.append(f"| load average (1 min) | {before:.2f} before the run{flag}; "
                     f"{min(loads):.2f} to {max(loads):.2f} before and after each program "
                     "(the benchmarks' own load included) |")
    elif before is not None and run.get("loadavg_after") is not None:
        lines.append(f"| load average (1 min) | {before:.2f} before{flag}, "
                     f"{run['loadavg_after']:.2f} after (the benchmarks' own load included) |")
    return lines


def header(res: Dict[str, dict]) -> List[str]:
    run = res.get("_run", {})
    dates = sorted({r["machine"]["date"] for k, r in res.items()
                    if not k.startswith("_") and isinstance(r.get("machine"), dict)
                    and "date" in r["machine"]})
    lines = [
        "# Benchmark report",
        "",
        "Generated by `benchmarks/report.py` from `benchmarks/results/*.json` "
        "(`make bench` runs every benchmark, then this). Every figure of ours is measured here; "
        "anchors are their authors' published figures on their own hardware "
        "(`benchmarks/anchors.json`, copied from ANCHORS.md with line numbers): compare them "
        "as ratios, not as a race on equal hardware.",
        "",
        "| | |",
        "|---|---|",
        f"| report written | {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC |",
        f"| results measured | {', '.join(dates) if dates else 'no results'} |",
        f"| machine | {cpu_model()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()} |",
        f"| versions | Python {platform.python_version()}, TensorFlow {_version('tensorflow')}, "
        f"numpy {_version('numpy')}, matplotlib {_version('matplotlib')}, "
        f"phe {_version('phe')} |",
        f"| git commit | {run.get('git_commit') or _git_commit()} |",
    ]
    if run:
        lines += _run_lines(run)
    if run.get("note"):
        lines.append(f"| note | {run['note']} |")
    lines.append("")
    return lines


def status_section(res: Dict[str, dict]) -> List[str]:
    """What ran, what failed (with the end of its error output), what is absent."""
    run = res.get("_run")
    out = ["## Benchmark programs", ""]
    if not run:
        out += ["No record of a `make bench` run (results/run.json): the results below are "
                "whatever benchmarks/results/ holds, each with its own date.", ""]
    else:
        out += ["| program | arguments | sizes | started | status | seconds |",
                "|---|---|---|---|---|---|"]
        for p in run.get("programs", []):
            status = p.get("status", "?")
            if status == "failed":
                status = f"**failed** (exit {p.get('returncode')})"
            out.append(f"| `{p['program']}` | `{' '.join(p.get('args', [])) or '(defaults)'}` | "
                       f"{program_sizes(p)} | {p.get('started', '?')} | {status} | "
                       f"{p.get('seconds', 0):.0f} |")
        out.append("")
        for p in run.get("programs", []):
            # a program run by hand in parts (peers_run.py one peer at a time, --append)
            if p.get("parts"):
                out += [f"`{p['program']}` ran in parts:", ""] + \
                    [f"- {part}" for part in p["parts"]] + [""]
        for p in run.get("programs", []):
            if p.get("status") == "failed" and p.get("error_tail"):
                tail = "\n".join(p["error_tail"].splitlines()[-8:])
                out += [f"`{p['program']}` failed; the end of its output:", "", "```", tail,
                        "```", ""]
    out += ["| results file | from | measured |", "|---|---|---|"]
    for name, prog in PROGRAMS.items():
        r = res.get(name)
        if r is None:
            out.append(f"| {name} | {prog} | not run (no results file) |")
        elif "_unreadable" in r:
            out.append(f"| {r['_file']} | {prog} | unreadable: {r['_unreadable']} |")
        else:
            date = (r.get("machine") or {}).get("date", "?") if isinstance(
                r.get("machine"), dict) else "?"
            quick = " (quick sizes)" if r.get("quick") else ""
            out.append(f"| {r['_file']} | {prog} | {date}{quick} |")
    out.append("")
    return out


# ------------------------------------------------------------------ tables
COLUMNS = ["workload", "anchor (published)", "source", "ours: median (min-max)",
           "plaintext (TF; numpy for HE), same run", "peer, same run", "ours vs anchor"]


def _cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def table(rows: List[Row]) -> List[str]:
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        out.append("| " + " | ".join(_cell(c) for c in r.cells()) + " |")
    return out


def render(res: Dict[str, dict], anchors: Dict[str, dict], plots: Dict[str, str],
           out_dir: str) -> str:
    lines = header(res)
    lines += status_section(res)
    lines += ["## Results against the anchors", "",
              "Ratios: \"faster\"/\"slower\" compare times (or rates) as published and as "
              "measured; \"fewer\"/\"more bytes\" compare traffic. A ratio is given only when "
              "the workload's size equals the anchor's; \"not run\" means the benchmark that "
              "measures the row did not run (no figure is ever filled in).", ""]
    for title, rows, note in report_rows.groups(res, anchors):
        lines += [f"### {title}", ""]
        if note:
            lines += [note, ""]
        lines += table(rows) + [""]
    lines += peers_section(res)
    if plots:
        lines += ["## Plots", ""]
        for title, path in plots.items():
            rel = os.path.relpath(path, out_dir)
            lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    return "\n".join(lines) + "\n"


def peers_section(res: Dict[str, dict]) -> List[str]:
    peers = report_rows.peer_data(res)
    out = ["## Peers", ""]
    if peers is None:
        out += ["results/peers.json is absent: no peer (python-paillier, MPyC, CrypTen, SPU, "
                "TF-Encrypted) was run beside us in this run. Rows say so in their peer column.",
                ""]
        return out
    if peers["failed"]:
        out += ["| peer | why it was not measured |", "|---|---|"]
        out += [f"| {_cell(p)} | {_cell(why)} |" for p, why in peers["failed"].items()]
        out.append("")
    if peers["rows"]:
        out += ["Every row the peer driver wrote (times per call):", "",
                "| peer | protocol | workload | n | median | min-max | µs/element | max abs err | "
                "note |", "|---|---|---|---|---|---|---|---|---|"]
        for r in peers["rows"]:
            out.append("| " + " | ".join(_cell(c) for c in (
                r.get("peer", "?"), r.get("protocol", ""), r.get("workload", "?"),
                r.get("n", ""), fmt_value(r.get("median_s"), "s"),
                f"{fmt_value(r.get('min_s'), 's')}-{fmt_value(r.get('max_s'), 's')}",
                "" if r.get("us_per_element") is None else f"{r['us_per_element']:.3g}",
                "" if r.get("max_abs_error") is None else f"{r['max_abs_error']:.2g}",
                r.get("note", ""))) + " |")
        out.append("")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(HERE, "results"),
                    help="folder of the benchmark programs' JSON")
    ap.add_argument("--out", default=os.path.join(HERE, "REPORT.md"), help="report to write")
    ap.add_argument("--plots", default=None,
                    help="folder for the PNGs (default: report/ next to --out)")
    ap.add_argument("--anchors", default=os.path.join(HERE, "anchors.json"))
    args = ap.parse_args(argv)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    plot_dir = args.plots or os.path.join(out_dir, "report")
    res = load_results(args.results)
    anchors = load_anchors(args.anchors)
    import report_plots
    plots = report_plots.write_all(res, anchors, plot_dir)
    text = render(res, anchors, plots, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out} ({len(plots)} plots in {plot_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
