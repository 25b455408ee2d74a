"""`make bench`: every benchmark program in turn with its progress shown, then
one report (benchmarks/report.py -> benchmarks/REPORT.md and its plots).

A program that fails does not stop the others: its exit status and the end
of its output go to results/run.json, and the report shows them. The exit
status is 1 when any program failed (after the report is written), so CI sees it.

    python benchmarks/run_all.py                    # full sizes (an hour or more on 2 cores)
    python benchmarks/run_all.py --quick            # reduced sizes (about 15-25 minutes)
    python benchmarks/run_all.py --only=micro,compare --quick
    python benchmarks/run_all.py --note="machine shared with other jobs"
"""
import argparse
import datetime
import glob
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: (name, full-size arguments, --quick arguments). Quick sizes keep every
#: row's anchor size where it is affordable (10^4 elements, batch 128, 2^16
#: max) and cut the repetitions and the largest sizes.
PROGRAMS = [
    # the peer driver first (CrypTen, SPU, TF-Encrypted, MPyC in benchmark-only venvs, a
    # peer that is not installed recorded with the reason): functions.py prints and records
    # its results/peers.json beside ours
    # full: the time-against-size plots' 10^2..10^6 (MPyC to --mpyc_max_n); quick: 10^4, and
    # 900 s per peer so TF-Encrypted's minute-long LeNet-5 builds and MPyC's sort finish
    ("peers_run", ["--sizes=100,10000,100000,1000000"],
     ["--sizes=10000", "--reps=3", "--timeout=900"]),
    ("micro", [], ["--mul_n=1,100,10000,100000", "--sizes=256,512", "--reps=3",
                   "--share_mib=2", "--share_clients=8"]),
    ("compare", [], ["--sizes=100,1000,10000,100000", "--reps=3", "--sort_sizes=1024",
                     "--sort_graph_sizes=1024,65536", "--max_groups=1024,65536",
                     "--scale_sort_sizes="]),
    ("functions", [], ["--sizes=100,10000", "--reps=3"]),
    ("converter", [], ["--batches=1,10,100", "--reps=2", "--models=ffnn,lenet5,lenet5_sigmoid"]),
    # networks B and C take tens of seconds a step: one timed step each when quick
    ("training", [], ["--lr_batches=1,10,100,1000", "--reps=1"]),
    # TF-Encrypted's training table (issue 28): every model x optimizer timed, LR and network
    # A trained 100 steps for accuracy beside plaintext Keras (about 20 minutes on 2 loaded
    # cores); quick: LR, A and D, one timed step each, LR trained 50 steps (about 3 minutes:
    # B's and C's tracing steps take 30-60 s each). --full, the article's 5 epochs, takes
    # hours on 2 cores and is not in `make bench`.
    ("tfe_suite", [], ["--models=lr,network_a,network_d", "--reps=1", "--train_models=lr",
                       "--train_steps=50"]),
    # PrivPy's Table 4 (issue 29): LR, k-means and MF on Adult, CreditCard and Movielens
    # stand-ins (Movielens-1M's 6040 x 3952 ratings in a tp.LargeArray) at batch 1-1000;
    # quick: batches 1 and 10, Movielens' first 10 rows
    ("privpy_table4", [], ["--quick"]),
    ("he", [], ["--quick"]),
    ("paillier", [], ["--bits=2048", "--n=64", "--scalar_n=20000", "--users=800"]),
    ("batchcrypt_codec", [], ["--values=100000", "--reps=3"]),
    # issue 30: one federated round, plaintext FedAvg / BatchCrypt / mpc backends of
    # tp.federated.convert at 3, 10, 100 clients x 10^5, 10^6 values: about 17 minutes on 2
    # idle cores, every cell but BatchCrypt at 100 x 10^6 (over an hour a round: listed as not
    # run, past --budget_s); quick: 3 and 10 clients at 10^5
    ("federated", ["--he_rounds=1", "--budget_s=1500"],
     ["--clients=3,10", "--params=100000", "--rounds=2", "--he_rounds=1"]),
    # the comparison families side by side, embedded, both rings (issue 26)
    ("comparisons", [], ["--reps=1"]),
    # full sizes (--quick's are too small to compare), the two settings that need no root
    ("distributed", [], ["--parts=embedded,loopback", "--reps=3", "--budget_s=10"]),
    ("aead_gcm", [], ["--runs=3", "--sizes=1,16"]),
]
#: results files a program writes, when not NAME.json / NAME_*.json
OUTPUTS = {"peers_run": ["peers.json"], "paillier": ["paillier_*t.json"]}


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def run_one(i: int, total: int, name: str, args: list, out_dir: str, timeout: float) -> dict:
    """Runs benchmarks/NAME.py with its output shown as it comes (and kept
    in results/logs/NAME.log); returns its record for run.json."""
    path = os.path.join(HERE, f"{name}.py")
    rel = os.path.relpath(path, ROOT)
    rec = {"program": rel, "args": args, "status": "absent", "seconds": 0.0,
           "started": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
           # each program's own load: a report joined from partial re-runs
           # (--only) must not show one run's load for another's figures
           "loadavg": [os.getloadavg()[0]]}
    if not os.path.exists(path):
        print(f"[{i}/{total}] {rel}: not in this checkout, skipped", flush=True)
        return rec
    print(f"\n[{i}/{total}] {rel} {' '.join(args)}", flush=True)
    # its results from an earlier run go first: a failed run must show as
    # failed in the report, not as the old figures
    for pattern in OUTPUTS.get(name, [f"{name}.json", f"{name}_*.json"]):
        for old in glob.glob(os.path.join(out_dir, pattern)):
            os.remove(old)
    os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    log_path = os.path.join(out_dir, "logs", f"{name}.log")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"),
               PYTHONUNBUFFERED="1")
    t0 = time.monotonic()
    tail = []
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, path, *args, f"--out={out_dir}"], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, start_new_session=True)
        try:
            for line in proc.stdout:
                sys.stdout.write(f"  {line}")
                log.write(line)
                tail = (tail + [line.rstrip("\n")])[-40:]
                if timeout and time.monotonic() - t0 > timeout:
                    raise subprocess.TimeoutExpired(proc.args, timeout)
            rc = proc.wait()
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            # the whole process group: a program's own children (peers_run.py's
            # runners) must not outlive it; the programs stop their servers on SIGTERM
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            if isinstance(e, KeyboardInterrupt):
                raise
            rc = "timeout"
            tail.append(f"stopped after {timeout:.0f} s (--timeout)")
    rec.update(seconds=time.monotonic() - t0, returncode=rc, log=os.path.relpath(log_path, HERE),
               status="ok" if rc == 0 else "failed")
    rec["loadavg"].append(os.getloadavg()[0])
    if rc != 0:
        rec["error_tail"] = "\n".join(tail[-15:])
        print(f"[{i}/{total}] {rel} FAILED (exit {rc}) after {rec['seconds']:.0f} s; "
              f"going on. Log: {log_path}", flush=True)
    else:
        print(f"[{i}/{total}] {rel} done in {rec['seconds']:.0f} s", flush=True)
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced sizes (see PROGRAMS)")
    ap.add_argument("--only", default="", help="comma-separated program names to run")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="results folder")
    ap.add_argument("--report", default=os.path.join(HERE, "REPORT.md"), help="report to write")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per program (0: none)")
    ap.add_argument("--note", default="", help="a line for the report's header")
    args = ap.parse_args(argv)
    names = [p[0] for p in PROGRAMS]
    only = [s for s in args.only.split(",") if s]
    unknown = sorted(set(only) - set(names))
    if unknown:
        ap.error(f"--only: unknown {unknown}; choose from {names}")
    chosen = [p for p in PROGRAMS if not only or p[0] in only]
    os.makedirs(args.out, exist_ok=True)
    run = {"started": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
           "quick": args.quick, "git_commit": _git_commit(), "note": args.note,
           "loadavg_before": os.getloadavg()[0], "programs": []}
    run_path = os.path.join(args.out, "run.json")
    if only and os.path.exists(run_path):
        # a partial re-run keeps the record of the programs it does not run
        with open(run_path) as f:
            before = json.load(f)
        run["programs"] = [p for p in before.get("programs", [])
                           if os.path.basename(p["program"])[:-3] not in only]
        run["started"] = before.get("started", run["started"])
        run["loadavg_before"] = before.get("loadavg_before", run["loadavg_before"])

    def on_term(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, on_term)
    interrupted = False
    for i, (name, full, quick) in enumerate(chosen, 1):
        try:
            run["programs"].append(run_one(i, len(chosen), name, quick if args.quick else full,
                                           args.out, args.timeout))
        except KeyboardInterrupt:
            # the report is still written: what ran is shown, the rest is "not run"
            run["programs"].append({"program": f"benchmarks/{name}.py", "status": "interrupted",
                                    "args": quick if args.quick else full, "seconds": 0.0})
            interrupted = True
        with open(run_path, "w") as f:   # kept current: an interrupted run still reports
            json.dump(run, f, indent=1)
        if interrupted:
            break
    run["finished"] = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    run["loadavg_after"] = os.getloadavg()[0]
    with open(run_path, "w") as f:
        json.dump(run, f, indent=1)
    print(f"\n[report] benchmarks/report.py -> {args.report}", flush=True)
    sys.path.insert(0, HERE)
    import report
    report.main([f"--results={args.out}", f"--out={args.report}"])
    failed = [p["program"] for p in run["programs"] if p["status"] == "failed"]
    if interrupted:
        print("interrupted: the report covers the programs that ran")
        return 130
    if failed:
        print(f"failed: {', '.join(failed)} (see the report's 'Benchmark programs' section)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
