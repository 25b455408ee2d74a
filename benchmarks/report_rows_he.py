"""The homomorphic-encryption row groups of benchmarks/REPORT.md (BatchCrypt,
the scalar product, the many-user vector sum); report_rows.groups() lists
them with the others."""
from typing import List

from report_cells import Measure, Row, _missing, fmt_value


def group_batchcrypt(res, A) -> List[Row]:
    rows, he = [], res.get("he", {})
    a, b = he.get("a"), he.get("b")
    note = "quick sizes" if he.get("quick") else ""
    if a:
        gm = [r for r in a.get("phe", []) if r.get("gmpy2")] or a.get("phe", [])
        peer = "; ".join(f"BatchCrypt on phe {r.get('phe_version', '')} ({r.get('where', '')}) "
                         f"{fmt_value(r['batchcrypt_us_per_value'] * 1e-6, 's')}" for r in gm) \
            or "phe not measured"
        rows.append(Row(f"BatchCrypt client cost per value (encode + CRT encrypt + decrypt + "
                        f"decode), 2048-bit, r=16, m={a.get('m')}, {a['values']:,} values", "s",
                        ["batchcrypt_phe_per_value", "phe_per_value"],
                        Measure(a["ours_us_per_value"] * 1e-6, note="best of 2" +
                                (f", {note}" if note else "")), peer=peer, anchor_table=A))
        rows.append(Row("the same, online (noise made ahead in a NoisePool)", "s",
                        ["batchcrypt_phe_per_value"],
                        Measure(a["ours_online_us_per_value"] * 1e-6, note="best of 2"),
                        anchor_table=A))
        rows.append(Row("BatchCrypt ciphertext bytes per value", "B",
                        ["batchcrypt_phe_bytes_per_value"], Measure(a["ours_bytes_per_value"]),
                        anchor_table=A))
    else:
        rows.append(Row("BatchCrypt client cost per value", "s", ["batchcrypt_phe_per_value"],
                        status=_missing(res, "he", "section a not chosen"), anchor_table=A))
    if b:
        runs = b["runs"]
        label = (f"{b['clients']} clients, MNIST, FC 784-{b['hidden']}-10 ({b['params']:,} "
                 f"params), {b['key_bits']}-bit")
        for agg in ("batchcrypt", "paillier"):
            r = runs.get(agg)
            if r:
                rows.append(Row(f"FL round, {agg} aggregation, {label}", "s", (),
                                Measure(r["round_s"], note="one round" +
                                        (f", {note}" if note else "")),
                                plaintext=Measure(runs["plaintext"]["round_s"])
                                if runs.get("plaintext") else None,
                                peer="per-value Paillier: row below" if agg == "batchcrypt"
                                else "–", anchor_table=A))
        rows.append(Row("FL round: HE time, per-value Paillier / BatchCrypt", "x",
                        ["batchcrypt_fl_time_x"], Measure(b["he_time_x"]), anchor_table=A))
        rows.append(Row("FL round: traffic, per-value Paillier / BatchCrypt", "x",
                        ["batchcrypt_fl_traffic_x"], Measure(b["traffic_x"]), anchor_table=A))
    else:
        rows.append(Row("FL round (BatchCrypt vs per-value Paillier)", "x",
                        ["batchcrypt_fl_time_x"], status=_missing(res, "he", "section b"),
                        anchor_table=A))
    pa = res.get("paillier", {}).get("ops", {}).get("2048")
    for op, akey, ph in (("encrypt, CRT (key holder)", "phe_encrypt_2048", "phe encrypt"),
                         ("decrypt, CRT", "phe_decrypt_2048", "phe decrypt")):
        v = pa.get(op) if pa else None
        rows.append(Row(f"Paillier 2048-bit {op}, per element (batched)", "s", [akey],
                        Measure(v, note="best") if v else None, _missing(res, "paillier"),
                        peer=f"phe {fmt_value(pa[ph], 's')} (this venv)" if pa and pa.get(ph)
                        else "–", anchor_table=A))
    codec = res.get("batchcrypt_codec", {}).get("steps", {})
    enc, dec = codec.get("encode = quantize + pack"), codec.get("decode = unpack + dequantize")
    rows.append(Row("BatchCrypt codec alone (encode + decode), per value", "s", (),
                    Measure((enc["s"] + dec["s"]) / res["batchcrypt_codec"]["values"],
                            note="best") if enc and dec else None,
                    _missing(res, "batchcrypt_codec"), anchor_table=A))
    return rows


def group_scalar_product(res, A) -> List[Row]:
    c = res.get("he", {}).get("c")
    if not c:
        return [Row("scalar product, 200,000 binary, 1024-bit", "s", ["sp_naive_1024"],
                    status=_missing(res, "he", "section c"), anchor_table=A)]
    n, same = c["n"], c["n"] == 200_000
    phe = c.get("phe_gmpy2")
    rows = []
    for kind, t, akeys, pkey in (
            ("naive (Bob encrypts online)", c["naive"]["total"],
             ["sp_naive_1024", "sp_phe_naive_1024"], "naive_scaled_s"),
            ("online, precomputed encryptions", c["online"]["total"],
             ["sp_online_1024", "sp_phe_online_1024"], "online_scaled_s")):
        rows.append(Row(f"scalar product {kind}, {n:,} binary elements, 1024-bit", "s", akeys,
                        Measure(t, note="one run"), plaintext=Measure(c["plaintext_s"]),
                        peer=(f"phe + gmpy2 {fmt_value(phe[pkey], 's')} (scaled from "
                              f"{phe.get('n', '?'):,})") if phe else "phe + gmpy2 not run "
                        "(no .venv-bench)", comparable=same, anchor_table=A))
    if c.get("two_clients_own_keys"):
        rows.append(Row(f"scalar product, 2 clients with own keys, naive, {n:,}", "s", (),
                        Measure(c["two_clients_own_keys"]["total"], note="one run"),
                        anchor_table=A))
    return rows


def group_vector_sum(res, A) -> List[Row]:
    d = res.get("he", {}).get("d")
    if not d:
        return [Row("vector sum, 8,000 users x 100 values", "s", ["vs_seal_8000x100"],
                    status=_missing(res, "he", "section d"), anchor_table=A)]
    same = d["users"] == 8000 and d["dim"] == 100
    g = d["runs"].get("generic") or next(iter(d["runs"].values()))
    phe = d.get("phe_gmpy2")
    label = f"{d['users']:,} users x {d['dim']} values in [0, {d['max_value']}], 2048-bit"
    return [
        Row(f"vector sum, total (users' encryption included), {label}", "s",
            ["vs_seal_8000x100"], Measure(g["timings"]["total"], note="one run"),
            plaintext=Measure(d["plaintext_s"]),
            peer=(f"phe + gmpy2, same packing {fmt_value(phe['total_scaled_s'], 's')} (scaled "
                  f"from {phe.get('users', '?')} users)") if phe else "phe + gmpy2 not run",
            comparable=same, anchor_table=A),
        Row("vector sum, upload bytes per value", "B",
            ["vs_seal_bytes_per_value", "vs_lattice_bytes_per_value"],
            Measure(g["bytes_per_value"]), anchor_table=A),
    ]
