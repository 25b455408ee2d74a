"""The driver's side of a distributed deployment: `tp.init(cluster=PATH)`.

Connects this process to four tf_privpy servers (tf_privpy/deploy/server.py) as the
TF job "client", after checking that each answers as its own role, runs
this process's tf_privpy build and read a cluster file with the same SHA-256
as this process's (each server authenticates its peers with the keys of its
own copy; these reports cross the unauthenticated control plane, so the
check catches an operator's mistake, not an attacker); then S1, S2, T1, T2
are the servers' CPU devices and the client is this process's. The protocols are the same as in
the embedded mode: TF's distributed runtime carries every Send/Recv between
devices, worker to worker (shares and protocol messages never pass through
the driver; tests/test_distributed.py measures it).

Failures are bounded: with GRPC_FAIL_FAST a call to a dead server fails at
once, and gRPC keepalive drops a hung one within about half the timeout
(cluster_file.grpc_environment); every tp op then probes the servers (for at
most a quarter of it) and raises a `ServerError` naming the one that is down,
hung or restarted.

TensorFlow 2.14 cannot disconnect a process from a cluster nor stop the
driver's own gRPC server: after `tp.reset()` this process can connect again
(`tp.init(cluster=...)`, e.g. after a server restart), but the embedded mode
needs a fresh process.

Example:
  >>> tp.init(cluster="cluster.json", timeout=10)
  >>> tp.servers()["T1"]
  '/job:t1/replica:0/task:0/device:CPU:0'
  >>> tp.check_servers()
  {'S1': '127.0.0.1:40001', 'S2': '127.0.0.1:40002', 'T1': ..., 'T2': ...}
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, Mapping, Optional

import tensorflow as tf
from tensorflow.python.eager import context as tf_context

from tf_privpy.deploy import cluster_file as cf
from tf_privpy.deploy.cluster_file import ClusterError
from tf_privpy.protocols.mpc.runtime import context, keying
from tf_privpy.protocols.mpc.runtime.context import RuntimeError_

__all__ = ["ClusterError", "ServerError", "check_servers", "connect", "joined"]


class ServerError(RuntimeError_):
    """A server of the cluster does not answer, answers wrongly, or restarted.

    Attributes:
      server: the first such party ("T1"); problems: party -> what is wrong.
    """

    def __init__(self, message: str, problems: Mapping[str, str]):
        super().__init__(message)
        self.problems = dict(problems)
        self.server = next(iter(self.problems))


@dataclasses.dataclass
class _Connection:
    cluster: cf.Cluster
    timeout: float
    tasks: Dict[str, str]  # the cluster's tasks, with the client's address
    incarnations: Dict[str, int]  # per role: changes when a server restarts
    identities: Dict[str, dict]


_conn: Optional[_Connection] = None
_joined = False  # this process has joined a cluster: TF cannot undo it
_local_client: Optional[str] = None  # the client address we picked, kept for reconnects


def joined() -> bool:
    """Whether this process ever connected to a cluster (then the embedded
    mode's logical devices are out of reach: it needs a fresh process)."""
    return _joined


def connection() -> Optional[_Connection]:
    return _conn


def _where(role: str, tasks: Mapping[str, str]) -> str:
    return f"{cf.party(role)} (job {role} at {tasks[role]})"


def _server_error(problems: Mapping[str, str], tasks: Mapping[str, str], hint: str,
                  cause: Optional[BaseException] = None) -> ServerError:
    lines = [f"tf_privpy server {_where(r, tasks)} {p}" for r, p in problems.items()]
    msg = "\n".join(lines + [hint])
    if cause is not None:
        first = str(getattr(cause, "message", cause)).strip().splitlines()
        msg += "\nTensorFlow reported: " + (first[0] if first else type(cause).__name__)
    return ServerError(msg, {cf.party(r): p for r, p in problems.items()})


def _rerun_hint(path: Optional[str]) -> str:
    return (f"What was running stopped. Restart the server, then call "
            f"tp.init(cluster={path or 'PATH'!r}) again (new keys: PrivateTensors of the old "
            "runtime cannot be used).")


def _diagnose(conn: _Connection, deadline: float,
              cause: Optional[BaseException] = None) -> Optional[ServerError]:
    """Probes every server; a ServerError for those down, wrong or restarted."""
    problems = {}
    for role, p in cf.probe_all(conn.cluster.servers, deadline).items():
        problem = cf.probe_problem(p)
        if problem is None and p.incarnation != conn.incarnations.get(role, p.incarnation):
            problem = ("restarted since tp.init(): it is a new process, without this runtime's "
                       "keys, counters and shares")
        if problem:
            problems[role] = problem
    if not problems:
        return None
    return _server_error(problems, conn.tasks, _rerun_hint(conn.cluster.path), cause)


# A remote op that fails leaves its error in the server's (asynchronous) eager
# executor, which then fails the next op enqueued there with the same error
# (TensorFlow's context.clear_executor_errors says so): an error a user
# catches, say tp.load of a name not uploaded yet, would fail the next op on
# that server. Cleared only when every server answers: the call waits for
# each server's pending ops.
def clear_remote_errors() -> None:
    """After a failed op on the servers (tp.load, tp.publish): lets the next
    op run. Nothing to do when not connected (the embedded executors are
    synchronous)."""
    conn = _conn
    if conn is not None and _diagnose(conn, conn.timeout / 4) is None:
        tf_context.context().clear_executor_errors()


def _translate(error: BaseException) -> BaseException:
    """Installed as the protocol layer's error translator while connected: a
    TF error of a tp op becomes a ServerError when a server is at fault.
    Probes take at most timeout/4 (a dead server refuses at once)."""
    conn = _conn
    if conn is None or getattr(error, "_tp_diagnosed", False):
        return error
    try:
        error._tp_diagnosed = True  # nested tp ops: probe once per error
    except AttributeError:
        pass
    diagnosed = _diagnose(conn, conn.timeout / 4, error)
    if diagnosed is None:  # the servers answer: the error is the op's own
        tf_context.context().clear_executor_errors()
    return diagnosed or error


def _remote_identity(role: str) -> dict:
    """The build the server process of `role` reports, from a remote op run
    in that process (tf_privpy/deploy/server.py registers the function)."""
    with tf.device(cf.device(role)):
        out = tf.raw_ops.EagerPyFunc(input=[], token=cf.IDENTITY_TOKEN, Tout=[tf.string])
    return json.loads(out[0].numpy().decode())


def connect(path: str, timeout: Optional[float] = None,
            allow_public_address: bool = False) -> Dict[str, str]:
    """Connects this process to the cluster of `path` and checks it; returns
    the devices map for the Runtime (tp.init(cluster=...) calls this).

    Raises ClusterError for a bad or unsafe cluster file, ServerError naming
    the server that does not answer or runs another build.
    """
    global _conn, _joined, _local_client
    cluster = cf.load(path)
    timeout = cluster.timeout_s if timeout is None else float(timeout)
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    cf.check_addresses(cluster, allow_public_address, "allow_public_address=True")
    mine = cf.library_identity()
    if cluster.library is not None:
        diff = cf.identity_mismatch(cluster.library, mine)
        if diff:
            raise ClusterError(
                f"{cluster.path} was made for {cf.describe_identity(cluster.library)}, but this "
                f"driver runs {cf.describe_identity(mine)} ({diff}). Every machine, the driver's "
                "included, needs the same tf_privpy build.")
    missing = [r for r in cf.ROLES if r not in cluster.identity]
    if missing:
        raise ClusterError(
            f"{cluster.path} names no identity key for {', '.join(missing)}: the servers' "
            "pair keys are made by an authenticated exchange between their identity keys. "
            "Make a key on each server's machine (python -m tf_privpy.cluster keygen --out "
            "ROLE.key) and give the public halves to python -m tf_privpy.cluster new "
            "(--s1_key HEX ...); python -m tf_privpy.cluster local makes them itself.")
    tasks = dict(cluster.tasks)
    if cf.CLIENT_JOB not in tasks:
        if not cf.all_loopback(cluster):
            raise ClusterError(
                f"{cluster.path} has no 'client' task: the servers fetch the driver's inputs "
                "from it, so give the driver's host:port on the servers' network (e.g. "
                "\"client\": \"10.0.0.10:7100\").")
        # TF keeps this process's gRPC server (and its port) once joined
        tasks[cf.CLIENT_JOB] = _local_client or f"127.0.0.1:{cf.free_port()}"
    conn = _Connection(cluster, timeout, tasks, {}, {})
    _conn = None
    context.set_error_translator(None)

    # Before TF creates its gRPC channels: fail fast, keepalive from timeout.
    os.environ.update(cf.grpc_environment(timeout))
    probes = cf.probe_all(cluster.servers, timeout)
    problems = {r: cf.probe_problem(p) for r, p in probes.items() if cf.probe_problem(p)}
    if problems:
        raise _server_error(problems, tasks, (
            "tp.init() checked every server before connecting: start the missing ones "
            f"(python -m tf_privpy.server --role ROLE --cluster {cluster.path}) or fix the "
            "cluster file."))
    conn.incarnations = {r: p.incarnation for r, p in probes.items()}

    spec = tf.train.ClusterSpec({job: [addr] for job, addr in tasks.items()})
    # Soft placement would let TF move an op it cannot run where a protocol
    # put it (a kernel missing on a server) to another device, the client's
    # included: refuse instead. Set before connecting, so that the session
    # config sent to the servers says so too.
    tf.config.set_soft_device_placement(False)
    _joined = True
    if cf.CLIENT_JOB not in cluster.tasks:
        _local_client = tasks[cf.CLIENT_JOB]
    asking = None
    try:
        tf.config.experimental_connect_to_cluster(
            spec, job_name=cf.CLIENT_JOB, task_index=0, protocol="grpc",
            make_master_device_default=False)  # unplaced ops stay on the client
        for asking in cf.ROLES:
            conn.identities[asking] = _remote_identity(asking)
    except tf.errors.OpError as e:
        if asking and "callback" in str(e) and cf.IDENTITY_TOKEN in str(e):
            raise _server_error({asking: "is a TensorFlow server but not a tf_privpy server "
                                         "(start it with python -m tf_privpy.server)"},
                                tasks, "tp.init() refused the cluster.") from None
        raise _diagnose(conn, timeout, e) or ClusterError(
            f"could not connect to the cluster of {cluster.path}: {e}") from e
    wrong = {}
    for role, ident in conn.identities.items():
        diff = cf.identity_mismatch(mine, ident)
        if ident.get("role") != role:
            wrong[role] = f"reports role {ident.get('role')!r}"
        elif ident.get("cluster_sha256") != cluster.sha256:
            wrong[role] = (
                f"runs with another cluster file (sha256 {ident.get('cluster_sha256')}; "
                f"this driver's {cluster.path} has sha256 {cluster.sha256}): each server "
                "authenticates its peers with the keys of its own copy, so copy the same "
                "cluster file to every machine (the driver's included; compare with "
                "sha256sum) and restart that server")
        elif diff:
            wrong[role] = (f"runs {cf.describe_identity(ident)}, this driver "
                           f"{cf.describe_identity(mine)} ({diff}): install the same tf_privpy "
                           "build on every machine")
        else:
            problem = _identity_key_problem(role, ident, cluster)
            if problem:
                wrong[role] = problem
    if wrong:
        raise _server_error(wrong, tasks, "tp.init() refused the cluster.")
    _conn = conn
    context.set_error_translator(_translate)
    devices = {cf.CLIENT_JOB: cf.device(cf.CLIENT_JOB)}
    devices.update({cf.party(r): cf.device(r) for r in cf.ROLES})
    return devices


def _identity_key_problem(role: str, ident: Mapping[str, str],
                          cluster: cf.Cluster) -> Optional[str]:
    """Why the identity key the server of `role` reports is not the one the
    cluster file names (None if it is): a diagnosis for the operator, not a
    security check (the report crosses the unauthenticated control plane).
    The exchange itself proves the server holds the private key
    (protocols/mpc/runtime/keying.py)."""
    named = cluster.identity.get(role)
    got = ident.get("identity_public")
    if not got:
        return ("reports no identity key: it runs a tf_privpy server without one (start it "
                "with --identity_key)")
    if got != named:
        return (f"holds the identity key {got[:16]}... (file {ident.get('identity_key')} on "
                f"its machine), but {cluster.path} names {named[:16]}... for {role}: start "
                "it with the key file the cluster file was made with, or put this key's "
                "public half into the cluster file")
    return None


def server_keys() -> Dict[str, bytes]:
    """party -> the identity public key the driver authenticates that
    server with: its own cluster file's. (Each server authenticates its
    peers with its own copy, which tp.init checked is the same file.)"""
    conn = _conn
    if conn is None:
        raise RuntimeError_("not connected to a cluster")
    return {cf.party(r): bytes.fromhex(conn.cluster.identity[r]) for r in cf.ROLES}


def key_exchange_error(e: keying.KeyExchangeError) -> ServerError:
    """The ServerError of a failed key confirmation, naming the servers."""
    conn = _conn
    tasks = conn.tasks if conn else {}
    parties = sorted({p for pair in e.pairs for p in pair},
                     key=lambda p: -sum(p in pair for pair in e.pairs))
    if not tasks:
        return ServerError(str(e), {p: "failed the authenticated key exchange"
                                    for p in parties})
    return _server_error({p.lower(): "failed the authenticated key exchange"
                          for p in parties}, tasks, str(e))


def disconnect() -> None:
    """Forgets the connection (tp.reset); the process stays joined to the
    cluster as far as TensorFlow is concerned."""
    global _conn
    _conn = None
    context.set_error_translator(None)


def check_servers(timeout: Optional[float] = None) -> Dict[str, str]:
    """Probes the four servers of the connected cluster.

    Returns {party: address} if every one answers as itself and has not
    restarted since tp.init(); raises ServerError naming those that do not.

    Example:
      >>> tp.init(cluster="cluster.json")
      >>> sorted(tp.check_servers())
      ['S1', 'S2', 'T1', 'T2']
    """
    conn = _conn
    if conn is None:
        raise RuntimeError_("tp.check_servers() needs a distributed runtime: "
                            "tp.init(cluster=PATH)")
    err = _diagnose(conn, conn.timeout if timeout is None else float(timeout))
    if err is not None:
        raise err
    return {cf.party(r): a for r, a in conn.cluster.servers.items()}
