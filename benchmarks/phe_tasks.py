"""python-paillier (phe) baselines of benchmarks/he.py's two tasks, measured on a
sample and reported per element (he.py scales them to the full workload).

- Scalar product (seed 004, Figure 1): Bob encrypts his binary vector with
  phe (public_key.encrypt, fresh r^n per element, as "phe redone here" in
  shared/ANCHORS.md), Alice adds the selected ciphertexts and E(R), Bob
  decrypts. Naive = all of it; online = Alice's sum + E(R) + Bob's decryption
  (Bob's encryptions made ahead).
- Vector sum (seed 002): each user packs its values into one Python int per
  plaintext (slots of ceil(log2(users * max + 1)) bits) and encrypts it with
  phe; the server adds; the key holder decrypts and unpacks.

Only phe and numpy are needed: runs in the benchmark venv with gmpy2 too.
    python benchmarks/phe_tasks.py --key_file key.json --task scalar_product --n 2000
"""
from __future__ import annotations

import argparse
import json
import secrets
import time

import numpy as np

from batchcrypt_phe import has_gmpy2, phe_keys


def scalar_product(pub, priv, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 2, n).tolist(), rng.integers(0, 2, n).tolist()
    t0 = time.perf_counter()
    enc = [pub.encrypt(v) for v in y]                        # Bob
    t_enc = time.perf_counter() - t0
    import phe
    t0 = time.perf_counter()
    mask = secrets.randbelow(pub.n)                          # Alice: E(-R), R in Z_n
    acc = phe.EncryptedNumber(pub, pub.raw_encrypt(-mask % pub.n), 0)
    t_mask = time.perf_counter() - t0
    t0 = time.perf_counter()
    for xi, c in zip(x, enc):
        if xi:
            acc = acc + c
    t_adds = time.perf_counter() - t0
    t0 = time.perf_counter()
    s = priv.raw_decrypt(acc.ciphertext(be_secure=False))   # Bob: x.y - R mod n
    t_dec = time.perf_counter() - t0
    if (s + mask) % pub.n != sum(a * b for a, b in zip(x, y)):
        raise AssertionError("phe scalar product is wrong")
    return {"n": n, "encrypt_s_per_element": t_enc / n, "add_s_per_element": t_adds / n,
            "mask_s": t_mask, "decrypt_s": t_dec}


def vector_sum(pub, priv, users: int, dim: int, max_value: int, max_users: int,
               seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    v = rng.integers(0, max_value + 1, (users, dim))
    w = (max_users * max_value).bit_length()
    k = (pub.n.bit_length() - 1) // w
    t0 = time.perf_counter()
    uploads = []
    for row in v.tolist():                                   # every user
        cts = []
        for j in range(0, dim, k):
            acc = 0
            for val in reversed(row[j:j + k]):
                acc = (acc << w) | val
            cts.append(pub.encrypt(acc))
        uploads.append(cts)
    t_users = time.perf_counter() - t0
    t0 = time.perf_counter()
    total = uploads[0]
    for cts in uploads[1:]:                                  # the server
        total = [a + b for a, b in zip(total, cts)]
    t_server = time.perf_counter() - t0
    t0 = time.perf_counter()
    sums = []
    for c in total:                                          # the key holder
        t = priv.decrypt(c)
        sums.extend((t >> (w * i)) & ((1 << w) - 1) for i in range(k))
    t_key = time.perf_counter() - t0
    if sums[:dim] != v.sum(axis=0).tolist():
        raise AssertionError("phe vector sum is wrong")
    ct_bytes = (pub.nsquare.bit_length() + 7) // 8
    return {"users": users, "dim": dim, "users_s": t_users, "server_s": t_server,
            "key_holder_s": t_key, "user_s_each": t_users / users,
            "server_s_per_user": t_server / max(users - 1, 1),
            "bytes_per_value": len(total) * ct_bytes / dim}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--key_file", default="")
    ap.add_argument("--bits", type=int, default=1024)
    ap.add_argument("--task", choices=["scalar_product", "vector_sum"], required=True)
    ap.add_argument("--n", type=int, default=2000, help="scalar product elements")
    ap.add_argument("--users", type=int, default=100)
    ap.add_argument("--dim", type=int, default=100)
    ap.add_argument("--max_value", type=int, default=20)
    ap.add_argument("--max_users", type=int, default=8000)
    a = ap.parse_args(argv)
    pub, priv = phe_keys(a.key_file, a.bits)
    if a.task == "scalar_product":
        pub.encrypt(1)
        res = scalar_product(pub, priv, a.n)
    else:
        res = vector_sum(pub, priv, a.users, a.dim, a.max_value, a.max_users)
    res["gmpy2"] = has_gmpy2()
    res["key_bits"] = pub.n.bit_length()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
