"""PrivPy's Table 4 (seed 000, §7.3.1): ms per training instance of logistic
regression (SGD), k-means and matrix factorization on Adult, CreditCard and
Movielens at batch 1 / 10 / 100 / 1000, ours embedded (four servers as TF
devices on this machine) beside PrivPy's figures (4 servers of 8 vCPUs,
1 GbE) and float64 NumPy on the same batches in the same run, with each
cell's peak memory.

One step is one iteration of the algorithm on a batch of b private
instances (tp.models.logistic_regression_sgd: one SGD step; tp.models.kmeans:
one Lloyd iteration, k clusters; tp.models.matrix_factorization: one
gradient step of Fig. 4 on the batch's rows); ms per instance = the median
step / b, after a first (tracing) step. Movielens' ratings live in a
tp.LargeArray ([6040, 3952], 4.19 % rated, as PrivPy's §7.3.1), and a step
reads its batch's rows from S1's and S2's disks (counted in its time).

Memory: each cell records the process's peak RSS (VmHWM, reset before the
cell: the private steps, their first trace included; the plaintext runs
after the reading) and that peak above the RSS at the cell's start; a
Movielens cell also above Movielens' baseline, the RSS before its
share_to_disk (TF, the runtime, earlier data sets' traces). Beside the
table, one Fig. 4 full step over the whole Movielens LargeArray (batch_rows
= 6040, streamed block by block: tp.models.matrix_factorization never holds
the matrix or a batch of it), its peak next to the size of the matrix's
shares and MOVIELENS_BOUND_MIB ("movielens_full_pass" and "movielens_memory"
in the JSON; the bound is checked when MF runs alone: --datasets movielens
--algorithms mf).

Data: no registry package ships Adult, CreditCard or Movielens-1M in its
wheel (adult-dataset downloads at run time), so each is a generated stand-in
of the real set's shape and sparsity (printed in the table's title and the
JSON): Adult one-hot encoded as LIBSVM's a9a (123 binary features, 14 ones a
row), CreditCard as UCI's default-of-credit-card-clients (23 numeric
features, standardized), Movielens-1M as 6040 users x 3952 movies with
1,000,209 ratings (1-5). The seed's text lost the dimensions, k and the
factor count in extraction: k = 5 and f = 10 here (flags).

    python benchmarks/privpy_table4.py                 # the full table (about 10 min, 2 cores)
    python benchmarks/privpy_table4.py --quick         # batches 1 and 10, Movielens' first rows

Results go to benchmarks/results/privpy_table4.json.
"""
import os
import shutil
import tempfile
import time

from absl import app, flags

import tf_privpy as tp

flags.DEFINE_list("batches", ["1", "10", "100", "1000"], "batch sizes")
flags.DEFINE_list("algorithms", ["lr", "kmeans", "mf"], "lr, kmeans, mf")
flags.DEFINE_list("datasets", ["adult", "creditcard", "movielens"], "the data sets")
flags.DEFINE_integer("reps", 3, "timed steps per cell after the tracing step (median)")
flags.DEFINE_integer("ring", 128, "ring bits (128: PrivPy's precision)")
flags.DEFINE_integer("clusters", 5, "k-means' k")
flags.DEFINE_integer("factors", 10, "matrix factorization's f")
flags.DEFINE_integer("movielens_rows", 6040, "users in the Movielens stand-in's LargeArray")
flags.DEFINE_bool("movielens_full", True, "one MF step over all of Movielens' rows, with "
                  "its peak memory beside the shares' size")
flags.DEFINE_bool("quick", False, "batches 1 and 10, one timed step, Movielens' first 10 rows")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for privpy_table4.json")
F = flags.FLAGS

#: PrivPy Table 4 (seed 000, §7.3.1), ms per instance: {(algorithm, data set): by batch 1/10/100/1000}
PRIVPY_MS = {
    ("lr", "adult"): (80, 11, 3.7, 2.5), ("lr", "creditcard"): (70, 9, 2.3, 1.39),
    ("lr", "movielens"): (190, 79, 62.3, 74.4),
    ("kmeans", "adult"): (150, 23, 12.2, 9.37), ("kmeans", "creditcard"): (150, 16, 6.5, 4.69),
    ("kmeans", "movielens"): (770, 318, 268, 271.9),
    ("mf", "adult"): (20, 12.8, 12.4, 11.4), ("mf", "creditcard"): (10.7, 3.0, 3.0, 2.7),
    ("mf", "movielens"): (820, 460, 429.4, 439.8)}
BATCH_COLUMN = {1: 0, 10: 1, 100: 2, 1000: 3}
#: the stand-ins' shapes: (rows of the real set, features, what it mimics)
SHAPES = {"adult": (48842, 123, "Adult as LIBSVM a9a: 123 one-hot features, 14 ones a row"),
          "creditcard": (30000, 23, "default of credit card clients: 23 numeric, standardized"),
          "movielens": (6040, 3952, "Movielens-1M: 6040 x 3952, 4.19 % rated 1-5, LargeArray")}
MOVIELENS_DENSITY = 1000209 / (6040 * 3952)
#: the stated bound (docs/large_arrays.md): in a process that runs Movielens'
#: MF alone (--datasets movielens --algorithms mf), its share_to_disk, MF cells
#: and full step (traces included) peak at most this far above the RSS before
#: the share_to_disk, for 728 MiB of shares
MOVIELENS_BOUND_MIB = 256
#: Movielens-1M's share of each rating 1..5
MOVIELENS_STARS = (0.056, 0.108, 0.261, 0.349, 0.226)


def _peak_reset() -> bool:
    """Resets this process's peak RSS (Linux: /proc/self/clear_refs 5), so
    each cell's peak is its own; False where that is not available."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rss_mib() -> float:
    """The process's resident set now (VmRSS), MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _full_pass(large, d, reps, base):
    """One Fig. 4 full step (all rows, batch_rows = n) over the whole
    Movielens LargeArray: time and peak RSS above the RSS at its start."""
    import numpy as np
    n = large.shape[0]
    rng = np.random.default_rng(5)
    p, q = tp.share(rng.random((n, F.factors))), tp.share(rng.random((d, F.factors)))
    reset = _peak_reset()
    start = _rss_mib()
    step = lambda: tp.models.matrix_factorization(    # noqa: E731
        large, F.factors, iterations=1, learning_rate=0.05, reg=0.01, p=p, q=q,
        bound=5.0).q
    from _report import timing_stats
    t0 = time.perf_counter()
    step()                                               # traces
    first = time.perf_counter() - t0
    st = timing_stats(step, reps)
    peak = _peak_mib()
    limbs = F.ring // 64
    return {"rows": n, "columns": d, "block_rows": large.block_rows,
            "block_bytes": tp.get_runtime().config.large_block_bytes,
            "shares_bytes_both_servers": 2 * n * d * 8 * limbs,
            "step_s": st, "first_step_s": first, "ms_per_instance": 1e3 * st["median_s"] / n,
            "start_rss_mib": start, "peak_mib": peak,
            "peak_above_start_mib": peak - start if reset else None,
            "peak_above_baseline_mib": peak - base if reset else None}


def _dense(name, rows, rng):
    """(features [rows, d], labels [rows]) of an in-memory stand-in."""
    import numpy as np
    d = SHAPES[name][1]
    if name == "adult":   # 14 categorical attributes one-hot over 123 columns: 14 ones a row
        x = np.zeros((rows, d))
        edges = np.linspace(0, d, 15).astype(int)
        for lo, hi in zip(edges[:-1], edges[1:]):
            x[np.arange(rows), rng.integers(lo, hi, rows)] = 1.0
        y = (rng.random(rows) < 0.24).astype(float)           # 24 % earn > 50K
    else:
        x = np.clip(rng.standard_normal((rows, d)), -8, 8)
        y = (rng.random(rows) < 0.22).astype(float)           # 22 % default
    return x, y


def _ratings(rows, cols, seed):
    """Movielens-like ratings, generated block by block (share_to_disk's
    source). Blocks of 128 rows (4 MB of float64, about a LargeArray block):
    rng.choice's temporaries over 512 rows peaked at 76 MiB, which glibc then
    kept, half the Movielens part's memory."""
    import numpy as np

    def blocks():
        rng = np.random.default_rng(seed)
        for r0 in range(0, rows, 128):
            m = min(128, rows - r0)
            stars = rng.choice(np.arange(1, 6), size=(m, cols), p=MOVIELENS_STARS)
            yield (stars * (rng.random((m, cols)) < MOVIELENS_DENSITY)).astype(np.float64)
    return blocks


def _cell(alg, x, y, b, d, bound, rng):
    """(private step, plaintext step) on the batch x (private [b, d] or a
    LargeArray view), y its labels; the plaintext runs on x_plain."""
    import numpy as np
    if alg == "lr":
        w = tp.share(np.zeros((d, 1)))
        bias = tp.share(np.zeros(1))
        yp = tp.share(y.reshape(-1, 1))
        return lambda: tp.models.logistic_regression_sgd(
            x, yp, learning_rate=0.1, batch_size=b, steps=1, weights=w, bias=bias,
            bound=bound).weights
    if alg == "kmeans":
        c = tp.share(rng.random((F.clusters, d)) * bound)
        return lambda: tp.models.kmeans(x, c, iterations=1, bound=bound).centroids
    p, q = tp.share(rng.random((b, F.factors))), tp.share(rng.random((d, F.factors)))
    return lambda: tp.models.matrix_factorization(
        x, F.factors, iterations=1, learning_rate=0.05, reg=0.01, p=p, q=q, bound=bound).q


def _plain(alg, xp, y, b, d, bound, rng):
    import numpy as np
    if alg == "lr":
        return lambda: tp.models.logistic_regression_sgd_plain(
            xp, y, learning_rate=0.1, batch_size=b, steps=1)
    if alg == "kmeans":
        c = rng.random((F.clusters, d)) * bound
        return lambda: tp.models.kmeans_plain(xp, c, iterations=1)
    p, q = rng.random((b, F.factors)), rng.random((d, F.factors))
    return lambda: tp.models.matrix_factorization_plain(
        xp, F.factors, iterations=1, learning_rate=0.05, reg=0.01, p=p, q=q)


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf
    from _report import cpu_model, machine, print_table, timing_stats, write_json
    tf.get_logger().setLevel("ERROR")
    batches = [1, 10] if F.quick else [int(b) for b in F.batches]
    reps = 1 if F.quick else F.reps
    ml_rows = min(F.movielens_rows, max(batches)) if F.quick else F.movielens_rows
    ml_rows = max(ml_rows, max(batches))
    tmp = tempfile.mkdtemp(prefix="privpy_table4_")
    tp.reset()
    tp.init(tp.Config(ring_bits=F.ring),
            large_array_dirs={"S1": os.path.join(tmp, "s1"), "S2": os.path.join(tmp, "s2")})
    res = {"machine": dict(machine(), cpu=cpu_model()), "ring": F.ring, "rows": [],
           "clusters": F.clusters, "factors": F.factors, "quick": F.quick,
           "datasets": {k: {"real_rows": v[0], "features": v[1], "stand_in": v[2]}
                        for k, v in SHAPES.items() if k in F.datasets},
           "peak_memory": "VmHWM per cell (reset before it)" if _peak_reset() else
                          "ru_maxrss of the process so far"}
    try:
        rng = np.random.default_rng(0)
        large = None
        for name in F.datasets:
            if name == "movielens":
                t0 = time.perf_counter()
                reset = _peak_reset()
                ml_base = res["movielens_baseline_rss_mib"] = _rss_mib()
                large = tp.share_to_disk(_ratings(ml_rows, SHAPES[name][1], 1), rows=ml_rows)
                res["movielens_share_to_disk"] = {
                    "s": time.perf_counter() - t0,
                    "peak_above_baseline_mib": _peak_mib() - ml_base if reset else None}
                print(f"  Movielens stand-in {ml_rows} x {SHAPES[name][1]} shared to disk in "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)
                head = large[:max(batches)]
                xall = np.concatenate(list(_ratings(max(batches), SHAPES[name][1], 1)()))
                yall = (rng.random(max(batches)) < 0.72).astype(float)  # 72 % of users male
                bound = 5.0
            else:
                xall, yall = _dense(name, max(batches), rng)
                bound = float(np.max(np.abs(xall)))
            d = xall.shape[1]
            for alg in F.algorithms:
                for b in batches:
                    reset = _peak_reset()
                    start = _rss_mib()
                    x = head[:b] if name == "movielens" else tp.share(xall[:b])
                    step = _cell(alg, x, yall[:b], b, d, bound, rng)
                    t0 = time.perf_counter()
                    step()                                       # traces
                    first = time.perf_counter() - t0
                    st = timing_stats(step, reps)
                    peak = _peak_mib()                     # the private steps' only
                    pst = timing_stats(_plain(alg, xall[:b], yall[:b], b, d, bound, rng), reps)
                    pp = PRIVPY_MS[(alg, name)][BATCH_COLUMN[b]] if b in BATCH_COLUMN else None
                    ms = 1e3 * st["median_s"] / b
                    res["rows"].append({
                        "algorithm": alg, "dataset": name, "batch": b, "ms_per_instance": ms,
                        "step_s": st, "first_step_s": first,
                        "plaintext_ms_per_instance": 1e3 * pst["median_s"] / b,
                        "plaintext_step_s": pst, "privpy_ms_per_instance": pp,
                        "meets_privpy": None if pp is None else ms <= pp,
                        "peak_mib": peak,
                        "peak_above_start_mib": peak - start if reset else None,
                        "peak_above_baseline_mib": peak - ml_base
                        if reset and name == "movielens" else None})
                    print(f"  {alg} {name} batch {b}: {ms:.2f} ms/instance (PrivPy {pp}), "
                          f"first step {first:.1f} s", flush=True)
            if name == "movielens" and "mf" in F.algorithms and F.movielens_full:
                full = res["movielens_full_pass"] = _full_pass(large, d, reps, ml_base)
                print(f"  mf movielens, one full step over {full['rows']} rows: "
                      f"{full['step_s']['median_s']:.1f} s, peak "
                      f"{full['peak_above_start_mib']:.0f} MiB above its start for "
                      f"{full['shares_bytes_both_servers'] / 2**20:.0f} MiB of shares",
                      flush=True)
            if name == "movielens" and reset:
                seen = [res["movielens_share_to_disk"]["peak_above_baseline_mib"]] + [
                    r["peak_above_baseline_mib"] for r in res["rows"]
                    if r["dataset"] == "movielens" and r["algorithm"] == "mf"] + [
                    res.get("movielens_full_pass", {}).get("peak_above_baseline_mib", 0)]
                # the bound is checked only where MF is all this process ran:
                # other work leaves freed memory that glibc keeps and MF would
                # reuse unseen (a baseline that hides), and LR's and k-means'
                # Movielens cells read their batch whole (not bounded here)
                alone = F.algorithms == ["mf"] and F.datasets == ["movielens"]
                res["movielens_memory"] = {
                    "bound_above_baseline_mib": MOVIELENS_BOUND_MIB,
                    "mf_peak_above_baseline_mib": max(seen), "mf_alone": alone,
                    "within_bound": max(seen) <= MOVIELENS_BOUND_MIB if alone else None}
        if large is not None:
            large.delete()
    finally:
        tp.reset()
        shutil.rmtree(tmp, ignore_errors=True)
    rows = res["rows"]
    met = [r for r in rows if r["meets_privpy"]]
    print_table(f"PrivPy Table 4: ms per instance, ours embedded {F.ring}-bit on "
                f"{res['machine']['cpus']} cores ({res['machine']['cpu']}) vs PrivPy (4 x 8 "
                f"vCPU, 1 GbE); generated stand-ins of the data sets' shapes; k = {F.clusters}, "
                f"f = {F.factors}",
                ["algorithm", "data set", "batch", "ours", "PrivPy", "met", "NumPy",
                 "first step s", "peak MiB", "above start", "above ML baseline"],
                [[r["algorithm"], r["dataset"], r["batch"], f"{r['ms_per_instance']:.3f}",
                  r["privpy_ms_per_instance"], {True: "yes", False: "NO", None: "-"}[
                      r["meets_privpy"]], f"{r['plaintext_ms_per_instance']:.4f}",
                  f"{r['first_step_s']:.1f}", f"{r['peak_mib']:.0f}",
                  _mib(r["peak_above_start_mib"]), _mib(r["peak_above_baseline_mib"])]
                 for r in rows])
    full = res.get("movielens_full_pass")
    if full:
        print_table("Movielens: one Fig. 4 full step over the whole LargeArray (batch = all "
                    "rows, streamed block by block)",
                    ["rows x columns", "shares (S1 + S2) MiB", "block MiB", "step s",
                     "first step s", "peak MiB", "above start", "above ML baseline"],
                    [[f"{full['rows']} x {full['columns']}",
                      f"{full['shares_bytes_both_servers'] / 2**20:.0f}",
                      f"{full['block_bytes'] / 2**20:.0f}",
                      f"{full['step_s']['median_s']:.2f}", f"{full['first_step_s']:.1f}",
                      f"{full['peak_mib']:.0f}", _mib(full["peak_above_start_mib"]),
                      _mib(full["peak_above_baseline_mib"])]])
    mem = res.get("movielens_memory")
    if mem:
        verdict = {True: "within", False: "EXCEEDED", None: "checked only with --datasets "
                   "movielens --algorithms mf"}[mem["within_bound"]]
        print(f"\n  Movielens' share_to_disk and MF peaked {mem['mf_peak_above_baseline_mib']:.0f}"
              f" MiB above the RSS before its share_to_disk "
              f"({res['movielens_baseline_rss_mib']:.0f} MiB); bound "
              f"{mem['bound_above_baseline_mib']} MiB: {verdict}")
    print(f"\n  at or below PrivPy's Table 4: {len(met)} of "
          f"{sum(r['meets_privpy'] is not None for r in rows)} cells")
    res["cells_met"] = len(met)
    write_json(os.path.join(F.out, "privpy_table4.json"), res)


def _mib(v) -> str:
    return "-" if v is None else f"{v:.0f}"


if __name__ == "__main__":
    app.run(main)
