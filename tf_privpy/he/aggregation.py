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
aggregator's on the S1 device. Each aggregate() returns a report of bytes and
seconds, which the federated process adds to its round metrics.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

Update = List[np.ndarray]


@dataclasses.dataclass
class AggregationReport:
    """Costs of one aggregation.

    Seconds are wall-clock in this process, where the clients take turns on
    the same cores: encrypt_s and decrypt_s add up all clients' work (every
    client decrypts the aggregate, as in BatchCrypt); with clients on their
    own machines each spends about encrypt_s / clients and decrypt_s / clients.
    """

    bytes_up_per_client: int = 0        # client -> aggregator, per client
    bytes_down_per_client: int = 0      # aggregator -> client, per client
    encrypt_s: float = 0.0              # all clients' quantize + pack + encrypt
    aggregate_s: float = 0.0            # the aggregator's ciphertext sums
    decrypt_s: float = 0.0              # all clients' decrypt + decode
    values: int = 0                     # values per update
    ciphertexts_per_client: int = 0
    positive_overflows: int = 0
    negative_overflows: int = 0
    # Values saturated by clipping, over all clients: each client counts its
    # own (on its device) and the aggregator adds the counts.
    clipped: int = 0

    def as_dict(self) -> Dict[str, float]:
        return dataclasses.asdict(self)


def _check_updates(updates: Sequence[Update], weights: Sequence[float]) -> None:
    if not updates:
        raise ValueError("aggregate() needs at least one client update")
    if len(weights) != len(updates):
        raise ValueError(f"{len(updates)} updates but {len(weights)} weights")
    shapes = [u.shape for u in updates[0]]
    for c, upd in enumerate(updates):
        if [u.shape for u in upd] != shapes:
            raise ValueError(f"client {c}'s update has layer shapes "
                             f"{[u.shape for u in upd]}, expected {shapes}")
        for i, u in enumerate(upd):
            if not np.all(np.isfinite(u)):
                raise ValueError(f"client {c}'s update of layer {i} has NaN or Inf; "
                                 "nothing was encrypted. Lower the learning rate or "
                                 "clip gradients.")
    if any(not np.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"client weights must be finite, >= 0 and not all 0; got {weights}")


def _scaled(updates: Sequence[Update], weights: Sequence[float]) -> List[Update]:
    """Each client's update times its share of the total weight, so the plain
    sum of the results is the weighted mean (the share is public metadata)."""
    total = float(sum(weights))
    return [[(w / total) * np.asarray(u, np.float64) for u in upd]
            for upd, w in zip(updates, weights)]


class SecureAggregator:
    """Interface: `setup()` once (key generation), then `aggregate()` per round."""

    name = "abstract"

    def setup(self) -> None:
        """Generates keys (the leader client's job); idempotent."""

    def aggregate(self, updates: Sequence[Update],
                  weights: Sequence[float]) -> Tuple[Update, AggregationReport]:
        raise NotImplementedError


class PlaintextAggregator(SecureAggregator):
    """The weighted mean in the clear: the reference the encrypted ones match."""

    name = "plaintext"

    def aggregate(self, updates, weights):
        _check_updates(updates, weights)
        t0 = time.perf_counter()
        scaled = _scaled(updates, weights)
        mean = [np.sum([s[i] for s in scaled], axis=0).astype(updates[0][i].dtype)
                for i in range(len(updates[0]))]
        n_values = int(sum(u.size for u in updates[0]))
        return mean, AggregationReport(
            bytes_up_per_client=4 * n_values, bytes_down_per_client=4 * n_values,
            aggregate_s=time.perf_counter() - t0, values=n_values)


def make_aggregator(kind: str, *, key_bits: int = 2048, quant_bits: int = 16,
                    max_clients: Optional[int] = None, on_overflow: str = "raise",
                    fixed_point_bits: int = 24, seed: Optional[int] = None) -> SecureAggregator:
    """The aggregator for federated.build_batchcrypt_fed_avg's `aggregation`."""
    if kind == "plaintext":
        return PlaintextAggregator()
    from tf_privpy.he import _he_aggregators
    if kind == "batchcrypt":
        return _he_aggregators.BatchCryptAggregator(
            key_bits=key_bits, quant_bits=quant_bits, max_clients=max_clients,
            on_overflow=on_overflow, seed=seed)
    if kind == "paillier":
        return _he_aggregators.PaillierAggregator(key_bits=key_bits,
                                                  fixed_point_bits=fixed_point_bits)
    raise ValueError(f"unknown aggregation {kind!r}; use batchcrypt, paillier or plaintext")
