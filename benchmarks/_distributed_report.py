"""The tables of benchmarks/distributed.py's report (printed, and written to
results/distributed.md) from its results."""
from _distributed_workloads import (COMPARING, NETWORKS, PARTS, PROTOCOL_PAIRS, TARGET_RATIO,
                                    TFE_LR_MS, families, keys, label, split)


# ---------------------------------------------------------------- report
def med(ts):
    ts = sorted(ts)
    return ts[len(ts) // 2]


def ms_range(ts) -> str:
    if not ts:
        return "-"
    if len(ts) == 1:
        return f"{1e3 * ts[0]:.1f} (1 call)"
    return f"{1e3 * med(ts):.1f} [{1e3 * min(ts):.1f}-{1e3 * max(ts):.1f}]"


def tables(res: dict) -> list:
    """[(title, header, rows)] of the report."""
    sizes, st = res["sizes"], res["settings"]
    out = []
    emb, loop = st.get("embedded"), st.get("loopback")
    if emb or loop:
        rows = []
        for name in keys():
            e = emb["workloads"].get(name) if emb else None
            lp = loop["workloads"].get(name) if loop else None
            if not (e or lp):
                continue
            ratio = med(lp["times_s"]) / med(e["times_s"]) if e and lp else None
            target = TARGET_RATIO.get(split(name)[0])
            rows.append([label(name, sizes),
                         f"{1e3 * med(e['plaintext_times_s']):.2f}" if e else "-",
                         ms_range(e["times_s"]) if e else "-",
                         ms_range(lp["times_s"]) if lp else "-",
                         f"{ratio:.2f}x" if ratio else "-",
                         f"<= {target}x embedded" if target else "-",
                         ("yes" if ratio <= target else "NO") if target and ratio else "-"])
        out.append(("Loopback (four server processes) vs embedded, ms: median [min-max]",
                    ["workload", "plaintext TF", "embedded", "loopback", "ratio", "target",
                     "met"], rows))
    lan, wan = st.get("lan"), st.get("wan")
    if lan or wan:
        from _netns import rate_bps
        rtt = NETWORKS["wan"]["rtt_ms"]
        rate = rate_bps(NETWORKS["wan"]["rate"])
        rows = []
        for name in keys():
            la = lan["workloads"].get(name) if lan else None
            wa = wan["workloads"].get(name) if wan else None
            any_ = la or wa
            if not any_:
                continue
            rounds = any_["rounds"]
            uplink = {}
            for k, v in _links(any_).items():
                uplink[k.split("->")[0]] = uplink.get(k.split("->")[0], 0) + v
            bw_s = max(uplink.values()) * 8 / rate if uplink else 0.0
            est = f"{1e3 * med(la['times_s']) + rounds * rtt:.0f}" if la else "-"
            anchor = "-"
            if name == "lr_step" and sizes[name] == 128:
                anchor = (f"LAN {TFE_LR_MS['lan'][0]}-{TFE_LR_MS['lan'][1]}, "
                          f"WAN {TFE_LR_MS['wan'][0]}-{TFE_LR_MS['wan'][1]}")
            elif split(name)[0] == "tfe_steps":
                anchor = _article(split(name)[1])
            rows.append([label(name, sizes), ms_range(la["times_s"]) if la else "-",
                         ms_range(wa["times_s"]) if wa else "-", rounds, est,
                         f"{1e3 * bw_s:.0f}", anchor])
        out.append((f"LAN ({NETWORKS['lan']['rate']}) and WAN ({NETWORKS['wan']['rate']}, "
                    f"{rtt:.0f} ms RTT), ms: median [min-max]",
                    ["workload", "LAN measured", "WAN measured", "rounds",
                     f"LAN + rounds x {rtt:.0f} ms",
                     f"busiest uplink at {NETWORKS['wan']['rate']}",
                     "TF-Encrypted"], rows))
    src = loop or emb
    if src:
        rows = []
        for name in keys():
            w = src["workloads"].get(name)
            if w is None:
                continue
            bill = _links(w)
            wire = w.get("wire_bytes")
            row = [label(name, sizes)]
            for pair in PROTOCOL_PAIRS:
                row.append(f"{_mb(bill.get(pair, 0))} / "
                           + ("-" if wire is None else _mb(wire.get(pair, 0))))
            # TCP on server pairs that carry no protocol message: TF's
            # RecvTensor requests, which flow against the data
            row.append("-" if wire is None else _mb(sum(
                v for k, v in wire.items() if "client" not in k and k not in PROTOCOL_PAIRS)))
            for side in (0, 1):  # the driver's links: inputs and control in, results out
                b = sum(v for k, v in bill.items() if k.split("->")[side] == "client")
                x = None if wire is None else sum(
                    v for k, v in wire.items() if k.split("->")[side] == "client")
                row.append(f"{_mb(b)} / " + ("-" if x is None else _mb(x)))
            servers = sum(v for k, v in bill.items() if "client" not in k)
            tcp = None if wire is None else sum(v for k, v in wire.items() if "client" not in k)
            row.append("-" if tcp is None or not servers else f"{tcp / servers:.4f}")
            row.append("(no bill: counted)" if w["bill"] is None else
                       "yes" if w["channel_bytes"] == bill else "NO")
            rows.append(row)
        where = "loopback" if loop else "embedded"
        out.append((f"MB (10^6 B) sent per pair in one call, {where}: declared cost bill / TCP "
                    "payload measured with ss",
                    ["workload"] + [p.replace("->", "→") for p in PROTOCOL_PAIRS]
                    + ["other server pairs (TCP)", "client→servers", "servers→client",
                       "TCP / bill between servers", "channel counters = bill"], rows))
    fam = families_table(res)
    if fam:
        out.append(fam)
    return out


def _links(w: dict) -> dict:
    """Bytes per pair of one call: the declared bill's, else (training rows,
    which declare none) the channels' counters."""
    if w["bill"] is None:
        return {k: v for k, v in w["channel_bytes"].items() if v}
    return {k: v["bytes"] for k, v in w["bill"]["links"].items() if v["bytes"]}


def _article(row: str) -> str:
    """The article's seconds per batch of a training row (seed 001,
    benchmarks/anchors.json): MP-SPDZ / TF-Encrypted, LAN and WAN."""
    import json
    import os
    import tfe_suite as T
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "anchors.json")) as f:
        a = T.anchors_of(json.load(f)["anchors"], *row.split("-"))
    cell = lambda net: " / ".join(  # noqa: E731
        "-" if a.get(f"{s}_{net}_s") is None else f"{a[f'{s}_{net}_s']:g} s"
        for s in ("mpspdz", "tfe"))
    return f"LAN {cell('lan')}, WAN {cell('wan')} (MP-SPDZ / TFE)"


def _server_bytes(w: dict) -> int:
    """Bytes one call sent between the four servers (the channels' counters)."""
    return sum(v for k, v in w["channel_bytes"].items() if "client" not in k)


def families_table(res: dict):
    """(title, header, rows) of the comparison families side by side in each
    setting (issue 26), or None with fewer than two families measured."""
    fams = families()
    if len(fams) < 2:
        return None
    sizes, st = res["sizes"], res["settings"]
    emb = st.get("embedded")
    rows = []
    for name in (n for n in COMPARING if n in sizes):
        for part in (p for p in PARTS if p in st):
            w = st[part]["workloads"]
            got = {f: w[f"{name}:{f}"] for f in fams if f"{name}:{f}" in w}
            if len(got) < 2:
                continue
            ms = {f: 1e3 * med(r["times_s"]) for f, r in got.items()}
            best = min(ms, key=ms.get)
            per = sizes[name]   # comparisons' inputs, or images
            row = [label(name, sizes), part]
            for f in fams:
                r = got[f]
                row += [f"{ms[f]:.1f}", r["rounds"], _bytes(_server_bytes(r) / per)]
            row.append(f"{best} ({max(ms.values()) / ms[best]:.2f}x)")
            # distributed against embedded, per family (issue 26's LeNet-5 target)
            for f in fams:
                e = emb["workloads"].get(f"{name}:{f}") if emb and part != "embedded" else None
                row.append(f"{ms[f] / (1e3 * med(e['times_s'])):.2f}x" if e else "-")
            rows.append(row)
    if not rows:
        return None
    unit = "per element (per image for LeNet-5)"
    header = ["workload", "setting"]
    for f in fams:
        header += [f"{f} ms", f"{f} rounds", f"{f} bytes {unit}"]
    header += ["faster"] + [f"{f} / embedded" for f in fams]
    return ("Comparison families side by side (interleaved call by call): median ms, "
            "rounds and server-to-server bytes (channel counters) of one call", header, rows)


def _bytes(b: float) -> str:
    """Bytes per element or image: B up to 10^5, else MB."""
    return f"{b:,.0f} B" if b < 1e5 else f"{b / 1e6:.2f} MB"


def _mb(b) -> str:
    """Bytes as MB; under 1 KB in bytes."""
    if b < 1000:
        return f"{b} B"
    return f"{b / 1e6:.3f}" if b < 1e7 else f"{b / 1e6:.1f}"


def markdown(title: str, header: list, rows: list) -> str:
    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
