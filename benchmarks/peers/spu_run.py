"""SPU (SecretFlow) on the shared workloads: its simulator (spu.utils.simulation: one thread per
party in this process, in-memory links), protocols SEMI2K (2 parties, trusted-dealer
correlations) and ABY3 (3 parties, replicated sharing), 64-bit ring (FM64, SPU's default 18
fractional bits). Each workload is a jax.numpy function compiled once by SPU's frontend; the
inputs are shared once; the time of a call is the parties' run of the compiled program (from a
barrier all party threads pass to the last one's end), not the compilation, sharing or reveal.

The ViT (issue 27, vit): the Keras ViT's layers in jax.numpy (spu_run.vit_fn on
_common.vit_forward: lax convolutions, layer norms by lax.rsqrt, softmax attention, exact GELU by
jax.scipy.special.erf, which jax lowers to a polynomial SPU runs), checked once in plaintext
against Keras' logits of the same weights and digits before SPU runs it; the digits and all
the weights are secret inputs, as ours are.

Run by benchmarks/peers_run.py with .venv-spu's python; see benchmarks/peers/_common.py for
the arguments (--protocols=SEMI2K,ABY3,SEMI2K-processes,ABY3-processes by default).
"-processes": SPU's multi-process mode, one process per party (spawned here, as SPU's own
node launcher would) with brpc links on localhost, the compiled program and each party's
input shares handed to it; timed by rank 0 after a link barrier.
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

WORLD = {"SEMI2K": 2, "ABY3": 3, "CHEETAH": 2}
BASE_PORT = 61900


def _party_process(rank, wsize, protocol, port, exe_bytes, names, shares, reps, q):
    """One SPU party in a process of its own, brpc links on localhost (multi-process mode):
    runs the compiled program reps+1 times after a link barrier each, puts (times, its output
    share) on q."""
    try:
        import spu.api as spu_api
        import spu.libspu as libspu
        desc = libspu.link.Desc()
        desc.recv_timeout_ms = 600_000
        for r in range(wsize):
            desc.add_party(f"id_{r}", f"127.0.0.1:{port + r}")
        lctx = libspu.link.create_brpc(desc, rank)
        config = libspu.RuntimeConfig(protocol=getattr(libspu.ProtocolKind, protocol),
                                      field=libspu.FieldType.FM64)
        rt = spu_api.Runtime(lctx, config)
        exe = libspu.Executable()
        exe.ParseFromString(exe_bytes)
        for name, (meta, chunks) in zip(names, shares):
            sh = libspu.Share()
            sh.meta, sh.share_chunks = meta, chunks
            rt.set_var(name, sh)
        ts = []
        for _ in range(reps + 1):
            lctx.barrier()
            t0 = time.perf_counter()
            rt.run(exe)
            ts.append(time.perf_counter() - t0)
        out = rt.get_var(exe.output_names[0])
        lctx.stop_link()
        q.put((rank, ts[1:], (out.meta, list(out.share_chunks)), None))
    except Exception as e:  # reported by the parent
        q.put((rank, None, None, f"{type(e).__name__}: {e}"))


def program_fns(jax, jnp):
    """The whole programs of _common.PROGRAMS as jax functions: sort, max of groups of 4, and
    LeNet-5 (_common.LENET5_LAYERS) with NHWC inputs and Keras' HWIO kernels."""
    def lenet5(x, *ws):
        ws = list(ws)
        for _, kind, _ in _common.LENET5_LAYERS:
            if kind == "pool":
                x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                          "VALID")
                continue
            k, b = ws.pop(0), ws.pop(0)
            if kind == "dense":
                x = x.reshape(x.shape[0], -1) @ k + b
            else:
                x = jax.nn.relu(jax.lax.conv_general_dilated(
                    x, k, (1, 1), "SAME" if kind == "conv_same" else "VALID",
                    dimension_numbers=("NHWC", "HWIO", "NHWC")) + b)
        return x
    return {"sort": jnp.sort, "max": lambda a: jnp.max(a, axis=1), "lenet5": lenet5,
            "graph_build": lenet5, "vit": vit_fn(jax, jnp)}


def vit_fn(jax, jnp):
    """The ViT (_common.vit_forward) in jax.numpy: convolutions by jax.lax.conv_general_dilated
    (NHWC, Keras' HWIO kernels), jax.lax.rsqrt in the layer norms, exact GELU by
    jax.scipy.special.erf (its lowering is a polynomial SPU runs; no approximation of ours)."""
    ops = {"conv": lambda a, k, stride, pad: jax.lax.conv_general_dilated(
               a, k, (stride, stride), pad, dimension_numbers=("NHWC", "HWIO", "NHWC")),
           "erf": jax.scipy.special.erf, "rsqrt": jax.lax.rsqrt}
    return lambda x, *ws: _common.vit_forward(jnp, ops, x, ws)


def check_vit_in_jax(jax, fn, vit_npz, tol=1e-4):
    """issue 27: the jax ViT in plaintext (float32, jit) equals Keras' logits of the same
    weights and digits; returns the largest difference (raises above tol)."""
    import numpy as np
    x, ws, keras_logits, _, _ = _common.load_vit(vit_npz)
    d = float(np.abs(np.asarray(jax.jit(fn)(x, *ws)) - keras_logits).max())
    if not d <= tol:
        raise AssertionError(f"the jax ViT differs from Keras' logits by {d:.2e} (> {tol})")
    return d


def main():
    args = _common.parse_args()
    protocols = args.protocols or ["SEMI2K", "ABY3", "SEMI2K-processes", "ABY3-processes"]
    import jax
    import jax.numpy as jnp
    import numpy as np
    import spu.api as spu_api
    import spu.libspu as libspu
    import spu.utils.frontend as spu_fe

    versions = {"spu": _common.version_of("spu"), "jax": jax.__version__,
                "jaxlib": _common.version_of("jaxlib")}
    fns = {"mul": lambda a, b: a * b, "matmul": lambda a, b: a @ b,
           "comparison": lambda a, b: (a < b).astype(a.dtype),
           "relu": lambda a: jnp.maximum(a, 0.0), "sigmoid": jax.nn.sigmoid,
           "reciprocal": lambda a: 1.0 / a, "exp": jnp.exp,
           "lr_step": lambda x, y, w: w - (_common.LR_RATE / _common.LR_BATCH) * (
               x.T @ (jax.nn.sigmoid(x @ w) - y))}
    fns.update({"tanh": jnp.tanh, "sqrt": jnp.sqrt, "rsqrt": jax.lax.rsqrt, "log": jnp.log})

    fns.update(program_fns(jax, jnp))
    checked = {}

    def vit_note():
        """the plaintext check of the jax ViT against Keras, once (issue 27)"""
        if "vit" not in checked:
            checked["vit"] = check_vit_in_jax(jax, fns["vit"], args.vit_npz)
        return f"; plaintext jax float32 vs Keras logits {checked['vit']:.1e}"

    def measure(protocol, workload, n, xs):
        if workload == "graph_build" and protocol.endswith("-processes"):
            return None, None, None  # the compilation is the same as in the simulator's row
        processes = protocol.endswith("-processes")
        protocol = protocol.replace("-processes", "")
        extra = vit_note() if workload == "vit" else ""
        wsize = WORLD[protocol]
        config = libspu.RuntimeConfig(protocol=getattr(libspu.ProtocolKind, protocol),
                                      field=libspu.FieldType.FM64)
        io = spu_api.Io(wsize, config)
        xs32 = [np.asarray(x, dtype=np.float32) for x in xs]
        names = [f"in{i}" for i in range(len(xs))]
        build_ts = []
        for _ in range(args.reps + 1 if workload == "graph_build" else 1):
            t0 = time.perf_counter()
            executable, _ = spu_fe.compile(
                spu_fe.Kind.JAX, fns[workload], tuple(xs32), {}, names,
                [libspu.Visibility.VIS_SECRET] * len(xs), lambda outs: [f"out{i}" for i in
                                                                     range(len(outs))])
            build_ts.append(time.perf_counter() - t0)
        shares = [io.make_shares(x, libspu.Visibility.VIS_SECRET) for x in xs32]
        if processes:
            ts, out, note = multi_process(protocol, wsize, executable, names, shares, io)
            return ts, out, note + extra
        desc = libspu.link.Desc()
        for rank in range(wsize):
            desc.add_party(f"id_{rank}", f"thread_{rank}")

        def one_call():
            barrier = threading.Barrier(wsize)
            start, outs, errs = [0.0], [None] * wsize, []

            def party(rank):
                try:
                    lctx = libspu.link.create_mem(desc, rank)
                    rt = spu_api.Runtime(lctx, libspu.RuntimeConfig(config))
                    for name, s in zip(names, shares):
                        rt.set_var(name, s[rank])
                    barrier.wait()
                    if rank == 0:
                        start[0] = time.perf_counter()
                    rt.run(executable)
                    outs[rank] = [rt.get_var(nm) for nm in executable.output_names]
                except Exception as e:  # re-raised in the caller
                    errs.append(e)
                    barrier.abort()

            th = [threading.Thread(target=party, args=(r,)) for r in range(wsize)]
            [t.start() for t in th]
            [t.join() for t in th]
            end = time.perf_counter()
            if errs:
                raise errs[0]
            return end - start[0], io.reconstruct([o[0] for o in outs])

        ts, out = [], None
        one_call()  # warm-up
        for _ in range(1 if workload == "graph_build" else args.reps):
            t, out = one_call()
            ts.append(t)
        if workload == "graph_build":
            return build_ts[1:], np.asarray(out, dtype=np.float64), (
                "spu.utils.frontend.compile of the jax LeNet-5 (jit, lowering, SPU passes; the "
                "same for every protocol), after a warm-up compile")
        return ts, np.asarray(out, dtype=np.float64), (
            f"simulator ({wsize} party threads, in-memory links), FM64, "
            "time of the compiled program's run" + extra)

    port = [BASE_PORT]

    def multi_process(protocol, wsize, executable, names, shares, io):
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        port[0] += 8  # fresh ports per workload
        procs = [ctx.Process(target=_party_process, args=(
            r, wsize, protocol, port[0], executable.SerializeToString(), names,
            [(s[r].meta, list(s[r].share_chunks)) for s in shares], args.reps, q))
            for r in range(wsize)]
        [p.start() for p in procs]
        got = sorted((q.get(timeout=1800) for _ in procs), key=lambda g: g[0])
        [p.join(timeout=60) for p in procs]
        bad = [g[3] for g in got if g[3]]
        if bad:
            raise RuntimeError(bad[0])
        outs = []
        for _, _, (meta, chunks), _ in got:
            sh = libspu.Share()
            sh.meta, sh.share_chunks = meta, chunks
            outs.append(sh)
        return got[0][1], np.asarray(io.reconstruct(outs), dtype=np.float64), (
            f"multi-process: {wsize} party processes, brpc links on localhost, FM64, rank 0's "
            "time of the compiled program's run after a link barrier")

    _common.run_all("spu", versions, protocols, measure, args)


if __name__ == "__main__":
    main()
