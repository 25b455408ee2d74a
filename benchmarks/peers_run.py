"""The peers beside tf_privpy, in one run, on the same machine, workloads and inputs (issues 13
and 14): each peer's runner (benchmarks/peers/NAME_run.py) runs with the python of its own
benchmark venv (`make bench-venv-peers`; never a dependency of tf_privpy), then tf_privpy's
runner with ours, and the rows go to one table, benchmarks/results/peers.json and peers.png.

    python benchmarks/peers_run.py                         # what `make bench` runs
    python benchmarks/peers_run.py --sizes=100000 --reps=3 --peers=crypten,spu
    python benchmarks/peers_run.py --sizes=100 --reps=1    # smoke size

Whole programs too (issue 13): sort (1024 and 2^16 values, up to the largest --sizes), max of
groups of 4 (TF-Encrypted's task; as many groups), LeNet-5 inference at each --batches size on
the same numpy weights (tf_privpy.models.lenet5's layers) and its graph build (convert, compile
or construction) at the first. A runner writes its rows after every workload, so one stopped
by --timeout keeps the workloads it finished.

Processes against processes (issue 26): tf_privpy's runner also runs once per ring of
--ours_processes with four server processes on loopback (protocol privpy-4proc-BITS: the
multiplication, comparison, ReLU and sigmoid rows), and a last table sets those beside SPU's
"-processes" rows and CrypTen's two processes, same workload and size, with the peer's time
over ours against the 1.5x target (results/peers.json's "race").

A Vision Transformer (issue 27, workload vit): tf_privpy.models.vit() trained on the shipped
MNIST digits, its weights and the first held-out digits exported once per run
(benchmarks/peers/vit_export.py, or --vit_npz) for every runner, at each --vit_batches size.
SPU runs the same network in jax.numpy; a last table sets ours beside it per image, embedded
against SPU's simulator and our four server processes against SPU's party processes, with
both max logit errors against float64 and the predicted digits' agreement, against the 2x
target (results/peers.json's "vit_race"). The other peers record it as not written for them.

    python benchmarks/peers_run.py --peers=spu --workloads=vit --reps=3

Peers: CrypTen (2 processes, its run_multiprocess launcher), SPU (simulator, SEMI2K and ABY3),
TF-Encrypted (ABY3, 3 players in one TF process), MPyC (3 processes over TCP). A peer whose venv
is missing or did not build is recorded as "not installed" with the reason; one whose runner
fails as "failed" with its error output; a workload a peer lacks, in that peer's "errors".
Errors of every row are against numpy float64 on the same inputs.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))
import _common  # noqa: E402

# name -> (venv folder, runner, extra arguments, what installs it)
PEERS = {
    "crypten": (".venv-crypten", "crypten_run.py", [], "make bench-venv-crypten"),
    "spu": (".venv-spu", "spu_run.py", [], "make bench-venv-spu"),
    "tfe": (".venv-tfe", "tfe_run.py", [], "make bench-venv-tfe"),
    "mpyc": (".venv-mpyc", "mpyc_run.py", [], "make bench-venv-mpyc"),
}
ROW_KEYS = ("peer", "protocol", "workload", "n", "domain", "best_s", "median_s", "min_s",
            "max_s", "us_per_element", "max_abs_error", "max_rel_error", "argmax_agreement",
            "reps", "versions", "note")

flags.DEFINE_list("peers", list(PEERS), "peers to run")
flags.DEFINE_list("sizes", ["10000", "100000"],
                  "elements per call (matmul: 128x128 always; lr_step: batch 128 x 784)")
flags.DEFINE_list("workloads", _common.ORDER, "workloads")
flags.DEFINE_list("batches", [str(b) for b in _common.LENET5_BATCHES],
                  "LeNet-5's batch sizes (lenet5; graph_build: the first)")
flags.DEFINE_list("vit_batches", [str(b) for b in _common.VIT_BATCHES],
                  "the ViT's batch sizes (vit)")
flags.DEFINE_string("vit_npz", "",
                    "the ViT's weights and digits (benchmarks/peers/vit_export.py's .npz); "
                    "empty: exported for this run, from the trained model")
flags.DEFINE_bool("vit_untrained", False,
                  "export the ViT untrained (seeded initialisation: no training; the smoke "
                  "test)")
flags.DEFINE_integer("reps", 3, "timed calls after a warm-up (best, median, min, max kept)")
flags.DEFINE_integer("mpyc_max_n", 10_000,
                     "largest size for MPyC (pure Python: about 1 ms per product here)")
flags.DEFINE_integer("timeout", 1800, "seconds per peer before it is recorded as failed")
flags.DEFINE_bool("ours", True, "run tf_privpy's runner too (both rings)")
flags.DEFINE_list("ours_processes", ["128", "64"],
                  "rings of tf_privpy's four-process rows (privpy-4proc-BITS: four server "
                  "processes on loopback, each ring a runner of its own; empty: none)")
flags.DEFINE_list("ours_protocols", [],
                  "tf_privpy's protocols (default: its runner's four, both rings, exact "
                  "and fast); the smoke test runs one")
flags.DEFINE_bool("append", False,
                  "keep the rows and status of peers not run now from an existing peers.json "
                  "(a peer run later, e.g. after its venv was built)")
flags.DEFINE_string("venv_root", ROOT, "folder holding the peers' .venv-NAME folders")
flags.DEFINE_string("out", os.path.join(HERE, "results"), "folder for peers.json and peers.png")
F = flags.FLAGS


def _tail(text, n=3):
    lines = [ln for ln in text.strip().splitlines()
             if ln.strip() and not ln.startswith("WARNING: Location")]
    return " | ".join(lines[-n:])[-600:]


def venv_status(name):
    """(python, None) when the peer's venv is built, else (None, why not)."""
    venv, _, _, make = PEERS[name]
    d = os.path.join(F.venv_root, venv)
    py = os.path.join(d, "bin", "python")
    if not os.path.exists(py):
        return None, f"no {venv} ({make} builds it; `make bench` tries)"
    if not os.path.exists(os.path.join(d, ".installed")):
        log = os.path.join(F.venv_root, venv + ".log")
        last = _tail(open(log, errors="replace").read()) if os.path.exists(log) else ""
        return None, f"{make} did not finish" + (f": {last}" if last else "")
    return py, None


def export_vit(tmp):
    """The ViT workload's .npz (issue 27): --vit_npz, else written now by vit_export.py with
    this python (ours: it needs TensorFlow), then read by every runner with numpy."""
    if F.vit_npz:
        return F.vit_npz
    path = os.path.join(tmp, "vit.npz")
    cmd = [sys.executable, os.path.join(HERE, "peers", "vit_export.py"), f"--out={path}",
           f"--digits={max(int(b) for b in F.vit_batches)}"] + (
        ["--untrained"] if F.vit_untrained else [])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"vit_export.py failed (exit {r.returncode}): "
                         f"{_tail(r.stderr or r.stdout, 6)}")
    print(r.stdout.strip(), flush=True)
    return path


def run_runner(name, py, runner, extra, sizes, tmp, vit_npz=""):
    rows_file = os.path.join(tmp, f"{name}.json")
    cmd = [py, os.path.join(HERE, "peers", runner), f"--sizes={','.join(map(str, sizes))}",
           f"--workloads={','.join(F.workloads)}", f"--reps={F.reps}",
           f"--rows={rows_file}", f"--batches={','.join(F.batches)}",
           f"--vit_batches={','.join(F.vit_batches)}", f"--vit_npz={vit_npz}", *extra]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    t0 = time.perf_counter()
    print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=F.timeout,
                           cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        why = f"timed out after {F.timeout} s: {_tail((e.stderr or b'').decode())}"
        if not os.path.exists(rows_file):
            return None, why
        out = json.load(open(rows_file))  # written after every workload: those rows stay
        out["errors"].append({"peer": name, "protocol": "", "workload": "(the rest)", "n": 0,
                              "reason": f"{why} (the workloads done before are kept)"})
        return out, None
    sys.stdout.write("".join(ln + "\n" for ln in r.stdout.splitlines()
                             if ln.startswith(name) or ln.startswith("tf_privpy")))
    print(f"   ({time.perf_counter() - t0:.0f} s)", flush=True)
    if r.returncode != 0 or not os.path.exists(rows_file):
        return None, f"exit {r.returncode}: {_tail(r.stderr or r.stdout, 4)}"
    return json.load(open(rows_file)), None


#: issue 26: ours in processes at least this much faster than each peer in processes
RACE_TARGET = 1.5
#: (workload, our protocol, the peers' protocols in processes): the 128-bit
#: multiplication races the peers' 64-bit ones (issue 26's transport target)
RACE = (("comparison", "privpy-4proc-128"), ("relu", "privpy-4proc-128"),
        ("mul", "privpy-4proc-128"), ("comparison", "privpy-4proc-64"),
        ("relu", "privpy-4proc-64"), ("mul", "privpy-4proc-64"))
RACE_PEERS = (("spu", "SEMI2K-processes"), ("spu", "ABY3-processes"),
              ("crypten", "aby-2pc-64bit-f16"))


def race(rows: list) -> list:
    """The processes-against-processes rows: for each workload and size where
    tf_privpy's four-process row and a peer's processes row were both
    measured in this run, the peer's best time over ours."""
    best = {(r["peer"], r["protocol"], r["workload"], r["n"]): r["best_s"] for r in rows}
    out = []
    for workload, ours in RACE:
        for n in sorted({r["n"] for r in rows if r["workload"] == workload}):
            o = best.get(("tf_privpy", ours, workload, n))
            if o is None:
                continue
            for peer, protocol in RACE_PEERS:
                t = best.get((peer, protocol, workload, n))
                if t is not None:
                    out.append({"workload": workload, "n": n, "ours": ours, "ours_s": o,
                                "peer": f"{peer} {protocol}", "peer_s": t, "x": t / o,
                                "met": t / o >= RACE_TARGET})
    return out


#: issue 27: the ViT per image at least this much faster than SPU's, with a
#: logit error at or below SPU's: embedded against SPU's simulator, our four
#: server processes against SPU's party processes
VIT_TARGET = 2.0
VIT_RACE = (("embedded", ("privpy-4pc-128", "privpy-4pc-64"), ("SEMI2K", "ABY3")),
            ("processes", ("privpy-4proc-128", "privpy-4proc-64"),
             ("SEMI2K-processes", "ABY3-processes")))


def vit_race(rows: list) -> list:
    """The ViT rows of issue 27: for each batch and each pair (ours, SPU's) of
    VIT_RACE measured in this run, the time per image of both, SPU's over
    ours, both max logit errors against float64 and arg-max agreements; met
    when SPU's time is at least VIT_TARGET times ours and our error at most
    SPU's."""
    got = {(r["peer"], r["protocol"], r["n"]): r for r in rows if r["workload"] == "vit"}
    out = []
    for mode, ours, theirs in VIT_RACE:
        for n in sorted({r["n"] for r in rows if r["workload"] == "vit"}):
            for o in ours:
                a = got.get(("tf_privpy", o, n))
                for t in theirs:
                    b = got.get(("spu", t, n))
                    if a is None or b is None:
                        continue
                    x = b["best_s"] / a["best_s"]
                    out.append({"mode": mode, "n": n, "ours": o, "peer": f"spu {t}",
                                "ours_s_per_image": a["best_s"] / n,
                                "peer_s_per_image": b["best_s"] / n, "x": x,
                                "ours_error": a["max_abs_error"],
                                "peer_error": b["max_abs_error"],
                                "ours_agreement": a.get("argmax_agreement"),
                                "peer_agreement": b.get("argmax_agreement"),
                                "met": x >= VIT_TARGET and
                                a["max_abs_error"] <= b["max_abs_error"]})
    return out


def main(argv):
    del argv
    sys.path.insert(0, HERE)
    from _report import bar_png, machine, print_table, write_json
    sizes = [int(s) for s in F.sizes]
    res = {"machine": machine(), "sizes": sizes, "reps": F.reps, "workloads": F.workloads,
           "peers": {}, "rows": [], "errors": [], "failed": []}
    todo = [(p, PEERS[p]) for p in F.peers]
    if F.ours:
        ours_args = [f"--protocols={','.join(F.ours_protocols)}"] if F.ours_protocols else []
        todo.append(("tf_privpy", (None, "tf_privpy_run.py", ours_args, None)))
        # processes against processes (issue 26): a runner per ring, since a
        # process that joined a cluster cannot go back to the embedded mode
        for bits in F.ours_processes:
            todo.append((f"tf_privpy-4proc-{bits}", (
                None, "tf_privpy_run.py", [f"--protocols=privpy-4proc-{bits}"], None)))
    with tempfile.TemporaryDirectory() as tmp:
        vit_npz = export_vit(tmp) if "vit" in F.workloads else ""
        for name, (_, runner, extra, _) in todo:
            if name.startswith("tf_privpy"):
                py, why = sys.executable, None
            else:
                py, why = venv_status(name)
            if why:
                res["peers"][name] = {"status": "not installed", "reason": why}
                res["failed"].append({"peer": name, "status": "not installed", "reason": why})
                print(f"== {name}: not installed: {why}", flush=True)
                continue
            psizes = [n for n in sizes if name != "mpyc" or n <= F.mpyc_max_n] or \
                [min(sizes + [F.mpyc_max_n])]
            out, why = run_runner(name, py, runner, extra, psizes, tmp, vit_npz)
            if why:
                res["peers"][name] = {"status": "failed", "reason": why}
                res["failed"].append({"peer": name, "status": "failed", "reason": why})
                print(f"== {name}: failed: {why}", flush=True)
                continue
            res["peers"][name] = {"status": "ok", "versions": out["versions"],
                                  "sizes": psizes, "workloads_failed": len(out["errors"])}
            res["rows"] += [{k: r.get(k) for k in ROW_KEYS} for r in out["rows"]]
            res["errors"] += [{k: v for k, v in e.items() if k != "trace"}
                              for e in out["errors"]]
    old_path = os.path.join(F.out, "peers.json")
    if F.append and os.path.exists(old_path):
        old = json.load(open(old_path))
        ran = {name for name, _ in todo}
        # a peer run now replaces its old rows of the workloads run now only
        keep = lambda r: r["peer"] not in ran or r["workload"] not in F.workloads  # noqa: E731
        for name, st in old.get("peers", {}).items():
            if name not in ran:
                res["peers"][name] = dict(st, appended_from=old["machine"].get("date"))
        res["rows"] += [r for r in old.get("rows", []) if keep(r)]
        res["errors"] += [e for e in old.get("errors", []) if keep(e)]
        res["failed"] += [f for f in old.get("failed", []) if f["peer"] not in ran]
    ours = {}
    for r in res["rows"]:
        if r["peer"] == "tf_privpy":
            k = (r["workload"], r["n"])
            ours[k] = min(ours.get(k, float("inf")), r["best_s"])
    for r in res["rows"]:
        o = ours.get((r["workload"], r["n"]))
        r["time_vs_tf_privpy"] = (r["best_s"] / o) if o else None
    order = {w: i for i, w in enumerate(_common.ORDER)}
    res["rows"].sort(key=lambda r: (order.get(r["workload"], 99), r["n"], r["best_s"]))
    print_table(f"Peers beside tf_privpy, same machine and inputs, best of {F.reps} "
                f"({os.cpu_count()} cores; x: time over tf_privpy's fastest protocol)",
                ["workload", "n", "peer", "protocol", "best ms", "median ms", "µs/el",
                 "max abs err", "max rel err", "x"],
                [[r["workload"], f"{r['n']:,}", r["peer"], r["protocol"],
                  f"{r['best_s'] * 1e3:.2f}", f"{r['median_s'] * 1e3:.2f}",
                  f"{r['us_per_element']:.3f}", f"{r['max_abs_error']:.2e}",
                  f"{r['max_rel_error']:.2e}",
                  "" if r["time_vs_tf_privpy"] is None else f"{r['time_vs_tf_privpy']:.2f}"]
                 for r in res["rows"]])
    if res["failed"] or res["errors"]:
        print("\nNot measured:")
        for f in res["failed"]:
            print(f"  {f['peer']}: {f['status']}: {f['reason']}")
        for e in res["errors"]:
            print(f"  {e['peer']} {e['protocol']} {e['workload']} n={e['n']}: {e['reason']}")
    res["race"] = race(res["rows"])
    if res["race"]:
        print_table("Processes against processes (issue 26): tf_privpy's four server processes "
                    "on loopback beside the peers' own processes, same run; x: the peer's best "
                    f"time over ours (target {RACE_TARGET}x)",
                    ["workload", "n", "ours", "ours best ms", "peer", "peer best ms", "x",
                     "target met"],
                    [[r["workload"], f"{r['n']:,}", r["ours"], f"{r['ours_s'] * 1e3:.1f}",
                      r["peer"], f"{r['peer_s'] * 1e3:.1f}", f"{r['x']:.2f}",
                      "yes" if r["met"] else "no"] for r in res["race"]])
    res["vit_race"] = vit_race(res["rows"])
    if res["vit_race"]:
        pct = lambda v: "" if v is None else f"{v:.0%}"  # noqa: E731
        print_table("The ViT (issue 27): per image, embedded against SPU's simulator and our "
                    "four server processes against SPU's party processes, same run, weights "
                    f"and digits; x: SPU's time over ours (target {VIT_TARGET}x, with our max "
                    "logit error at most SPU's; errors against numpy float64)",
                    ["mode", "batch", "ours", "ours s/image", "peer", "peer s/image", "x",
                     "ours err", "peer err", "ours argmax", "peer argmax", "target met"],
                    [[r["mode"], r["n"], r["ours"], f"{r['ours_s_per_image']:.4f}", r["peer"],
                      f"{r['peer_s_per_image']:.4f}", f"{r['x']:.1f}",
                      f"{r['ours_error']:.1e}", f"{r['peer_error']:.1e}",
                      pct(r["ours_agreement"]), pct(r["peer_agreement"]),
                      "yes" if r["met"] else "no"] for r in res["vit_race"]])
    write_json(os.path.join(F.out, "peers.json"), res)
    big = max(sizes)
    series = {}
    for r in res["rows"]:
        if r["n"] == big or r["workload"] in _common.FIXED:
            series.setdefault(f"{r['peer']} {r['protocol']}", {})[r["workload"]] = \
                r["us_per_element"]
    labels = [w for w in F.workloads if any(w in s for s in series.values())]
    if labels:
        bar_png(os.path.join(F.out, "peers.png"),
                f"µs per element at n={big:,} (matmul 128x128), same machine, best of {F.reps}",
                labels, {k: [v.get(w, 0) for w in labels] for k, v in series.items()},
                "µs per element (log)", legend_outside=True)


if __name__ == "__main__":
    app.run(main)
