"""The peers' rows (benchmarks/peers_run.py -> results/peers.json) joined to another
benchmark's rows by function and size, so that it prints and records each peer's time and error
beside ours (benchmarks/functions.py does). Peers measured in an earlier run on this machine:
the table says when, and the domains may differ from the other benchmark's."""
import json
import os

DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "peers.json")


def load(path=None):
    """peers.json as a dict, or None when there is none (path None: the default, if present)."""
    path = path or DEFAULT
    if not os.path.exists(path):
        return None
    with open(path) as f:
        res = json.load(f)
    res["path"] = path
    return res


def join(peers, fn, n):
    """The peers' rows for workload fn at size n (else the nearest size they ran), the fastest
    row of each peer (best protocol), fastest first; tf_privpy's own rows left out."""
    rows = [r for r in (peers or {}).get("rows", []) if r["workload"] == fn
            and r["peer"] != "tf_privpy"]
    if not rows:
        return []
    near = min({r["n"] for r in rows}, key=lambda m: (abs(m - n), -m))
    best = {}
    for r in rows:
        if r["n"] == near and (r["peer"] not in best or r["best_s"] < best[r["peer"]]["best_s"]):
            best[r["peer"]] = r
    return [{"peer": r["peer"], "protocol": r["protocol"], "n": r["n"],
             "domain": r["domain"], "us_per_element": r["us_per_element"],
             "max_abs_error": r["max_abs_error"], "max_rel_error": r["max_rel_error"]}
            for r in sorted(best.values(), key=lambda r: r["best_s"])]


def attach(res, peers, fn_key="fn", n_key="n"):
    """Adds row["peers"] (join) to every row of res["rows"] and res["peers_source"]."""
    if not peers:
        return
    res["peers_source"] = {"path": os.path.basename(peers["path"]),
                           "date": peers["machine"].get("date"),
                           "status": {k: v["status"] for k, v in peers["peers"].items()}}
    for row in res["rows"]:
        row["peers"] = join(peers, row[fn_key], row[n_key])


def print_beside(res, print_table, fn_key="fn", n_key="n", us_key="us_per_elt",
                 label=lambda r: f"{r.get('ring', '')}"):
    """One line per (our row, peer): our µs per element beside the peer's, and its error."""
    if "peers_source" not in res:
        return
    lines = []
    for r in res["rows"]:
        for p in r.get("peers", []):
            lines.append([r[fn_key], f"{r[n_key]:,}", label(r), f"{r[us_key]:.2f}",
                          f"{p['peer']} {p['protocol']}",
                          f"{p['n']:,}", f"[{p['domain'][0]:g}, {p['domain'][1]:g}]",
                          f"{p['us_per_element']:.2f}", f"{p['max_abs_error']:.1e}",
                          f"{p['max_rel_error']:.1e}",
                          f"{r[us_key] / p['us_per_element']:.2f}"])
    if lines:
        src = res["peers_source"]
        print_table(f"Peers beside us ({src['path']} of {src['date']}, same machine; peers' "
                    "domains: their column)",
                    ["function", "n", "ours", "our µs/el", "peer", "peer n", "peer domain",
                     "peer µs/el", "peer max abs err", "peer max rel err", "ours / peer"],
                    lines)
