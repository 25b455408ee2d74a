"""Private k-means (PrivPy §7.3.1, Table 4's k-means columns): Lloyd's
iterations on secret-shared rows, written with the NumPy-like API.

One iteration, for a batch of rows x [b, d] and centroids c [k, d]:
  1. distances: ||x_i - c_j||^2 = ||x_i||^2 - 2 x_i.c_j + ||c_j||^2; the
     first term is the same for every centroid of a row, so the argmin
     needs only ||c_j||^2 - 2 x_i.c_j (one private product x @ c^T and the
     k squared norms: PrivPy §5.6's dot product instead of b*k*d
     multiplications);
  2. assignment: tp.argmin over the k centroids (a comparison tree,
     ceil(log2 k) rounds, the first minimum as np.argmin), then a one-hot by
     k equalities with the public 0..k-1: integer bits, so
  3. the per-cluster sums one_hot^T @ x and counts need no truncation
     (exact: tests/tolerances.py's one_hot_gather_tol);
  4. update: c_j = sums_j / counts_j, a private division (Goldschmidt,
     tp.divide); an empty cluster keeps its centroid, as plaintext k-means
     does (a select on [count == 0]).
The servers learn nothing of the assignments or counts; only what the
caller reveals (typically the final centroids).

Example:
  >>> import tf_privpy as tp
  >>> tp.init()
  >>> x = np.random.default_rng(0).normal(size=(200, 4))
  >>> res = tp.models.kmeans(x, x[:3], iterations=5)
  >>> tp.reveal(res.centroids).shape, tp.reveal(res.assignments).shape
  (TensorShape([3, 4]), TensorShape([200]))
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numpy as np

import tf_privpy as tp
from tf_privpy.algorithms import _data as D
from tf_privpy.protocols.mpc.api.value import PrivateTensor


class KMeansResult(NamedTuple):
    """Private results: centroids [k, d] (float) and each row's cluster in
    the last iteration's assignment step, [n] int64."""
    centroids: PrivateTensor
    assignments: PrivateTensor


def _assign(xb: PrivateTensor, c: PrivateTensor):
    """(cluster index [b], per-cluster sums [k, d], counts [k]) of one batch."""
    k = int(c.shape[0])
    cc = tp.reduce_sum(c * c, axis=1)                        # [k]
    dist = cc - 2.0 * tp.matmul(xb, tp.transpose(c))         # [b, k], ||x||^2 dropped
    idx = tp.argmin(dist, axis=1)                            # first minimum, as np.argmin
    onehot = tp.equal(tp.expand_dims(idx, 1), np.arange(k, dtype=np.int64)[None, :])
    # one-hot bits times fixed point: no truncation, the sums are exact
    return idx, tp.matmul(tp.transpose(onehot), xb), tp.reduce_sum(onehot, axis=0)


def _update(sums: PrivateTensor, counts: PrivateTensor, c: PrivateTensor) -> PrivateTensor:
    """New centroids: sums / counts, an empty cluster's centroid unchanged
    (1/0 is 0 in tp.divide; the select puts the old centroid there)."""
    empty = tp.expand_dims(tp.equal(counts, 0), 1)
    return tp.where(empty, c, tp.divide(sums, tp.expand_dims(counts, 1)))


def _iteration(xb: PrivateTensor, c: PrivateTensor) -> Tuple[PrivateTensor, PrivateTensor]:
    idx, sums, counts = _assign(xb, c)
    return idx, _update(sums, counts, c)


def kmeans(x: D.Data, centroids, iterations: int = 10, *, bound: Optional[float] = None,
           batch_rows: Optional[int] = None) -> KMeansResult:
    """Lloyd's k-means on private rows from a given start.

    Args:
      x: [n, d] rows: a NumPy array (the data owner's: its range is measured
        and it is shared here), a PrivateTensor or a tp.LargeArray (then
        `bound` is required).
      centroids: the start, [k, d]: public (e.g. chosen by the analyst, or
        rows the owner picked) or a PrivateTensor whose entries lie within
        `bound` (rows of x do).
      iterations: Lloyd iterations (public: the servers cannot see
        convergence, PrivPy §5.5, so the count is fixed in advance).
      bound: a public bound on |x|'s entries (and the start's).
      batch_rows: rows held in memory at once (default: all, or the blocks
        a LargeArray is read in); the sums and counts of all batches are
        added before the division, so the result does not depend on it.

    Returns:
      KMeansResult(centroids, assignments), both private.

    Raises:
      RangeError: when the distances or the per-cluster sums could reach
        the ring's range bound (say what to scale).

    Example:
      >>> res = tp.models.kmeans(tp.share(x), x[:5], iterations=3, bound=10.0)
      >>> np.asarray(tp.reveal(res.assignments))
    """
    x, bound = D.private_data(x, bound, "x")
    n, d = D.shape_of(x)
    c = centroids
    if not isinstance(c, PrivateTensor):
        c0 = np.asarray(c, np.float64)
        if c0.ndim != 2 or c0.shape[1] != d:
            raise ValueError(f"centroids must be [k, {d}], got shape {c0.shape}")
        bound = max(bound, float(np.max(np.abs(c0))))
        c = tp.share(c0, name="centroids")
    k = int(c.shape[0])
    if k < 1 or int(c.shape[1]) != d:
        raise ValueError(f"centroids must be [k >= 1, {d}], got {c.shape}")
    if iterations < 1:
        raise ValueError(f"iterations must be >= 1, got {iterations}")
    # centroids are means of rows, so |c| <= bound throughout; |x.c| <= d*bound^2
    D.check_range("k-means' distances ||c||^2 - 2 x.c", 3.0 * d * bound * bound,
                  "Scale the features down (e.g. standardize them) or reduce the bound.")
    rows = n if batch_rows is None else min(n, int(batch_rows))
    D.check_range("k-means' per-cluster sums", float(n) * bound,
                  "Scale the features down, or cluster fewer rows.")
    single = not isinstance(x, D.LargeArray) and rows == n
    step = D.traced(("kmeans_iter", n, d, k), _iteration) if single else \
        D.traced(("kmeans_assign", d, k), _assign)
    update = D.traced(("kmeans_update", d, k), _update)
    idx = None
    for _ in range(int(iterations)):
        if single:  # the whole data in memory: one traced iteration
            idx, c = step(x, c)
            continue
        parts, sums, counts = [], None, None
        for _r0, _r1, xb in D.row_batches(x, rows):
            i, s, m = step(xb, c)
            parts.append(i)
            sums, counts = (s, m) if sums is None else (sums + s, counts + m)
        idx = parts[0] if len(parts) == 1 else tp.concat(parts, 0)
        c = update(sums, counts, c)
    return KMeansResult(c, idx)


def kmeans_plain(x: np.ndarray, centroids: np.ndarray, iterations: int = 10
                 ) -> Tuple[np.ndarray, np.ndarray]:
    """The same iterations in float64 NumPy (the reference the private run is
    compared with): (centroids [k, d], assignments [n] of the last iteration).

    Example:
      >>> c, a = tp.models.kmeans_plain(x, x[:3], iterations=5)
    """
    x = np.asarray(x, np.float64)
    c = np.array(centroids, np.float64)
    idx = np.zeros(len(x), np.int64)
    for _ in range(int(iterations)):
        dist = (c * c).sum(1)[None, :] - 2.0 * x @ c.T
        idx = np.argmin(dist, axis=1)
        for j in range(len(c)):
            members = idx == j
            if members.any():
                c[j] = x[members].mean(0)
    return c, idx
