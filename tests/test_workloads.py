"""PrivPy §7.3.1's workloads (tp.models.kmeans, logistic_regression_sgd,
matrix_factorization) against their float64 NumPy references, on small real
data (scikit-learn's breast cancer and digits) within tests/tolerances.py."""
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits

import tf_privpy as tp
import tolerances as T


def _cancer():
    x = load_breast_cancer(return_X_y=True)[0]
    return (x - x.mean(0)) / x.std(0)          # standardized: |x| < 12


@pytest.mark.parametrize("data,k,rings,batch", [
    ("cancer", 2, (128, 64), None),           # 569 x 30
    ("digits", 10, (128,), 600),              # 1797 x 64, three batches of rows
])
def test_kmeans_equals_plaintext(data, k, rings, batch):
    x = _cancer() if data == "cancer" else load_digits(return_X_y=True)[0]
    x_before = x.copy()
    c0 = x[:7 * k:7]                           # the same start for both: every 7th row
    c_plain, a_plain = tp.models.kmeans_plain(x, c0, iterations=4)
    for bits in rings:
        tp.reset()
        tp.init(tp.Config(ring_bits=bits))
        res = tp.models.kmeans(x, c0, iterations=4, batch_rows=batch)
        a = np.asarray(tp.reveal(res.assignments))
        c = np.asarray(tp.reveal(res.centroids), np.float64)
        np.testing.assert_array_equal(a, a_plain)          # exact integer assignments
        cfg = tp.get_runtime().config
        tol = T.kmeans_centroid_tol(c_plain, cfg.frac_bits, bits)
        assert np.all(np.abs(c - c_plain) <= tol), np.max(np.abs(c - c_plain) - tol)
    np.testing.assert_array_equal(x, x_before)
    assert len(np.unique(a_plain)) == k                    # a real clustering, not one blob


def test_kmeans_keeps_an_empty_cluster_and_refuses_out_of_range(ring):
    x = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
    c0 = np.array([[0.0, 0.0], [5.0, 5.0], [20.0, 20.0]])   # the third attracts nothing
    res = tp.models.kmeans(x, c0, iterations=2)
    c_plain, a_plain = tp.models.kmeans_plain(x, c0, iterations=2)
    np.testing.assert_array_equal(np.asarray(tp.reveal(res.assignments)), a_plain)
    np.testing.assert_allclose(np.asarray(tp.reveal(res.centroids)), c_plain,
                               atol=np.max(T.kmeans_centroid_tol(c_plain, tp.get_runtime()
                                                                 .config.frac_bits, ring)))
    big = np.full((4, 64), np.sqrt(tp.get_runtime().config.bound / 64))   # 3x the range
    with pytest.raises(tp.models.RangeError, match="distances"):
        tp.models.kmeans(big, big[:2], iterations=1)
    with pytest.raises(tp.models.RangeError, match="bound="):
        tp.models.kmeans(tp.share(x), c0, iterations=1)
