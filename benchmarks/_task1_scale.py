"""TF-Encrypted's task 1 at the article's scale (issue 28), for compare.py:
sort of 10^6 private values and max of 2^16 groups of 4, each measurement
in a process of its own so that its peak memory (ru_maxrss) is its own.

    python benchmarks/_task1_scale.py sort 128 1000000 loop   # one JSON line
    python benchmarks/_task1_scale.py sort 128 1000000 unrolled
    python benchmarks/_task1_scale.py max 128 65536

sort loop: tp.sort in a tf.function (the while-loop network): graph build
(trace), first call, then `reps` timed runs. sort unrolled: tp.sort eagerly
(the unrolled network: in a tf.function at 10^6 its index arrays exceed
TF's 2 GB graph limit), one run. max: tp.reduce_max over the last axis of
[groups, 4] in a tf.function, best of `reps` runs after a first call. Every
result is checked exact against numpy on the fixed-point values.
"""
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: TF-Encrypted (seed 001, the article's task 1 table; 3 machines, ABY3):
#: sort of 10^6, graph build 74.70 s, LAN 117.45 s, WAN 11,133 s; max of
#: 2^16 groups of 4 0.29 s LAN (shared/ANCHORS.md)
TFE = {"sort": {"build_s": 74.70, "lan_s": 117.45, "wan_s": 11133.0},
       "max": {"lan_s": 0.29}}
#: issue 28's targets (2 cores): sort 10^6 <= TF-Encrypted's LAN figure,
#: max of 2^16 groups of 4 <= 0.15 s
TARGETS = {"sort": 117.0, "max": 0.15}
#: the sizes those figures are for (other sizes print none)
SIZES = {"sort": 1_000_000, "max": 65536}


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(task: str, ring: int, n: int, mode: str = "loop", reps: int = 1) -> dict:
    """One measurement in this process (see the module doc)."""
    import numpy as np
    import tensorflow as tf
    import tf_privpy as tp
    tp.init(tp.Config(ring_bits=ring))
    f = tp.get_runtime().config.frac_bits
    rng = np.random.default_rng(0)
    shape = (n,) if task == "sort" else (n, 4)
    x = np.round(rng.uniform(-100, 100, shape) * 2.0 ** f) / 2.0 ** f
    v = tp.share(x)
    base = _peak_mib()
    out = {"task": task, "ring": ring, "n": n, "mode": mode, "load_before": os.getloadavg()}
    if task == "sort" and mode == "unrolled":
        t = time.perf_counter()
        got = tp.sort(v)
        got.share0.numpy()
        out.update(run_s=time.perf_counter() - t, runs=1)
        want = np.sort(x)
    else:
        fn = tf.function((lambda a: tp.sort(a)) if task == "sort"
                         else (lambda a: tp.reduce_max(a, axis=1)))
        t = time.perf_counter()
        fn.get_concrete_function(v)
        out["trace_s"] = time.perf_counter() - t
        t = time.perf_counter()
        got = fn(v)
        got.share0.numpy()
        out["first_call_s"] = time.perf_counter() - t
        runs = []
        for _ in range(reps):
            t = time.perf_counter()
            got = fn(v)
            got.share0.numpy()
            runs.append(time.perf_counter() - t)
        out.update(run_s=min(runs) if runs else out["first_call_s"], runs=len(runs),
                   run_all_s=runs)
        want = np.sort(x) if task == "sort" else x.max(axis=1)
    out["peak_rss_mib"] = _peak_mib()
    out["rss_before_mib"] = base
    out["load"] = os.getloadavg()
    out["exact"] = bool(np.array_equal(got.reveal().numpy(), want))
    return out


def measure(task: str, ring: int, n: int, mode: str = "loop", reps: int = 1,
            timeout: float = 3600) -> dict:
    """`child` in a subprocess; its JSON, or {"error": ...}."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    cmd = [sys.executable, os.path.abspath(__file__), task, str(ring), str(n), mode, str(reps)]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"task": task, "ring": ring, "n": n, "mode": mode, "error": f"timeout {timeout}s"}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or not lines:
        return {"task": task, "ring": ring, "n": n, "mode": mode,
                "error": (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]}
    return json.loads(lines[-1])


def rows(results) -> list:
    """Table rows: ring, task, build s, run s, peak MiB, target, TF-Encrypted
    LAN, the 1-minute load average after the run."""
    out = []
    for r in results:
        name = (f"sort {r['n']:,} ({r['mode']})" if r["task"] == "sort"
                else f"max of {r['n']:,} groups of 4")
        if "error" in r:
            out.append([r["ring"], name, "-", "failed: " + r["error"][:60], "-", "-", "-", "-"])
            continue
        tfe, same = TFE[r["task"]], r["n"] == SIZES[r["task"]]
        out.append([r["ring"], name, f"{r['trace_s']:.2f}" if "trace_s" in r else "-",
                    f"{r['run_s']:.3f}" + ("" if r["exact"] else " (NOT EXACT)"),
                    f"{r['peak_rss_mib']:.0f}", f"<= {TARGETS[r['task']]}" if same else "-",
                    ("-" if not same else f"{tfe['lan_s']} (build {tfe['build_s']})"
                     if "build_s" in tfe else f"{tfe['lan_s']}"), f"{r['load'][0]:.1f}"])
    return out


if __name__ == "__main__":
    a = sys.argv[1:]
    print(json.dumps(child(a[0], int(a[1]), int(a[2]), a[3] if len(a) > 3 else "loop",
                           int(a[4]) if len(a) > 4 else 1)), flush=True)
