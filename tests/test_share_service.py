"""The data owners' share service (issue 12), with real processes and real TLS.

S1's and S2's services run as separate processes on loopback with the
certificates of a CA made by tf_privpy.deploy.service.ca; the owners are clients in
this process, each with its own TLS channels.

Each service runs with its own folder only (tests/test_share_custody.py checks
key custody); the one-machine tree here is ca.local_tree's.

The services are started by tf_privpy.deploy.service.local, whose launcher imports
tf_privpy.deploy.service without the TensorFlow import of tf_privpy/__init__ (the
service needs none, and each start would cost ~10 s), then runs the same
main() as `python -m tf_privpy.deploy.service.server` (test_python_m_entry_point).

test_broken_variant_admits_revoked_certificate checks the security tests
themselves. It runs the revocation test against a deliberately broken service,
one that never re-reads its enrolled owners (neither its client trust roots
nor the interceptor's keys). There the revoked owner gets through and the test fails, which
shows that the refusals it sees in the other tests come from the revocation
checks.
"""
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest

from tf_privpy.protocols.config import Config
from tf_privpy.deploy.service import ca, client, local
from tf_privpy.deploy.service import server as service_server
from tf_privpy.deploy.service._proto import pb, pb_grpc
from tf_privpy.deploy.service.client import ServiceCluster, ShareClient, ShareServiceError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_RECORD = 4 << 20

class BrokenService(local.LocalService):
    """A deliberately broken service: its revocation checks patched out (it
    keeps the enrolments it read first, for the handshake and the calls)."""
    launcher = local.LAUNCHER.replace(
        "from tf_privpy.deploy.service import server\n",
        "from tf_privpy.deploy.service import server\n"
        "_current = server.Enrolment.current\n"
        "def _first(self):\n"
        "    if not hasattr(self, '_first'):\n"
        "        self._first = _current(self)\n"
        "    return self._first\n"
        "server.Enrolment.current = _first\n")


class BrokenServices(local.LocalShareServices):
    service_class = BrokenService


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("certs"))
    ca.local_tree(d)  # ca/, s1/, s2/ and owners/NAME/, each key in its own folder
    for owner in ("alice", "bob", "mallory"):
        ca.local_owner(d, owner)
    revoke(d, "mallory")
    return d


def revoke(certs, owner):
    """Revokes `owner` on both servers (each operator removes its enrolment)."""
    for role in ca.SERVER_ROLES:
        ca.revoke(os.path.join(certs, role), owner)


def start_pair(certs, tmp, broken=False, max_record=MAX_RECORD):
    cls = BrokenServices if broken else local.LocalShareServices
    return cls(certs, tmp, max_record_bytes=max_record).start()


@pytest.fixture(scope="module")
def services(certs, tmp_path_factory):
    pair = start_pair(certs, str(tmp_path_factory.mktemp("stores")))
    yield pair
    pair.stop()


def owner_cluster(certs, services, owner, **kw):
    """The owner's ServiceCluster (its certificate issued in certs if missing)."""
    assert services.cert_dir == certs
    return services.cluster(owner, **kw)


@pytest.fixture
def alice(certs, services):
    with ShareClient(owner_cluster(certs, services, "alice"), timeout=60) as c:
        yield c


def grid(x, ring_bits=128):
    """x on the fixed-point grid of the cluster's encoding."""
    cfg = Config(ring_bits=ring_bits)
    return client.decode(client.encode(x, cfg.ring_bits, cfg.frac_bits, cfg.bound),
                         cfg.ring_bits, cfg.frac_bits)


def assert_nothing_stored(services, name):
    for s in services:
        assert not s.has(name), f"{s.role} stored {name}"
    deadline = time.time() + 5
    while any(s.pending() for s in services) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(s.pending() for s in services), "a temp file was left behind"


def assert_refused(code, fn, *args, **kw):
    with pytest.raises(ShareServiceError) as e:
        fn(*args, **kw)
    codes = code if isinstance(code, tuple) else (code,)
    assert e.value.code in codes, e.value
    return e.value


# --- encoding ----------------------------------------------------------------
def test_encoding_matches_ring_encode_and_shares_reconstruct():
    """The owner's numpy encoding is tp.share's ring_encode (round half away),
    and two shares made with os.urandom add up to it in both rings."""
    import tensorflow as tf
    from tf_privpy.protocols.mpc.runtime import kernels
    assert service_server._FRAC_BITS == {b: Config(ring_bits=b).frac_bits for b in (64, 128)}
    x = np.array([[0.5, -0.5, 1.5 / 2**20, -2.5 / 2**20, 3.14159, -1234.5678, 0.0, 7e6]])
    for bits in (64, 128):
        cfg = Config(ring_bits=bits)
        x_in = x if bits == 128 else x[:, :-1]
        enc = client.encode(x_in, bits, cfg.frac_bits, cfg.bound)
        ref = kernels.ring_encode(tf.constant(x_in), bits, cfg.frac_bits, cfg.bound).numpy()
        np.testing.assert_array_equal(enc, ref)
        s0, s1 = client.split(enc, bits)
        assert not np.array_equal(s0, enc)
        np.testing.assert_array_equal(client.reconstruct(s0, s1, bits), enc)
        np.testing.assert_array_equal(client.decode(enc, bits, cfg.frac_bits),
                                      np.round(x_in * 2**cfg.frac_bits) / 2**cfg.frac_bits
                                      if bits == 64 else grid(x_in))
    with pytest.raises(ValueError, match="out of the fixed-point range"):
        client.encode(np.array([1.0, 2.0**23]), 128, 20, 2.0**23)
    with pytest.raises(ValueError, match="out of the fixed-point range"):
        client.encode(np.array([np.nan]), 128, 20, 2.0**23)
    with pytest.raises(ValueError, match="numbers only"):
        client.encode(np.array(["1.0"]), 128, 20, 2.0**23)


@pytest.mark.slow
def test_python_m_entry_point(certs, tmp_path):
    """`python -m tf_privpy.deploy.service.server` (which imports all of tf_privpy)
    serves, and stops on SIGTERM."""
    port = local.free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tf_privpy.deploy.service.server", "--role", "s2",
         "--port", str(port),
         "--cert-dir", os.path.join(certs, "s2"), "--store-dir", str(tmp_path / "s2")],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"))
    try:
        line = proc.stdout.readline()
        assert json.loads(line) == {"share_service": "s2", "host": "127.0.0.1", "port": port}
        paths = ca.local_owner(certs, "alice")
        with ShareClient(ServiceCluster(s1="127.0.0.1:1", s2=f"127.0.0.1:{port}", **paths),
                         timeout=30) as c:
            assert c.stat(1, "nothing-here") is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        proc.stdout.close()


# --- round trip and idempotency --------------------------------------------
def test_upload_fetch_round_trip_is_exact(alice, services):
    rng = np.random.default_rng(1)
    x = rng.normal(0, 100, size=(37, 11))
    r = alice.upload("rt", x, progress=True, chunk_bytes=1024)
    assert r["existed"] is False and r["shape"] == [37, 11]
    np.testing.assert_array_equal(alice.fetch("rt"), grid(x))
    # each service holds one share, neither is the encoding itself
    enc = client.encode(x, 128, 20, 2.0**23)
    m0, s0 = alice.fetch_share(0, "rt")
    m1, s1 = alice.fetch_share(1, "rt")
    assert not np.array_equal(s0, enc) and not np.array_equal(s1, enc)
    assert (m0["owner"], m0["party"], m1["party"]) == ("alice", 0, 1)
    assert m0["upload_id"] == m1["upload_id"] == r["upload_id"]
    assert m0["sha256"] == hashlib.sha256(s0.astype("<i8").tobytes()).hexdigest()
    # a scalar and an empty array too
    alice.upload("rt-scalar", -2.75)
    assert alice.fetch("rt-scalar").shape == () and alice.fetch("rt-scalar") == -2.75
    alice.upload("rt-empty", np.zeros((0, 3)))
    assert alice.fetch("rt-empty").shape == (0, 3)


def test_module_functions_with_a_cluster_file(certs, services, tmp_path):
    paths = ca.local_owner(certs, "alice")
    f = tmp_path / "cluster.json"
    f.write_text(json.dumps({"share_services": {"s1": services[0].address,
                                                "s2": services[1].address}, **paths}))
    client.upload("file-x", np.arange(6.0).reshape(2, 3), cluster=str(f))
    np.testing.assert_array_equal(client.fetch("file-x", cluster=str(f)),
                                  np.arange(6.0).reshape(2, 3))


def test_idempotent_retry_and_conflicting_content(alice, services):
    x = np.linspace(-3, 3, 50)
    first = alice.upload("idem", x)
    again = alice.upload("idem", x)
    assert again["existed"] and again["upload_id"] == first["upload_id"]
    # an identical share resent to one service (a retried RPC) is accepted as is
    _, s0 = alice.fetch_share(0, "idem")
    meta, existed = alice.upload_share(0, "idem", s0, [50], bytes.fromhex(first["upload_id"]))
    assert existed
    err = assert_refused(grpc.StatusCode.ALREADY_EXISTS, alice.upload, "idem", x + 1)
    assert "other content" in str(err)
    np.testing.assert_array_equal(alice.fetch("idem"), grid(x))
    # the owner may overwrite its own record
    alice.upload("idem", x + 1, overwrite=True)
    np.testing.assert_array_equal(alice.fetch("idem"), grid(x + 1))


def test_retry_after_a_partial_upload_never_reuses_a_mask(alice, services, monkeypatch):
    """An upload of A stops after S2 stored its share, while S1 saw (part
    of) its own, r; the owner retries with B. Before the fix the retry sent
    S1 enc(B) - s2 = enc(B) - enc(A) + r, so S1 learned B - A (this test
    failed on that code: the difference below was exactly enc(B) - enc(A)).
    Now every attempt splits afresh under a new upload id and replaces both
    records, and a retry that itself stops half-way (S1 replaced, S2 not:
    two sharings) is completed the same way."""
    seen = {0: [], 1: []}  # every share each service was sent, in order
    fail = set()
    real = ShareClient.upload_share

    def flaky(self, party, name, share, *args, **kw):
        seen[party].append(np.array(share, copy=True))
        if party in fail:
            raise ShareServiceError(grpc.StatusCode.UNAVAILABLE, "connection lost (test)",
                                    self.SERVERS[party])
        return real(self, party, name, share, *args, **kw)
    monkeypatch.setattr(ShareClient, "upload_share", flaky)
    a, b = np.array([1.5, -2.0, 3.25]), np.array([100.0, 7.0, -0.5])
    enc_a, enc_b = (client.encode(v, 128, 20, 2.0**23) for v in (a, b))
    fail.add(0)
    with pytest.raises(ShareServiceError):
        alice.upload("partial", a)
    first = alice.stat(1, "partial")
    assert alice.stat(0, "partial") is None and first is not None
    fail.clear()
    r = alice.upload("partial", b)
    s1_then, s1_now = seen[0]
    leak = client._add(s1_now, s1_then, 128, -1)  # what S1 can compute
    assert not np.array_equal(leak, client._add(enc_b, enc_a, 128, -1))
    assert r["upload_id"] != first["upload_id"]
    m0, m1 = alice.stat(0, "partial"), alice.stat(1, "partial")
    assert m0["upload_id"] == m1["upload_id"] == r["upload_id"]
    np.testing.assert_array_equal(alice.fetch("partial"), grid(b))
    # a retry cut off half-way leaves two sharings; the next one completes it
    fail.add(1)
    with pytest.raises(ShareServiceError):
        alice.upload("partial", a, overwrite=True)
    assert alice.stat(0, "partial")["upload_id"] != alice.stat(1, "partial")["upload_id"]
    fail.clear()
    r = alice.upload("partial", a)
    np.testing.assert_array_equal(alice.fetch("partial"), grid(a))
    # no share was ever sent twice, to either service, under one mask
    for party in (0, 1):
        for i, x in enumerate(seen[party]):
            for y in seen[party][i + 1:]:
                assert not np.array_equal(x, y)
    assert alice.upload("partial", a)["existed"]  # the idempotent case still works


def test_published_result_reaches_its_owner_only(alice, certs, services):
    """What tp.load and tp.publish do on S1 and S2 (store.read_share,
    store.write_share; the ops themselves: tests/test_share_io.py): the servers
    read alice's upload as two shares, store a result computed share-wise for
    bob, and bob fetches it; alice cannot."""
    from tf_privpy.deploy.service.store import Store, read_share, write_share
    x = np.random.default_rng(3).normal(size=(4, 3))
    alice.upload("input-x", x)
    uid = os.urandom(16).hex()
    metas = []
    for party, s in enumerate(services):
        store = Store(s.store_dir, 128, 20)  # the server's own store, as its process opens it
        meta, share = read_share(store, "input-x", party)
        metas.append(meta)
        # a linear function computed share-wise: 2x (each server doubles its share)
        doubled = client._add(share, share, 128)
        write_share(store, "result-2x", doubled, party, owner="bob", upload_id=uid)
    client.check_pair("input-x", *metas)
    with ShareClient(owner_cluster(certs, services, "bob"), timeout=30) as bob:
        np.testing.assert_array_equal(bob.fetch("result-2x"), 2 * grid(x))
    assert_refused(grpc.StatusCode.PERMISSION_DENIED, alice.fetch, "result-2x")
    with pytest.raises(Exception, match="party 0's share, not party 1's"):
        read_share(Store(services[0].store_dir, 128, 20), "input-x", 1)


# --- bad input: a clear status, nothing stored -------------------------------
def _raw_upload(c, party, info, data, overwrite=False):
    def msgs():
        yield pb.UploadMessage(header=pb.UploadHeader(info=info, overwrite=overwrite))
        yield pb.UploadMessage(chunk=pb.Chunk(offset=0, data=data,
                                              sha256=hashlib.sha256(data).digest()))
        yield pb.UploadMessage(commit=pb.Commit(sha256=hashlib.sha256(data).digest()))
    return client._rpc(c.SERVERS[party], c.stubs[party].Upload, msgs(), timeout=30)


def _info(name, shape, data, **kw):
    d = dict(name=name, shape=shape, dtype="int64", ring_bits=128, frac_bits=20, party=0,
             sha256=hashlib.sha256(data).digest(), upload_id=os.urandom(16), kind="upload")
    d.update(kw)
    return pb.RecordInfo(**d)


def test_bad_input_gets_a_clear_status_and_stores_nothing(alice, certs, services):
    data = os.urandom(4 * 16)
    cases = [
        ("bad-dtype", _info("bad-dtype", [4], data, dtype="float32"), 0,
         grpc.StatusCode.INVALID_ARGUMENT, "dtype"),
        ("bad-shape", _info("bad-shape", [3], data), 0, grpc.StatusCode.INVALID_ARGUMENT,
         "more data than the declared shape"),
        ("bad-shape2", _info("bad-shape2", [5], data), 0, grpc.StatusCode.INVALID_ARGUMENT,
         "bytes received"),
        ("bad-ring", _info("bad-ring", [8], data, ring_bits=64), 0,
         grpc.StatusCode.FAILED_PRECONDITION, "128-bit ring"),
        ("bad-frac", _info("bad-frac", [4], data, frac_bits=16), 0,
         grpc.StatusCode.FAILED_PRECONDITION, "fractional bits"),
        ("bad-party", _info("bad-party", [4], data, party=1), 0,
         grpc.StatusCode.INVALID_ARGUMENT, "S1"),
        ("bad-sum", _info("bad-sum", [4], data, sha256=bytes(32)), 0,
         grpc.StatusCode.DATA_LOSS, "SHA-256"),
        ("../escape", _info("../escape", [4], data), 0, grpc.StatusCode.INVALID_ARGUMENT,
         "record name"),
    ]
    for name, info, party, code, words in cases:
        err = assert_refused(code, _raw_upload, alice, party, info, data)
        assert words in err.details, (name, err)
        assert_nothing_stored(services, name)
    # oversize: refused from the header, before any data
    big = np.zeros((MAX_RECORD // 16 + 1,))
    err = assert_refused(grpc.StatusCode.RESOURCE_EXHAUSTED, alice.upload, "too-big", big)
    assert "at most" in err.details
    assert_nothing_stored(services, "too-big")
    # out of the fixed-point range: the owner's side refuses, nothing is sent
    with pytest.raises(ValueError, match="fixed-point range"):
        alice.upload("too-wide", np.array([1.0, 1e9]))
    assert_nothing_stored(services, "too-wide")
    # a client of the 64-bit ring against a 128-bit cluster
    with ShareClient(owner_cluster(certs, services, "alice", ring_bits=64), timeout=30) as c64:
        assert_refused(grpc.StatusCode.FAILED_PRECONDITION, c64.upload, "ring64", np.ones(3))
    assert_nothing_stored(services, "ring64")
    # unknown name
    assert_refused(grpc.StatusCode.NOT_FOUND, alice.fetch, "no-such-record")


def test_shares_of_two_sharings_are_not_reconstructed(alice, services):
    """S1 and S2 holding shares of different uploads (or shapes) under one
    name: fetch refuses to add them up."""
    uid0, uid1 = os.urandom(16), os.urandom(16)
    s = client.random_share([3, 2])
    alice.upload_share(0, "mixed", s, [3], uid0)
    alice.upload_share(1, "mixed", s, [3], uid1)
    err = assert_refused(grpc.StatusCode.FAILED_PRECONDITION, alice.fetch, "mixed")
    assert "upload_id" in err.details
    # ... and upload() does not take the mixed pair for an identical record:
    # it is an unfinished upload (e.g. a retry cut off after one service
    # stored its share), replaced by a fresh sharing under a new upload id
    r = alice.upload("mixed", np.ones(3))
    assert not r["existed"] and r["upload_id"] not in (uid0.hex(), uid1.hex())
    np.testing.assert_array_equal(alice.fetch("mixed"), np.ones(3))


# --- authentication and authorisation -----------------------------------------
def test_client_without_certificate_is_refused_in_the_handshake(certs, services):
    with open(os.path.join(certs, "ca", "ca.pem"), "rb") as f:
        creds = grpc.ssl_channel_credentials(f.read())  # trusts the servers, has no cert
    with grpc.secure_channel(services[0].address, creds) as ch:
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.ShareServiceStub(ch).Stat(pb.StatRequest(name="rt"), timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_certificate_of_another_ca_is_refused_in_the_handshake(certs, services, tmp_path):
    other = str(tmp_path / "other")
    paths = ca.local_owner(other, "alice")  # the same CN, another key, another cluster
    c = ShareClient(ServiceCluster(s1=services[0].address, s2=services[1].address,
                                   ca=os.path.join(certs, "ca", "ca.pem"), cert=paths["cert"],
                                   key=paths["key"]), timeout=10)
    with c:
        assert_refused(grpc.StatusCode.UNAVAILABLE, c.upload, "foreign", np.ones(3))
        assert_refused(grpc.StatusCode.UNAVAILABLE, c.fetch, "rt")
    assert_nothing_stored(services, "foreign")


def test_server_certificate_is_no_owner(certs, services):
    c = ShareClient(ServiceCluster(s1=services[0].address, s2=services[1].address,
                                   ca=os.path.join(certs, "ca", "ca.pem"),
                                   cert=os.path.join(certs, "s1", "s1.pem"),
                                   key=os.path.join(certs, "s1", "s1.key")), timeout=10)
    with c:
        assert_refused((grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED),
                       c.upload, "as-server", np.ones(3))
    assert_nothing_stored(services, "as-server")


def test_misdirected_address_sends_no_share(certs, services):
    """Both addresses leading to S1 (a wrong cluster file, or a hijacked
    name): S2's channel fails the role check of S1's certificate, before
    any share is sent, so S1 never gets both shares."""
    good = owner_cluster(certs, services, "alice")
    for s1, s2 in ((good.s1, good.s1), (good.s2, good.s1)):
        bad = dataclasses.replace(good, s1=s1, s2=s2)
        with ShareClient(bad, timeout=10) as c:
            assert_refused(grpc.StatusCode.UNAVAILABLE, c.upload, "misdirected", np.ones(3))
            assert_refused(grpc.StatusCode.UNAVAILABLE, c.upload, "misdirected", np.ones(3),
                           overwrite=True)
        assert_nothing_stored(services, "misdirected")


def test_other_owners_certificate_is_refused(alice, certs, services):
    alice.upload("alice-only", np.array([1.0, 2.0, 3.0]))
    with ShareClient(owner_cluster(certs, services, "bob"), timeout=30) as bob:
        assert_refused(grpc.StatusCode.PERMISSION_DENIED, bob.fetch, "alice-only")
        assert_refused(grpc.StatusCode.PERMISSION_DENIED, bob.stat, 0, "alice-only")
        assert_refused(grpc.StatusCode.PERMISSION_DENIED, bob.upload, "alice-only",
                       np.zeros(3), overwrite=True)
        assert_refused(grpc.StatusCode.PERMISSION_DENIED, bob.upload, "alice-only",
                       np.zeros(3))
    np.testing.assert_array_equal(alice.fetch("alice-only"), [1.0, 2.0, 3.0])


def test_revoked_certificate_refused_in_the_handshake(certs, services):
    """mallory was revoked before the services started: its certificate is not
    among their client trust roots (the enrolled ones), so TLS refuses it."""
    with ShareClient(owner_cluster(certs, services, "mallory"), timeout=30) as m:
        assert_refused(grpc.StatusCode.UNAVAILABLE, m.upload, "mallory-x", np.ones(3))
        assert_refused(grpc.StatusCode.UNAVAILABLE, m.fetch, "mallory-x")
    assert_nothing_stored(services, "mallory-x")


def _revoke_while_running(certs, pair, owner):
    """Revokes `owner` while its client is connected: the open connection is
    refused from its next call (the interceptor), a new one in the handshake
    (the reloaded trust roots), and nothing more is stored."""
    with ShareClient(owner_cluster(certs, pair, owner), timeout=30) as before:
        before.upload(f"{owner}-before", np.ones(2))
        revoke(certs, owner)
        time.sleep(0.05)
        assert_refused(grpc.StatusCode.UNAUTHENTICATED, before.fetch, f"{owner}-before")
        assert_refused(grpc.StatusCode.UNAUTHENTICATED, before.upload, f"{owner}-after",
                       np.ones(2))
    with ShareClient(owner_cluster(certs, pair, owner), timeout=30) as after:
        assert_refused(grpc.StatusCode.UNAVAILABLE, after.upload, f"{owner}-after",
                       np.ones(2))
    assert_nothing_stored(pair, f"{owner}-after")


def test_revocation_applies_to_a_running_service(certs, services):
    ca.local_owner(certs, "carol")  # enrolled after the services started: taken at once
    _revoke_while_running(certs, services, "carol")
    # the other owners are unaffected
    with ShareClient(owner_cluster(certs, services, "alice"), timeout=30) as alice:
        alice.upload("after-carol", np.ones(2))


def test_broken_variant_admits_revoked_certificate(certs, tmp_path):
    """The revocation test fails against a service without its revocation
    checks (no trust-root reload, no interceptor check): see the module
    docstring."""
    ca.local_owner(certs, "erin")  # before the start: the broken service never reloads
    pair = start_pair(certs, str(tmp_path), broken=True)
    try:
        with pytest.raises(pytest.fail.Exception):
            _revoke_while_running(certs, pair, "erin")
        with ShareClient(owner_cluster(certs, pair, "erin"), timeout=30) as erin:
            erin.upload("erin-after", np.ones(2))  # a revoked owner gets in
        assert pair[0].has("erin-after")
    finally:
        pair.stop()


def test_tampered_chunk_is_refused_and_nothing_stored(alice, services):
    x = np.arange(4096.0)

    def tamper(k, chunk):
        if k == 2:
            data = bytearray(chunk.data)
            data[5] ^= 1
            chunk = pb.Chunk(offset=chunk.offset, data=bytes(data), sha256=chunk.sha256)
        return chunk
    enc = client.encode(x, 128, 20, 2.0**23)
    s0, _ = client.split(enc, 128)
    err = assert_refused(grpc.StatusCode.DATA_LOSS, alice.upload_share, 0, "tampered", s0,
                         [4096], os.urandom(16), chunk_bytes=4096, tamper=tamper)
    assert "offset 8192" in err.details
    # a chunk moved to another offset
    def shift(k, chunk):
        return pb.Chunk(offset=chunk.offset + 8, data=chunk.data, sha256=chunk.sha256) \
            if k == 1 else chunk
    assert_refused(grpc.StatusCode.INVALID_ARGUMENT, alice.upload_share, 0, "tampered", s0,
                   [4096], os.urandom(16), chunk_bytes=4096, tamper=shift)
    assert_nothing_stored(services, "tampered")


def test_client_gone_mid_upload_leaves_nothing(alice, services):
    """An owner whose upload stops half-way (cancelled, or its process gone):
    the record is not visible and its temp file is removed."""
    data = os.urandom(64 << 10)
    info = _info("cancelled", [4096], data)
    gate = threading.Event()

    def msgs():
        yield pb.UploadMessage(header=pb.UploadHeader(info=info))
        yield pb.UploadMessage(chunk=pb.Chunk(offset=0, data=data[:1024],
                                              sha256=hashlib.sha256(data[:1024]).digest()))
        gate.wait(30)  # never sends the rest
    fut = alice.stubs[0].Upload.future(msgs(), timeout=30)
    deadline = time.time() + 10
    while not services[0].pending() and time.time() < deadline:
        time.sleep(0.01)
    assert services[0].pending(), "the upload never reached the service"
    fut.cancel()
    gate.set()
    assert_nothing_stored(services, "cancelled")


# --- durability -----------------------------------------------------------------
def test_service_killed_during_upload_then_restarted(certs, tmp_path):
    pair = start_pair(certs, str(tmp_path), max_record=64 << 20)
    try:
        cluster = owner_cluster(certs, pair, "alice")
        rng = np.random.default_rng(2)
        earlier = {f"early-{i}": rng.normal(size=(100, 7)) for i in range(3)}
        with ShareClient(cluster, timeout=60) as c:
            for name, x in earlier.items():
                c.upload(name, x)
        big = rng.normal(size=(1 << 20,))  # 16 MiB per share, sent in 16 KiB chunks
        result = {}

        def interrupted():
            with ShareClient(cluster, timeout=60) as c:
                try:
                    c.upload("big", big, chunk_bytes=16 << 10)
                except ShareServiceError as e:
                    result["error"] = e
        t = threading.Thread(target=interrupted)
        t.start()
        s1 = pair[0]
        deadline = time.time() + 30
        while not s1.pending() and time.time() < deadline:
            time.sleep(0.005)
        assert s1.pending(), "the upload never started"
        s1.kill()
        t.join(60)
        assert result["error"].server == "S1"
        assert not s1.has("big")
        # S2 finished its share: the retry below completes the interrupted
        # sharing with the complementary share for S1
        assert pair[1].has("big")
        s1.start()
        assert not s1.pending()  # the half-written temp file is gone
        with ShareClient(cluster, timeout=60) as c:
            assert c.stat(0, "big") is None
            for name, x in earlier.items():
                np.testing.assert_array_equal(c.fetch(name), grid(x))
            assert_refused(grpc.StatusCode.NOT_FOUND, c.fetch, "big")
            r = c.upload("big", big)  # the retry (completes S2's share if it has one)
            assert not r["existed"]
            np.testing.assert_array_equal(c.fetch("big"), grid(big))
            assert c.upload("big", big)["existed"]
    finally:
        pair.stop()


# --- load --------------------------------------------------------------------------
@pytest.mark.slow
def test_fifty_concurrent_uploads_of_one_megabyte(certs, services):
    """50 owners' clients (separate TLS channels) upload 1 MiB shares (65536
    values in the 128-bit ring) at once: none lost, none mixed up (each is
    fetched back and compared)."""
    r = local.concurrent_uploads(owner_cluster(certs, services, "alice"), n=50,
                                 share_bytes=1 << 20)
    assert not r["errors"], r["errors"][:3]
    assert r["mib"] == 100
    print(f"\n50 concurrent uploads: {r['mib']:.0f} MiB of shares in {r['seconds']:.1f} s, "
          f"{r['mib_per_s']:.1f} MiB/s")
