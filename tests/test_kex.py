"""The kex family (ops/kex) and protocols/mpc/runtime/identity.py: X25519 and HKDF
against their RFC vectors inside TF (where the crypto calls bind to TF's
BoringSSL), the pair key formula against an independent implementation
(pyca/cryptography), authentication against a man in the middle, small-order
keys, identity key files and placement.

The MITM check is shown to catch broken variants: with the static-key DH
terms left out of the formula the attacker computes a victim's key
(test_mitm_check_catches_broken_variants; the commit message records the
same check failing on a kernel built without them)."""
import contextlib
import os
import stat

import numpy as np
import pytest
import tensorflow as tf
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime import identity as ID
from tf_privpy.protocols.mpc.runtime import kernels as K
from tf_privpy.protocols.mpc.runtime import keying

from graphcheck import canon, graph_violations

H = bytes.fromhex
SALT = b"tf_privpy/kex/v1 X25519 Noise-KK-like HKDF-SHA256"
#: the DH terms of the pair key, in the initiator's order (ops/kex/kex.h)
TERMS = ("ee", "se", "es", "ss")

# RFC 7748 §6.1
ALICE_PRIV = H("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
ALICE_PUB = H("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
BOB_PRIV = H("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
BOB_PUB = H("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
SHARED = H("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")

# Small-order points and their non-canonical encodings (u = 0, 1, the two
# points of order 8, p - 1, p, p + 1): X25519 of any of them is all zeros.
SMALL_ORDER = [
    "00" * 32, "01" + "00" * 31,
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
    "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
    "ec" + "ff" * 30 + "7f", "ed" + "ff" * 30 + "7f", "ee" + "ff" * 30 + "7f",
]


def b(t) -> bytes:
    return t.numpy().tobytes()


def dev(role):
    return tp.servers()[role]


# ------------------------------------------------ independent reference (pyca)
def dh(priv: bytes, pub: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(priv).exchange(
        X25519PublicKey.from_public_bytes(pub))


def pub_of(priv: bytes) -> bytes:
    return dh(priv, (9).to_bytes(32, "little"))


def lp(x: bytes) -> bytes:
    return len(x).to_bytes(2, "big") + x


def reference_key(terms, roles, statics, ephs, context=b"", order=TERMS) -> bytes:
    """HKDF-SHA256(salt, ikm = the terms in `order`, info = transcript), 16 bytes;
    roles, statics and ephs in initiator, responder order."""
    info = lp(context) + lp(roles[0].encode()) + lp(roles[1].encode()) + b"".join(
        statics) + b"".join(ephs)
    return HKDF(hashes.SHA256(), 16, SALT, info).derive(b"".join(terms[t] for t in order))


def reference_derive(order=TERMS):
    """The pair key formula, from one side, as a pure-Python function."""
    def derive(s, e, peer_s, peer_e, own, peer, context=""):
        own_s, own_e = pub_of(s), pub_of(e)
        if own < peer:  # initiator
            terms = {"ee": dh(e, peer_e), "se": dh(s, peer_e), "es": dh(e, peer_s),
                     "ss": dh(s, peer_s)}
            return reference_key(terms, (own, peer), (own_s, peer_s), (own_e, peer_e),
                                 context.encode(), order)
        terms = {"ee": dh(e, peer_e), "se": dh(e, peer_s), "es": dh(s, peer_e),
                 "ss": dh(s, peer_s)}
        return reference_key(terms, (peer, own), (peer_s, own_s), (peer_e, own_e),
                             context.encode(), order)
    return derive


def kernel_derive(s, e, peer_s, peer_e, own, peer, context=""):
    """KexDerive on own's device."""
    with tf.device(dev(own)):
        return b(K.kex_derive(K._u8(s), K._u8(e), peer_s, peer_e, own, peer, context))


def keypair(role="client"):
    with tf.device(dev(role)):
        priv, pub = K.x25519_keypair()
    return b(priv), b(pub)  # fetched: tests only


# --------------------------------------------------------- RFC vectors in TF
def test_x25519_rfc7748_vectors():
    assert b(K.x25519_public_key(ALICE_PRIV)) == ALICE_PUB
    assert b(K.x25519_public_key(BOB_PRIV)) == BOB_PUB
    assert b(K.x25519(ALICE_PRIV, BOB_PUB)) == SHARED
    assert b(K.x25519(BOB_PRIV, ALICE_PUB)) == SHARED
    # §5.2: arbitrary u-coordinates (clamping, bit 255 masked)
    for scalar, u, out in [
        ("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
         "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
         "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"),
        ("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
         "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
         "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957")]:
        assert b(K.x25519(H(scalar), H(u))) == H(out)


@pytest.mark.parametrize("ikm,salt,info,okm", [
    (b"\x0b" * 22, H("000102030405060708090a0b0c"), H("f0f1f2f3f4f5f6f7f8f9"),
     "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"),
    (bytes(range(0x50)), bytes(range(0x60, 0xb0)), bytes(range(0xb0, 0x100)),
     "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c6"
     "5e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"),
    (b"\x0b" * 22, b"", b"",
     "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"),
], ids=["A.1", "A.2", "A.3"])
def test_hkdf_rfc5869_vectors(ikm, salt, info, okm):
    assert b(K.hkdf_sha256(ikm, salt, info, len(H(okm)))) == H(okm)


def test_hkdf_length_limit():
    with pytest.raises(tf.errors.InvalidArgumentError, match="8160"):
        K.hkdf_sha256(b"k", b"", b"", 8161)


def test_keypair_fresh_and_consistent():
    (p1, q1), (p2, q2) = keypair("S1"), keypair("S1")
    assert p1 != p2 and q1 != q2
    assert q1 == pub_of(p1) == b(K.x25519_public_key(p1))


# ------------------------------------------------------------ the pair key
def test_formula_matches_independent_reference():
    (s1, S1), (s2, S2), (e1, E1), (e2, E2) = (keypair() for _ in range(4))
    ref = reference_derive()
    for r1, r2, ctx in [("S1", "S2", ""), ("T2", "S1", "prg"), ("S2", "T1", "channel")]:
        k1 = kernel_derive(s1, e1, S2, E2, r1, r2, ctx)
        k2 = kernel_derive(s2, e2, S1, E1, r2, r1, ctx)
        assert k1 == k2 == ref(s1, e1, S2, E2, r1, r2, ctx) == ref(s2, e2, S1, E1, r2, r1, ctx)


@pytest.fixture(scope="module")
def ids(tmp_path_factory):
    """Identity keys of S1, S2, T1 and T2 in files, loaded on their devices."""
    d = tmp_path_factory.mktemp("ids")
    keys = {r: ID.generate_identity_key_file(str(d / f"{r}.key")) for r in tp.servers()
            if r != "client"}
    dev_priv = {r: ID.load_identity_on_device(str(d / f"{r}.key"), dev(r),
                                              expected_public=k.public_key)[0]
                for r, k in keys.items()}
    return keys, dev_priv, {r: k.public_key for r, k in keys.items()}


def party(ids, role, static_private=None):
    _, dev_priv, _ = ids
    return ID.KexParty(role, dev(role), dev_priv[role] if static_private is None
                       else static_private)


def channel_send(src, dst, t):
    return tp.get_runtime().runtime.channels.send1(src, dst, t)


@pytest.mark.parametrize("mode", ["eager", "tf_function"])
def test_both_sides_same_key_fresh_each_run(ids, mode):
    _, _, pubs = ids

    def exchange(ra, rb):
        return ID.pair_key_exchange(party(ids, ra), party(ids, rb), pubs, channel_send)
    if mode == "tf_function":
        exchange = tf.function(exchange)
    runs = [exchange("S1", "S2") for _ in range(3)]
    for ka, kb in runs:
        assert ka.dtype == tf.int64 and ka.shape == [2]
        assert b(ka) == b(kb)
        if mode == "eager":  # a tf.function returns its outputs to the caller's device
            assert canon(ka.device) == canon(dev("S1")) and canon(kb.device) == canon(dev("S2"))
    assert len({b(ka) for ka, _ in runs}) == 3  # fresh ephemerals: fresh keys
    # every pair of roles gets its own key; the argument order does not matter
    kx, ky = exchange("T2", "S1")
    assert b(kx) == b(ky) and b(kx) not in {b(ka) for ka, _ in runs}


def test_context_separates_keys(ids):
    (s1, S1), (s2, S2), (e1, E1), (e2, E2) = (keypair() for _ in range(4))
    assert kernel_derive(s1, e1, S2, E2, "S1", "S2", "prg") != \
        kernel_derive(s1, e1, S2, E2, "S1", "S2", "channel")


def test_only_public_keys_cross_and_privates_stay_on_their_server(ids):
    _, _, pubs = ids
    # as tp.init will use it: each side keeps its key in a variable on its own
    # server (a function returning the keys would hand them to the driver)
    store = {}
    for r in ("S1", "T1"):
        with tf.device(dev(r)):
            store[r] = tf.Variable(tf.zeros([2], tf.int64), trainable=False)

    def exchange():
        k1, k2 = ID.pair_key_exchange(party(ids, "S1"), party(ids, "T1"), pubs, channel_send)
        for r, k in (("S1", k1), ("T1", k2)):
            with tf.device(dev(r)):
                store[r].assign(k)

    concrete = tf.function(exchange).get_concrete_function()
    # the identity keys are captured server tensors: taint follows them, and
    # every cross-device value goes through the channel
    assert graph_violations(concrete, tp.servers(), {}) == []
    ops = concrete.graph.get_operations()
    keypairs = [op for op in ops if op.type == "TfPrivpy>X25519Keypair"]
    derives = [op for op in ops if op.type == "TfPrivpy>KexDerive"]
    assert sorted(canon(op.device) for op in keypairs) == \
        sorted(canon(op.device) for op in derives) == sorted(canon(dev(r)) for r in ("S1", "T1"))
    for op in keypairs:
        # the ephemeral private key (output 0) is read by KexDerive on its device only
        readers = op.outputs[0].consumers()
        assert [c.type for c in readers] == ["TfPrivpy>KexDerive"]
        assert canon(readers[0].device) == canon(op.device)


# ---------------------------------------------------------- authentication
def mitm_learns(derive, order):
    """S1 <-> S2 with a man in the middle M that replaces each side's
    ephemeral public key with one of its own (it has no identity key the
    cluster file names). Returns which victims' keys M reconstructs from what
    it knows (its keys, every public key) with the formula of `order`; the
    unknown DH terms it fills with its best guesses (as if its own static key
    were the peer's)."""
    (sI, SI), (sR, SR) = keypair("S1"), keypair("S2")
    (eI, EI), (eR, ER) = keypair("S1"), keypair("S2")
    (sM, _), (eM1, EM1), (eM2, EM2) = keypair(), keypair(), keypair()
    kI = derive(sI, eI, SR, EM1, "S1", "S2")  # S1 got EM1 instead of ER
    kR = derive(sR, eR, SI, EM2, "S2", "S1")  # S2 got EM2 instead of EI
    assert kI != kR
    # What M can compute of each victim's DH terms (and guesses for the rest).
    of_I = {"ee": dh(eM1, EI), "se": dh(eM1, SI), "es": dh(sM, EI), "ss": dh(sM, SI)}
    of_R = {"ee": dh(eM2, ER), "se": dh(sM, ER), "es": dh(eM2, SR), "ss": dh(sM, SR)}
    guess_I = reference_key(of_I, ("S1", "S2"), (SI, SR), (EI, EM1), order=order)
    guess_R = reference_key(of_R, ("S1", "S2"), (SI, SR), (EM2, ER), order=order)
    return {"S1": guess_I == kI, "S2": guess_R == kR}


def test_mitm_learns_neither_key():
    assert mitm_learns(kernel_derive, TERMS) == {"S1": False, "S2": False}


@pytest.mark.parametrize("order,learns", [
    (("ee",), {"S1": True, "S2": True}),          # no static-key terms at all
    (("ee", "se"), {"S1": True, "S2": False}),    # es authenticates S2 to S1
    (("ee", "es"), {"S1": False, "S2": True}),    # se authenticates S1 to S2
    (("ee", "se", "es"), {"S1": False, "S2": False}),
])
def test_mitm_check_catches_broken_variants(order, learns):
    """The check above on formulas that drop DH terms (pure-Python stand-ins
    for a broken kernel): without the terms that involve the peer's static
    key, the MITM computes that victim's key, so the check would fail."""
    assert mitm_learns(reference_derive(order), order) == learns


def test_substituted_ephemeral_gives_different_keys(ids):
    _, _, pubs = ids
    _, EM = keypair()

    def mitm(src, dst, t):
        with tf.device(dev(dst)):
            return tf.constant(np.frombuffer(EM, np.uint8))
    ka, kb = ID.pair_key_exchange(party(ids, "S1"), party(ids, "S2"), pubs, mitm)
    assert b(ka) != b(kb)


def test_wrong_static_key_gives_different_keys(ids):
    keys, _, pubs = ids
    # S2 runs with a key other than the one the cluster file names for it ...
    with tf.device(dev("S2")):
        impostor, _ = K.x25519_keypair()
    ka, kb = ID.pair_key_exchange(party(ids, "S1"), party(ids, "S2", impostor), pubs,
                                  channel_send)
    assert b(ka) != b(kb)
    # ... or S1's copy of the cluster file has a wrong key for S2.
    s1, s2 = keys["S1"].private_key, keys["S2"].private_key
    (e1, E1), (e2, E2) = keypair(), keypair()
    assert kernel_derive(s1, e1, keypair()[1], E2, "S1", "S2") != \
        kernel_derive(s2, e2, pubs["S1"], E1, "S2", "S1")
    assert kernel_derive(s1, e1, pubs["S2"], E2, "S1", "S2") == \
        kernel_derive(s2, e2, pubs["S1"], E1, "S2", "S1")


# ------------------------------------- whom a server trusts (issue 24, §4)
@contextlib.contextmanager
def swapped_in_graphs(swaps, servers):
    """Test-only hook in the driver: while active, a constant that a graph
    being built puts on one of the `servers`' devices with a value in
    `swaps` (bytes: a uint8 vector's or a string's) gets the replacement
    instead, as an attacker on a driver-to-server link who rewrites the
    values in the graphs sent would do. Constants made eagerly (a server's
    own Python, in the same process in embedded tests) and those on the
    client (never sent) are left alone. Yields the list of values swapped."""
    real = tf.constant
    on = {canon(d) for d in servers}
    done = []

    def constant(value, *args, **kwargs):
        t = real(value, *args, **kwargs)
        if tf.executing_eagerly() or canon(t.device) not in on:
            return t
        if isinstance(value, str):
            value = value.encode()
        raw = (value.tobytes() if isinstance(value, np.ndarray) and value.dtype == np.uint8
               else value if isinstance(value, bytes) else None)
        if raw not in swaps:
            return t
        done.append(raw)
        new = swaps[raw]
        return real(new if t.dtype == tf.string else np.frombuffer(new, np.uint8),
                    *args, **kwargs)

    tf.constant = constant
    try:
        yield done
    finally:
        tf.constant = real


def _exchange(devices, send):
    """Runs keying.exchanged_keys on fresh key variables; returns them."""
    parties = keying.SERVERS
    with tf.init_scope():
        key_sets = {"prg": keying.key_variables(parties, devices, "prg"),
                    "link": keying.key_variables(("client",) + parties, devices, "link")}
    return key_sets


def test_servers_trust_only_the_keys_they_hold(tmp_path):
    """The key exchange of distributed mode, with the four servers' key
    functions registered in this process: a driver (or a link attacker)
    that swaps T1's public key and key path in what it sends changes
    nothing, because the graph holds neither (keying.server_held_keys);
    a server whose own cluster file names another key for T1 fails the
    exchange with T1. Before issue 24 the driver's graph held both
    (tests/test_distributed.py::test_a_driver_cannot_swap_the_servers_keys
    shows the swap taking effect there)."""
    rt = tp.get_runtime().runtime
    devices, send = rt.devices, rt.channels.send1
    servers = keying.SERVERS
    paths = {r: str(tmp_path / f"{r}.key") for r in servers}
    pubs = {r: ID.generate_identity_key_file(p).public_key for r, p in paths.items()}
    attacker = ID.generate_identity_key_file(str(tmp_path / "attacker.key"))
    held = [keying.register_server_keys(r, paths[r], pubs) for r in servers]
    swaps = {pubs["T1"]: attacker.public_key,
             paths["T1"].encode(): str(tmp_path / "attacker.key").encode()}
    key_sets = _exchange(devices, send)
    with swapped_in_graphs(swaps, [devices[r] for r in servers]) as swapped:
        keying.exchanged_keys(key_sets, pubs, devices, send)
    assert swapped == []  # nothing to swap: the graph names no server key, no path
    for keys in key_sets.values():
        for (a, c), at in keys.items():
            assert b(at[a]) == b(at[c]) and any(b(at[a])), (a, c)
    # S1's own cluster file names the attacker's key for T1: S1-T1 fails
    held[0] = keying.register_server_keys("S1", paths["S1"], dict(pubs, T1=attacker.public_key))
    with pytest.raises(keying.KeyExchangeError, match="failed between S1-T1: ") as e:
        keying.exchanged_keys(_exchange(devices, send), pubs, devices, send)
    assert e.value.pairs == [("S1", "T1")]
    del held


# ------------------------------------------------------------- rejections
@pytest.mark.parametrize("point", SMALL_ORDER, ids=[p[:4] for p in SMALL_ORDER])
def test_small_order_points_rejected(point):
    with pytest.raises(tf.errors.InvalidArgumentError, match="small-order point"):
        K.x25519(ALICE_PRIV, H(point))
    (s, _), (e, _), (_, S), (_, E) = keypair(), keypair(), keypair(), keypair()
    with pytest.raises(tf.errors.InvalidArgumentError, match="ephemeral key.*small-order"):
        kernel_derive(s, e, S, H(point), "S1", "S2")
    with pytest.raises(tf.errors.InvalidArgumentError, match="static key.*small-order"):
        kernel_derive(s, e, H(point), E, "S1", "S2")


def test_derive_rejects_misuse():
    (s, S), (e, E), (_, S2), (_, E2) = keypair(), keypair(), keypair(), keypair()
    with pytest.raises(tf.errors.InvalidArgumentError, match="two different roles"):
        kernel_derive(s, e, S2, E2, "S1", "S1")
    with pytest.raises(tf.errors.InvalidArgumentError, match="equals our own"):
        kernel_derive(s, e, S, E2, "S1", "S2")
    with pytest.raises(tf.errors.InvalidArgumentError, match="reflected"):
        kernel_derive(s, e, S2, E, "S1", "S2")
    with pytest.raises(tf.errors.InvalidArgumentError, match="all zeros"):
        kernel_derive(bytes(32), e, S2, E2, "S1", "S2")
    with pytest.raises(ValueError, match="two different roles"):
        ID.pair_key_exchange(ID.KexParty("S1", dev("S1"), K._u8(s)),
                             ID.KexParty("S1", dev("S2"), K._u8(s)), {"S1": S}, channel_send)


# -------------------------------------------------------- identity key files
def test_identity_key_file_roundtrip(tmp_path):
    old = os.umask(0)  # the mode must be 0600 whatever the umask
    try:
        key = ID.generate_identity_key_file(str(tmp_path / "id.key"))
    finally:
        os.umask(old)
    path = tmp_path / "id.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ID.read_identity_key_file(str(path)) == key
    assert "private_key" not in repr(key)
    assert key.public_key == pub_of(key.private_key)
    assert ID.parse_public_key_hex(key.public_hex) == key.public_key
    assert ID.parse_private_key_text(path.read_text()) == key.private_key
    priv, pub = ID.load_identity_on_device(str(path), dev("T2"), key.public_key)
    assert canon(priv.device) == canon(dev("T2")) and b(pub) == key.public_key
    with pytest.raises(ID.IdentityKeyError, match="already exists"):
        ID.generate_identity_key_file(str(path))
    key2 = ID.generate_identity_key_file(str(path), overwrite=True)
    assert key2 != key and ID.read_identity_key_file(str(path)) == key2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and os.listdir(tmp_path) == ["id.key"]
    with pytest.raises(ID.IdentityKeyError, match="cluster file names"):
        ID.load_identity_on_device(str(path), dev("T2"), key.public_key)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_identity_key_file_too_open_rejected(tmp_path, mode):
    path = tmp_path / "id.key"
    ID.generate_identity_key_file(str(path))
    path.chmod(mode)
    with pytest.raises(ID.IdentityKeyError, match=f"mode {mode:04o}.*chmod 600"):
        ID.read_identity_key_file(str(path))
    with pytest.raises(tf.errors.PermissionDeniedError, match=f"mode {mode:04o}.*chmod 600"):
        ID.load_identity_on_device(str(path), dev("S1"))
    path.chmod(0o400)  # stricter than 0600 is fine
    ID.read_identity_key_file(str(path))
    ID.load_identity_on_device(str(path), dev("S1"))


def test_identity_key_file_symlink_and_garbage_rejected(tmp_path):
    path = tmp_path / "id.key"
    ID.generate_identity_key_file(str(path))
    (tmp_path / "link.key").symlink_to(path)
    with pytest.raises(ID.IdentityKeyError, match="symbolic link"):
        ID.read_identity_key_file(str(tmp_path / "link.key"))
    with pytest.raises(tf.errors.PermissionDeniedError, match="symbolic link"):
        ID.load_identity_on_device(str(tmp_path / "link.key"), dev("S1"))
    bad = tmp_path / "bad.key"
    bad.write_text(path.read_text().replace("\n", "\nzz", 1)[:-1])
    bad.chmod(0o600)
    with pytest.raises(ID.IdentityKeyError, match="not a tf_privpy identity key"):
        ID.read_identity_key_file(str(bad))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a tf_privpy identity key"):
        ID.load_identity_on_device(str(bad), dev("S1"))
    with pytest.raises(tf.errors.NotFoundError, match="does not exist"):
        ID.load_identity_on_device(str(tmp_path / "missing.key"), dev("S1"))


def test_public_key_hex_validation():
    assert ID.public_key_hex(ALICE_PUB) == ALICE_PUB.hex()
    for bad in ["00" * 32, "01" + "00" * 31, ALICE_PUB.hex()[:-2], "zz" * 32]:
        with pytest.raises(ID.IdentityKeyError):
            ID.parse_public_key_hex(bad)
