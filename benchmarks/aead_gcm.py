"""AES-128-GCM throughput of the channel AEAD (ops/aead): our VAES/VPCLMULQDQ
path against the EVP path, seal and open, one thread and a 2-thread pool,
for 1, 16 and 128 MiB messages (the wire format of 1 MiB chunks).

Builds ops/aead/aead_bench.cc with `make -f ops/aead/Makefile.standalone`
(into build/cc-bench/aead, once: make rebuilds it when a source changed)
against TensorFlow's libtensorflow_framework, so the EVP path is the BoringSSL
that the op library binds to inside TensorFlow, and runs it: the two paths
alternate run by run in one process (so load on a shared machine hits both
alike); each line is the median GB/s (10^9 plaintext bytes per second) of
--runs runs of >= 0.1 s each, the slowest and fastest run, and the median GB
per CPU-second (all threads' CPU time; less sensitive to other load).

    python benchmarks/aead_gcm.py [--runs 7] [--sizes 1,16,128] [--out benchmarks/results]

Results also go to OUT/aead_gcm.json.

On a CPU without VAES/VPCLMULQDQ/AVX-512 it says so and measures nothing.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tf_crypto_libs() -> str:
    """Link flags naming TF's framework library (which exports BoringSSL's
    EVP) with an rpath to it, in place of the system's libcrypto."""
    lib_dir = next(f[2:] for f in tf.sysconfig.get_link_flags() if f.startswith("-L"))
    name = next(f for f in os.listdir(lib_dir) if f.startswith("libtensorflow_framework.so"))
    return f"-L{lib_dir} -l:{name} -Wl,-rpath,{lib_dir}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="timed runs per case (median)")
    ap.add_argument("--sizes", default="1,16,128", help="message sizes in MiB")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"),
                    help="folder for aead_gcm.json")
    ap.add_argument("--build_dir", default=os.path.join(ROOT, "build", "cc-bench", "aead"),
                    help="where aead_bench is built (make rebuilds it only when a source "
                         "changed; `make cc-tests` builds it for the smoke test)")
    ap.add_argument("--build_only", action="store_true", help="build aead_bench, run nothing")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    bench = os.path.join(os.path.abspath(args.build_dir), "aead_bench")
    subprocess.run(["make", "-s", "-f", "ops/aead/Makefile.standalone",
                    f"OUT={os.path.dirname(bench)}", f"CRYPTO_LIBS={tf_crypto_libs()}", bench],
                   cwd=ROOT, check=True)
    if args.build_only:
        return 0
    run = subprocess.run([bench, str(args.runs)] + [str(s) for s in sizes], check=True,
                         capture_output=True, text=True)
    print(run.stdout, end="")
    rows, lines = {}, []
    for line in run.stdout.splitlines():
        f = line.split()
        if len(f) == 8 and f[0].isdigit():
            rows[(f[0], f[1], f[2], f[3])] = float(f[4])
            lines.append(dict(mib=int(f[0]), threads=int(f[1]), op=f[2], impl=f[3],
                              gb_per_s=float(f[4]), raw=f[5:]))
    for (mib, threads, op, impl), gbs in sorted(rows.items()):
        if impl == "fast" and rows.get((mib, threads, op, "evp")):
            print(f"{mib} MiB, {threads} thread(s), {op}: fast/evp = "
                  f"{gbs / rows[(mib, threads, op, 'evp')]:.2f}x")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _report import machine, write_json
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "aead_gcm.json"),
               {"machine": machine(), "runs": args.runs, "rows": lines,
                "output": run.stdout})
    return 0


if __name__ == "__main__":
    sys.exit(main())
