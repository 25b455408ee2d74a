"""The data owner's side of the share service, exposed as tp.client.

    >>> cluster = ServiceCluster(s1="s1.example:7201", s2="s2.example:7202",
    ...                          ca="ca.pem", cert="hospital-a.pem", key="hospital-a.key")
    >>> upload("records", x, cluster=cluster)     # one share to S1, one to S2
    >>> y = fetch("prediction", cluster=cluster)  # both shares, reconstructed here

upload() encodes the array on the owner's machine exactly as tp.share does
(round half away from zero of x * 2^frac_bits, |x| < bound, in the cluster's
ring), splits it into two additive shares with a mask from os.urandom (the
kernel's CSPRNG) and sends share 0 to S1 and share 1 to S2 over TLS with the
owner's client certificate. Neither service, nor anyone but the owner, ever
holds both shares. Both shares carry the same random upload id, by which
fetch() and tp.load check that they belong together.

Retries are safe: when the name exists on both services as one sharing,
upload() fetches it (the owner may), and succeeds if it holds the same
values on the fixed-point grid, else raises ShareServiceError(ALREADY_EXISTS);
when an earlier upload was interrupted after one service stored its share
(or both hold shares of different sharings), upload() shares the array
afresh, with a new mask and upload id, and replaces both records. A mask is
never reused: each share sent is either fresh randomness or the array minus
fresh randomness, so no service ever holds two shares of different values
under one mask.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import sys
from typing import Mapping, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from tf_privpy.deploy.service import ca
from tf_privpy.deploy.service._proto import pb, pb_grpc
from tf_privpy.deploy.service.server import MAX_MESSAGE_BYTES, info_to_dict

DEFAULT_CHUNK_BYTES = 1 << 20
ENV_CLUSTER = "TF_PRIVPY_SHARE_CLUSTER"


class ShareServiceError(Exception):
    """A refused call: code is the grpc.StatusCode, server "S1"/"S2" or None
    (a check on the owner's side)."""

    def __init__(self, code, message: str, server: Optional[str] = None):
        super().__init__(f"{server + ': ' if server else ''}{message} ({code.name})")
        self.code, self.details, self.server = code, message, server


@dataclasses.dataclass(frozen=True)
class ServiceCluster:
    """Where S1's and S2's share services are, and the owner's TLS files.

    ring_bits/frac_bits/bound: the cluster's encoding (tp.Config's defaults
    for the ring when None). target_names: the names S1's and S2's
    certificates are checked against; by default the role names that only
    that server's certificate carries (ca.server_name), so an address that
    leads to the wrong server fails the handshake, and no server can ever
    receive both shares."""

    s1: str
    s2: str
    ca: str
    cert: str
    key: str
    ring_bits: int = 128
    frac_bits: Optional[int] = None
    bound: Optional[float] = None
    target_names: Optional[Tuple[str, str]] = None

    @classmethod
    def load(cls, spec: Union["ServiceCluster", Mapping, str, None]) -> "ServiceCluster":
        """From a ServiceCluster, a dict, or a JSON file of the same keys
        (s1 and s2 may also sit under "share_services"); None: the file named
        by $TF_PRIVPY_SHARE_CLUSTER."""
        if isinstance(spec, cls):
            return spec
        if spec is None:
            spec = os.environ.get(ENV_CLUSTER)
            if not spec:
                raise ValueError(f"no cluster: pass cluster=... or set ${ENV_CLUSTER}")
        if isinstance(spec, str):
            base = os.path.dirname(os.path.abspath(spec))
            with open(spec) as f:
                d = json.load(f)
            for k in ("ca", "cert", "key"):
                if k in d:
                    d[k] = os.path.join(base, d[k])
        else:
            d = dict(spec)
        d.update(d.pop("share_services", {}))
        if d.get("target_names"):
            d["target_names"] = tuple(d["target_names"])
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

    def encoding(self) -> Tuple[int, int, float]:
        from tf_privpy.protocols.config import Config
        cfg = Config(ring_bits=self.ring_bits, frac_bits=self.frac_bits, bound=self.bound)
        return cfg.ring_bits, cfg.frac_bits, float(cfg.bound)


# --- fixed-point encoding and sharing (numpy, on the owner's machine) ---------
def encode(x, ring_bits: int, frac_bits: int, bound: float) -> np.ndarray:
    """round(x * 2^frac_bits), half away from zero, as tp.share's ring_encode
    does; int64 with a trailing (lo, hi) limb dimension in the 128-bit ring.
    Raises ValueError for NaN, Inf or |x| >= bound: nothing is sent."""
    x = np.asarray(x)
    if x.dtype.kind not in "biuf":
        raise ValueError(f"cannot share an array of dtype {x.dtype}: numbers only")
    x = x.astype(np.float64)
    bad = ~(np.abs(x) < bound)
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), x.shape) if x.ndim else ()
        raise ValueError(f"value {x[i]!r} at index {tuple(int(j) for j in i)} is out of the "
                         f"fixed-point range |x| < {bound:g}: nothing was sent")
    a = np.abs(x) * 2.0 ** frac_bits
    t = np.trunc(a)
    q = (t + (a - t >= 0.5)) * np.sign(x)
    v = q.astype(np.int64)
    if ring_bits == 64:
        return v
    return np.stack([v, v >> 63], axis=-1)  # lo, hi (sign extension)


def decode(v: np.ndarray, ring_bits: int, frac_bits: int) -> np.ndarray:
    scale = 2.0 ** -frac_bits
    if ring_bits == 64:
        return v.astype(np.float64) * scale
    lo, hi = v[..., 0], v[..., 1]
    exact = hi == (lo >> 63)
    wide = hi.astype(np.float64) * 2.0 ** 64 + lo.view(np.uint64).astype(np.float64)
    return np.where(exact, lo.astype(np.float64), wide) * scale


def _add(a: np.ndarray, b: np.ndarray, ring_bits: int, sign: int = 1) -> np.ndarray:
    """a + sign * b in the ring (int64 storage, wrapping)."""
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    with np.errstate(over="ignore"):
        if ring_bits == 64:
            return (ua + ub if sign > 0 else ua - ub).view(np.int64)
        lo = ua[..., 0] + ub[..., 0] if sign > 0 else ua[..., 0] - ub[..., 0]
        carry = (lo < ua[..., 0]) if sign > 0 else (ua[..., 0] < ub[..., 0])
        hi = (ua[..., 1] + ub[..., 1] + carry if sign > 0
              else ua[..., 1] - ub[..., 1] - carry.astype(np.uint64))
        return np.stack([lo, hi.astype(np.uint64)], axis=-1).view(np.int64)


def random_share(shape: Sequence[int]) -> np.ndarray:
    """A uniformly random ring element per entry, from os.urandom (CSPRNG)."""
    n = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(os.urandom(8 * n), dtype=np.int64).reshape(shape).copy()


def split(encoded: np.ndarray, ring_bits: int) -> Tuple[np.ndarray, np.ndarray]:
    """Two additive shares of an encoded array: (r, encoded - r)."""
    r = random_share(encoded.shape)
    return r, _add(encoded, r, ring_bits, -1)


def reconstruct(s0: np.ndarray, s1: np.ndarray, ring_bits: int) -> np.ndarray:
    return _add(s0, s1, ring_bits)


# --- the client -------------------------------------------------------------
class _Progress:
    def __init__(self, total: int, desc: str, enabled: Optional[bool]):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.bar, self.enabled, self.total, self.done, self.desc = None, enabled, total, 0, desc
        if enabled:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, leave=False)
            except ImportError:
                pass

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled:
            print(f"\r{self.desc}: {self.done / 2**20:.1f}/{self.total / 2**20:.1f} MiB",
                  end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            print(file=sys.stderr)


def _rpc(server: str, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except grpc.RpcError as e:
        raise ShareServiceError(e.code(), e.details() or str(e), server) from None


class ShareClient:
    """A data owner's connection to S1's and S2's share services."""

    SERVERS = ("S1", "S2")

    def __init__(self, cluster=None, timeout: Optional[float] = 600.0):
        self.cluster = c = ServiceCluster.load(cluster)
        self.ring_bits, self.frac_bits, self.bound = c.encoding()
        self.timeout = timeout
        with open(c.ca, "rb") as f:
            root = f.read()
        with open(c.key, "rb") as f:
            key = f.read()
        with open(c.cert, "rb") as f:
            cert = f.read()
        creds = grpc.ssl_channel_credentials(root, key, cert)
        self.channels, self.stubs = [], []
        names = c.target_names or tuple(ca.server_name(r) for r in ca.SERVER_ROLES)
        for i, addr in enumerate((c.s1, c.s2)):
            opts = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.ssl_target_name_override", names[i])]
            ch = grpc.secure_channel(addr, creds, options=opts)
            self.channels.append(ch)
            self.stubs.append(pb_grpc.ShareServiceStub(ch))

    def close(self) -> None:
        for ch in self.channels:
            ch.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- single-server calls ------------------------------------------------
    def stat(self, party: int, name: str) -> Optional[dict]:
        """The record's metadata on S1 (0) or S2 (1), or None if absent."""
        try:
            return info_to_dict(_rpc(self.SERVERS[party], self.stubs[party].Stat,
                                     pb.StatRequest(name=name), timeout=self.timeout))
        except ShareServiceError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def upload_share(self, party: int, name: str, share: np.ndarray, shape, upload_id: bytes,
                     overwrite: bool = False, kind: str = "upload",
                     chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress=None, tamper=None
                     ) -> Tuple[dict, bool]:
        """Streams one share to S1 (party 0) or S2 (party 1). tamper (tests
        only): a function (index, chunk message) -> chunk message."""
        data = np.ascontiguousarray(share, dtype="<i8").tobytes()
        info = pb.RecordInfo(name=name, shape=list(shape), dtype="int64",
                             ring_bits=self.ring_bits, frac_bits=self.frac_bits, party=party,
                             sha256=hashlib.sha256(data).digest(), upload_id=upload_id,
                             kind=kind)

        def messages():
            yield pb.UploadMessage(header=pb.UploadHeader(info=info, overwrite=overwrite))
            view = memoryview(data)
            for k, off in enumerate(range(0, len(data), chunk_bytes)):
                b = bytes(view[off:off + chunk_bytes])
                c = pb.Chunk(offset=off, data=b, sha256=hashlib.sha256(b).digest())
                if tamper is not None:
                    c = tamper(k, c)
                yield pb.UploadMessage(chunk=c)
                if progress is not None:
                    progress.update(len(b))
            yield pb.UploadMessage(commit=pb.Commit(sha256=info.sha256))

        reply = _rpc(self.SERVERS[party], self.stubs[party].Upload, messages(),
                     timeout=self.timeout)
        return info_to_dict(reply.info), reply.existed

    def fetch_share(self, party: int, name: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES
                    ) -> Tuple[dict, np.ndarray]:
        """(metadata, share) from S1 (0) or S2 (1), each chunk and the whole
        checked against their SHA-256."""
        server = self.SERVERS[party]
        stream = _rpc(server, self.stubs[party].Fetch,
                      pb.FetchRequest(name=name, chunk_bytes=chunk_bytes), timeout=self.timeout)
        meta, parts, h, offset = None, [], hashlib.sha256(), 0
        try:
            for msg in stream:
                if msg.WhichOneof("part") == "info":
                    meta = info_to_dict(msg.info)
                    continue
                c = msg.chunk
                if meta is None or c.offset != offset or \
                        hashlib.sha256(c.data).digest() != c.sha256:
                    raise ShareServiceError(grpc.StatusCode.DATA_LOSS,
                                            f"a damaged or misplaced chunk of {name!r}", server)
                h.update(c.data)
                parts.append(c.data)
                offset += len(c.data)
        except grpc.RpcError as e:
            raise ShareServiceError(e.code(), e.details() or str(e), server) from None
        if meta is None or h.hexdigest() != meta["sha256"] or offset != meta["size_bytes"]:
            raise ShareServiceError(grpc.StatusCode.DATA_LOSS,
                                    f"{name!r} arrived incomplete or damaged", server)
        limbs = meta["ring_bits"] // 64
        shape = meta["shape"] + ([2] if limbs == 2 else [])
        return meta, np.frombuffer(b"".join(parts), dtype="<i8").astype(np.int64).reshape(shape)

    # --- the owner's operations ---------------------------------------------
    def fetch(self, name: str, raw: bool = False) -> np.ndarray:
        """Both shares of `name` (the caller's upload or result), reconstructed
        here: float64 values, or the ring integers when raw."""
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            (m0, s0), (m1, s1) = ex.map(lambda p: self.fetch_share(p, name), (0, 1))
        check_pair(name, m0, m1)
        v = reconstruct(s0, s1, m0["ring_bits"])
        return v if raw else decode(v, m0["ring_bits"], m0["frac_bits"])

    def upload(self, name: str, array, overwrite: bool = False,
               chunk_bytes: int = DEFAULT_CHUNK_BYTES, progress: Optional[bool] = None) -> dict:
        """Shares `array` here and sends one share to each service. Returns
        {"name", "shape", "upload_id", "existed"}; raises ShareServiceError.

        Every attempt that sends anything splits afresh (new mask, new upload
        id): a share sent once is never paired with a different value. An
        unfinished earlier upload of the name (on one service only, or on
        both as two different sharings) is replaced on both."""
        enc = encode(array, self.ring_bits, self.frac_bits, self.bound)
        shape = list(np.shape(array))
        # Both services answer (and pass the certificate checks) before any
        # share leaves this machine.
        have = [self.stat(p, name) for p in (0, 1)]
        if not overwrite and have[0] and have[1] and _one_sharing(have[0], have[1]):
            same = have[0]["shape"] == shape and np.array_equal(self.fetch(name, raw=True), enc)
            if same:
                return {"name": name, "shape": shape, "upload_id": have[0]["upload_id"],
                        "existed": True}
            raise ShareServiceError(grpc.StatusCode.ALREADY_EXISTS,
                                    f"{name!r} exists with other content: pass overwrite=True "
                                    f"to replace it")
        # Nothing yet, an overwrite, or an earlier upload that stopped after
        # one service stored its share (or after one of a retry's two): a new
        # sharing of this array, which replaces what either service holds. It
        # must not complete the old sharing with the complement of a stored
        # share: a service that saw (part of) the old attempt's share for it,
        # enc(A) - r, would then get enc(B) - r and learn A - B.
        uid = os.urandom(16)
        s0, s1 = split(enc, self.ring_bits)
        shares = {0: s0, 1: s1}
        # Replace only a record seen above (the owner's own; the service
        # checks): a name that appeared since is refused, not clobbered.
        replace = [overwrite or have[p] is not None for p in (0, 1)]
        bar = _Progress(s0.nbytes + s1.nbytes, f"upload {name}", progress)
        try:
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                futs = [ex.submit(self.upload_share, p, name, shares[p], shape, uid, replace[p],
                                  "upload", chunk_bytes, bar) for p in (0, 1)]
                results = [f.result() for f in futs]
        finally:
            bar.close()
        return {"name": name, "shape": shape, "upload_id": uid.hex(),
                "existed": all(existed for _, existed in results)}


def _one_sharing(m0: dict, m1: dict) -> bool:
    """Whether S1's and S2's records are the two shares of one sharing."""
    try:
        check_pair(m0["name"], m0, m1)
    except ShareServiceError:
        return False
    return True


def check_pair(name: str, m0: dict, m1: dict) -> None:
    """Refuses two records that are not the two shares of one sharing (what
    tp.load must check too)."""
    for k in ("shape", "ring_bits", "frac_bits", "upload_id", "owner"):
        if m0[k] != m1[k]:
            raise ShareServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                                    f"S1's and S2's records of {name!r} differ in {k} "
                                    f"({m0[k]!r} vs {m1[k]!r}): not one sharing")
    if (m0["party"], m1["party"]) != (0, 1):
        raise ShareServiceError(grpc.StatusCode.FAILED_PRECONDITION,
                                f"{name!r}: S1 must hold share 0 and S2 share 1")


def upload(name: str, array, cluster=None, overwrite: bool = False,
           progress: Optional[bool] = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> dict:
    """Shares `array` on this machine and sends one share to S1 and one to S2.

    The array is encoded and split here with a mask from os.urandom; each
    service receives one share over TLS with the owner's certificate. Returns
    {"name", "shape", "upload_id", "existed"}; raises ShareServiceError (code,
    server) when a service refuses, ValueError for values out of the
    fixed-point range (nothing is sent).

    Example:
      >>> tp.client.upload("records", np.ones((100, 5)), cluster="hospital-a.json")
      {'name': 'records', 'shape': [100, 5], 'upload_id': '...', 'existed': False}
    """
    with ShareClient(cluster) as c:
        return c.upload(name, array, overwrite=overwrite, progress=progress,
                        chunk_bytes=chunk_bytes)


def fetch(name: str, cluster=None, raw: bool = False) -> np.ndarray:
    """Fetches both shares of `name` (the caller must own it: its upload, or a
    result tp.publish stored for it) and reconstructs it here as float64
    (raw: the ring integers).

    Example:
      >>> y = tp.client.fetch("prediction", cluster="hospital-a.json")
    """
    with ShareClient(cluster) as c:
        return c.fetch(name, raw=raw)
