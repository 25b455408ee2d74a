"""A tf_privpy driver process for tests/test_distributed.py (and
test_distributed_models.py, test_share_io.py).

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
from typing import Optional

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
    state["init"] = (cluster, timeout)  # cmd_large_array re-inits with its block size
    try:
        tp.init(cluster=cluster, timeout=timeout)
    except Exception as e:  # reported to the test
        return error_reply(e)
    return {"init_s": time.perf_counter() - t, "servers": tp.servers(),
            "soft_placement": tf.config.get_soft_device_placement()}


def cmd_init_swapped(cluster: str, timeout: float, role: str, key_path: str,
                     attacker_key_path: str, attacker_public: str) -> dict:
    """tp.init while a test-only hook swaps, in every constant the driver's
    graphs put on a server, `role`'s public key (the cluster file's) and its
    key path for an attacker's (test_kex.swapped_in_graphs): what an
    attacker on a driver-to-server link could do to the values sent. Then
    the usual computation. Reports what was swapped."""
    from test_kex import swapped_in_graphs
    from tf_privpy.deploy import cluster_file as cf
    real = bytes.fromhex(cf.load(cluster).identity[role])
    swaps = {real: bytes.fromhex(attacker_public),
             key_path.encode(): attacker_key_path.encode()}
    servers = [cf.device(r) for r in cf.ROLES]
    with swapped_in_graphs(swaps, servers) as swapped:
        reply = cmd_init(cluster, timeout)
    reply["swapped"] = ["public key" if v == real else "key path" for v in swapped]
    if "error" not in reply:
        reply["compute"] = cmd_compute([[1.5, -2.0]], [[0.5, 4.0]], [[1.0]], [[2.0]])
    return reply


def _checkpoint_variable(n: int):
    return np.random.default_rng(11).normal(0, 2, n)


def cmd_checkpoint_save(root: str, n: int, server_pids: Optional[dict]) -> dict:
    """tp.save_variables of a private variable of n elements (each server
    writes its own share under root on its own machine); the bytes each
    process received meanwhile (server_pids given)."""
    x = _checkpoint_variable(n)
    w = tp.Variable(tp.share(x), name="ckpt/w")
    state["checkpoint"] = w.reveal().numpy()
    pids = {"driver": os.getpid(), **{r: int(p) for r, p in (server_pids or {}).items()}}
    before = socket_bytes(pids.values()) if server_pids else None
    tp.save_variables([w], root)
    reply = {"saved": root}
    if server_pids:
        time.sleep(0.2)
        after = socket_bytes(pids.values())
        reply["bytes"] = {k: [after[p][0] - before[p][0], after[p][1] - before[p][1]]
                          for k, p in pids.items()}
    return reply


def cmd_checkpoint_restore(root: str, n: int, server_pids: Optional[dict]) -> dict:
    """A fresh variable of the current runtime (zeros), tp.restore_variables
    from root: its value against the one revealed at save time (bit-exact
    expected) and against the input; the bytes received meanwhile."""
    fresh = tp.Variable(np.zeros(n), name="ckpt/w")
    pids = {"driver": os.getpid(), **{r: int(p) for r, p in (server_pids or {}).items()}}
    before = socket_bytes(pids.values()) if server_pids else None
    try:
        tp.restore_variables([fresh], root)
    except Exception as e:
        return error_reply(e)
    reply = {}
    if server_pids:
        time.sleep(0.2)
        after = socket_bytes(pids.values())
        reply["bytes"] = {k: [after[p][0] - before[p][0], after[p][1] - before[p][1]]
                          for k, p in pids.items()}
    got = fresh.reveal().numpy()
    reply.update(equal_to_saved=bool(np.array_equal(got, state["checkpoint"])),
                 max_error=float(np.max(np.abs(got - _checkpoint_variable(n)))))
    return reply


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
    mul = tf.function(lambda a, b: a * b)
    cmp_ = tf.function(lambda a, b: tp.less(a, b))
    ident = tf.function(lambda a: tp.identity(a))
    xs, ys = x[:n_cmp], y[:n_cmp]
    # the graphs checked are those measured below (traced once, at the
    # measured sizes); mul_reveal is only checked
    small = tp.share(np.ones(4)), tp.share(np.ones(4))
    concretes = {"mul": mul.get_concrete_function(x, y),
                 "less": cmp_.get_concrete_function(xs, ys),
                 "mul_reveal": tf.function(lambda a, b: (a * b).reveal())
                 .get_concrete_function(*small)}
    out["outputs"] = {}
    for name, concrete in concretes.items():
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
    mul(x, y), cmp_(xs, ys), ident(x)  # run once: measure a steady run
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


def cmd_profile(logdir: str, server_trace_ms: int) -> dict:
    """tp.profile around two steps of a multiplication and a ReLU, with the
    servers' own profiles: each file's party planes and their kernels."""
    from tensorflow.python.profiler.internal import _pywrap_profiler
    x, y = tp.share(np.array([[1.0, 2.0]])), tp.share(np.array([1.0, -2.0, 3.0]))
    f = tf.function(lambda a, b: (a * a, tp.nn.relu(b)))
    f(x, y)  # traced and instantiated on the servers before the servers' traces run
    t = time.perf_counter()
    with tp.profile(logdir, server_trace_ms=server_trace_ms) as prof:
        for _ in range(2):
            f(x, y)
            prof.step()
        block_s = time.perf_counter() - t
    files = {}
    for path in prof.xplane_paths:
        data = json.loads(_pywrap_profiler.xspace_to_tools_data([path], "trace_viewer@",
                                                               {})[0])
        names = {e["pid"]: e["args"]["name"] for e in data["traceEvents"]
                 if e.get("name") == "process_name"}
        rows = {}
        for e in data["traceEvents"]:
            name = names.get(e.get("pid"), "")
            if e.get("ph") == "X" and "/device:CUSTOM:" in name:
                rows.setdefault(name.split("/device:CUSTOM:")[1].split()[1], set()).add(
                    e["name"])
        files[os.path.basename(path)] = {k: sorted(v) for k, v in rows.items()}
    return {"files": files, "trace_json": prof.trace_json, "block_s": block_s,
            "steps": [{"rounds": s.stats.rounds, "multiplications": s.stats.multiplications,
                       "comparisons": s.stats.comparisons, "time_ms": s.time_ms,
                       "party_time_ms": s.party_time_ms} for s in prof.steps]}


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


# ------------------------------------------------------------------------
# Derived functions, LeNet-5 inference and a logistic-regression training
# step (tests/test_distributed_models.py). Each computation is a plain
# function of its inputs, so that the test runs the very same code embedded.

def functions(x, p) -> dict:
    """The derived functions on x (any sign) and p (positive), run eagerly
    (the models below run traced), revealed."""
    a, b = tp.share(np.array(x)), tp.share(np.array(p))
    ops = {"exp": lambda: tp.exp(a), "log": lambda: tp.math.log(b),
           "reciprocal": lambda: tp.math.reciprocal(b), "sqrt": lambda: tp.sqrt(b),
           "rsqrt": lambda: tp.math.rsqrt(b), "divide": lambda: tp.divide(a, b),
           "tanh": lambda: tp.tanh(a), "sigmoid": lambda: tp.sigmoid(a),
           "softmax": lambda: tp.nn.softmax(a), "log_softmax": lambda: tp.nn.log_softmax(a),
           "reduce_max": lambda: tp.reduce_max(a, axis=-1),
           "argmax": lambda: tp.argmax(a, axis=-1), "maximum": lambda: tp.maximum(a, b),
           "less": lambda: tp.less(a, b), "multiply": lambda: a * b}
    out, seconds = {}, {}
    for name, fn in ops.items():
        t = time.perf_counter()
        out[name] = tp.reveal(fn()).numpy().tolist()
        seconds[name] = round(time.perf_counter() - t, 3)
    return {"values": out, "seconds": seconds}


def lenet5(model, x, private=None) -> dict:
    """A converted Keras model's private scores on x and the private arg-max
    of those scores (comparisons on the servers), both revealed; `private`:
    the model already converted."""
    private = private or tp.keras.convert(model)
    scores = private.predict(np.asarray(x, np.float32))
    return {"scores": scores.reveal().numpy().tolist(),
            "classes": tp.argmax(scores, axis=-1).reveal().numpy().tolist()}


def logistic_model(w, b):
    """tp.models.logistic_regression with the given weights."""
    model = tp.models.logistic_regression(len(w))
    model.set_weights([np.asarray(w, np.float32), np.asarray(b, np.float32)])
    return model


def lr_step(x, y, w, b, lr) -> dict:
    """One converted SGD step of logistic regression (binary cross-entropy)
    from the weights (w, b) on the batch (x, y): the new weights, revealed."""
    trainer = tp.keras.convert_training(logistic_model(w, b),
                                        tf.keras.losses.BinaryCrossentropy(),
                                        tf.keras.optimizers.SGD(lr))
    trainer.step(np.asarray(x, np.float32), np.asarray(y, np.float32))
    return {"weights": [v.tolist() for v in trainer.weights(reveal=True)]}


def _converted(model_path: str):
    """The Keras model at model_path converted for the current runtime, once:
    lenet5 and lenet5_placement (two tests) share the conversion (the model
    read, traced and its weights shared), as a user would convert once."""
    key = (model_path, id(tp.get_runtime().runtime))
    if state.get("converted", (None,))[0] != key:
        model = tf.keras.models.load_model(model_path)
        state["converted"] = (key, model, tp.keras.convert(model))
    return state["converted"][1:]


def cmd_lenet5(model_path: str, x) -> dict:
    model, private = _converted(model_path)
    return lenet5(model, x, private)


def _leaky(private):
    """predict with one op that reads S1's share of the scores placed on
    the client: the leak the placement check exists to catch."""
    def run(x):
        out = private._run(x)
        return out, tf.reduce_sum(out.share0)  # no device scope: the client
    return run


def cmd_lenet5_placement(model_path: str, x, server_pids: Optional[dict]) -> dict:
    """Where every op of a converted LeNet-5's predict runs (graphcheck), as
    cmd_placement does for a multiplication and a comparison: predict (the
    scores stay private), predict then tp.reveal, and a deliberately leaky
    predict; and (given server_pids) the bytes each process received while
    predict ran."""
    devices = tp.servers()
    parties = graphcheck.Parties(devices)
    _, private = _converted(model_path)
    x = np.asarray(x, np.float32)
    spec = tf.TensorSpec(x.shape, tf.float32)
    # predict's own trace at this batch (lenet5 ran it on the same digits:
    # reused, not traced again)
    fns = {"predict": private._fn.get_concrete_function(spec),
           "predict_reveal": tf.function(lambda v: private._run(v).reveal(),
                                         autograph=False).get_concrete_function(spec)}
    out = {k: {} for k in ("violations", "channels_to_client", "outputs", "ops", "client_ops",
                           "captures")}
    # The trace-time guard refuses the leaky predict, naming the op, and the
    # graph check must find the leak too. One trace serves both: the guard's
    # own check runs on every op as it is traced, its refusal is recorded
    # instead of raised (so the trace completes: the leaky op is the last),
    # where two traces (guard on, then off) used to.
    from tf_privpy.protocols.mpc.runtime import placement
    check, refused = placement._check, []

    def recording(op, st):
        try:
            check(op, st)
        except tp.PlacementError as e:
            refused.append(str(e))
    placement._check = recording
    try:
        fns["leaky"] = tf.function(_leaky(private), autograph=False).get_concrete_function(spec)
    finally:
        placement._check = check
    out["guard_leaky"] = refused[0] if refused else None
    for name, concrete in fns.items():
        ops = concrete.graph.get_operations()
        out["violations"][name] = graphcheck.graph_violations(concrete, devices, {})
        ends = {graphcheck._channel_ends(op) for op in ops}
        out["channels_to_client"][name] = sorted(
            f"{e[0]}->{e[1]}" for e in ends if e and e[1] == "client")
        out["outputs"][name] = [parties.of(t.op.device) for t in concrete.graph.outputs]
        # every op by party, and what the client runs
        where = [parties.of(op.device) for op in ops]
        out["ops"][name] = {p: where.count(p) for p in sorted(set(where))}
        out["client_ops"][name] = sorted({op.type for op, p in zip(ops, where)
                                          if p == "client"})
        # the captured tensors (the weights' shares, the servers' keys), by holder
        held = [f"{parties.of(getattr(e, 'device', '') or '')} {e.dtype.name}"
                for e, _ in concrete.graph.captures]
        out["captures"][name] = {h: held.count(h) for h in sorted(set(held))}
    if server_pids is None:  # no byte counts (no ss)
        return out
    pids = {"driver": os.getpid(), **{r: int(p) for r, p in server_pids.items()}}
    private.predict(x)  # traced and run once: measure a steady run
    before = socket_bytes(pids.values())
    private.predict(x)  # returns when the servers are done (synchronous)
    time.sleep(0.2)
    after = socket_bytes(pids.values())
    out["bytes"] = {k: [after[p][0] - before[p][0], after[p][1] - before[p][1]]
                    for k, p in pids.items()}
    return out


def cmd_share_io() -> dict:
    """tests/test_share_io.py's distributed path, once tp.init connected this
    process to a cluster whose S1 and S2 run share services: tp.load of
    uploaded inputs, predict, tp.publish, a load of a missing name (its
    error) and a load after it. "stores": the share-store functions this
    process registered (none: the driver serves no store, so a share read
    placed here would fail, not leak)."""
    from tensorflow.python.ops import script_ops
    out = {"stores": [str(t) for t in script_ops._py_funcs._funcs
                      if str(t).startswith("tf_privpy_share_")]}
    x, w = tp.load("d-x", tf.float64), tp.load("d-w", tf.float64)
    # each publish right after the eager ops that compute it, still in flight
    # on the servers: an existence check that failed an op there used to fail
    # the write after it, about 6 times in 15 (TF's remote executors keep an
    # op's error)
    big = tp.load("d-big", tf.float64)
    for i in range(8):
        tp.publish(tf.sigmoid(tf.matmul(big, w)), f"d-y{i}", owner="hospital")
    out["published"] = tp.publish(tf.sigmoid(tf.matmul(x, w)), "d-y", owner="hospital")
    try:
        tp.load("d-missing")
    except tp.client.ShareServiceError as e:
        out["missing"] = {"code": e.code.name, "server": e.server, "msg": str(e)}
    # the failed op's error is not left on S1 for the next op there (TF's
    # remote executors are asynchronous and keep it unless cleared)
    out["again"] = tp.reveal(tp.load("d-x", tf.float64)).numpy().tolist()
    return out


def cmd_large_array(x, w, block_bytes) -> dict:
    """tests/test_large_array.py's four-process path: tp.share_to_disk of x
    from this process (the data owner's device) onto S1's and S2's own
    folders (--large_array_dir), then x @ w for a private w and the sum over
    rows, streamed block by block on the servers. "functions": the
    large-array functions this process registered (none); "misplaced": the
    error of a share read placed on this process (it has no folder)."""
    from tensorflow.python.ops import script_ops
    from tf_privpy.large import party
    out = {"functions": [str(t) for t in script_ops._py_funcs._funcs
                         if str(t).startswith("tf_privpy_large_")]}
    cluster, timeout = state["init"]
    tp.init(tp.Config(large_block_bytes=block_bytes), cluster=cluster, timeout=timeout)
    t = time.perf_counter()
    big = tp.share_to_disk(np.asarray(x), progress=False)
    out["share_s"] = time.perf_counter() - t
    out["id"], out["shape"] = big.id, list(big.shape)
    t = time.perf_counter()
    out["product"] = tp.reveal(big.matmul(tp.share(np.asarray(w)), out="memory")).numpy().tolist()
    out["matmul_s"] = time.perf_counter() - t
    out["sum"] = tp.reveal(big.sum(axis=0)).numpy().tolist()
    out["slice"] = tp.reveal(big[1:3, 1:].to_private()).numpy().tolist()
    h = tp.get_runtime()
    try:
        with tf.device(h.runtime.device("client")):
            tf.raw_ops.EagerPyFunc(input=[tf.constant(big.id)], token=party.token("info", "S1"),
                                   Tout=[tf.string])[0].numpy()
        out["misplaced"] = "ran"
    except tf.errors.OpError as e:
        out["misplaced"] = str(party.translate(e))
    return out


def cmd_large_from_store(name, owner, w, block_bytes) -> dict:
    """tests/test_large_from_store.py's four-process path: tp.LargeArray.
    from_store of an upload, each of S1 and S2 copying its own share from its
    store (--share_store) into its folder (--large_array_dir), then x @ w for
    a private w and the sum over rows. "functions": the store-copy functions
    this process registered (none); "misplaced": the error of a copy placed
    on this process."""
    from tensorflow.python.ops import script_ops
    from tf_privpy.large import party, store_copy
    out = {"functions": [str(t) for t in script_ops._py_funcs._funcs
                         if str(t).startswith("tf_privpy_large_")]}
    cluster, timeout = state["init"]
    tp.init(tp.Config(large_block_bytes=block_bytes), cluster=cluster, timeout=timeout)
    t = time.perf_counter()
    big = tp.LargeArray.from_store(name, owner=owner, progress=False)
    out["from_store_s"] = time.perf_counter() - t
    out["id"], out["shape"] = big.id, list(big.shape)
    out["product"] = tp.reveal(big.matmul(tp.share(np.asarray(w)), out="memory")).numpy().tolist()
    out["sum"] = tp.reveal(big.sum(axis=0)).numpy().tolist()
    h = tp.get_runtime()
    try:
        with tf.device(h.runtime.device("client")):
            tf.raw_ops.EagerPyFunc(input=[tf.constant(v) for v in (name, "0" * 32, "{}")],
                                   token=party.token(store_copy.ACTION, "S1"),
                                   Tout=[tf.string])[0].numpy()
        out["misplaced"] = "ran"
    except tf.errors.OpError as e:
        out["misplaced"] = str(party.translate(e))
    return out


def main() -> None:
    commands = {"init": cmd_init, "compute": cmd_compute, "placement": cmd_placement,
                "init_swapped": cmd_init_swapped, "checkpoint_save": cmd_checkpoint_save,
                "checkpoint_restore": cmd_checkpoint_restore,
                "bench": cmd_bench, "fault": cmd_fault,
                "check": cmd_check, "embedded": cmd_embedded, "tamper": cmd_tamper,
                "profile": cmd_profile,
                # tests/test_distributed_models.py
                "functions": functions, "lenet5": cmd_lenet5, "lr_step": lr_step,
                "lenet5_placement": cmd_lenet5_placement,
                # tests/test_share_io.py
                "share_io": cmd_share_io,
                # tests/test_large_array.py
                "large_array": cmd_large_array,
                # tests/test_large_from_store.py
                "large_from_store": cmd_large_from_store}
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
