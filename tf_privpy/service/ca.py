"""The cluster's small certificate authority for the share service.

A certificate folder holds:

    ca.pem, ca.key              the cluster CA (ECDSA P-256, self-signed): signs S1's and
                                S2's certificates; clients trust it
    s1.pem, s1.key, s2.pem ...  the servers' TLS certificates (serverAuth; SANs: the role's
                                name tf_privpy-s1 / -s2, which clients check, and its hosts)
    owners/NAME.pem, NAME.key   one client certificate per data owner (clientAuth, CN = NAME)
    issuers/NAME.pem            the owner's own issuing CA, which signed only owners/NAME.pem
                                (its key is discarded at once, so it can sign nothing else)
    clients.pem                 the services' client trust roots: the owner CAs of the
                                owners not revoked
    revoked.json                {"serials": {"<hex serial>": "NAME", ...}}

Revocation happens in the TLS handshake. grpcio's Python credentials take no CRL,
so revoking an owner instead removes its issuing CA from clients.pem. The services
reload clients.pem for each new connection (grpc.dynamic_ssl_server_credentials),
so the handshake refuses a revoked certificate just as it refuses one that no
trusted CA signed. A connection that was open before the revocation is not
re-checked by TLS. For that case the service's interceptor also refuses every
call whose certificate serial is in revoked.json, before any handler runs
(server.py).

Keys are written with mode 0600. Example:

    >>> make_ca("certs", hosts={"s1": ["s1.example", "10.0.0.11"]})
    >>> issue_cert("certs", "hospital-a")
    >>> revoke("certs", "hospital-a")

As a command (the cluster tool's `issue-cert` wraps these):
    python -m tf_privpy.service.ca make-ca DIR [--host s1=HOST,...]
    python -m tf_privpy.service.ca issue-cert DIR NAME
    python -m tf_privpy.service.ca revoke DIR NAME
"""
from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import os
import re
import sys
from typing import Dict, Iterable, Mapping, Optional, Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_ROLES = ("s1", "s2")
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
#: an owner name: also a file name, and the CN the service authorises by
OWNER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
VALID_DAYS = 825
SERVER_CN_PREFIX = "tf_privpy-"
REVOKED = "revoked.json"
CLIENT_ROOTS = "clients.pem"


class CAError(ValueError):
    pass


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write(path: str, data: bytes, private: bool = False) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _load_ca(cert_dir: str):
    try:
        with open(os.path.join(cert_dir, "ca.pem"), "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        with open(os.path.join(cert_dir, "ca.key"), "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
    except FileNotFoundError as e:
        raise CAError(f"{cert_dir} has no CA (ca.pem, ca.key): run make_ca first") from e
    return cert, key


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def _sign(ca_cert, ca_key, cn: str, usage, hosts: Sequence[str] = ()) -> tuple:
    key = ec.generate_private_key(ec.SECP256R1())
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
         .issuer_name(ca_cert.subject)
         .public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(_now() - datetime.timedelta(minutes=5))
         .not_valid_after(_now() + datetime.timedelta(days=VALID_DAYS))
         .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
         .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if hosts:
        b = b.add_extension(_san(hosts), critical=False)
    cert = b.sign(ca_key, hashes.SHA256())
    return cert, key


def make_ca(cert_dir: str, hosts: Optional[Mapping[str, Sequence[str]]] = None,
            overwrite: bool = False) -> Dict[str, str]:
    """Creates the CA and the certificates of S1 and S2 in cert_dir.

    hosts: each server's DNS names and IP addresses for its SANs (default:
    localhost, 127.0.0.1, ::1). Refuses to replace an existing CA unless
    overwrite. Returns the paths written by name."""
    for sub in ("owners", "issuers"):
        os.makedirs(os.path.join(cert_dir, sub), exist_ok=True)
    ca_pem = os.path.join(cert_dir, "ca.pem")
    if os.path.exists(ca_pem) and not overwrite:
        raise CAError(f"{ca_pem} exists: pass overwrite=True to make a new CA (every "
                      f"certificate it signed stops working)")
    cert, key = _self_signed_ca("tf_privpy share service CA", VALID_DAYS + 30)
    _write(os.path.join(cert_dir, "ca.key"), _key_pem(key), private=True)
    _write(ca_pem, cert.public_bytes(serialization.Encoding.PEM))
    _write(os.path.join(cert_dir, REVOKED), b'{"serials": {}}\n')
    out = {"ca": ca_pem}
    for role in SERVER_ROLES:
        # The role's own name is a SAN of its certificate only: clients check
        # S1's and S2's certificates against it (client.ServiceCluster), so a
        # misdirected address can never bring both shares to one server.
        h = [server_name(role)] + list((hosts or {}).get(role) or DEFAULT_HOSTS)
        c, k = _sign(cert, key, server_name(role), ExtendedKeyUsageOID.SERVER_AUTH, h)
        out[role] = _save(cert_dir, role, c, k)
    _write_client_roots(cert_dir)
    return out


def _self_signed_ca(cn: str, days: int) -> tuple:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def server_name(role: str) -> str:
    """The name S1's (s1) or S2's (s2) certificate is checked against."""
    return SERVER_CN_PREFIX + role


def _save(cert_dir: str, stem: str, cert, key) -> str:
    _write(os.path.join(cert_dir, stem + ".key"), _key_pem(key), private=True)
    path = os.path.join(cert_dir, stem + ".pem")
    _write(path, cert.public_bytes(serialization.Encoding.PEM))
    return path


def owner_paths(cert_dir: str, name: str) -> Dict[str, str]:
    """The files a data owner's client needs: its cert, its key and the CA."""
    return {"cert": os.path.join(cert_dir, "owners", name + ".pem"),
            "key": os.path.join(cert_dir, "owners", name + ".key"),
            "ca": os.path.join(cert_dir, "ca.pem")}


def issue_cert(cert_dir: str, name: str, overwrite: bool = False) -> Dict[str, str]:
    """Issues the client certificate of owner `name` (CN=name, clientAuth).
    Returns owner_paths(cert_dir, name). Hand the owner its .pem, .key and
    ca.pem; the key should not leave the owner's machine afterwards."""
    if not OWNER_NAME.match(name) or name.startswith(SERVER_CN_PREFIX):
        raise CAError(f"owner name {name!r}: 1-64 of letters, digits, '.', '_', '-', "
                      f"starting with a letter or digit, not {SERVER_CN_PREFIX}*")
    paths = owner_paths(cert_dir, name)
    if os.path.exists(paths["cert"]) and not overwrite:
        raise CAError(f"{name} already has a certificate ({paths['cert']}); revoke it and "
                      f"pass overwrite=True to issue a new one")
    _load_ca(cert_dir)  # the cluster must exist
    issuer, issuer_key = _self_signed_ca(f"tf_privpy owner CA {name}", VALID_DAYS + 1)
    cert, key = _sign(issuer, issuer_key, name, ExtendedKeyUsageOID.CLIENT_AUTH)
    del issuer_key  # never stored: this CA signs nothing else
    _save(os.path.join(cert_dir, "owners"), name, cert, key)
    _write(_owner_ca_path(cert_dir, name), issuer.public_bytes(serialization.Encoding.PEM))
    _write_client_roots(cert_dir)
    return paths


def _owner_ca_path(cert_dir: str, name: str) -> str:
    return os.path.join(cert_dir, "issuers", name + ".pem")


def _write_client_roots(cert_dir: str) -> None:
    """clients.pem: the cluster CA (it signs only the servers' certificates,
    which the service does not take as owners) and the issuing CA of every
    owner not revoked."""
    parts = []
    issuers = os.path.join(cert_dir, "issuers")
    for f in [os.path.join(cert_dir, "ca.pem")] + sorted(
            os.path.join(issuers, n) for n in os.listdir(issuers) if n.endswith(".pem")):
        with open(f, "rb") as fh:
            parts.append(fh.read())
    _write(os.path.join(cert_dir, CLIENT_ROOTS), b"".join(parts))


def client_roots(cert_dir: str) -> bytes:
    """The client trust roots the services load (clients.pem)."""
    with open(os.path.join(cert_dir, CLIENT_ROOTS), "rb") as f:
        return f.read()


def revoked_serials(cert_dir: str) -> Dict[int, str]:
    """The revoked serial numbers -> owner names (revoked.json)."""
    try:
        with open(os.path.join(cert_dir, REVOKED)) as f:
            return {int(s, 16): n for s, n in json.load(f)["serials"].items()}
    except FileNotFoundError:
        return {}


def revoke(cert_dir: str, name: str) -> int:
    """Revokes owner `name`'s current certificate. Its issuing CA leaves
    clients.pem, so every service refuses it in the handshake of the next
    connection. Its serial goes into revoked.json, so connections that are
    already open are refused from their next call. Returns the serial."""
    path = owner_paths(cert_dir, name)["cert"]
    try:
        with open(path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
    except FileNotFoundError as e:
        raise CAError(f"no certificate for owner {name!r} in {cert_dir}") from e
    serials = revoked_serials(cert_dir)
    serials[cert.serial_number] = name
    try:
        os.unlink(_owner_ca_path(cert_dir, name))
    except FileNotFoundError:
        pass
    _write_client_roots(cert_dir)
    _write(os.path.join(cert_dir, REVOKED), json.dumps(
        {"serials": {format(s, "x"): n for s, n in sorted(serials.items())}}, indent=1).encode())
    return cert.serial_number


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tf_privpy.service.ca", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-ca", help="the CA and the certificates of S1 and S2")
    m.add_argument("dir")
    m.add_argument("--host", action="append", default=[],
                   help="ROLE=HOST[,HOST...]: SANs of s1 or s2 (default: loopback)")
    m.add_argument("--overwrite", action="store_true")
    i = sub.add_parser("issue-cert", help="a data owner's client certificate")
    i.add_argument("dir")
    i.add_argument("name")
    i.add_argument("--overwrite", action="store_true")
    r = sub.add_parser("revoke", help="revoke a data owner's certificate")
    r.add_argument("dir")
    r.add_argument("name")
    a = p.parse_args(argv)
    try:
        if a.cmd == "make-ca":
            hosts = {}
            for spec in a.host:
                role, _, hs = spec.partition("=")
                if role not in SERVER_ROLES or not hs:
                    raise CAError(f"--host {spec!r}: expected s1=HOST[,HOST] or s2=...")
                hosts[role] = hs.split(",")
            for what, path in make_ca(a.dir, hosts, a.overwrite).items():
                print(f"{what}: {path}")
        elif a.cmd == "issue-cert":
            for what, path in issue_cert(a.dir, a.name, a.overwrite).items():
                print(f"{what}: {path}")
        else:
            print(f"revoked {a.name}: serial {revoke(a.dir, a.name):x}")
    except CAError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
