"""One federated round (issue 30): plaintext FedAvg, the BatchCrypt backend and
the mpc backend of tp.federated.convert, per round time, client cost and bytes
per client, beside BatchCrypt's published per-iteration figures (seed 003).

The step is the same for every backend: N clients, each with an update vector
of P float32 values, combined by a weighted mean with public weights (the
clients' example counts 1..N):

    def step(u0, ..., u{N-1}):
        return tf.add_n([w_i * u_i ...]) / sum(w)

tp.federated.convert rewrites its AddN over the clients into a secure
aggregation: `mpc` (each client splits its update into two shares for S1 and
S2 on its own device, the servers add, the mean is revealed to every client)
or `batchcrypt` (dACIQ clip, r = 16-bit quantization, packing and 2048-bit
Paillier on each client, homomorphic sum on S1, every client decrypts).
Plaintext FedAvg is the same mean in NumPy (each client sends its float32
update and gets the float32 mean back).

Layout: one process, embedded runtime, tp.init(num_clients=N+1): one logical
TF device per client beside the driver's, S1, S2, T1 and T2, all on this
machine's cores. The clients therefore take turns on the same cores: a round's
wall time is every client's work plus the servers', one after another.

    python benchmarks/federated.py                  # 3, 10, 100 clients x 10^5, 10^6 values
    python benchmarks/federated.py --quick          # 3 clients, 10^4 values (seconds)
    python benchmarks/federated.py --clients=3,10 --params=100000 --budget_s=300

A BatchCrypt cell whose projected time (its measured per-value client cost x
values x clients x rounds) exceeds --budget_s is not run: it is listed with
its projection and the reason.
"""
import os
import time

from absl import app, flags

from batchcrypt_phe import BENCH_PYTHON  # this folder

flags.DEFINE_list("clients", ["3", "10", "100"], "numbers of clients")
flags.DEFINE_list("params", ["100000", "1000000"], "values per client update")
flags.DEFINE_list("backends", ["plaintext", "mpc", "batchcrypt"], "what to run")
flags.DEFINE_integer("rounds", 3, "timed rounds per cell after one warm-up round (median)")
flags.DEFINE_integer("he_rounds", 2, "timed rounds of a batchcrypt cell after its warm-up")
flags.DEFINE_float("budget_s", 240.0, "largest projected seconds of one batchcrypt cell")
flags.DEFINE_integer("phe_values", 500, "values for BatchCrypt-on-phe in this run (this "
                     "venv's python-paillier: benchmarks/batchcrypt_phe.py)")
flags.DEFINE_integer("phe_gmpy2_values", 2000, "values for BatchCrypt-on-phe with gmpy2 "
                     "(the benchmark venv, `make bench-venv`; skipped without it)")
flags.DEFINE_string("phe_python", BENCH_PYTHON,
                    "python of a venv with phe + gmpy2 ('' or missing: skip)")
flags.DEFINE_string("reveal_to", "clients", "mpc: who receives the mean (clients: like "
                    "FedAvg and BatchCrypt, every client gets the aggregate)")
flags.DEFINE_bool("quick", False, "3 clients, 10^4 values, 1 timed round (the smoke test)")
flags.DEFINE_bool("png", True, "write federated.png")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for federated.json")
F = flags.FLAGS

SEED = "shared/seeds/003_a985b6021008ca50.txt"
#: BatchCrypt's published per-iteration figures (anchors.json, seed 003 lines
#: 110, 112, 305, 307): 9 clients, 2048-bit, r = 16; the model sizes are
#: implied by the plaintext traffic (9 clients x up + down x 4 bytes)
PUBLISHED = [("fmnist", "3-layer FC on FMNIST", 1e5), ("cifar", "AlexNet on CIFAR10", 1e6)]


def published(anchors):
    rows = []
    for key, what, size in PUBLISHED:
        fate_s = anchors[f"batchcrypt_seed_fate_{key}_iteration_s"]["value"]
        fate_b = anchors[f"batchcrypt_seed_fate_{key}_traffic_B"]["value"]
        plain_b = anchors[f"batchcrypt_seed_plain_{key}_traffic_B"]["value"]
        speed = anchors[f"batchcrypt_seed_{key}_speedup_x"]["value"]
        less = anchors[f"batchcrypt_seed_{key}_traffic_x"]["value"]
        rows.append({
            "model": what, "clients": 9, "params_implied": plain_b / (9 * 2 * 4),
            "fate_iteration_s": fate_s, "batchcrypt_iteration_s": fate_s / speed,
            "fate_bytes_per_client": fate_b / 9, "batchcrypt_bytes_per_client": fate_b / less / 9,
            "plain_bytes_per_client": plain_b / 9, "size_class": size,
            "source": f"{SEED} lines 110, 112, 305, 307 (BatchCrypt = FATE / speedup)"})
    return rows


def make_step(tf, n_clients):
    w = [float(i + 1) for i in range(n_clients)]

    def step(*us):
        return tf.add_n([wi * u for wi, u in zip(w, us)]) / sum(w)
    return step, w


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def run_cell(tp, tf, np, backend, n, p, rounds):
    """Rounds of one (backend, clients, values) cell: one warm-up, then
    `rounds` timed; returns its row."""
    step, w = make_step(tf, n)
    us = [np.random.default_rng(i).normal(0, 0.01, p).astype(np.float32) for i in range(n)]
    want = sum(np.float64(wi) * u for wi, u in zip(w, us)) / sum(w)
    row = {"backend": backend, "clients": n, "params": p, "status": "measured",
           "layout": f"embedded, 1 process: {n} client devices + driver, S1, S2, T1, T2 "
                     f"on {os.cpu_count()} cores (clients take turns)"}
    if backend == "plaintext":
        def one():
            acc = np.zeros(p, np.float64)
            for wi, u in zip(w, us):
                acc += wi * u
            return (acc / sum(w)).astype(np.float32), None
        up = down = 4 * p
        row["layout"] = "NumPy, 1 process"
    else:
        pol = tp.federated.FederatedPolicy(clients=n, backend=backend, reveal_to=F.reveal_to,
                                           seed=1)
        t0 = time.perf_counter()
        fed = tp.federated.convert(step, [tf.TensorSpec([p], tf.float32)] * n, pol)
        row["convert_s"] = time.perf_counter() - t0
        row["declared_bytes"] = list(fed.bytes_per_client())

        def one():
            return fed.run(*us)
    times, cpus, reports, out = [], [], [], None
    for r in range(rounds + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        out, rep = one()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if r == 0:
            row["first_round_s"] = dt
            continue
        times.append(dt)
        cpus.append(dc)
        reports.append(rep)
    row["round_s"] = {"min_s": min(times), "median_s": median(times), "max_s": max(times),
                      "reps": len(times)}
    row["round_cpu_s"] = median(cpus)
    # the process's CPU seconds of a round over clients x values: every
    # party's work (servers' and driver's too), so an upper bound of a client's
    row["round_cpu_us_per_client_value"] = row["round_cpu_s"] / n / p * 1e6
    row["max_abs_error"] = float(np.abs(np.asarray(out, np.float64) - want).max())
    if backend == "plaintext":
        row.update(bytes_up_per_client=up, bytes_down_per_client=down,
                   client_s=0.0, client_note="sends its update, gets the mean")
    else:
        rep = reports[-1]
        row.update(bytes_up_per_client=rep.bytes_up_per_client,
                   bytes_down_per_client=rep.bytes_down_per_client,
                   positive_overflows=rep.positive_overflows,
                   negative_overflows=rep.negative_overflows, clipped=rep.clipped)
        if backend == "batchcrypt":
            enc = median([r.encrypt_s for r in reports])
            dec = median([r.decrypt_s for r in reports])
            row.update(encrypt_s=enc, decrypt_s=dec,
                       aggregate_s=median([r.aggregate_s for r in reports]),
                       client_s=(enc + dec) / n, client_us_per_value=(enc + dec) / n / p * 1e6,
                       client_note="(encrypt_s + decrypt_s) / clients: one client's quantize, "
                                   "pack, encrypt, decrypt and decode, wall time")
        else:
            row.update(client_s=None,
                       client_note="not separable: a client's share split runs in the "
                                   "round's one tf.function with the servers' adds; the "
                                   "round time bounds it")
    row["bytes_per_value_up"] = row["bytes_up_per_client"] / p
    return row


def projected(n, p, per_value_s, rounds):
    return per_value_s * n * p * (rounds + 1)


def main(argv):
    del argv
    import json
    if F.quick:
        F.clients, F.params, F.rounds, F.he_rounds = ["3"], ["10000"], 1, 1
        F.phe_values = min(F.phe_values, 200)
        F.phe_gmpy2_values = min(F.phe_gmpy2_values, 200)
    clients = [int(c) for c in F.clients]
    params = [int(p) for p in F.params]
    import numpy as np
    import tensorflow as tf

    import tf_privpy as tp
    tp.init(num_clients=max(clients) + 1)     # the logical devices, once, for the largest N

    from _report import bar_png, cpu_model, machine, print_table, write_json
    import batchcrypt_phe

    here = os.path.dirname(os.path.abspath(__file__))
    anchors = json.load(open(os.path.join(here, "anchors.json")))["anchors"]
    load = [os.getloadavg()[0]]
    res = {"machine": dict(machine(), cpu=cpu_model()), "clients": clients, "params": params,
           "rounds": F.rounds, "he_rounds": F.he_rounds, "reveal_to": F.reveal_to,
           "quick": F.quick, "rows": [], "not_run": []}

    # BatchCrypt on python-paillier in this run, on a key made by
    # tp.he.paillier: this venv's phe (no gmpy2) and, when `make bench-venv`
    # made it, phe + gmpy2 in 1 and 2 processes (phe at its best, as he.py)
    import tempfile
    _, sk = tp.he.paillier.keygen(2048)
    with tempfile.TemporaryDirectory() as tmp:
        runner = batchcrypt_phe.PheRunner(tmp, F.phe_python)
        key_file = runner.key_file(sk)
        local = batchcrypt_phe.measure(key_file, 2048, values=F.phe_values, per_value=1)
        local["where"] = "this venv" + ("" if local["gmpy2"] else " (no gmpy2)")
        phe_runs = [local] + runner.batchcrypt(key_file, F.phe_gmpy2_values, 1)
    # the target is against the fastest phe measured
    phe = min(phe_runs, key=lambda r: r["batchcrypt_us_per_value"])
    res["phe"], res["phe_runs"] = phe, phe_runs
    for r in phe_runs:
        print(f"  BatchCrypt on phe {r['phe_version']}, {r['where']}: "
              f"{r['batchcrypt_us_per_value']:,.1f} us per value", flush=True)
    per_value_guess = 60e-6
    for n in clients:
        tp.init(num_clients=n + 1)
        for p in params:
            for backend in F.backends:
                rounds = F.he_rounds if backend == "batchcrypt" else F.rounds
                if backend == "batchcrypt":
                    proj = projected(n, p, per_value_guess, rounds)
                    if proj > F.budget_s:
                        res["not_run"].append({
                            "backend": backend, "clients": n, "params": p,
                            "projected_s": proj,
                            "reason": f"projected {proj:,.0f} s ({per_value_guess * 1e6:.0f} us "
                                      f"per value per client x {n} clients x {p:,} values x "
                                      f"{rounds + 1} rounds) > --budget_s={F.budget_s:g}"})
                        print(f"  {backend} {n} x {p}: not run ({res['not_run'][-1]['reason']})",
                              flush=True)
                        continue
                print(f"  {backend} {n} clients x {p:,} values ...", flush=True)
                row = run_cell(tp, tf, np, backend, n, p, rounds)
                res["rows"].append(row)
                if backend == "batchcrypt":
                    per_value_guess = max(per_value_guess, row["client_us_per_value"] * 1e-6)
                print(f"    round {row['round_s']['median_s']:.3f} s, "
                      f"{row['bytes_up_per_client']:,} B up per client", flush=True)
    load.append(os.getloadavg()[0])
    res["loadavg"] = load

    rows = res["rows"]
    tab = []
    for r in rows:
        tab.append([r["backend"], r["clients"], f"{r['params']:,}",
                    f"{r['round_s']['median_s']:.3f}",
                    f"{r['round_s']['min_s']:.3f}-{r['round_s']['max_s']:.3f}",
                    f"{r['round_cpu_s']:.2f}",
                    "-" if r.get("client_s") is None else f"{r['client_s']:.3f}",
                    f"{r['bytes_up_per_client']:,}", f"{r['bytes_down_per_client']:,}",
                    f"{r['bytes_per_value_up']:.2f}",
                    "-" if r["backend"] != "batchcrypt" else
                    f"{r['positive_overflows']}/{r['negative_overflows']}/{r['clipped']}",
                    f"{r['max_abs_error']:.1e}"])
    for r in res["not_run"]:
        tab.append([r["backend"], r["clients"], f"{r['params']:,}", "not run",
                    f"projected {r['projected_s']:,.0f} s", "", "", "", "", "", "", ""])
    print_table(f"One federated round, weighted mean of float32 updates ({cpu_model()}, "
                f"{os.cpu_count()} cores, load {load[0]:.1f}-{load[-1]:.1f}; embedded: one TF "
                f"device per client, clients take turns on the same cores; mpc reveals to "
                f"the {F.reveal_to})",
                ["backend", "clients", "values", "round s (median)", "min-max",
                 "round CPU s", "client s", "B up/client", "B down/client", "B/value up",
                 "overflow +/-/clip", "max abs err"], tab)

    # targets
    bc = [r for r in rows if r["backend"] == "batchcrypt"]
    targets = {}
    if bc:
        ours = min(r["client_us_per_value"] for r in bc)
        targets["batchcrypt_vs_phe"] = {
            "ours_us_per_value": ours, "phe_us_per_value": phe["batchcrypt_us_per_value"],
            "phe_gmpy2": phe["gmpy2"], "phe_where": phe["where"],
            "x": phe["batchcrypt_us_per_value"] / ours,
            "met": ours <= phe["batchcrypt_us_per_value"] / 5,
            "anchor_us_per_value": anchors["batchcrypt_phe_per_value"]["value"] * 1e6,
            "vs_anchor_x": anchors["batchcrypt_phe_per_value"]["value"] * 1e6 / ours,
            "note": "per value per client, encode + encrypt + decrypt + decode; the anchor is "
                    "phe with gmpy2 on this machine (shared/ANCHORS.md)"}
    big = [r for r in rows if r["backend"] == "mpc"
           and (r["clients"], r["params"]) == (max(clients), max(params))]
    if big and bc:
        per_value = min(r["client_us_per_value"] for r in bc) * 1e-6
        one_client = per_value * max(params)
        targets["mpc_vs_batchcrypt_at_largest"] = {
            "clients": max(clients), "params": max(params),
            "mpc_round_s": big[0]["round_s"]["median_s"],
            "mpc_bytes_up_per_client": big[0]["bytes_up_per_client"],
            "mpc_bytes_down_per_client": big[0]["bytes_down_per_client"],
            "batchcrypt_measured": any((r["clients"], r["params"]) == (max(clients),
                                                                      max(params)) for r in bc),
            "batchcrypt_one_client_s_lower_bound": one_client,
            "batchcrypt_serial_round_s_projected": one_client * max(clients),
            "met": big[0]["round_s"]["median_s"] < one_client,
            "note": "BatchCrypt's round is at least one client's encrypt + decrypt of its "
                    "update (clients in parallel on their own machines), projected from the "
                    "measured per-value client cost; the mpc round is measured with all "
                    "clients and servers on this machine's cores"}
    res["targets"] = targets
    res["published"] = published(anchors)
    trows = []
    if "batchcrypt_vs_phe" in targets:
        t = targets["batchcrypt_vs_phe"]
        trows.append(["BatchCrypt backend client cost per value vs the fastest BatchCrypt-on-"
                      f"phe of this run ({t['phe_where']})",
                      f"{t['ours_us_per_value']:.1f} us vs {t['phe_us_per_value']:.0f} us: "
                      f"{t['x']:.1f}x (anchor 98 us: {t['vs_anchor_x']:.1f}x)", ">= 5x",
                      "met" if t["met"] else "NOT met"])
    if "mpc_vs_batchcrypt_at_largest" in targets:
        t = targets["mpc_vs_batchcrypt_at_largest"]
        trows.append([f"mpc round at {t['clients']} x {t['params']:,} vs BatchCrypt's",
                      f"{t['mpc_round_s']:.2f} s vs >= "
                      f"{t['batchcrypt_one_client_s_lower_bound']:.1f} s (one client; {t['batchcrypt_serial_round_s_projected']:,.0f} s all "
                      f"clients here); mpc {t['mpc_bytes_up_per_client']:,} B up, "
                      f"{t['mpc_bytes_down_per_client']:,} B down per client", "faster",
                      "met" if t["met"] else "NOT met"])
    if trows:
        print_table("Targets (issue 30)", ["target", "measured", "wants", ""], trows)
    print_table(f"BatchCrypt's published per-iteration figures ({SEED}: 9 geo-distributed "
                "clients, 16 vCPUs each, FATE; BatchCrypt = FATE / its speedup)",
                ["model", "~values", "FATE s", "BatchCrypt s", "FATE B/client",
                 "BatchCrypt B/client", "plain B/client"],
                [[r["model"], f"{r['params_implied']:,.0f}", f"{r['fate_iteration_s']:.1f}",
                  f"{r['batchcrypt_iteration_s']:.1f}", f"{r['fate_bytes_per_client']:,.0f}",
                  f"{r['batchcrypt_bytes_per_client']:,.0f}",
                  f"{r['plain_bytes_per_client']:,.0f}"] for r in res["published"]])
    write_json(os.path.join(F.out, "federated.json"), res)
    if F.png and rows:
        labels = sorted({(r["clients"], r["params"]) for r in rows})
        series = {}
        for b in F.backends:
            got = {(r["clients"], r["params"]): r["round_s"]["median_s"]
                   for r in rows if r["backend"] == b}
            series[b] = [got.get(k, 0.0) for k in labels]
        bar_png(os.path.join(F.out, "federated.png"), "One federated round (median s)",
                [f"{c} x {p:.0e}" for c, p in labels], series, "seconds", log=True)


if __name__ == "__main__":
    app.run(main)
