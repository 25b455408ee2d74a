"""Private matrix factorization by gradient descent (PrivPy §6.1's Fig. 4,
§7.3.1, Table 4's MF columns), the ratings in memory or in a tp.LargeArray.

x [n, d] ~ P [n, f] @ Q^T [f, d]. One step on a batch of rows x_b (with
their rows P_b), in Fig. 4's order:
  e    = x_b - P_b @ Q^T                       one private product
  Q   += gamma * (e^T @ P_b / m - lamb * Q)     one product, public scales
  P_b += gamma * (e @ Q / d - lamb * P_b)       one product, with the new Q
(m the batch's rows; Fig. 4 keeps e from before Q's update, and so do we).
With batch_rows = n this is Fig. 4's full gradient step; smaller batches
stream a LargeArray's rows block by block (PrivPy's 6040 x 3952 Movielens
matrix, §7.3.1), one traced step per batch height, so memory holds a batch
of x, P and Q, never the whole matrix.

Example:
  >>> r = np.random.default_rng(0).integers(0, 6, size=(40, 30)).astype(float)
  >>> res = tp.models.matrix_factorization(r, factors=3, iterations=5,
  ...                                      learning_rate=0.05, reg=0.01)
  >>> tp.reveal(res.p).shape, tp.reveal(res.q).shape
  (TensorShape([40, 3]), TensorShape([30, 3]))
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numpy as np

import tf_privpy as tp
from tf_privpy.algorithms import _data as D
from tf_privpy.protocols.mpc.api.value import PrivateTensor


class FactorizationResult(NamedTuple):
    """Private factors: p [n, f] and q [d, f], x ~ p @ q^T."""
    p: PrivateTensor
    q: PrivateTensor


def _mf_step(xb: PrivateTensor, pb: PrivateTensor, q: PrivateTensor, gamma_m: float,
             gamma_d: float, decay: float):
    e = xb - tp.matmul(pb, tp.transpose(q))                          # [m, d]
    q = decay * q + gamma_m * tp.matmul(tp.transpose(e), pb)         # [d, f]
    return decay * pb + gamma_d * tp.matmul(e, q), q                 # [m, f]


def initial_factors(n: int, d: int, factors: int, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Fig. 4's start, P and Q uniform in [0, 1), from a public seed (the
    same start for the private and the plaintext run)."""
    rng = np.random.default_rng(seed)
    return rng.random((n, factors)), rng.random((d, factors))


def matrix_factorization(x: D.Data, factors: int, *, iterations: int, learning_rate: float,
                         reg: float, batch_rows: Optional[int] = None, p=None, q=None,
                         seed: int = 0, bound: Optional[float] = None,
                         factor_bound: float = 1.0) -> FactorizationResult:
    """Factorizes a private [n, d] matrix by gradient descent.

    Args:
      x: a NumPy array (the owner's: measured and shared here), a
        PrivateTensor or a tp.LargeArray (then `bound` is required).
      factors: f, the latent dimension.
      iterations: passes over the rows (public: fixed in advance, §5.5).
      learning_rate, reg: Fig. 4's gamma and lamb.
      batch_rows: rows per step (default: all, Fig. 4's full step).
      p, q: the start [n, f], [d, f], public or private; default
        initial_factors(n, d, f, seed).
      bound: a public bound on |x|'s entries.
      factor_bound: a public bound on a private start's entries (default 1:
        Fig. 4's uniform start); a public start is measured.

    Returns:
      FactorizationResult(p, q), private.

    Raises:
      RangeError: when a step's error or its products over a batch could
        reach the ring's bound at the start.

    Example:
      >>> ratings = tp.share_to_disk("ratings.npy")           # [6040, 3952]
      >>> res = tp.models.matrix_factorization(ratings, 10, iterations=1,
      ...     learning_rate=0.05, reg=0.01, batch_rows=1000, bound=5.0)
    """
    x, bound = D.private_data(x, bound, "x")
    n, d = D.shape_of(x)
    if factors < 1 or iterations < 1:
        raise ValueError(f"factors and iterations must be >= 1, got {factors}, {iterations}")
    p0, q0 = initial_factors(n, d, factors, seed)
    p = p0 if p is None else p
    q = q0 if q is None else q
    fb = float(factor_bound)
    pmax = fb if isinstance(p, PrivateTensor) else max(fb, float(np.max(np.abs(p))))
    qmax = fb if isinstance(q, PrivateTensor) else max(fb, float(np.max(np.abs(q))))
    if not isinstance(q, PrivateTensor):
        q = tp.share(np.asarray(q, np.float64).reshape(d, factors), name="q")
    m = n if batch_rows is None else min(n, int(batch_rows))
    # |e| <= bound + f*|p||q|; e^T p sums m of them times |p| (at the start:
    # gradient descent that converges keeps the factors near it)
    err = bound + factors * pmax * qmax
    D.check_range("matrix factorization's error x - p q^T", err,
                  "Scale the ratings down or start from smaller factors.")
    D.check_range("matrix factorization's batch sum e^T p", m * err * pmax,
                  "Use smaller batch_rows or scale the ratings down.")
    g, decay = float(learning_rate), 1.0 - float(learning_rate) * float(reg)
    if isinstance(p, PrivateTensor):
        blocks = [p[r0:min(n, r0 + m)] for r0 in range(0, n, m)]
    else:
        pa = np.asarray(p, np.float64).reshape(n, factors)
        blocks = [tp.share(pa[r0:r0 + m], name="p") for r0 in range(0, n, m)]
    for _ in range(int(iterations)):
        for i, (r0, r1, xb) in enumerate(D.row_batches(x, m)):
            rows = r1 - r0
            step = D.traced(("mf", rows, d, factors, g, decay),
                            lambda xb_, pb_, q_, gm=g / rows, gd=g / d, dec=decay:
                            _mf_step(xb_, pb_, q_, gm, gd, dec))
            blocks[i], q = step(xb, blocks[i], q)
    return FactorizationResult(blocks[0] if len(blocks) == 1 else tp.concat(blocks, 0), q)


def matrix_factorization_plain(x: np.ndarray, factors: int, *, iterations: int,
                               learning_rate: float, reg: float,
                               batch_rows: Optional[int] = None, p=None, q=None,
                               seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """The same steps in float64 NumPy: (p [n, f], q [d, f]).

    Example:
      >>> p, q = tp.models.matrix_factorization_plain(r, 3, iterations=5,
      ...                                             learning_rate=0.05, reg=0.01)
    """
    x = np.asarray(x, np.float64)
    n, d = x.shape
    p0, q0 = initial_factors(n, d, factors, seed)
    p = np.array(p0 if p is None else p, np.float64)
    q = np.array(q0 if q is None else q, np.float64)
    m = n if batch_rows is None else min(n, int(batch_rows))
    g, decay = float(learning_rate), 1.0 - float(learning_rate) * float(reg)
    for _ in range(int(iterations)):
        for r0 in range(0, n, m):
            xb, pb = x[r0:r0 + m], p[r0:r0 + m]
            e = xb - pb @ q.T
            q = decay * q + g / len(xb) * e.T @ pb
            p[r0:r0 + m] = decay * pb + g / d * e @ q
    return p, q
