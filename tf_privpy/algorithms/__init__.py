"""Issue 29's workloads, PrivPy §7.3.1 (Table 4), written with the NumPy-like
API as PrivPy's users write them, each beside its float64 NumPy reference:

- kmeans.py: Lloyd's k-means (private distances, argmin, one-hot, division);
- logistic.py: logistic regression by mini-batch SGD;
- factorization.py: matrix factorization by gradient descent (PrivPy Fig. 4),
  the ratings in memory or in a tp.LargeArray;
- _data.py: the data's public range, row batches, refusals, traced steps.

Re-exported as tp.models.kmeans, tp.models.logistic_regression_sgd and
tp.models.matrix_factorization (and their *_plain references).
"""
from tf_privpy.algorithms._data import RangeError
from tf_privpy.algorithms.factorization import (FactorizationResult, matrix_factorization,
                                                matrix_factorization_plain)
from tf_privpy.algorithms.kmeans import KMeansResult, kmeans, kmeans_plain
from tf_privpy.algorithms.logistic import (LogisticResult, logistic_regression_sgd,
                                           logistic_regression_sgd_plain)

__all__ = ["FactorizationResult", "KMeansResult", "LogisticResult", "RangeError", "kmeans",
           "kmeans_plain", "logistic_regression_sgd", "logistic_regression_sgd_plain",
           "matrix_factorization", "matrix_factorization_plain"]
