"""Paillier kernels (tp.he.paillier) beside python-paillier (phe), and the
three workloads the HE issue sets targets for.

    python benchmarks/paillier.py                     # 2 threads (TF's pool)
    python benchmarks/paillier.py --threads=1         # one intra-op thread
    python benchmarks/paillier.py --bits=2048 --n=64 --scalar_n=20000   # quick

Per-element times are wall time of one batched call divided by its size, so
on 2 threads they are half the CPU time. Workloads (targets of the issue):
  * BatchCrypt client: one CRT encryption + one CRT decryption of a 2048-bit
    ciphertext packing ~100 values: <= ~19 us per value on 2 cores.
  * seed 004 scalar product: 200,000 encryptions by the key holder at 1024
    bits in <= 60 s.
  * many-user vector sum: 8,000 public-key encryptions at 2048 bits, well
    under 60 s.
phe runs in pure Python here unless gmpy2 is installed (it is not pinned).
"""
import os
import time

from absl import app, flags

flags.DEFINE_list("bits", ["2048", "1024"], "key sizes of the per-op table")
flags.DEFINE_integer("n", 200, "elements per timed call (per-op table)")
flags.DEFINE_integer("phe_n", 10, "elements for phe's timings")
flags.DEFINE_integer("threads", 0, "TF intra-op threads (0: TF's default, one per core)")
flags.DEFINE_integer("scalar_n", 200_000, "encryptions of the seed-004 workload (0: skip)")
flags.DEFINE_integer("users", 8000, "public-key encryptions of the vector-sum workload")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for paillier.json")
F = flags.FLAGS


def per_element(fn, count, reps=2):
    """Best wall time of fn() over reps, divided by count (seconds)."""
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / max(count, 1)


def fmt(seconds):
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def main(argv):
    del argv
    import tensorflow as tf
    if F.threads:
        tf.config.threading.set_intra_op_parallelism_threads(F.threads)
    import numpy as np
    import phe

    from _report import machine, print_table, write_json
    from tf_privpy.he import paillier as P

    results = {"machine": machine(), "threads": F.threads or os.cpu_count(), "ops": {}}
    rows = []
    for bits in (int(b) for b in F.bits if b):
        t0 = time.perf_counter()
        pk, sk = P.keygen(bits) if bits >= 2048 else _quiet_keygen(P, bits)
        keygen = time.perf_counter() - t0
        n = F.n
        x = tf.constant(np.arange(n, dtype=np.int64) - n // 2)
        c = P.encrypt(sk, x)
        c2 = P.encrypt(sk, x)
        noise = P.NoisePool(pk, n + 2, progress=False)
        noise.wait()
        # Warm-up: each op once on 2 elements (kernel creation, per-key caches).
        w = x[:2]
        P.encrypt(pk, w), P.encrypt(pk, w, noise="djn"), P.encrypt(pk, w, noise=noise.take(2))
        P.decrypt(sk, P.add(pk, c[:2], c2[:2])), P.reduce_sum(pk, c[:2]), P.mul_plain(pk, c[:2], w)
        ops = {
            "keygen": keygen,
            "encrypt, CRT (key holder)": per_element(lambda: P.encrypt(sk, x), n),
            "encrypt, generic r^n": per_element(lambda: P.encrypt(pk, x), n, reps=1),
            "encrypt, DJN (opt-in)": per_element(lambda: P.encrypt(pk, x, noise="djn"), n),
            "encrypt with pool noise": per_element(
                lambda: P.encrypt(pk, x, noise=noise.take(n)), n, reps=1),
            "noise r^n (pool fill)": per_element(lambda: P.NoisePool(pk, n, progress=False)
                                                 .wait(), n, reps=1),
            "noise CRT (key holder)": per_element(lambda: P.NoisePool(sk, n, progress=False)
                                                  .wait(), n),
            "decrypt, CRT": per_element(lambda: P.decrypt(sk, c), n),
            "add": per_element(lambda: P.add(pk, c, c2), n, reps=5),
            "reduce_sum (per input)": per_element(lambda: P.reduce_sum(pk, c), n, reps=5),
            "mul_plain (int64 k)": per_element(lambda: P.mul_plain(pk, c, x), n),
        }
        # phe (same key), a few elements: pure Python without gmpy2.
        ppk, psk = P.to_phe(pk), P.to_phe(sk)
        vals = list(range(F.phe_n))
        enc = [ppk.encrypt(v) for v in vals]
        ops["phe encrypt"] = per_element(lambda: [ppk.encrypt(v) for v in vals], F.phe_n, 1)
        ops["phe decrypt"] = per_element(lambda: [psk.decrypt(e) for e in enc], F.phe_n, 1)
        ops["phe add"] = per_element(lambda: [a + b for a, b in zip(enc, enc)], F.phe_n, 3)
        results["ops"][str(bits)] = ops
        rows += [[bits, name, fmt(t)] for name, t in ops.items()]
    print_table(f"Paillier per element ({results['threads']} threads, batch {F.n})",
                ["bits", "op", "time"], rows)

    # Workloads.
    work = {}
    pk, sk = P.keygen(2048)
    x = tf.constant(np.arange(1000, dtype=np.int64))
    c = P.encrypt(sk, x)
    P.decrypt(sk, c[:2])
    enc = per_element(lambda: P.encrypt(sk, x), 1000, reps=1)
    dec = per_element(lambda: P.decrypt(sk, c), 1000, reps=1)
    work["batchcrypt_us_per_value"] = (enc + dec) / 100 * 1e6
    users = tf.constant(np.arange(F.users, dtype=np.int64))
    P.encrypt(pk, x[:2]), P.encrypt(pk, x[:2], noise="djn")
    for how in ("generic", "djn"):
        t0 = time.perf_counter()
        P.encrypt(pk, users, noise=None if how == "generic" else "djn")
        work[f"users_{how}_s"] = time.perf_counter() - t0
    if F.scalar_n:
        pk1, sk1 = _quiet_keygen(P, 1024)
        v = tf.constant(np.arange(F.scalar_n, dtype=np.int64) % 2)
        t0 = time.perf_counter()
        P.encrypt(sk1, v)
        work["scalar_product_s"] = time.perf_counter() - t0
        work["scalar_product_n"] = F.scalar_n
    results["workloads"] = work
    print_table("Workloads", ["workload", "measured", "target"], [
        ["BatchCrypt client, CRT enc + dec / 100 values", f"{work['batchcrypt_us_per_value']:.1f} us",
         "<= 19 us"],
        [f"{F.users} public encryptions 2048-bit, generic", f"{work['users_generic_s']:.1f} s",
         "well < 60 s"],
        [f"{F.users} public encryptions 2048-bit, DJN", f"{work['users_djn_s']:.1f} s",
         "well < 60 s"],
    ] + ([[f"{F.scalar_n} CRT encryptions 1024-bit (seed 004)",
           f"{work['scalar_product_s']:.1f} s", "<= 60 s (200,000)"]] if F.scalar_n else []))
    print(f"phe {phe.__version__}; gmpy2 " + ("present" if _has_gmpy2() else "absent"))
    write_json(os.path.join(F.out, f"paillier_{results['threads']}t.json"), results)


def _quiet_keygen(P, bits):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.InsecureKeyWarning)
        return P.keygen(bits)


def _has_gmpy2():
    try:
        import gmpy2  # noqa: F401
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    app.run(main)
