"""Secure aggregation of model updates: the step between clients and server.

An aggregator takes every client's update (a list of per-layer arrays) and
the clients' weights, and returns the weighted mean update, having moved only
ciphertexts between the clients and the aggregator:

- `PlaintextAggregator`: no encryption; the reference (and plain FedAvg).
- `BatchCryptAggregator`: BatchCrypt (seed 003 §4): dACIQ clipping per layer,
  r-bit stochastic quantization, ~100 values packed per Paillier plaintext,
  the aggregator adds ciphertexts, clients decrypt and decode exactly.
- `PaillierAggregator`: one ciphertext per value (stock FATE), for comparison.

Clients' kernels run on the client devices of the runtime (`tp.init`), the
aggregator's on the S1 device, and with a runtime every message of a round
goes through its channel (client <-> S1): tp.stats() and the TensorBoard
scalars count the aggregation's messages, bytes and rounds like any other
protocol's, and `he_aggregators.aggregation_cost` declares them. Each
aggregate() also returns a report of bytes and seconds, which the federated
process adds to its round metrics.

This module is the API: the aggregators, their roles (what runs on a client,
what on the aggregator) and their placement are protocols, in
protocols/he/aggregation.py and protocols/he/he_aggregators.py.
"""
from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.he import he_aggregators as _he
from tf_privpy.protocols.he.aggregation import (  # noqa: F401  (the public names live here)
    AggregationReport, PlaintextAggregator, SecureAggregator, Update, _check_updates, _scaled)


def _runtime_devices() -> Optional[Tuple[List[str], Mapping[str, str]]]:
    """The runtime's client devices and {party: device} map, read when a round
    starts (tp.init may come after make_aggregator); None without tp.init.
    Where each role runs is the protocol's choice (he_aggregators.place)."""
    from tf_privpy import runtime
    if not runtime.is_initialized():
        return None
    return runtime.client_devices(), runtime.servers()


class _ChannelWire(_he.Wire):
    """A round's messages through the runtime's channel, where they are
    counted (and sealed in distributed mode) like every other message: each
    blob travels as a uint8 tensor (the channel seals numeric tensors only)."""

    def __init__(self, rt):
        self._rt = rt

    def send(self, src: str, dst: str, *blobs: bytes) -> List[bytes]:
        with tf.device(self._rt.devices[src]):
            sent = [tf.constant(np.frombuffer(bytes(b), np.uint8)) for b in blobs]
        got, _ = self._rt.send(src, dst, *sent)
        return [t.numpy().tobytes() for t in got]

    def rounds(self, n: int) -> None:
        self._rt.count(rounds=n)


def _runtime_wire() -> _he.Wire:
    """The runtime's channel when tp.init ran (read when a round starts),
    else messages pass as they are, uncounted."""
    from tf_privpy import runtime
    if not runtime.is_initialized():
        return _he.Wire()
    return _ChannelWire(runtime.get_runtime().runtime)


def make_aggregator(kind: str, *, key_bits: int = 2048, quant_bits: int = 16,
                    max_clients: Optional[int] = None, on_overflow: str = "raise",
                    fixed_point_bits: int = 24, seed: Optional[int] = None) -> SecureAggregator:
    """The aggregator for federated.build_batchcrypt_fed_avg's `aggregation`."""
    if kind == "plaintext":
        return PlaintextAggregator()
    if kind == "batchcrypt":
        return _he.BatchCryptAggregator(
            key_bits=key_bits, quant_bits=quant_bits, max_clients=max_clients,
            on_overflow=on_overflow, seed=seed, devices=_runtime_devices, wire=_runtime_wire)
    if kind == "paillier":
        return _he.PaillierAggregator(key_bits=key_bits, fixed_point_bits=fixed_point_bits,
                                      devices=_runtime_devices, wire=_runtime_wire)
    raise ValueError(f"unknown aggregation {kind!r}; use batchcrypt, paillier or plaintext")
