"""Keys and certificates of the share service, each made where it is used.

Key custody: no folder holds a private key that another machine uses. Four
kinds of folder, each on its own machine:

    CA folder (the machine that signs the servers' certificates; not S1, not S2)
        ca.pem, ca.key      the cluster CA (ECDSA P-256). It signs only S1's and
                            S2's TLS certificates (serverAuth, SAN tf_privpy-s1 /
                            -s2 and their hosts), which owners check. No service
                            trusts it for client logins.
    S1's folder (--cert_dir on S1's machine; S2's the same with s2)
        s1.key              S1's TLS key, made here (server_key), mode 0600
        s1.csr              its certificate request, carried to the CA machine
        s1.pem              the certificate the CA signed, carried back
        owners/NAME.pem     the owners this server's operator enrolled: public
                            certificates only
        revoked.json        {"fingerprints": {"<SPKI SHA-256>": "NAME", ...}}
    an owner's folder (on the owner's machine)
        NAME.key            the owner's private key, made here (owner_key), 0600
        NAME.pem            its self-signed client certificate (CN = NAME)
        ca.pem              the cluster CA, to check S1's and S2's certificates

Logins: S1's service trusts for TLS exactly the certificates enrolled in S1's
folder, and its interceptor maps a caller to owner NAME only when the
public key of the presented certificate (SPKI SHA-256) is the key enrolled
under NAME there. Nothing S1's operator holds or mints is accepted by S2,
whose operator enrolled the owner's certificate separately. Revoking an
owner on a server removes its enrolment (refused from the next handshake,
and per call on connections already open) and records its key in
revoked.json, which enrol() then refuses.

A server refuses to start (check_custody) when its folder holds any private
key other than its own ROLE.key, or a certificate that is not for its key
and its role, naming the file.

`cluster local` (one machine, for trying things only) keeps a whole cluster
in one tree (local_tree): ca/, s1/, s2/ and owners/NAME/, the same files.

    >>> make_ca("ca")                                     # CA machine
    >>> csr = server_key("s1", "s1")                      # S1's machine
    >>> sign_server("ca", csr, "s1", ["s1.example"])      # CA machine; copy s1.pem back
    >>> owner_key("hospital-a", "hospital-a", "ca/ca.pem")  # owner's machine
    >>> enrol("s1", "hospital-a/hospital-a.pem", fingerprint="...")  # S1's machine
    >>> revoke("s1", "hospital-a")                        # S1's machine

As a command: python -m tf_privpy.deploy.service.ca {make-ca|server-key|sign-server|
owner-key|enrol|revoke|fingerprint} (--help); python -m tf_privpy.cluster
wraps the same functions.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import ipaddress
import json
import os
import re
import shutil
import sys
from typing import Dict, Iterable, Optional, Sequence, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_ROLES = ("s1", "s2")
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
#: an owner name: also a file name and the CN a certificate is enrolled by
#: (matched whole with fullmatch: `$` would admit a trailing newline)
OWNER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
VALID_DAYS = 825
SERVER_CN_PREFIX = "tf_privpy-"
REVOKED = "revoked.json"
OWNERS = "owners"
#: the marker of a `cluster local` tree (every folder of a cluster on one machine)
LOCAL_MARKER = "LOCAL-ONLY.txt"
#: the PEM armour of any private key: PKCS#8, SEC1, PKCS#1, OpenSSH, tf_privpy's X25519
_PRIVATE_PEM = re.compile(rb"-----BEGIN [A-Z0-9 _]*PRIVATE KEY-----")
_SCAN_BYTES = 1 << 20


class CAError(ValueError):
    """A refused key or certificate operation; the message says what to do."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _write(path: str, data: bytes, private: bool = False, overwrite: bool = True) -> None:
    if not overwrite and os.path.exists(path):
        raise CAError(f"{path} exists: pass overwrite to replace it")
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _builder(subject: str, issuer: x509.Name, public_key, days: int) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(_now() - datetime.timedelta(minutes=5))
            .not_valid_after(_now() + datetime.timedelta(days=days)))


def server_name(role: str) -> str:
    """The name S1's (s1) or S2's (s2) certificate is checked against."""
    return SERVER_CN_PREFIX + role


def check_owner_name(name: str) -> str:
    """`name` if it is a valid owner name, else CAError: 1-64 of letters,
    digits, '.', '_', '-', starting with a letter or digit, not tf_privpy-*."""
    if not isinstance(name, str) or not OWNER_NAME.fullmatch(name) \
            or name.startswith(SERVER_CN_PREFIX):
        raise CAError(f"owner name {name!r}: 1-64 of letters, digits, '.', '_', '-', "
                      f"starting with a letter or digit, not {SERVER_CN_PREFIX}*")
    return name


def _check_role(role: str) -> str:
    if role not in SERVER_ROLES:
        raise CAError(f"role must be one of {SERVER_ROLES}, got {role!r}")
    return role


def fingerprint(cert: x509.Certificate) -> str:
    """SHA-256 of the certificate's public key (SubjectPublicKeyInfo, DER), hex:
    what an owner reads to each server's operator, and what a login must match."""
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).hexdigest()


def load_cert(path: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(_read(path))
    except FileNotFoundError:
        raise CAError(f"no certificate at {path}") from None
    except ValueError as e:
        raise CAError(f"{path} is not a PEM certificate: {e}") from None


def _cn(cert: x509.Certificate) -> Optional[str]:
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return cn[0].value if len(cn) == 1 else None


def _eku(cert: x509.Certificate) -> Tuple:
    try:
        return tuple(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return ()


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


# --- the CA machine -------------------------------------------------------------
def make_ca(ca_dir: str, overwrite: bool = False) -> str:
    """Makes the cluster CA (ca.key, ca.pem) in ca_dir, on the CA machine; returns
    ca.pem's path. It only signs S1's and S2's certificates (sign_server).
    Refuses to replace a CA unless overwrite (every certificate it signed
    would stop working)."""
    os.makedirs(ca_dir, exist_ok=True)
    ca_pem = os.path.join(ca_dir, "ca.pem")
    if os.path.exists(ca_pem) and not overwrite:
        raise CAError(f"{ca_pem} exists: pass overwrite to make a new CA (every "
                      f"certificate it signed stops working)")
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("tf_privpy share service CA")
    cert = (_builder("tf_privpy share service CA", name, key.public_key(), VALID_DAYS + 30)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    _write(os.path.join(ca_dir, "ca.key"), _key_pem(key), private=True)
    _write(ca_pem, _pem(cert))
    return ca_pem


def sign_server(ca_dir: str, csr_path: str, role: str, hosts: Sequence[str] = DEFAULT_HOSTS,
                out: Optional[str] = None) -> str:
    """Signs S1's or S2's certificate request (server_key made it on the
    server's machine) with the CA in ca_dir: CN and first SAN the role's name
    (which owners' clients check), then `hosts`, serverAuth only. Writes ROLE.pem
    beside the request (or to `out`); copy it back into the server's folder."""
    _check_role(role)
    try:
        ca_cert = x509.load_pem_x509_certificate(_read(os.path.join(ca_dir, "ca.pem")))
        ca_key = serialization.load_pem_private_key(_read(os.path.join(ca_dir, "ca.key")), None)
    except FileNotFoundError:
        raise CAError(f"{ca_dir} has no CA (ca.pem, ca.key): run make-ca there first") from None
    try:
        csr = x509.load_pem_x509_csr(_read(csr_path))
    except (FileNotFoundError, ValueError) as e:
        raise CAError(f"{csr_path}: not a certificate request ({e})") from None
    if not csr.is_signature_valid:
        raise CAError(f"{csr_path}: the request's signature does not verify")
    cert = (_builder(server_name(role), ca_cert.subject, csr.public_key(), VALID_DAYS)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(_san([server_name(role)] + list(hosts)), critical=False)
            .sign(ca_key, hashes.SHA256()))
    out = out or os.path.join(os.path.dirname(os.path.abspath(csr_path)), role + ".pem")
    _write(out, _pem(cert))
    return out


# --- a server's machine ----------------------------------------------------------
def init_server_dir(server_dir: str) -> None:
    """The empty enrolment list and revocation list of a server's folder."""
    os.makedirs(os.path.join(server_dir, OWNERS), exist_ok=True)
    os.chmod(server_dir, 0o700)
    if not os.path.exists(os.path.join(server_dir, REVOKED)):
        _write(os.path.join(server_dir, REVOKED), b'{"fingerprints": {}}\n')


def server_key(server_dir: str, role: str, overwrite: bool = False) -> str:
    """On S1's or S2's machine: makes its TLS key ROLE.key (0600) and the
    request ROLE.csr in server_dir (plus owners/ and revoked.json). Returns the
    request's path: carry it to the CA machine (sign_server)."""
    _check_role(role)
    init_server_dir(server_dir)
    key_path = os.path.join(server_dir, role + ".key")
    if os.path.exists(key_path) and not overwrite:
        raise CAError(f"{key_path} exists: pass overwrite to make a new key (its "
                      f"certificate must then be signed again)")
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (x509.CertificateSigningRequestBuilder().subject_name(_name(server_name(role)))
           .sign(key, hashes.SHA256()))
    _write(key_path, _key_pem(key), private=True)
    csr_path = os.path.join(server_dir, role + ".csr")
    _write(csr_path, csr.public_bytes(serialization.Encoding.PEM))
    return csr_path


def enrolled_path(server_dir: str, name: str) -> str:
    return os.path.join(server_dir, OWNERS, check_owner_name(name) + ".pem")


def check_owner_cert(cert: x509.Certificate, what: str) -> str:
    """The owner name of a certificate fit to enrol, else CAError: CN a valid
    owner name, clientAuth, not a CA (a CA among a server's trust roots could
    vouch for other keys), currently valid."""
    name = _cn(cert)
    if name is None:
        raise CAError(f"{what}: a certificate with one CN (the owner's name) expected")
    check_owner_name(name)
    if ExtendedKeyUsageOID.CLIENT_AUTH not in _eku(cert):
        raise CAError(f"{what}: not a client certificate (no clientAuth usage)")
    if _is_ca(cert):
        raise CAError(f"{what}: a CA certificate; enrol the owner's own client "
                      f"certificate (owner-key makes one)")
    if not cert.not_valid_before_utc <= _now() <= cert.not_valid_after_utc:
        raise CAError(f"{what}: not valid now ({cert.not_valid_before_utc} to "
                      f"{cert.not_valid_after_utc})")
    return name


def enrol(server_dir: str, cert_path: str, fingerprint_hex: Optional[str] = None,
          overwrite: bool = False) -> Tuple[str, str]:
    """On a server's machine: enrols the owner certificate at cert_path (sent by
    the owner; public) into server_dir/owners/NAME.pem. fingerprint_hex: the
    SHA-256 the owner's owner-key printed, received over another channel;
    refused when it differs. Refuses a key revoked here, and a second key
    for a name unless overwrite. Returns (name, fingerprint)."""
    cert = load_cert(cert_path)
    name = check_owner_cert(cert, cert_path)
    fp = fingerprint(cert)
    if fingerprint_hex is not None:
        given = fingerprint_hex.replace(":", "").strip().lower()
        if given != fp:
            raise CAError(f"{cert_path} has the key fingerprint {fp}, not {given}: this is "
                          f"not the certificate the owner made; enrol nothing")
    if fp in revoked_fingerprints(server_dir):
        raise CAError(f"the key of {cert_path} was revoked here: the owner makes a new "
                      f"key (owner-key --overwrite) and enrols that")
    init_server_dir(server_dir)
    path = enrolled_path(server_dir, name)
    if os.path.exists(path) and fingerprint(load_cert(path)) != fp and not overwrite:
        raise CAError(f"{name} is enrolled here with another key ({path}): revoke it first, "
                      f"or pass overwrite to replace it")
    _write(path, _pem(cert))
    return name, fp


def revoked_fingerprints(server_dir: str) -> Dict[str, str]:
    """The revoked key fingerprints -> owner names (revoked.json)."""
    try:
        raw = _read(os.path.join(server_dir, REVOKED))
    except FileNotFoundError:
        return {}
    return dict(json.loads(raw).get("fingerprints", {})) if raw.strip() else {}


def revoke(server_dir: str, name: str) -> str:
    """On a server's machine: removes owner `name`'s enrolment (the next
    handshake refuses it; the service refuses an open connection's next call)
    and records its key in revoked.json. Returns the key's fingerprint."""
    path = enrolled_path(server_dir, name)  # validates the name: no "../ca"
    try:
        fp = fingerprint(load_cert(path))
    except CAError:
        raise CAError(f"owner {name!r} is not enrolled in {server_dir}") from None
    fps = revoked_fingerprints(server_dir)
    fps[fp] = name
    _write(os.path.join(server_dir, REVOKED),
           json.dumps({"fingerprints": dict(sorted(fps.items()))}, indent=1).encode())
    os.unlink(path)
    return fp


def check_custody(server_dir: str, role: str) -> None:
    """Refuses (CAError naming the file) a server folder that holds a private key
    other than its own ROLE.key (the CA's, an owner's, another server's, an
    identity key), or whose ROLE.pem is not a certificate for ROLE.key and
    for its role's name; also a ROLE.key readable by others."""
    _check_role(role)
    own_key = os.path.join(os.path.abspath(server_dir), role + ".key")
    if not os.path.isdir(server_dir):
        raise CAError(f"no server folder {server_dir}: make it on this machine with "
                      f"server-key --role {role}")
    seen = set()  # real paths walked: a linked folder is scanned too, a link loop once
    for top, dirs, files in os.walk(server_dir, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(os.path.abspath(top), f)
            if path == own_key:
                continue
            if f.endswith(".key"):  # whatever its encoding (a DER key has no armour)
                raise CAError(f"{path}: {role.upper()}'s folder may hold only its own key "
                              f"{role}.key: move every other key (the CA's, an owner's, "
                              f"another server's) to the machine that uses it")
            try:
                with open(path, "rb") as fh:
                    head = fh.read(_SCAN_BYTES)
            except OSError:
                continue
            if _PRIVATE_PEM.search(head):
                raise CAError(f"{path} holds a private key. {role.upper()}'s folder may hold "
                              f"only its own key {role}.key: move every other key (the CA's, "
                              f"an owner's, another server's) to the machine that uses it")
    try:
        key = serialization.load_pem_private_key(_read(own_key), None)
    except FileNotFoundError:
        raise CAError(f"no {own_key}: make it on this machine with server-key --role {role}, "
                      f"have the CA sign {role}.csr and copy {role}.pem here") from None
    if os.stat(own_key).st_mode & 0o077:
        raise CAError(f"{own_key} is readable by other users: chmod 600 it")
    cert = load_cert(os.path.join(server_dir, role + ".pem"))
    if fingerprint(cert) != hashlib.sha256(key.public_key().public_bytes(
            serialization.Encoding.DER,
            serialization.PublicFormat.SubjectPublicKeyInfo)).hexdigest():
        raise CAError(f"{os.path.join(server_dir, role + '.pem')} is not the certificate of "
                      f"{own_key}: have the CA sign {role}.csr again and copy it here")
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = sans.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if server_name(role) not in names or ExtendedKeyUsageOID.SERVER_AUTH not in _eku(cert):
        raise CAError(f"{os.path.join(server_dir, role + '.pem')} is not {role.upper()}'s "
                      f"server certificate (no serverAuth with the name {server_name(role)})")


# --- an owner's machine ------------------------------------------------------------
def owner_paths(owner_dir: str, name: str) -> Dict[str, str]:
    """The files of owner `name`'s client in its folder: cert, key, ca."""
    check_owner_name(name)
    return {"cert": os.path.join(owner_dir, name + ".pem"),
            "key": os.path.join(owner_dir, name + ".key"),
            "ca": os.path.join(owner_dir, "ca.pem")}


def owner_key(owner_dir: str, name: str, ca_pem: Optional[str] = None,
              overwrite: bool = False) -> Dict[str, str]:
    """On the owner's machine: makes owner `name`'s private key NAME.key (0600)
    and its self-signed client certificate NAME.pem (CN = name, clientAuth) in
    owner_dir, and copies the cluster CA ca_pem there when given. Returns
    owner_paths plus "fingerprint": read it to each server's operator, who
    enrols NAME.pem with it."""
    paths = owner_paths(owner_dir, name)
    if os.path.exists(paths["key"]) and not overwrite:
        raise CAError(f"{paths['key']} exists: pass overwrite to make a new key (then "
                      f"revoke the old one and enrol the new one on S1 and S2)")
    os.makedirs(owner_dir, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(name, _name(name), key.public_key(), VALID_DAYS)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    _write(paths["key"], _key_pem(key), private=True)
    _write(paths["cert"], _pem(cert))
    if ca_pem and os.path.abspath(ca_pem) != os.path.abspath(paths["ca"]):
        shutil.copyfile(ca_pem, paths["ca"])
    return dict(paths, fingerprint=fingerprint(cert))


# --- one machine, for trying things ---------------------------------------------------
def local_tree(root: str, hosts: Sequence[str] = DEFAULT_HOSTS) -> Dict[str, str]:
    """A whole cluster's folders under one root, for `cluster local`, tests and
    benchmarks on ONE machine (no key custody): root/ca, root/s1, root/s2
    (each server's folder, which passes check_custody) and root/owners/NAME
    (local_owner). Made when missing; returns the folders by name."""
    dirs = {"ca": os.path.join(root, "ca"), "owners": os.path.join(root, OWNERS)}
    dirs.update({r: os.path.join(root, r) for r in SERVER_ROLES})
    if not os.path.exists(os.path.join(dirs["ca"], "ca.pem")):
        os.makedirs(root, exist_ok=True)
        _write(os.path.join(root, LOCAL_MARKER),
               b"Every folder of a tf_privpy cluster on one machine, for trying things:\n"
               b"this layout gives no key custody. For real deployments each folder goes\n"
               b"to its own machine: see docs/share_service.md.\n")
        make_ca(dirs["ca"])
    for role in SERVER_ROLES:
        if not os.path.exists(os.path.join(dirs[role], role + ".pem")):
            sign_server(dirs["ca"], server_key(dirs[role], role, overwrite=True), role, hosts)
    os.makedirs(dirs["owners"], exist_ok=True)
    return dirs


def is_local_tree(root: str) -> bool:
    return os.path.exists(os.path.join(root, LOCAL_MARKER))


def local_owner(root: str, name: str) -> Dict[str, str]:
    """Owner `name`'s folder root/owners/NAME in a local_tree: its key made
    there, enrolled with S1 and S2, when missing. Returns owner_paths."""
    dirs = local_tree(root)
    owner_dir = os.path.join(dirs["owners"], check_owner_name(name))
    paths = owner_paths(owner_dir, name)
    if not os.path.exists(paths["cert"]):
        made = owner_key(owner_dir, name, os.path.join(dirs["ca"], "ca.pem"))
        for role in SERVER_ROLES:
            enrol(dirs[role], made["cert"], made["fingerprint"])
    return paths


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tf_privpy.deploy.service.ca", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make-ca", help="CA machine: the cluster CA")
    m.add_argument("dir")
    m.add_argument("--overwrite", action="store_true")
    k = sub.add_parser("server-key", help="S1's or S2's machine: its TLS key and request")
    k.add_argument("dir")
    k.add_argument("--role", required=True, choices=SERVER_ROLES)
    k.add_argument("--overwrite", action="store_true")
    s = sub.add_parser("sign-server", help="CA machine: sign a server's request")
    s.add_argument("dir")
    s.add_argument("csr")
    s.add_argument("--role", required=True, choices=SERVER_ROLES)
    s.add_argument("--host", action="append", default=[],
                   help="a DNS name or IP address of the server (repeat; default: loopback)")
    o = sub.add_parser("owner-key", help="owner's machine: its key and client certificate")
    o.add_argument("dir")
    o.add_argument("name")
    o.add_argument("--ca", help="the cluster's ca.pem, copied into dir")
    o.add_argument("--overwrite", action="store_true")
    e = sub.add_parser("enrol", help="a server's machine: enrol an owner's certificate")
    e.add_argument("dir")
    e.add_argument("cert")
    e.add_argument("--fingerprint", required=True,
                   help="the SHA-256 the owner read to you (not from the same message)")
    e.add_argument("--overwrite", action="store_true")
    r = sub.add_parser("revoke", help="a server's machine: remove an owner's enrolment")
    r.add_argument("dir")
    r.add_argument("name")
    f = sub.add_parser("fingerprint", help="the key fingerprint of a certificate")
    f.add_argument("cert")
    a = p.parse_args(argv)
    try:
        if a.cmd == "make-ca":
            print(f"ca: {make_ca(a.dir, a.overwrite)}")
        elif a.cmd == "server-key":
            print(f"request: {server_key(a.dir, a.role, a.overwrite)}")
        elif a.cmd == "sign-server":
            print(f"certificate: {sign_server(a.dir, a.csr, a.role, a.host or DEFAULT_HOSTS)}")
        elif a.cmd == "owner-key":
            for what, v in owner_key(a.dir, a.name, a.ca, a.overwrite).items():
                print(f"{what}: {v}")
        elif a.cmd == "enrol":
            name, fp = enrol(a.dir, a.cert, a.fingerprint, a.overwrite)
            print(f"enrolled {name}: {fp}")
        elif a.cmd == "revoke":
            print(f"revoked {a.name}: {revoke(a.dir, a.name)}")
        else:
            print(fingerprint(load_cert(a.cert)))
    except (CAError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
