"""tp.LargeArray (issue 29): shares on S1's and S2's disks, computed on block
by block.

Embedded (one process, each party's folder its own): sharing to disk from
an array, a .npy file and a generator; views; products, sums, element-wise
ops against numpy within tests/tolerances.py; the two folders never hold
each other's share, every block's masks are fresh; mismatched files are
refused before computing; each block read runs on its own server (the run's
partition graphs), and a broken variant that reads on the client is caught.
test_shares_larger_than_memory runs a child process whose address space
cannot hold the shares (tests/large_memory_child.py), and
test_matrix_factorization_larger_than_memory runs MF's steps in one. The four-process path
uses the session's cluster (conftest.shared_cluster).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import graphcheck
import tf_privpy as tp
from tf_privpy.large import blockfile, party, stream
from tf_privpy.protocols.mpc.runtime.placement import canon
from tolerances import matmul_tol, mul_tol, ulp

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK = 4096  # bytes of one share per block: many blocks from small arrays


def grid(a, f=20):
    return np.round(np.asarray(a, np.float64) * 2.0 ** f) / 2.0 ** f


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("large")
    d = {"S1": str(root / "s1"), "S2": str(root / "s2")}
    tp.reset()
    tp.init(tp.Config(large_block_bytes=BLOCK), large_array_dirs=d)
    yield d
    tp.reset()
    tp.init()


RNG = np.random.default_rng(29)
# 128-bit: 112 B a row, 36 rows a block, 8 blocks: sizes that are multiples of
# a block trace each step once (a shorter last block is a second trace)
X = grid(RNG.normal(0, 4, (288, 7)))


def files(folder):
    return sorted(os.listdir(folder))


def test_round_trip_views_products_sums(dirs):
    """share_to_disk then every streaming operation against numpy: views and
    rows exact, sums exact (local), products and means within the private
    ops' tolerances, element-wise ops written to new arrays."""
    x = tp.share_to_disk(X, progress=False)
    assert x.shape == (288, 7) and x.dtype == tf.float64
    assert stream.block_rows(tp.get_runtime(), 7) == 36
    np.testing.assert_array_equal(tp.reveal(x[36:108, 2:5].to_private()), X[36:108, 2:5])
    np.testing.assert_array_equal(tp.reveal(x[-1]), X[-1])
    np.testing.assert_array_equal(tp.reveal(x[250:][10:20, :2].to_private()), X[260:270, :2])
    w = grid(RNG.normal(0, 1, (7, 3)))
    f = 20
    for out in ("memory", "disk"):
        y = x.matmul(tp.share(w), out=out)
        got = tp.reveal(y if out == "memory" else y.to_private(1 << 30)).numpy()
        assert np.all(np.abs(got - X @ w) <= matmul_tol(X, w, f)), out
    y = x @ w  # public operand: local products, one truncation
    # 13.8 KB a share, within 4 blocks (16 KB): in memory
    assert isinstance(y, tp.PrivateTensor) and y.shape == (288, 3)
    assert np.max(np.abs(tp.reveal(y).numpy() - X @ w)) <= 2 * ulp(f) * 7
    np.testing.assert_array_equal(tp.reveal(x.sum(axis=0)), X.sum(0))
    np.testing.assert_array_equal(tp.reveal(x.sum()), X.sum())
    s1 = x.sum(axis=1)
    np.testing.assert_array_equal(tp.reveal(s1.to_private(1 << 30)[:, 0]
                                            if isinstance(s1, tp.LargeArray) else s1), X.sum(1))
    np.testing.assert_allclose(tp.reveal(x[:108].mean(axis=0)), X[:108].mean(0),
                               atol=2 * ulp(f))
    row = grid(RNG.normal(0, 1, 7))
    for got, want, tol in [(x + row, X + row, 0), (x - x[:, :], 0 * X, 0),
                           (2.0 - x, 2.0 - X, 0), (-x, -X, 0),
                           (x * tp.share(row), X * row, mul_tol(X, row[None], f))]:
        assert isinstance(got, tp.LargeArray) and got.shape == X.shape
        err = np.abs(tp.reveal(got.to_private(1 << 30)).numpy() - want)
        assert np.all(err <= tol), err.max()
    relu = x[:36].map(tp.nn.relu)
    np.testing.assert_array_equal(tp.reveal(relu.to_private()), np.maximum(X[:36], 0))
    with pytest.raises(ValueError, match="a scalar, a row"):
        x + np.ones((2, 7))
    with pytest.raises(tp.LargeArrayError, match="slice it smaller"):
        x.to_private()


def test_sources_and_refusals(dirs, tmp_path):
    """A .npy file (memory-mapped) and a generator of uneven blocks give the
    same array; bad shapes, mixed columns and out-of-range values are refused,
    leaving no file behind."""
    path = str(tmp_path / "x.npy")
    np.save(path, X)
    a = tp.share_to_disk(path, progress=False)

    def gen():
        for lo, hi in ((0, 5), (5, 200), (200, 288)):
            yield X[lo:hi]
    b = tp.share_to_disk(gen, rows=288, progress=False)
    np.testing.assert_array_equal(tp.reveal(a[:100].to_private()), X[:100])
    np.testing.assert_array_equal(tp.reveal(b.sum(axis=0)), X.sum(0))
    assert tp.LargeArray.open(b.id).shape == (288, 7)
    assert {m["array_id"] for m in tp.LargeArray.list()} >= {a.id, b.id}
    before = (files(dirs["S1"]), files(dirs["S2"]))
    with pytest.raises(ValueError, match="2-D"):
        tp.share_to_disk(np.ones(5))
    with pytest.raises(ValueError, match="columns after blocks"):
        tp.share_to_disk(iter([np.ones((3, 2)), np.ones((3, 4))]))
    bad = np.ones((100, 2))
    bad[70, 1] = 2.0 ** 30
    with pytest.raises(ValueError, match="bound"):
        tp.share_to_disk(bad, name="bad")
    assert (files(dirs["S1"]), files(dirs["S2"])) == before
    a.delete()
    with pytest.raises(tp.LargeArrayError, match="no LargeArray"):
        tp.LargeArray.open(a.id)


def test_each_folder_holds_its_own_share_with_fresh_masks(dirs):
    """S1's folder holds S1's shares only, S2's S2's; neither file is the
    plaintext's encoding; sharing the same data twice gives new shares in
    every block (fresh masks), and the shares travelled through the channel
    (counted bytes)."""
    ones = np.ones((100, 7))
    with tp.stats() as st:
        a, b = tp.share_to_disk(ones), tp.share_to_disk(ones)
    share_bytes = 2 * 100 * 7 * 16  # two arrays' shares for each server
    for p in ("S1", "S2"):
        # the shares and, for each of the 2 x 3 blocks, its first row and
        # where to write (8 + 32 bytes), nothing else
        assert st.links[("client", p)] == (2 * 3 * 2, share_bytes + 2 * 3 * 40)
    assert not st.between_servers()
    shares = {}
    for p in ("S1", "S2"):
        for arr in (a, b):
            assert os.path.exists(os.path.join(dirs[p], arr.id + ".share"))
            h = blockfile.open_header(dirs[p], p, arr.id)
            assert h.party == p and h.shape == [100, 7] and h.ring_bits == 128
            shares[(p, arr.id)] = blockfile.read_rows(dirs[p], p, arr.id, 0, 100, 0, 7)
    enc = np.zeros((100, 7, 2), np.int64)
    enc[..., 0] = 1 << 20  # 1.0 in the 128-bit ring, f = 20
    s1a, s2a, s1b = shares[("S1", a.id)], shares[("S2", a.id)], shares[("S1", b.id)]
    for s in shares.values():
        assert not np.any(np.all(s == enc, axis=-1))
    # every block of a's share differs from b's in every element: new masks
    assert not np.any(np.all(s1a == s1b, axis=-1))
    assert not np.any(np.all(s1a == s2a, axis=-1))
    with pytest.raises(blockfile.LargeArrayError, match="holds S1's share"):
        blockfile.read_header(os.path.join(dirs["S1"], a.id + ".share"), "S2", a.id)


def _corrupt(dirs, arr, how, other=None):
    p2 = os.path.join(dirs["S2"], arr.id + ".share")
    if how == "truncate":
        with open(p2, "r+b") as f:
            f.truncate(os.path.getsize(p2) - 8)
    elif how == "other":
        os.replace(os.path.join(dirs["S2"], other.id + ".share"), p2)
    elif how == "copied":
        with open(os.path.join(dirs["S1"], arr.id + ".share"), "rb") as f, open(p2, "wb") as g:
            g.write(f.read())


@pytest.mark.parametrize("how,message", [
    ("truncate", "truncated"), ("other", "holds LargeArray"),
    ("copied", "never copy a share file")])
def test_mismatched_files_are_refused(dirs, how, message):
    """S2's file truncated, replaced by another array's, or a copy of S1's:
    refused with a clear error before anything is computed."""
    a, b = tp.share_to_disk(X[:10]), tp.share_to_disk(X[:10] + 1)
    _corrupt(dirs, a, how, b)
    with pytest.raises(tp.LargeArrayError, match=message):
        tp.LargeArray.open(a.id)
    with pytest.raises(tp.LargeArrayError, match=message):
        a.sum(axis=0)


def test_other_ring_and_folder_rules(dirs, tmp_path):
    """An array written in the 128-bit ring is refused by a 64-bit runtime;
    the two folders must not overlap; a runtime without folders says how to
    give them."""
    a = tp.share_to_disk(X[:4])
    tp.reset()
    try:
        tp.init(tp.Config(ring_bits=64), large_array_dirs=dirs)
        with pytest.raises(tp.LargeArrayError, match="128-bit ring.*ring_bits=128"):
            tp.LargeArray.open(a.id)
        with pytest.raises(ValueError, match="overlap"):
            tp.init(large_array_dirs={"S1": str(tmp_path), "S2": str(tmp_path / "in")})
        tp.init()
        with pytest.raises(tp.LargeArrayError, match="no large-array folder on S1.*"
                                                     "large_array_dirs"):
            tp.LargeArray.open(a.id)
    finally:
        tp.reset()
        tp.init(tp.Config(large_block_bytes=BLOCK), large_array_dirs=dirs)


def _reads_by_partition(fn):
    """Runs fn with run metadata on: {token of each large-array read op:
    the party whose partition ran it}, and the int64 tensors the client's
    partitions received."""
    _, md = graphcheck.run_metadata(fn)
    by_device = {canon(v): k for k, v in tp.servers().items()}
    reads, received = [], []
    for fg in md.function_graphs:
        for pg in fg.partition_graphs:
            for n in pg.node:
                where = by_device.get(canon(n.device), n.device)
                if n.op == "EagerPyFunc" and n.attr["token"].s.decode().startswith(
                        "tf_privpy_large_read_"):
                    reads.append((n.attr["token"].s.decode()[-2:].upper(), where))
                if n.op == "_Recv" and where == "client" and \
                        n.attr["tensor_type"].type == tf.int64.as_datatype_enum:
                    received.append(n.name)
    return reads, received


def test_block_reads_run_on_their_own_servers(dirs):
    """A product and a sum: every block read ran in its own server's
    partition, and the client's partitions received no int64 tensor (no
    share, no protocol message)."""
    x = tp.share_to_disk(X[:100])
    w = tp.share(np.ones((7, 1)))
    reads, received = _reads_by_partition(lambda: (x.matmul(w, out="memory"), x.sum(0)))
    assert reads and all(party == where for party, where in reads), reads
    assert {p for p, _ in reads} == {"S1", "S2"}
    assert received == []


def test_placement_check_catches_a_read_on_the_client(dirs, monkeypatch):
    """The broken variant: block reads placed on the client. The library's
    trace-time guard refuses it (the read takes its row numbers from the
    channel on S1 and S2); with the guard switched off, the partition check
    of test_block_reads_run_on_their_own_servers reports the reads on the
    client."""
    from tf_privpy.protocols.mpc.runtime import placement
    x = tp.share_to_disk(X[:40])
    real = party.op
    steps = tp.get_runtime().runtime.__dict__.setdefault("_large_array_steps", {})

    def misplaced(h, p, action, inputs, dtype):
        if action != "read":
            return real(h, p, action, inputs, dtype)
        with tf.device(h.runtime.device("client")):
            inputs = [v if isinstance(v, tf.Tensor) else tf.constant(v) for v in inputs]
            return tf.raw_ops.EagerPyFunc(input=inputs, token=party.token(action, p),
                                          Tout=[dtype])[0]
    monkeypatch.setattr(party, "op", misplaced)
    try:
        steps.clear()  # trace the broken variant, and drop it afterwards
        with pytest.raises(tp.PlacementError, match="would run on the client"):
            x.sum(0)
        steps.clear()
        monkeypatch.setattr(placement, "_check", lambda op, st: None)
        reads, _ = _reads_by_partition(lambda: x.sum(0))
    finally:
        steps.clear()
    assert ("S1", "client") in reads and ("S2", "client") in reads


@pytest.mark.slow  # a TensorFlow process of its own and 192 MiB of shares: 10-20 s
def test_shares_larger_than_memory(tmp_path):
    """A child process whose address space cannot hold the array's shares
    computes a product and a sum on it exactly (tests/large_memory_child.py
    says how the limit is set: RLIMIT_AS relative to TF's measured baseline,
    checked to refuse an allocation of the shares' size)."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), TF_CPP_MIN_LOG_LEVEL="3",
               MALLOC_ARENA_MAX="2")
    r = subprocess.run([sys.executable, os.path.join(HERE, "large_memory_child.py"),
                        str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["share_bytes_total"] > 1.4 * res["headroom_bytes"]
    assert res["big_alloc_refused"]
    assert res["product_exact"] and res["sum_exact"], res
    print(json.dumps(res))


@pytest.mark.slow  # a TensorFlow process of its own and 192 MiB of shares: about 10 s
def test_matrix_factorization_larger_than_memory(tmp_path):
    """Issue 29's Movielens-sized MF, scaled to a test: 2 full gradient steps
    (batch_rows = n) of tp.models.matrix_factorization on a 12,288 x 512
    LargeArray whose shares (192 MiB) exceed the child's whole allowance
    above TF's baseline (128 MiB of address space, checked to refuse the
    shares' size), P and Q within RRMSE 1e-3 of float64 NumPy's. A version
    that brings the batch (here all rows) into memory cannot run there."""
    import large_memory_child as child
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), TF_CPP_MIN_LOG_LEVEL="3",
               MALLOC_ARENA_MAX="2")
    r = subprocess.run([sys.executable, os.path.join(HERE, "large_memory_child.py"),
                        str(tmp_path), "mf"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["share_bytes_total"] > 1.4 * res["headroom_bytes"]
    assert res["big_alloc_refused"]
    got = np.load(tmp_path / "mf.npz")
    x = np.concatenate(list(child.ratings(child.MF_N, 7)))
    pp, qp = tp.models.matrix_factorization_plain(x, child.MF_K, **child.MF_KW)
    for name, want in (("p", pp), ("q", qp)):
        rrmse = np.sqrt(np.mean((got[name] - want) ** 2) / np.mean(want ** 2))
        assert rrmse <= 1e-3, (name, rrmse)
        res[f"{name}_rrmse"] = float(rrmse)
    print(json.dumps(res))


@pytest.mark.slow
def test_four_processes(shared_cluster, shared_driver_process, stale_roles):
    """share_to_disk and a product on four server processes: each of S1 and
    S2 holds its own share file in its own folder (T1, T2 and the driver
    none), the driver registers no large-array function, so a read placed
    there fails, and the results match numpy."""
    from driver_client import connect
    c, driver = shared_cluster, shared_driver_process
    reply = connect(driver, c, stale_roles, c.timeout_s)
    assert "error" not in reply, reply
    w = grid(RNG.normal(0, 1, (7, 2)))
    r = driver.call("large_array", x=X[:120].tolist(), w=w.tolist(), block_bytes=BLOCK,
                    wait=600)
    assert "error" not in r, (r, driver.stderr_tail())
    assert r["functions"] == []
    assert "no large-array folder on S1" in r["misplaced"]
    got = np.array(r["product"])
    assert np.all(np.abs(got - X[:120] @ w) <= matmul_tol(X[:120], w, 20))
    np.testing.assert_array_equal(r["sum"], X[:120].sum(0))
    np.testing.assert_array_equal(r["slice"], X[1:3, 1:])
    for role in ("s1", "s2"):
        assert files(c.large_array_dir(role)) == [r["id"] + ".share"] or \
            r["id"] + ".share" in files(c.large_array_dir(role))
    for role in ("t1", "t2"):
        assert not os.path.exists(c.large_array_dir(role))
    print(f"four processes: share_to_disk {r['share_s']:.2f} s, matmul {r['matmul_s']:.2f} s")
