"""Cluster tools: four local servers, cluster files, a pre-flight check.

    python -m tf_privpy.cluster local --out cluster.json
        Starts S1, S2, T1, T2 as subprocesses on free loopback ports, waits
        until all four answer, writes cluster.json (only then) and runs until
        Ctrl-C or SIGTERM, which stop all four; if one dies, it stops the
        others and exits 1 with that server's stderr. Connect a driver with
        tp.init(cluster="cluster.json").
    python -m tf_privpy.cluster keygen --out s1.key
        On a server's machine: makes its long-term identity key (X25519, file
        mode 0600) and prints the public key for the cluster file.
    python -m tf_privpy.cluster new --out cluster.json --s1 10.0.0.11:7101 \\
        --s2 10.0.0.12:7102 --t1 10.0.0.13:7103 --t2 10.0.0.14:7104 --client 10.0.0.10:7100 \\
        --s1_key HEX --s2_key HEX --t1_key HEX --t2_key HEX
        Writes a cluster file for four machines, recording this machine's
        tf_privpy build (every machine must run the same) and the servers'
        identity public keys (from keygen on each machine).
        With --certs DIR (and --s1_share/--s2_share HOST:PORT for the share
        services): also makes the cluster CA in DIR/ca and lays out DIR/s1,
        DIR/s2 (each server's share-service folder) and DIR/owner (what an
        owner starts from), and prints which machine each goes to.
    Key custody (docs/share_service.md): every private key is made on the
    machine that uses it.
    python -m tf_privpy.cluster server-key --role s1 --certs s1
        On S1's (S2's) machine: its TLS key s1/s1.key and request s1/s1.csr.
    python -m tf_privpy.cluster sign-server s1.csr --role s1 --certs ca [--cluster cluster.json]
        On the CA machine: s1.pem for the request (hosts from the cluster file
        or --host); copy it back into S1's folder.
    python -m tf_privpy.cluster owner-key NAME --certs DIR [--ca ca.pem] [--cluster cluster.json]
        On a data owner's machine: its key and self-signed client certificate
        in DIR, and DIR/NAME.json, its settings for tp.client; prints the key
        fingerprint the owner reads to each server's operator.
    python -m tf_privpy.cluster enrol NAME.pem --certs s1 --fingerprint HEX
        On S1's (S2's) machine: lets that owner log in there; `revoke NAME
        --certs s1` removes it again.
    python -m tf_privpy.cluster issue-cert NAME --certs DIR
        Only for `local`'s one-machine tree: owner-key in DIR/owners/NAME plus
        enrol with both servers.
    python -m tf_privpy.cluster check --cluster cluster.json
        From the driver's machine: connects, checks that every server answers
        as its role and runs this build, and prints them.

The Python API of `local` is LocalCluster (tests use it):

    >>> with LocalCluster("cluster.json") as c:
    ...     subprocess.run([sys.executable, "my_driver.py", c.path], check=True)
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Mapping, Optional, Tuple

from absl import app, flags, logging

from tf_privpy.deploy import cluster_file as cf
from tf_privpy.deploy.cluster_file import ClusterError
from tf_privpy.deploy.cluster_keys import (  # noqa: F401 - the key commands, re-exported
    lay_out_certs, run_enrol, run_issue_cert, run_owner_key, run_revoke, run_server_key,
    run_sign_server)

_READY = "tf_privpy server {role} ready on "


def make_identity_key(path: str, overwrite: bool = False) -> str:
    """Makes a server's identity key file at `path` (X25519, mode 0600; run
    it on that server's machine) and returns its public key in hex, for the
    cluster file's "identity" map. Refuses to replace a file unless told."""
    from tf_privpy.protocols.mpc.runtime import identity
    return identity.generate_identity_key_file(path, overwrite=overwrite).public_hex


def _source_root() -> str:
    """The directory holding the tf_privpy package, for the servers'
    PYTHONPATH (a source checkout is not installed)."""
    import tf_privpy
    return os.path.dirname(os.path.dirname(os.path.abspath(tf_privpy.__file__)))


def _free_ports(n: int) -> Tuple[int, ...]:
    # held open together so that the n ports differ
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("0.0.0.0", 0))  # TF servers listen on every interface
        return tuple(s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


class LocalCluster:
    """The four tf_privpy servers as subprocesses of this process, on loopback.

    Args:
      out: where to write the cluster file once every server answers (default:
        cluster.json in the log directory); removed again by stop().
      timeout_s: the cluster's failure-detection timeout (cluster file).
      start_timeout_s: how long the four may take to answer.
      env: extra environment for every server; restart(role, env=...) can
        give one server its own.
      keep_logs: keep the log directory (each server's stdout and stderr).
      share_services: also run S1's and S2's share services (TLS) beside
        their TF servers, with stores under the log directory (stores/s1,
        stores/s2) and every key folder in the one-machine tree cert_dir
        (ca.local_tree: ca/, s1/, s2/, owners/NAME/; made when missing;
        default: certs/ in the log directory; each server gets only its own
        folder); the cluster file names their addresses.
      large_arrays: give S1 and S2 each its own tp.LargeArray folder under
        the log directory (large/s1, large/s2; --large_array_dir).

    Example:
      >>> c = LocalCluster(timeout_s=10).start()
      >>> c.kill("t1"); c.restart("t1"); c.stop()
    """

    def __init__(self, out: Optional[str] = None, timeout_s: float = cf.DEFAULT_TIMEOUT_S,
                 start_timeout_s: float = 180.0, env: Optional[Mapping[str, str]] = None,
                 keep_logs: bool = False, host: str = "127.0.0.1",
                 share_services: bool = False, cert_dir: Optional[str] = None,
                 large_arrays: bool = False):
        self.out = out
        self.timeout_s = float(timeout_s)
        self.start_timeout_s = float(start_timeout_s)
        self.env = dict(env or {})
        self.keep_logs = keep_logs
        self.host = host
        self.log_dir = tempfile.mkdtemp(prefix="tf_privpy_cluster_")
        self.procs: Dict[str, subprocess.Popen] = {}
        self.cluster: Optional[cf.Cluster] = None
        self.path: Optional[str] = None
        self._server_file = os.path.join(self.log_dir, "servers.json")
        self._files = []
        self.share_services = share_services
        self.cert_dir = os.path.abspath(cert_dir or os.path.join(self.log_dir, "certs"))
        self.share_ports: Dict[str, int] = {}
        self.large_arrays = large_arrays

    def share_store(self, role: str) -> str:
        """The store folder of S1's or S2's share service."""
        return os.path.join(self.log_dir, "stores", role)

    def large_array_dir(self, role: str) -> str:
        """S1's or S2's folder of tp.LargeArray shares (large_arrays=True)."""
        return os.path.join(self.log_dir, "large", role)

    def owner_cluster(self, owner: str) -> dict:
        """A data owner's share-service settings (tp.client's cluster=...):
        its key made in its own folder (cert_dir/owners/NAME) and enrolled
        with S1 and S2, when missing."""
        from tf_privpy.deploy.service import ca
        paths = ca.local_owner(self.cert_dir, owner)
        return dict(paths, s1=f"{self.host}:{self.share_ports['s1']}",
                    s2=f"{self.host}:{self.share_ports['s2']}")

    # -------------------------------------------------------------- control
    def start(self) -> "LocalCluster":
        """Starts the four servers; returns once all answer (then the cluster
        file exists), or stops them and raises ClusterError naming the one
        that failed, with its stderr."""
        ports = _free_ports(len(cf.ROLES) + 2)
        services = {}
        if self.share_services:
            from tf_privpy.deploy.service import ca
            ca.local_tree(self.cert_dir)
            self.share_ports = dict(zip(("s1", "s2"), ports[len(cf.ROLES):]))
            services = {r: f"{self.host}:{p}" for r, p in self.share_ports.items()}
        from tf_privpy.protocols.mpc.runtime import identity
        from tf_privpy.deploy.server import default_identity_key
        keys = {}  # each server's identity key, beside the file it reads
        for role in cf.ROLES:
            path = default_identity_key(self._server_file, role)
            keys[role] = (identity.read_identity_key_file(path).public_hex
                          if os.path.exists(path) else make_identity_key(path))
        self.cluster = cf.Cluster(
            tasks={r: f"{self.host}:{p}" for r, p in zip(cf.ROLES, ports)},
            library=cf.library_identity(), timeout_s=self.timeout_s, identity=keys,
            share_services=services)
        self.cluster.save(self._server_file)  # what the servers read
        try:
            for role in cf.ROLES:
                self._spawn(role, self.env)
            self._wait_ready(cf.ROLES)
        except BaseException:
            self.stop()
            raise
        self.path = self.cluster.save(self.out or os.path.join(self.log_dir, "cluster.json"))
        self.cluster = cf.load(self.path)
        return self

    def stop(self) -> None:
        """Stops every server (SIGTERM, then SIGKILL after 5 s) and removes the
        cluster file (it would name servers that no longer run)."""
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)  # a stopped process cannot exit
                    p.terminate()
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in self._files:
            f.close()
        self._files = []
        if self.path and os.path.exists(self.path):
            os.remove(self.path)
        self.path = None
        if not self.keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def kill(self, role: str, sig: int = signal.SIGKILL) -> None:
        """Sends `sig` to a server (SIGKILL: a crash; SIGSTOP: a hang)."""
        p = self.procs[role]
        os.kill(p.pid, sig)
        if sig == signal.SIGKILL:
            p.wait()

    def restart(self, role: str, env: Optional[Mapping[str, str]] = None) -> None:
        """(Re)starts one server on its port and waits until it answers; `env`
        replaces the cluster's extra environment for it."""
        p = self.procs.get(role)
        if p is not None and p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            self.kill(role)
        self._spawn(role, self.env if env is None else env)
        self._wait_ready((role,))  # raises naming it; the other servers keep running

    def poll(self) -> Optional[Tuple[str, int]]:
        """(role, exit code) of the first server that is no longer running."""
        for role, p in self.procs.items():
            if p.poll() is not None:
                return role, p.returncode
        return None

    def stderr_tail(self, role: str, lines: int = 20) -> str:
        path = os.path.join(self.log_dir, f"{role}.err")
        try:
            with open(path, errors="replace") as f:
                return "".join(f.readlines()[-lines:]).rstrip()
        except OSError:
            return ""

    @property
    def pids(self) -> Dict[str, int]:
        return {r: p.pid for r, p in self.procs.items()}

    def __enter__(self) -> "LocalCluster":
        return self if self.path else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------- internals
    def _spawn(self, role: str, extra_env: Mapping[str, str]) -> None:
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        root = _source_root()
        env["PYTHONPATH"] = os.pathsep.join(
            [root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.update(extra_env)
        out = open(os.path.join(self.log_dir, f"{role}.out"), "wb")
        err = open(os.path.join(self.log_dir, f"{role}.err"), "wb")
        self._files += [out, err]
        share = []
        if self.large_arrays and role in ("s1", "s2"):
            share += ["--large_array_dir", self.large_array_dir(role)]
        if role in self.share_ports:
            share += ["--share_port", str(self.share_ports[role]),
                     "--cert_dir", os.path.join(self.cert_dir, role),
                     "--share_store", self.share_store(role)]
        self.procs[role] = subprocess.Popen(
            [sys.executable, "-m", "tf_privpy.server", "--role", role,
             "--cluster", self._server_file, "--exit_with_parent"] + share,
            stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
            start_new_session=True)  # Ctrl-C reaches us; we stop them in order

    def _ready_line(self, role: str) -> bool:
        try:
            with open(os.path.join(self.log_dir, f"{role}.out"), errors="replace") as f:
                return any(line.startswith(_READY.format(role=role)) for line in f)
        except OSError:
            return False

    def _wait_ready(self, roles) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        pending = list(roles)
        while pending:
            for role in list(pending):
                p = self.procs[role]
                if p.poll() is not None:
                    raise ClusterError(
                        f"server {role} {_exit_status(p.returncode)} while starting. "
                        f"Its stderr ends with:\n{self.stderr_tail(role)}")
                if self._ready_line(role):
                    probe = cf.probe(role, self.cluster.tasks[role], 5.0)
                    if cf.probe_problem(probe) is None:
                        pending.remove(role)
            if pending and time.monotonic() > deadline:
                role = pending[0]
                raise ClusterError(
                    f"server {role} did not answer within {self.start_timeout_s:.0f} s (still "
                    f"waiting for {', '.join(pending)}). Its stderr ends with:\n"
                    f"{self.stderr_tail(role) or '(nothing)'}")
            if pending:
                time.sleep(0.2)


# ------------------------------------------------------------------ the CLI
def _define_flags() -> None:
    flags.DEFINE_string("out", "cluster.json",
                        "local, new: the cluster file to write; keygen: the key file.")
    flags.DEFINE_string("cluster", "cluster.json", "check: the cluster file to check.")
    flags.DEFINE_float("timeout_s", cf.DEFAULT_TIMEOUT_S,
                       "local, new: seconds within which a dead or hung server is reported.")
    flags.DEFINE_float("start_timeout_s", 180.0, "local: how long the servers may take to start.")
    flags.DEFINE_bool("keep_logs", False, "local: keep the servers' logs after stopping.")
    flags.DEFINE_bool("allow_public_address", False,
                      "new, check: accept public addresses (TF's gRPC has no TLS).")
    for role in cf.ROLES + (cf.CLIENT_JOB,):
        flags.DEFINE_string(role, None, f"new: host:port of {cf.party(role)}'s TF task.")
    for role in cf.ROLES:
        flags.DEFINE_string(f"{role}_key", None,
                            f"new: {cf.party(role)}'s identity public key (64 hex digits, "
                            "printed by keygen on its machine).")
    flags.DEFINE_bool("overwrite", False, "keygen, server-key, owner-key: replace an existing "
                      "key file; enrol: replace the key enrolled under that name.")
    flags.DEFINE_bool("share_services", True, "local: also run S1's and S2's share services.")
    flags.DEFINE_string("certs", None, "The key folder a command works on: server-key, enrol, "
                        "revoke: this server's folder; sign-server: the CA's; owner-key: the "
                        "owner's; new: where to lay out the CA's and the servers' folders; "
                        "local, issue-cert: the one-machine tree (local: default certs/ in "
                        "its log directory).")
    flags.DEFINE_enum("role", None, ["s1", "s2"], "server-key, sign-server: which server.")
    flags.DEFINE_string("fingerprint", None, "enrol: the owner's key fingerprint, as the owner "
                        "read it to you (not from the message that brought the certificate).")
    flags.DEFINE_multi_string("host", [], "sign-server: a DNS name or IP address of the server "
                              "(repeat; default: from --cluster, else loopback).")
    flags.DEFINE_string("ca", None, "owner-key: the cluster's ca.pem, copied into the owner's "
                        "folder.")
    for role in ("s1", "s2"):
        flags.DEFINE_string(f"{role}_share", None, f"new: host:port of {role.upper()}'s share "
                            "service.")


def _exit_status(code: int) -> str:
    return (f"was killed by {signal.Signals(-code).name}" if code < 0
            else f"exited with code {code}")


def _say(msg: str) -> None:
    print(f"tf_privpy cluster: {msg}", file=sys.stderr, flush=True)


def run_local(out: str, timeout_s: float, start_timeout_s: float, keep_logs: bool,
              share_services: bool = True, cert_dir: Optional[str] = None) -> int:
    """`local`: start, wait for all four, write the file, run until stopped."""
    def on_signal(signum, _frame):
        raise KeyboardInterrupt
    # also SIGINT: a shell starts background jobs with it ignored
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    c = LocalCluster(out, timeout_s, start_timeout_s, keep_logs=keep_logs,
                     share_services=share_services, cert_dir=cert_dir)
    try:
        _say(f"starting S1, S2, T1, T2 (logs in {c.log_dir})")
        c.start()
        where = ", ".join(f"{cf.party(r)} {a} (pid {c.pids[r]})"
                          for r, a in c.cluster.servers.items())
        if c.share_ports:
            where += (f"; share services S1 {c.cluster.share_services['s1']}, S2 "
                      f"{c.cluster.share_services['s2']} (owners: python -m "
                      f"tf_privpy.cluster issue-cert NAME --certs {c.cert_dir})")
            _say(f"NOTE: {c.cert_dir} holds the CA's, both servers' and the owners' keys on "
                 "this one machine. This layout is for trying things, not key custody: with "
                 "real machines each key is made where it is used (docs/share_service.md)")
        print(f"tf_privpy cluster ready: {where}\ncluster file: {c.path}\nconnect with "
              f"tp.init(cluster={c.path!r}); Ctrl-C stops the servers", flush=True)
        while True:
            dead = c.poll()
            if dead:
                role, code = dead
                _say(f"server {role} {_exit_status(code)}; stopping the others. Its stderr "
                     f"ends with:\n{c.stderr_tail(role)}")
                return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        _say("stopping the four servers")
        return 0
    except ClusterError as e:
        _say(f"error: {e}")
        return 1
    finally:
        # a second Ctrl-C must not leave servers or a stale cluster file behind
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        c.stop()


def run_keygen(out: str, overwrite: bool) -> int:
    """`keygen`: an identity key file here; prints its public key."""
    from tf_privpy.protocols.mpc.runtime import identity
    try:
        key = identity.generate_identity_key_file(out, overwrite=overwrite)
    except (OSError, identity.IdentityKeyError) as e:
        _say(f"error: {e}")
        return 1
    print(f"wrote the identity key {os.path.abspath(out)} (mode 0600: keep it on this "
          f"machine only). Its public key, for the cluster file:\n{key.public_hex}")
    return 0


def run_new(out: str, tasks: Mapping[str, Optional[str]], keys: Mapping[str, Optional[str]],
            timeout_s: float, allow_public: bool, certs: Optional[str] = None,
            share: Optional[Mapping[str, Optional[str]]] = None) -> int:
    """`new`: a cluster file for four machines, with this machine's build."""
    missing = [r for r in cf.ROLES if not tasks.get(r)]
    if missing:
        _say(f"error: give --{' --'.join(missing)} (host:port of each server)")
        return 2
    missing = [r for r in cf.ROLES if not keys.get(r)]
    if missing:
        _say(f"error: give --{'_key --'.join(missing)}_key (the public key that python -m "
             "tf_privpy.cluster keygen printed on each server's machine)")
        return 2
    obj = {"version": cf.FORMAT_VERSION, "tasks": {r: a for r, a in tasks.items() if a},
           "library": cf.library_identity(), "timeout_s": timeout_s,
           "identity": {r: keys[r].strip().lower() for r in cf.ROLES}}
    share = {r: a for r, a in (share or {}).items() if a}
    if share:
        obj["share_services"] = share
    cluster = cf.from_json(obj, "the given addresses")
    cf.check_addresses(cluster, allow_public, "--allow_public_address")
    path = cluster.save(out)
    print(f"wrote {path} for {cf.describe_identity(cluster.library)}; copy it to the four "
          "servers and the driver")
    if certs:
        return lay_out_certs(certs, path)
    return 0


def run_check(path: str, allow_public: bool) -> int:
    """`check`: connect as a driver would, report each server."""
    from tf_privpy import distributed
    try:
        distributed.connect(path, allow_public_address=allow_public)
    except distributed.ServerError as e:
        _say(f"error: {e}")
        return 1
    conn = distributed.connection()
    for role in cf.ROLES:
        ident = conn.identities[role]
        print(f"{cf.party(role)} {conn.cluster.tasks[role]}: pid {ident.get('pid')}, "
              f"{cf.describe_identity(ident)}")
    print("all four servers answer and run this driver's build")
    return 0


def main(argv) -> None:
    F = flags.FLAGS
    logging.set_verbosity(logging.WARNING)  # TF's connect logs its session config at INFO
    named = ("issue-cert", "revoke", "owner-key", "enrol", "sign-server")
    plain = ("local", "keygen", "new", "check", "server-key")
    if len(argv) < 2 or argv[1] not in plain + named \
            or len(argv) != (3 if argv[1] in named else 2):
        _say("usage: python -m tf_privpy.cluster {local|keygen|new|check|server-key|"
             "sign-server ROLE.csr|owner-key NAME|enrol NAME.pem|revoke NAME|issue-cert NAME} "
             "[flags] (--help)")
        sys.exit(2)
    if (argv[1] in named or argv[1] == "server-key") and not F.certs:
        _say(f"error: {argv[1]} needs --certs DIR (the key folder it works on: see --help)")
        sys.exit(2)
    try:
        cluster_given = F.cluster if F["cluster"].present else None
        if argv[1] == "issue-cert":
            code = run_issue_cert(argv[2], F.certs, cluster_given)
        elif argv[1] == "revoke":
            code = run_revoke(argv[2], F.certs)
        elif argv[1] == "owner-key":
            code = run_owner_key(argv[2], F.certs, F.ca, cluster_given, F.overwrite)
        elif argv[1] == "enrol":
            code = run_enrol(argv[2], F.certs, F.fingerprint, F.overwrite)
        elif argv[1] == "server-key":
            code = run_server_key(F.role, F.certs, F.overwrite)
        elif argv[1] == "sign-server":
            code = run_sign_server(argv[2], F.role, F.certs, F.host, cluster_given)
        elif argv[1] == "local":
            code = run_local(F.out, F.timeout_s, F.start_timeout_s, F.keep_logs,
                             F.share_services, F.certs)
        elif argv[1] == "keygen":
            code = run_keygen(F.out, F.overwrite)
        elif argv[1] == "new":
            code = run_new(F.out, {r: getattr(F, r) for r in cf.ROLES + (cf.CLIENT_JOB,)},
                           {r: getattr(F, f"{r}_key") for r in cf.ROLES},
                           F.timeout_s, F.allow_public_address, F.certs,
                           {r: getattr(F, f"{r}_share") for r in ("s1", "s2")})
        else:
            code = run_check(F.cluster, F.allow_public_address)
    except ClusterError as e:
        _say(f"error: {e}")
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    # `check` joined a cluster: TF 2.14 cannot tear that down, so skip its
    # atexit work (which can wait on gRPC threads).
    os._exit(code)


def run() -> None:
    """Command-line entry point (python -m tf_privpy.cluster)."""
    _define_flags()
    app.run(main)


if __name__ == "__main__":
    run()
