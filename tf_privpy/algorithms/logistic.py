"""Private logistic regression by mini-batch SGD (PrivPy §7.3.1, Table 4's
LR columns), written with the NumPy-like API.

One step on a batch x [b, d], labels y [b, 1]:
  z = x @ w + bias                 one private product (PrivPy §5.6's dot)
  g = sigmoid(z) - y               tp.sigmoid: a piecewise polynomial, 4
                                   rounds (PrivPy's Euler method takes 50, §5.5)
  w -= (lr / b) * x^T @ g          one private product, a public scale (local)
  bias -= (lr / b) * sum(g)
The order of the batches is public (rows in order, as PrivPy's SGD); the
servers see no value. PrivPy reports the weights' RRMSE against cleartext
around 1e-5 over its iterations (§7.3.1, Fig. 10); tests/test_workloads.py
checks it against the float64 NumPy reference within a derived bound.

Example:
  >>> (x, y), _ = tp.datasets.load_breast_cancer()
  >>> w, b = tp.models.logistic_regression_sgd(x, y, learning_rate=0.1, batch_size=32)
  >>> tp.reveal(w).shape
  TensorShape([30, 1])
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numpy as np

import tf_privpy as tp
from tf_privpy.algorithms import _data as D
from tf_privpy.protocols.mpc.api.value import PrivateTensor


class LogisticResult(NamedTuple):
    """Private weights [d, 1] and bias [1]."""
    weights: PrivateTensor
    bias: PrivateTensor


def _sgd_step(xb: PrivateTensor, yb: PrivateTensor, w: PrivateTensor, bias: PrivateTensor,
              scale: float):
    g = tp.sigmoid(tp.matmul(xb, w) + bias) - yb                 # [b, 1]
    return (w - scale * tp.matmul(tp.transpose(xb), g),
            bias - scale * tp.reduce_sum(g, axis=0))


def logistic_regression_sgd(x: D.Data, y, *, learning_rate: float, batch_size: int,
                            epochs: int = 1, steps: Optional[int] = None,
                            weights=None, bias=None, bound: Optional[float] = None
                            ) -> LogisticResult:
    """Trains logistic regression by mini-batch SGD on private data.

    Args:
      x: [n, d] features: a NumPy array (the owner's; measured and shared
        here), a PrivateTensor or a tp.LargeArray (then `bound` is required).
      y: [n] or [n, 1] labels in {0, 1}: a NumPy array or a PrivateTensor
        [n, 1] (a LargeArray's labels are in memory: [n, 1] is small).
      learning_rate, batch_size: SGD's, public.
      epochs: passes over the rows, in order; `steps` stops earlier.
      weights, bias: the start, public or private (default zeros).
      bound: a public bound on |x|'s entries.

    Returns:
      LogisticResult(weights [d, 1], bias [1]), private.

    Raises:
      RangeError: when a batch's gradient sum could reach the ring's bound.

    Example:
      >>> w, b = tp.models.logistic_regression_sgd(x, y, learning_rate=0.5,
      ...                                           batch_size=100, epochs=2)
    """
    x, bound = D.private_data(x, bound, "x")
    n, d = D.shape_of(x)
    if batch_size < 1 or learning_rate <= 0:
        raise ValueError(f"batch_size >= 1 and learning_rate > 0 needed, got {batch_size}, "
                         f"{learning_rate}")
    if not isinstance(y, PrivateTensor):
        ya = np.asarray(y, np.float64).reshape(-1, 1)
        if ya.shape[0] != n or not np.isin(ya, (0.0, 1.0)).all():
            raise ValueError(f"y must hold {n} labels in {{0, 1}}")
        y = tp.share(ya, name="y")
    w = tp.share(np.zeros((d, 1)), name="weights") if weights is None else weights
    if not isinstance(w, PrivateTensor):
        w = tp.share(np.asarray(w, np.float64).reshape(d, 1), name="weights")
    b = tp.share(np.zeros(1), name="bias") if bias is None else bias
    if not isinstance(b, PrivateTensor):
        b = tp.share(np.asarray(b, np.float64).reshape(1), name="bias")
    bs = min(int(batch_size), n)
    # x^T g sums bs products of |x| <= bound by |g| <= 1 (sigmoid - label)
    D.check_range("logistic regression's gradient sum x^T (sigmoid - y)", bs * bound,
                  "Use a smaller batch_size or scale the features down.")
    total = int(epochs) * -(-n // bs) if steps is None else int(steps)
    done = 0
    while done < total:
        for r0, r1, xb in D.row_batches(x, bs):
            if done == total:
                break
            step = D.traced(("lr_sgd", r1 - r0, d, float(learning_rate) / (r1 - r0)),
                            lambda xb_, yb_, w_, b_, s=float(learning_rate) / (r1 - r0):
                            _sgd_step(xb_, yb_, w_, b_, s))
            w, b = step(xb, y[r0:r1], w, b)
            done += 1
    return LogisticResult(w, b)


def logistic_regression_sgd_plain(x: np.ndarray, y: np.ndarray, *, learning_rate: float,
                                  batch_size: int, epochs: int = 1,
                                  steps: Optional[int] = None, weights=None, bias=None
                                  ) -> Tuple[np.ndarray, np.ndarray]:
    """The same SGD in float64 NumPy (exact sigmoid): (weights [d, 1], bias [1]).

    Example:
      >>> w, b = tp.models.logistic_regression_sgd_plain(x, y, learning_rate=0.1,
      ...                                                batch_size=32)
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64).reshape(-1, 1)
    n, d = x.shape
    w = np.zeros((d, 1)) if weights is None else np.array(weights, np.float64).reshape(d, 1)
    b = np.zeros(1) if bias is None else np.array(bias, np.float64).reshape(1)
    bs = min(int(batch_size), n)
    total = int(epochs) * -(-n // bs) if steps is None else int(steps)
    done = 0
    while done < total:
        for r0 in range(0, n, bs):
            if done == total:
                break
            xb, yb = x[r0:r0 + bs], y[r0:r0 + bs]
            g = 1.0 / (1.0 + np.exp(-(xb @ w + b))) - yb
            w = w - learning_rate / len(xb) * xb.T @ g
            b = b - learning_rate / len(xb) * g.sum(0)
            done += 1
    return w, b
