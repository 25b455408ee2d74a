"""Private matrix factorization by gradient descent (PrivPy §6.1's Fig. 4,
§7.3.1, Table 4's MF columns), the ratings in memory or in a tp.LargeArray.

x [n, d] ~ P [n, f] @ Q^T [f, d]. One step on a batch of rows x_b (with
their rows P_b), in Fig. 4's order:
  e    = x_b - P_b @ Q^T                       one private product
  Q   += gamma * (e^T @ P_b / m - lamb * Q)     one product, public scales
  P_b += gamma * (e @ Q / d - lamb * P_b)       one product, with the new Q
(m the batch's rows; Fig. 4 keeps e from before Q's update, and so do we).
With batch_rows = n this is Fig. 4's full gradient step.

A LargeArray never comes into memory whole, nor does a batch of it: a
batch taller than one of its blocks (tp.Config(large_block_bytes)) is
streamed block by block in two passes, so that working memory is a few
blocks of x and e whatever the batch (PrivPy's 6040 x 3952 Movielens
matrix, §7.3.1, at batch_rows = n):
  pass 1, each block k:  G += e_k^T @ P_k,  e_k = x_k - P_k @ Q^T
  then                    Q' = decay Q + gamma / m * G,  C = Q^T @ Q'   [f, f]
  pass 2, each block k:  P_k = decay P_k + gamma / d * (x_k @ Q' - P_k @ C)
since e_k @ Q' = x_k @ Q' - P_k @ (Q^T @ Q'): the same step, exact in the
reals, without keeping e (a matrix of x's size) or computing it twice. Each
block is read twice (once a pass). A batch within one block is one traced
step, as in memory.

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
from tf_privpy.large.array import LargeArray
from tf_privpy.protocols.mpc.api.value import PrivateTensor


class FactorizationResult(NamedTuple):
    """Private factors: p [n, f] and q [d, f], x ~ p @ q^T."""
    p: PrivateTensor
    q: PrivateTensor


# gamma / m and gamma / d are divisions by m / gamma and d / gamma (public,
# >= 1), which the 128-bit ring encodes with 20 extra fractional bits: as
# factors they would be encoded at 2^-20, and gamma / 3952 = 1.27e-5 would
# be off by 2 % (the learning rate of a Movielens-wide step).
def _mf_step(xb: PrivateTensor, pb: PrivateTensor, q: PrivateTensor, m_g: float,
             d_g: float, decay: float):
    e = xb - tp.matmul(pb, q, transpose_b=True)                      # [m, d]
    q = decay * q + tp.divide(tp.matmul(e, pb, transpose_a=True), m_g)   # [d, f]
    return decay * pb + tp.divide(tp.matmul(e, q), d_g), q           # [m, f]


def _mf_grad(xb: PrivateTensor, pb: PrivateTensor, q: PrivateTensor) -> PrivateTensor:
    """Pass 1 of a streamed batch, one block: e_k^T @ P_k [d, f] (e_k is
    dropped with the block)."""
    return tp.matmul(xb - tp.matmul(pb, q, transpose_b=True), pb, transpose_a=True)


def _mf_q(q: PrivateTensor, g: PrivateTensor, m_g: float, decay: float):
    """Between the passes: Q' and C = Q^T @ Q' [f, f], which lets pass 2
    form e_k @ Q' without e_k."""
    qn = decay * q + tp.divide(g, m_g)
    return qn, tp.matmul(q, qn, transpose_a=True)


def _mf_p(xb: PrivateTensor, pb: PrivateTensor, qn: PrivateTensor, c: PrivateTensor,
          d_g: float, decay: float) -> PrivateTensor:
    """Pass 2, one block: P_k's update with e_k @ Q' = x_k @ Q' - P_k @ C."""
    return decay * pb + tp.divide(tp.matmul(xb, qn) - tp.matmul(pb, c), d_g)


def _chunks(n: int, m: int, block: int):
    """Each batch [r0, r1) of m rows as its pieces of at most `block` rows."""
    for r0 in range(0, n, m):
        r1 = min(n, r0 + m)
        yield r0, r1, [(c0, min(r1, c0 + block)) for c0 in range(r0, r1, block)]


def _rows(x, c0: int, c1: int, n: int) -> PrivateTensor:
    """Rows [c0, c1) in memory: a LargeArray's piece is at most one block,
    read on S1 and S2 (nothing reaches the client)."""
    if isinstance(x, LargeArray):
        return x[c0:c1].to_private()
    return x if (c0, c1) == (0, n) else x[c0:c1]


def _streamed_batch(x, pieces, pb: dict, q: PrivateTensor, m: int, d: int, f: int, g: float,
                    decay: float) -> PrivateTensor:
    """One step on a batch taller than a block, in two passes over its
    pieces (the module's doc); updates pb in place, returns Q'."""
    n = x.shape[0]
    grad = None
    for c0, c1 in pieces:
        step = D.traced(("mf_grad", c1 - c0, d, f), _mf_grad)
        part = step(_rows(x, c0, c1, n), pb[c0], q)
        grad = part if grad is None else grad + part
    qn, c = D.traced(("mf_q", d, f, m / g, decay),
                     lambda q_, g_, mg=m / g, dec=decay: _mf_q(q_, g_, mg, dec))(q, grad)
    for c0, c1 in pieces:
        step = D.traced(("mf_p", c1 - c0, d, f, d / g, decay),
                        lambda xb_, pb_, qn_, c_, dg=d / g, dec=decay:
                        _mf_p(xb_, pb_, qn_, c_, dg, dec))
        pb[c0] = step(_rows(x, c0, c1, n), pb[c0], qn, c)
    return qn


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
      batch_rows: rows per step (default: all, Fig. 4's full step). A
        LargeArray's batch taller than a block is streamed in two passes
        over its blocks: memory holds a few blocks, not the batch.
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
    if not float(learning_rate) > 0:   # the steps divide by m / gamma and d / gamma
        raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
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
    # pieces of at most a block of a LargeArray (its batches never come into
    # memory whole); in memory, a batch is one piece
    block = x.block_rows if isinstance(x, LargeArray) else m
    batches = list(_chunks(n, m, block))
    if any(len(pieces) > 1 for _, _, pieces in batches):
        D.check_range("matrix factorization's streamed product x q", d * bound * qmax,
                      "Scale the ratings down or start from smaller factors.")
        D.check_range("matrix factorization's streamed q^T q", d * qmax * qmax,
                      "Start from smaller factors.")
    if not isinstance(p, PrivateTensor):
        p = tp.share(np.asarray(p, np.float64).reshape(n, factors), name="p")
    pb = {c0: p[c0:c1] for _, _, pieces in batches for c0, c1 in pieces}
    for _ in range(int(iterations)):
        for r0, r1, pieces in batches:
            if len(pieces) > 1:
                q = _streamed_batch(x, pieces, pb, q, r1 - r0, d, factors, g, decay)
                continue
            rows = r1 - r0
            step = D.traced(("mf", rows, d, factors, g, decay),
                            lambda xb_, pb_, q_, mg=rows / g, dg=d / g, dec=decay:
                            _mf_step(xb_, pb_, q_, mg, dg, dec))
            pb[r0], q = step(_rows(x, r0, r1, n), pb[r0], q)
    parts = [pb[c0] for c0 in sorted(pb)]
    return FactorizationResult(parts[0] if len(parts) == 1 else tp.concat(parts, 0), q)


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
