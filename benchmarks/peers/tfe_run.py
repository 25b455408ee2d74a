"""TF-Encrypted 0.9.1 on the shared workloads: its ABY3 protocol (3 players, replicated sharing,
64-bit ring, its default fixed point of 16 fractional bits), the three players as TF devices
of one process (TF-Encrypted's LocalConfig, what its examples and tests run), each workload
compiled by tfe.function (a tf.function) and timed as the graph's run; the inputs are shared
once by server0. Its defaults for each function (sigmoid: 5-piece linear, exp: "mp-spdz",
reciprocal: its fp_recip, rsqrt: its inv_sqrt, log: its "chebyshev" polynomial); it has no
tanh, and its sqrt takes public values only: recorded as not available.

TF-Encrypted ships its custom ops (secure random among them) for TF 2.9.1 only. On another TF
its documentation says it falls back to insecure randomness, but 0.9.1's ABY3 calls the
secure-random op to share any input, so it cannot run at all: this runner exits saying so
unless benchmarks/peers/tfe_build_ops.py rebuilt the ops against this TF (every row's note and
"versions" say which case ran).

It also imports a name its own patched TensorFlow had (_patch_tf gives it stock TF's value in
this process; TF-Encrypted's files are not changed).

Run by benchmarks/peers_run.py with .venv-tfe's python; see benchmarks/peers/_common.py for
the arguments.
"""
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def _patch_tf():
    """TF-Encrypted 0.9.1 imports tensorflow.python.ops.while_v2.glob_stateful_parallelism, a
    name stock TensorFlow does not have (only its private while loop, used by sort and
    friends, reads it). Give it stock TF's behaviour, False, in this process only."""
    from tensorflow.python.ops import while_v2
    if not hasattr(while_v2, "glob_stateful_parallelism"):
        while_v2.glob_stateful_parallelism = False


def lenet5_keras(tf, weights, batch):
    """_common.LENET5_LAYERS as a tf.keras model (tf_privpy.models.lenet5's layers) with the
    shared weights: what TF-Encrypted's clone_model takes."""
    L, stack = tf.keras.layers, []
    for _, kind, shape in _common.LENET5_LAYERS:
        if kind == "pool":
            stack.append(L.MaxPooling2D(2))
        elif kind == "dense":
            stack += ([L.Flatten()] if shape[0] == 120 else []) + [L.Dense(shape[1])]
        else:  # clone_model takes the input shape, batch included, from the first layer
            stack.append(L.Conv2D(shape[3], 5, padding="same" if kind == "conv_same" else
                                  "valid", activation="relu", **(
                                      {"batch_input_shape": (batch, 28, 28, 1)} if not stack
                                      else {})))
    model = tf.keras.Sequential(stack)
    model.set_weights([w.astype("float32") for w in weights])
    return model


def measure_program(tf, tfe, workload, xs, reps, rand):
    """sort (its ABY3 sort, a sorting network), max of groups of 4 (reduce_max along axis 1,
    its default binary tree), LeNet-5 (tfe.keras.models.clone_model of the Keras model: its
    weights shared privately) on server0's images; graph_build: clone_model plus the first
    tfe.function call (trace, build and one run) minus a later call's run, `reps` builds with
    no warm-up (each takes minutes here)."""
    import numpy as np
    sx = tfe.define_private_input("server0", lambda: tf.constant(xs[0]))
    if workload in ("sort", "max"):
        f = tfe.function(lambda a: tfe.sort(a, axis=0) if workload == "sort" else
                         tfe.reduce_max(a, axis=1))
    else:
        keras_model = lenet5_keras(tf, xs[1:], len(xs[0]))

        def build():
            m = tfe.keras.models.clone_model(keras_model)
            return m, tfe.function(lambda a: m(a))
    if workload == "graph_build":
        ts, z = [], None
        for _ in range(reps):
            t0 = time.perf_counter()
            _, f = build()
            z = f(sx)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            z = f(sx)
            ts.append(max(0.0, first - (time.perf_counter() - t0)))
    else:
        if workload == "lenet5":
            _, f = build()
        t0 = time.perf_counter()
        f(sx)  # trace, build and first run
        build_s = time.perf_counter() - t0
        ts, z = _common.time_reps(lambda: f(sx), reps)
    out = z.reveal().to_native()
    out = np.asarray(out.numpy() if hasattr(out, "numpy") else out, dtype=np.float64)
    what = {"sort": "tfe.sort (ABY3's sorting network)", "max": "tfe.reduce_max(axis=1)",
            "lenet5": "tfe.keras.models.clone_model of the Keras LeNet-5, tfe.function",
            "graph_build": "clone_model + first tfe.function call minus a run"}[workload]
    extra = f"; first call {build_s:.2f} s" if workload != "graph_build" else ""
    return ts, out, f"{what}; 3 players as devices of one TF process{extra}; {rand}"


def _patch_while_loop():
    """TF-Encrypted 0.9.1's private while loop (its sort's) reads FuncGraph.control_captures and
    passes stateful_parallelism to while_v2._build_while_op: both from its own patched TF. Stock
    TF keeps the control captures in function_captures.control, and its _build_while_op is
    that of stateful_parallelism=False (the value _patch_tf gives). In this process only."""
    import inspect

    from tensorflow.python.framework import func_graph
    from tf_encrypted.protocol.aby3 import aby3
    if not hasattr(func_graph.FuncGraph, "control_captures"):
        func_graph.FuncGraph.control_captures = property(lambda g: g.function_captures.control)
    build = aby3._build_while_op
    if "stateful_parallelism" not in inspect.signature(build).parameters:
        aby3._build_while_op = lambda *a, stateful_parallelism=False, **k: build(*a, **k)


def main():
    args = _common.parse_args()
    import numpy as np
    import tensorflow as tf
    logging.getLogger("tf_encrypted").setLevel(logging.ERROR)
    tf.get_logger().setLevel("ERROR")
    _patch_tf()
    import tf_encrypted as tfe
    from tf_encrypted.operations import secure_random
    _patch_while_loop()

    secure = bool(secure_random.supports_secure_randomness())
    if not secure:  # 0.9.1's ABY3 calls secure_seed to share any value: nothing would run
        raise SystemExit("TF-Encrypted's custom ops are built for TF 2.9.1, not TF "
                         f"{tf.__version__}, and its ABY3 cannot share a value without its "
                         "secure-random op: rebuild them with `make bench-venv-tfe "
                         "TFE_SRC=<checkout of TF-Encrypted's source>`")
    versions = {"tf-encrypted": _common.version_of("tf-encrypted"),
                "tensorflow": tf.__version__, "secure_random": secure}
    prot = tfe.protocol.ABY3()
    tfe.set_protocol(prot)
    fns = {"mul": lambda a, b: a * b, "matmul": lambda a, b: tfe.matmul(a, b),
           "comparison": lambda a, b: tfe.less_than(a, b), "relu": lambda a: tfe.relu(a),
           "sigmoid": lambda a: tfe.sigmoid(a), "reciprocal": lambda a: tfe.reciprocal(a),
           "exp": lambda a: tfe.exp(a),
           "lr_step": lambda x, y, w: w - tfe.matmul(tfe.transpose(x), tfe.sigmoid(
               tfe.matmul(x, w)) - y) * (_common.LR_RATE / _common.LR_BATCH)}
    # its inv_sqrt (bit decomposition, a quadratic guess, Newton) and its log (one degree-5
    # polynomial on the whole domain, no range reduction: its error is what it is)
    fns.update({"rsqrt": lambda a: tfe.inv_sqrt(a), "log": lambda a: tfe.log(a)})
    lacks = {"tanh": "not available in TF-Encrypted 0.9.1 (ABY3 has no tanh)",
             "sqrt": "not available in TF-Encrypted 0.9.1 (ABY3's sqrt takes public values "
                     "only)",
             "vit": _common.VIT_SPU_ONLY}
    rand = ("secure random op rebuilt for this TF" if secure else
            "INSECURE randomness: its TF 2.9.1 ops do not load here, TF-Encrypted fell back "
            "to TF's random ops")

    def measure(protocol, workload, n, xs):
        if workload in _common.PROGRAMS:
            return measure_program(tf, tfe, workload, xs, args.reps, rand)
        sx = [tfe.define_private_input("server0", lambda x=x: tf.constant(x)) for x in xs]
        f = tfe.function(fns[workload])
        t0 = time.perf_counter()
        z = f(*sx)  # trace, build and first run
        build = time.perf_counter() - t0

        # a tf.function call runs synchronously on the CPU: it returns once the graph ran
        ts, z = _common.time_reps(lambda: f(*sx), args.reps)
        out = z.reveal().to_native()
        out = np.asarray(out.numpy() if hasattr(out, "numpy") else out, dtype=np.float64)
        return ts, out, (f"3 players as devices of one TF process, tfe.function; first call "
                         f"(trace + build + run) {build:.2f} s; {rand}")

    def measure_available(protocol, workload, n, xs):  # what 0.9.1 lacks: recorded, not run
        if workload in lacks:
            return None, None, lacks[workload]
        return measure(protocol, workload, n, xs)

    _common.run_all("tfe", versions, ["aby3-64bit-f16"], measure_available, args)


if __name__ == "__main__":
    main()
