"""tf_privpy on the peers' workloads, same inputs, same rows (benchmarks/peers/_common.py), so
that benchmarks/peers_run.py puts us beside them from one run. Embedded four-server runtime
(tp.init()), each workload a tf.function on shares, both rings, the derived functions (sigmoid,
reciprocal, exp, the LR step's sigmoid, tanh, log, sqrt, rsqrt) in the exact (default) and,
where one exists (not sqrt nor rsqrt), the fast numerics mode
(protocols "privpy-4pc-BITS-fast"; issue 14); the time of a call is the
function up to S1's result share in numpy (as benchmarks/functions.py times it), not the
sharing nor the reveal. Public API only. Run with the project's own venv.

Processes against processes (issue 26): protocol "privpy-4proc-BITS" runs the element-wise
workloads (PROCESS_WORKLOADS) on four server processes on loopback
(tf_privpy.deploy.cluster.LocalCluster) with this process as the client, the way SPU's
"-processes" rows and CrypTen's two processes run. A call there is the function up to a
one-element reveal on the client (the servers' whole result stays on them): it includes the
client's round trip, which the peers' "rank 0's time of the op" does not. The ViT (issue 27,
vit) runs there too: tp.models.vit() with the workload's weights, tp.keras.convert'ed once per
runtime, predict timed to S1's logit shares on the client. A process that joined
a cluster cannot go back to the embedded mode, so peers_run.py starts this runner once per
such protocol, alone.
"""
import os
import sys

#: what the four-process rows run: the element-wise workloads the fair race
#: is about (issue 26: less and ReLU of 10^5, multiplication of 10^6), and the
#: ViT (issue 27: our four processes against SPU's three)
PROCESS_WORKLOADS = ("mul", "comparison", "relu", "sigmoid", "vit")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def main():
    args = _common.parse_args()
    protocols = args.protocols or ["privpy-4pc-128", "privpy-4pc-64", "privpy-4pc-128-fast",
                                   "privpy-4pc-64-fast"]
    import numpy as np
    import tensorflow as tf

    import tf_privpy as tp
    tf.get_logger().setLevel("ERROR")
    versions = {"tf_privpy": getattr(tp, "__version__", None), "tensorflow": tf.__version__}
    fns = {"mul": lambda a, b: a * b, "matmul": lambda a, b: tp.matmul(a, b),
           "comparison": lambda a, b: tp.less(a, b), "relu": tp.nn.relu,
           "sigmoid": tp.sigmoid, "reciprocal": tp.math.reciprocal, "exp": tp.exp,
           "lr_step": lambda x, y, w: w - tp.matmul(tp.transpose(x), tp.sigmoid(
               tp.matmul(x, w)) - y) * (_common.LR_RATE / _common.LR_BATCH)}
    derived = ("sigmoid", "reciprocal", "exp", "lr_step")
    fns.update({"tanh": tp.tanh, "sqrt": tp.sqrt, "rsqrt": tp.math.rsqrt, "log": tp.math.log})
    derived += ("tanh", "log", "sqrt", "rsqrt")
    state = {"setup": None, "cluster": None}
    processes = [p for p in protocols if p.split("-")[1] == "4proc"]
    if processes and len(protocols) != 1:
        raise SystemExit(f"a privpy-4proc protocol runs alone in its runner, got {protocols}")

    def measure(protocol, workload, n, xs):
        if workload in _common.PROGRAMS and protocol.endswith("-fast"):
            return None, None, None  # no derived function inside: the exact row is the one
        parts = protocol.split("-")
        bits, mode = int(parts[2]), (parts[3] if len(parts) > 3 else "exact")
        if mode != "exact" and workload not in derived:
            return None, None, None  # no fast method: the exact row is the one
        if processes:
            return measure_processes(workload, n, xs, bits)
        if state["setup"] != (bits, mode):
            tp.reset()
            tp.init(tp.Config(ring_bits=bits, functions={"common": {"mode": mode}}))
            state["setup"] = (bits, mode)
            state.pop("vit", None)  # converted for the runtime just reset
        if workload in _common.PROGRAMS:
            return measure_program(workload, n, xs, bits)
        sx = [tp.share(x) for x in xs]
        f = tf.function(lambda *a, fn=fns[workload]: fn(*a))
        ts, _ = _common.time_reps(lambda: f(*sx).share0.numpy()[:1], args.reps, args.warmup)
        out = np.asarray(tp.reveal(f(*sx)), dtype=np.float64)
        return ts, out, (f"embedded 4 servers (S1, S2, T1, T2) in one process, {bits}-bit ring, "
                         f"{mode} numerics, tf.function, time to S1's result share")

    def measure_processes(workload, n, xs, bits):
        if workload not in PROCESS_WORKLOADS:
            return None, None, None  # embedded rows only
        if state["cluster"] is None:
            from tf_privpy.deploy.cluster import LocalCluster
            state["cluster"] = LocalCluster().start()
            tp.init(tp.Config(ring_bits=bits), cluster=state["cluster"].path)
        where = (f"4 server processes (S1, S2, T1, T2) on loopback, the client here, "
                 f"{bits}-bit ring, {tp.get_runtime().config.comparison} comparisons, "
                 f"sealed links")
        if workload == "vit":
            ts, out, note = measure_vit(n, xs)
            return ts, out, f"{where}; {note}"
        sx = [tp.share(x) for x in xs]
        full = tf.function(lambda *a, fn=fns[workload]: fn(*a))
        one = tf.function(lambda *a, fn=fns[workload]: tp.reveal(fn(*a)[:1]))
        ts, _ = _common.time_reps(lambda: one(*sx).numpy(), args.reps, args.warmup)
        out = np.asarray(tp.reveal(full(*sx)), dtype=np.float64)
        return ts, out, f"{where}; time to a one-element reveal on the client"

    def measure_vit(n, xs):
        """The ViT (issue 27): tp.models.vit() with the workload's trained weights, converted
        once per runtime (weights shared then), predict on the digits (shared inside it, by
        the client), timed to S1's logit shares on the client."""
        if "vit" not in state:
            model = tp.models.vit()
            model.set_weights([np.float32(w) for w in xs[1:]])
            state["vit"] = tp.keras.convert(model)
        private, x = state["vit"], np.float32(xs[0])
        ts, _ = _common.time_reps(lambda: private.predict(x).share0.numpy()[:1], args.reps,
                                  args.warmup)
        return ts, np.asarray(private.predict(x, reveal=True), np.float64), (
            "tp.keras.convert'ed Keras ViT (exact GELU), predict with the digits shared in it, "
            "time to S1's logit shares on the client")

    def measure_program(workload, n, xs, bits):
        where = f"embedded 4 servers in one process, {bits}-bit ring"
        if workload == "vit":
            ts, out, note = measure_vit(n, xs)
            return ts, out, f"{where}, exact numerics; {note}"
        if workload in ("sort", "max"):
            f = tf.function(tp.sort if workload == "sort" else
                            lambda a: tp.reduce_max(a, axis=1))
            sx = tp.share(xs[0])
            ts, _ = _common.time_reps(lambda: f(sx).share0.numpy()[:1], args.reps, args.warmup)
            return ts, np.asarray(tp.reveal(f(sx)), dtype=np.float64), (
                f"{where}, tf.function, time to S1's result share")
        model = tp.models.lenet5()  # its layers are _common.LENET5_LAYERS
        model.set_weights([np.float32(w) for w in xs[1:]])
        x = np.float32(xs[0])

        def build():
            private = tp.keras.convert(model)  # weights private (the default policy)
            private.concrete(n)  # the first trace of the private graph at this batch
            return private
        if workload == "graph_build":
            ts, private = _common.time_reps(build, args.reps, args.warmup)
            note = "tp.keras.convert (trace, freeze, rewrite, share the weights) + first trace"
        else:
            private = build()
            ts, _ = _common.time_reps(lambda: private.predict(x).share0.numpy()[:1], args.reps,
                                      args.warmup)
            note = "tp.keras.convert'ed Keras LeNet-5, predict, time to S1's logit shares"
        return ts, private.predict(x, reveal=True).numpy(), f"{where}; {note}"

    try:
        _common.run_all("tf_privpy", versions, protocols, measure, args)
    finally:
        if state["cluster"] is not None:
            state["cluster"].stop()
            sys.stdout.flush()
            os._exit(0)  # a process that joined a cluster cannot tear TF down cleanly


if __name__ == "__main__":
    main()
