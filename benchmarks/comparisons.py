"""The comparison families side by side (issue 26): PrivPy's garbled circuits
and the bitwise protocol (protocols/mpc/bitwise/), embedded, both rings.

Per family and ring: bytes per comparison between the servers, all phases
(garbling or the dealer's triples included: what tp.stats counts for one
tp.less of 10^5 random pairs, eagerly), its rounds, the time of tp.less at
10^3, 10^5 and 10^6 (comparisons per second at 10^6), ReLU of 10^5 and
LeNet-5 per image at batch 100 (the Keras model converted as in
benchmarks/converter.py, trained on the shipped MNIST digits), with the
bytes one image moves. Plaintext TensorFlow for the same tasks is timed in
the same run, and SPU SEMI2K's published bytes per comparison stand beside
ours (PEERS). Each timed call is a tf.function that ends with a one-element
reveal (less, ReLU) or the predictions revealed to the client (LeNet-5), so
it ends with a result on the client.

The families are timed interleaved, call by call (garbled, bitwise,
garbled, ...), after one warm-up call each: whatever else runs on the
machine weighs on both alike. Each time is the median of --reps calls, with
min and max in the JSON. benchmarks/distributed.py times the same workloads
on four server processes and on shaped networks.

    python benchmarks/comparisons.py                # what `make bench` runs (~5 min, 2 cores)
    python benchmarks/comparisons.py --quick        # tiny sizes: checks that everything runs

Results go to benchmarks/results/comparisons.json and comparisons.png.
"""
import os
import time

from absl import app, flags

# imported before absl parses the flags, as in the other benchmarks
import tf_privpy as tp

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ("garbled", "bitwise")

flags.DEFINE_list("rings", ["128", "64"], "rings to measure")
flags.DEFINE_list("comparisons", list(FAMILIES), "comparison families to measure")
flags.DEFINE_list("sizes", ["1000", "100000", "1000000"], "tp.less batch sizes")
flags.DEFINE_integer("relu_n", 100_000, "ReLU elements")
flags.DEFINE_integer("lenet_batch", 100, "LeNet-5 images per predict call")
flags.DEFINE_integer("bytes_n", 100_000, "comparisons whose tp.stats give bytes and rounds")
flags.DEFINE_integer("reps", 3, "timed calls per family and workload (median, min, max)")
flags.DEFINE_bool("quick", False, "tiny sizes, one call, an untrained LeNet-5 on random "
                  "images: checks that everything runs in seconds")
flags.DEFINE_bool("resnet50", True, "the cost bill of ResNet50 (batch 1, 224x224, traced, not "
                  "run) per family, in the first ring (about 20 s each; off with --quick)")
flags.DEFINE_string("out", os.path.join(HERE, "results"), "folder for comparisons.json/.png")
F = flags.FLAGS

#: the peers' published bytes per comparison. SPU's cost model
#: (github.com/secretflow/spu, docs/reference/complexity.md, "Semi2k"): a2b
#: of a K-bit value sends (2 log K + 1) * 2K * (N-1)^2 bits in
#: (log K + 1) * log N rounds, AND triples from a trusted dealer; K = 64,
#: N = 2: 13 * 128 bits = 208 bytes, 7 rounds (shared/ANCHORS.md). Its b2a
#: of the bit back to an arithmetic share adds K * (N-1) bits = 8 bytes, 1 round.
PEERS = {"SPU SEMI2K": {"bytes": (2 * 6 + 1) * 2 * 64 // 8, "rounds": 7,
                        "b2a_bytes": 64 // 8,
                        "source": "SPU docs/reference/complexity.md (Semi2k a2b, K=64, N=2)"}}


def interleaved(fns: dict, reps: int) -> dict:
    """{family: [seconds]}: one warm-up call of each fn (tracing), then
    `reps` rounds of one timed call of each in turn."""
    first = {}
    for f, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        first[f] = time.perf_counter() - t0
    times = {f: [] for f in fns}
    for _ in range(max(1, reps)):
        for f, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[f].append(time.perf_counter() - t0)
    return {f: {"times_s": sorted(ts), "median_s": sorted(ts)[len(ts) // 2],
                "min_s": min(ts), "max_s": max(ts), "first_s": first[f]}
            for f, ts in times.items()}


def scoped(family: str, fn):
    """fn inside tp.comparison(family): the scope decides when a tf.function
    is traced (its warm-up call), so each family has tf.functions of its own."""
    def run():
        with tp.comparison(family):
            return fn()
    return run


def server_bytes(st) -> int:
    return sum(b for _, b in st.between_servers().values())


def measure_ring(bits: int, fams: tuple, data: dict, res: dict) -> None:
    """Every row of one ring into res (rows, plaintext)."""
    import numpy as np
    import tensorflow as tf
    from _report import timing_stats
    tp.reset()
    tp.init(tp.Config(ring_bits=bits))
    rng = np.random.default_rng(bits)
    reps = 1 if F.quick else F.reps
    rows = {f: {"ring": bits, "family": f} for f in fams}
    plain = {"ring": bits}

    # bytes and rounds of one bare comparison batch (eager: nothing else inside)
    n = F.bytes_n
    x, y = tp.share(rng.uniform(-100, 100, n)), tp.share(rng.uniform(-100, 100, n))
    for f in fams:
        with tp.comparison(f):
            tp.less(x, y)   # first-use setup (kernels, garbling tables' buffers)
            with tp.stats() as st:
                tp.less(x, y)
        rows[f].update(bytes_per_cmp=server_bytes(st) / n, rounds=st.rounds, bytes_n=n,
                       links={f"{s}->{d}": b for (s, d), (_, b) in
                              sorted(st.between_servers().items())})

    less = lambda a, b: tp.reveal(tp.less(a, b)[:1])   # noqa: E731
    for n in map(int, F.sizes):
        a, b = rng.uniform(-100, 100, n), rng.uniform(-100, 100, n)
        pa, pb = tp.share(a), tp.share(b)
        fns = {f: scoped(f, lambda g=tf.function(less): g(pa, pb).numpy()) for f in fams}
        for f, t in interleaved(fns, reps).items():
            rows[f][f"less_{n}"] = t
        pf, ta, tb = tf.function(lambda u, v: u < v), tf.constant(a), tf.constant(b)
        plain[f"less_{n}"] = timing_stats(lambda: pf(ta, tb).numpy(), reps)
    top = max(map(int, F.sizes))
    for f in fams:
        rows[f]["cmp_per_s"] = top / rows[f][f"less_{top}"]["median_s"]
    plain["cmp_per_s"] = top / plain[f"less_{top}"]["median_s"]

    n = F.relu_n
    a = rng.uniform(-100, 100, n)
    pa = tp.share(a)
    relu = lambda v: tp.reveal(tp.nn.relu(v)[:1])   # noqa: E731
    fns = {f: scoped(f, lambda g=tf.function(relu): g(pa).numpy()) for f in fams}
    for f, t in interleaved(fns, reps).items():
        rows[f]["relu"] = t
    pr, ta = tf.function(tf.nn.relu), tf.constant(a)
    plain["relu"] = timing_stats(lambda: pr(ta).numpy(), reps)

    model, xb = data["model"], data["images"]
    b = len(xb)
    private = {}
    for f in fams:
        with tp.comparison(f):
            private[f] = tp.keras.convert(model)
    fns = {f: scoped(f, lambda p=private[f]: p.predict(xb, reveal=True).numpy()) for f in fams}
    for f, t in interleaved(fns, reps).items():
        t["ms_per_image"] = 1e3 * t["median_s"] / b
        rows[f]["lenet5"] = t
        with tp.stats() as st:
            fns[f]()
        rows[f]["lenet5"]["bytes_per_image"] = server_bytes(st) / b
        rows[f]["lenet5"]["rounds"] = st.rounds
    pm = tf.function(lambda v: model(v, training=False))
    plain["lenet5"] = timing_stats(lambda: pm(xb).numpy(), reps)
    plain["lenet5"]["ms_per_image"] = 1e3 * plain["lenet5"]["median_s"] / b
    res["rows"] += list(rows.values())
    res["plaintext"].append(plain)


def resnet50_bills(fams: tuple) -> dict:
    """Issue 26's target: ResNet50's converted bill at batch 1, per family
    (traced, nothing runs; tf.keras.applications.ResNet50(weights=None),
    seeded): bytes, rounds, comparisons."""
    import tensorflow as tf
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.applications.ResNet50(weights=None)
    out = {}
    for f in fams:
        bill = tp.keras.convert(model, policy=tp.Policy(comparison=f)).cost(batch_size=1)
        out[f] = {"bytes": bill.bytes, "rounds": bill.rounds, "comparisons": bill.comparisons}
    return out


def table(res: dict) -> tuple:
    """(title, header, rows) of the printed table."""
    sizes = list(map(int, res["sizes"]))
    spu = PEERS["SPU SEMI2K"]
    header = (["ring", "family", "bytes/cmp", "rounds", "SPU SEMI2K bytes/cmp (published)"]
              + [f"less {n:.0e} ms".replace("e+0", "e") for n in sizes]
              + [f"cmp/s at {sizes[-1]:.0e}".replace("e+0", "e"),
                 f"ReLU {res['relu_n']:.0e} ms".replace("e+0", "e"),
                 f"LeNet-5 b{res['lenet_batch']} ms/image", "LeNet-5 MB/image"])
    out = []
    for r in res["rows"]:
        out.append([r["ring"], r["family"], f"{r['bytes_per_cmp']:,.1f}", r["rounds"],
                    f"{spu['bytes']} ({r['bytes_per_cmp'] / spu['bytes']:.2f}x)"]
                   + [f"{1e3 * r[f'less_{n}']['median_s']:.1f}" for n in sizes]
                   + [f"{r['cmp_per_s']:,.0f}", f"{1e3 * r['relu']['median_s']:.1f}",
                      f"{r['lenet5']['ms_per_image']:.2f}",
                      f"{r['lenet5']['bytes_per_image'] / 1e6:.2f}"])
    for p in res["plaintext"]:
        out.append([p["ring"], "plaintext TF", "-", "-", "-"]
                   + [f"{1e3 * p[f'less_{n}']['median_s']:.2f}" for n in sizes]
                   + [f"{p['cmp_per_s']:,.0f}", f"{1e3 * p['relu']['median_s']:.2f}",
                      f"{p['lenet5']['ms_per_image']:.3f}", "-"])
    return ("Comparison families, embedded (four servers in one process): median of "
            f"{res['reps']} interleaved calls", header, out)


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf
    from _report import bar_png, cpu_model, machine, print_table, write_json
    tf.get_logger().setLevel("ERROR")
    fams = tuple(F.comparisons)
    unknown = sorted(set(fams) - set(FAMILIES))
    if unknown:
        raise app.UsageError(f"--comparisons: unknown {unknown}; choose from {FAMILIES}")
    if F.quick:
        F.sizes, F.relu_n, F.lenet_batch, F.bytes_n = ["100", "1000"], 1000, 2, 1000
    tp.init()
    t_start = time.perf_counter()
    rng = np.random.default_rng(0)
    if F.quick:   # the time does not depend on the values; training would dominate
        model = tp.models.lenet5()
        images = rng.uniform(0, 1, (F.lenet_batch, 28, 28, 1)).astype(np.float32)
    else:
        (x, y), (xt, _) = tp.datasets.load_mnist(flatten=False)
        model, images = tp.models.train("lenet5", x, y), xt[:F.lenet_batch]
    res = {"machine": machine(), "cpu": cpu_model(), "quick": F.quick, "sizes": F.sizes,
           "relu_n": F.relu_n, "lenet_batch": F.lenet_batch, "reps": 1 if F.quick else F.reps,
           "families": list(fams), "peers": PEERS, "rows": [], "plaintext": [],
           "loadavg_before": os.getloadavg()}
    for bits in map(int, F.rings):
        measure_ring(bits, fams, {"model": model, "images": images}, res)
    if F.resnet50 and not F.quick:
        tp.reset()
        tp.init(tp.Config(ring_bits=int(F.rings[0])))
        res["resnet50_bill"] = resnet50_bills(fams)
    res["seconds"] = time.perf_counter() - t_start
    res["loadavg_after"] = os.getloadavg()
    title, header, rows = table(res)
    print(f"{res['cpu']}, {res['machine']['cpus']} cores; load average "
          f"{res['loadavg_before'][0]:.1f} before, {res['loadavg_after'][0]:.1f} after; "
          f"{res['seconds']:.0f} s")
    print_table(title, header, rows)
    for f, b in res.get("resnet50_bill", {}).items():
        print(f"ResNet50 bill, batch 1, {F.rings[0]}-bit ring, {f}: {b['bytes'] / 1e9:.2f} GB, "
              f"{b['rounds']} rounds, {b['comparisons']:,} comparisons (issue 26 target: "
              "at most 5 GB)")
    write_json(os.path.join(F.out, "comparisons.json"), res)
    ring = int(F.rings[0])
    series = {}
    for r in res["rows"]:
        if r["ring"] == ring:
            series[r["family"]] = [1e3 * r[f"less_{n}"]["median_s"] for n in map(int, F.sizes)]
            series[r["family"]] += [1e3 * r["relu"]["median_s"], r["lenet5"]["ms_per_image"]]
    labels = [f"less {int(n):.0e}".replace("e+0", "e") for n in F.sizes]
    labels += [f"ReLU {F.relu_n:.0e}".replace("e+0", "e"), f"LeNet-5 b{F.lenet_batch} per image"]
    bar_png(os.path.join(F.out, "comparisons.png"),
            f"comparison families, embedded, {ring}-bit ring: median ms", labels, series, "ms")


if __name__ == "__main__":
    app.run(main)
