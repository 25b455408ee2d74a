"""PrivPy §7.3.1's workloads (tp.models.kmeans, logistic_regression_sgd,
matrix_factorization) against their float64 NumPy references, on small real
data (scikit-learn's breast cancer and digits) within tests/tolerances.py."""
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits

import tf_privpy as tp
import tolerances as T
import tolerances_training as TT


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


def test_logistic_regression_sgd_rrmse(ring):
    """Breast cancer (455 x 30, standardized), 2 epochs of batch 64 (16 steps)
    and 4 full-batch steps: the weights' RRMSE against float64 NumPy SGD within
    lr_sgd_rrmse_tol (PrivPy Fig. 10 reports about 1e-5)."""
    (x, y), _ = tp.datasets.load_breast_cancer()
    x = x.astype(np.float64)
    lr = 0.25
    cfg = tp.get_runtime().config
    for bs, epochs in ((64, 2), (len(x), 4)):
        for r0 in range(0, len(x), bs):   # the bound's premise: lr <= 2/L on every batch
            xb = np.concatenate([x[r0:r0 + bs], np.ones((len(x[r0:r0 + bs]), 1))], 1)
            assert lr <= 2 / (np.linalg.eigvalsh(xb.T @ xb)[-1] / (4 * len(xb)))
        w, b = tp.models.logistic_regression_sgd(x, y, learning_rate=lr, batch_size=bs,
                                                 epochs=epochs)
        wp, bp = tp.models.logistic_regression_sgd_plain(x, y, learning_rate=lr,
                                                         batch_size=bs, epochs=epochs)
        got = np.concatenate([np.asarray(tp.reveal(w)).ravel(), np.asarray(tp.reveal(b))])
        want = np.concatenate([wp.ravel(), bp])
        rrmse = np.linalg.norm(got - want) / np.linalg.norm(want)
        steps = epochs * -(-len(x) // bs)
        tol = TT.lr_sgd_rrmse_tol(x, bs, steps, lr, want, cfg.frac_bits, ring)
        assert rrmse <= tol, (bs, rrmse, tol)
        assert np.mean(((x @ wp + bp) > 0) == (y > 0.5)) > 0.9     # it learned


def test_matrix_factorization_from_a_large_array(tmp_path):
    """A 60 x 40 ratings matrix (30 % rated, 1-5) in a tp.LargeArray, 3
    factors, 5 passes of batches of 25 rows (a short last batch): P and Q
    within the issue's RRMSE <= 1e-3 of float64 NumPy, as in memory."""
    tp.reset()
    tp.init(large_array_dirs={"S1": str(tmp_path / "s1"), "S2": str(tmp_path / "s2")})
    rng = np.random.default_rng(0)
    r = (rng.integers(1, 6, size=(60, 40)) * (rng.random((60, 40)) < 0.3)).astype(np.float64)
    kw = dict(iterations=5, learning_rate=0.05, reg=0.01, batch_rows=25)
    pp, qp = tp.models.matrix_factorization_plain(r, 3, **kw)
    assert np.mean((r - pp @ qp.T) ** 2) < np.mean(r ** 2)     # it descended
    large = tp.share_to_disk(r)
    for x in (large, r):
        res = tp.models.matrix_factorization(x, 3, bound=5.0, **kw)
        for got, want in ((res.p, pp), (res.q, qp)):
            got = np.asarray(tp.reveal(got), np.float64)
            assert np.sqrt(np.mean((got - want) ** 2) / np.mean(want ** 2)) <= 1e-3
    with pytest.raises(tp.models.RangeError, match="batch sum"):
        tp.models.matrix_factorization(large, 3, bound=5.0, iterations=1, learning_rate=0.05,
                                       reg=0.01, p=np.full((60, 3), 400.0))
    large.delete()
