"""The share service of S1 or S2: gRPC over TLS with client certificates.

    python -m tf_privpy.deploy.service.server --role s1 --port 7201 \\
        --cert-dir s1 --store-dir /var/lib/tf_privpy/s1

--cert-dir is this server's own folder (ca.py): its TLS key and certificate,
owners/NAME.pem (the owners its operator enrolled) and revoked.json. The
service refuses to start when that folder holds any other private key (the
CA's, an owner's, the other server's), naming the file (ca.check_custody).

Authentication: the TLS handshake requires a client certificate that is one
of the certificates enrolled in this server's folder (they are its only
client trust roots, re-read for each new connection). The interceptor then
refuses, before any handler runs, every call whose certificate's public key
is not the key enrolled under its CN here (UNAUTHENTICATED): a certificate
minted with an owner's name by anyone else, and a connection opened before
the owner's enrolment was revoked. Authorisation: the caller is that CN.
Nothing S1's operator holds or can make is enrolled on S2.

Calls (share_service.proto): Upload (a header, chunks each with its SHA-256,
a commit with the whole record's SHA-256), Fetch and Stat (owner only). A
StoreError becomes its gRPC status with the store's message; nothing is
stored by a refused upload. Owners may upload records of kind "upload" only
(results are written by the servers' tp.publish).

Limits (limits.py, each a serve() argument and a flag): calls at once
overall and per owner, how long the service waits on a client (between
messages, and in all), and what one owner may keep stored.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import functools
import hashlib
import json
import os
import signal
import sys
import threading
import time
from typing import Dict, Optional, Tuple

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tf_privpy.deploy.service import ca
from tf_privpy.deploy.service._proto import pb, pb_grpc
from tf_privpy.deploy.service.limits import CallGuard, Limits, add_limit_flags, limits_from
from tf_privpy.deploy.service.store import DEFAULT_MAX_RECORD_BYTES, Store, StoreError

DEFAULT_CHUNK_BYTES = 1 << 20
#: gRPC message limit: a chunk plus its framing
MAX_MESSAGE_BYTES = 8 << 20
_FRAC_BITS = {64: 16, 128: 20}  # protocols/defaults.json's; checked by the test


def info_to_dict(info) -> dict:
    return {"name": info.name, "owner": info.owner, "shape": list(info.shape),
            "dtype": info.dtype, "ring_bits": info.ring_bits, "frac_bits": info.frac_bits,
            "party": info.party, "size_bytes": info.size_bytes, "sha256": info.sha256.hex(),
            "upload_id": info.upload_id.hex(), "kind": info.kind, "created": info.created}


def dict_to_info(meta: dict):
    return pb.RecordInfo(name=meta["name"], owner=meta["owner"], shape=meta["shape"],
                         dtype=meta["dtype"], ring_bits=meta["ring_bits"],
                         frac_bits=meta["frac_bits"], party=meta["party"],
                         size_bytes=meta["size_bytes"], sha256=bytes.fromhex(meta["sha256"]),
                         upload_id=bytes.fromhex(meta["upload_id"]), kind=meta["kind"],
                         created=meta["created"])


class Enrolment:
    """The owners enrolled in this server's folder (owners/NAME.pem, minus the
    keys in revoked.json): their key fingerprints by name, for the
    interceptor, and their certificates, the service's only client trust
    roots. Checked on every call and before every handshake.

    A full check (list owners/, stat every file: ~2.5 ms with 200 owners) on
    every call would cost more than the call, so a call first stats only the
    owners/ folder and revoked.json: enrol and revoke add, remove or rename a
    file there (os.replace), which changes the folder's mtime and inode
    signature. A file's mtime has a coarse clock tick, so two changes within
    one tick can leave the same mtime: while the folder's mtime is within
    RACY_S of the last full check, every call checks fully (as git does for
    racily clean files). A file edited in place (same inode, folder unchanged)
    is caught by the full check at least every RESCAN_S."""

    RACY_S = 2.0
    RESCAN_S = 1.0

    def __init__(self, cert_dir: str):
        self.cert_dir = cert_dir
        self._owners = os.path.join(cert_dir, ca.OWNERS)
        self._revoked = os.path.join(cert_dir, ca.REVOKED)
        self._lock = threading.Lock()
        self._seen = None  # the full signature of the enrolment last read
        self._quick = None  # (folder, revoked.json) stats at the last full check
        self._checked = 0.0  # time.monotonic() of the last full check
        self._racy = True
        self.keys: Dict[str, str] = {}
        self.roots = b""
        # When no owner is enrolled, TLS still needs a root: one whose key was
        # discarded at once, so it vouches for no one.
        self._nobody = _unusable_root()

    @staticmethod
    def _stat(path: str) -> tuple:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return ()
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _signature(self) -> tuple:
        return tuple((n, self._stat(os.path.join(self._owners, n)))
                     for n in sorted(_listdir(self._owners)) if n.endswith(".pem"))

    def current(self) -> Tuple[Dict[str, str], bytes]:
        """(fingerprint by enrolled owner name, client trust roots PEM)."""
        quick = (self._stat(self._owners), self._stat(self._revoked))
        with self._lock:
            if (quick == self._quick and not self._racy
                    and time.monotonic() - self._checked < self.RESCAN_S):
                return self.keys, self.roots
        checked_wall, checked = time.time_ns(), time.monotonic()
        sig = (quick, self._signature())
        with self._lock:
            if sig[1] != self._seen or quick != self._quick:
                self.keys, self.roots = self._load()
                self._seen = sig[1]
            self._quick, self._checked = quick, checked
            newest = max([q[2] for q in quick if q] or [0])
            self._racy = newest >= checked_wall - int(self.RACY_S * 1e9)
            return self.keys, self.roots

    def _load(self) -> Tuple[Dict[str, str], bytes]:
        revoked = ca.revoked_fingerprints(self.cert_dir)
        keys, pems = {}, []
        for n in sorted(_listdir(self._owners)):
            if not n.endswith(".pem"):
                continue
            path = os.path.join(self._owners, n)
            try:
                cert = ca.load_cert(path)
                name = ca.check_owner_cert(cert, path)
            except (ca.CAError, OSError) as e:
                print(f"share service: not enrolled: {e}", file=sys.stderr, flush=True)
                continue
            fp = ca.fingerprint(cert)
            if n != name + ".pem" or fp in revoked:
                continue  # a file not written by enrol(), or a revoked key
            keys[name] = fp
            pems.append(_read(path))
        return keys, (b"".join(pems) or self._nobody)


def _listdir(path: str):
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


def _unusable_root() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tf_privpy: no owner enrolled")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


class Authenticator:
    """The owner a call comes from: the CN of the peer certificate, accepted
    only when that certificate's public key is the one enrolled under that
    name in this server's folder (so a certificate anyone else minted with
    the owner's name, from any issuer, is no one), and it has clientAuth."""

    def __init__(self, cert_dir: str, enrolment: Optional[Enrolment] = None):
        self.cert_dir = cert_dir
        self.enrolment = enrolment or Enrolment(cert_dir)

    @staticmethod
    @functools.lru_cache(maxsize=1024)
    def _parse(pem: bytes):
        cert = x509.load_pem_x509_certificate(pem)
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        try:
            eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            client = ExtendedKeyUsageOID.CLIENT_AUTH in eku
        except x509.ExtensionNotFound:
            client = False
        return ca.fingerprint(cert), (cn[0].value if len(cn) == 1 else None), client

    def owner(self, context) -> Optional[str]:
        """The caller's owner name, or None."""
        auth = context.auth_context()
        pems = auth.get("x509_pem_cert") or []
        if not pems:
            return None
        fp, cn, client = self._parse(bytes(pems[0]))
        if not client or not cn or not ca.OWNER_NAME.fullmatch(cn):
            return None
        keys, _ = self.enrolment.current()
        return cn if keys.get(cn) == fp else None


class AuthInterceptor(grpc.ServerInterceptor):
    """Refuses, before any handler runs, a call whose certificate is revoked
    or is no owner's client certificate (UNAUTHENTICATED)."""

    def __init__(self, auth: Authenticator):
        self.auth = auth

    def intercept_service(self, continuation, details):
        handler = continuation(details)
        if handler is None:
            return None

        def guard(behavior):
            def inner(request, context):
                if self.auth.owner(context) is None:
                    context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                  "the client certificate is not the one enrolled on this "
                                  "server under its name (never enrolled, or revoked)")
                return behavior(request, context)
            return inner

        if handler.request_streaming and handler.response_streaming:
            make, fn = grpc.stream_stream_rpc_method_handler, handler.stream_stream
        elif handler.request_streaming:
            make, fn = grpc.stream_unary_rpc_method_handler, handler.stream_unary
        elif handler.response_streaming:
            make, fn = grpc.unary_stream_rpc_method_handler, handler.unary_stream
        else:
            make, fn = grpc.unary_unary_rpc_method_handler, handler.unary_unary
        return make(guard(fn), request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)


def _abort(context, e: StoreError):
    context.abort(getattr(grpc.StatusCode, e.code), str(e))


class ShareServicer(pb_grpc.ShareServiceServicer):
    def __init__(self, store: Store, auth: Authenticator, role: str,
                 guard: Optional[CallGuard] = None):
        self.store, self.auth, self.role = store, auth, role
        self.guard = guard if guard is not None else CallGuard(Limits(), role)

    def _owner(self, context) -> str:
        owner = self.auth.owner(context)
        if owner is None:  # the interceptor has refused it already
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no valid owner certificate")
        return owner

    @contextlib.contextmanager
    def _call(self, context):
        """The caller's owner name and its call slot (per-owner limit,
        watchdog); a refusal aborts the call with its status."""
        owner = self._owner(context)
        try:
            call = self.guard.enter(owner, context)
        except StoreError as e:
            _abort(context, e)
        try:
            yield owner, call
        except grpc.RpcError:
            # The client went away, or the watchdog cancelled the call: no
            # status can reach it any more (abort only ends the handler
            # quietly, where a raised RpcError would be logged as a bug).
            context.abort(grpc.StatusCode.CANCELLED, call.cut or "the call was cancelled")
        finally:
            self.guard.leave(call)

    def Upload(self, request_iterator, context):
        with self._call(context) as (owner, call):
            first = next(request_iterator, None)
            call.touch()
            if first is None or first.WhichOneof("part") != "header":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              "an upload starts with its header: nothing stored")
            info = info_to_dict(first.header.info)
            want = {"s1": 0, "s2": 1}.get(self.role)
            if want is not None and info["party"] != want:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"party {info['party']}'s share sent to {self.role.upper()}, "
                              f"which holds party {want}'s: nothing stored")
            if (info["kind"] or "upload") != "upload":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"kind {info['kind']!r}: owners upload inputs (kind 'upload'); "
                              f"results are written by the servers (tp.publish)")
            try:
                pending = self.store.begin(info, owner, first.header.overwrite)
            except StoreError as e:
                _abort(context, e)
            try:
                for msg in request_iterator:
                    call.touch()
                    part = msg.WhichOneof("part")
                    if part == "chunk":
                        c = msg.chunk
                        if hashlib.sha256(c.data).digest() != c.sha256:
                            raise StoreError("DATA_LOSS", f"the chunk at offset {c.offset} "
                                             f"does not match its SHA-256: nothing stored")
                        pending.write(c.offset, c.data)
                    elif part == "commit":
                        with call.working():
                            meta, existed = pending.commit(msg.commit.sha256.hex())
                        return pb.UploadReply(info=dict_to_info(meta), existed=existed)
                    else:
                        raise StoreError("INVALID_ARGUMENT", "a second header: nothing stored")
                raise StoreError("INVALID_ARGUMENT", "the upload ended without its commit: "
                                 "nothing stored")
            except StoreError as e:
                _abort(context, e)
            finally:
                pending.abort()

    def Fetch(self, request, context):
        with self._call(context) as (owner, call):
            chunk = request.chunk_bytes or DEFAULT_CHUNK_BYTES
            chunk = min(max(chunk, 4096), MAX_MESSAGE_BYTES // 2)
            try:
                meta, data = self.store.chunks(request.name, owner, chunk)
                yield pb.FetchMessage(info=dict_to_info(meta))
                call.touch()
                offset = 0
                for b in data:
                    yield pb.FetchMessage(chunk=pb.Chunk(offset=offset, data=b,
                                                         sha256=hashlib.sha256(b).digest()))
                    call.touch()  # the client took it (flow control)
                    offset += len(b)
            except StoreError as e:
                _abort(context, e)

    def Stat(self, request, context):
        with self._call(context) as (owner, _call):
            try:
                return dict_to_info(self.store.require(request.name, owner))
            except StoreError as e:
                _abort(context, e)


class _ClientRoots:
    """The certificate configuration: this server's key pair and, as client
    trust roots, exactly the enrolled owners' certificates (Enrolment), taken
    before each new connection when they have changed."""

    def __init__(self, cert_dir: str, role: str, enrolment: Enrolment):
        self.cert_dir, self.role, self.enrolment = cert_dir, role, enrolment
        self.roots = None

    def config(self, roots: bytes):
        self.roots = roots
        return grpc.ssl_server_certificate_configuration(
            [(_read(os.path.join(self.cert_dir, self.role + ".key")),
              _read(os.path.join(self.cert_dir, self.role + ".pem")))],
            root_certificates=roots)

    def __call__(self):
        try:
            _, roots = self.enrolment.current()
        except (OSError, ValueError):  # keep the last good roots
            return None
        return self.config(roots) if roots != self.roots else None

    def initial(self):
        return self.config(self.enrolment.current()[1]), self


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def serve(role: str, port: int, cert_dir: str, store_dir: str, host: str = "127.0.0.1",
          ring_bits: int = 128, frac_bits: Optional[int] = None,
          max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
          limits: Optional[Limits] = None):
    """Starts S1's or S2's share service; returns (grpc.Server, bound port).
    port 0 picks a free one. limits: calls at once, deadlines and per-owner
    quotas (limits.Limits; its defaults when None). The caller stops it with
    server.stop(grace)."""
    if role not in ca.SERVER_ROLES:
        raise ValueError(f"role must be one of {ca.SERVER_ROLES}, got {role!r}")
    limits = Limits() if limits is None else limits
    frac_bits = _FRAC_BITS[ring_bits] if frac_bits is None else frac_bits
    # Key custody first: refuse a folder holding keys other machines use.
    ca.check_custody(cert_dir, role)
    store = Store(store_dir, ring_bits, frac_bits, max_record_bytes,
                  quota_bytes=limits.quota_bytes, quota_records=limits.quota_records)
    auth = Authenticator(cert_dir)
    creds = grpc.dynamic_ssl_server_credentials(
        *_ClientRoots(cert_dir, role, auth.enrolment).initial(),
        require_client_authentication=True)
    # A thread for every admitted call, and no queue: a call beyond
    # max_calls is refused at once (RESOURCE_EXHAUSTED) rather than waiting
    # behind calls that may never end.
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=limits.max_calls,
                                              thread_name_prefix=f"share-{role}"),
        interceptors=[AuthInterceptor(auth)],
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=limits.max_calls)
    guard = CallGuard(limits, role)
    pb_grpc.add_ShareServiceServicer_to_server(ShareServicer(store, auth, role, guard), server)
    bound = server.add_secure_port(f"{host}:{port}", creds)
    if bound == 0:
        raise OSError(f"cannot bind the share service to {host}:{port}")
    guard.start()
    server.start()
    return server, bound


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tf_privpy.deploy.service.server",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--role", required=True, choices=ca.SERVER_ROLES)
    p.add_argument("--port", type=int, required=True, help="0: a free port (printed)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--cert-dir", required=True,
                   help="this server's own folder (ca.py): ROLE.key, ROLE.pem, owners/")
    p.add_argument("--store-dir", required=True)
    p.add_argument("--ring-bits", type=int, default=128, choices=(64, 128))
    p.add_argument("--frac-bits", type=int, default=None)
    p.add_argument("--max-record-bytes", type=int, default=DEFAULT_MAX_RECORD_BYTES)
    add_limit_flags(lambda name, type_, default, help_: p.add_argument(
        "--" + name.replace("_", "-"), type=type_, default=default,
        help=f"{help_} Default {default}."))
    a = p.parse_args(argv)
    try:
        server, port = serve(a.role, a.port, a.cert_dir, a.store_dir, a.host, a.ring_bits,
                             a.frac_bits, a.max_record_bytes, limits_from(a))
    except ca.CAError as e:
        print(f"share service {a.role}: error: {e}", file=sys.stderr, flush=True)
        return 2
    except (StoreError, ValueError) as e:
        print(f"share service {a.role}: {e}", file=sys.stderr, flush=True)
        return 2
    got: list = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: got.append(signum))
    print(json.dumps({"share_service": a.role, "host": a.host, "port": port}), flush=True)
    # Poll rather than block on an Event: the kernel may hand SIGTERM to one of
    # gRPC's or TF's threads, and Python runs the handler only when the main
    # thread next executes bytecode, so a main thread blocked on a lock would
    # never wake (seen under load: it slept past the test's 30 s). The handler
    # takes no lock either: one that called Event.set() could deadlock against
    # the main thread holding the Event's lock when the signal arrives.
    while not got:
        time.sleep(0.2)
    server.stop(grace=2).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
