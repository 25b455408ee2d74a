"""The share service's limits and the store's own rules (issue 24, section 5):
calls at once overall and per owner, the server-side deadlines, per-owner
quotas, private file modes, exact names, and what a result may replace.

Each test here failed on the code before the fix (run against it with
`git stash`): the services then admitted every call into a pool of 64
threads that a stalled client held for ever (test_idle_uploads_of_one_owner_
do_not_block_another: alice's upload timed out behind bob's 70 idle ones),
had no deadline, quota or limit flags (the limited pair did not start),
wrote 0644 files in 0755 folders, took "name\\n" for a name, let a result
replace an upload, named a record's checksum in a refusal, and accepted other
content under a record's upload id.
"""
import concurrent.futures
import hashlib
import os
import signal
import stat
import threading
import time

import grpc
import numpy as np
import pytest

from tf_privpy.deploy.service import ca, local, store as store_mod
from tf_privpy.deploy.service._proto import pb
from tf_privpy.deploy.service.client import ShareClient, ShareServiceError
from tf_privpy.deploy.service.store import Store, StoreError, write_share

LIMITED = ["--max-calls", "8", "--max-calls-per-owner", "4", "--owner-quota-records", "6",
           "--owner-quota-bytes", str(64 << 10)]
DEADLINES = ["--call-idle-timeout", "1", "--call-deadline", "3"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("certs"))
    ca.make_ca(d)
    return d


@pytest.fixture(scope="module")
def _started():
    """The pairs the module started, stopped together after it: every
    service is told (SIGTERM) before any is waited for, so their shutdowns
    overlap instead of adding up."""
    pairs = []
    yield pairs
    services = [s for pair in pairs for s in pair.services]
    for s in services:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.send_signal(signal.SIGTERM)
    for s in services:
        s.stop()


def _services(certs, tmp_path_factory, started, folder, extra_args=None):
    """S1's and S2's services with their own stores, started; stopped after the module."""
    kw = {"extra_args": extra_args} if extra_args else {}
    pair = local.LocalShareServices(certs, str(tmp_path_factory.mktemp(folder)), **kw).start()
    started.append(pair)
    return pair


@pytest.fixture(scope="module")
def default_pair(certs, tmp_path_factory, _started):
    return _services(certs, tmp_path_factory, _started, "stores")


@pytest.fixture(scope="module")
def limited(certs, tmp_path_factory, _started):
    return _services(certs, tmp_path_factory, _started, "limited", LIMITED)


@pytest.fixture(scope="module")
def deadlines(certs, tmp_path_factory, _started):
    return _services(certs, tmp_path_factory, _started, "deadlines", DEADLINES)


def _header(name, n_bytes, party=0, kind="upload"):
    data = os.urandom(n_bytes)
    info = pb.RecordInfo(name=name, shape=[n_bytes // 16], dtype="int64", ring_bits=128,
                         frac_bits=20, party=party, sha256=hashlib.sha256(data).digest(),
                         upload_id=os.urandom(16), kind=kind)
    return info, data


class Stalled:
    """Uploads that send their header (and a first chunk) and then nothing:
    each holds its call open until released or cut off."""

    def __init__(self, c: ShareClient, prefix: str, n: int, party: int = 0):
        self.gate = threading.Event()
        self.futures = []
        for i in range(n):
            info, data = _header(f"{prefix}-{i}", 4096, party)
            self.futures.append(c.stubs[party].Upload.future(self._msgs(info, data),
                                                             timeout=60))

    def _msgs(self, info, data):
        yield pb.UploadMessage(header=pb.UploadHeader(info=info))
        yield pb.UploadMessage(chunk=pb.Chunk(offset=0, data=data[:1024],
                                              sha256=hashlib.sha256(data[:1024]).digest()))
        self.gate.wait(60)

    def codes(self, timeout=30):
        """The status of each finished call (None: still running)."""
        deadline = time.time() + timeout
        out = []
        for f in self.futures:
            try:
                f.result(timeout=max(0.0, deadline - time.time()))
                out.append(grpc.StatusCode.OK)
            except grpc.FutureTimeoutError:
                out.append(None)
            except grpc.RpcError as e:
                out.append(e.code())
        return out

    def release(self):
        for f in self.futures:
            f.cancel()
        self.gate.set()


def wait_for(cond, timeout=10.0):
    deadline = time.time() + timeout
    while not cond() and time.time() < deadline:
        time.sleep(0.02)
    return cond()


# --- calls at once and deadlines (real processes) ----------------------------
def test_idle_uploads_of_one_owner_do_not_block_another(certs, default_pair):
    """With the default limits, bob opens 70 uploads and sends nothing more:
    at most max_calls_per_owner (64) are admitted, the rest refused at once,
    and alice's upload still goes through in seconds. Before the fix the
    service queued calls behind its 64 threads, all held by bob: alice's
    upload timed out."""
    with ShareClient(default_pair.cluster("bob"), timeout=60) as bob, \
            ShareClient(default_pair.cluster("alice"), timeout=10) as alice:
        idle = Stalled(bob, "idle", 70)
        try:
            assert wait_for(lambda: len(default_pair[0].pending()) >= 64)
            t0 = time.time()
            alice.upload("not-blocked", np.arange(5.0), progress=False)
            took = time.time() - t0
            np.testing.assert_array_equal(alice.fetch("not-blocked"), np.arange(5.0))
            assert took < 8, took
            assert len(default_pair[0].pending()) == 64  # bob's admitted, still waiting
            refused = [c for c in idle.codes(timeout=0.5) if c is not None]
            assert refused == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 6, refused
        finally:
            idle.release()
    assert wait_for(lambda: not default_pair[0].pending())


def test_per_owner_and_overall_call_limits(certs, limited):
    """--max-calls-per-owner 4: bob's fifth call at once is refused with
    what to do; --max-calls 8: calls beyond eight are refused rather than
    queued; once the calls end, everyone gets through again."""
    with ShareClient(limited.cluster("bob"), timeout=30) as bob, \
            ShareClient(limited.cluster("carol"), timeout=30) as carol, \
            ShareClient(limited.cluster("alice"), timeout=10) as alice:
        b = Stalled(bob, "lim-b", 4)
        try:
            assert wait_for(lambda: len(limited[0].pending()) == 4)
            with pytest.raises(ShareServiceError) as e:
                bob.stat(0, "anything")
            assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "runs 4 calls" in e.value.details and "retry" in e.value.details
            alice.upload("lim-a", np.ones(2), progress=False)  # another owner: fine
            c = Stalled(carol, "lim-c", 4)
            try:
                assert wait_for(lambda: len(limited[0].pending()) == 8)
                with pytest.raises(ShareServiceError) as e:  # 8 calls run: full
                    alice.stat(0, "lim-a")
                assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            finally:
                c.release()
        finally:
            b.release()
        assert wait_for(lambda: not limited[0].pending())
        assert wait_for(lambda: alice.stat(0, "lim-a") is not None)


def test_stalled_upload_is_cut_off_and_its_temp_file_removed(certs, deadlines):
    """--call-idle-timeout 1: an upload that stops sending is cancelled after
    about a second and leaves no temp file; one that keeps sending slowly is
    not; --call-deadline 3: one that keeps sending for longer is cut off."""
    with ShareClient(deadlines.cluster("dave"), timeout=30) as dave:
        s = Stalled(dave, "stall", 1)
        t0 = time.time()
        assert s.codes(timeout=10) == [grpc.StatusCode.CANCELLED]
        assert 0.8 < time.time() - t0 < 5
        assert wait_for(lambda: not deadlines[0].pending())
        assert not deadlines[0].has("stall-0")
        s.release()

        def slow(name, pause, n):
            info, data = _header(name, 16 * n)

            def msgs():
                yield pb.UploadMessage(header=pb.UploadHeader(info=info))
                for i in range(n):
                    time.sleep(pause)
                    b = data[16 * i:16 * (i + 1)]
                    yield pb.UploadMessage(chunk=pb.Chunk(offset=16 * i, data=b,
                                                          sha256=hashlib.sha256(b).digest()))
                yield pb.UploadMessage(commit=pb.Commit(sha256=info.sha256))
            return dave.stubs[0].Upload(msgs(), timeout=30)

        # the two slow uploads side by side (each its own call): 3 s, not 5
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            ok = pool.submit(slow, "slow-ok", 0.4, 5)  # 2 s, never idle for 1 s
            too_long = pool.submit(slow, "too-long", 0.4, 12)  # 4.8 s > the 3 s deadline
            ok.result()
            assert deadlines[0].has("slow-ok")
            with pytest.raises(grpc.RpcError) as e:
                too_long.result()
        assert e.value.code() == grpc.StatusCode.CANCELLED
        assert wait_for(lambda: not deadlines[0].pending())
        assert not deadlines[0].has("too-long")


def test_fetch_whose_client_stops_reading_is_cut_off(certs, deadlines):
    """A fetch whose client stops reading holds the service's thread once
    the flow-control window is full: the idle timeout cancels it too."""
    with ShareClient(deadlines.cluster("erin"), timeout=30) as erin:
        # a 16 MiB result for erin, written as tp.publish would (no quota)
        st = Store(deadlines[0].store_dir, 128, 20)
        write_share(st, "big-result", np.zeros((1 << 20, 2), np.int64), 0, "erin",
                    os.urandom(16).hex())
        it = erin.stubs[0].Fetch(pb.FetchRequest(name="big-result", chunk_bytes=1 << 20),
                                 timeout=30)
        next(it)
        time.sleep(2.5)  # the service gives up after 1 s without progress
        with pytest.raises(grpc.RpcError) as e:
            for _ in it:
                pass
        assert e.value.code() == grpc.StatusCode.CANCELLED
        it.cancel()
        # and the service serves erin again
        assert erin.stat(0, "big-result")["size_bytes"] == 16 << 20


def test_per_owner_quota(certs, limited):
    """--owner-quota-records 6, --owner-quota-bytes 64 KiB: a seventh record,
    or more bytes, are refused with what to do; overwriting one's own
    record is counted without the record it replaces; other owners have
    their own quota."""
    with ShareClient(limited.cluster("quinn"), timeout=30) as q:
        for name in ("q-a", "q-b", "q-c", "q-d", "q-e", "q-f"):
            q.upload(name, np.ones(3), progress=False)
        with pytest.raises(ShareServiceError) as e:
            q.upload("q-g", np.ones(3), progress=False)
        assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "quota is 6" in e.value.details and "overwrite one of yours" in e.value.details
        assert not limited[0].has("q-g") and not limited[1].has("q-g")
        q.upload("q-a", np.ones(3000), overwrite=True, progress=False)  # 48000 bytes
        with pytest.raises(ShareServiceError) as e:
            q.upload("q-b", np.ones(2000), overwrite=True, progress=False)
        assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "over the quota of 65536" in e.value.details
        np.testing.assert_array_equal(q.fetch("q-b"), np.ones(3))  # unchanged
        assert not limited[0].pending()
    with ShareClient(limited.cluster("rita"), timeout=30) as r:
        r.upload("r-a", np.ones(3), progress=False)


def test_owners_upload_inputs_only(certs, default_pair):
    """An owner cannot store a record of kind "result" (only tp.publish
    writes those)."""
    with ShareClient(default_pair.cluster("alice"), timeout=30) as alice:
        with pytest.raises(ShareServiceError) as e:
            alice.upload_share(0, "fake-result", np.zeros((2, 2), np.int64), [2],
                               os.urandom(16), kind="result")
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "tp.publish" in e.value.details
        assert not default_pair[0].has("fake-result")


def test_limits_are_checked():
    from tf_privpy.deploy.service.limits import Limits
    with pytest.raises(ValueError, match="below max_calls"):
        Limits(max_calls=8, max_calls_per_owner=8)
    with pytest.raises(ValueError, match="positive"):
        Limits(idle_timeout_s=0)


# --- the store's own rules (no service) ---------------------------------------
def _info(name, data, uid=None, kind="upload"):
    return {"name": name, "shape": [len(data) // 16], "dtype": "int64", "ring_bits": 128,
            "frac_bits": 20, "party": 0, "kind": kind, "sha256": hashlib.sha256(data).hexdigest(),
            "upload_id": uid or os.urandom(16).hex()}


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_store_files_and_folders_are_private(tmp_path, monkeypatch):
    """Records, temp files and the lock file 0600, the folders 0700; a store
    made by an older version (0755 folders, 0644 records) is tightened when
    it opens, and one that cannot be is refused with what to do."""
    root = tmp_path / "s1"
    st = Store(str(root))
    data = os.urandom(32)
    p = st.begin(_info("x", data), "alice")
    assert mode(p.path) == 0o600
    p.write(0, data)
    p.commit()
    for d in (root, root / "records", root / "tmp"):
        assert mode(d) == 0o700, d
    assert mode(root / "records" / "x.rec") == 0o600
    assert mode(root / "records" / ".lock") == 0o600
    # an older store, opened up
    for d in (root, root / "records", root / "tmp"):
        os.chmod(d, 0o755)
    os.chmod(root / "records" / "x.rec", 0o644)
    Store(str(root))
    assert [mode(d) for d in (root, root / "records", root / "tmp")] == [0o700] * 3
    assert mode(root / "records" / "x.rec") == 0o600
    # a folder it cannot tighten (another user's): refused, saying what to do
    os.chmod(root, 0o755)

    def denied(path, m):
        raise PermissionError(1, "Operation not permitted", path)
    monkeypatch.setattr(store_mod.os, "chmod", denied)
    with pytest.raises(StoreError, match="mode 755; cannot make it 700.*chmod 700") as e:
        Store(str(root))
    assert e.value.code == "FAILED_PRECONDITION"


def test_names_and_owners_with_a_trailing_newline_are_refused(tmp_path):
    st = Store(str(tmp_path / "s"))
    data = os.urandom(16)
    for name in ("x\n", "x\n\n", "\nx", "x\r"):
        with pytest.raises(StoreError, match="record name") as e:
            st.put(_info(name, data), data, "alice")
        assert e.value.code == "INVALID_ARGUMENT"
        with pytest.raises(StoreError, match="record name"):
            st.info(name)
    for owner in ("alice\n", "", "../ca", "a" * 65):
        with pytest.raises(StoreError, match="owner") as e:
            st.put(_info("y", data), data, owner)
        assert e.value.code == "INVALID_ARGUMENT"
    assert os.listdir(st.records) == [] or os.listdir(st.records) == [".lock"]
    st.put(_info("x", data), data, "alice")  # the plain name still works


def test_a_result_never_replaces_an_upload(tmp_path):
    """tp.publish(owner=X, overwrite=True) over X's upload: refused by the
    store itself (the driver's own check could be skipped), saying what to
    do; the upload is unchanged. A result may be overwritten by a result."""
    st = Store(str(tmp_path / "s"))
    up = np.arange(8, dtype=np.int64).reshape(4, 2)
    st.put(_info("input", up.tobytes()), up.tobytes(), "alice")
    with pytest.raises(StoreError, match="is an upload of 'alice'.*another name") as e:
        write_share(st, "input", np.zeros((4, 2), np.int64), 0, "alice", os.urandom(16).hex(),
                    overwrite=True)
    assert e.value.code == "ALREADY_EXISTS"
    assert st.read("input")[1] == up.tobytes()
    write_share(st, "out", np.zeros((4, 2), np.int64), 0, "alice", os.urandom(16).hex())
    write_share(st, "out", np.ones((4, 2), np.int64), 0, "alice", os.urandom(16).hex(),
                overwrite=True)


def test_refusals_name_no_checksum_and_new_content_needs_a_new_upload_id(tmp_path):
    """A refusal's message reaches the driver (tp.publish): it must not carry
    the share's SHA-256 (nor a prefix of it). Replacing a record with other
    content under the same upload id is refused: that would pair a new share
    with the other server's old one, under the old mask."""
    st = Store(str(tmp_path / "s"))
    a, b = os.urandom(16), os.urandom(16)
    uid = os.urandom(16).hex()
    st.put(_info("r", a, uid), a, "alice")
    with pytest.raises(StoreError) as e:
        st.put(_info("r", b), b, "alice")
    assert e.value.code == "ALREADY_EXISTS"
    digest = hashlib.sha256(a).hexdigest()
    assert not any(digest[i:i + 8] in str(e.value) for i in range(0, 57, 8)), e.value
    with pytest.raises(StoreError, match="new upload id") as e:
        st.put(_info("r", b, uid), b, "alice", overwrite=True)
    assert e.value.code == "INVALID_ARGUMENT"
    st.put(_info("r", a, uid), a, "alice")  # the identical record again: fine
    st.put(_info("r", b), b, "alice", overwrite=True)  # a new sharing: fine
    assert store_mod.public(st.info("r")).keys() == set(store_mod.PUBLIC)
    assert "sha256" not in store_mod.public(st.info("r"))
