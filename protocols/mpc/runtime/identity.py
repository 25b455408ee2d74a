"""Server identity keys and the authenticated pairwise key exchange (issue 11).

Each server has a long-term X25519 identity key (RFC 7748). The cluster tool
makes one per server with `generate_identity_key_file` on that server's host,
keeps the private key there in a file of mode 0600, and writes the public key
(`IdentityKey.public_hex`, 64 hex digits) into the cluster file, which every
party reads.

A pair key is then made by the pair, not by the driver: `pair_key_exchange`
runs, as ops on the two servers, an exchange in the pattern of Noise KK (both
static keys known in advance): fresh ephemeral keys on each side, four X25519
terms and HKDF-SHA256 over the transcript (exact formula: ops/kex/kex.h). The
ephemeral private keys are created and consumed on their own server (never
stored in a variable, never fetched); the driver and the channel see public
keys only. Each side gets the same int64[2] key only if the other side holds
the identity private key named in the cluster file and no one substituted an
ephemeral key; otherwise the keys differ and the first authenticated message
under them fails.

Private key file format (text, so it survives copy-paste; 0600, no symlink):

    -----BEGIN TF_PRIVPY X25519 PRIVATE KEY-----
    <64 hex digits: the 32-byte private key>
    -----END TF_PRIVPY X25519 PRIVATE KEY-----

Reading refuses files with any group or other permission, like ssh.
`load_identity_on_device` reads the file with an op on the server's device,
so in distributed mode the private key never passes through the driver; the
pure-Python `read_identity_key_file` is for tools running on the server host.
Python cannot wipe `bytes`: the private keys the Python helpers handle stay in
memory until garbage-collected, so use them only in short-lived tools.
"""
from __future__ import annotations

import dataclasses
import os
import stat
from typing import Callable, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from . import kernels

KEY_BYTES = 32
PRIVATE_KEY_BEGIN = "-----BEGIN TF_PRIVPY X25519 PRIVATE KEY-----"
PRIVATE_KEY_END = "-----END TF_PRIVPY X25519 PRIVATE KEY-----"
_MAX_FILE_BYTES = 4096

#: send(src_role, dst_role, tensor) -> the tensor on dst's device (in the
#: runtime: Channels.send1).
Send = Callable[[str, str, tf.Tensor], tf.Tensor]


class IdentityKeyError(ValueError):
    """An identity key or key file is malformed or not private enough."""


@dataclasses.dataclass(frozen=True)
class IdentityKey:
    """A server's X25519 identity key pair (32 bytes each)."""

    private_key: bytes = dataclasses.field(repr=False)
    public_key: bytes

    @property
    def public_hex(self) -> str:
        """The public key as it goes into the cluster file."""
        return public_key_hex(self.public_key)


@dataclasses.dataclass(frozen=True)
class KexParty:
    """One side of a pair key exchange.

    Attributes:
      role: the server's role name ("S1", "S2", "T1", "T2"); the two roles of
        an exchange must differ (the smaller one is the Noise initiator).
      device: the server's TF device.
      static_private: its identity private key, a uint8[32] tensor on
        `device` (from `load_identity_on_device`).
      trusted: the static public keys this side authenticates its peers
        with, role -> uint8[32] tensor on `device`. In distributed mode a
        server's come from its own copy of the cluster file, produced on the
        server (keying.server_held_keys), so that nothing the driver sends
        decides whom a server trusts. None: take the peer's key from
        `pair_key_exchange`'s static_publics (tests, tools).
    """

    role: str
    device: str
    static_private: tf.Tensor
    trusted: Optional[Mapping[str, tf.Tensor]] = None


def _check_key(key: bytes, what: str) -> bytes:
    if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
        raise IdentityKeyError(f"{what} must be {KEY_BYTES} bytes")
    return bytes(key)


def public_key_hex(public_key: bytes) -> str:
    """A public key as 64 lowercase hex digits (the cluster file's format)."""
    return _check_key(public_key, "a public key").hex()


def parse_public_key_hex(text: str, what: str = "public key") -> bytes:
    """The 32 bytes of a public key written as 64 hex digits.

    Rejects the all-zero key and u = 1, the small-order points a typo or a
    placeholder produces; KexDerive rejects every small-order point anyway.
    """
    s = text.strip()
    try:
        key = bytes.fromhex(s)
    except ValueError:
        key = b""
    if len(s) != 2 * KEY_BYTES or len(key) != KEY_BYTES:
        raise IdentityKeyError(f"{what} must be {2 * KEY_BYTES} hex digits, got {text!r}")
    if int.from_bytes(key, "little") & ((1 << 255) - 1) in (0, 1):
        raise IdentityKeyError(f"{what} {s} is a small-order point (RFC 7748 §6.1)")
    return key


def private_key_text(private_key: bytes) -> str:
    """The key file text of a private key."""
    key = _check_key(private_key, "a private key")
    return f"{PRIVATE_KEY_BEGIN}\n{key.hex()}\n{PRIVATE_KEY_END}\n"


def parse_private_key_text(text: str, what: str = "identity key") -> bytes:
    """The private key of a key file's text (the ops' parser accepts the same)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if (len(lines) != 3 or lines[0] != PRIVATE_KEY_BEGIN or lines[2] != PRIVATE_KEY_END
            or len(lines[1]) != 2 * KEY_BYTES):
        raise IdentityKeyError(f"{what}: not a tf_privpy identity key (expected "
                               f"{PRIVATE_KEY_BEGIN!r}, 64 hex digits, {PRIVATE_KEY_END!r})")
    try:
        return bytes.fromhex(lines[1])
    except ValueError:
        raise IdentityKeyError(f"{what}: the key line is not 64 hex digits") from None


def write_private_key_file(path: str, private_key: bytes, overwrite: bool = False) -> None:
    """Writes a private key file with mode 0600.

    Never follows a symlink; without `overwrite` an existing file is an
    error. With it, the key goes to a new 0600 file that replaces the old one
    atomically, so no reader ever sees the new key under looser permissions.
    """
    text = private_key_text(private_key).encode("ascii")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    target = path
    if overwrite:
        target = f"{path}.tmp-{os.getpid()}"
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise IdentityKeyError(f"identity key file {target} already exists; pass "
                               "overwrite=True to replace it") from None
    try:
        os.fchmod(fd, 0o600)  # the umask can only have removed bits; make it exact
        view = memoryview(text)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(target)
        raise
    os.close(fd)
    if overwrite:
        os.replace(target, path)


def read_private_key_file(path: str) -> bytes:
    """The private key of a key file, refusing symlinks, non-regular files and
    any group or other permission (the file must be chmod 600 or stricter)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise IdentityKeyError(f"identity key file {path} does not exist") from None
    except OSError as e:  # ELOOP: a symlink
        raise IdentityKeyError(f"cannot open identity key file {path}: {e.strerror}; "
                               "symbolic links are refused") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IdentityKeyError(f"identity key file {path} is not a regular file")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise IdentityKeyError(
                f"identity key file {path} has mode {mode:04o}: a private key must not be "
                f"accessible to group or others; run `chmod 600 {path}`")
        data = os.read(fd, _MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _MAX_FILE_BYTES:
        raise IdentityKeyError(f"identity key file {path} is larger than 4 KiB")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise IdentityKeyError(f"identity key file {path} is not ASCII text") from None
    return parse_private_key_text(text, f"identity key file {path}")


def public_key_of(private_key: bytes) -> bytes:
    """X25519(private_key, 9), computed by the kernel."""
    key = _check_key(private_key, "a private key")
    return kernels.x25519_public_key(key).numpy().tobytes()


def generate_identity_key_file(path: str, overwrite: bool = False) -> IdentityKey:
    """Makes a fresh identity key (the OS CSPRNG, through the X25519Keypair
    kernel), writes its private half to `path` (0600) and returns the pair;
    put `.public_hex` into the cluster file. Run it on the server's host."""
    private, public = kernels.x25519_keypair()
    key = IdentityKey(private.numpy().tobytes(), public.numpy().tobytes())
    write_private_key_file(path, key.private_key, overwrite=overwrite)
    return key


def read_identity_key_file(path: str) -> IdentityKey:
    """The identity key pair of a private key file (see read_private_key_file)."""
    private = read_private_key_file(path)
    return IdentityKey(private, public_key_of(private))


def load_identity_on_device(path: str, device: str,
                            expected_public: bytes = b"") -> Tuple[tf.Tensor, tf.Tensor]:
    """(private, public) uint8[32] of the key file `path` on `device`'s host,
    read by an op on `device`: the private tensor lives there and only the
    public key is returned for the caller to read.

    Args:
      path: the key file on the server's file system.
      device: the server's TF device.
      expected_public: if given (the cluster file's entry), raises
        IdentityKeyError when the file's key is another one.
    """
    with tf.device(device):
        private, public = kernels.x25519_read_private_key(tf.constant(path))
    if expected_public:
        got = public.numpy().tobytes()  # a public value: fine on the driver
        if got != _check_key(expected_public, "expected_public"):
            raise IdentityKeyError(
                f"identity key file {path} holds the key {got.hex()}, but the cluster file "
                f"names {expected_public.hex()}")
    return private, public


def pair_key_exchange(a: KexParty, b: KexParty,
                      static_publics: Optional[Mapping[str, bytes]],
                      send: Send, context: str = "") -> Tuple[tf.Tensor, tf.Tensor]:
    """Runs one authenticated key exchange between two servers; returns the
    int64[2] pair key as derived on a's device and on b's device.

    Eagerly or inside a tf.function. Each side draws its ephemeral key pair
    on its own device and derives there; only the ephemeral public keys cross,
    through `send`. Each side authenticates the other with the static public
    key that it trusts for the peer's role: its own `trusted` map if it has
    one, else what `static_publics` names.

    Args:
      a, b: the two sides.
      static_publics: role -> 32-byte identity public key (the cluster
        file), for the sides without `trusted`; may be None if both have it.
      send: carries a tensor from one role's device to the other's.
      context: bound into the key (HKDF info); use it to derive separate keys
        for separate purposes (e.g. "prg", "channel") or sessions.
    """
    if a.role == b.role:
        raise ValueError(f"a pair key exchange needs two different roles, got {a.role!r} twice")
    for p, q in ((a, b), (b, a)):
        if p.trusted is None and (static_publics is None or q.role not in static_publics):
            raise ValueError(f"no static public key for {q.role}: give {p.role} a trusted "
                             "map or name the key in static_publics")
    eph = {}
    for p in (a, b):
        with tf.device(p.device):
            eph[p.role] = kernels.x25519_keypair()  # (private, public), both on p.device
    received = {a.role: send(b.role, a.role, eph[b.role][1]),
                b.role: send(a.role, b.role, eph[a.role][1])}
    keys = []
    for p, q in ((a, b), (b, a)):
        with tf.device(p.device):
            if p.trusted is not None:
                peer_static = p.trusted[q.role]
            else:
                peer_static = tf.constant(np.frombuffer(_check_key(
                    static_publics[q.role], f"the static public key of {q.role}"), np.uint8))
            keys.append(kernels.kex_derive(p.static_private, eph[p.role][0], peer_static,
                                           received[p.role], p.role, q.role, context))
    return keys[0], keys[1]
