"""CrypTen on the shared workloads, run as its users run it: two processes (ranks 0 and 1,
gloo over localhost) started by CrypTen's documented launcher `crypten.mpc.run_multiprocess`,
its default arithmetic secret sharing in the 64-bit ring with 16 fractional bits and its
default trusted-first-party provider for Beaver triples. Rank 0 owns the inputs; the time of a
call is the operation on rank 0 (both ranks run it in lock step: each message waits for the
other rank), not the sharing nor the reveal.

Run by benchmarks/peers_run.py with .venv-crypten's python; see benchmarks/peers/_common.py for
the arguments. CrypTen 0.4.1 predates torch 2.13, which moved a module its ONNX converter
imports: a shim below (_patch_onnx) stands in for it in this process; CrypTen's files are not
changed.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

WORLD = 2


def _patch_onnx():
    """CrypTen 0.4.1's import of its ONNX converter on this torch: it imports
    torch.onnx.symbolic_registry, or else torch.onnx._internal.registration, and torch 2.13 has
    neither. Give it a stand-in for the second (used only to convert PyTorch models through
    ONNX, which these workloads never do), in this process only."""
    import types
    try:
        import torch.onnx._internal.registration  # noqa: F401
    except ImportError:
        m = types.ModuleType("torch.onnx._internal.registration")
        m.registry = None
        sys.modules["torch.onnx._internal.registration"] = m


def lenet5_model(crypten, torch, weights):
    """_common.LENET5_LAYERS as crypten.nn layers (NCHW, OIHW kernels: Keras' transposed; the
    flattening order is the same since C5's output is 1x1), the weights set from rank 0's
    numpy values and encrypted from rank 0: CrypTen's model owner's steps. Built from crypten.nn
    layers, not crypten.nn.from_pytorch: its ONNX export does not run on this torch."""
    nn, ws, layers = crypten.nn, list(weights), []
    for _, kind, shape in _common.LENET5_LAYERS:
        if kind == "pool":
            layers.append(nn.MaxPool2d(2))
            continue
        k, b = ws.pop(0), ws.pop(0)
        if kind == "dense":
            m, k = nn.Linear(*shape), k.T
        else:
            m, k = nn.Conv2d(shape[2], shape[3], 5, padding=2 if kind == "conv_same" else 0), \
                k.transpose(3, 2, 0, 1)
        m.set_parameter("weight", torch.tensor(k))
        m.set_parameter("bias", torch.tensor(b))
        layers += [m] if kind == "dense" else [m, nn.ReLU()]
        if kind != "dense" and shape[3] == 120:
            layers.append(nn.Flatten())
    model = nn.Sequential(*layers)
    model.eval()
    return model.encrypt(src=0)


def measure_program(crypten, torch, workload, xs, reps):
    """sort (CrypTen has none), max of groups of 4 (MPCTensor.max along dim 1), LeNet-5 on
    rank 0's images and its build (layers, weights, encryption); reps + 1 calls, the first
    dropped as a warm-up."""
    if workload == "sort":
        return None, None, ("CrypTen 0.4.1 has no sort (MPCTensor has max, argmax and "
                            "comparisons, no sort or sorting network)")
    sx = crypten.cryptensor(torch.tensor(xs[0] if workload == "max" else
                                         xs[0].transpose(0, 3, 1, 2)), src=0)
    model, ts, z = None, [], None
    for _ in range(reps + 1):
        t0 = time.perf_counter()
        if workload == "max":
            z = sx.max(dim=1)[0]  # (values, one-hot argmax)
        elif workload == "graph_build" or model is None:
            model = lenet5_model(crypten, torch, xs[1:])
        if workload == "lenet5":
            t0 = time.perf_counter()
            z = model(sx)
        ts.append(time.perf_counter() - t0)
    if workload == "graph_build":
        z = model(sx)
    what = {"max": "MPCTensor.max(dim=1) (its default pairwise method)",
            "lenet5": "crypten.nn LeNet-5, encrypted weights and images, forward",
            "graph_build": "crypten.nn LeNet-5 built, weights set and encrypted (CrypTen runs "
                           "eagerly: there is no graph to compile)"}[workload]
    return ts[1:], z.get_plain_text().double().numpy(), (
        f"{what}; rank 0's time; 2 processes, gloo on localhost")


def measure_rank(args, versions):
    import crypten
    import torch
    rank = crypten.comm.get().get_rank()
    torch.set_num_threads(1)  # two ranks on two cores, as a two-machine run would have one each
    fns = {"mul": lambda a, b: a * b, "matmul": lambda a, b: a.matmul(b),
           "comparison": lambda a, b: a < b, "relu": lambda a: a.relu(),
           "sigmoid": lambda a: a.sigmoid(), "reciprocal": lambda a: a.reciprocal(),
           "exp": lambda a: a.exp(),
           "lr_step": lambda x, y, w: w - x.t().matmul(x.matmul(w).sigmoid() - y) * (
               _common.LR_RATE / _common.LR_BATCH)}
    # rsqrt: CrypTen's inv_sqrt (Newton from an exp-based guess; its sqrt is x * inv_sqrt(x))
    fns.update({"tanh": lambda a: a.tanh(), "sqrt": lambda a: a.sqrt(),
                "rsqrt": lambda a: a.inv_sqrt(), "log": lambda a: a.log()})

    def measure(protocol, workload, n, xs):
        if workload == "vit":
            return None, None, _common.VIT_SPU_ONLY
        if workload in _common.PROGRAMS:
            return measure_program(crypten, torch, workload, xs, args.reps)
        sx = [crypten.cryptensor(torch.tensor(x), src=0) for x in xs]
        ts, z = [], None
        for _ in range(args.reps + 1):
            crypten.comm.get().barrier() if hasattr(crypten.comm.get(), "barrier") else None
            t0 = time.perf_counter()
            z = fns[workload](*sx)
            ts.append(time.perf_counter() - t0)
        out = z.get_plain_text().double().numpy()
        return ts[1:], out, ("rank 0's time of the op; 2 processes, gloo on localhost, "
                             "trusted-first-party Beaver triples (CrypTen's default)")

    if rank == 0:
        _common.run_all("crypten", versions, ["aby-2pc-64bit-f16"], measure, args)
    else:  # rank 1 runs the same ops in lock step and writes nothing
        a2 = type("A", (), dict(vars(args), rows=os.devnull))
        _common.run_all("crypten", versions, ["aby-2pc-64bit-f16"], measure, a2)


def main():
    args = _common.parse_args()
    _patch_onnx()
    import crypten
    import crypten.mpc as mpc
    import torch
    versions = {"crypten": _common.version_of("crypten"), "torch": torch.__version__,
                "onnx": _common.version_of("onnx")}

    @mpc.run_multiprocess(world_size=WORLD)
    def job():
        measure_rank(args, versions)

    crypten.init()
    job()


if __name__ == "__main__":
    main()
