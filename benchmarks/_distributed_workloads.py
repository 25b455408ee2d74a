"""The workloads of benchmarks/distributed.py: their sizes, names and the
settings they run in (the constants the driver, the worker and the report
share), and how one call of each is built and timed. The flags are
distributed.py's (absl's FLAGS are process-wide).
"""
import time

from absl import app, flags

import tf_privpy as tp

F = flags.FLAGS

PARTS = ("embedded", "loopback", "lan", "wan")
WORKLOADS = ("mul", "matmul", "less", "relu", "lenet5", "lr_step", "tfe_steps")
#: what runs without --workloads (`make bench`); tfe_steps, TF-Encrypted's
#: training rows (issue 28: LR and networks A-D x SGD, AMSgrad, Adam, one
#: step of batch 128 each; --tfe_rows), takes an hour on the four settings
DEFAULT_WORKLOADS = WORKLOADS[:-1]
#: the workloads made of comparisons: timed once per comparison family
#: (issue 26: protocols/mpc/bitwise/ beside the garbled circuits)
COMPARING = ("less", "relu", "lenet5")
FAMILIES = ("garbled", "bitwise")
FULL = {"mul": 10 ** 6, "matmul": 1024, "less": 10 ** 5, "relu": 10 ** 5, "lenet5": 100,
        "lr_step": 128, "tfe_steps": 128}
QUICK = {"mul": 1000, "matmul": 16, "less": 100, "relu": 100, "lenet5": 2, "lr_step": 8,
         "tfe_steps": 8}
#: the network settings of TF-Encrypted's benchmarks (shared/ANCHORS.md)
NETWORKS = {"lan": {"rate": "40gbit", "rtt_ms": 0.01}, "wan": {"rate": "352mbit", "rtt_ms": 20.0}}
#: issue 11: distributed on loopback within 1.5x of embedded for these


def chosen() -> tuple:
    """The workloads --workloads selects, in the report's order."""
    if not F.workloads:
        return DEFAULT_WORKLOADS
    unknown = sorted(set(F.workloads) - set(WORKLOADS))
    if unknown:
        raise app.UsageError(f"--workloads: unknown {unknown}; choose from {list(WORKLOADS)}")
    return tuple(w for w in WORKLOADS if w in F.workloads)


def families() -> tuple:
    """The comparison families --comparisons selects (default: both)."""
    fams = tuple(F.comparisons or FAMILIES)
    unknown = sorted(set(fams) - set(FAMILIES))
    if unknown:
        raise app.UsageError(f"--comparisons: unknown {unknown}; choose from {list(FAMILIES)}")
    return tuple(f for f in FAMILIES if f in fams)


def tfe_rows() -> list:
    """The training rows --tfe_rows selects ("network_a-adam"), in
    benchmarks/tfe_suite.py's order (default: all 15)."""
    from tfe_suite import MODELS, OPTIMIZERS
    every = [f"{m}-{o}" for m in MODELS for o in OPTIMIZERS]
    rows = F.tfe_rows or every
    unknown = sorted(set(rows) - set(every))
    if unknown:
        raise app.UsageError(f"--tfe_rows: unknown {unknown}; choose from {every}")
    return [r for r in every if r in rows]


def groups() -> list:
    """[(workload, [key, ...])]: the keys timed together, interleaved call by
    call: a comparing workload once per family ("less:bitwise"), so that the
    machine's load weighs on both families alike; the others once ("mul");
    each training row alone ("tfe_steps:network_c-adam": a step's servers
    hold GBs)."""
    out = []
    for w in chosen():
        if w == "tfe_steps":
            out += [(w, [f"{w}:{r}"]) for r in tfe_rows()]
        else:
            out.append((w, [f"{w}:{f}" for f in families()] if w in COMPARING else [w]))
    return out


def keys() -> list:
    """Every timed key, in the report's order."""
    return [k for _, ks in groups() for k in ks]


def split(key: str) -> tuple:
    """"less:bitwise" -> ("less", "bitwise"); "mul" -> ("mul", None)."""
    name, _, family = key.partition(":")
    return name, family or None


TARGET_RATIO = {"lenet5": 1.5, "matmul": 1.5}
#: TF-Encrypted's LR step at batch 128 on MNIST (ANCHORS.md), ms: LAN, WAN
TFE_LR_MS = {"lan": (10, 12), "wan": (760, 840)}
PORTS = {"client": 7100, "s1": 7101, "s2": 7102, "t1": 7103, "t2": 7104}
ROLES = ("s1", "s2", "t1", "t2")
#: the server pairs the protocols send on (DESIGN §5, §6; the bitwise
#: comparisons add S1 <-> S2 and the dealer T1's corrections, bitwise/protocol.py)
PROTOCOL_PAIRS = ("S1->T1", "S1->T2", "S2->T1", "S2->T2", "T1->S2", "T2->S1",
                  "S1->S2", "S2->S1", "T1->S1")


def label(key: str, sizes: dict) -> str:
    """A row's name: the workload and its size, and its comparison family."""
    name, family = split(key)
    n = sizes[name]
    if name == "tfe_steps":   # family: the row, "network_a-adam"
        model, opt = family.split("-")
        opt = {"sgd": "SGD", "amsgrad": "AMSgrad", "adam": "Adam"}[opt]
        return f"{model.replace('network_', '').upper()} {opt} step b{n}"
    text = {"mul": f"mul {n:.0e}".replace("e+0", "e"), "matmul": f"matmul {n}x{n}",
            "less": f"less {n:.0e}".replace("e+0", "e"),
            "relu": f"ReLU {n:.0e}".replace("e+0", "e"), "lenet5": f"LeNet-5 b{n}",
            "lr_step": f"LR step b{n}"}[name]
    return f"{text} {family}" if family else text


def scoped(family, fn):
    """fn run inside tp.comparison(family) (None: no scope). The scope acts
    when a tf.function is traced (the warm-up call) and on eager code; the
    driver builds every graph, so choosing the family there is all it takes
    (the servers run what it sends them)."""
    if family is None:
        return fn

    def run():
        with tp.comparison(family):
            return fn()
    return run


def build_workloads(sizes: dict, quick: bool, fams: tuple = FAMILIES) -> dict:
    """key -> (run, plaintext run, bill): run() does one timed call, bill()
    the protocols' declared cost of one call (protocols/mpc/runtime/cost.py).
    The comparing workloads get one key per family in `fams` ("less:bitwise"),
    each with tf.functions (and a converted model) of its own: a trace keeps
    the family it was traced with."""
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(0)
    out = {}
    want = chosen()

    def elementwise(name, fn, plain_fn, *args):
        """fn on private args inside one tf.function; plain_fn on float32."""
        if name not in want:
            return
        priv = [tp.share(a) for a in args]
        plain = [tf.constant(a, tf.float32) for a in args]
        pf = tf.function(plain_fn)
        for family in (fams if name in COMPARING else (None,)):
            f = tf.function(fn)
            key = f"{name}:{family}" if family else name
            out[key] = (scoped(family, lambda f=f: f(*priv).numpy()),
                        lambda: pf(*plain).numpy(),
                        scoped(family, lambda: tp.cost(fn, *priv)))

    if "tfe_steps" in want:
        out.update(tfe_workloads(sizes["tfe_steps"]))
    n = sizes["mul"]
    elementwise("mul", lambda a, b: tp.reveal((a * b)[:1]), lambda a, b: a * b,
                rng.normal(0, 10, n), rng.normal(0, 10, n))
    s = sizes["matmul"]
    elementwise("matmul", lambda a, b: tp.reveal((a @ b)[:1, :1]), tf.matmul,
                rng.normal(0, 1, (s, s)), rng.normal(0, 1, (s, s)))
    n = sizes["less"]
    elementwise("less", lambda a, b: tp.reveal(tp.less(a, b)[:1]), lambda a, b: a < b,
                rng.uniform(-100, 100, n), rng.uniform(-100, 100, n))
    n = sizes["relu"]
    elementwise("relu", lambda a: tp.reveal(tp.nn.relu(a)[:1]), tf.nn.relu,
                rng.uniform(-100, 100, n))
    if "lenet5" in want or "lr_step" in want:
        out.update(_model_workloads(sizes, quick, fams, want, rng))
    return out


def _model_workloads(sizes: dict, quick: bool, fams: tuple, want: tuple, rng) -> dict:
    """LeNet-5 inference and the LR step (build_workloads' keys) of `want`."""
    import numpy as np
    import tensorflow as tf
    from _report import plain_sgd_step
    out = {}
    # MNIST digits; --quick: random images and an untrained LeNet-5 (the
    # time does not depend on the values; loading and training would dominate)
    if quick:
        x = rng.uniform(0, 1, (256, 28, 28, 1)).astype(np.float32)
        y = rng.integers(0, 10, 256)
        xt = x
    else:
        (x, y), (xt, _) = tp.datasets.load_mnist(flatten=False)
    if "lenet5" in want:
        b = sizes["lenet5"]
        model = tp.models.lenet5() if quick else tp.models.train("lenet5", x, y)
        xb = xt[:b]
        plain_model = tf.function(lambda v: model(v, training=False))
        for family in fams:
            private = tp.keras.convert(model)   # its predict traces keep this family
            out[f"lenet5:{family}"] = (
                scoped(family, lambda p=private: p.predict(xb, reveal=True).numpy()),
                lambda: plain_model(xb).numpy(),
                scoped(family, lambda b=b, p=private: p.cost(b) + tp.cost(
                    tp.reveal, tp.share(np.zeros((b, 10))))))

    if "lr_step" in want:
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


def tfe_workloads(batch: int) -> dict:
    """One key per training row: a step of batch `batch` of the row's model
    and optimizer (benchmarks/tfe_suite.py's: same learning rates, data,
    initial weights), the plaintext Keras step, no declared bill (a step's
    bill traces it again: a minute for network C; the channels' counters of
    the timed calls are recorded). The trainer is converted at the row's
    first call (its warm-up), so that one row's servers' state is built at a
    time."""
    import numpy as np
    import tensorflow as tf
    import tfe_suite as T
    from _report import plain_sgd_step
    data = T.load_data(False)
    out = {}
    for row in tfe_rows():
        model_name, opt = row.split("-")
        state = {}

        def setup(model_name=model_name, opt=opt, state=state):
            build, loss, x, y, _, _ = T.task(model_name, data)
            tf.keras.utils.set_random_seed(0)
            model = build()
            plain = tf.keras.models.clone_model(model)
            plain.set_weights(model.get_weights())
            idx = T.batch_order(len(x), 1, 0)[0][:batch]
            state["xy"] = x[idx].astype(np.float32), y[idx].astype(np.float32)
            state["step"] = tp.keras.convert_training(model, loss, T.make_optimizer(opt)).step
            state["plain"] = plain_sgd_step(plain, loss, T.make_optimizer(opt))

        def run(setup=setup, state=state):
            if not state:
                setup()
            state["step"](*state["xy"])

        out[f"tfe_steps:{row}"] = (run, lambda state=state: state["plain"](*state["xy"]), None)
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
