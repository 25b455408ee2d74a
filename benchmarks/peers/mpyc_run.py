"""MPyC (Shamir secret sharing, honest majority) on the shared workloads, as its users run it:
`python mpyc_run.py -M3 ...` makes party 0, which starts parties 1 and 2 as processes of their
own on localhost (MPyC's own launcher) and talks to them over TCP. Secure fixed point
(mpc.SecFxp(64, 16): 64-bit values, 16 fractional bits, like TF-Encrypted's and CrypTen's
rings), vectorized as MPyC's secure numpy arrays. The time of one call is the operation until
party 0 holds its share of the result (mpc.gather): no reveal. MPyC has no exp or sigmoid,
nor tanh, sqrt, rsqrt or log (its statistics module's private scalar square root, one
comparison per output bit, is no array function): those are recorded as not available.

Run by benchmarks/peers_run.py with .venv-mpyc's python; see benchmarks/peers/_common.py for
the arguments.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

PARTIES = 3


def main():
    import argparse
    p = argparse.ArgumentParser(add_help=False)
    for a in ("--sizes", "--workloads", "--protocols", "--rows"):
        p.add_argument(a, default="")
    p.add_argument("--reps", type=int, default=3)
    ours, _ = p.parse_known_args()
    args = _common.parse_args(sum(([k, str(v)] for k, v in [
        ("--sizes", ours.sizes or "10000,100000"), ("--reps", ours.reps),
        ("--workloads", ours.workloads or ",".join(_common.ORDER)),
        ("--rows", ours.rows or "/dev/null")]), []))

    import numpy as np
    from mpyc.runtime import mpc

    secfxp = mpc.SecFxp(64, 16)
    versions = {"mpyc": _common.version_of("mpyc"), "gmpy2": _common.version_of("gmpy2"),
                "numpy": np.__version__}
    protocol = f"shamir-{len(mpc.parties)}pc"

    ops = {"mul": lambda a, b: a * b, "matmul": lambda a, b: a @ b,
           "comparison": lambda a, b: a < b, "relu": lambda a: mpc.np_maximum(a, 0),
           "reciprocal": lambda a: mpc.np_reciprocal(a)}
    # sort: MPyC's sorting network (np_sort); max of groups of 4 along axis 1 (np_amax)
    ops.update({"sort": lambda a: mpc.np_sort(a), "max": lambda a: mpc.np_amax(a, axis=1)})
    lacks = {"lenet5": "MPyC 0.11 has no convolution or pooling for its secure arrays (LeNet-5 "
                       "not written for MPyC here)", "graph_build": "no LeNet-5 in MPyC (lenet5)",
             "vit": _common.VIT_SPU_ONLY}

    async def run():
        await mpc.start()
        rows, errs = [], []
        for workload in args.workloads:
            for n in _common.sizes_for(workload, args.sizes, args.batches, args.vit_batches):
                if workload not in ops:
                    errs.append({"peer": "mpyc", "protocol": protocol, "workload": workload,
                                 "n": n, "reason": lacks.get(workload, (
                                     f"MPyC 0.11 has no secure {workload}" + (
                                         " (no sigmoid)" if workload == "lr_step" else "")))})
                    continue
                xs = _common.inputs(workload, n)
                try:
                    # party 0 inputs; the others pass an array of the same shape, which
                    # MPyC ignores (an all-zero array hangs MPyC 0.11: it is typed apart)
                    sx = [mpc.input(secfxp.array(x), senders=0) for x in xs]
                    ts, z = [], None
                    for _ in range(args.reps + 1):  # the first call warms up
                        t0 = time.perf_counter()
                        z = ops[workload](*sx)
                        await mpc.gather(z)
                        ts.append(time.perf_counter() - t0)
                    out = np.asarray(await mpc.output(z), dtype=np.float64)
                    a, r = _common.errors(workload, xs, out)
                    note = ("time until party 0 holds its share (no reveal); 3 local "
                            "processes over TCP")
                    if workload == "reciprocal" and r > 0.5:
                        note += "; MPyC's fixed-point reciprocal gave wrong values here"
                    rows.append(_common.row("mpyc", protocol, workload, n, ts[1:], a, r,
                                            versions, note))
                    print(f"mpyc {workload} n={n}: best {min(ts[1:]):.4f} s max abs err "
                          f"{a:.2e}", flush=True)
                except Exception as e:  # recorded; the next workload runs
                    errs.append({"peer": "mpyc", "protocol": protocol, "workload": workload,
                                 "n": n, "reason": f"{type(e).__name__}: {e}"[:500]})
        await mpc.shutdown()
        if mpc.pid == 0:
            _common.write(args.rows, "mpyc", versions, rows, errs)

    mpc.run(run())


if __name__ == "__main__":
    if not any(a.startswith("-M") for a in sys.argv[1:]) and "-I" not in sys.argv:
        sys.argv[1:1] = [f"-M{PARTIES}"]
    main()
