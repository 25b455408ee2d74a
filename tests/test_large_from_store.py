"""tp.LargeArray.from_store (issue 29): a share-service upload copied on S1
and S2, each from its own store into its own large-array folder, then
computed on as a LargeArray.

Embedded, with S1's and S2's share services as real processes (real TLS,
as in test_share_io.py) and their stores and large-array folders attached to
the servers' devices: an owner uploads with tp.client; the driver makes the
LargeArray and computes a product and a sum against numpy within
tests/tolerances.py; refusals copy nothing; a failure while copying removes
both servers' files; each server's copy op runs in its own partition, and a
copy placed on the client is reported.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

import graphcheck
import tf_privpy as tp
from tf_privpy.deploy.service import local
from tf_privpy.deploy.service.client import ShareClient, ShareServiceError
from tf_privpy.deploy.service.store import Store
from tf_privpy.large import blockfile, party, store_copy
from tf_privpy.protocols.config import Config
from tf_privpy.protocols.mpc.runtime.placement import canon
from tolerances import matmul_tol

BLOCK = 4096  # 36 rows of 7 columns a block: several blocks and a short last one
RNG = np.random.default_rng(129)


def grid(x):
    cfg = Config()
    return tp.client.decode(tp.client.encode(x, cfg.ring_bits, cfg.frac_bits, cfg.bound),
                            cfg.ring_bits, cfg.frac_bits)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    certs = str(tmp_path_factory.mktemp("certs"))
    pair = local.LocalShareServices(certs, str(tmp_path_factory.mktemp("stores"))).start()
    root = tmp_path_factory.mktemp("large")
    dirs = {"S1": str(root / "s1"), "S2": str(root / "s2")}
    stores = {"S1": pair[0].store_dir, "S2": pair[1].store_dir}
    tp.reset()
    tp.init(tp.Config(large_block_bytes=BLOCK), share_stores=stores, large_array_dirs=dirs)
    yield pair, dirs
    pair.stop()
    tp.reset()
    tp.init()


def client(pair, owner):
    return ShareClient(pair.cluster(owner), timeout=60)


def folders(dirs):
    return {p: sorted(os.listdir(d)) for p, d in dirs.items()}


def test_product_and_sum_of_an_upload(env):
    """An owner's upload becomes a LargeArray of its shape; each folder holds
    its own server's share, the very share of its store (copied, never
    re-split or moved); the sum is exact and the product within matmul_tol."""
    pair, dirs = env
    x = RNG.normal(0, 3, (216, 7))  # 6 whole blocks: one trace per step
    w = RNG.normal(0, 1, (7, 2))
    with client(pair, "alice") as c:
        c.upload("fs-x", x, progress=False)
    with tp.stats() as st:
        big = tp.LargeArray.from_store("fs-x", owner="alice", progress=False)
    assert not st.between_servers()  # each server copied alone
    assert isinstance(big, tp.LargeArray) and big.shape == (216, 7)
    assert big.dtype == tf.float64
    for k, p in enumerate(("S1", "S2")):
        assert folders(dirs)[p].count(big.id + ".share") == 1
        h = blockfile.open_header(dirs[p], p, big.id)
        assert (h.party, h.shape, h.ring_bits, h.block_rows) == (p, [216, 7], 128, 36)
        _, record = Store(pair[k].store_dir).read("fs-x")
        mine = blockfile.read_rows(dirs[p], p, big.id, 0, 216, 0, 7)
        assert mine.tobytes() == record
    xg = grid(x)
    np.testing.assert_array_equal(tp.reveal(big.sum(axis=0)), xg.sum(0))
    np.testing.assert_array_equal(tp.reveal(big[37:41, 2:].to_private()), xg[37:41, 2:])
    got = tp.reveal(big.matmul(tp.share(w), out="memory")).numpy()
    assert np.all(np.abs(got - xg @ grid(w)) <= matmul_tol(xg, grid(w), 20))
    assert tp.LargeArray.open(big.id).shape == (216, 7)
    big.delete()


def _upload_other_s2_share(pair, name):
    """S2's record of `name` replaced by a share of another sharing (its own
    upload id), S1's left: two records that are not one sharing."""
    cfg = Config()
    with client(pair, "alice") as c:
        enc = tp.client.encode(np.ones((4, 3)), cfg.ring_bits, cfg.frac_bits, cfg.bound)
        c.upload_share(1, name, enc, [4, 3], os.urandom(16), overwrite=True)


@pytest.mark.parametrize("case", ["unknown", "owner", "mismatched", "3-D", "1-D"])
def test_refusals_copy_nothing(env, case):
    """Each refusal is a clear error, raised before anything is copied."""
    pair, dirs = env
    name = f"fs-bad-{case}"
    with client(pair, "alice") as c:
        shape = {"3-D": (4, 3, 2), "1-D": (5,)}.get(case, (4, 3))
        if case != "unknown":
            c.upload(name, np.ones(shape), progress=False)
    if case == "mismatched":
        _upload_other_s2_share(pair, name)
    before = folders(dirs)
    err, match, code = {
        "unknown": (ShareServiceError, "no record 'fs-bad-unknown'.*upload it first",
                    "NOT_FOUND"),
        "owner": (ShareServiceError, "S1's record belongs to 'alice'.*expects 'bob'",
                  "PERMISSION_DENIED"),
        "mismatched": (ShareServiceError, "differ in upload_id.*not one sharing",
                       "FAILED_PRECONDITION"),
        "3-D": (tp.LargeArrayError, r"2-D matrix, the record has shape \[4, 3, 2\]: upload "
                r"it as \[4, -1\]", None),
        "1-D": (tp.LargeArrayError, r"shape \[5\]: upload it as a column", None),
    }[case]
    with pytest.raises(err, match=match) as e:
        tp.LargeArray.from_store(name, owner="bob" if case == "owner" else "alice")
    if code:
        assert e.value.code.name == code
    assert folders(dirs) == before


def test_a_failed_copy_removes_both_files(env):
    """S2's record damaged on disk (its checksum fails only once it is read
    through, after S2 wrote blocks): the copy is refused saying so, and
    neither server keeps a file, though S1's copy had succeeded."""
    pair, dirs = env
    with client(pair, "alice") as c:
        c.upload("fs-damaged", np.ones((100, 7)), progress=False)
    path = os.path.join(pair[1].store_dir, "records", "fs-damaged.rec")
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    before = folders(dirs)
    with pytest.raises(tp.LargeArrayError, match="on S2.*damaged on disk"):
        tp.LargeArray.from_store("fs-damaged", owner="alice")
    assert folders(dirs) == before


def test_copy_record_checks_the_record_and_takes_any_chunking(env, tmp_path, monkeypatch):
    """The servers' side alone: a record replaced since the driver read its
    upload id is refused, leaving no file; chunks that split rows (a store
    reading short) still give the same rows."""
    pair, _ = env
    with client(pair, "alice") as c:
        c.upload("fs-unit", np.arange(30.0).reshape(10, 3), progress=False)
    store = Store(pair[0].store_dir)
    meta = store.info("fs-unit")
    folder = blockfile.private_dir(str(tmp_path / "s1"))
    head = blockfile.Header(array_id=os.urandom(16).hex(), party="S1", shape=[10, 3],
                            ring_bits=128, frac_bits=20, dtype="float64", block_rows=4)
    with pytest.raises(tp.LargeArrayError, match="replaced after its metadata was read"):
        store_copy.copy_record(store, folder, "S1", "fs-unit", "0" * 32, head)
    assert os.listdir(folder) == []
    real = store.chunks

    def ragged(name, owner, chunk_bytes):
        m, it = real(name, owner, 7)  # 7 bytes: never a whole row
        return m, it
    monkeypatch.setattr(store, "chunks", ragged)
    out = store_copy.copy_record(store, folder, "S1", "fs-unit", meta["upload_id"], head)
    assert out.complete and out.shape == [10, 3]
    got = blockfile.read_rows(folder, "S1", head.array_id, 0, 10, 0, 3)
    assert got.tobytes() == Store(pair[0].store_dir).read("fs-unit")[1]


def _copies_by_partition(fn):
    """Runs fn with run metadata on: [(party of each copy op, the party whose
    partition ran it)]."""
    _, md = graphcheck.run_metadata(fn)
    by_device = {canon(v): k for k, v in tp.servers().items()}
    out = []
    for fg in md.function_graphs:
        for pg in fg.partition_graphs:
            for n in pg.node:
                tok = n.attr["token"].s.decode() if n.op == "EagerPyFunc" else ""
                if tok.startswith(party.token(store_copy.ACTION, "")[:-1]):
                    out.append((tok[-2:].upper(), by_device.get(canon(n.device), n.device)))
    return out


def test_each_copy_runs_on_its_own_server(env, monkeypatch):
    """Each server's copy op ran in its own server's partition; the broken
    variant that places the copies on the client (where a distributed driver
    has no store: here the embedded process serves every party) is
    reported by the same check."""
    pair, _ = env
    with client(pair, "alice") as c:
        c.upload("fs-place", np.ones((40, 7)), progress=False)
    steps = tp.get_runtime().runtime.__dict__.setdefault("_large_array_steps", {})
    steps.pop(("from_store",), None)  # run metadata has the graphs of a first call
    copies = _copies_by_partition(lambda: tp.LargeArray.from_store("fs-place", owner="alice"))
    assert sorted(copies) == [("S1", "S1"), ("S2", "S2")]
    real = party.op

    def misplaced(h, p, action, inputs, dtype):
        if action != store_copy.ACTION:
            return real(h, p, action, inputs, dtype)
        with tf.device(h.runtime.device("client")):
            return tf.raw_ops.EagerPyFunc(input=inputs, token=party.token(action, p),
                                          Tout=[dtype])[0]
    monkeypatch.setattr(party, "op", misplaced)
    try:
        steps.pop(("from_store",), None)  # trace the broken variant, then drop it
        copies = _copies_by_partition(
            lambda: tp.LargeArray.from_store("fs-place", owner="alice"))
    finally:
        steps.pop(("from_store",), None)
    assert sorted(copies) == [("S1", "client"), ("S2", "client")]


def test_needs_a_store_and_a_folder_in_one_process(env):
    """Without large-array folders the error says how to give them; inside
    tf.function it is refused (it writes files)."""
    pair, dirs = env
    stores = {"S1": pair[0].store_dir, "S2": pair[1].store_dir}
    with client(pair, "alice") as c:
        c.upload("fs-nofolder", np.ones((3, 2)), progress=False)
    with pytest.raises(RuntimeError, match="eagerly"):
        tf.function(lambda: tp.LargeArray.from_store("fs-nofolder").sum(0))()
    tp.reset()
    try:
        tp.init(share_stores=stores)
        with pytest.raises(tp.LargeArrayError, match="no large-array folder on S1"):
            tp.LargeArray.from_store("fs-nofolder", owner="alice")
    finally:
        tp.reset()
        tp.init(tp.Config(large_block_bytes=BLOCK), share_stores=stores, large_array_dirs=dirs)


@pytest.mark.slow
def test_four_processes(shared_cluster, shared_driver_process, stale_roles):
    """The session's four servers (conftest.shared_cluster: S1 and S2 with
    share services and large-array folders): an owner uploads over TLS, a
    driver process makes the LargeArray and computes on it; each of S1 and S2
    holds its own file, the driver registers no copy function, so a copy
    placed there fails, and the results match numpy."""
    from driver_client import connect
    c, driver = shared_cluster, shared_driver_process
    reply = connect(driver, c, stale_roles, c.timeout_s)
    assert "error" not in reply, reply
    x, w = RNG.normal(0, 3, (120, 7)), RNG.normal(0, 1, (7, 2))
    tp.client.upload("d-large", x, cluster=c.owner_cluster("hospital"), progress=False)
    r = driver.call("large_from_store", name="d-large", owner="hospital", w=w.tolist(),
                    block_bytes=BLOCK, wait=600)
    assert "error" not in r, (r, driver.stderr_tail())
    assert r["functions"] == []
    assert "no large-array folder on S1" in r["misplaced"]
    xg, wg = grid(x), grid(w)
    assert np.all(np.abs(np.array(r["product"]) - xg @ wg) <= matmul_tol(xg, wg, 20))
    np.testing.assert_array_equal(r["sum"], xg.sum(0))
    for role, p in (("s1", "S1"), ("s2", "S2")):
        h = blockfile.open_header(c.large_array_dir(role), p, r["id"])
        assert h.party == p and h.shape == [120, 7]
    print(f"four processes: from_store of 120 x 7 {r['from_store_s']:.2f} s")
