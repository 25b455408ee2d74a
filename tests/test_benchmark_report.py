"""benchmarks/report.py on a fixture of results JSON (tests/data/bench_results:
real tiny outputs of micro, compare, functions, converter, training and
batchcrypt_codec, a peers.json and a run.json with a failed program): rows,
ratios, "not run", the header, the failure record, the peers and the PNGs.
Runs without any peer installed and without TensorFlow being imported."""
import json
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "data", "bench_results")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import report  # noqa: E402
import report_rows  # noqa: E402


def _run(tmp_path, drop=()):
    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results)
    for name in drop:
        os.remove(results / name)
    out = tmp_path / "out" / "REPORT.md"
    assert report.main([f"--results={results}", f"--out={out}"]) == 0
    return out.read_text(), tmp_path / "out"


@pytest.fixture(scope="module")
def full_report(tmp_path_factory):
    """(text, out folder) of one report on the whole fixture, shared by the tests that
    read it (the report and its plots are written once, not once per test)."""
    return _run(tmp_path_factory.mktemp("report"))


def _row(text, start):
    lines = [ln for ln in text.splitlines() if ln.startswith(f"| {start}")]
    assert len(lines) == 1, (start, lines)
    return [c.strip() for c in lines[0].strip("|").split(" | ")]


def _ratio(better):
    """The report's wording of anchor/ours (times): 3 significant digits."""
    x = better if better >= 1 else 1 / better
    num = f"{x:.2f}" if x < 10 else f"{x:.3g}" if x < 1000 else f"{x:,.0f}"
    return f"{num}x {'faster' if better >= 1 else 'slower'}"


def test_report_rows_ratios_and_not_run(full_report):
    text, out = full_report
    anchors = json.load(open(os.path.join(ROOT, "benchmarks", "anchors.json")))["anchors"]
    micro = json.load(open(os.path.join(FIXTURE, "micro.json")))
    m = next(r for r in micro["mul"] if r["n"] == 100)

    # header: when, where, what
    for want in ("# Benchmark report", "| machine |", f"{os.cpu_count()} cores", "TensorFlow",
                 "numpy", "Python", "| git commit | 0123456789ab",
                 "`benchmarks/he.py` at --quick sizes", "`benchmarks/micro.py` at custom sizes",
                 "fixture run", "LOADED"):
        assert want in text, want

    # a throughput row: anchor with its source line, ours median (min-max), plaintext, peer
    cells = _row(text, f"multiplication throughput, 100 elements, {m['ring']}-bit")
    workload, anchor, source, ours, plain, peer, ratio = cells
    assert anchor.startswith("PrivPy 2.58 M/s") and "ANCHORS.md:10" in source
    rate = 100 / m["median_s"]
    assert ours.startswith(report_rows.fmt_value(rate, "1/s"))
    assert plain != "–"
    assert peer.startswith("mpyc (shamir 3 parties) ")          # the fixture's peer row
    slower = anchors["privpy_mul_per_s"]["value"] / rate
    assert ratio == _ratio(1 / slower)

    # a time row against TF-Encrypted, from training.json
    tr = json.load(open(os.path.join(FIXTURE, "training.json")))["per_step"][0]
    cells = _row(text, f"LR on MNIST 0-4 vs 5-9, SGD step, batch 128, {tr['ring']}-bit")
    x = 0.010 / tr["step_s"]["median_s"]
    assert cells[6] == _ratio(x)

    # rows whose benchmark did not run, or ran at another size: no number
    assert _row(text, "BatchCrypt client cost per value")[3] == "not run"
    assert _row(text, "scalar product, 200,000 binary")[3] == "not run"
    assert _row(text, "vector sum, 8,000 users")[3] == "not run"
    assert _row(text, "mul, matmul, less, LeNet-5, LR step")[3] == "not run"
    assert _row(text, f"sort 2^16 (tf.function), {tr['ring']}-bit")[3].startswith("not run")
    assert _row(text, f"FFNN 784-625-625-10, per image, batch 1000, {tr['ring']}-bit")[3] \
        .startswith("not run")
    sig = _row(text, f"sigmoid, one call of 100 elements, {tr['ring']}-bit")
    assert sig[6] == "other size: no ratio"                     # PrivPy's figure is 1 op

    # the failed program and the missing peer are reported with their reasons
    assert "**failed** (exit 1)" in text and "RuntimeError: fixture failure of he.py" in text
    assert "| tfe | not installed: no .venv-tfe (fixture) |" in text
    assert "| mpyc shamir 3 parties exp n=100 | no exp in MPyC (fixture) |" in text
    assert "tf_privpy" not in peer   # peers_run.py's rows of ours are not a peer

    # plots written, linked, non-trivial
    for png in ("time_vs_size.png", "lenet5_batch.png"):
        p = out / "report" / png
        assert p.stat().st_size > 5000, png
        assert f"](report/{png})" in text


def test_report_peer_programs(full_report):
    """The peers' sort, max, LeNet-5 and graph-build rows (issue 13) beside ours: TF-Encrypted's
    tasks at the fixture's sizes (no ratio to the 2^16 anchor), LeNet-5 per image beside PrivPy's
    LeNet-5 figure (no ratio: another architecture), the graph build beside converter.json's;
    a peer without the workload is listed with its reason."""
    text, _ = full_report
    peers = json.load(open(os.path.join(FIXTURE, "peers.json")))["rows"]
    cmp_ = json.load(open(os.path.join(FIXTURE, "compare.json")))
    conv = json.load(open(os.path.join(FIXTURE, "converter.json")))["rows"][0]
    ring, b = conv["ring"], conv["batch"]
    fmt = report_rows.fmt_value

    def peer(workload, n, per=1):
        r = next(r for r in peers if r["workload"] == workload and r["n"] == n)
        return f"{r['peer']} ({r['protocol']}) {fmt(r['median_s'] / per, 's')}"

    g = cmp_["sort_graph"][0]
    cells = _row(text, f"sort {g['n']:,} (tf.function), {ring}-bit")
    assert cells[1] == "TF-Encrypted 7.37 s" and cells[3].startswith(fmt(g["run_s"], "s"))
    assert cells[4].startswith(fmt(g["plaintext_s"]["median_s"], "s"))   # plaintext TF
    assert cells[5] == peer("sort", g["n"]) and cells[6] == "other size: no ratio"
    cells = _row(text, f"max of {g['n']:,} groups of 4, {ring}-bit")
    assert cells[1] == "TF-Encrypted 290 ms" and cells[4] != "–"
    assert cells[5] == peer("max", g["n"]) and cells[6] == "other size: no ratio"

    cells = _row(text, f"LeNet-5 (ReLU, max pooling), per image, batch 1, {ring}-bit")
    assert cells[1] == "PrivPy 1.57 s" and cells[3].startswith("not run")
    assert cells[5] == peer("lenet5", 1)
    assert report_rows.Row("w", "s", ["privpy_lenet5_sigmoid_b1"], report_rows.Measure(1.0),
                           comparable=False, differs="PrivPy's LeNet-5 is the sigmoid one",
                           anchor_table=report_rows_anchors()).ratio() == \
        "PrivPy's LeNet-5 is the sigmoid one: no ratio"
    cells = _row(text, f"LeNet-5 (ReLU, max pooling) graph build (convert + first trace), "
                       f"batch {b}, {ring}-bit")
    assert cells[3] == f"{fmt(conv['build_s'], 's')}, once" and cells[5] == peer("graph_build", b)
    assert "| crypten aby-2pc-64bit-f16 sort n=16 | CrypTen 0.4.1 has no sort" in text
    for w in ("sort", "max", "lenet5", "graph_build"):   # the peers table lists them
        assert any(ln.split(" | ")[2] == w for ln in text.splitlines()
                   if ln.startswith("| crypten | ") or ln.startswith("| mpyc | ")), w


def report_rows_anchors():
    return json.load(open(os.path.join(ROOT, "benchmarks", "anchors.json")))["anchors"]


def test_report_without_peers_or_run_record(tmp_path):
    text, _ = _run(tmp_path, drop=("peers.json", "run.json"))
    assert "results/peers.json is absent" in text
    assert "no peers.json (peers_run.py was not part of this run)" in text
    assert "No record of a `make bench` run" in text


def test_ratio_words():
    A = {"t": {"system": "X", "value": 2.0, "unit": "s", "source": {"lines": [1]}},
         "r": {"system": "X", "value": 100.0, "unit": "1/s", "source": {"lines": [1]}},
         "x": {"system": "X", "value": 23, "low": 23, "high": 93, "unit": "x",
               "source": {"lines": [1]}}}
    M = report_rows.Measure
    assert report_rows.Row("w", "s", ["t"], M(1.0), anchor_table=A).ratio() == "2.00x faster"
    assert report_rows.Row("w", "s", ["t"], M(8.0), anchor_table=A).ratio() == "4.00x slower"
    assert report_rows.Row("w", "1/s", ["r"], M(300.0), anchor_table=A).ratio() == "3.00x faster"
    assert report_rows.Row("w", "x", ["x"], M(50.0), anchor_table=A).ratio() == \
        "within the published range"
    assert report_rows.Row("w", "s", ["t"], M(1.0), comparable=False,
                           anchor_table=A).ratio() == "other size: no ratio"
    assert report_rows.Row("w", "s", ["t"], None, anchor_table=A).cells()[3] == "not run"


def test_peer_cells_of_the_other_derived_functions():
    """peers_run.py's tanh, sqrt, rsqrt and log rows (issue 14) reach the report's derived
    function rows (report_rows.peer_cell) and functions.py --peers (_peers.join) under their
    own names; a wrong answer is marked, tf_privpy's rows are not a peer's."""
    import _peers

    def peer_row(peer, protocol, workload, best, err):
        return {"peer": peer, "protocol": protocol, "workload": workload, "n": 100,
                "domain": [0.5, 50.0], "best_s": best, "median_s": best,
                "us_per_element": best * 1e4, "max_abs_error": err, "max_rel_error": err}

    fns = ("tanh", "sqrt", "rsqrt", "log")
    rows = [peer_row("spu", "ABY3", fn, 0.02, 1e-4) for fn in fns] + [
        peer_row("tf_privpy", "privpy-4pc-64", fn, 0.01, 1e-5) for fn in fns] + [
        peer_row("tfe", "aby3-64bit-f16", "log", 0.001, 8e8)]
    res = {"peers": {"rows": rows, "errors": [], "failed": []}}
    for fn in fns:
        assert report_rows.peer_cell(res, fn, 100).startswith("spu (ABY3) "), fn
        joined = _peers.join({"rows": rows}, fn, 100)
        assert [j["peer"] for j in joined] == (["tfe", "spu"] if fn == "log" else ["spu"])
    assert "tfe (aby3-64bit-f16) " in report_rows.peer_cell(res, "log", 100)
    assert "inaccurate: max abs error 8e+08" in report_rows.peer_cell(res, "log", 100)


def test_anchors_file_has_sources():
    anchors = json.load(open(os.path.join(ROOT, "benchmarks", "anchors.json")))["anchors"]
    for key, a in anchors.items():
        assert a["unit"] in ("s", "1/s", "B", "x") and a["value"] > 0, key
        # ANCHORS.md, or a seed document's own line where ANCHORS.md does not
        # copy the figure (the article's per-optimizer training table:
        # tfe_suite.py; its sort of 10^6: compare.py's scale rows)
        f = a["source"]["file"]
        assert f == "shared/ANCHORS.md" or f.startswith("shared/seeds/"), key
        assert a["source"]["lines"] and a["source"]["text"], key
        if f.startswith("shared/seeds/") and "_train_" in key:   # a training row's accuracy
            assert isinstance(a.get("accuracy"), float) and 0.5 < a["accuracy"] < 1, key


@pytest.mark.slow
def test_run_all_goes_on_past_a_failure(tmp_path, monkeypatch):
    """benchmarks/run_all.py: progress lines, a failing program recorded in
    run.json and the report, the next one still run, exit status 1."""
    import run_all
    monkeypatch.setattr(run_all, "PROGRAMS", [
        ("paillier", [], ["--no_such_flag"]),
        ("batchcrypt_codec", [], ["--values=2000", "--reps=1"]),
        ("no_such_benchmark", [], [])])
    rc = run_all.main(["--quick", f"--out={tmp_path}", f"--report={tmp_path / 'REPORT.md'}"])
    assert rc == 1
    run = json.load(open(tmp_path / "run.json"))
    assert [p["status"] for p in run["programs"]] == ["failed", "ok", "absent"]
    assert "no_such_flag" in run["programs"][0]["error_tail"]
    text = (tmp_path / "REPORT.md").read_text()
    assert "**failed** (exit 1)" in text
    assert "BatchCrypt codec alone (encode + decode), per value" in text
    assert _row(text, "BatchCrypt codec alone")[3] != "not run"


def test_header_of_a_run_joined_from_partial_reruns(tmp_path):
    """run_all --only re-runs some programs into an older run.json: the header
    says which program ran at which sizes and when, and each program's own
    load; only a load before the run flags the figures as taken under load."""
    import run_all
    full = {n: f for n, f, _ in run_all.PROGRAMS}
    quick = {n: q for n, _, q in run_all.PROGRAMS}
    run = {"started": "2026-11-26 10:42 UTC", "finished": "2026-11-26 23:50 UTC",
           "quick": False, "loadavg_before": 2.99, "loadavg_after": 0.4, "programs": [
               {"program": "benchmarks/peers_run.py", "args": quick["peers_run"],
                "status": "ok", "seconds": 473, "started": "2026-11-26 10:42 UTC"},
               {"program": "benchmarks/micro.py", "args": full["micro"], "status": "ok",
                "seconds": 19, "started": "2026-11-26 22:19 UTC", "loadavg": [0.99, 0.7]},
               {"program": "benchmarks/compare.py", "args": full["compare"], "status": "ok",
                "seconds": 900, "started": "2026-11-26 22:20 UTC", "loadavg": [0.7, 1.4]}]}
    lines = report._run_lines(run)
    assert ("`benchmarks/peers_run.py` at --quick sizes (2026-11-26 10:42 UTC), the rest at "
            "full sizes") in lines[0]
    assert "2.99 before the run" in lines[1]
    assert "0.70 to 1.40 before and after each program" in lines[1]
    # a load before the run tells of other work; the benchmarks' own load does not
    assert ("LOADED" in lines[1]) == (2.99 > 0.5 * (os.cpu_count() or 1))
    run["loadavg_before"] = 0.1
    assert "LOADED" not in report._run_lines(run)[1]
    status = "\n".join(report.status_section({"_run": run}))
    assert "| `benchmarks/micro.py` | `(defaults)` | full | 2026-11-26 22:19 UTC | ok | 19 |" \
        in status
    assert "ran in parts" not in status
    # a program run by hand one part at a time lists its parts under the table
    run["programs"][0]["parts"] = ["--peers=crypten, 00:10-00:26 UTC",
                                   "--peers=spu --noours --append, 02:02-02:35 UTC"]
    status = "\n".join(report.status_section({"_run": run}))
    assert "`benchmarks/peers_run.py` ran in parts:\n\n- --peers=crypten, 00:10-00:26 UTC\n" \
        "- --peers=spu --noours --append, 02:02-02:35 UTC\n" in status
    # a run at one size says just that
    run["programs"] = run["programs"][1:]
    assert report._run_lines(run)[0].endswith(", full sizes |")


def test_plot_series_of_the_current_functions_rows():
    """functions.py's rows of today (method leading_one, numerics mode exact,
    circuit thresholds) make one series per ring; fast-mode and other-method
    rows stay out of it (they were all dropped once: the plot showed peers only)."""
    import report_plots
    base = {"fn": "sigmoid", "threshold_bits": "circuit", "us_per_elt": 2.0,
            "median_us_per_elt": 2.5, "tf_plaintext_us_per_elt": 0.01}
    rows = [dict(base, ring=ring, n=n, method="leading_one", mode=mode)
            for ring in (128, 64) for n in (100, 10_000) for mode in ("exact", "fast")]
    rows.append(dict(base, ring=128, n=100, method="binary_search", mode="exact"))
    series = report_plots._series_ours({"functions": {"rows": rows}}, "sigmoid")
    assert sorted(series) == ["ours 128-bit", "ours 64-bit", "plaintext TF"]
    assert [p[0] for p in series["ours 128-bit"]] == [100, 10_000]
    assert series["ours 64-bit"][0][1] == 2.5e-6 * 100


def test_plot_series_of_ours_from_peers_run_where_functions_py_stops():
    """peers_run.py times ours up to 10^6 beside the peers, functions.py to
    10^5: the plot takes peers_run.py's exact-mode rows for the sizes
    functions.py lacks, as a series of their own; its fast-mode rows and the
    sizes functions.py has stay out."""
    import report_plots
    fn_rows = [{"fn": "exp", "ring": 128, "n": n, "method": "leading_one", "mode": "exact",
                "threshold_bits": "circuit", "us_per_elt": 2.0} for n in (100, 10_000)]
    ours = [{"peer": "tf_privpy", "protocol": f"privpy-4pc-128{mode}", "workload": "exp",
             "n": n, "median_s": 1.0, "best_s": 0.9} for n in (10_000, 1_000_000)
            for mode in ("", "-fast")]
    peer = {"peer": "crypten", "protocol": "aby-2pc-64bit-f16", "workload": "exp",
            "n": 1_000_000, "median_s": 0.7, "best_s": 0.6}
    series = report_plots._series_ours(
        {"functions": {"rows": fn_rows}, "peers": {"rows": ours + [peer]}}, "exp")
    assert [p[0] for p in series["ours 128-bit"]] == [100, 10_000]
    assert series["ours 128-bit (peers_run.py)"] == [(1_000_000, 1.0, 1.0, 1.0)]
    assert "crypten aby-2pc-64bit-f16" in series


def test_sort_of_a_million_rows_from_the_scale_runs():
    """compare.json["scale"] (issue 28's sort of 10^6, a process per
    measurement) becomes the run and graph-build rows beside TF-Encrypted's
    LAN figures (seed 001), a failed run a reason, other sizes nothing."""
    anchors = json.load(open(os.path.join(ROOT, "benchmarks", "anchors.json")))["anchors"]
    scale = [dict(task="sort", ring=128, n=1_000_000, mode="loop", trace_s=2.5, run_s=45.3,
                  peak_rss_mib=1270, exact=True),
             dict(task="sort", ring=128, n=1_000_000, mode="unrolled", run_s=46.1, exact=True),
             dict(task="max", ring=128, n=65536, run_s=0.059, exact=True),
             dict(task="sort", ring=64, n=1_000_000, mode="loop", error="timeout 3600s")]
    res = {"compare": {"scale": scale}}
    run, build = report_rows.sort_at_scale(res, anchors, 128)
    assert run.anchors == ["tfe_sort_1e6"] and anchors["tfe_sort_1e6"]["value"] == 117.45
    assert run.ours.median == 45.3 and "peak 1270 MiB" in run.ours.note
    assert build.anchors == ["tfe_sort_1e6_build"] and build.ours.median == 2.5
    failed, _ = report_rows.sort_at_scale(res, anchors, 64)
    assert failed.ours is None and failed.status == "failed: timeout 3600s"
    assert report_rows.sort_at_scale({"compare": {}}, anchors, 128) == []
