"""One tf_privpy server process: S1, S2, T1 or T2 of a distributed deployment.

    python -m tf_privpy.server --role s1 --cluster cluster.json

Loads the op library (its kernels must be registered in this process: the
driver only sends graphs and ops), checks the cluster file (addresses private,
the same tf_privpy build), starts a `tf.distribute.Server` for its task,
prints one ready line and serves until SIGINT or SIGTERM:

    tf_privpy server s1 ready on 127.0.0.1:7101 (tf_privpy 0.1.0, ops library 3f2a9c0d1e4b,
    cluster file sha256 9b1c...64 hex digits)

(one line). The cluster file's SHA-256 is that of this server's own copy:
every machine must have the same file (compare with `sha256sum`), and
tp.init refuses a server whose hash differs from that of the driver's file.
The server authenticates its peers in the key exchange with the public keys
of its own copy, served to the exchange's ops by a function registered in
this process (protocols/mpc/runtime/keying.py, register_server_keys), never with
keys from the driver's graph.

Exit codes: 0 after a signal, 2 for a bad flag or cluster file, 1 if the
server could not start.

TensorFlow 2.14 listens on every interface of the machine (its gRPC server
binds 0.0.0.0:PORT whatever host the cluster file gives), so the host in the
file only decides which network the peers use; the port must be firewalled on
the other interfaces. The server says so at start when the machine has any.
See docs/distributed.md.
"""
from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import signal
import socket
import sys
import time
from typing import List, Optional

from absl import app, flags

from tf_privpy.deploy import cluster_file as cf

#: test hook: "VERSION:SHA256" reported instead of the real build, to test
#: that the driver refuses a server running another build
FAKE_IDENTITY_ENV = "TF_PRIVPY_TESTONLY_REPORTED_LIBRARY"
#: test hook: a public key (hex) reported instead of the identity key file's,
#: to test that the key exchange itself catches a server that claims a key it
#: does not hold
FAKE_PUBLIC_KEY_ENV = "TF_PRIVPY_TESTONLY_REPORTED_PUBLIC_KEY"


def default_identity_key(cluster_path: str, role: str) -> str:
    """Where a server looks for its identity key by default: ROLE.key beside
    the cluster file."""
    return os.path.join(os.path.dirname(os.path.abspath(cluster_path)), f"{role}.key")


def _identity_public(path: str, role: str, cluster: "cf.Cluster") -> str:
    """The public key (hex) of this server's identity key file, read by the
    kernel (mode 0600 enforced); a missing or bad file stops the server."""
    import tensorflow as tf
    from tf_privpy.protocols.mpc.runtime import kernels
    if not os.path.exists(path):
        raise StartError(
            f"no identity key at {path}. Make one on this machine with python -m "
            f"tf_privpy.cluster keygen --out {path} and put the public key it prints into "
            f"the cluster file (--{role}_key of python -m tf_privpy.cluster new), or give "
            "--identity_key PATH.")
    try:
        with tf.device("/device:CPU:0"):
            _, public = kernels.x25519_read_private_key(tf.constant(path))
    except tf.errors.OpError as e:
        raise StartError(f"cannot use the identity key {path}: {e.message}") from None
    hexed = public.numpy().tobytes().hex()
    named = cluster.identity.get(role)
    if named and named != hexed:
        print(f"tf_privpy server {role}: WARNING: the identity key {path} has the public key "
              f"{hexed[:16]}..., but the cluster file names {named[:16]}... for {role}: the "
              "driver will refuse this server", file=sys.stderr, flush=True)
    return hexed


class StartError(Exception):
    """The server cannot start; the message says why."""


def _fail(msg: str, code: int) -> None:
    role = flags.FLAGS.role if flags.FLAGS.is_parsed() else "?"
    print(f"tf_privpy server {role}: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def _check_local(host: str, port: int, role: str) -> None:
    """The host must be an address of this machine and the port free (TF's own
    errors for either are obscure: 'Could not start gRPC server')."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise StartError(f"cannot resolve {role}'s host {host!r}: {e}") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((addr[0], 0))  # fails for an address no interface here has
        except OSError:
            raise StartError(f"{role}'s address {host}:{port} is not an address of this "
                             "machine: run this server on the machine the cluster file "
                             "names, or fix the file") from None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))  # TF listens on all interfaces
        except OSError as e:
            raise StartError(f"port {port} of {role} is in use ({e.strerror}): stop what "
                             "uses it or give the server another port") from None


def exposed_addresses(host: str) -> List[str]:
    """This machine's interface addresses other than `host` (where TF's
    all-interfaces listener is reachable too); empty if psutil is missing."""
    try:
        import psutil
    except ImportError:
        return []
    own = {str(ip) for ip in cf._addresses_of(host)}
    out = []
    for ifname, addrs in psutil.net_if_addrs().items():
        for a in addrs:
            if a.family in (socket.AF_INET, socket.AF_INET6):
                ip = a.address.split("%")[0]
                if ip not in own and not ip.startswith("127.") and ip != "::1":
                    out.append(f"{ip} ({ifname})")
    return out


def _register_identity(role: str, identity: dict) -> None:
    """Lets the driver read this server's build with a remote op: an
    EagerPyFunc with IDENTITY_TOKEN runs this function in this process.

    tf.py_function keeps its Python functions in a registry keyed by token;
    we add one under a fixed token (TF 2.14's FuncRegistry, pinned by the
    loader), so the driver asks the process it actually talks to."""
    import tensorflow as tf
    from tensorflow.python.ops import script_ops
    report = json.dumps(dict(identity, role=role, pid=os.getpid()))

    def identity_fn():
        return tf.constant(report)

    _register_identity.keep = identity_fn  # the registry holds weak references
    registry = getattr(script_ops, "_py_funcs", None)
    if registry is None or not hasattr(registry, "_funcs"):
        raise StartError("this TensorFlow has no py_func registry where tf_privpy expects "
                         "it (TF 2.14): the driver could not check this server's build")
    registry._funcs[cf.IDENTITY_TOKEN] = identity_fn


def _start_share_service(role: str, host: str, port: int, cert_dir: Optional[str],
                         store_dir: Optional[str], ring_bits: int, limits=None):
    """S1's or S2's share service beside its TF server, in this process, and
    tp.load/tp.publish's functions on the same store. limits: the service's
    calls, deadlines and quotas (tf_privpy.deploy.service.limits.Limits; its
    defaults when None). Returns (grpc server, port)."""
    if role not in ("s1", "s2"):
        raise cf.ClusterError(f"--share_port: only S1 and S2 hold shares; {role} runs no "
                              "share service")
    if not cert_dir or not store_dir:
        raise cf.ClusterError("--share_port needs --cert_dir (this server's own key folder: "
                              f"python -m tf_privpy.cluster server-key --role {role}, "
                              "docs/share_service.md) and --share_store (where this server "
                              "keeps its shares)")
    from tf_privpy import share_io
    from tf_privpy.deploy.service import server as service
    from tf_privpy.deploy.service.store import StoreError
    try:
        svc, bound = service.serve(role, port, cert_dir, store_dir, host=host,
                                   ring_bits=ring_bits, limits=limits)
    except (OSError, RuntimeError, ValueError, StoreError) as e:  # ca.CAError: key custody refused
        raise StartError(f"cannot start the share service on {host}:{port}: {e}") from None
    share_io.attach_store(cf.party(role), store_dir)
    return svc, bound


def serve(role: str, path: str, allow_public: bool, exit_with_parent: bool,
          identity_key: Optional[str] = None, share_port: Optional[int] = None,
          cert_dir: Optional[str] = None, share_store: Optional[str] = None,
          share_ring_bits: int = 128, share_limits=None,
          large_array_dir: Optional[str] = None) -> int:
    cluster = cf.load(path)
    if role not in cf.ROLES:
        raise cf.ClusterError(f"--role must be one of {', '.join(cf.ROLES)}, got {role!r}")
    if share_port is None and (cert_dir or share_store):
        raise cf.ClusterError("--cert_dir and --share_store go with --share_port")
    if large_array_dir and role not in ("s1", "s2"):
        raise cf.ClusterError(f"--large_array_dir: only S1 and S2 hold shares; {role} keeps "
                              "no large arrays")
    cf.check_addresses(cluster, allow_public, "--allow_public_address")
    host, port = cf.parse_address(cluster.tasks[role])
    _check_local(host, port, role)
    identity = cf.library_identity()  # loads the op library: kernels for the driver's ops
    if cluster.library is not None:
        diff = cf.identity_mismatch(cluster.library, identity)
        if diff:
            raise cf.ClusterError(
                f"this machine runs {cf.describe_identity(identity)}, but {path} was made for "
                f"{cf.describe_identity(cluster.library)} ({diff}). Install the same tf_privpy "
                "build on every machine, or regenerate the cluster file.")
    key_path = os.path.abspath(identity_key or default_identity_key(path, role))
    missing = [r for r in cf.ROLES if r not in cluster.identity]
    if missing:
        raise cf.ClusterError(
            f"{path} names no identity key for {', '.join(missing)}: this server "
            "authenticates its peers in the key exchange with the public keys of its own "
            "cluster file. Use the cluster file made by python -m tf_privpy.cluster new "
            "(--s1_key HEX ...), the same on every machine.")
    reported = dict(identity, identity_key=key_path,
                    identity_public=_identity_public(key_path, role, cluster),
                    cluster_sha256=cluster.sha256)
    fake_public = os.environ.get(FAKE_PUBLIC_KEY_ENV)
    if fake_public:
        reported["identity_public"] = fake_public
        print(f"tf_privpy server {role}: TEST HOOK {FAKE_PUBLIC_KEY_ENV} set: reporting the "
              f"public key {fake_public[:16]}...", file=sys.stderr, flush=True)
    fake = os.environ.get(FAKE_IDENTITY_ENV)
    if fake:
        version, _, sha = fake.partition(":")
        reported = dict(reported, version=version, sha256=sha)
        print(f"tf_privpy server {role}: TEST HOOK {FAKE_IDENTITY_ENV} set: reporting "
              f"{cf.describe_identity(reported)}", file=sys.stderr, flush=True)
    os.environ.update(cf.grpc_environment(cluster.timeout_s))  # before TF makes channels

    import tensorflow as tf
    from tf_privpy.protocols.mpc.runtime import keying
    _register_identity(role, reported)
    # the key exchange's ops read this server's key path and trusted public
    # keys from here (its own flags and cluster file), not from the driver;
    # `serving_keys` keeps the function alive (the registry holds weak refs)
    try:
        serving_keys = keying.register_server_keys(  # noqa: F841
            cf.party(role), key_path,
            {cf.party(r): bytes.fromhex(cluster.identity[r]) for r in cf.ROLES})
    except ValueError as e:  # a small-order key in the file
        raise cf.ClusterError(f"{path}: {e}") from None
    except RuntimeError as e:
        raise StartError(str(e)) from None
    spec = tf.train.ClusterSpec({job: [addr] for job, addr in cluster.tasks.items()})
    try:
        server = tf.distribute.Server(spec, job_name=role, task_index=0, protocol="grpc",
                                      start=True)
    except Exception as e:  # TF raises assorted types here
        raise StartError(f"TensorFlow could not start the server: {e}") from None
    others = exposed_addresses(host)
    if others:
        public = [a for a in others if cf.address_kind(
            ipaddress.ip_address(a.split(" ")[0])) == "public"]
        print(f"tf_privpy server {role}: note: TensorFlow 2.14 listens on every interface "
              f"(port {port} on 0.0.0.0/[::]), not only on {host}; the port is also reachable "
              f"at {', '.join(others)}. Firewall it there (docs/distributed.md)."
              + (f" WARNING: {', '.join(public)} public." if public else ""),
              file=sys.stderr, flush=True)
    if large_array_dir:
        # this server's own folder of tp.LargeArray shares (tf_privpy/large/party.py)
        from tf_privpy.large import party as large_party
        try:
            large_party.attach_folder(cf.party(role), large_array_dir)
        except Exception as e:  # LargeArrayError, OSError: the folder is unusable
            raise StartError(f"--large_array_dir {large_array_dir}: {e}") from None
    share = None
    if share_port is not None:
        share = _start_share_service(role, host, share_port, cert_dir, share_store,
                                     share_ring_bits, share_limits)
        if large_array_dir:
            # LargeArray.from_store: this server copies its own share from
            # its store into its folder (tf_privpy/large/store_copy.py)
            from tf_privpy.large import store_copy
            store_copy.attach_copier(cf.party(role), share_store, large_array_dir)
    print(f"tf_privpy server {role} ready on {host}:{port} (tf_privpy {identity['version']}, "
          f"ops library {identity['sha256'][:12]}, cluster file sha256 {cluster.sha256})"
          + (f"; share service on {host}:{share[1]}" if share else ""), flush=True)

    got: list = []

    def on_signal(signum, _frame):
        # no lock here: see the share service's main() for why we poll
        got.append(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    parent = os.getppid()
    while not got:
        time.sleep(0.2)
        if exit_with_parent and os.getppid() != parent:
            got.append("its launcher exited")
    print(f"tf_privpy server {role} stopping ({got[0] if got else 'stop'})", file=sys.stderr,
          flush=True)
    if share is not None:
        share[0].stop(2).wait()
    del server
    return 0


def _define_flags() -> None:
    flags.DEFINE_enum("role", None, list(cf.ROLES), "Which server this process is.")
    flags.DEFINE_string("cluster", None, "The cluster file (JSON; see docs/distributed.md).")
    flags.DEFINE_bool("allow_public_address", False,
                      "Accept public addresses in the cluster file. TF's gRPC has no TLS: only "
                      "with an encrypted tunnel, and with the ports firewalled.")
    flags.DEFINE_bool("exit_with_parent", False,
                      "Exit when the launching process exits (python -m tf_privpy.cluster local "
                      "sets it, so no server outlives its launcher).")
    flags.DEFINE_string("identity_key", None,
                        "This server's identity key file (0600; python -m tf_privpy.cluster "
                        "keygen makes one). Default: ROLE.key beside the cluster file.")
    flags.DEFINE_integer("share_port", None,
                         "S1, S2: run this server's share service (TLS, client certificates) "
                         "on this port, beside the TF server; 0 picks a free one. Also "
                         "--share-port.")
    flags.DEFINE_string("cert_dir", None, "With --share_port: this server's own key folder "
                        "(ROLE.key and ROLE.pem, owners/ it enrolled, revoked.json; python -m "
                        "tf_privpy.cluster server-key). The server refuses to start when it "
                        "holds any other private key. Also --cert-dir.")
    flags.DEFINE_string("share_store", None, "With --share_port: the folder of this server's "
                        "share records (durable; tp.load and tp.publish use it). Also "
                        "--share-store.")
    flags.DEFINE_string("large_array_dir", None,
                        "S1, S2: the folder of this server's shares of tp.LargeArray "
                        "(made 0700; another server's folder must never be the same). "
                        "Also --large-array-dir.")
    flags.DEFINE_enum("share_ring_bits", "128", ["64", "128"],
                      "With --share_port: the ring the service accepts uploads in.")
    from tf_privpy.deploy.service.limits import add_limit_flags  # imports only the store module
    define = {int: flags.DEFINE_integer, float: flags.DEFINE_float}
    add_limit_flags(lambda name, type_, default, help_: define[type_](
        name, default, f"With --share_port: {help_} Also --{name.replace('_', '-')}."),
        prefix="share_")
    flags.mark_flags_as_required(["role", "cluster"])


def main(argv) -> None:
    if len(argv) > 1:
        _fail(f"unexpected arguments {argv[1:]}", 2)
    F = flags.FLAGS
    tune_malloc()  # before TensorFlow allocates anything
    from tf_privpy.deploy.service.limits import limits_from
    try:
        try:
            limits = limits_from(F, "share_")
        except ValueError as e:
            raise cf.ClusterError(f"--share_* limits: {e}") from None
        code = serve(F.role, F.cluster, F.allow_public_address, F.exit_with_parent,
                     F.identity_key, F.share_port, F.cert_dir, F.share_store,
                     int(F.share_ring_bits), limits, F.large_array_dir)
    except cf.ClusterError as e:
        _fail(str(e), 2)
    except StartError as e:
        _fail(str(e), 1)
    sys.stdout.flush()
    sys.stderr.flush()
    # TF 2.14 cannot stop a started server ("Clean shutdown is not currently
    # implemented"); its threads would keep a normal exit waiting.
    os._exit(code)


#: glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: largest buffer served from the heap rather than a fresh mmap (glibc's
#: ceiling for this setting on 64-bit: HEAP_MAX_SIZE / 2)
MMAP_THRESHOLD_BYTES = 32 << 20
#: free memory at the top of a heap kept for reuse before it is given back
TRIM_THRESHOLD_BYTES = 512 << 20


def tune_malloc() -> bool:
    """Keeps the server's large message buffers in the heap (glibc only;
    returns whether it applied).

    Every channel message allocates buffers of its size (the sealed message,
    the received copy, the opened tensors: 16 MB each for a 128-bit
    multiplication of 10^6). glibc's defaults serve such blocks with a fresh
    mmap and give them back on free (the dynamic threshold only follows the
    main arena, and TF's executor threads allocate from others), so every
    message paid page faults and the kernel's zeroing of each page again:
    8-10 % of a server's CPU in the loopback multiplication of 10^6 (perf),
    and 15-20 % less server CPU with these settings (issue 26). Memory freed
    is reused by the next message instead; up to TRIM_THRESHOLD_BYTES of it
    may stay with the process."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc: its allocator has its own policy
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


def _underscored(argv: List[str]) -> List[str]:
    """The issue's spelling (--share-port, --share-store, --cert-dir) as absl's."""
    dashed = ("--share-port", "--share-store", "--cert-dir", "--share-ring-bits",
              "--large-array-dir")
    out = []
    for a in argv:
        name, eq, value = a.partition("=")
        share = name.startswith("--share-")  # the limits' --share-max-calls etc. too
        out.append("--" + name[2:].replace("-", "_") + eq + value
                   if name in dashed or share else a)
    return out


def run() -> None:
    """Command-line entry point (python -m tf_privpy.server)."""
    _define_flags()
    app.run(main, argv=_underscored(sys.argv))


if __name__ == "__main__":
    run()
