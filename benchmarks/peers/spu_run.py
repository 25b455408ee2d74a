"""SPU (SecretFlow) on the shared workloads: its simulator (spu.utils.simulation: one thread per
party in this process, in-memory links), protocols SEMI2K (2 parties, trusted-dealer
correlations) and ABY3 (3 parties, replicated sharing), 64-bit ring (FM64, SPU's default 18
fractional bits). Each workload is a jax.numpy function compiled once by SPU's frontend; the
inputs are shared once; the time of a call is the parties' run of the compiled program (from a
barrier all party threads pass to the last one's end), not the compilation, sharing or reveal.

Run by benchmarks/peers_run.py with .venv-spu's python; see benchmarks/peers/_common.py for
the arguments (--protocols=SEMI2K,ABY3 by default).
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

WORLD = {"SEMI2K": 2, "ABY3": 3, "CHEETAH": 2}


def main():
    args = _common.parse_args()
    protocols = args.protocols or ["SEMI2K", "ABY3"]
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
           "reciprocal": lambda a: 1.0 / a, "exp": jnp.exp}

    def measure(protocol, workload, n, xs):
        wsize = WORLD[protocol]
        config = libspu.RuntimeConfig(protocol=getattr(libspu.ProtocolKind, protocol),
                                      field=libspu.FieldType.FM64)
        io = spu_api.Io(wsize, config)
        xs32 = [np.asarray(x, dtype=np.float32) for x in xs]
        names = [f"in{i}" for i in range(len(xs))]
        executable, _ = spu_fe.compile(
            spu_fe.Kind.JAX, fns[workload], tuple(xs32), {}, names,
            [libspu.Visibility.VIS_SECRET] * len(xs), lambda outs: [f"out{i}" for i in
                                                                 range(len(outs))])
        shares = [io.make_shares(x, libspu.Visibility.VIS_SECRET) for x in xs32]
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
        for _ in range(args.reps):
            t, out = one_call()
            ts.append(t)
        return ts, np.asarray(out, dtype=np.float64), (
            f"simulator ({wsize} party threads, in-memory links), FM64, "
            "time of the compiled program's run")

    _common.run_all("spu", versions, protocols, measure, args)


if __name__ == "__main__":
    main()
