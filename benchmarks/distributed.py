"""Network figures (issue 11): the same private workloads embedded, on four
server processes over loopback, and on a simulated LAN and WAN, with the
bytes each server pair sent beside the protocols' declared cost bill.

Workloads (128-bit ring): a private multiplication of 10^6 elements, a
1024x1024 private matmul, 10^5 comparisons (tp.less, garbling included),
LeNet-5 inference at batch 100 (the Keras model converted as in
benchmarks/converter.py, input shared by the client, predictions revealed to
it) and one logistic-regression SGD step at batch 128 on MNIST (as in
benchmarks/training.py). The first three end with a one-element reveal to
the driver, so every timed call ends with a result on the client.

Settings, each with a driver process of its own (a process that joined a
cluster cannot go back to the embedded mode):
  embedded   tp.init(): the four servers as logical devices of one process;
             plaintext TensorFlow for the same workloads is timed here too.
  loopback   tf_privpy.cluster.LocalCluster: four server processes and the
             driver on 127.0.0.1; bytes per server pair are measured here.
  lan, wan   the four servers and the driver in five network namespaces on a
             bridge (benchmarks/_netns.py; needs root), each uplink shaped by
             tc tbf. TF-Encrypted's settings: LAN 40 Gbps / 0.01 ms,
             WAN 352 Mbps / 20 ms RTT. This kernel has no netem: the WAN's
             latency comes from a delaying TCP relay in each namespace (its
             RTT is calibrated and measured); the LAN adds none (the veth
             path's own RTT is measured and reported).

Embedded and loopback are started together and stay up; each workload is
warmed up on both and then timed one call at a time on each in turn, so that
whatever else the machine runs weighs on both alike (an idle driver or server
uses no CPU). LAN and WAN run the same way after them, each alone (during
LeNet-5 b100 a cluster's servers hold GBs: three clusters at once do not fit
in the machine's 24 GB). Each time is the median of up to --reps calls after
the warm-up call (fewer when a call is slow: a setting stops repeating once
another call would take it past --budget_s), reported with min and max. The
whole program takes about 10 minutes on two cores; --quick runs tiny sizes
(embedded and loopback only unless --parts says otherwise) in about a minute.

    python benchmarks/distributed.py                          # what `make bench` runs
    python benchmarks/distributed.py --quick --parts=embedded,loopback,lan
    python benchmarks/distributed.py --parts=wan --workloads=mul,lr_step

Results go to benchmarks/results/distributed.json, distributed.png and
distributed.md (the tables as markdown).
"""
import contextlib
import json
import os
import queue
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from absl import app, flags

# imported before absl parses the flags, as in the other benchmarks: imported
# first inside app.run's main, Keras' Sequential fails to build (TF 2.14)
import tf_privpy as tp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

flags.DEFINE_list("parts", None, "settings to run: embedded, loopback, lan, wan (default: all; "
                  "with --quick: embedded, loopback)")
flags.DEFINE_list("workloads", None, "workloads to time: " + ", ".join(
    ("mul", "matmul", "less", "lenet5", "lr_step")) + " (default: all)")
flags.DEFINE_bool("quick", False, "tiny sizes, one repeat: checks that everything runs")
flags.DEFINE_integer("reps", 5, "timed calls per workload at most (median, min, max)")
flags.DEFINE_float("budget_s", 30.0, "stop repeating a workload once its timed calls "
                   "would exceed this many seconds (at least one is timed)")
flags.DEFINE_float("timeout_s", 120.0, "the clusters' failure-detection timeout")
flags.DEFINE_string("out", os.path.join(HERE, "results"), "folder for distributed.json/.png/.md")
# internal: one setting's driver process
flags.DEFINE_bool("worker", False, "(internal) be one setting's driver: commands on stdin")
flags.DEFINE_string("cluster", None, "(internal) the worker's cluster file (none: embedded)")
flags.DEFINE_string("server_pids", None, "(internal) {role: pid} JSON: measure TCP bytes "
                    "per server pair with ss")
F = flags.FLAGS

PARTS = ("embedded", "loopback", "lan", "wan")
WORKLOADS = ("mul", "matmul", "less", "lenet5", "lr_step")
FULL = {"mul": 10 ** 6, "matmul": 1024, "less": 10 ** 5, "lenet5": 100, "lr_step": 128}
QUICK = {"mul": 1000, "matmul": 16, "less": 100, "lenet5": 2, "lr_step": 8}
#: the network settings of TF-Encrypted's benchmarks (shared/ANCHORS.md)
NETWORKS = {"lan": {"rate": "40gbit", "rtt_ms": 0.01}, "wan": {"rate": "352mbit", "rtt_ms": 20.0}}
#: issue 11: distributed on loopback within 1.5x of embedded for these


def chosen() -> tuple:
    """The workloads --workloads selects, in the report's order."""
    if not F.workloads:
        return WORKLOADS
    unknown = sorted(set(F.workloads) - set(WORKLOADS))
    if unknown:
        raise app.UsageError(f"--workloads: unknown {unknown}; choose from {list(WORKLOADS)}")
    return tuple(w for w in WORKLOADS if w in F.workloads)


TARGET_RATIO = {"lenet5": 1.5, "matmul": 1.5}
#: TF-Encrypted's LR step at batch 128 on MNIST (ANCHORS.md), ms: LAN, WAN
TFE_LR_MS = {"lan": (10, 12), "wan": (760, 840)}
PORTS = {"client": 7100, "s1": 7101, "s2": 7102, "t1": 7103, "t2": 7104}
ROLES = ("s1", "s2", "t1", "t2")
#: the server pairs the protocols send on (DESIGN §5, §6)
PROTOCOL_PAIRS = ("S1->T1", "S1->T2", "S2->T1", "S2->T2", "T1->S2", "T2->S1")


def label(name: str, sizes: dict) -> str:
    n = sizes[name]
    return {"mul": f"mul {n:.0e}".replace("e+0", "e"), "matmul": f"matmul {n}x{n}",
            "less": f"less {n:.0e}".replace("e+0", "e"), "lenet5": f"LeNet-5 b{n}",
            "lr_step": f"LR step b{n}"}[name]


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
    the party whose socket has that address as its local end."""
    owner = {s["local"]: parties[s["pid"]] for s in after if s["pid"] in parties}
    old = {(s["local"], s["peer"]): s["sent"] for s in before}
    out = {}
    for s in after:
        src, dst = parties.get(s["pid"]), owner.get(s["peer"])
        if src and dst and src != dst:
            sent = s["sent"] - old.get((s["local"], s["peer"]), 0)
            key = f"{src}->{dst}"
            out[key] = out.get(key, 0) + max(0, sent)
    return {k: v for k, v in out.items() if v}


def links_json(links) -> dict:
    """{(src, dst): (messages, bytes)} -> {"src->dst": bytes}."""
    return {f"{s}->{d}": int(v[1]) for (s, d), v in sorted(links.items()) if v[1]}


def build_workloads(sizes: dict, quick: bool) -> dict:
    """name -> (run, plaintext run, bill): run() does one timed call, bill()
    the protocols' declared cost of one call (protocols/mpc/cost.py)."""
    import numpy as np
    import tensorflow as tf
    from _report import plain_sgd_step
    rng = np.random.default_rng(0)
    out = {}

    def elementwise(name, fn, plain_fn, a, b):
        """fn on private a, b inside one tf.function; plain_fn on float32."""
        pa, pb = tp.share(a), tp.share(b)
        f, pf = tf.function(fn), tf.function(plain_fn)
        ta, tb = tf.constant(a, tf.float32), tf.constant(b, tf.float32)
        out[name] = (lambda: f(pa, pb).numpy(), lambda: pf(ta, tb).numpy(),
                     lambda: tp.cost(fn, pa, pb))

    n = sizes["mul"]
    elementwise("mul", lambda a, b: tp.reveal((a * b)[:1]), lambda a, b: a * b,
                rng.normal(0, 10, n), rng.normal(0, 10, n))
    s = sizes["matmul"]
    elementwise("matmul", lambda a, b: tp.reveal((a @ b)[:1, :1]), tf.matmul,
                rng.normal(0, 1, (s, s)), rng.normal(0, 1, (s, s)))
    n = sizes["less"]
    elementwise("less", lambda a, b: tp.reveal(tp.less(a, b)[:1]), lambda a, b: a < b,
                rng.uniform(-100, 100, n), rng.uniform(-100, 100, n))

    # MNIST digits; --quick: random images and an untrained LeNet-5 (the
    # time does not depend on the values; loading and training would dominate)
    if quick:
        x = rng.uniform(0, 1, (256, 28, 28, 1)).astype(np.float32)
        y = rng.integers(0, 10, 256)
        xt = x
    else:
        (x, y), (xt, _) = tp.datasets.load_mnist(flatten=False)
    b = sizes["lenet5"]
    model = tp.models.lenet5() if quick else tp.models.train("lenet5", x, y)
    private = tp.keras.convert(model)
    xb = xt[:b]
    plain_model = tf.function(lambda v: model(v, training=False))
    out["lenet5"] = (lambda: private.predict(xb, reveal=True).numpy(),
                     lambda: plain_model(xb).numpy(),
                     lambda b=b: private.cost(b) + tp.cost(tp.reveal, tp.share(np.zeros((b, 10)))))

    # one LR step at batch 128 on MNIST 0-4 vs 5-9, as benchmarks/training.py
    b = sizes["lr_step"]
    xs, ys = tp.datasets.mnist_binary(x[:b].reshape(b, 784), y[:b])
    bce = tf.keras.losses.BinaryCrossentropy()
    tf.keras.utils.set_random_seed(0)
    trainer = tp.keras.convert_training(tp.models.logistic_regression(784), bce,
                                        tf.keras.optimizers.SGD(0.1))
    plain_step = plain_sgd_step(tp.models.logistic_regression(784), bce,
                                tf.keras.optimizers.SGD(0.1))
    # the step returns nothing: TF's synchronous execution returns when the
    # servers are done (the eager executor waits for every component function)
    out["lr_step"] = (lambda: trainer.step(xs, ys), lambda: plain_step(xs, ys),
                      lambda b=b: trainer.cost(b))
    return out


def repeat(fn, reps: int, budget_s: float) -> list:
    """Times up to `reps` calls of fn, fewer once another call would take the
    total past budget_s (at least one)."""
    times = []
    while len(times) < reps and (not times or sum(times) + times[-1] <= budget_s):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


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
        self.workloads, self.stats, self.calls, self.wire = {}, None, 0, None

    def setup(self) -> dict:
        t0 = time.perf_counter()
        self.workloads = build_workloads(QUICK if F.quick else FULL, F.quick)
        return {"init_s": self.init_s, "setup_s": time.perf_counter() - t0,
                "servers": tp.servers()}

    def warmup(self, name: str) -> dict:
        t0 = time.perf_counter()
        self.workloads[name][0]()  # tracing, first-run setup
        first = time.perf_counter() - t0
        # the counters advance in TF state per call: read once around the
        # timed calls (untimed) and divided by their number
        self.stats, self.calls, self.wire = tp.stats(), 0, None
        self.stats.__enter__()
        return {"first_s": first}

    def call(self, name: str) -> dict:
        before = tcp_sockets() if self.parties else None
        t0 = time.perf_counter()
        self.workloads[name][0]()
        t = time.perf_counter() - t0
        if self.parties:
            time.sleep(0.1)  # trailing control messages
            self.wire = pair_bytes(before, tcp_sockets(), self.parties)
        self.calls += 1
        return {"time_s": t}

    def finish(self, name: str) -> dict:
        st, n = self.stats, self.calls
        st.__exit__(None, None, None)
        _, plain, bill = self.workloads[name]
        row = {"rounds": st.rounds // n, "multiplications": st.multiplications // n,
               "comparisons": st.comparisons // n,
               "channel_bytes": {k: v // n for k, v in links_json(st.links).items()},
               "bill": bill().as_dict(), "wire_bytes": self.wire}
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


# ======================================================================
# The orchestrating side
# ======================================================================
def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p and p != ROOT])
    return env


def _tail(path: str, lines: int = 25) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class Driver:
    """One setting's driver process (run_worker), spoken to in JSON lines.

    Args:
      popen: how to start it (subprocess.Popen, or a namespace's popen).
      cluster, pids: its cluster file and the servers' pids (ss byte counts).
    """

    def __init__(self, part: str, tmp: str, popen=subprocess.Popen, cluster=None, pids=None):
        self.part, self.log = part, os.path.join(tmp, f"{part}.err")
        argv = [sys.executable, os.path.abspath(__file__), "--worker", f"--reps={F.reps}",
                f"--budget_s={F.budget_s}", f"--timeout_s={F.timeout_s}"]
        argv += ["--quick"] if F.quick else []
        argv += [f"--cluster={cluster}"] if cluster else []
        argv += [f"--server_pids={json.dumps(pids)}"] if pids else []
        with open(self.log, "w") as err:
            self.proc = popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                              text=True, env=_env())
        self.replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(REPLY):
                self.replies.put(json.loads(line[len(REPLY):]))
        self.replies.put({"error": f"the driver exited with code {self.proc.wait()}"})

    def send(self, cmd: str, **kwargs) -> None:
        self.proc.stdin.write(json.dumps(dict(cmd=cmd, **kwargs)) + "\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 1800) -> dict:
        try:
            r = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"no answer within {timeout:.0f} s") from None
        if "error" in r:
            raise RuntimeError(f"{r['error']}\n{r.get('traceback') or _tail(self.log)}")
        return r

    def call(self, cmd: str, **kwargs) -> dict:
        self.send(cmd, **kwargs)
        return self.reply()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("exit")
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def start_servers(tb, path: str, log_dir: str, timeout: float = 240.0) -> None:
    """The four tf_privpy servers, each in its namespace; returns when each
    printed its ready line (tf_privpy/server.py)."""
    procs = {}
    for role in ROLES:
        procs[role] = tb.popen(role, [sys.executable, "-m", "tf_privpy.server", "--role", role,
                                      "--cluster", path, "--exit_with_parent"],
                               log=os.path.join(log_dir, role), env=_env())
    deadline = time.monotonic() + timeout
    pending = list(ROLES)
    while pending:
        for role in list(pending):
            if procs[role].poll() is not None:
                raise RuntimeError(f"server {role} exited with code {procs[role].returncode}:\n"
                                   + _tail(os.path.join(log_dir, role + ".err")))
            with open(os.path.join(log_dir, role + ".out"), errors="replace") as f:
                if f"tf_privpy server {role} ready on " in f.read():
                    pending.remove(role)
        if pending and time.monotonic() > deadline:
            raise RuntimeError(f"servers {pending} did not start within {timeout:.0f} s")
        time.sleep(0.2)


def start_network(kind: str, tmp: str, stack: contextlib.ExitStack):
    """LAN or WAN: a testbed of network namespaces, relays for the WAN's
    latency, four servers and a driver in it; returns (driver, network info)."""
    import _netns
    from tf_privpy import cluster_file as cf
    net = NETWORKS[kind]
    one_way = net["rtt_ms"] / 2 if kind == "wan" else 0.0
    log_dir = os.path.join(tmp, kind)
    os.makedirs(log_dir, exist_ok=True)
    tb = stack.enter_context(_netns.Testbed(net["rate"], one_way, name=kind))
    info = {"kind": f"{kind}: 5 network namespaces on a bridge, tbf {net['rate']} per uplink",
            "rate": net["rate"], "target_rtt_ms": net["rtt_ms"]}
    if one_way:
        tb.calibrate(net["rtt_ms"])
        info["measured"] = tb.measure("client", "s1", via_relay=True)
        info["relay_delay_ms"] = tb.delay_ms
        tb.start_relays(PORTS, log_dir)
        tasks = {r: f"127.0.0.1:{p}" for r, p in PORTS.items()}
    else:
        info["measured"] = tb.measure("client", "s1")
        tasks = {r: f"{tb.address(r)}:{p}" for r, p in PORTS.items()}
    print(f"  {kind}: RTT {info['measured']['rtt_ms']:.3f} ms, one TCP stream "
          f"{info['measured']['mbit_s']:.0f} Mbit/s (Python sockets)", flush=True)
    from tf_privpy.cluster import make_identity_key
    from tf_privpy.server import default_identity_key
    path = os.path.join(log_dir, "cluster.json")
    keys = {r: make_identity_key(default_identity_key(path, r), overwrite=True)
            for r in cf.ROLES}  # each server's identity key, beside the file it reads
    cf.Cluster(tasks=tasks, library=cf.library_identity(), timeout_s=F.timeout_s,
               identity=keys).save(path)
    start_servers(tb, path, log_dir)
    driver = Driver(kind, tmp, lambda argv, **kw: tb.popen("client", argv, **kw), path)
    return stack.enter_context(contextlib.closing(driver)), info


def start_part(part: str, tmp: str, stack: contextlib.ExitStack):
    """(driver, network info) of a setting; what it started stops with `stack`."""
    if part == "embedded":
        driver = Driver(part, tmp)
        info = {"kind": "embedded: one process, the parties as logical CPU devices"}
    elif part == "loopback":
        from tf_privpy.cluster import LocalCluster
        c = stack.enter_context(LocalCluster(timeout_s=F.timeout_s))
        driver = Driver(part, tmp, cluster=c.path, pids=c.pids)
        info = {"kind": "loopback: four server processes and the driver on 127.0.0.1"}
    else:
        return start_network(part, tmp, stack)
    return stack.enter_context(contextlib.closing(driver)), info


def measure(parts: list, res: dict, tmp: str) -> None:
    """Starts the settings `parts`, then runs each workload on all of them,
    one call at a time in turn, into res["settings"]; stops them."""
    drivers = {}

    def drop(part: str, what: str, e: Exception) -> None:
        res["errors"][part] = f"{what}: {e}"
        print(f"{part}: FAILED: {what}: {e}", flush=True)
        drivers.pop(part).close()
        res["settings"].pop(part, None)

    def ask(part: str, cmd: str, **kwargs):
        """A command to a setting's driver; a failure drops the setting."""
        try:
            return drivers[part].call(cmd, **kwargs)
        except (RuntimeError, OSError) as e:
            drop(part, cmd, e)
            return None

    with contextlib.ExitStack() as stack:
        for part in parts:
            if part in ("lan", "wan"):
                import _netns
                why = _netns.unavailable_reason()
                if why:
                    res["skipped"][part] = why
                    print(f"{part}: skipped: {why}", flush=True)
                    continue
            print(f"starting {part}", flush=True)
            try:
                drivers[part], info = start_part(part, tmp, stack)
            except Exception as e:  # the others still run; exit code 1 at the end
                if type(e).__name__ == "NetnsUnavailable":
                    res["skipped"][part] = str(e)
                    print(f"{part}: skipped: {e}", flush=True)
                else:
                    res["errors"][part] = f"{type(e).__name__}: {e}"
                    print(f"{part}: FAILED: {e}", flush=True)
                continue
            res["settings"][part] = {"network": info, "workloads": {}}
        # the drivers connect and build their workloads at the same time
        for part in list(drivers):
            try:
                drivers[part].reply(600)  # ready: imported, tp.init done
                drivers[part].send("setup")
            except (RuntimeError, OSError) as e:
                drop(part, "start", e)
        for part in list(drivers):
            try:
                res["settings"][part].update(drivers[part].reply())
            except (RuntimeError, OSError) as e:
                drop(part, "setup", e)
        for name in chosen():
            first, times = {}, {}
            for part in list(drivers):
                r = ask(part, "warmup", name=name)
                if r:
                    first[part], times[part] = r["first_s"], []
            active = [p for p in drivers if p in times]
            while active:  # one call of each setting in turn
                for part in list(active):
                    r = ask(part, "call", name=name)
                    if r is None:
                        active.remove(part)
                        continue
                    ts = times[part]
                    ts.append(r["time_s"])
                    reps = 1 if F.quick else F.reps
                    if len(ts) >= reps or sum(ts) + ts[-1] > F.budget_s:
                        active.remove(part)
            for part in list(drivers):
                row = ask(part, "finish", name=name)
                if row:
                    row.update(first_s=first[part], times_s=times[part])
                    res["settings"][part]["workloads"][name] = row
            print(f"  {label(name, res['sizes'])}: " + ", ".join(
                f"{p} {1e3 * med(times[p]):.1f} ms ({len(times[p])})" for p in drivers),
                flush=True)


class CpuMeter:
    """CPU that other processes of the machine used during the run: all busy
    time (/proc/stat user+nice+system) minus this process's and its
    descendants' (the servers and drivers, reaped by the time result() runs)."""

    def __init__(self):
        self.t, self.busy, self.ours = time.monotonic(), self._busy(), self._ours()
        self.load = os.getloadavg()

    @staticmethod
    def _busy() -> float:
        with open("/proc/stat") as f:
            cols = f.readline().split()[1:4]
        return sum(int(c) for c in cols) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _ours() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
            resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def result(self) -> dict:
        wall = time.monotonic() - self.t
        other = (self._busy() - self.busy) - (self._ours() - self.ours)
        return {"wall_s": wall, "other_cores": max(0.0, other / wall),
                "loadavg_before": self.load, "loadavg_after": os.getloadavg()}


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
        for name in chosen():
            e = emb["workloads"][name] if emb else None
            lp = loop["workloads"][name] if loop else None
            ratio = med(lp["times_s"]) / med(e["times_s"]) if e and lp else None
            target = TARGET_RATIO.get(name)
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
        for name in chosen():
            la = lan["workloads"][name] if lan else None
            wa = wan["workloads"][name] if wan else None
            any_ = la or wa
            rounds = any_["rounds"]
            uplink = {}
            for k, v in any_["bill"]["links"].items():
                uplink[k.split("->")[0]] = uplink.get(k.split("->")[0], 0) + v["bytes"]
            bw_s = max(uplink.values()) * 8 / rate if uplink else 0.0
            est = f"{1e3 * med(la['times_s']) + rounds * rtt:.0f}" if la else "-"
            anchor = "-"
            if name == "lr_step" and sizes[name] == 128:
                anchor = (f"LAN {TFE_LR_MS['lan'][0]}-{TFE_LR_MS['lan'][1]}, "
                          f"WAN {TFE_LR_MS['wan'][0]}-{TFE_LR_MS['wan'][1]}")
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
        for name in chosen():
            w = src["workloads"][name]
            bill = {k: v["bytes"] for k, v in w["bill"]["links"].items() if v["bytes"]}
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
            row.append("yes" if w["channel_bytes"] == bill else "NO")
            rows.append(row)
        where = "loopback" if loop else "embedded"
        out.append((f"MB (10^6 B) sent per pair in one call, {where}: declared cost bill / TCP "
                    "payload measured with ss",
                    ["workload"] + [p.replace("->", "→") for p in PROTOCOL_PAIRS]
                    + ["other server pairs (TCP)", "client→servers", "servers→client",
                       "TCP / bill between servers", "channel counters = bill"], rows))
    return out


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


def main(argv):
    del argv
    if F.worker:
        return run_worker()
    chosen()  # a wrong --workloads fails before any cluster starts
    sys.path.insert(0, HERE)
    from _report import bar_png, machine, print_table, write_json
    sizes = QUICK if F.quick else FULL
    parts = F.parts or (["embedded", "loopback"] if F.quick else list(PARTS))
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise app.UsageError(f"--parts: unknown {sorted(unknown)}; choose from {PARTS}")
    res = {"machine": machine(), "quick": F.quick, "sizes": sizes, "reps": F.reps,
           "settings": {}, "skipped": {}, "errors": {}}
    tmp = tempfile.mkdtemp(prefix="tf_privpy_netbench_")

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)  # unwinds: drivers, servers, namespaces stop
    meter = CpuMeter()
    # embedded and loopback side by side; LAN and WAN each alone after them:
    # during LeNet-5 b100 a cluster's servers hold GBs (the garbled tables and
    # gRPC's copies of them), and three clusters at once do not fit in 24 GB
    groups = [[p for p in parts if p in ("embedded", "loopback")]]
    groups += [[p] for p in parts if p in ("lan", "wan")]
    try:
        for group in filter(None, groups):
            measure(group, res, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["cpu"] = meter.result()

    cpu = res["cpu"]
    md = [f"Measured {res['machine']['date']} on {res['machine']['cpus']} cores"
          f"{' (--quick sizes)' if F.quick else ''}, embedded and loopback interleaved call "
          "by call. "
          f"Other processes used {cpu['other_cores']:.2f} cores on average meanwhile"
          f"{' (UNDER LOAD)' if cpu['other_cores'] > 0.25 else ''}; load average "
          f"{cpu['loadavg_before'][0]:.1f} before, {cpu['loadavg_after'][0]:.1f} after.\n"]
    print(md[0])
    for title, header, rows in tables(res):
        print_table(title, header, rows)
        md.append(markdown(title, header, rows))
    for part, info in ((p, s["network"]) for p, s in res["settings"].items() if "network" in s):
        if "measured" in info:
            print(f"{part}: {info['kind']}; measured RTT {info['measured']['rtt_ms']:.3f} ms, "
                  f"{info['measured']['mbit_s']:.0f} Mbit/s one TCP stream")
    for part, why in res["skipped"].items():
        md.append(f"{part}: not measured: {why}\n")
    os.makedirs(F.out, exist_ok=True)
    write_json(os.path.join(F.out, "distributed.json"), res)
    with open(os.path.join(F.out, "distributed.md"), "w") as f:
        f.write("\n".join(md))
    print(f"wrote {os.path.join(F.out, 'distributed.md')}")
    series = {}
    emb = res["settings"].get("embedded")
    if emb:
        series["plaintext TF"] = [1e3 * med(emb["workloads"][n]["plaintext_times_s"])
                                  for n in chosen()]
    for part in PARTS:
        if part in res["settings"]:
            series[part] = [1e3 * med(res["settings"][part]["workloads"][n]["times_s"])
                            for n in chosen()]
    if series:
        bar_png(os.path.join(F.out, "distributed.png"), "median ms per call, by setting",
                [label(n, sizes) for n in chosen()], series, "ms", legend_outside=True)
    if res["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
