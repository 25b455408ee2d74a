"""Throughput of BatchCrypt's codec (no encryption): quantize, pack, unpack
and dequantize of one model update, beside the cost of the Paillier
encryption it feeds (shared/ANCHORS.md: python-paillier, 2048-bit, 9.65 ms
per encryption, i.e. ~95 us per value at 102 values per plaintext).

    python benchmarks/batchcrypt_codec.py                   # 10^6 values, r=16, m=9, 2048-bit
    python benchmarks/batchcrypt_codec.py --values=100000 --reps=3

The codec's steps must stay negligible (far below 1 us per value).
"""
import os
import time

from absl import app, flags

flags.DEFINE_integer("values", 10 ** 6, "values in the update")
flags.DEFINE_integer("bits", 16, "quantization width r")
flags.DEFINE_integer("clients", 9, "number of clients m")
flags.DEFINE_integer("key_bits", 2048, "Paillier key size")
flags.DEFINE_integer("reps", 5, "timed repetitions (the best is reported)")
flags.DEFINE_string("out", os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                    "folder for batchcrypt_codec.json")
F = flags.FLAGS

PAILLIER_ENCRYPT_S = 9.65e-3  # shared/ANCHORS.md, python-paillier 2048-bit, 1 thread


def best_of(fn, reps):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv):
    del argv
    import numpy as np

    from _report import machine, print_table, write_json
    from tf_privpy.he import batchcrypt as bc

    n, m = F.values, F.clients
    codec = bc.BatchCryptCodec(F.bits, m, F.key_bits)
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.01, n).astype(np.float32)
    stats = bc.layer_stats([x])[0]
    alpha = bc.daciq_alpha(stats.minimum, stats.maximum, stats.size, F.bits)
    t_q, q = best_of(lambda: codec.quantize(x, alpha, rng), F.reps)
    t_pack, pts = best_of(lambda: codec.pack(q), F.reps)
    total = bc.sum_plaintexts([pts] * m, codec.plaintext_bytes)
    t_unpack, res = best_of(lambda: codec.unpack_sum(total, m, n), F.reps)
    assert (res.values == m * q.astype(np.int64)).all()
    t_deq, _ = best_of(lambda: codec.dequantize_sum(res.values, alpha, res.overflow_mask, m),
                       F.reps)
    t_enc, (pts2, layout) = best_of(lambda: codec.encode([x], [alpha], rng), F.reps)
    t_dec, _ = best_of(lambda: codec.decode(total, layout, m), F.reps)

    per_value_paillier = PAILLIER_ENCRYPT_S / codec.slots_per_plaintext
    rows, steps = [], {}
    for name, t in (("quantize (numpy, float64, stochastic)", t_q), ("pack (kernel)", t_pack),
                    ("unpack sum (kernel)", t_unpack), ("dequantize (numpy)", t_deq),
                    ("encode = quantize + pack", t_enc), ("decode = unpack + dequantize", t_dec)):
        steps[name] = {"s": t, "ns_per_value": t / n * 1e9}
        rows.append([name, f"{t * 1e3:.1f}", f"{t / n * 1e9:.1f}", f"{n / t / 1e6:.1f}",
                     f"{per_value_paillier / (t / n):.0f}x"])
    print_table(
        f"BatchCrypt codec, {n} values, r={F.bits}, m={m}, {F.key_bits}-bit plaintexts "
        f"({codec.slots_per_plaintext} slots of {codec.slot_bits} bits, "
        f"{codec.bytes_per_value:.2f} ciphertext bytes/value), {machine()}",
        ["step", "ms", "ns/value", "M values/s", "Paillier encrypt is"], rows)

    write_json(os.path.join(F.out, "batchcrypt_codec.json"), {
        "machine": machine(), "values": n, "r": F.bits, "m": m, "key_bits": F.key_bits,
        "slots_per_plaintext": codec.slots_per_plaintext,
        "bytes_per_value": codec.bytes_per_value, "steps": steps})


if __name__ == "__main__":
    app.run(main)
