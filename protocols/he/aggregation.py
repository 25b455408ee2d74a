"""Secure aggregation of model updates, the protocol side: the aggregator
interface, the cost report of a round, the checks of the clients' updates
and the plaintext reference (plain FedAvg). The encrypted aggregators
(BatchCrypt, one Paillier ciphertext per value) are in he_aggregators.py;
the public API is tf_privpy.he.aggregation.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Dict, List, Sequence, Tuple

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
