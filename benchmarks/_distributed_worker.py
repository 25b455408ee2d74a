"""The driver side of benchmarks/distributed.py: one process per setting
(`distributed.py --worker`), which times the workloads a command at a time
and counts the TCP bytes each server pair sent (ss). The orchestrator that
starts and interleaves these processes is distributed.py."""
import json
import os
import re
import subprocess
import sys
import time

from absl import flags

import tf_privpy as tp
from _distributed_workloads import FULL, QUICK, build_workloads, families, repeat

F = flags.FLAGS


# ======================================================================
# The driver side: one process per setting
# ======================================================================
def tcp_sockets() -> list:
    """Every TCP socket of this network namespace with its owner pid and
    bytes sent (ss -tinpH): dicts local, peer, pid, sent."""
    out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, check=True).stdout
    socks, cur = [], None
    for line in out.splitlines():
        if line[:1] not in ("\t", " "):
            cols = line.split()
            pid = re.search(r"pid=(\d+),", line)
            cur = {"local": cols[3], "peer": cols[4], "pid": int(pid.group(1)) if pid else None,
                   "sent": 0}
            socks.append(cur)
        elif cur is not None:
            # bytes_sent: counted when sent (bytes_acked lags a delayed ACK);
            # it would include retransmissions, which loopback does not have
            sent = re.search(r"bytes_sent:(\d+)", line)
            cur["sent"] = int(sent.group(1)) if sent else 0
    return socks


def pair_bytes(before: list, after: list, parties: dict) -> dict:
    """TCP payload bytes each ordered pair of parties sent between two
    tcp_sockets() snapshots; parties: {pid: party}. Both ends of every
    connection are in this namespace (loopback), so the peer of a socket is
    the party whose socket has that address as its local end. ss finds a
    socket's pid by reading /proc/PID/fd, which can miss a socket while its
    process opens or closes descriptors (one CI run lost a link's 16 KB so):
    an address either snapshot saw with a pid keeps that owner."""
    owner = {s["local"]: parties[s["pid"]] for s in before + after if s["pid"] in parties}
    old = {(s["local"], s["peer"]): s["sent"] for s in before}
    out = {}
    for s in after:
        src, dst = parties.get(s["pid"]) or owner.get(s["local"]), owner.get(s["peer"])
        if src and dst and src != dst:
            sent = s["sent"] - old.get((s["local"], s["peer"]), 0)
            key = f"{src}->{dst}"
            out[key] = out.get(key, 0) + max(0, sent)
    return {k: v for k, v in out.items() if v}


def links_json(links) -> dict:
    """{(src, dst): (messages, bytes)} -> {"src->dst": bytes}."""
    return {f"{s}->{d}": int(v[1]) for (s, d), v in sorted(links.items()) if v[1]}


REPLY = "REPLY "


class Worker:
    """One setting's driver: runs the workloads a command at a time, so that
    the settings can be interleaved call by call (they then share whatever
    else runs on the machine alike)."""

    def __init__(self):
        import tensorflow as tf
        tf.get_logger().setLevel("ERROR")
        t0 = time.perf_counter()
        if F.cluster:
            tp.init(cluster=F.cluster, timeout=F.timeout_s)
        else:
            tp.init()
        self.init_s = time.perf_counter() - t0
        self.parties = None
        if F.server_pids:
            self.parties = {int(p): r.upper() for r, p in json.loads(F.server_pids).items()}
            self.parties[os.getpid()] = "client"
        # per workload: tp.stats() of each timed call; ss bytes of the last
        self.workloads, self.counted, self.wire = {}, {}, {}

    def setup(self) -> dict:
        t0 = time.perf_counter()
        self.workloads = build_workloads(QUICK if F.quick else FULL, F.quick, families())
        return {"init_s": self.init_s, "setup_s": time.perf_counter() - t0,
                "servers": tp.servers()}

    def warmup(self, name: str) -> dict:
        t0 = time.perf_counter()
        self.workloads[name][0]()  # tracing, first-run setup
        first = time.perf_counter() - t0
        self.counted[name] = []
        return {"first_s": first}

    def call(self, name: str) -> dict:
        """One timed call of workload `name`. The counters (TF state the
        graph advances) are read around it, outside the timed span, so that
        several workloads can be timed in turn (the comparison families of
        one workload, interleaved)."""
        with tp.stats() as st:   # (its reads of the counters fall outside ss's window)
            before = tcp_sockets() if self.parties else None
            t0 = time.perf_counter()
            self.workloads[name][0]()
            t = time.perf_counter() - t0
            if self.parties:
                time.sleep(0.1)  # trailing control messages
                self.wire[name] = pair_bytes(before, tcp_sockets(), self.parties)
        self.counted[name].append(st)
        return {"time_s": t}

    def finish(self, name: str) -> dict:
        sts = self.counted.pop(name)
        n = len(sts)
        links = {}
        for st in sts:
            for k, v in links_json(st.links).items():
                links[k] = links.get(k, 0) + v
        _, plain, bill = self.workloads[name]
        row = {"rounds": sum(s.rounds for s in sts) // n,
               "multiplications": sum(s.multiplications for s in sts) // n,
               "comparisons": sum(s.comparisons for s in sts) // n,
               "channel_bytes": {k: v // n for k, v in links.items()},
               # None: the channels' counters stand for it (a training
               # step's bill would trace the step again)
               "bill": bill().as_dict() if bill else None, "wire_bytes": self.wire.get(name)}
        if not F.cluster:  # plaintext TF, in the embedded driver
            plain()
            row["plaintext_times_s"] = repeat(plain, 1 if F.quick else max(3, F.reps),
                                              F.budget_s)
        return row


def run_worker() -> None:
    """Answers JSON commands from stdin ({"cmd": "warmup", "name": ...}), one
    REPLY line each on stdout (TF's own output cannot pass for one)."""
    import traceback
    worker = Worker()
    print(REPLY + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req.pop("cmd")
        if cmd == "exit":
            break
        try:
            reply = getattr(worker, cmd)(**req)
        except Exception as e:  # reported by the orchestrator, which drops this setting
            reply = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        print(REPLY + json.dumps(reply), flush=True)
    sys.stdout.flush()
    # a process that joined a cluster cannot tear TF down cleanly
    os._exit(0)
