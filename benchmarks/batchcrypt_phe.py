"""BatchCrypt's packing on python-paillier (phe): the baseline of benchmarks/he.py.

A re-implementation (our own code) of what BatchCrypt's released FATE plugin
does on a client (seed 003 §4-5; the paper's FATE experiments: r = 16 bits,
batches of 100 values, two zero bits of padding between values):

  1. quantize each clipped value x in [-alpha, alpha] to
     q = SR(x * (2^(r-1) - 1) / alpha), SR stochastic rounding;
  2. two's complement with two sign bits: q >= 0 stays, q < 0 becomes
     2^(r+1) + q (r+1 bits);
  3. pad the vector with zeros to a multiple of the batch size and join each
     batch into ONE Python int, first value most significant, shifting by
     r + pad bits per value;
  4. encrypt each int with phe's public_key.encrypt (an EncodedNumber of
     exponent 0, fresh r^n obfuscation), and decrypt with
     private_key.decrypt;
  5. unpack slot by slot with bit masks and decode each slot on its own from
     its top bits (00/100 positive, 011/111 negative, 001 positive overflow,
     110 negative overflow), as the released decoder does (exact for a sum of
     at most 2 clients; a single client's round trip, measured here, is exact);
  6. dequantize q * alpha / (2^(r-1) - 1).

No code of the released repository is copied. Only phe and numpy are needed,
so this file also runs in a separate benchmark venv where phe has gmpy2
(`make bench-venv`): python benchmarks/batchcrypt_phe.py --help.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import List, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
#: the benchmark venv's python (phe + gmpy2), made by `make bench-venv`
BENCH_PYTHON = os.path.join(os.path.dirname(HERE), ".venv-bench", "bin", "python")


def quantize(x: np.ndarray, r: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """Sign-preserving scaling to +-(2^(r-1) - 1), stochastic rounding."""
    qmax = 2 ** (r - 1) - 1
    y = np.clip(x.astype(np.float64), -alpha, alpha) * (qmax / alpha)
    low = np.floor(y)
    return (low + (rng.random(y.shape) < (y - low))).astype(np.int64)


def dequantize(q: np.ndarray, r: int, alpha: float) -> np.ndarray:
    return (q.astype(np.float64) * (alpha / (2 ** (r - 1) - 1))).astype(np.float32)


def to_twos_complement(q: np.ndarray, r: int) -> np.ndarray:
    """r+1-bit two's complement with two sign bits: q < 0 -> 2^(r+1) + q."""
    return np.where(q < 0, q + (1 << (r + 1)), q)


def from_twos_complement(slot: int, r: int) -> int:
    """One slot decoded on its own from its sign bits (released behaviour)."""
    qmax = 2 ** (r - 1) - 1
    sign, literal = slot >> (r - 1), slot & qmax
    if sign in (0, 4):
        return literal
    if sign in (3, 7):
        return literal - (1 << (r - 1))
    if sign == 1:
        return qmax            # positive overflow, saturated
    return -qmax               # 6: negative overflow; anything else unrecognized


def pack(codes: np.ndarray, r: int, pad: int, batch: int) -> List[int]:
    """Batches of `batch` codes joined into Python ints, first most significant."""
    width = r + pad
    rem = (-len(codes)) % batch
    if rem:
        codes = np.concatenate([codes, np.zeros(rem, codes.dtype)])
    out = []
    for b in range(0, len(codes), batch):
        acc = 0
        for v in codes[b:b + batch].tolist():
            acc = (acc << width) | v
        out.append(acc)
    return out


def unpack(ints: Sequence[int], count: int, r: int, pad: int, batch: int) -> np.ndarray:
    width = r + pad
    mask = (1 << width) - 1
    out = np.zeros(len(ints) * batch, np.int64)
    for j, t in enumerate(ints):
        for i in range(batch):
            out[j * batch + batch - 1 - i] = from_twos_complement((t >> (width * i)) & mask, r)
    return out[:count]


class Pool:
    """map() in `procs` processes (like the released code's joblib
    Parallel(n_jobs=cpu_count)), or in this process when procs == 1."""

    def __init__(self, procs: int):
        self.procs = procs
        self._pool = None
        if procs > 1:
            import multiprocessing
            self._pool = multiprocessing.get_context("fork").Pool(procs)

    def map(self, fn, items):
        if self._pool is None:
            return [fn(v) for v in items]
        return self._pool.map(fn, items, chunksize=max(1, len(items) // (4 * self.procs)))

    def close(self):
        if self._pool is not None:
            self._pool.close()
            self._pool.join()


def client_round_trip(public_key, private_key, x: np.ndarray, alpha: float, r: int = 16,
                      pad: int = 2, batch: int = 100, pool: Pool = None, seed: int = 0):
    """One client's BatchCrypt work on phe for the values x: quantize, pack,
    encrypt, decrypt, unpack, dequantize. Returns (seconds per step, the
    round-tripped values, the number of ciphertexts)."""
    pool = pool or Pool(1)
    rng = np.random.default_rng(seed)
    t = {}
    t0 = time.perf_counter()
    q = quantize(x, r, alpha, rng)
    ints = pack(to_twos_complement(q, r), r, pad, batch)
    t["encode"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    enc = pool.map(public_key.encrypt, ints)
    t["encrypt"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    dec = pool.map(private_key.decrypt, enc)
    t["decrypt"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = dequantize(unpack(dec, len(x), r, pad, batch), r, alpha)
    t["decode"] = time.perf_counter() - t0
    if not np.array_equal(unpack(dec, len(x), r, pad, batch), q):
        raise AssertionError("BatchCrypt-on-phe round trip is not exact")
    return t, back, len(ints)


def per_value_round_trip(public_key, private_key, x: np.ndarray, pool: Pool = None):
    """Stock FATE: one phe ciphertext per float value (phe's own encoding)."""
    pool = pool or Pool(1)
    vals = [float(v) for v in x]
    t0 = time.perf_counter()
    enc = pool.map(public_key.encrypt, vals)
    t_enc = time.perf_counter() - t0
    t0 = time.perf_counter()
    dec = pool.map(private_key.decrypt, enc)
    t_dec = time.perf_counter() - t0
    if max(abs(a - b) for a, b in zip(vals, dec)) > 1e-9:
        raise AssertionError("per-value phe round trip is not exact")
    return {"encrypt": t_enc, "decrypt": t_dec}


def phe_keys(key_file: str, bits: int):
    import phe
    if key_file:
        with open(key_file) as f:
            k = json.load(f)
        pub = phe.PaillierPublicKey(int(k["n"]))
        return pub, phe.PaillierPrivateKey(pub, int(k["p"]), int(k["q"]))
    return phe.generate_paillier_keypair(n_length=bits)


class PheRunner:
    """python-paillier in the benchmark venv (phe + gmpy2, `make bench-venv`):
    runs a script of benchmarks/ there and returns its last line as JSON.
    `python` '' or missing: nothing runs (`run` returns None)."""

    def __init__(self, tmpdir: str, python: str = BENCH_PYTHON):
        self.tmpdir = tmpdir
        self.python = python if python and os.path.exists(python) else ""

    def key_file(self, sk) -> str:
        """A key made by tp.he.paillier, written for phe (its pure-Python keygen
        takes seconds)."""
        path = os.path.join(self.tmpdir, f"key{sk.public_key.bits}.json")
        with open(path, "w") as f:
            json.dump({"n": sk.public_key.n, "p": sk.p, "q": sk.q}, f)
        return path

    def run(self, script: str, args: Sequence[str]):
        if not self.python:
            return None
        cmd = [self.python, os.path.join(HERE, script)] + list(args) + ["--json"] * (
            script == "batchcrypt_phe.py")
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, timeout=1800)
        if out.returncode != 0:
            print(f"  (phe with gmpy2 failed: {out.stderr.strip().splitlines()[-1:]})")
            return None
        return json.loads(out.stdout.strip().splitlines()[-1])

    def batchcrypt(self, key_file: str, values: int, per_value: int, procs=(1, 2)) -> List[dict]:
        """BatchCrypt-on-phe with gmpy2 at each number of processes (none
        without the venv), each labelled with where it ran."""
        runs = []
        for n in procs:
            r = self.run("batchcrypt_phe.py", ["--key_file", key_file, "--values", str(values),
                                               "--per_value", str(per_value), "--procs", str(n)])
            if r:
                r["where"] = f"bench venv (gmpy2), {n} process{'es' if n > 1 else ''}"
                runs.append(r)
        return runs


def has_gmpy2() -> bool:
    try:
        import gmpy2  # noqa: F401
        return True
    except ImportError:
        return False


def measure(key_file: str = "", bits: int = 2048, values: int = 1000, per_value: int = 10,
            procs: int = 1, r: int = 16, pad: int = 2, batch: int = 100) -> dict:
    """Per-value client cost of BatchCrypt-on-phe and of per-value phe."""
    import phe
    pub, priv = phe_keys(key_file, bits)
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.01, values).astype(np.float32)
    alpha = float(np.abs(x).max())
    pool = Pool(procs)
    try:
        client_round_trip(pub, priv, x[:batch], alpha, r, pad, batch, pool)     # warm-up
        t, _, nct = client_round_trip(pub, priv, x, alpha, r, pad, batch, pool)
        pv = per_value_round_trip(pub, priv, x[:per_value], pool)
    finally:
        pool.close()
    ct_bytes = (pub.nsquare.bit_length() + 7) // 8
    return {
        "phe_version": getattr(phe, "__version__", "?"), "gmpy2": has_gmpy2(), "procs": procs,
        "key_bits": pub.n.bit_length(), "r": r, "pad": pad, "batch": batch,
        "batchcrypt_values": values, "batchcrypt_ciphertexts": nct,
        "batchcrypt_s": t, "batchcrypt_us_per_value": sum(t.values()) / values * 1e6,
        "batchcrypt_bytes_per_value": nct * ct_bytes / values,
        "per_value_values": per_value, "per_value_s": pv,
        "per_value_us_per_value": sum(pv.values()) / per_value * 1e6,
        "per_value_bytes_per_value": ct_bytes,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--key_file", default="", help="JSON with n, p, q (else phe generates)")
    ap.add_argument("--bits", type=int, default=2048)
    ap.add_argument("--values", type=int, default=1000, help="values for BatchCrypt-on-phe")
    ap.add_argument("--per_value", type=int, default=10, help="values for per-value phe")
    ap.add_argument("--procs", type=int, default=1, help="processes (1: one thread, as "
                    "the anchor; the released code uses all cores)")
    ap.add_argument("--json", action="store_true", help="print one JSON object only")
    a = ap.parse_args(argv)
    res = measure(a.key_file, a.bits, a.values, a.per_value, a.procs)
    if a.json:
        print(json.dumps(res))
        return
    print(f"phe {res['phe_version']} (gmpy2 {'yes' if res['gmpy2'] else 'no'}), "
          f"{res['key_bits']}-bit key, {a.procs} process(es), python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cpus")
    print(f"  BatchCrypt on phe: {res['batchcrypt_us_per_value']:.1f} us/value, "
          f"{res['batchcrypt_bytes_per_value']:.2f} bytes/value ({a.values} values)")
    print(f"  per-value phe:     {res['per_value_us_per_value'] / 1e3:.2f} ms/value, "
          f"{res['per_value_bytes_per_value']} bytes/value ({a.per_value} values)")


if __name__ == "__main__":
    main()
