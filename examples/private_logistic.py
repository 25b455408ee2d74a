"""PrivPy's logistic function and a private matrix product, on the four embedded servers.

User story: two data owners each secret-share a matrix (S1 and S2 receive one
random-looking share each); the servers compute their product and the logistic
function of it with PrivPy's Euler method (seed 000, Fig. 2), and only the
result is revealed. Every number is printed beside the same computation in
plaintext numpy.

    python examples/private_logistic.py                # 128-bit ring (default)
    python examples/private_logistic.py --ring_bits=64 --iters=50
"""
import time

from absl import app, flags

import tf_privpy as tp

FLAGS = flags.DEFINE_integer("iters", 100, "Euler steps of the logistic function (Fig. 2)")
flags.DEFINE_integer("ring_bits", 128, "ring: 128 (default) or 64 (fast mode)")
flags.DEFINE_integer("rows", 4, "rows of owner A's matrix")
flags.DEFINE_integer("inner", 6, "columns of A = rows of B")
flags.DEFINE_integer("cols", 3, "columns of owner B's matrix")
flags.DEFINE_integer("seed", 0, "seed of the (plaintext, public) demo data")
F = flags.FLAGS


def logistic(x, start: float, iter_cnt: int):
    """PrivPy Fig. 2: Euler's method for y' = y(1 - y) from y(start). Works
    unchanged on numpy arrays and on tp.PrivateTensors."""
    import math
    result = 1.0 / (1 + math.exp(-start)) + 0 * x
    delta_x = (x - start) / iter_cnt
    for _ in range(iter_cnt):
        derivative = result * (1 - result)
        result = result + delta_x * derivative
    return result


def main(argv):
    del argv
    tp.init(tp.Config(ring_bits=F.ring_bits))  # before any other TF op
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(F.seed)
    a = rng.normal(0, 1, (F.rows, F.inner)).astype(np.float32)   # owner A's data
    b = rng.normal(0, 0.5, (F.inner, F.cols)).astype(np.float32)  # owner B's data
    cfg = tp.get_runtime().config
    print(f"tf_privpy {tp.__version__}: ring 2^{cfg.ring_bits}, {cfg.frac_bits} fractional "
          f"bits, backend {cfg.backend}")
    print("servers:", ", ".join(f"{k}={v}" for k, v in tp.servers().items()))

    pa = tp.share(a, name="owner_A")
    pb = tp.share(b, name="owner_B")
    print("\nowner A's matrix, as S1 holds it:", pa)

    t0 = time.perf_counter()
    product = pa @ pb
    got = tp.reveal(product).numpy()
    t_mm = time.perf_counter() - t0
    want = a.astype(np.float64) @ b.astype(np.float64)
    print(f"\nprivate matmul {a.shape} @ {b.shape}: {t_mm * 1e3:.1f} ms, "
          f"max |private - plaintext| = {np.abs(got - want).max():.2e}")
    print(np.array2string(np.stack([got, want], -1).reshape(F.rows, -1), precision=5,
                          suppress_small=True, max_line_width=120))
    print("(columns alternate private, plaintext)")

    step = tf.function(lambda x: logistic(x, 0.0, F.iters))
    t0 = time.perf_counter()
    step(product)  # first call: trace, optimize and place the graph once
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    sig = step(product)
    t_sig = time.perf_counter() - t0
    got_sig = tp.reveal(sig).numpy()
    euler = logistic(want, 0.0, F.iters)
    exact = 1 / (1 + np.exp(-want))
    print(f"\nlogistic by {F.iters} Euler steps ({2 * F.iters} sequential private "
          f"multiplications) as one tf.function: {t_sig * 1e3:.1f} ms per run "
          f"(first call {t_build:.1f} s: tracing and graph optimization, once)")
    print(f"  max |private - plaintext Euler| = {np.abs(got_sig - euler).max():.2e}   "
          f"(fixed-point error)")
    print(f"  max |plaintext Euler - exact|   = {np.abs(euler - exact).max():.2e}   "
          f"(the method's own error)")
    for i in range(min(3, F.rows)):
        print(f"  x={want[i, 0]:+.4f}  private={got_sig[i, 0]:.6f}  "
              f"plaintext Euler={euler[i, 0]:.6f}  exact={exact[i, 0]:.6f}")
    stats = tp.stats()  # counted in TF state on every run since tp.init()
    print(f"\ntraffic between parties in this run: {stats.bytes / 1e3:.1f} KB in "
          f"{stats.messages} messages, {stats.rounds} rounds")


if __name__ == "__main__":
    app.run(main)
