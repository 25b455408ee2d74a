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


def main():
    args = _common.parse_args()
    import numpy as np
    import tensorflow as tf
    logging.getLogger("tf_encrypted").setLevel(logging.ERROR)
    tf.get_logger().setLevel("ERROR")
    _patch_tf()
    import tf_encrypted as tfe
    from tf_encrypted.operations import secure_random

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
                     "only)"}
    rand = ("secure random op rebuilt for this TF" if secure else
            "INSECURE randomness: its TF 2.9.1 ops do not load here, TF-Encrypted fell back "
            "to TF's random ops")

    def measure(protocol, workload, n, xs):
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
