"""Shared parts of the benchmark programs: timing, the plaintext training step,
and the output (a table on stdout, JSON and PNG)."""
import json
import os
import platform
import time
from typing import Callable, Dict, List, Tuple


def timing_stats(fn: Callable[[], object], reps: int) -> Dict[str, float]:
    """min_s, median_s, max_s of `reps` calls of fn after one warm-up call
    (tracing, allocation); benchmarks/report.py shows all three, since one
    number hides how much a shared machine's load moved the others."""
    fn()
    ts = []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return {"min_s": ts[0], "median_s": ts[len(ts) // 2], "max_s": ts[-1], "reps": len(ts)}


def timings(fn: Callable[[], object], reps: int) -> Tuple[float, float]:
    """(best, median) seconds of `reps` calls of fn after one warm-up call."""
    s = timing_stats(fn, reps)
    return s["min_s"], s["median_s"]


def best_time(fn: Callable[[], object], reps: int) -> float:
    """Best of `reps` timed calls after a warm-up call, in seconds."""
    return timings(fn, reps)[0]


def plain_sgd_step(model, loss, optimizer) -> Callable:
    """One plaintext training step of a Keras model on a batch (x, y), as a
    tf.function: the baseline the private training steps are timed against."""
    import tensorflow as tf

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            value = loss(yb, model(xb, training=True))
        optimizer.apply_gradients(zip(tape.gradient(value, model.trainable_variables),
                                      model.trainable_variables))
    return step


def machine() -> Dict[str, str]:
    return {"cpus": str(os.cpu_count()), "machine": platform.machine(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), for the benchmarks' headers."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def print_table(title: str, header: List[str], rows: List[List]) -> None:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}")
    for i, r in enumerate(cells):
        print("  " + "  ".join(c.rjust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("  " + "  ".join("-" * w for w in widths))


def write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    print(f"wrote {path}")


def bar_png(path: str, title: str, labels: List[str], series: Dict[str, List[float]],
            ylabel: str, log: bool = True, legend_outside: bool = False) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    x = np.arange(len(labels))
    w = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6, len(labels) * 1.3), 4))
    for i, (name, vals) in enumerate(series.items()):
        ax.bar(x + i * w - 0.4 + w / 2, vals, w, label=name)
    ax.set_xticks(x, labels, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    if legend_outside:  # when the bars leave no room for it
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
