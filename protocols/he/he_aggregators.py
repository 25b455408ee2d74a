"""The encrypted aggregators of tf_privpy.he.aggregation: BatchCrypt and one
Paillier ciphertext per value, each as the roles of a round (what runs on a
client, what runs on the aggregator) and where they run.

Each round follows BatchCrypt's Algorithm 1 (seed 003 §4.4):
  1. clients -> aggregator: per-layer min, max and size (plaintext metadata);
  2. aggregator -> clients: per-layer dACIQ clipping thresholds α;
  3. each client, on its own device: weight, count its values beyond α,
     quantize, pack, encrypt with the shared private key (CRT), serialize ->
     aggregator (the ciphertexts and the count);
  4. aggregator, on its device, with the public key only: check and add the
     ciphertexts, add the counts (the `clipped` metric), serialize the sum ->
     every client;
  5. each client: check, decrypt (CRT), decode exactly, dequantize.
Every message of a round (the metadata, the thresholds, the ciphertexts
with the count, the sum) is bytes handed to a `Wire`: with a runtime, the
API layer's wire sends them through the runtime's channel (client <-> S1),
so tp.stats() and the TensorBoard scalars count them with every other
message, and each of the round's dependent hops advances the round counter.
`aggregation_cost` declares the same messages, bytes and rounds beforehand
(tests/test_cost_model.py checks declared == counted). Bytes up and down in
the report are the same messages' lengths (header, key fingerprint and
checksum included), not an estimate.

The aggregator never receives a plaintext update: its methods
(`_aggregator_thresholds`, `_aggregate_ciphertexts`) take per-client
summaries and serialized ciphertexts only (DESIGN §9, §11).

Placement (`place`): client i's kernels run on the runtime's client device
i mod (number of client devices), the aggregator's on S1's device. The API
layer hands in the runtime's devices as a callable read at each round, so
this module does not depend on the runtime (protocols/he shares nothing with
protocols/mpc but the kernel loader and the config).
"""
from __future__ import annotations

import struct
import time
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from . import batchcrypt as _bc
from . import paillier as _pl
from . import paillier_io as _io
from ..mpc.runtime import cost as _cost
from .aggregation import AggregationReport, SecureAggregator, Update, _check_updates, _scaled

_STATS = struct.Struct("<ddq")      # one layer's min, max (float64) and size (int64)
_F64 = struct.Struct("<d")          # one layer's clipping threshold
_COUNT = struct.Struct("<q")        # a client's clipped count
AGGREGATOR_PARTY = "S1"
CLIENT_PARTY = "client"

# The runtime's (client devices, {party: device}), or None without a runtime.
RuntimeDevices = Callable[[], Optional[Tuple[Sequence[str], Mapping[str, str]]]]


class Wire:
    """How a round's messages travel between parties: as they are (no
    runtime). The API layer's wire sends them through the runtime's channel
    instead, where they are counted (tf_privpy/he/aggregation.py)."""

    def send(self, src: str, dst: str, *blobs: bytes) -> List[bytes]:
        """One message of `blobs` from party src to dst; the blobs dst gets."""
        return [bytes(b) for b in blobs]

    def rounds(self, n: int) -> None:
        """The round's n dependent hops are done (the round counter's)."""


Wires = Callable[[], Wire]


def serialized_bytes(count: int, ciphertext_bytes: int) -> int:
    """Length of paillier_io.serialize of a 1-D EncryptedTensor of `count`
    ciphertexts of `ciphertext_bytes` each (header, shape, checksum)."""
    return _io._HEADER.size + _io._DIM.size + count * ciphertext_bytes + _io.CHECKSUM_BYTES


def aggregation_cost(kind: str, clients: int, layers: int, ciphertexts: int,
                     ciphertext_bytes: int) -> _cost.Cost:
    """The declared cost of one aggregate() of `clients` clients (the one cost
    model, runtime/cost.py): per client, for batchcrypt the metadata up, the
    thresholds down, the ciphertexts and the clipped count up and the sum
    down (4 rounds); for paillier the ciphertexts up and the sum down (2).
    `ciphertexts` per client (AggregationReport.ciphertexts_per_client)."""
    ct = serialized_bytes(ciphertexts, ciphertext_bytes)
    if kind == "batchcrypt":
        steps = [(CLIENT_PARTY, AGGREGATOR_PARTY, _STATS.size * layers),
                 (AGGREGATOR_PARTY, CLIENT_PARTY, _F64.size * layers),
                 (CLIENT_PARTY, AGGREGATOR_PARTY, ct + _COUNT.size),
                 (AGGREGATOR_PARTY, CLIENT_PARTY, ct)]
    elif kind == "paillier":
        steps = [(CLIENT_PARTY, AGGREGATOR_PARTY, ct), (AGGREGATOR_PARTY, CLIENT_PARTY, ct)]
    else:
        raise ValueError(f"no declared cost for aggregation {kind!r}; use batchcrypt or paillier")
    c = _cost.Cost(rounds=len(steps))
    for src, dst, nbytes in steps:
        for _ in range(clients):
            c.send(src, dst, nbytes)
    return c


def place(m: int, devices: Optional[RuntimeDevices]) -> Tuple[List[str], str]:
    """Client i's device (round-robin over the runtime's client devices) and
    the aggregator's (S1's device); without a runtime, the default device."""
    placed = devices() if devices is not None else None
    if placed is None:
        return [""] * m, ""
    clients, servers = placed
    return [clients[i % len(clients)] for i in range(m)], servers[AGGREGATOR_PARTY]


def clipped_count(update: Update, alphas: Sequence[float], device: str) -> int:
    """Client side: how many of this client's values exceed their layer's
    clipping threshold (and saturate in quantization), counted with TF ops on
    the client's own device, where its plaintext update lives. Only this
    count leaves the client (like its per-layer min, max and size)."""
    total = 0
    with tf.device(device):
        for u, a in zip(update, alphas):
            over = tf.abs(tf.constant(u, tf.float64)) > tf.constant(float(a), tf.float64)
            total += int(tf.math.count_nonzero(over, dtype=tf.int64))
    return total


class _PaillierBase(SecureAggregator):
    """Key handling and the three roles of a round (BatchCrypt Algorithm 1).

    Each party's work is its own method, so what crosses between parties is
    exactly the methods' arguments and results: `_client_upload` (client:
    plaintext -> serialized ciphertexts), `_aggregate_ciphertexts`
    (aggregator: serialized ciphertexts and per-client counts -> serialized
    sum; public key only), `_client_decrypt` (client: serialized sum ->
    plaintext sum). tests/test_federated.py wraps the aggregator's methods to
    check that they never receive a plaintext update.
    """

    def __init__(self, key_bits: int, devices: Optional[RuntimeDevices] = None,
                 wire: Optional[Wires] = None):
        self.key_bits = key_bits
        self._devices = devices                               # see place()
        self._wire = wire or Wire                             # read at each round
        self.public_key: Optional[_pl.PublicKey] = None
        self._private_key: Optional[_pl.PrivateKey] = None   # held by the clients only

    def setup(self) -> None:
        if self._private_key is None:
            self.public_key, self._private_key = _pl.keygen(self.key_bits)

    def _client_upload(self, plaintext: tf.Tensor, device: str) -> bytes:
        """Client: encrypts its plaintext with the clients' private key (CRT)
        on its own device and serializes it for the aggregator."""
        with tf.device(device):
            return _io.serialize(_pl.encrypt(self._private_key, plaintext))

    def _aggregate_ciphertexts(self, uploads: Sequence[bytes], counts: Sequence[int],
                               device: str) -> Tuple[bytes, int]:
        """Aggregator, on its device, with the public key only: checks and adds
        the clients' serialized ciphertexts, and sums their per-client counts
        (e.g. clipped values). Returns (serialized sum for every client, the
        summed count)."""
        pk = self.public_key
        with tf.device(device):
            total = _io.deserialize(uploads[0], pk)
            for blob in uploads[1:]:
                total = total + _io.deserialize(blob, pk)
            download = _io.serialize(total)
        return download, int(sum(int(c) for c in counts))

    def _client_decrypt(self, download: bytes, device: str, out_type: tf.DType) -> tf.Tensor:
        """Client: checks and decrypts the aggregate (CRT) on its device."""
        with tf.device(device):
            return _pl.decrypt(self._private_key, _io.deserialize(download, self.public_key),
                               out_type)

    def _round_trip(self, wire: Wire, uploads: Sequence[bytes], counts: Sequence[int],
                    agg_device: str, report: AggregationReport) -> List[bytes]:
        """Steps 3-4 on the wire: each client's ciphertexts (and its count)
        to the aggregator, the sum back to each client; returns what each
        client downloads."""
        got, got_counts, up = [], [], 0
        for i, u in enumerate(uploads):
            msg = wire.send(CLIENT_PARTY, AGGREGATOR_PARTY, u,
                            *([_COUNT.pack(int(counts[i]))] if counts else []))
            got.append(msg[0])
            if counts:
                got_counts.append(_COUNT.unpack(msg[1])[0])
            up = max(up, sum(len(b) for b in msg))
        report.bytes_up_per_client += up
        t0 = time.perf_counter()
        download, report.clipped = self._aggregate_ciphertexts(got, got_counts, agg_device)
        report.aggregate_s += time.perf_counter() - t0
        report.bytes_down_per_client += len(download)
        return [wire.send(AGGREGATOR_PARTY, CLIENT_PARTY, download)[0] for _ in uploads]


class BatchCryptAggregator(_PaillierBase):
    """BatchCrypt: dACIQ + r-bit quantization + packing + Paillier."""

    name = "batchcrypt"

    def __init__(self, key_bits: int = 2048, quant_bits: int = 16,
                 max_clients: Optional[int] = None, on_overflow: str = "raise",
                 seed: Optional[int] = None, devices: Optional[RuntimeDevices] = None,
                 wire: Optional[Wires] = None):
        super().__init__(key_bits, devices, wire)
        self.quant_bits = quant_bits
        self.max_clients = max_clients
        self.on_overflow = on_overflow
        self._rng = np.random.default_rng(seed) if seed is not None else None
        _bc.BatchCryptCodec(quant_bits, max_clients or 2, key_bits)   # validate now

    @staticmethod
    def _aggregator_thresholds(codec: _bc.BatchCryptCodec,
                               per_client: Sequence[Sequence[_bc.LayerStats]]) -> List[float]:
        """Aggregator: dACIQ thresholds from the clients' per-layer (min, max,
        size) summaries (steps 1-2)."""
        return codec.alphas(_bc.merge_stats(per_client))

    def aggregate(self, updates, weights):
        _check_updates(updates, weights)
        m = len(updates)
        if self.max_clients is not None and m > self.max_clients:
            raise ValueError(f"{m} clients but the slots are padded for max_clients = "
                             f"{self.max_clients}; build the process with a larger max_clients")
        self.setup()
        codec = _bc.BatchCryptCodec(self.quant_bits, self.max_clients or m, self.key_bits)
        devices, agg_device = place(m, self._devices)
        report = AggregationReport(values=int(sum(u.size for u in updates[0])))
        scaled = _scaled(updates, weights)   # each client scales its own update
        wire = self._wire()
        # 1-2: per-client metadata up, thresholds down, each a message.
        per_client = []
        for u in scaled:
            blob = b"".join(_STATS.pack(st.minimum, st.maximum, st.size)
                            for st in _bc.layer_stats(u))
            got, = wire.send(CLIENT_PARTY, AGGREGATOR_PARTY, blob)
            per_client.append([_bc.LayerStats(*v) for v in _STATS.iter_unpack(got)])
            report.bytes_up_per_client = max(report.bytes_up_per_client, len(got))
        alphas = self._aggregator_thresholds(codec, per_client)
        blob = b"".join(_F64.pack(a) for a in alphas)
        client_alphas = [[a for (a,) in _F64.iter_unpack(
            wire.send(AGGREGATOR_PARTY, CLIENT_PARTY, blob)[0])] for _ in scaled]
        report.bytes_down_per_client += len(blob)
        # 3: each client, on its device: count its clipped values, quantize,
        # pack, encrypt. Only ciphertexts and the count go to the aggregator.
        t0 = time.perf_counter()
        uploads, counts, layout = [], [], None
        for upd, dev, own in zip(scaled, devices, client_alphas):
            counts.append(clipped_count(upd, own, dev))
            with tf.device(dev):
                plaintext, layout = codec.encode(upd, own, rng=self._rng)
            uploads.append(self._client_upload(plaintext, dev))
        report.encrypt_s += time.perf_counter() - t0
        # 4: the aggregator adds ciphertexts and counts (the count travels
        # with the ciphertexts).
        downloads = self._round_trip(wire, uploads, counts, agg_device, report)
        wire.rounds(4)
        report.ciphertexts_per_client = codec.num_plaintexts(layout.count)
        # 5: every client decrypts the sum.
        t0 = time.perf_counter()
        result = None
        for dev, download in zip(devices, downloads):
            total = self._client_decrypt(download, dev, tf.string)
            with tf.device(dev):
                res = codec.unpack_sum(total, m, layout.count)
                decoded = codec.decode_sum(res, layout, num_summands=m, reduce="sum",
                                           on_overflow=self.on_overflow)
            if result is None:
                report.positive_overflows = int(res.positive_overflows)
                report.negative_overflows = int(res.negative_overflows)
                result = decoded
        report.decrypt_s += time.perf_counter() - t0
        return [r.astype(u.dtype) for r, u in zip(result, updates[0])], report


class PaillierAggregator(_PaillierBase):
    """One Paillier ciphertext per value (what stock FATE does), fixed point
    with `fixed_point_bits` fractional bits: the baseline BatchCrypt beats."""

    name = "paillier"

    def __init__(self, key_bits: int = 2048, fixed_point_bits: int = 24,
                 devices: Optional[RuntimeDevices] = None, wire: Optional[Wires] = None):
        super().__init__(key_bits, devices, wire)
        if not 1 <= fixed_point_bits <= 40:
            raise ValueError(f"fixed_point_bits must be in [1, 40], got {fixed_point_bits}")
        self.fixed_point_bits = fixed_point_bits

    def aggregate(self, updates, weights):
        _check_updates(updates, weights)
        m = len(updates)
        self.setup()
        devices, agg_device = place(m, self._devices)
        report = AggregationReport(values=int(sum(u.size for u in updates[0])))
        scale = float(2 ** self.fixed_point_bits)
        t0 = time.perf_counter()
        plaintexts = []
        for upd, dev in zip(_scaled(updates, weights), devices):
            flat = np.concatenate([u.reshape(-1) for u in upd])
            with tf.device(dev):
                plaintexts.append(tf.constant(np.rint(flat * scale).astype(np.int64)))
        uploads = [self._client_upload(pt, dev) for pt, dev in zip(plaintexts, devices)]
        report.encrypt_s += time.perf_counter() - t0
        wire = self._wire()
        downloads = self._round_trip(wire, uploads, [], agg_device, report)
        wire.rounds(2)
        report.ciphertexts_per_client = report.values
        t0 = time.perf_counter()
        flat = None
        for dev, download in zip(devices, downloads):
            total = self._client_decrypt(download, dev, tf.int64)
            if flat is None:
                flat = total.numpy().astype(np.float64) / scale
        report.decrypt_s += time.perf_counter() - t0
        out, off = [], 0
        for u in updates[0]:
            out.append(flat[off:off + u.size].reshape(u.shape).astype(u.dtype))
            off += u.size
        return out, report
