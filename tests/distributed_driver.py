"""A tf_privpy driver process for tests/test_distributed.py.

The test process runs the embedded runtime (tests/conftest.py), and TF 2.14
cannot connect a process to a cluster and go back, so the distributed driver
is this separate process. It reads one JSON command per line on stdin and
answers one JSON line on stdout (prefixed with REPLY so that TF's own output
cannot be mistaken for an answer).
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import graphcheck  # noqa: E402
import tf_privpy as tp  # noqa: E402

REPLY = "REPLY "
state = {}


def error_reply(e: BaseException) -> dict:
    return {"error": type(e).__name__, "message": str(e),
            "server": getattr(e, "server", None)}


def cmd_init(cluster: str, timeout: float) -> dict:
    t = time.perf_counter()
    tp.reset()
    try:
        tp.init(cluster=cluster, timeout=timeout)
    except Exception as e:  # reported to the test
        return error_reply(e)
    return {"init_s": time.perf_counter() - t, "servers": tp.servers(),
            "soft_placement": tf.config.get_soft_device_placement()}


def compute(x, y, a, b) -> dict:
    """The operations under test, on known inputs, revealed."""
    px, py = tp.share(np.array(x)), tp.share(np.array(y))
    pa, pb = tp.share(np.array(a)), tp.share(np.array(b))
    return {
        "share": tp.reveal(px).numpy().tolist(),
        "multiply": tp.reveal(px * py).numpy().tolist(),
        "matmul": tp.reveal(tp.matmul(pa, pb)).numpy().tolist(),
        "less": tp.reveal(tp.less(px, py)).numpy().tolist(),
        "relu": tp.reveal(tp.nn.relu(px)).numpy().tolist(),
        "sigmoid": tp.reveal(tp.sigmoid(px)).numpy().tolist(),
    }


def cmd_compute(x, y, a, b) -> dict:
    try:
        return compute(x, y, a, b)
    except Exception as e:
        return error_reply(e)


def socket_bytes(pids) -> dict:
    """{pid: [bytes received, bytes sent]} over the TCP sockets of each
    process, from the kernel's per-socket counters (ss -tinp)."""
    out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, check=True).stdout
    totals = {int(p): [0, 0] for p in pids}
    owner = None
    for line in out.splitlines():
        m = re.search(r"pid=(\d+),", line)
        if m:
            owner = int(m.group(1))
        rx = re.search(r"bytes_received:(\d+)", line)
        tx = re.search(r"bytes_acked:(\d+)", line)
        if owner in totals and (rx or tx):
            totals[owner][0] += int(rx.group(1)) if rx else 0
            totals[owner][1] += int(tx.group(1)) if tx else 0
            owner = None
    return totals


def cmd_placement(n: int, n_cmp: int, server_pids: dict) -> dict:
    """The traced graphs' devices (graphcheck), and the bytes each process
    received over TCP while a multiplication and a comparison ran."""
    devices = tp.servers()
    rng = np.random.default_rng(7)
    x, y = tp.share(rng.normal(size=n)), tp.share(rng.normal(size=n))
    out = {"violations": {}, "channels_to_client": {}, "devices": {}}
    fns = {"mul": lambda a, b: a * b, "less": lambda a, b: tp.less(a, b),
           "mul_reveal": lambda a, b: (a * b).reveal()}
    out["outputs"] = {}
    small = tp.share(np.ones(4)), tp.share(np.ones(4))
    for name, fn in fns.items():
        concrete = tf.function(fn).get_concrete_function(*small)
        out["violations"][name] = graphcheck.graph_violations(
            concrete, devices, graphcheck.share_inputs(concrete, 2))
        ends = {graphcheck._channel_ends(op) for op in concrete.graph.get_operations()}
        out["channels_to_client"][name] = sorted(
            f"{e[0]}->{e[1]}" for e in ends if e and e[1] == "client")
        parties = graphcheck.Parties(devices)
        out["outputs"][name] = [parties.of(t.op.device) for t in concrete.graph.outputs]
        out["devices"][name] = sorted({parties.of(op.device) for op in
                                       concrete.graph.get_operations()
                                       if op.type.startswith("TfPrivpy>")})
    pids = {"driver": os.getpid(), **{r: int(p) for r, p in server_pids.items()}}
    mul = tf.function(lambda a, b: a * b)
    cmp_ = tf.function(lambda a, b: tp.less(a, b))
    ident = tf.function(lambda a: tp.identity(a))
    xs, ys = x[:n_cmp], y[:n_cmp]
    mul(x, y), cmp_(xs, ys), ident(x)  # traced and run once: measure a steady run
    measured = {}
    for name, run in (("mul", lambda: mul(x, y)), ("less", lambda: cmp_(xs, ys)),
                      ("eager_mul", lambda: x * y), ("identity", lambda: ident(x)),
                      ("reveal", lambda: tp.reveal(x * y))):
        before = socket_bytes(pids.values())
        result = run()  # synchronous execution: returns when the servers are done
        if name == "reveal":
            result.numpy()
        time.sleep(0.2)  # let the kernel account the last segments
        after = socket_bytes(pids.values())
        measured[name] = {k: [after[p][0] - before[p][0], after[p][1] - before[p][1]]
                          for k, p in pids.items()}
    out["bytes"] = measured
    return out


def cmd_bench(n: int, reps: int) -> dict:
    rng = np.random.default_rng(3)
    x, y = tp.share(rng.normal(size=n)), tp.share(rng.normal(size=n))
    mul = tf.function(lambda a, b: a * b)
    times = {"eager": [], "tf_function": []}
    tp.reveal((x * y)[:1]), tp.reveal(mul(x, y)[:1])
    for _ in range(reps):
        for name, fn in (("eager", lambda: x * y), ("tf_function", lambda: mul(x, y))):
            t = time.perf_counter()
            tp.reveal(fn()[:1]).numpy()  # a one-element reveal: waits for the product
            times[name].append(time.perf_counter() - t)
    return {k: min(v) for k, v in times.items()}


def cmd_fault(pid: int, sig: str, delay: float, n: int) -> dict:
    """Sends `sig` to a server `delay` s into a loop of multiplications and
    reports the error the driver raised and how long after the signal."""
    rng = np.random.default_rng(5)
    x, y = tp.share(rng.normal(size=n)), tp.share(rng.normal(size=n))
    tp.reveal((x * y)[:1])
    sent = {}

    def kill():
        sent["t"] = time.perf_counter()
        os.kill(pid, getattr(signal, sig))

    timer = threading.Timer(delay, kill)
    timer.start()
    runs = 0
    try:
        while True:
            tp.reveal((x * y)[:1]).numpy()
            runs += 1
            if runs > 10_000:
                return {"error": None, "runs": runs}
    except Exception as e:
        timer.join()
        reply = error_reply(e)
        reply.update(elapsed=time.perf_counter() - sent["t"], runs=runs,
                     cause=type(e.__cause__).__name__ if e.__cause__ else None)
        return reply


def cmd_tamper(src: str, dst: str) -> dict:
    """The sealed links, then a multiplication while an attacker flips one
    bit of every sealed message crossing src -> dst (the interceptor's ops run
    on dst, between the transfer and the receiving kernel): the error."""
    from test_sealing import flip_bit
    rt = tp.get_runtime().runtime
    rng = np.random.default_rng(9)
    x, y = tp.share(rng.normal(size=1000)), tp.share(rng.normal(size=1000))

    def attack(s, d, tensors):
        return flip_bit(tensors, offset=100) if (s, d) == (src, dst) else tensors
    reply = {"secured": rt.channels.secured()}
    try:
        with rt.channels.intercept(attack):
            tp.reveal(x * y).numpy()
    except Exception as e:
        reply.update(error_reply(e))
    return reply


def cmd_embedded() -> dict:
    """tp.reset() then the embedded mode: refused in a connected process."""
    tp.reset()
    try:
        tp.init()
    except Exception as e:
        return error_reply(e)
    return {"servers": tp.servers()}


def cmd_check() -> dict:
    try:
        return {"servers": tp.check_servers()}
    except Exception as e:
        return error_reply(e)


def main() -> None:
    commands = {"init": cmd_init, "compute": cmd_compute, "placement": cmd_placement,
                "bench": cmd_bench, "fault": cmd_fault,
                "check": cmd_check, "embedded": cmd_embedded, "tamper": cmd_tamper}
    print(REPLY + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        name = req.pop("cmd")
        if name == "exit":
            break
        try:
            reply = commands[name](**req)
        except Exception as e:  # the test sees it instead of a hang
            reply = error_reply(e)
            reply["unexpected"] = True
        print(REPLY + json.dumps(reply), flush=True)
    sys.stdout.flush()
    os._exit(0)  # a process joined to a cluster cannot tear TF down cleanly


if __name__ == "__main__":
    main()
