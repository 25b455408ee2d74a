"""tests/test_large_array.py's memory tests, as their own process: a
LargeArray whose shares cannot fit in this process's memory, and a product
and a sum computed on it exactly; or (argument "mf") matrix factorization's
full gradient steps on such an array (tp.models.matrix_factorization at
batch_rows = n, which streams each batch in blocks), P and Q written for
the test to compare with plaintext.

How the limit is set: RLIMIT_AS (address space) is the limit Linux enforces
on any allocation without cgroups; RLIMIT_RSS is not enforced at all, and
RLIMIT_DATA counts the same anonymous mappings as AS here. TensorFlow alone
maps several GB of address space (its libraries, thread stacks, allocator
arenas), so an absolute limit would say nothing about the array: the limit is
TF's measured baseline plus HEADROOM. The baseline is read from
/proc/self/status (VmSize) after a warm-up that runs every operation once on
a small array of the same width (so TF's thread pools, kernels and graph
machinery are in place), with MALLOC_ARENA_MAX=2 set by the test so that a
new glibc arena (64 MB of address space each) cannot appear mid-run. The
shares (both servers' shares live in this one embedded process) are more
than 1.4 x HEADROOM, and the child checks that the limit bites: an array of
the shares' size cannot be allocated. One block (BLOCK bytes of a share) and
its protocol work fit easily.

Prints one JSON line: sizes, times, MB/s, peak memory above the baseline.
"""
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import tf_privpy as tp  # noqa: E402

N, D = 393_216, 16           # 128-bit ring: 16 B an element a share: 96 MiB a share
BLOCK = 1 << 20              # a block: 1 MiB of one share (4,096 rows)
HEADROOM = 128 << 20         # address space allowed above TF's baseline
GEN_ROWS = 8192              # the generator's blocks (each split into 2 share blocks)
F = 20
# matrix factorization: 12,288 x 512 ratings (0-5), 96 MiB a share, 128 rows a
# block; k factors, ITERS full steps (Fig. 4's step over all rows)
MF_N, MF_D, MF_K, MF_ITERS = 12_288, 512, 3, 2
MF_KW = dict(iterations=MF_ITERS, learning_rate=0.05, reg=0.01)


def status(field: str) -> int:
    """A /proc/self/status field in bytes (VmSize, VmPeak, VmHWM, VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def blocks(n: int, seed: int):
    """Integer-valued rows in [-8, 8), made on the fly (never all at once)."""
    for start in range(0, n, GEN_ROWS):
        rng = np.random.default_rng([seed, start])
        yield rng.integers(-8, 8, (min(GEN_ROWS, n - start), D)).astype(np.float64)


def ratings(n: int, seed: int, rows: int = GEN_ROWS):
    """Movielens-like rows: 30 % rated 1-5, the rest 0, made on the fly."""
    for start in range(0, n, rows):
        rng = np.random.default_rng([seed, start])
        m = min(rows, n - start)
        yield (rng.integers(1, 6, (m, MF_D)) * (rng.random((m, MF_D)) < 0.3)).astype(
            np.float64)


def limit(share_total: int) -> tuple:
    """Limits the address space to the current VmSize + HEADROOM; returns
    (the baseline, whether an allocation of share_total bytes is refused)."""
    base = status("VmSize")
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (base + HEADROOM, hard))
    try:
        big = np.ones(share_total // 8, np.int64)  # the two shares' bytes at once
        del big
        return base, False
    except MemoryError:
        return base, True


def _init(root: str) -> None:
    tp.init(tp.Config(large_block_bytes=BLOCK),
            large_array_dirs={"S1": os.path.join(root, "s1"), "S2": os.path.join(root, "s2")})


def _limited_share(source, rows: int, share_total: int):
    """The limit set (after the warm-up), then `source` shared to disk:
    (the LargeArray, the baseline, whether a shares-sized allocation was
    refused, seconds of share_to_disk)."""
    base, refused = limit(share_total)
    t = time.perf_counter()
    x = tp.share_to_disk(source, rows=rows, progress=False)
    return x, base, refused, time.perf_counter() - t


def main_mf(root: str) -> dict:
    """MF_ITERS full steps on a [MF_N, MF_D] LargeArray under the limit;
    P and Q (revealed) go to ROOT/mf.npz."""
    _init(root)
    # warm-up: the same width and block height, 3 blocks (so both passes and
    # the step between them are traced once before the limit)
    small = tp.share_to_disk(ratings(3 * 128, 2), progress=False)
    res = tp.models.matrix_factorization(small, MF_K, bound=5.0, **MF_KW)
    tp.reveal(res.p), tp.reveal(res.q)
    small.delete()

    share_total = 2 * MF_N * MF_D * 16
    x, base, refused, t_share = _limited_share(ratings(MF_N, 7), MF_N, share_total)
    t = time.perf_counter()
    res = tp.models.matrix_factorization(x, MF_K, bound=5.0, **MF_KW)
    p, q = tp.reveal(res.p).numpy(), tp.reveal(res.q).numpy()
    t_mf = time.perf_counter() - t
    np.savez(os.path.join(root, "mf.npz"), p=p, q=q)
    x.delete()
    mib = 1 << 20
    return {"rows": MF_N, "columns": MF_D, "share_bytes_total": share_total,
            "headroom_bytes": HEADROOM, "baseline_vmsize_mib": base / mib,
            "big_alloc_refused": refused,
            "peak_vm_above_baseline_mib": (status("VmPeak") - base) / mib,
            "peak_rss_mib": status("VmHWM") / mib, "share_to_disk_s": t_share,
            "mf_s": t_mf, "mf_iterations": MF_ITERS}


def main(root: str) -> dict:
    _init(root)
    w_np = np.random.default_rng(3).integers(-3, 4, (D, 1)).astype(np.float64)
    w = tp.share(w_np)
    small = tp.share_to_disk(blocks(2 * 4096, 1), progress=False)  # warm-up: 2 blocks
    tp.reveal(small.matmul(w, out="disk").to_private(1 << 30))
    tp.reveal(small.sum(axis=0))
    small.delete()

    share_total = 2 * N * D * 16
    x, base, refused, t_share = _limited_share(blocks(N, 7), N, share_total)
    t = time.perf_counter()
    y = x.matmul(w, out="disk", progress=False)
    t_matmul = time.perf_counter() - t
    t = time.perf_counter()
    s = tp.reveal(x.sum(axis=0, progress=False)).numpy()
    t_sum = time.perf_counter() - t
    got = tp.reveal(y.to_private(1 << 30)).numpy()[:, 0]   # 6 MiB a share

    want_sum, errs, exact = np.zeros(D), [], True
    for start, blk in zip(range(0, N, GEN_ROWS), blocks(N, 7)):
        want_sum += blk.sum(0)
        want = (blk @ w_np)[:, 0]
        part = got[start:start + len(blk)]
        errs.append(float(np.max(np.abs(part - want))))
        exact &= bool(np.array_equal(np.round(part), want))
    files = [os.path.getsize(os.path.join(root, p, f)) for p in ("s1", "s2")
             for f in os.listdir(os.path.join(root, p))]
    mib = 1 << 20
    return {
        "rows": N, "columns": D, "share_bytes_total": share_total,
        "files_bytes": sum(files), "headroom_bytes": HEADROOM, "baseline_vmsize_mib":
            base / mib, "big_alloc_refused": refused,
        "peak_vm_above_baseline_mib": (status("VmPeak") - base) / mib,
        "peak_rss_mib": status("VmHWM") / mib,
        "share_to_disk_s": t_share, "share_to_disk_mib_s": share_total / mib / t_share,
        "matmul_s": t_matmul, "matmul_mib_s": share_total / mib / t_matmul,
        "sum_s": t_sum, "sum_mib_s": share_total / mib / t_sum,
        "product_exact": exact, "product_max_err_ulps": max(errs) * 2 ** F,
        "sum_exact": bool(np.array_equal(s, want_sum)),
    }


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "product"
    print(json.dumps(main_mf(sys.argv[1]) if mode == "mf" else main(sys.argv[1])))
