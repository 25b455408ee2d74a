"""tp.load and tp.publish on the embedded runtime, with S1's and S2's share
services as real processes (real TLS) and their stores attached to the
servers' devices (tp.init(share_stores=...)).

Owners upload and fetch with tp.client from their own TLS clients; the
private program between reads the stored shares on S1 and S2 and writes its
result's shares there. test_load_placement_catches_a_misplaced_read shows the
placement check fails on a deliberately broken tp.load whose share read runs
on the client.
"""
import os

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy import share_io
from tf_privpy.protocols.config import Config
from tf_privpy.deploy.service import ca, local
from tf_privpy.deploy.service.client import ShareClient, ShareServiceError

import graphcheck

RING = 128


def grid(x):
    cfg = Config(ring_bits=RING)
    return tp.client.decode(tp.client.encode(x, cfg.ring_bits, cfg.frac_bits, cfg.bound),
                            cfg.ring_bits, cfg.frac_bits)


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    certs = str(tmp_path_factory.mktemp("certs"))
    pair = local.LocalShareServices(certs, str(tmp_path_factory.mktemp("stores"))).start()
    tp.reset()
    tp.init(share_stores={"S1": pair[0].store_dir, "S2": pair[1].store_dir})
    yield pair
    pair.stop()
    tp.reset()
    tp.init()


def owner(services, name):
    return ShareClient(services.cluster(name), timeout=60)


def test_upload_load_predict_publish_fetch(services):
    """A hospital uploads features, a modeller the weights; the driver loads
    both (shares read on S1 and S2), predicts sigmoid(x @ w + b) privately
    and publishes the result for the hospital, which fetches it: the
    plaintext prediction on the fixed-point grid within the sigmoid's
    tolerance. Also inside tf.function."""
    rng = np.random.default_rng(4)
    x, w, b = rng.normal(size=(16, 5)), rng.normal(size=(5, 1)), np.array([0.25])
    with owner(services, "hospital") as c:
        c.upload("e2e-x", x, progress=False)
    with owner(services, "modeller") as c:
        c.upload("e2e-w", w, progress=False)
        c.upload("e2e-b", b, progress=False)

    def predict():
        return tf.sigmoid(tf.matmul(tp.load("e2e-x", tf.float64, shape=[16, 5]),
                                    tp.load("e2e-w", tf.float64)) + tp.load("e2e-b"))

    y = predict()
    assert isinstance(y, tp.PrivateTensor) and y.shape == (16, 1)
    meta = tp.publish(y, "e2e-prediction", owner="hospital")
    assert meta["shape"] == [16, 1] and not meta["existed"]
    tp.publish(tf.function(predict)(), "e2e-prediction-fn", owner="hospital")
    want = 1 / (1 + np.exp(-(grid(x) @ grid(w) + grid(b))))
    with owner(services, "hospital") as c:
        np.testing.assert_allclose(c.fetch("e2e-prediction"), want, atol=1e-3)
        np.testing.assert_allclose(c.fetch("e2e-prediction-fn"), want, atol=1e-3)
    with owner(services, "modeller") as c, pytest.raises(ShareServiceError) as e:
        c.fetch("e2e-prediction")
    assert e.value.code.name == "PERMISSION_DENIED"


def read_violations(concrete):
    """What is wrong with the placement of tp.load's share reads in a traced
    function: a read op not on its own server, and (graphcheck, taint from
    each read where it actually runs) any op touching a read share off the
    servers or any edge out of it that bypasses the channel."""
    servers = tp.servers()
    parties = graphcheck.Parties(servers)
    reads = [op for op in concrete.graph.get_operations() if op.type == "EagerPyFunc"
             and op.get_attr("token").decode().startswith("tf_privpy_share_read_")]
    assert len(reads) == 2
    bad, sources = [], {}
    for op in reads:
        party = op.get_attr("token").decode()[-2:].upper()
        where = parties.of(op.device)
        if where != party:
            bad.append(f"{party}'s share is read on {where}")
        sources[op.outputs[0].name] = where
    return bad + graphcheck.graph_violations(concrete, servers, sources)


def test_load_placement(services):
    """Each share read runs on its own server, and every op that touches what
    it read runs on a server or goes through the channel (graphcheck).
    test_load_placement_catches_a_misplaced_read runs the same check on a
    broken tp.load."""
    with owner(services, "alice") as c:
        c.upload("place-x", np.arange(6.0).reshape(2, 3), progress=False)
    concrete = tf.function(lambda: tp.reveal(tp.load("place-x") * 2.0)).get_concrete_function()
    assert read_violations(concrete) == []
    np.testing.assert_allclose(concrete().numpy(), 2 * np.arange(6.0).reshape(2, 3))


def test_load_placement_catches_a_misplaced_read(services, monkeypatch):
    """The broken variant: tp.load's read op placed on the client (where a
    distributed driver would receive the share). The check of
    test_load_placement reports it, and the share's path to S1 and S2
    outside the channel."""
    with owner(services, "alice") as c:
        c.upload("place-y", np.ones(3), progress=False)
    real = share_io._run

    def misplaced(h, party, action, inputs, dtype):
        if action != "read":
            return real(h, party, action, inputs, dtype)
        with tf.device(h.runtime.device("client")):
            return tf.raw_ops.EagerPyFunc(input=[tf.constant(v) for v in inputs],
                                          token=share_io.token(action, party), Tout=[dtype])[0]
    monkeypatch.setattr(share_io, "_run", misplaced)
    concrete = tf.function(lambda: tp.reveal(tp.load("place-y"))).get_concrete_function()
    bad = read_violations(concrete)
    assert "S1's share is read on client" in bad and "S2's share is read on client" in bad
    assert any("crosses client -> S1" in b and "outside the channel" in b for b in bad), bad


def test_clear_errors(services):
    """Unknown name, wrong expected shape, the wrong ring, publishing over
    another owner's name or an existing one, a non-private value: each a clear
    error, and nothing is stored by a refused publish."""
    with pytest.raises(ShareServiceError, match="no record 'nope'.*upload it first") as e:
        tp.load("nope")
    assert e.value.code.name == "NOT_FOUND" and e.value.server == "S1"
    with owner(services, "alice") as c:
        c.upload("err-x", np.zeros((2, 2)), progress=False)
    with pytest.raises(ValueError, match=r"has shape \[2, 2\], the program expects \[4\]"):
        tp.load("err-x", shape=[4])
    with pytest.raises(ShareServiceError, match="belongs to another owner") as e:
        tp.publish(tp.share([1.0]), "err-x", owner="bob")
    assert e.value.code.name == "PERMISSION_DENIED"
    tp.publish(tp.share([1.0]), "err-r", owner="bob")
    with pytest.raises(ShareServiceError, match="pass overwrite=True") as e:
        tp.publish(tp.share([2.0]), "err-r", owner="bob")
    assert e.value.code.name == "ALREADY_EXISTS"
    tp.publish(tp.share([2.0]), "err-r", owner="bob", overwrite=True)
    with owner(services, "bob") as c:
        np.testing.assert_allclose(c.fetch("err-r"), [2.0])
    with pytest.raises(ShareServiceError, match="record name") as e:
        tp.publish(tp.share([1.0]), "../escape", owner="bob")
    assert e.value.code.name == "INVALID_ARGUMENT"
    assert not any(s.has("../escape") or s.pending() for s in services)
    with pytest.raises(TypeError, match="takes a PrivateTensor"):
        tp.publish(np.ones(2), "err-plain", owner="bob")


def test_load_pins_the_owner(services):
    """tp.load(name, owner=X) refuses a record X does not own on S1 or S2,
    naming both records' owners: another owner who took the name first
    cannot slip its data into X's program (before the fix tp.load had no
    owner= and loaded whoever's record held the name)."""
    with owner(services, "mallet") as c:
        c.upload("pin-x", np.full(3, 9.0), progress=False)  # the name taken first
    with owner(services, "alice") as c:
        c.upload("pin-y", np.arange(3.0), progress=False)
    with pytest.raises(ShareServiceError) as e:
        tp.load("pin-x", owner="alice")
    assert e.value.code.name == "PERMISSION_DENIED"
    assert "S1's record belongs to 'mallet' and S2's to 'mallet'" in str(e.value)
    assert "expects 'alice'" in str(e.value)
    np.testing.assert_array_equal(tp.reveal(tp.load("pin-y", tf.float64, owner="alice")),
                                  np.arange(3.0))


def test_publish_never_replaces_an_upload(services):
    """tp.publish(owner=X, overwrite=True) over X's own upload is refused,
    saying what to do, and the upload is unchanged (before the fix it was
    replaced by the result). The store refuses it too when the driver's
    check is skipped (test_share_service_limits.py)."""
    with owner(services, "alice") as c:
        c.upload("kind-x", np.array([1.0, 2.0]), progress=False)
    with pytest.raises(ShareServiceError, match="is an upload of 'alice'.*another name") as e:
        tp.publish(tp.share([5.0, 6.0]), "kind-x", owner="alice", overwrite=True)
    assert e.value.code.name == "ALREADY_EXISTS"
    with owner(services, "alice") as c:
        np.testing.assert_array_equal(c.fetch("kind-x"), [1.0, 2.0])


def test_driver_gets_no_share_hash(services, monkeypatch):
    """Nothing tp.load and tp.publish hand the driver carries a share's
    SHA-256 (a one-element 64-bit share falls to 2^64 hashes of guesses).
    Before the fix every metadata dict the ops returned had it."""
    got = []
    real = share_io._call

    def spy(h, party, action, inputs, dtype):
        out = real(h, party, action, inputs, dtype)
        got.append((action, out))
        return out
    monkeypatch.setattr(share_io, "_call", spy)
    with owner(services, "alice") as c:
        c.upload("hash-x", np.array([0.5]), progress=False)
        digests = {c.stat(p, "hash-x")["sha256"] for p in (0, 1)}
    x = tp.load("hash-x", tf.float64)
    meta = tp.publish(x * 2.0, "hash-y", owner="alice")
    with pytest.raises(ShareServiceError):
        tp.publish(x, "hash-y", owner="alice")
    with owner(services, "alice") as c:
        digests |= {c.stat(p, "hash-y")["sha256"] for p in (0, 1)}
    metas = [out for action, out in got if action != "read"] + [meta]
    assert {a for a, _ in got} >= {"info", "probe", "write", "read"}
    for m in metas:
        assert m is None or "sha256" not in m, m
        assert not any(d[:16] in repr(m) for d in digests), m


def test_names_and_owners_are_matched_whole(services):
    """A trailing newline (which `$` in re.match accepted) makes no name and
    no owner."""
    for name, who in (("nl-x\n", "bob"), ("nl-x", "bob\n")):
        with pytest.raises(ShareServiceError) as e:
            tp.publish(tp.share([1.0]), name, owner=who)
        assert e.value.code.name == "INVALID_ARGUMENT"
    with pytest.raises(ShareServiceError) as e:
        tp.load("nl-x\n")
    assert e.value.code.name == "INVALID_ARGUMENT"
    assert not any(s.pending() for s in services)
    assert not any(n.startswith("nl-x") for s in services
                   for n in os.listdir(os.path.join(s.store_dir, "records")))


def test_wrong_ring_and_revoked_owner(services):
    """A record of the 128-bit ring loaded by a 64-bit runtime is refused
    with the Config to use; a revoked owner can neither upload nor fetch what
    was published for it (refused at the TLS layer)."""
    with owner(services, "carol") as c:
        c.upload("ring-x", np.ones(2), progress=False)
    stores = {"S1": services[0].store_dir, "S2": services[1].store_dir}
    tp.reset()
    tp.init(tp.Config(ring_bits=64), share_stores=stores)
    try:
        with pytest.raises(ShareServiceError, match="128-bit ring.*ring_bits=128") as e:
            tp.load("ring-x")
        assert e.value.code.name == "FAILED_PRECONDITION"
    finally:
        tp.reset()
        tp.init(share_stores=stores)
    tp.publish(tp.share([3.0]), "for-carol", owner="carol")
    services.revoke("carol")
    with owner(services, "carol") as c, pytest.raises(ShareServiceError) as e:
        c.fetch("for-carol")
    assert e.value.code.name in ("UNAVAILABLE", "UNAUTHENTICATED")


def test_without_stores_the_error_says_how_to_attach(services):
    tp.reset()
    tp.init()
    try:
        with pytest.raises(ShareServiceError, match="no share store on S1.*share_stores"):
            tp.load("anything")
    finally:
        tp.reset()
        tp.init(share_stores={"S1": services[0].store_dir, "S2": services[1].store_dir})


@pytest.mark.slow
def test_distributed_upload_load_publish_fetch(shared_cluster, shared_driver_process,
                                               stale_roles):
    """The distributed path, each piece its own process: the session's four
    servers (conftest.shared_cluster, which test_distributed.py and
    test_distributed_models.py use too in the same worker) with S1's and
    S2's share services beside their TF servers (--share_port), owners
    uploading and fetching over TLS, and a driver process
    (tests/distributed_driver.py, cmd_share_io) that loads, predicts and
    publishes; the driver process has no store function at all. It used to
    start a cluster and a driver of its own: five TensorFlow processes."""
    from driver_client import connect
    c, driver = shared_cluster, shared_driver_process
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(8, 3)), rng.normal(size=(3, 1))
    assert set(c.cluster.share_services) == {"s1", "s2"}
    # servers an earlier test left running another way restart first
    reply = connect(driver, c, stale_roles, c.timeout_s)
    assert "error" not in reply, reply
    tp.client.upload("d-x", x, cluster=c.owner_cluster("hospital"), progress=False)
    tp.client.upload("d-w", w, cluster=c.owner_cluster("modeller"), progress=False)
    tp.client.upload("d-big", rng.normal(size=(2000, 3)),
                     cluster=c.owner_cluster("hospital"), progress=False)
    r = driver.call("share_io", wait=600)
    assert set(r) == {"stores", "published", "missing", "again"}, (r, driver.stderr_tail())
    assert r["stores"] == []  # the driver serves no store: a share read there fails
    assert r["published"]["shape"] == [8, 1]
    assert r["missing"]["code"] == "NOT_FOUND" and r["missing"]["server"] == "S1"
    np.testing.assert_allclose(r["again"], grid(x), atol=0)
    got = tp.client.fetch("d-y", cluster=c.owner_cluster("hospital"))
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-(grid(x) @ grid(w)))), atol=1e-3)
    for role in ("s1", "s2"):  # each server stored only its own share
        assert os.path.exists(os.path.join(c.share_store(role), "records", "d-y.rec"))


def test_server_share_flags_are_checked():
    """--share_port only on S1 and S2, and only with a CA folder and a store:
    a clear error before anything starts."""
    from tf_privpy.deploy import cluster_file as cf
    from tf_privpy.deploy.server import _start_share_service, _underscored
    with pytest.raises(cf.ClusterError, match="only S1 and S2 hold shares"):
        _start_share_service("t1", "127.0.0.1", 0, "certs", "store", 128)
    with pytest.raises(cf.ClusterError, match="needs --cert_dir"):
        _start_share_service("s1", "127.0.0.1", 0, None, "store", 128)
    assert _underscored(["p", "--share-port=7", "--cert-dir", "/a-b", "--role", "s1"]) == [
        "p", "--share_port=7", "--cert_dir", "/a-b", "--role", "s1"]
    assert _underscored(["--share-max-calls-per-owner=4", "--share-owner-quota-bytes", "5",
                         "--exit-with-parent"]) == [
        "--share_max_calls_per_owner=4", "--share_owner_quota_bytes", "5", "--exit-with-parent"]


@pytest.mark.slow
def test_server_share_limit_flags(tmp_path):
    """`python -m tf_privpy.server` takes the share service's limits as
    --share_* flags (either spelling), and refuses a per-owner limit that
    would let one owner take every call, before anything starts. About 10 s
    (one TF import); the limits themselves: test_share_service_limits.py."""
    import subprocess
    import sys
    from tf_privpy.deploy import cluster_file as cf
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tasks = {r: f"127.0.0.1:{7301 + i}" for i, r in enumerate(cf.ROLES)}
    path = cf.Cluster(tasks=tasks).save(str(tmp_path / "cluster.json"))
    r = subprocess.run(
        [sys.executable, "-m", "tf_privpy.server", "--role", "s1", "--cluster", path,
         "--share-max-calls", "4", "--share_max_calls_per_owner=4", "--share-call-deadline=60",
         "--share_call_idle_timeout", "5", "--share-owner-quota-bytes", "1000",
         "--share_owner_quota_records=0"],
        capture_output=True, text=True, timeout=300, cwd=root,
        env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="3"))
    assert r.returncode == 2, r.stderr[-2000:]
    assert "--share_* limits: max_calls_per_owner (4) must be at least 1 and below " \
        "max_calls (4)" in r.stderr, r.stderr[-2000:]


def test_issue_cert_writes_the_owners_settings(tmp_path, capsys):
    """`cluster owner-key NAME` (on the owner's machine) makes the owner's key,
    certificate and NAME.json, which tp.client reads (with the services'
    addresses from the cluster file); `issue-cert NAME` does the same plus the
    enrolment only in `cluster local`'s one-machine tree and refuses any other
    folder; a bad share_services entry in a cluster file is refused."""
    from tf_privpy.deploy import cluster_file as cf
    from tf_privpy.deploy.cluster import run_issue_cert, run_owner_key, run_revoke
    tasks = {r: f"127.0.0.1:{7101 + i}" for i, r in enumerate(cf.ROLES)}
    path = cf.Cluster(tasks=tasks, share_services={"s1": "127.0.0.1:7201",
                                                   "s2": "127.0.0.1:7202"}).save(
        str(tmp_path / "cluster.json"))
    owner_dir = str(tmp_path / "hospital-a")
    ca_dir = str(tmp_path / "ca")
    ca.make_ca(ca_dir)
    assert run_owner_key("hospital-a", owner_dir, os.path.join(ca_dir, "ca.pem"), path) == 0
    settings = tp.client.ServiceCluster.load(os.path.join(owner_dir, "hospital-a.json"))
    assert (settings.s1, settings.s2) == ("127.0.0.1:7201", "127.0.0.1:7202")
    assert os.path.exists(settings.cert) and os.path.exists(settings.ca)
    assert settings.key == os.path.join(owner_dir, "hospital-a.key")
    certs = str(tmp_path / "certs")
    assert run_issue_cert("hospital-b", ca_dir, path) == 2  # not a one-machine tree
    assert "owner-key NAME on its machine" in capsys.readouterr().err
    ca.local_tree(certs)
    assert run_issue_cert("hospital-b", certs, path) == 0
    settings = tp.client.ServiceCluster.load(
        os.path.join(certs, "owners", "hospital-b", "hospital-b.json"))
    assert os.path.exists(settings.key) and os.path.exists(settings.ca)
    for role in ("s1", "s2"):
        assert os.path.exists(os.path.join(certs, role, "owners", "hospital-b.pem"))
        assert run_revoke("hospital-b", os.path.join(certs, role)) == 0
    with pytest.raises(cf.ClusterError, match="share_services"):
        cf.from_json({"version": cf.FORMAT_VERSION, "tasks": tasks,
                      "share_services": {"t1": "127.0.0.1:1"}})
