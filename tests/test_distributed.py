"""Distributed mode: four server processes, a driver process (issue 11).

Four servers run as subprocesses (tf_privpy.cluster.LocalCluster, on
loopback); the driver is tests/distributed_driver.py, another process,
because this one runs the embedded runtime and TF 2.14 cannot connect a
process to a cluster and come back. The driver's results are checked against
numpy (tests/tolerances.py) and against the embedded runtime in this process.
They differ from the embedded run only by local truncation: each product is
truncated share by share with fresh masks, so a result moves by an ulp or two
between any two runs, embedded or distributed alike.
"""
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tf_privpy as tp
from tf_privpy.deploy import cluster_file as cf
from tf_privpy.protocols.mpc.runtime import identity as ID
from tf_privpy.deploy.server import FAKE_IDENTITY_ENV, FAKE_PUBLIC_KEY_ENV, default_identity_key
from driver_client import Driver, _env, connect  # noqa: F401 (re-exported to test files)
from tolerances import FUNCTION_TOL, TRUNC_ULPS, matmul_tol, mul_tol, select_tol, ulp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TIMEOUT = 9.0  # the cluster's failure-detection timeout in these tests
SLACK = 4.0    # scheduling noise on a loaded 2-core machine
F = 20
MB = 1 << 20


def grid(a):
    """Values on the fixed-point grid: encoding is exact, errors are the ops'."""
    return np.round(np.asarray(a, np.float64) * 2.0 ** F) / 2.0 ** F


RNG = np.random.default_rng(42)
X = grid(RNG.normal(0, 3, (3, 4)))
Y = grid(X + np.where(RNG.random((3, 4)) < 0.5, -1, 1) * RNG.uniform(0.01, 2, (3, 4)))
A, B = grid(RNG.normal(0, 2, (3, 5))), grid(RNG.normal(0, 2, (5, 2)))
INPUTS = {"x": X.tolist(), "y": Y.tolist(), "a": A.tolist(), "b": B.tolist()}


@pytest.fixture(scope="module")
def driver_process(shared_driver_process):
    """The driver process (conftest.shared_driver_process: one per session,
    shared with test_distributed_models.py in the same worker)."""
    return shared_driver_process


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The four servers (conftest.shared_cluster: one set per session)."""
    assert shared_cluster.timeout_s == TIMEOUT
    return shared_cluster


@pytest.fixture(scope="module")
def driver(driver_process, cluster, stale_roles):
    """The driver connected to the cluster, for this module: a server an
    earlier module left running another way (stale_roles) is restarted
    first, and tp.init runs again (an earlier module may have reset the
    driver's runtime: test_embedded_mode_needs_a_fresh_process)."""
    d = driver_process
    reply = connect(d, cluster, stale_roles, TIMEOUT)
    assert "error" not in reply, reply
    assert reply["servers"]["T1"] == "/job:t1/replica:0/task:0/device:CPU:0"
    assert reply["servers"]["client"] == "/job:client/replica:0/task:0/device:CPU:0"
    assert reply["soft_placement"] is False
    return d


@pytest.fixture(scope="module")
def reference(driver):
    """The driver's results on INPUTS (cmd_compute), computed once: what
    test_results_match_numpy_and_embedded checks, and the "before" that the
    fault tests compare a new runtime's results with (_same_results), which
    each used to recompute."""
    return driver.call("compute", **INPUTS)


def reinit(driver, cluster):
    reply = driver.call("init", cluster=cluster.path, timeout=TIMEOUT)
    assert "error" not in reply, reply


# ------------------------------------------------------- cluster files (fast)
def _tasks(**over):
    t = {"s1": "127.0.0.1:7101", "s2": "127.0.0.1:7102", "t1": "127.0.0.1:7103",
         "t2": "127.0.0.1:7104"}
    t.update(over)
    return t


def test_cluster_file_validation(tmp_path):
    ok = cf.from_json({"version": 1, "tasks": _tasks(), "timeout_s": 5})
    assert ok.servers["t2"] == "127.0.0.1:7104" and ok.timeout_s == 5 and not ok.identity
    path = ok.save(tmp_path / "c.json")
    assert cf.load(path).tasks == ok.tasks
    bad = [({"version": 2, "tasks": _tasks()}, "version"),
           ({"version": 1, "tasks": {"s1": "127.0.0.1:1"}}, "missing ['s2', 't1', 't2']"),
           ({"version": 1, "tasks": _tasks(t2="127.0.0.1")}, "not host:port"),
           ({"version": 1, "tasks": _tasks(t2="127.0.0.1:70000")}, "out of range"),
           ({"version": 1, "tasks": _tasks(t2="127.0.0.1:7101")}, "same address"),
           ({"version": 1, "tasks": _tasks(), "library": {"version": "1"}}, "sha256"),
           ({"version": 1, "tasks": _tasks(), "timeout_s": 0}, "timeout_s"),
           ({"version": 1, "tasks": _tasks(), "identity": {"s1": "ab"}}, "32 bytes"),
           ({"version": 1, "tasks": _tasks(), "extra": 1}, "unknown keys")]
    for obj, words in bad:
        with pytest.raises(cf.ClusterError, match=words.replace("[", r"\[").replace("]", r"\]")):
            cf.from_json(obj)
    # a place for the key exchange's public keys, optional today
    ident = {r: "ab" * 32 for r in cf.ROLES}
    assert cf.from_json({"version": 1, "tasks": _tasks(), "identity": ident}).identity == ident
    with pytest.raises(cf.ClusterError, match="does not exist"):
        cf.load(tmp_path / "missing.json")


def test_servers_keep_message_buffers_in_the_heap():
    """A server process sets glibc's mmap and trim thresholds (issue 26: each
    16 MB message otherwise cost a fresh mmap, page faults and zeroing)."""
    import ctypes
    import platform
    from tf_privpy.deploy import server
    glibc = platform.libc_ver()[0] == "glibc"
    if glibc:
        libc = ctypes.CDLL("libc.so.6")
        # what the server asks for is accepted (0 would mean refused)
        assert libc.mallopt(-3, server.MMAP_THRESHOLD_BYTES) == 1
    assert server.tune_malloc() is glibc


def test_address_policy():
    for host in ("127.0.0.1", "::1", "localhost", "10.1.2.3", "172.20.0.1", "192.168.1.9",
                 "169.254.3.4", "fe80::1", "fd12::5"):
        assert cf.address_problem(host) is None, host
    for host in ("8.8.8.8", "172.32.0.1", "2001:4860::8888", "0.0.0.0"):
        assert cf.address_problem(host), host


def test_public_address_refused(tmp_path):
    """Without --allow_public_address a server refuses, saying why; with it,
    the policy lets the address pass (here it then fails as not this
    machine's). tp.init refuses too, leaving the current runtime usable."""
    path = cf.Cluster(tasks=_tasks(s1="8.8.8.8:7101")).save(tmp_path / "public.json")
    cmd = [sys.executable, "-m", "tf_privpy.server", "--role", "s1", "--cluster", path]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env()) for c in (cmd, cmd + ["--allow_public_address"])]
    with pytest.raises(tp.ClusterError, match="allow_public_address=True"):
        tp.init(cluster=path)
    assert tp.is_initialized() and "/job:s1" not in tp.servers()["S1"]
    assert tp.reveal(tp.share([1.5]) * 2.0).numpy() == 3.0  # the embedded runtime still works
    (out, err), (out2, err2) = [p.communicate(timeout=120) for p in procs]
    assert procs[0].returncode == 2, err
    for words in ("tf_privpy server s1: error", "8.8.8.8 is a public address", "no TLS",
                  "firewall", "--allow_public_address"):
        assert words in err, err
    assert "ready" not in out
    assert procs[1].returncode == 1 and "not an address of this machine" in err2, err2


# ------------------------------------------------- python -m tf_privpy.cluster
def _spawn_tool(path):
    """Starts `python -m tf_privpy.cluster local` writing `path`; _await_tool
    waits for it."""
    return subprocess.Popen([sys.executable, "-m", "tf_privpy.cluster", "local", "--out",
                             str(path), "--timeout_s", str(TIMEOUT)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())


def _await_tool(p, path):
    """{role: pid} of the tool `p`'s servers, once it has written the cluster
    file and said where."""
    deadline = time.monotonic() + 240
    while not os.path.exists(path):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the cluster did not start"
        time.sleep(0.2)
    ready = p.stdout.readline()
    assert ready.startswith("tf_privpy cluster ready: "), ready
    assert p.stdout.readline().strip() == f"cluster file: {path}"
    pids = {r.lower(): int(pid) for r, pid in re.findall(r"(S1|S2|T1|T2) \S+ \(pid (\d+)\)", ready)}
    assert sorted(pids) == list(cf.ROLES) and cf.load(path).library == cf.library_identity()
    return pids


def _gone(pid, within=10.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_cluster_tool_stops_every_server(tmp_path):
    """Ctrl-C (SIGINT) stops all four and removes the cluster file; when one
    server dies, the tool stops the others and says which one died. The two
    tools (eight servers on their own ports) start side by side: their
    starts are mostly waiting."""
    path, path2 = tmp_path / "cluster.json", tmp_path / "cluster2.json"
    procs = [_spawn_tool(path), _spawn_tool(path2)]
    try:
        (p, pids), (p2, pids2) = [(q, _await_tool(q, f)) for q, f in zip(procs, (path, path2))]
        p.send_signal(signal.SIGINT)
        os.kill(pids2["t1"], signal.SIGKILL)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 0 and "stopping the four servers" in err, err
        assert all(_gone(pid) for pid in pids.values()) and not path.exists()

        _, err = p2.communicate(timeout=30)
        assert p2.returncode == 1, err
        assert "server t1 was killed by SIGKILL; stopping the others" in err, err
        assert all(_gone(pid) for pid in pids2.values()) and not path2.exists()
    finally:
        for q in procs:  # a failed check must not leave a tool and its servers running
            if q.poll() is None:
                q.send_signal(signal.SIGINT)
                q.communicate(timeout=30)


# ---------------------------------------------------- four servers, a driver
@pytest.mark.slow
def test_results_match_numpy_and_embedded(reference):
    got = reference
    assert "error" not in got, got
    g = {k: np.array(v) for k, v in got.items()}
    np.testing.assert_array_equal(g["share"], X)
    np.testing.assert_array_less(np.abs(g["multiply"] - X * Y), mul_tol(X, Y, F))
    np.testing.assert_array_less(np.abs(g["matmul"] - A @ B), matmul_tol(A, B, F))
    np.testing.assert_array_equal(g["less"], X < Y)
    np.testing.assert_allclose(g["relu"], np.maximum(X, 0), atol=select_tol(1, F), rtol=0)
    np.testing.assert_allclose(g["sigmoid"], 1 / (1 + np.exp(-X)), atol=FUNCTION_TOL[128],
                               rtol=0)

    from distributed_driver import compute
    tp.reset()
    tp.init()  # a fresh embedded runtime (128-bit ring) in this process
    emb = {k: np.array(v) for k, v in compute(X, Y, A, B).items()}
    np.testing.assert_array_equal(g["share"], emb["share"])
    np.testing.assert_array_equal(g["less"], emb["less"])
    # one truncation each: TRUNC_ULPS ulps from the exact product in either run
    for k in ("multiply", "matmul", "relu"):
        assert np.max(np.abs(g[k] - emb[k])) <= 2 * TRUNC_ULPS * ulp(F), k
    assert np.max(np.abs(g["sigmoid"] - emb["sigmoid"])) <= 2 * FUNCTION_TOL[128]
    print("distributed - embedded, in ulps:", {
        k: float(np.max(np.abs(g[k] - emb[k])) / ulp(F)) for k in g if k != "less"})


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) for byte counts")
def test_shares_and_messages_stay_on_the_servers(driver, cluster):
    """Graphs: every op reading a share or a protocol message runs on a server,
    and only tp.reveal sends anything to the client. Wire: while a 10^6-element
    multiplication (traced or eager), 10^4 comparisons or a function returning
    its private argument run, the driver receives a few KB (control messages)
    while the servers exchange megabytes; a reveal of the same product brings
    both shares (2 x 16 MB) to the driver. Before protocols/mpc/runtime/placement.py,
    a traced product sent both shares of its result through the driver."""
    r = driver.call("placement", n=10 ** 6, n_cmp=10 ** 4, server_pids=cluster.pids)
    assert r["violations"] == {"mul": [], "less": [], "mul_reveal": []}, r["violations"]
    assert r["channels_to_client"] == {"mul": [], "less": [],
                                       "mul_reveal": ["S1->client", "S2->client"]}
    assert set(r["devices"]["mul"]) == {"S1", "S2", "T1", "T2"}
    assert set(r["devices"]["less"]) <= {"S1", "S2", "T1", "T2"}
    assert set(r["devices"]["mul_reveal"]) == {"S1", "S2", "T1", "T2", "client"}
    # tf.function returns a private result where its shares are, not through
    # the caller (protocols/mpc/runtime/placement.py)
    assert r["outputs"]["mul"] == ["S1", "S2"] and r["outputs"]["mul_reveal"] == ["client"]
    b = r["bytes"]
    print("MB received/sent per process:")
    for op, per in b.items():
        print(f"  {op:10s}", "  ".join(f"{k} {v[0] / MB:5.1f}/{v[1] / MB:5.1f}"
                                       for k, v in per.items()))
    share_bytes = 10 ** 6 * 16  # one 128-bit share of the product
    for op in ("mul", "eager_mul", "less", "identity"):
        assert b[op]["driver"][0] < 256 * 1024, (op, b[op])
    assert b["mul"]["t1"][0] >= share_bytes and b["mul"]["t2"][0] >= share_bytes
    # the default bitwise comparison: S2 receives S1's carry-tree messages
    # (30.9 B per comparison, bitwise/protocol.py's MESSAGE_WORDS), T1's
    # correction words (22.9 B) and its share of r (16 B, 128-bit ring)
    assert b["less"]["s2"][0] >= 10 ** 4 * (30.875 + 22.875 + 16)
    assert b["reveal"]["driver"][0] >= 2 * share_bytes  # the measurement sees big transfers


@pytest.mark.slow
def test_timing(driver):
    """One private multiplication of 10^6 elements, distributed on loopback
    and embedded (printed; the report quotes it)."""
    import tensorflow as tf
    dist = driver.call("bench", n=10 ** 6, reps=3)
    tp.reset()
    tp.init()
    rng = np.random.default_rng(3)
    x, y = tp.share(rng.normal(size=10 ** 6)), tp.share(rng.normal(size=10 ** 6))
    mul = tf.function(lambda a, b: a * b)
    emb = {"eager": [], "tf_function": []}
    tp.reveal(mul(x, y)[:1])
    for _ in range(3):
        for name, fn in (("eager", lambda: x * y), ("tf_function", lambda: mul(x, y))):
            t = time.perf_counter()
            tp.reveal(fn()[:1]).numpy()
            emb[name].append(time.perf_counter() - t)
    emb = {k: min(v) for k, v in emb.items()}
    print(f"10^6-element private multiplication (s): distributed {dist}, embedded {emb}")
    assert all(0 < v < 60 for v in list(dist.values()) + list(emb.values()))


@pytest.mark.slow
def test_profile_collects_every_servers_own_trace(driver, tmp_path):
    """tp.profile(server_trace_ms=...) on the driver: its own profile has the
    client's row, each server's (over gRPC) that server's row with its
    protocol steps; the counters are the driver's, exact per step. ~6 s."""
    reply = driver.call("profile", logdir=str(tmp_path), server_trace_ms=2500)
    assert "error" not in reply, reply
    files = reply["files"]
    assert len(files) == 5  # the driver's host and one per server
    # the comparison is the default bitwise family's (T1 deals, T2 takes no
    # part); the ReLU's select takes S1's shares of the dealt bit from
    # bw_finish, S2's from the dealer (bitwise/selects.py)
    steps = {"S1": {"mul_mask", "mul_finish", "bw_input", "bw_step", "bw_finish", "aead_seal"},
             "S2": {"mul_mask", "mul_finish", "bw_input", "bw_step"},
             "T1": {"mul_assist", "bw_deal", "aead_open"},
             "T2": {"mul_assist"}}
    for party, expected in steps.items():
        rows = files[f"{party}.xplane.pb"]
        assert set(rows) == {party}, rows.keys()
        assert expected <= set(rows[party]), (party, rows[party])
    driver_rows = [rows for f, rows in files.items() if f[:2] not in steps]
    assert set(driver_rows[0]) == {"client"}
    assert [s["multiplications"] for s in reply["steps"]] == [2 + 3, 2 + 3]
    assert [s["comparisons"] for s in reply["steps"]] == [3, 3]
    total = {}
    for s in reply["steps"]:
        for party, ms in s["party_time_ms"].items():
            total[party] = total.get(party, 0) + ms
    assert set(total) == {"S1", "S2", "T1", "T2"} and min(total.values()) > 0


@pytest.mark.slow
def test_hung_server_is_named_within_the_timeout(driver, cluster, reference):
    """A server that stops answering (SIGSTOP: a hang, not a crash) mid-run:
    keepalive drops it and the driver names it within the timeout; once it
    is replaced, a new runtime computes the same results (as the first
    runtime did: reference)."""
    before = reference
    r = driver.call("fault", pid=cluster.pids["t2"], sig="SIGSTOP", delay=0.3, n=10 ** 5)
    print("hung T2:", {k: r[k] for k in ("error", "server", "elapsed", "runs")})
    assert r["error"] == "ServerError" and r["server"] == "T2", r
    assert "T2 (job t2 at 127.0.0.1:" in r["message"] and "does not answer" in r["message"]
    assert r["elapsed"] < TIMEOUT + SLACK, r  # measured: about half the timeout
    cluster.restart("t2")
    reinit(driver, cluster)
    _same_results(before, driver.call("compute", **INPUTS))


@pytest.mark.slow
def test_killed_server_is_named_and_the_cluster_recovers(driver, cluster, reference):
    """A killed server is named at once; after its restart the old runtime
    says so and a new one computes what the first runtime did (reference)."""
    before = reference
    r = driver.call("fault", pid=cluster.pids["t1"], sig="SIGKILL", delay=0.5, n=10 ** 5)
    print("killed T1:", {k: r[k] for k in ("error", "server", "elapsed", "runs")})
    assert r["error"] == "ServerError" and r["server"] == "T1", r
    assert "does not answer" in r["message"] and "tp.init(cluster=" in r["message"]
    assert r["cause"] == "UnavailableError"  # TF's error stays attached
    assert r["elapsed"] < SLACK, r  # a crash is noticed at once (GRPC_FAIL_FAST)
    check = driver.call("check")
    assert check["error"] == "ServerError" and check["server"] == "T1", check
    # a server that cannot start: the launcher names it, with its stderr
    with pytest.raises(cf.ClusterError, match=r"(?s)server t1 exited with code 1 while "
                                              r"starting.*does not exist"):
        cluster.restart("t1", env={"TF_PRIVPY_OPS_LIBRARY": "/nonexistent/_tf_privpy_ops.so"})
    cluster.restart("t1")
    # the old runtime's keys died with the old T1: the driver says so
    stale = driver.call("compute", **INPUTS)
    assert stale["error"] == "ServerError" and stale["server"] == "T1", stale
    assert "restarted since tp.init()" in stale["message"]
    reinit(driver, cluster)
    _same_results(before, driver.call("compute", **INPUTS))


@pytest.mark.slow
def test_messages_between_servers_are_sealed_and_tampering_is_rejected(driver, cluster):
    """Every server-to-server link is sealed (AES-GCM under a key the pair
    exchanged); a bit flipped in a message on its way from S1 to T1 is
    rejected by T1's kernel, naming the link, and no result comes out. (The
    same flip on an unsealed link goes unnoticed: tests/test_sealing.py.)"""
    reinit(driver, cluster)
    r = driver.call("tamper", src="S1", dst="T1")
    parties = ("client", "S1", "S2", "T1", "T2")
    assert r["secured"] == sorted(f"{a}->{b}" for a in parties for b in parties if a != b)
    assert r["error"] == "InvalidArgumentError", r
    assert "S1->T1" in r["message"] and "failed authentication" in r["message"], r
    reinit(driver, cluster)
    assert "error" not in driver.call("compute", **INPUTS)


def _swap_identity_key(cluster, role):
    """Gives `role`'s server another identity key file; returns a function
    that puts the original back."""
    path = default_identity_key(cluster._server_file, role)
    original = ID.read_private_key_file(path)
    ID.generate_identity_key_file(path, overwrite=True)

    def restore():
        ID.write_private_key_file(path, original, overwrite=True)
    return restore


@pytest.mark.slow
def test_a_server_with_another_key_is_refused_or_fails_the_exchange(driver, cluster):
    """Two tests in one (they share T1's swapped key file and the restart
    that puts the real one back):

    A server with another identity key is refused: T1 restarted with a key
    file other than the one the cluster file names: tp.init refuses it,
    naming T1 and both keys, before any exchange.

    A server claiming a key it does not hold fails the exchange: T1 reports
    the cluster file's public key (test hook) but holds another private key:
    the check of reports passes, the authenticated exchange does not.
    tp.init raises a ServerError naming T1, found as the server in every
    failed pair (S1-T1, S2-T1, T1-T2)."""
    restore = _swap_identity_key(cluster, "t1")
    try:
        cluster.restart("t1")
        r = driver.call("init", cluster=cluster.path, timeout=TIMEOUT)
        assert r["error"] == "ServerError" and r["server"] == "T1", r
        assert "holds the identity key" in r["message"] and cluster.cluster.identity["t1"][:16] \
            in r["message"], r

        cluster.restart("t1", env={FAKE_PUBLIC_KEY_ENV: cluster.cluster.identity["t1"]})
        r = driver.call("init", cluster=cluster.path, timeout=TIMEOUT)
        assert r["error"] == "ServerError" and r["server"] == "T1", r
        assert "failed the authenticated key exchange" in r["message"], r
        assert "S1-T1, S2-T1, T1-T2" in r["message"] and "most likely T1" in r["message"], r
    finally:
        restore()
    cluster.restart("t1")
    reinit(driver, cluster)
    assert "error" not in driver.call("compute", **INPUTS)


@pytest.mark.slow
def test_a_driver_cannot_swap_the_servers_keys(driver, cluster, tmp_path):
    """Issue 24 §4: a test-only hook in the driver swaps, in every constant
    its graphs put on a server, T1's public key and T1's key path for an
    attacker's key (a valid 0600 key file on T1's machine): what anyone on a
    driver-to-server link could do to the values sent. The servers take
    both from their own process and cluster file, so there is nothing to
    swap, and tp.init works with the real keys.

    On the code before issue 24 this test fails: the hook swapped T1's key
    path and its public key (six constants: S1, S2 and T2, two key sets
    each) in the exchange graph; T1 then used the attacker's key and S1, S2
    and T2 accepted it (their pairs with T1 agreed); only the driver's own
    pair with T1 failed ("failed between client-T1"), as the driver's
    constant is never sent."""
    attacker_path = str(tmp_path / "attacker.key")
    attacker = ID.generate_identity_key_file(attacker_path)
    r = driver.call("init_swapped", cluster=cluster.path, timeout=TIMEOUT, role="t1",
                    key_path=default_identity_key(cluster._server_file, "t1"),
                    attacker_key_path=attacker_path, attacker_public=attacker.public_hex)
    try:
        assert r.get("swapped") == [], r  # the driver's graphs name no server key, no path
        assert "error" not in r, r
        c = r["compute"]
        assert "error" not in c and c["share"] == [[1.5, -2.0]], c
        np.testing.assert_allclose(c["multiply"], [[0.75, -8.0]], atol=1e-5)
    finally:
        if "error" in r:  # leave the next test a runtime
            reinit(driver, cluster)


@pytest.mark.slow
def test_a_server_with_another_cluster_file_is_refused(driver, cluster):
    """Each server prints its cluster file's SHA-256 in its ready line and
    reports it; tp.init refuses a server whose file is not byte for byte the
    driver's, naming it and saying to copy the same file everywhere. (T2's
    copy differs here by one newline only.)"""
    path = cluster._server_file
    with open(path, "rb") as f:
        original = f.read()
    changed = hashlib.sha256(original + b"\n").hexdigest()
    try:
        with open(path, "ab") as f:
            f.write(b"\n")
        cluster.restart("t2")
        with open(os.path.join(cluster.log_dir, "t2.out")) as f:
            ready = [line for line in f if line.startswith("tf_privpy server t2 ready on")]
        assert ready[-1].rstrip().endswith(f"cluster file sha256 {changed})"), ready
        r = driver.call("init", cluster=cluster.path, timeout=TIMEOUT)
        assert r["error"] == "ServerError" and r["server"] == "T2", r
        for words in ("runs with another cluster file", changed,
                      cf.load(cluster.path).sha256, "copy the same cluster file to every machine"):
            assert words in r["message"], r
    finally:
        with open(path, "wb") as f:
            f.write(original)
    cluster.restart("t2")
    reinit(driver, cluster)


@pytest.mark.slow
def test_checkpoint_restores_in_a_new_runtime(driver, cluster, tmp_path):
    """Issue 24 §5: tp.save_variables of a 10^5-element private variable,
    tp.init again (new keys), tp.restore_variables into a new variable: the
    same value, bit for bit. Each server writes and reads its own share
    (root/S1, root/S2) by ops on its own device: the driver receives a few
    KB (the metadata) while a share is 1.6 MB. Before issue 24 the save
    failed: the paths went through the sealed channel, which carries
    numbers only."""
    n = 10 ** 5
    pids = cluster.pids if shutil.which("ss") else None
    root = str(tmp_path / "ckpt")
    saved = driver.call("checkpoint_save", root=root, n=n, server_pids=pids)
    assert "error" not in saved, saved
    assert sorted(os.listdir(root)) == ["S1", "S2"]
    reinit(driver, cluster)
    r = driver.call("checkpoint_restore", root=root, n=n, server_pids=pids)
    assert "error" not in r, r
    assert r["equal_to_saved"] and r["max_error"] <= 2.0 ** -F, r
    if pids:
        share_bytes = n * 16
        print("checkpoint KB received/sent:", {
            op: {k: [round(v[0] / 1024), round(v[1] / 1024)] for k, v in b.items()}
            for op, b in (("save", saved["bytes"]), ("restore", r["bytes"]))})
        for b in (saved["bytes"], r["bytes"]):
            assert b["driver"][0] < 64 * 1024 and b["driver"][1] < 64 * 1024, b
        assert max(saved["bytes"][k][0] + saved["bytes"][k][1] for k in ("s1", "s2")) \
            < share_bytes  # each share went to its own disk, not over the network


def test_a_cluster_file_without_identity_keys_is_refused(tmp_path):
    from tf_privpy import distributed
    path = cf.from_json({"version": 1, "tasks": _tasks()}).save(tmp_path / "c.json")
    with pytest.raises(cf.ClusterError, match="names no identity key for s1, s2, t1, t2"):
        distributed.connect(path)
    assert distributed.connection() is None and not distributed.joined()


def test_keygen_and_new_write_identity_keys(tmp_path, capsys):
    """keygen (its CLI once, then its function) makes 0600 key files and
    prints their public keys; new refuses to write a cluster file without
    the four public keys and records them."""
    from tf_privpy.deploy.cluster import run_keygen, run_new
    out = subprocess.run([sys.executable, "-m", "tf_privpy.cluster", "keygen", "--out",
                          str(tmp_path / "s1.key")], capture_output=True, text=True,
                         env=_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    keys = {"s1": out.stdout.strip().splitlines()[-1]}
    for role in cf.ROLES[1:]:
        assert run_keygen(str(tmp_path / f"{role}.key"), overwrite=False) == 0
        keys[role] = capsys.readouterr().out.strip().splitlines()[-1]
    for role in cf.ROLES:
        assert os.stat(tmp_path / f"{role}.key").st_mode & 0o777 == 0o600
        assert ID.read_identity_key_file(str(tmp_path / f"{role}.key")).public_hex == keys[role]
    assert run_keygen(str(tmp_path / "s1.key"), overwrite=False) == 1
    assert "already exists" in capsys.readouterr().err
    c = str(tmp_path / "c.json")
    assert run_new(c, _tasks(), {}, 5.0, False) == 2
    assert "--s1_key --s2_key --t1_key --t2_key" in capsys.readouterr().err
    assert not os.path.exists(c)
    assert run_new(c, _tasks(), keys, 5.0, False) == 0
    assert cf.load(c).identity == keys


@pytest.mark.slow
def test_another_library_build_is_refused(driver, cluster, stale_roles):
    """A server reporting another tf_privpy build (test hook) is refused by
    tp.init, naming it and both builds. T2 keeps the hook: the next module
    using the session's cluster restarts it (stale_roles)."""
    fake = "0.0.0-fake:" + "0" * 64
    stale_roles.add("t2")
    cluster.restart("t2", env={FAKE_IDENTITY_ENV: fake})
    r = driver.call("init", cluster=cluster.path, timeout=TIMEOUT)
    assert r["error"] == "ServerError" and r["server"] == "T2", r
    assert "runs tf_privpy 0.0.0-fake, ops library 000000000000" in r["message"]
    assert "version '0.0.0-fake' instead of" in r["message"]


@pytest.mark.slow
def test_embedded_mode_needs_a_fresh_process(driver):
    """TF 2.14 cannot disconnect a process from a cluster: after tp.reset(),
    tp.init() without a cluster refuses with what to do."""
    r = driver.call("embedded")
    assert r["error"] == "RuntimeError_" and "fresh process" in r["message"], r


def _same_results(a, b):
    """The same computation on a new runtime: equal up to truncation."""
    assert "error" not in a and "error" not in b, (a, b)
    for k in a:
        diff = np.max(np.abs(np.array(a[k], np.float64) - np.array(b[k], np.float64)))
        limit = {"share": 0, "less": 0, "sigmoid": 2 * FUNCTION_TOL[128]}.get(
            k, 2 * TRUNC_ULPS * ulp(F))
        assert diff <= limit, (k, diff)
