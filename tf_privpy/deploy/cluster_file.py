"""The cluster file of a distributed tf_privpy deployment, and what both ends check.

A cluster file names the TF task of each server (and optionally the driver's)
and the tf_privpy build the cluster runs:

    {
      "version": 1,
      "tasks": {"s1": "10.0.0.11:7101", "s2": "10.0.0.12:7102",
                "t1": "10.0.0.13:7103", "t2": "10.0.0.14:7104",
                "client": "10.0.0.10:7100"},
      "library": {"version": "0.1.0", "sha256": "<64 hex>", "tensorflow": "2.14.1"},
      "timeout_s": 30,
      "identity": {"s1": "<64 hex>", "s2": ..., "t1": ..., "t2": ...}
    }

- tasks: s1, s2, t1, t2 are required (one TF job each, task 0); "client" is the
  driver's own task, which the servers connect back to (they fetch the
  client's inputs from it). It may be left out when every server is on
  loopback: the driver then picks a free loopback port.
- library (optional): the build every process must run; servers refuse to
  start with another one, and the driver checks each server remotely anyway.
- timeout_s (optional, default 30): how long a dead or hung server may take to
  be reported; the servers derive their gRPC keepalive from it.
- identity: each server's long-term public key (32 bytes, hex), for the
  authenticated key exchange (tp.init refuses a file without all four). Each
  server authenticates its peers with the keys of its OWN copy of this file,
  never with keys the driver sends, so every machine must have the same file:
  a server prints the file's SHA-256 in its ready line and tp.init refuses a
  server whose hash differs from that of the driver's file.

Addresses must be loopback, RFC 1918 private, link-local or IPv6 unique-local
(`address_problem`), because TensorFlow's gRPC has no TLS: see
docs/distributed.md.

Example:
  >>> c = load("cluster.json")
  >>> c.device("s1")
  '/job:s1/replica:0/task:0/device:CPU:0'
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import ipaddress
import json
import os
import socket
from typing import Dict, Mapping, Optional, Tuple

ROLES = ("s1", "s2", "t1", "t2")  # TF job names; the parties are "S1" ... "T2"
CLIENT_JOB = "client"
FORMAT_VERSION = 1
DEFAULT_TIMEOUT_S = 30.0
#: the token of the function by which a server reports its build: the driver
#: runs an EagerPyFunc with it on the server's device (tf_privpy/deploy/server.py)
IDENTITY_TOKEN = "tf_privpy_server_identity"
_PRIVATE_NETS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",  # RFC 1918
    "fc00::/7"))                                       # IPv6 unique local (RFC 4193)

WHY_PRIVATE = (
    "TensorFlow's gRPC runtime has no TLS: every tensor between the servers (masked shares, "
    "protocol messages, today also the pairwise PRG keys) and between them and the driver "
    "crosses this network unencrypted and unauthenticated, and anyone who can reach a "
    "server's port can run TensorFlow ops on it. Put the servers and the driver on a private "
    "network or VPN (loopback, RFC 1918 10/8, 172.16/12, 192.168/16, link-local or IPv6 "
    "fc00::/7) and firewall their ports (docs/distributed.md)")


class ClusterError(ValueError):
    """A cluster file is malformed, unsafe or does not match this build."""


def party(role: str) -> str:
    """The tf_privpy party of a TF job: 's1' -> 'S1'; 'client' stays."""
    return role if role == CLIENT_JOB else role.upper()


def device(role: str) -> str:
    """The TF device of a job's task 0 (tf_privpy uses one CPU device per server)."""
    return f"/job:{role}/replica:0/task:0/device:CPU:0"


def parse_address(address: str, what: str = "address") -> Tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port); raises ClusterError."""
    if not isinstance(address, str) or ":" not in address:
        raise ClusterError(f"{what} {address!r} is not host:port")
    host, _, port_s = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_s)
    except ValueError:
        raise ClusterError(f"{what} {address!r}: port {port_s!r} is not a number") from None
    if not 0 < port < 65536:
        raise ClusterError(f"{what} {address!r}: port {port} is out of range 1-65535")
    if not host:
        raise ClusterError(f"{what} {address!r} has no host")
    return host, port


def _addresses_of(host: str) -> Tuple[ipaddress._BaseAddress, ...]:
    try:
        return (ipaddress.ip_address(host),)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        raise ClusterError(f"cannot resolve host {host!r}: {e}") from None
    return tuple(ipaddress.ip_address(i[4][0].split("%")[0]) for i in infos)


def address_kind(ip: ipaddress._BaseAddress) -> str:
    """'loopback', 'private', 'link-local', 'unspecified' or 'public'."""
    mapped = getattr(ip, "ipv4_mapped", None)
    ip = mapped or ip
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if any(ip.version == n.version and ip in n for n in _PRIVATE_NETS):
        return "private"
    return "public"


def address_problem(host: str) -> Optional[str]:
    """None if every address `host` resolves to is loopback, private or
    link-local; else what is wrong with it."""
    for ip in _addresses_of(host):
        kind = address_kind(ip)
        if kind == "unspecified":
            return (f"{host} means every interface; give the server's own loopback or "
                    "private address")
        if kind == "public":
            return f"{host} ({ip}) is a public address" if str(ip) != host else \
                f"{host} is a public address"
    return None


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A parsed, validated cluster file (see the module docstring)."""

    tasks: Mapping[str, str]
    library: Optional[Mapping[str, str]] = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    identity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    path: Optional[str] = None
    #: s1, s2 -> host:port of their share services (docs/share_service.md)
    share_services: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: SHA-256 (hex) of the file's bytes as read (load); every server prints
    #: its own in its ready line and tp.init refuses a server whose file
    #: differs from the driver's
    sha256: Optional[str] = None

    @property
    def servers(self) -> Dict[str, str]:
        """role -> address of s1, s2, t1, t2."""
        return {r: self.tasks[r] for r in ROLES}

    def device(self, role: str) -> str:
        return device(role)

    def to_json(self) -> dict:
        out = {"version": FORMAT_VERSION, "tasks": dict(self.tasks)}
        if self.library is not None:
            out["library"] = dict(self.library)
        out["timeout_s"] = self.timeout_s
        if self.identity:
            out["identity"] = dict(self.identity)
        if self.share_services:
            out["share_services"] = dict(self.share_services)
        return out

    def save(self, path: str) -> str:
        """Writes the file atomically (a reader never sees half of it); returns
        its absolute path."""
        path = os.path.abspath(path)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.to_json(), f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
        return path


def from_json(obj, source: str = "cluster file") -> Cluster:
    """Validates a decoded cluster file; raises ClusterError naming the problem."""
    if not isinstance(obj, dict):
        raise ClusterError(f"{source}: expected a JSON object")
    unknown = set(obj) - {"version", "tasks", "library", "timeout_s", "identity",
                          "share_services"}
    if unknown:
        raise ClusterError(f"{source}: unknown keys {sorted(unknown)}")
    if obj.get("version") != FORMAT_VERSION:
        raise ClusterError(f"{source}: version is {obj.get('version')!r}; this tf_privpy "
                           f"reads version {FORMAT_VERSION}")
    tasks = obj.get("tasks")
    if not isinstance(tasks, dict):
        raise ClusterError(f"{source}: 'tasks' must map s1, s2, t1, t2 (and optionally "
                           "client) to host:port")
    missing = [r for r in ROLES if r not in tasks]
    extra = set(tasks) - set(ROLES) - {CLIENT_JOB}
    if missing or extra:
        raise ClusterError(f"{source}: tasks need exactly s1, s2, t1, t2 and optionally "
                           f"client; missing {missing}, unknown {sorted(extra)}")
    seen: Dict[Tuple[str, int], str] = {}
    for role, addr in tasks.items():
        host, port = parse_address(addr, f"{source}: {role}'s address")
        key = (host.lower(), port)
        if key in seen:
            raise ClusterError(f"{source}: {seen[key]} and {role} have the same address "
                               f"{addr}; every task needs its own port")
        seen[key] = role
    library = obj.get("library")
    if library is not None:
        if not isinstance(library, dict) or not {"version", "sha256"} <= set(library):
            raise ClusterError(f"{source}: 'library' needs 'version' and 'sha256'")
        library = {k: str(v) for k, v in library.items()}
    timeout = obj.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ClusterError(f"{source}: timeout_s must be a positive number, got {timeout!r}")
    identity = obj.get("identity") or {}
    if not isinstance(identity, dict):
        raise ClusterError(f"{source}: 'identity' must map roles to hex public keys")
    for role, key in identity.items():
        if role not in ROLES + (CLIENT_JOB,):
            raise ClusterError(f"{source}: identity of unknown role {role!r}")
        try:
            ok = isinstance(key, str) and len(bytes.fromhex(key)) == 32
        except ValueError:
            ok = False
        if not ok:
            raise ClusterError(f"{source}: identity of {role} must be 32 bytes in hex")
    services = obj.get("share_services") or {}
    if not isinstance(services, dict) or set(services) - {"s1", "s2"}:
        raise ClusterError(f"{source}: 'share_services' maps s1 and s2 to host:port")
    for role, addr in services.items():
        parse_address(addr, f"{source}: {role}'s share service")
    return Cluster(tasks=dict(tasks), library=library, timeout_s=float(timeout),
                   identity=dict(identity), share_services=dict(services))


def load(path: str) -> Cluster:
    """Reads and validates a cluster file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise ClusterError(f"cluster file {path} does not exist (start a cluster with "
                           "`python -m tf_privpy.cluster local --out cluster.json`)") from None
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ClusterError(f"cluster file {path} is not valid JSON: {e}") from None
    # The hash of these very bytes (not of the parsed content): what an
    # operator checks with sha256sum, and what the servers' trust rests on.
    return dataclasses.replace(from_json(obj, f"cluster file {path}"),
                               path=os.path.abspath(path),
                               sha256=hashlib.sha256(raw).hexdigest())


def check_addresses(cluster: Cluster, allow_public: bool, flag: str) -> None:
    """Refuses a cluster whose tasks are reachable only over a public network,
    unless allow_public (then it is the operator's stated choice); `flag` is
    how the caller's user allows it (named in the error)."""
    if allow_public:
        return
    for role, addr in cluster.tasks.items():
        host, _ = parse_address(addr)
        problem = address_problem(host)
        if problem:
            raise ClusterError(
                f"refusing {role}'s address {addr}: {problem}. {WHY_PRIVATE}. Pass {flag} "
                "only if the traffic is protected otherwise (e.g. an encrypted tunnel), and "
                "firewall the ports.")


def all_loopback(cluster: Cluster) -> bool:
    return all(address_kind(ip) == "loopback" for addr in cluster.servers.values()
               for ip in _addresses_of(parse_address(addr)[0]))


# ----------------------------------------------------------- library identity
_identity: Optional[Dict[str, str]] = None


def library_identity() -> Dict[str, str]:
    """{"version", "sha256", "tensorflow"} of the tf_privpy build in this
    process: the package version, the SHA-256 of the op library file it loads
    and TensorFlow's version. Every server and the driver must agree on all
    three (protocol code and kernels must match on both ends of a message)."""
    global _identity
    if _identity is None:
        import tensorflow as tf
        import tf_privpy
        from tf_privpy.protocols import loader
        loader.load_library()
        h = hashlib.sha256()
        with open(loader.library_path(), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _identity = {"version": tf_privpy.__version__, "sha256": h.hexdigest(),
                     "tensorflow": tf.__version__}
    return dict(_identity)


def identity_mismatch(expected: Mapping[str, str], actual: Mapping[str, str]) -> Optional[str]:
    """None if they agree on every key of `expected`, else a description."""
    diffs = [f"{k} {actual.get(k)!r} instead of {expected[k]!r}"
             for k in ("version", "sha256", "tensorflow")
             if k in expected and actual.get(k) != expected[k]]
    return "; ".join(diffs) or None


def describe_identity(ident: Mapping[str, str]) -> str:
    return (f"tf_privpy {ident.get('version')}, ops library {str(ident.get('sha256'))[:12]}, "
            f"TensorFlow {ident.get('tensorflow')}")


# ------------------------------------------------------------------- probing
@dataclasses.dataclass(frozen=True)
class Probe:
    """What one server's TF worker service answered (GetStatus)."""

    role: str
    address: str
    ok: bool
    jobs: Tuple[str, ...] = ()
    incarnation: int = 0
    error: str = ""


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return value, i
        shift += 7


def _device_attributes(response: bytes) -> list:
    """GetStatusResponse's field 1 (repeated DeviceAttributes), decoded by
    hand: TF's pip package ships no worker_pb2."""
    from tensorflow.core.framework import device_attributes_pb2
    out, i = [], 0
    while i < len(response):
        tag, i = _varint(response, i)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _, i = _varint(response, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = _varint(response, i)
            if field == 1:
                out.append(device_attributes_pb2.DeviceAttributes.FromString(response[i:i + n]))
            i += n
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
    return out


def probe(role: str, address: str, timeout: float) -> Probe:
    """Asks the TF server at `address` for its devices (the worker service's
    GetStatus RPC, over our own gRPC channel with a deadline), independently of
    TensorFlow's eager context: a dead server answers 'connection refused' at
    once, a hung one misses the deadline."""
    import grpc
    channel = grpc.insecure_channel(address)
    try:
        call = channel.unary_unary("/tensorflow.WorkerService/GetStatus",
                                   request_serializer=lambda _: b"",  # an empty request
                                   response_deserializer=_device_attributes)
        devices = call(None, timeout=timeout)
    except grpc.RpcError as e:
        code = e.code()
        detail = ("no answer within %.1f s" % timeout if code == grpc.StatusCode.DEADLINE_EXCEEDED
                  else (e.details() or "").strip().splitlines()[0] if e.details() else "")
        return Probe(role, address, False, error=f"{code.name}: {detail}".rstrip(": "))
    finally:
        channel.close()
    jobs = tuple(sorted({d.name.split("/")[1][len("job:"):] for d in devices
                         if d.name.startswith("/job:")}))
    cpu = [d for d in devices if d.name.endswith("/device:CPU:0")]
    return Probe(role, address, True, jobs, cpu[0].incarnation if cpu else 0)


def probe_all(addresses: Mapping[str, str], timeout: float) -> Dict[str, Probe]:
    """probe() of every role at once (the slowest bounds the wait)."""
    with concurrent.futures.ThreadPoolExecutor(len(addresses)) as pool:
        futures = {r: pool.submit(probe, r, a, timeout) for r, a in addresses.items()}
        return {r: f.result() for r, f in futures.items()}


def probe_problem(p: Probe) -> Optional[str]:
    """None if the server answered as its own job, else what is wrong."""
    if not p.ok:
        return f"does not answer ({p.error})"
    if p.jobs != (p.role,):
        return (f"answers, but as TF job {', '.join(p.jobs) or '?'} instead of {p.role}: "
                "the cluster file's addresses do not match the servers' roles")
    return None


def free_port(host: str = "0.0.0.0") -> int:
    """A TCP port free right now (TF servers listen on every interface, so the
    port is checked on all of them)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def grpc_environment(timeout_s: float) -> Dict[str, str]:
    """Environment for TensorFlow's gRPC so that a dead server fails calls at
    once and a hung one within about half of timeout_s.

    GRPC_FAIL_FAST=true: without it TF waits for a dead peer to come back
    (calls hang forever). Keepalive pings every timeout/4, the connection
    dropped after another timeout/4 without an answer: a call waiting on a
    stopped process or a cut network would otherwise wait forever. (The
    driver then probes the servers for up to timeout/4 to name the culprit.)
    """
    ka = max(1000, int(timeout_s * 1000 / 4))
    opts = {"grpc.keepalive_time_ms": str(ka), "grpc.keepalive_timeout_ms": str(ka)}
    existing = os.environ.get("TF_GRPC_DEFAULT_OPTIONS", "")
    for item in filter(None, existing.split(",")):
        k, _, v = item.partition("=")
        opts.setdefault(k.strip(), v.strip())
    return {"GRPC_FAIL_FAST": "true",
            "TF_GRPC_DEFAULT_OPTIONS": ",".join(f"{k}={v}" for k, v in opts.items())}
