"""Key custody of the share service (issue 24, section 1): no single server's
operator can log in to the other server as a data owner.

Each key is made in the folder of the machine that uses it (tf_privpy/deploy/service/
ca.py): the CA's in ca/, S1's in s1/, S2's in s2/, each owner's in its own
folder; each server's operator enrols the owners' public certificates in its
own folder. The services run as real processes with only their own folder.

test_s1_operator_cannot_log_in_to_s2 runs tests/custody_attack.py, every login
S1's operator can make from S1's folder, against S2. On the old layout (one
CA folder for S1 with ca.key, both servers' keys and owners/NAME.key) the same
attack fetched S2's share (see the commit message: 'key owners/alice.key with
its certificate' and 'minted by ca.key' both got in), so the test failed
there; test_attack_harness_gets_in_when_s1_holds_an_owner_key shows the harness
does get in when S1's folder holds what the old layout put there.
"""
import datetime
import json
import os
import shutil

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import custody_attack
from tf_privpy.deploy.service import ca, local
from tf_privpy.deploy.service import server as service_server
from tf_privpy.deploy.service.client import ServiceCluster, ShareClient, ShareServiceError


def four_machines(root):
    """The folders of a deployment, each made as on its own machine: the CA's,
    S1's and S2's (key and request there, certificate signed by the CA), and
    the owners alice's and bob's (keys there; alice enrolled on both servers,
    bob on S1 only)."""
    d = {k: os.path.join(root, k) for k in ("ca", "s1", "s2", "alice", "bob")}
    ca.make_ca(d["ca"])
    for role in ca.SERVER_ROLES:
        csr = ca.server_key(d[role], role)                 # on the server's machine
        signed = ca.sign_server(d["ca"], csr, role, out=os.path.join(root, role + ".pem"))
        shutil.copy(signed, d[role])                       # the certificate carried back
    ca_pem = os.path.join(d["ca"], "ca.pem")
    owners = {n: ca.owner_key(d[n], n, ca_pem) for n in ("alice", "bob")}
    for role in ca.SERVER_ROLES:
        ca.enrol(d[role], owners["alice"]["cert"], owners["alice"]["fingerprint"])
    ca.enrol(d["s1"], owners["bob"]["cert"], owners["bob"]["fingerprint"])
    return d, owners


def start(d, tmp):
    svcs = [local.LocalService(r, d[r], os.path.join(tmp, "store-" + r)) for r in ca.SERVER_ROLES]
    try:
        for s in svcs:
            s.start()
    except BaseException:
        for s in svcs:
            s.stop()
        raise
    return svcs


def cluster_of(svcs, paths):
    return ServiceCluster(s1=svcs[0].address, s2=svcs[1].address, ca=paths["ca"],
                          cert=paths["cert"], key=paths["key"])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("machines"))
    d, owners = four_machines(root)
    svcs = start(d, root)
    with ShareClient(cluster_of(svcs, owners["alice"]), timeout=30) as c:
        c.upload("alice-secret", np.arange(12.0).reshape(3, 4))
    yield d, owners, svcs
    for s in svcs:
        s.stop()


def private_keys_under(folder):
    return sorted(os.path.relpath(os.path.join(t, f), folder) for t, _, fs in os.walk(folder)
                  for f in fs if b"PRIVATE KEY-----" in open(os.path.join(t, f), "rb").read())


def test_each_folder_holds_only_its_own_private_key(deployment):
    d, _, _ = deployment
    assert private_keys_under(d["ca"]) == ["ca.key"]
    assert private_keys_under(d["s1"]) == ["s1.key"]
    assert private_keys_under(d["s2"]) == ["s2.key"]
    assert private_keys_under(d["alice"]) == ["alice.key"]
    assert sorted(os.listdir(os.path.join(d["s1"], "owners"))) == ["alice.pem", "bob.pem"]
    for role in ca.SERVER_ROLES:
        ca.check_custody(d[role], role)
        assert os.stat(os.path.join(d[role], role + ".key")).st_mode & 0o777 == 0o600


def test_s1_operator_cannot_log_in_to_s2(deployment):
    """(a) Every login S1's operator can make from S1's folder (S1's key, the
    owners' public certificates, certificates it mints with any key found,
    self-signed ones with the owner's name) is refused by S2."""
    d, owners, svcs = deployment
    lines = []
    won = custody_attack.attack(d["s1"], svcs[1].address, owners["alice"]["ca"], "alice",
                                "alice-secret", log=lines.append)
    assert won == [], won
    assert len(lines) >= 7, lines  # the harness did try: S1's key, each cert found ...
    assert any("self-signed with" in l and "s1.key" in l for l in lines), lines
    assert any("owners/alice.pem re-made" in l for l in lines), lines
    # the owner itself still gets in with its own key
    with ShareClient(cluster_of(svcs, owners["alice"]), timeout=30) as c:
        np.testing.assert_array_equal(c.fetch("alice-secret"), np.arange(12.0).reshape(3, 4))


def test_attack_harness_gets_in_when_s1_holds_an_owner_key(deployment, tmp_path):
    """The harness is no straw man: give S1's folder what the old layout
    gave it (the owner's key beside its certificate) and it fetches S2's share."""
    d, owners, svcs = deployment
    old_style = tmp_path / "s1-old"
    shutil.copytree(d["s1"], old_style)
    shutil.copy(owners["alice"]["key"], old_style / "owners" / "alice.key")
    won = custody_attack.attack(str(old_style), svcs[1].address, owners["alice"]["ca"],
                                "alice", "alice-secret", log=lambda _: None)
    assert any("alice.key" in w for w in won), won


def _self_signed(name, key):
    n = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(n).issuer_name(n).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
            .sign(key, hashes.SHA256()))


def _write_pair(folder, stem, cert, key):
    os.makedirs(folder, exist_ok=True)
    paths = {"cert": os.path.join(folder, stem + ".pem"),
             "key": os.path.join(folder, stem + ".key")}
    with open(paths["cert"], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths["key"], "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return paths


def test_owners_are_enrolled_per_server_and_by_key(deployment, tmp_path):
    """(b) bob, enrolled on S1 only, is refused by S2; an owner's own key
    cannot log in under another owner's name (alice's key in a certificate
    with CN bob, which S1 enrolled for bob's key)."""
    d, owners, svcs = deployment
    with ShareClient(cluster_of(svcs, owners["bob"]), timeout=30) as bob:
        assert bob.stat(0, "nothing") is None  # S1 takes bob
        with pytest.raises(ShareServiceError) as e:
            bob.stat(1, "nothing")
        assert e.value.server == "S2" and e.value.code == grpc.StatusCode.UNAVAILABLE
    alice_key = serialization.load_pem_private_key(open(owners["alice"]["key"], "rb").read(),
                                                   None)
    forged = _write_pair(str(tmp_path), "bob-forged", _self_signed("bob", alice_key), alice_key)
    with ShareClient(cluster_of(svcs, dict(forged, ca=owners["alice"]["ca"])), timeout=30) as c:
        with pytest.raises(ShareServiceError) as e:
            c.stat(0, "nothing")
        assert e.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)


def test_owner_end_to_end_with_the_key_commands(tmp_path, capsys):
    """(b) The commands, each in its machine's folder: `new --certs` lays out
    the CA and the servers' folders, server-key/sign-server make S1's and
    S2's certificates, owner-key makes the owner's key and settings there,
    enrol on each server; then upload, fetch, and revoke refuses it (per call
    on the open connection, in the handshake on a new one) and a re-enrol
    of the revoked key."""
    from tf_privpy.deploy import cluster_file as cf
    from tf_privpy.deploy.cluster import lay_out_certs, run_enrol, run_owner_key, run_revoke, \
        run_server_key, run_sign_server
    root = tmp_path
    tasks = {r: f"127.0.0.1:{7101 + i}" for i, r in enumerate(cf.ROLES)}
    svcs = [local.LocalService(r, str(root / r), str(root / ("store-" + r)))
            for r in ca.SERVER_ROLES]
    cpath = cf.Cluster(tasks=tasks, share_services={r: s.address for r, s in zip(
        ca.SERVER_ROLES, svcs)}).save(str(root / "cluster.json"))
    assert lay_out_certs(str(root), cpath) == 0
    out = capsys.readouterr().out
    assert "stays on THIS machine" in out and "enrol NAME.pem" in out
    assert private_keys_under(str(root)) == ["ca/ca.key"]  # no server's, no owner's key
    for r in ca.SERVER_ROLES:
        assert run_server_key(r, str(root / r)) == 0
        assert run_sign_server(str(root / r / f"{r}.csr"), r, str(root / "ca"), [], cpath) == 0
    assert private_keys_under(str(root / "s1")) == ["s1.key"]
    owner_dir = str(root / "owner")
    assert run_owner_key("hospital-a", owner_dir, None, str(root / "owner" / "cluster.json")) == 0
    fp = capsys.readouterr().out.strip().splitlines()[-1]
    assert fp == ca.fingerprint(ca.load_cert(os.path.join(owner_dir, "hospital-a.pem")))
    cert = os.path.join(owner_dir, "hospital-a.pem")
    assert run_enrol(cert, str(root / "s1"), None) == 2  # no fingerprint: refused
    assert run_enrol(cert, str(root / "s1"), "00" * 32) == 1  # another key's: refused
    for r in ca.SERVER_ROLES:
        assert run_enrol(cert, str(root / r), fp) == 0
    settings = os.path.join(owner_dir, "hospital-a.json")
    assert json.load(open(settings))["share_services"]["s2"] == svcs[1].address
    try:
        for s in svcs:
            s.start()
        with ShareClient(settings, timeout=30) as c:  # tp.client's settings file
            c.upload("h-x", np.ones((2, 2)))
            np.testing.assert_array_equal(c.fetch("h-x"), np.ones((2, 2)))
            for r in ca.SERVER_ROLES:
                assert run_revoke("hospital-a", str(root / r)) == 0
            with pytest.raises(ShareServiceError) as e:
                c.fetch("h-x")
            assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        with ShareClient(settings, timeout=30) as c, pytest.raises(ShareServiceError) as e:
            c.fetch("h-x")
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        assert run_enrol(cert, str(root / "s1"), fp) == 1  # a revoked key stays out
        assert "was revoked here" in capsys.readouterr().err
    finally:
        for s in svcs:
            s.stop()


@pytest.mark.parametrize("intruder", ["ca.key", "owner key", "other server key",
                                      "key under another name", "owner key in owners/"])
def test_server_refuses_a_folder_with_foreign_keys(tmp_path, intruder):
    """(c) serve() and `tf_privpy.server --share_port` refuse to start when S1's
    folder holds another private key, naming the file."""
    from tf_privpy.deploy.server import StartError, _start_share_service
    d, owners = four_machines(str(tmp_path))
    src, dst = {
        "ca.key": (os.path.join(d["ca"], "ca.key"), "ca.key"),
        "owner key": (owners["alice"]["key"], "alice.key"),
        "other server key": (os.path.join(d["s2"], "s2.key"), "s2.key"),
        "key under another name": (os.path.join(d["ca"], "ca.key"), "notes.txt"),
        "owner key in owners/": (owners["alice"]["key"], os.path.join("owners", "x.pem")),
    }[intruder]
    bad = os.path.join(d["s1"], dst)
    shutil.copy(src, bad)
    with pytest.raises(ca.CAError, match="holds a private key|may hold only its own key") as e:
        service_server.serve("s1", 0, d["s1"], str(tmp_path / "store"))
    assert bad in str(e.value)
    with pytest.raises(StartError, match="cannot start the share service") as e:
        _start_share_service("s1", "127.0.0.1", 0, d["s1"], str(tmp_path / "store"), 128)
    assert bad in str(e.value)


def test_server_refuses_a_certificate_not_its_own(tmp_path):
    """(c) S1's certificate must be for S1's key and carry S1's role name; the
    service process exits with the reason."""
    d, _ = four_machines(str(tmp_path))
    shutil.copy(os.path.join(d["s2"], "s2.pem"), os.path.join(d["s1"], "s1.pem"))
    with pytest.raises(ca.CAError, match="is not the certificate of"):
        ca.check_custody(d["s1"], "s1")
    # S1's own key, but a certificate for S2's name
    csr = os.path.join(d["s1"], "s1.csr")
    ca.sign_server(d["ca"], csr, "s2", out=os.path.join(d["s1"], "s1.pem"))
    with pytest.raises(ca.CAError, match="not S1's server certificate"):
        ca.check_custody(d["s1"], "s1")
    shutil.copy(os.path.join(d["ca"], "ca.key"), os.path.join(d["s1"], "ca.key"))
    svc = local.LocalService("s1", d["s1"], str(tmp_path / "store"))
    with pytest.raises(RuntimeError, match="ca.key holds a private key|ca.key: S1's folder"):
        svc.start(timeout=30)


def test_owner_and_revoke_names_are_validated(tmp_path):
    """(d) fullmatch, not match with `$`: 'alice\\n' is no owner name; revoke of
    '../ca' is refused and touches nothing (it used to delete ca.pem)."""
    d, _ = four_machines(str(tmp_path))
    for bad in ("alice\n", "../ca", "tf_privpy-s1", "", ".hidden", "a" * 65):
        with pytest.raises(ca.CAError, match="owner name"):
            ca.check_owner_name(bad)
        with pytest.raises(ca.CAError, match="owner name"):
            ca.owner_key(str(tmp_path / "o"), bad)
    key = ec.generate_private_key(ec.SECP256R1())
    nl = _write_pair(str(tmp_path / "nl"), "nl", _self_signed("alice\n", key), key)
    with pytest.raises(ca.CAError, match="owner name"):
        ca.enrol(d["s1"], nl["cert"])
    shutil.copy(os.path.join(d["ca"], "ca.pem"), os.path.join(d["s1"], "ca.pem"))
    before = {p: open(os.path.join(d["s1"], p), "rb").read()
              for p in ("ca.pem", "s1.pem", "revoked.json")}
    for bad in ("../ca", "../s1", "alice\n", "../../ca/ca"):
        with pytest.raises(ca.CAError, match="owner name"):
            ca.revoke(d["s1"], bad)
    assert {p: open(os.path.join(d["s1"], p), "rb").read() for p in before} == before
    assert os.path.exists(os.path.join(d["ca"], "ca.pem"))
    # the service's own check of a presented CN
    assert ca.OWNER_NAME.fullmatch("alice\n") is None


def test_enrolment_sees_each_change_at_once(tmp_path):
    """The service's view of its enrolments (checked per call and per
    handshake) follows enrol and revoke at once, also two changes within one
    mtime tick (the racy window) and, once past it, on the cheap per-call path;
    a certificate edited in place within RESCAN_S."""
    import time
    d, owners = four_machines(str(tmp_path))
    e = service_server.Enrolment(d["s2"])
    assert set(e.current()[0]) == {"alice"}
    ca.enrol(d["s2"], owners["bob"]["cert"], owners["bob"]["fingerprint"])
    assert set(e.current()[0]) == {"alice", "bob"}
    ca.revoke(d["s2"], "bob")  # within the same tick, most likely
    assert set(e.current()[0]) == {"alice"}
    e.RACY_S = 0.0  # as if the changes were long ago: calls take the quick path
    time.sleep(0.05)  # past the file system's clock tick
    e.current()
    assert not e._racy
    assert e.current()[0] == {"alice": owners["alice"]["fingerprint"]}
    time.sleep(0.05)
    ca.revoke(d["s2"], "alice")
    assert e.current()[0] == {}
    assert e.current()[1].startswith(b"-----BEGIN CERTIFICATE-----")  # a root no one holds
    # an in-place edit (same inode, the folder unchanged): seen within RESCAN_S
    ca.enrol(d["s1"], owners["bob"]["cert"], owners["bob"]["fingerprint"], overwrite=True)
    e1 = service_server.Enrolment(d["s1"])
    e1.RACY_S, e1.RESCAN_S = 0.0, 0.2
    time.sleep(0.05)
    e1.current()
    with open(os.path.join(d["s1"], "owners", "bob.pem"), "r+b") as f:
        f.write(open(owners["alice"]["cert"], "rb").read())  # bob.pem now holds alice's
        f.truncate()
    time.sleep(0.25)
    assert set(e1.current()[0]) == {"alice"}  # the misnamed file is no enrolment


def test_custody_scan_follows_linked_folders_once(tmp_path):
    """A folder linked into S1's (here: the CA's) is scanned too, and a link
    loop ends the walk."""
    d, _ = four_machines(str(tmp_path))
    os.symlink(d["s1"], os.path.join(d["s1"], "owners", "loop"))
    ca.check_custody(d["s1"], "s1")
    os.symlink(d["ca"], os.path.join(d["s1"], "backup"))
    with pytest.raises(ca.CAError, match="ca.key"):
        ca.check_custody(d["s1"], "s1")
