"""What every peer runner shares: the workloads, their inputs (the same values for every peer:
numpy's generator with a fixed seed per workload and size), the float64 references, the timing
and the row format. Needs numpy and the standard library only, since each runner runs in its
peer's own venv (benchmarks/peers_run.py starts it there).

A runner is called as

    python benchmarks/peers/NAME_run.py --sizes=10000,100000 --workloads=mul,exp --reps=3 \
        --rows=rows.json

and writes {"peer", "versions", "rows": [...], "errors": [...]} to --rows (an error is a workload
that failed, with the reason; the runner goes on with the next one).
"""
import argparse
import json
import math
import os
import platform
import sys
import time
import traceback

import numpy as np

# name -> (input domain, number of private inputs); matmul's n is the side of a square matrix
WORKLOADS = {
    "mul": ((-10.0, 10.0), 2),
    "matmul": ((-1.0, 1.0), 2),
    "comparison": ((-10.0, 10.0), 2),
    "relu": ((-10.0, 10.0), 1),
    "sigmoid": ((-10.0, 10.0), 1),
    "reciprocal": ((0.5, 50.0), 1),
    "exp": ((-5.0, 5.0), 1),
    # one SGD step of logistic regression: X in [0, 1] (pixels), y in {0, 1}, w in
    # [-0.05, 0.05]; w - LR_RATE * X^T (sigmoid(X w) - y) / batch; n is the batch
    "lr_step": ((0.0, 1.0), 3),
}
# issue 14's other derived functions: tanh on sigmoid's domain, the others on reciprocal's
DERIVED_REFERENCES = {"tanh": np.tanh, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
                      "log": np.log}
WORKLOADS.update({"tanh": ((-10.0, 10.0), 1), "sqrt": ((0.5, 50.0), 1),
                  "rsqrt": ((0.5, 50.0), 1), "log": ((0.5, 50.0), 1)})
ORDER = list(WORKLOADS)
MATMUL_SIDE = 128
LR_BATCH, LR_FEATURES, LR_RATE = 128, 784, 0.1
FIXED = ("matmul", "lr_step")  # one size, whatever --sizes says

# Whole programs (issue 13): sort of n values, max of n groups of 4 (TF-Encrypted's tasks: sort
# 2^16, max of 2^16 groups of 4), LeNet-5 inference at batch n and its build (convert or
# compile) as its own row. Their sizes are their own (below), not --sizes.
WORKLOADS.update({
    "sort": ((-10.0, 10.0), 1),
    "max": ((-10.0, 10.0), 1),  # n groups of 4: [n, 4] -> [n]
    # images in [0, 1]; the weights (LENET5_LAYERS, numpy, fixed seed) are the other inputs
    "lenet5": ((0.0, 1.0), 1),
    "graph_build": ((0.0, 1.0), 1),  # LeNet-5's build at batch n, its first logits checked
    # issue 27: tf_privpy.models.vit() trained on the shipped digits, at batch n (--vit_batches)
    "vit": ((0.0, 1.0), 1),
})
ORDER = list(WORKLOADS)
PROGRAMS = ("sort", "max", "lenet5", "graph_build", "vit")
PROGRAM_SIZES = {"sort": (1024, 65536), "max": (1024, 65536)}
# their seeds, apart from ORDER's positions (which move when workloads are added)
PROGRAM_SEEDS = {"sort": 100, "max": 101, "lenet5": 102, "graph_build": 103}
LENET5_BATCHES = (1, 10)  # --batches; the converter benchmark's batches 1 and 10
MAX_GROUP = 4
# tf_privpy.models.lenet5() (relu_maxpool): (name, kind, kernel or weight shape); conv 5x5,
# c1 'same', the others 'valid'; ReLU after each conv; max-pool 2 after c1 and c3; weights in
# Keras' layouts (HWIO kernels, [in, out] dense), flattening in NHWC order
LENET5_LAYERS = (("c1", "conv_same", (5, 5, 1, 6)), ("s2", "pool", None),
                 ("c3", "conv", (5, 5, 6, 16)), ("s4", "pool", None),
                 ("c5", "conv", (5, 5, 16, 120)), ("f6", "dense", (120, 84)),
                 ("logits", "dense", (84, 10)))


# The Vision Transformer (issue 27): tf_privpy.models.vit() (stem conv 3x3x16 'same' + ReLU;
# patches conv 7x7 stride 7 -> 16 tokens of 64; + a position embedding; 2 pre-norm blocks of
# LayerNorm, 4-head attention (key_dim 16), add, LayerNorm, Dense 128 + exact GELU, Dense 64,
# add; LayerNorm, mean over the tokens, Dense 10), trained on the shipped MNIST digits. Its
# weights (Keras' order, model.get_weights()) and the first held-out digits are a .npz that
# benchmarks/peers/vit_export.py writes in our venv (it needs TensorFlow) and peers_run.py
# hands to every runner (--vit_npz): here numpy reads it, nothing else.
VIT_BATCHES = (1, 32)  # --vit_batches
VIT_PATCH, VIT_HEADS, VIT_KEY_DIM, VIT_DEPTH, VIT_EPSILON = 7, 4, 16, 2, 1e-3
VIT_WEIGHTS = 41  # stem 2, patches 2, position 1, 16 per block, norm 2, logits 2
LOGITS = ("lenet5", "graph_build", "vit")  # workloads whose rows count argmax agreement
VIT_SPU_ONLY = "the ViT (issue 27) is written for SPU only here: its race is against SPU's"


def load_vit(path):
    """(digits [N, 28, 28, 1], weights in Keras' order, Keras' float32 logits of the digits,
    labels, what the weights are) from vit_export.py's .npz."""
    if not path:
        raise ValueError("the vit workload needs --vit_npz (benchmarks/peers/vit_export.py "
                         "writes it; benchmarks/peers_run.py does that itself)")
    with np.load(path) as z:
        ws = [z[f"w{i}"] for i in range(int(z["count"]))]
        return z["x"], ws, z["keras_logits"], z["y"], str(z["source"])


def vit_forward(xp, ops, x, weights):
    """The ViT's logits, written once for numpy (the float64 reference) and jax.numpy (SPU's
    program): xp is the array module; ops["conv"](x, kernel, stride, "SAME" | "VALID") an NHWC
    convolution with an HWIO kernel, ops["erf"] and ops["rsqrt"] the element-wise functions.
    Keras' layers: LayerNormalization (x - mean) * rsqrt(var + 1e-3) * gamma + beta;
    MultiHeadAttention's einsums, the query scaled by 1/sqrt(key_dim); GELU's erf form."""
    if len(weights) != VIT_WEIGHTS:
        raise ValueError(f"the ViT has {VIT_WEIGHTS} weights, got {len(weights)}")
    w = iter(weights)
    take = lambda k: [next(w) for _ in range(k)]  # noqa: E731

    def norm(h):
        g, b = take(2)
        c = h - h.mean(axis=-1, keepdims=True)
        return c * ops["rsqrt"]((c * c).mean(axis=-1, keepdims=True) + VIT_EPSILON) * g + b

    k, b = take(2)
    h = xp.maximum(ops["conv"](x, k, 1, "SAME") + b, 0.0)
    k, b = take(2)
    h = ops["conv"](h, k, VIT_PATCH, "VALID") + b
    h = h.reshape(h.shape[0], -1, h.shape[-1]) + next(w)  # tokens + position embedding
    for _ in range(VIT_DEPTH):
        a = norm(h)
        qk, qb, kk, kb, vk, vb, ok, ob = take(8)
        q = (xp.einsum("btd,dhk->bthk", a, qk) + qb) * (1.0 / np.sqrt(VIT_KEY_DIM))
        s = xp.einsum("bshk,bthk->bhts", xp.einsum("btd,dhk->bthk", a, kk) + kb, q)
        e = xp.exp(s - s.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)  # softmax over the keys
        o = xp.einsum("bhts,bshk->bthk", p, xp.einsum("btd,dhk->bthk", a, vk) + vb)
        h = h + xp.einsum("bthk,hkd->btd", o, ok) + ob
        m = norm(h)
        k, b = take(2)
        m = m @ k + b
        m = 0.5 * m * (1.0 + ops["erf"](m * (1.0 / np.sqrt(2.0))))  # exact GELU
        k, b = take(2)
        h = h + (m @ k + b)
    h = norm(h).mean(axis=1)
    k, b = take(2)
    return h @ k + b


def vit_reference(x, weights):
    """The ViT's logits in float64 (numpy; erf from the standard library)."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    ops = {"conv": lambda a, k, stride, pad: _conv_nhwc(a, k, pad == "SAME", stride),
           "erf": erf, "rsqrt": lambda v: 1.0 / np.sqrt(v)}
    return vit_forward(np, ops, np.asarray(x, np.float64),
                       [np.asarray(v, np.float64) for v in weights])


def lenet5_weights():
    """[kernel, bias] per conv or dense layer of LENET5_LAYERS, Glorot-uniform kernels and small
    biases from a fixed seed: the same model for every peer."""
    rng = np.random.default_rng([PROGRAM_SEEDS["lenet5"], 5])
    out = []
    for _, kind, shape in LENET5_LAYERS:
        if kind == "pool":
            continue
        fan_in, fan_out = int(np.prod(shape[:-1])), shape[-1] * (
            shape[0] * shape[1] if len(shape) == 4 else 1)
        lim = np.sqrt(6.0 / (fan_in + fan_out))
        out += [rng.uniform(-lim, lim, shape), rng.uniform(-0.1, 0.1, shape[-1:])]
    return out


def program_sizes(workload, sizes, batches=LENET5_BATCHES, vit_batches=VIT_BATCHES):
    """sort and max: their sizes up to the largest of --sizes (else its smallest); LeNet-5:
    --batches; its build: the first batch only; the ViT: --vit_batches."""
    if workload == "vit":
        return list(vit_batches)
    if workload in ("lenet5", "graph_build"):
        return list(batches)[:1] if workload == "graph_build" else list(batches)
    own = [n for n in PROGRAM_SIZES[workload] if n <= max(sizes)]
    return own or [min(sizes)]


def program_inputs(workload, n, vit_npz=None):
    if workload == "vit":  # the first n held-out digits, then the trained weights
        x, ws, _, _, _ = load_vit(vit_npz)
        if n > len(x):
            raise ValueError(f"{vit_npz} holds {len(x)} digits, batch {n} asked")
        return [x[:n]] + ws
    rng = np.random.default_rng([PROGRAM_SEEDS[workload], n])
    if workload == "sort":
        return [rng.uniform(-10.0, 10.0, n)]
    if workload == "max":
        return [rng.uniform(-10.0, 10.0, (n, MAX_GROUP))]
    return [rng.uniform(0.0, 1.0, (n, 28, 28, 1))] + lenet5_weights()


def _conv_nhwc(x, k, pad, stride=1):
    """float64 NHWC convolution (cross-correlation, as TF's) by summing the shifted taps;
    pad: 'same' for an odd kernel at stride 1 (k // 2 zeros each side), else 'valid'."""
    kh, kw = k.shape[:2]
    if pad:
        x = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    h, w = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], h, w, k.shape[3]))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,cd->nhwd",
                             x[:, i:i + stride * h:stride, j:j + stride * w:stride, :], k[i, j])
    return out


def lenet5_reference(x, weights):
    """LeNet-5's logits in float64 (the layers of LENET5_LAYERS)."""
    ws = list(weights)
    for _, kind, _ in LENET5_LAYERS:
        if kind == "pool":
            n, h, w, c = x.shape
            x = x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))
            continue
        k, b = ws.pop(0), ws.pop(0)
        if kind == "dense":
            x = x.reshape(x.shape[0], -1) @ k + b
        else:
            x = np.maximum(_conv_nhwc(x, k, kind == "conv_same") + b, 0.0)
    return x


def program_reference(workload, xs):
    if workload == "sort":
        return np.sort(xs[0])
    if workload == "max":
        return xs[0].max(axis=1)
    if workload == "vit":
        return vit_reference(xs[0], xs[1:])
    return lenet5_reference(xs[0], xs[1:])


def inputs(workload, n, vit_npz=None):
    """The inputs of one workload at n elements (matmul: two MATMUL_SIDE^2 matrices whatever n),
    identical in every runner (vit: from the .npz at vit_npz)."""
    if workload in PROGRAMS:
        return program_inputs(workload, n, vit_npz)
    (lo, hi), k = WORKLOADS[workload]
    rng = np.random.default_rng([ORDER.index(workload), n])
    if workload == "lr_step":
        return [rng.uniform(0.0, 1.0, (LR_BATCH, LR_FEATURES)),
                rng.integers(0, 2, (LR_BATCH, 1)).astype(np.float64),
                rng.uniform(-0.05, 0.05, (LR_FEATURES, 1))]
    shape = (MATMUL_SIDE, MATMUL_SIDE) if workload == "matmul" else (n,)
    return [rng.uniform(lo, hi, shape) for _ in range(k)]


def reference(workload, xs):
    if workload in PROGRAMS:
        return program_reference(workload, xs)
    x = xs[0]
    if workload == "mul":
        return x * xs[1]
    if workload == "matmul":
        return x @ xs[1]
    if workload == "comparison":
        return (x < xs[1]).astype(np.float64)
    if workload == "relu":
        return np.maximum(x, 0.0)
    if workload == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if workload == "reciprocal":
        return 1.0 / x
    if workload == "exp":
        return np.exp(x)
    if workload == "lr_step":
        y, w = xs[1], xs[2]
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        return w - LR_RATE / LR_BATCH * (x.T @ (p - y))
    if workload in DERIVED_REFERENCES:
        return DERIVED_REFERENCES[workload](x)
    raise KeyError(workload)


def errors(workload, xs, out, ref=None):
    """(max absolute, max relative error) of out against the float64 reference."""
    ref = reference(workload, xs) if ref is None else ref
    out = np.asarray(out, dtype=np.float64).reshape(ref.shape)
    err = np.abs(out - ref)
    rel = err / np.maximum(np.abs(ref), 1e-12)
    if workload in ("tanh", "log"):  # zero at x = 0 and x = 1
        rel = err / np.maximum(np.abs(ref), 1e-3)
    if workload in ("comparison", "relu", "mul", "matmul", "lr_step"):  # zeros in the reference
        rel = err / np.maximum(np.abs(ref), 1e-3)
    if workload in PROGRAMS:  # sorted values, maxima and logits near zero
        rel = err / np.maximum(np.abs(ref), 1e-3)
    return float(err.max()), float(rel.max())


def time_reps(fn, reps, warmup=1):
    """Seconds of `reps` calls of fn after `warmup` untimed calls (one: the tracing); fn returns
    the (revealed) result of its last call, kept for the error."""
    if reps < 1:
        raise ValueError(f"--reps must be at least 1, got {reps}")
    out = None
    for _ in range(warmup):
        out = fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return ts, out


def compare(workload, xs, out):
    """errors() and, for the logits of LOGITS' workloads, the fraction of images whose
    arg-max (the predicted digit) is the float64 reference's (else None)."""
    ref = reference(workload, xs)
    a, r = errors(workload, xs, out, ref)
    if workload not in LOGITS:
        return a, r, None
    out = np.asarray(out, dtype=np.float64).reshape(ref.shape)
    return a, r, float(np.mean(out.argmax(-1) == ref.argmax(-1)))


def row(peer, protocol, workload, n, ts, max_abs, max_rel, versions, note="", agreement=None):
    ts = sorted(ts)
    elements = {"matmul": MATMUL_SIDE * MATMUL_SIDE, "lr_step": LR_BATCH}.get(workload, n)
    return {"peer": peer, "protocol": protocol, "workload": workload,
            "n": elements, "domain": list(WORKLOADS[workload][0]),
            "best_s": ts[0], "median_s": ts[len(ts) // 2], "min_s": ts[0], "max_s": ts[-1],
            "us_per_element": ts[0] / elements * 1e6,
            "max_abs_error": max_abs, "max_rel_error": max_rel, "argmax_agreement": agreement,
            "reps": len(ts), "versions": versions, "note": note}


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--workloads", default=",".join(ORDER))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed calls before the timed ones (tf_privpy's runner; 0: the smoke "
                   "test, where a second LeNet-5 build would check nothing new)")
    p.add_argument("--protocols", default="")
    p.add_argument("--rows", required=True, help="where to write the JSON")
    p.add_argument("--batches", default=",".join(map(str, LENET5_BATCHES)),
                   help="LeNet-5's batch sizes (graph_build: the first)")
    p.add_argument("--vit_batches", default=",".join(map(str, VIT_BATCHES)),
                   help="the ViT's batch sizes (vit)")
    p.add_argument("--vit_npz", default="",
                   help="the ViT's weights and digits (benchmarks/peers/vit_export.py)")
    a = p.parse_args(argv)
    a.batches = [int(s) for s in a.batches.split(",") if s]
    a.vit_batches = [int(s) for s in a.vit_batches.split(",") if s]
    a.sizes = [int(s) for s in a.sizes.split(",") if s]
    a.workloads = [w for w in a.workloads.split(",") if w]
    a.protocols = [s for s in a.protocols.split(",") if s]
    return a


def sizes_for(workload, sizes, batches=LENET5_BATCHES, vit_batches=VIT_BATCHES):
    """matmul and lr_step run once (their sizes are fixed), the others at every size."""
    if workload in PROGRAMS:
        return program_sizes(workload, sizes, batches, vit_batches)
    return sizes[:1] if workload in FIXED else sizes


def run_all(peer, versions, protocols, measure, args):
    """measure(protocol, workload, n, xs) -> (times, revealed output, note); every failure is
    recorded with its reason and the next workload runs. Writes --rows."""
    rows, errs = [], []
    for protocol in protocols:
        for workload in args.workloads:
            for n in sizes_for(workload, args.sizes, getattr(args, "batches", LENET5_BATCHES),
                               getattr(args, "vit_batches", VIT_BATCHES)):
                try:
                    xs = inputs(workload, n, getattr(args, "vit_npz", None))
                    ts, out, note = measure(protocol, workload, n, xs)
                except Exception as e:  # recorded, not hidden: the next workload still runs
                    errs.append({"peer": peer, "protocol": protocol, "workload": workload,
                                 "n": n, "reason": f"{type(e).__name__}: {e}"[:500],
                                 "trace": traceback.format_exc()[-1500:]})
                    print(f"{peer} {protocol} {workload} n={n}: FAILED {e}", file=sys.stderr,
                          flush=True)
                    continue
                if ts is None and note is None:  # a variant that does not apply
                    continue
                if ts is None:  # the peer has no such function
                    errs.append({"peer": peer, "protocol": protocol, "workload": workload,
                                 "n": n, "reason": note})
                    continue
                a, r, agree = compare(workload, xs, out)
                rows.append(row(peer, protocol, workload, n, ts, a, r, versions, note, agree))
                print(f"{peer} {protocol} {workload} n={n}: best {min(ts):.4f} s "
                      f"max abs err {a:.2e}", flush=True)
            # after every workload: a runner stopped by peers_run's timeout keeps its rows
            write(args.rows, peer, versions, rows, errs)
    write(args.rows, peer, versions, rows, errs)


def write(path, peer, versions, rows, errs):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    if path == os.devnull:
        return
    with open(path + ".tmp", "w") as f:  # whole or not at all: a timeout can stop the runner
        json.dump({"peer": peer, "versions": versions, "python": platform.python_version(),
                   "rows": rows, "errors": errs}, f, indent=1)
    os.replace(path + ".tmp", path)


def version_of(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return None
