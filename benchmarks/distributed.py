"""Network figures (issue 11): the same private workloads embedded, on four
server processes over loopback, and on a simulated LAN and WAN, with the
bytes each server pair sent beside the protocols' declared cost bill.

Workloads (128-bit ring): a private multiplication of 10^6 elements, a
1024x1024 private matmul, 10^5 comparisons (tp.less, all phases: garbling or
the dealer's triples included), ReLU of 10^5, LeNet-5 inference at batch 100
(the Keras model converted as in benchmarks/converter.py, input shared by
the client, predictions revealed to it) and one logistic-regression SGD step
at batch 128 on MNIST (as in benchmarks/training.py). The element-wise ones
end with a one-element reveal to the driver, so every timed call ends with a
result on the client.

The comparing workloads (less, ReLU, LeNet-5) run once per comparison family
of --comparisons (issue 26: "garbled", PrivPy's garbled circuits, and
"bitwise", protocols/mpc/bitwise/), each a row of its own ("less 1e5
bitwise"), with its own tf.functions traced inside tp.comparison(family):
the driver builds every graph, so the scope there chooses what the servers
run (tests/test_benchmarks_smoke.py checks the bytes on the cluster's
links). A workload's families are timed in turn call by call, like the
settings, and a last table sets them side by side per setting: time, rounds,
bytes between the servers per element or image, and the ratio to embedded.

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
whatever else the machine runs weighs on all alike (an idle driver or server
uses no CPU). LAN and WAN run the same way after them, each alone (during
LeNet-5 b100 a cluster's servers hold GBs: three clusters at once do not fit
in the machine's 24 GB). Each time is the median of up to --reps calls after
the warm-up call (fewer when a call is slow: a setting stops repeating once
another call would take it past --budget_s), reported with min and max. On
two loaded cores, less, ReLU and LeNet-5 under both families took 4 minutes
embedded and loopback (--reps=3 --budget_s=15) and 8.5 minutes LAN and WAN;
the garbled LeNet-5 b100 takes about 20 s a call on loopback, 56 s on the WAN.
--quick runs tiny sizes (embedded and loopback only unless --parts says
otherwise) in about two minutes.

    python benchmarks/distributed.py                          # what `make bench` runs
    python benchmarks/distributed.py --quick --parts=embedded,loopback,lan
    python benchmarks/distributed.py --parts=wan --workloads=mul,lr_step
    python benchmarks/distributed.py --workloads=less,relu,lenet5 --comparisons=bitwise
    python benchmarks/distributed.py --workloads=tfe_steps --parts=embedded,lan,wan --reps=2

--workloads=tfe_steps adds TF-Encrypted's training rows (issue 28; the rows
of benchmarks/tfe_suite.py: one SGD, AMSgrad or Adam step of batch 128 of LR
or networks A-D on the shipped digits, after a first step that converts and
traces), each row alone on every setting, timed with the channels' counters
and no declared bill (it would trace each step again).

Results go to benchmarks/results/distributed.json, distributed.png and
distributed.md (the tables as markdown).
"""
import contextlib
import json
import os
import queue
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
    ("mul", "matmul", "less", "relu", "lenet5", "lr_step", "tfe_steps")) + " (default: all "
    "but tfe_steps: TF-Encrypted's training rows, an hour on the four settings)")
flags.DEFINE_list("tfe_rows", None, "with --workloads=tfe_steps: the rows, model-optimizer "
                  "(lr, network_a..network_d; sgd, amsgrad, adam), e.g. network_a-adam "
                  "(default: all 15)")
flags.DEFINE_list("comparisons", None, "comparison families the comparing workloads (less, "
                  "relu, lenet5) run under, each its own row: garbled, bitwise (default: both)")
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

# The workloads and their constants, the worker (one driver process per
# setting) and the report tables live beside this program; the worker runs
# as `distributed.py --worker`, so these flags are the only ones.
from _distributed_report import markdown, med, tables  # noqa: E402
from _distributed_worker import REPLY, run_worker  # noqa: E402
from _distributed_workloads import (  # noqa: E402
    FULL, NETWORKS, PARTS, PORTS, QUICK, ROLES, families, groups, keys, label)


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
        # what the worker builds: the workloads (and rows, families) timed
        for name in ("workloads", "tfe_rows", "comparisons"):
            if getattr(F, name):
                argv.append(f"--{name}={','.join(getattr(F, name))}")
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
    printed its ready line (tf_privpy/deploy/server.py)."""
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
    from tf_privpy.deploy import cluster_file as cf
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
    from tf_privpy.deploy.cluster import make_identity_key
    from tf_privpy.deploy.server import default_identity_key
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
        from tf_privpy.deploy.cluster import LocalCluster
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
        for _, group in groups():
            # a workload's keys (its comparison families) on every setting,
            # one call of each (setting, key) in turn
            first, times = {}, {}
            for key in group:
                for part in list(drivers):
                    r = ask(part, "warmup", name=key)
                    if r:
                        first[part, key], times[part, key] = r["first_s"], []
            active = [pk for pk in times if pk[0] in drivers]
            while active:
                for pk in list(active):
                    if pk[0] not in drivers:
                        active.remove(pk)
                        continue
                    r = ask(pk[0], "call", name=pk[1])
                    if r is None:
                        active.remove(pk)
                        continue
                    ts = times[pk]
                    ts.append(r["time_s"])
                    reps = 1 if F.quick else F.reps
                    if len(ts) >= reps or sum(ts) + ts[-1] > F.budget_s:
                        active.remove(pk)
            for key in group:
                for part in list(drivers):
                    if (part, key) not in times:
                        continue
                    row = ask(part, "finish", name=key)
                    if row:
                        row.update(first_s=first[part, key], times_s=times[part, key])
                        res["settings"][part]["workloads"][key] = row
                print(f"  {label(key, res['sizes'])}: " + ", ".join(
                    f"{p} {1e3 * med(times[p, key]):.1f} ms ({len(times[p, key])})"
                    for p in drivers if (p, key) in times), flush=True)


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



def main(argv):
    del argv
    if F.worker:
        return run_worker()
    keys()  # a wrong --workloads or --comparisons fails before any cluster starts
    sys.path.insert(0, HERE)
    from _report import bar_png, cpu_model, machine, print_table, write_json
    sizes = QUICK if F.quick else FULL
    parts = F.parts or (["embedded", "loopback"] if F.quick else list(PARTS))
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise app.UsageError(f"--parts: unknown {sorted(unknown)}; choose from {PARTS}")
    res = {"machine": machine(), "cpu": cpu_model(), "quick": F.quick, "sizes": sizes,
           "reps": F.reps,
           "comparisons": list(families()),
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
    md = [f"Measured {res['machine']['date']} on {res['machine']['cpus']} cores "
          f"({res['cpu']})"
          f"{' (--quick sizes)' if F.quick else ''}, "
          f"{' and '.join(p for p in PARTS if p in res['settings']) or 'no setting'}; "
          "the calls of each workload interleaved (settings run together: embedded and "
          "loopback; comparison families). "
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
        series["plaintext TF"] = [1e3 * med(emb["workloads"][k]["plaintext_times_s"])
                                  if k in emb["workloads"] else 0.0 for k in keys()]
    for part in PARTS:
        if part in res["settings"]:
            w = res["settings"][part]["workloads"]
            series[part] = [1e3 * med(w[k]["times_s"]) if k in w else 0.0 for k in keys()]
    if series:
        bar_png(os.path.join(F.out, "distributed.png"), "median ms per call, by setting",
                [label(k, sizes) for k in keys()], series, "ms", legend_outside=True)
    if res["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
