"""The encrypted aggregators of tf_privpy.he.aggregation.

Each round follows BatchCrypt's Algorithm 1 (seed 003 §4.4):
  1. clients -> aggregator: per-layer min, max and size (plaintext metadata);
  2. aggregator -> clients: per-layer dACIQ clipping thresholds α;
  3. each client, on its own device: weight, quantize, pack, encrypt with
     the shared private key (CRT), serialize -> aggregator;
  4. aggregator, on its device: check and add the ciphertexts, serialize the
     sum -> every client;
  5. each client: check, decrypt (CRT), decode exactly, dequantize.
Bytes up and down are the serialized messages' lengths (header, key
fingerprint and checksum included), not an estimate.
"""
from __future__ import annotations

import time
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tf_privpy.he import batchcrypt as _bc
from tf_privpy.he import paillier as _pl
from tf_privpy.he.aggregation import (AggregationReport, SecureAggregator, Update,
                                      _check_updates, _scaled)

_METADATA_BYTES_PER_LAYER = 3 * 8   # min, max (float64) and size (int64)


def _devices(m: int) -> Tuple[List[str], str]:
    """Client i's device (round-robin over the runtime's client devices) and
    the aggregator's (S1's device); without tp.init, the default device."""
    from tf_privpy import runtime
    if not runtime.is_initialized():
        return [""] * m, ""
    clients = runtime.client_devices()
    return [clients[i % len(clients)] for i in range(m)], runtime.servers()["S1"]


class _PaillierBase(SecureAggregator):
    def __init__(self, key_bits: int):
        self.key_bits = key_bits
        self.public_key: Optional[_pl.PublicKey] = None
        self._private_key: Optional[_pl.PrivateKey] = None   # held by the clients only

    def setup(self) -> None:
        if self._private_key is None:
            self.public_key, self._private_key = _pl.keygen(self.key_bits)

    def _encrypted_sum(self, plaintexts: Sequence[tf.Tensor], devices, agg_device,
                       report: AggregationReport) -> List[_pl.EncryptedTensor]:
        """Steps 3-5: returns what every client decrypts (one per client)."""
        self.setup()
        pk, sk = self.public_key, self._private_key
        t0 = time.perf_counter()
        uploads = []
        for pt, dev in zip(plaintexts, devices):
            with tf.device(dev):
                uploads.append(_pl.serialize(_pl.encrypt(sk, pt)))
        report.encrypt_s += time.perf_counter() - t0
        report.bytes_up_per_client += max(len(u) for u in uploads)
        t0 = time.perf_counter()
        with tf.device(agg_device):
            total = _pl.deserialize(uploads[0], pk)
            for blob in uploads[1:]:
                total = _pl.add(pk, total, _pl.deserialize(blob, pk))
            download = _pl.serialize(total)
        report.aggregate_s += time.perf_counter() - t0
        report.bytes_down_per_client += len(download)
        report.ciphertexts_per_client = int(np.prod(total.shape))
        return download


class BatchCryptAggregator(_PaillierBase):
    """BatchCrypt: dACIQ + r-bit quantization + packing + Paillier."""

    name = "batchcrypt"

    def __init__(self, key_bits: int = 2048, quant_bits: int = 16,
                 max_clients: Optional[int] = None, on_overflow: str = "raise",
                 seed: Optional[int] = None):
        super().__init__(key_bits)
        self.quant_bits = quant_bits
        self.max_clients = max_clients
        self.on_overflow = on_overflow
        self._rng = np.random.default_rng(seed) if seed is not None else None
        _bc.BatchCryptCodec(quant_bits, max_clients or 2, key_bits)   # validate now

    def aggregate(self, updates, weights):
        _check_updates(updates, weights)
        m = len(updates)
        if self.max_clients is not None and m > self.max_clients:
            raise ValueError(f"{m} clients but the slots are padded for max_clients = "
                             f"{self.max_clients}; build the process with a larger max_clients")
        codec = _bc.BatchCryptCodec(self.quant_bits, self.max_clients or m, self.key_bits)
        devices, agg_device = _devices(m)
        report = AggregationReport(values=int(sum(u.size for u in updates[0])))
        scaled = _scaled(updates, weights)
        # 1-2: metadata up, thresholds down.
        stats = _bc.merge_stats([_bc.layer_stats(u) for u in scaled])
        alphas = codec.alphas(stats)
        report.bytes_up_per_client += _METADATA_BYTES_PER_LAYER * len(alphas)
        report.bytes_down_per_client += 8 * len(alphas)
        report.clipped = int(sum(np.sum(np.abs(u) > a) for upd in scaled
                                 for u, a in zip(upd, alphas)))
        t0 = time.perf_counter()
        encoded = []
        for upd, dev in zip(scaled, devices):
            with tf.device(dev):
                encoded.append(codec.encode(upd, alphas, rng=self._rng))
        layout = encoded[0][1]
        report.encrypt_s += time.perf_counter() - t0
        download = self._encrypted_sum([p for p, _ in encoded], devices, agg_device, report)
        t0 = time.perf_counter()
        result = None
        for dev in devices:                      # every client decrypts the sum
            with tf.device(dev):
                total = _pl.decrypt(self._private_key,
                                    _pl.deserialize(download, self.public_key), tf.string)
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

    def __init__(self, key_bits: int = 2048, fixed_point_bits: int = 24):
        super().__init__(key_bits)
        if not 1 <= fixed_point_bits <= 40:
            raise ValueError(f"fixed_point_bits must be in [1, 40], got {fixed_point_bits}")
        self.fixed_point_bits = fixed_point_bits

    def aggregate(self, updates, weights):
        _check_updates(updates, weights)
        m = len(updates)
        devices, agg_device = _devices(m)
        report = AggregationReport(values=int(sum(u.size for u in updates[0])))
        scale = float(2 ** self.fixed_point_bits)
        t0 = time.perf_counter()
        plaintexts = []
        for upd, dev in zip(_scaled(updates, weights), devices):
            flat = np.concatenate([u.reshape(-1) for u in upd])
            with tf.device(dev):
                plaintexts.append(tf.constant(np.rint(flat * scale).astype(np.int64)))
        report.encrypt_s += time.perf_counter() - t0
        download = self._encrypted_sum(plaintexts, devices, agg_device, report)
        t0 = time.perf_counter()
        flat = None
        for dev in devices:
            with tf.device(dev):
                total = _pl.decrypt(self._private_key,
                                    _pl.deserialize(download, self.public_key))
                if flat is None:
                    flat = total.numpy().astype(np.float64) / scale
        report.decrypt_s += time.perf_counter() - t0
        out, off = [], 0
        for u in updates[0]:
            out.append(flat[off:off + u.size].reshape(u.shape).astype(u.dtype))
            off += u.size
        return out, report
