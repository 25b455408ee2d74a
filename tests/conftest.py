"""Shared fixtures. tp.init() runs at import, before any test module touches
TensorFlow, because logical devices must be configured before TF initializes
its devices; fixtures then re-init with the config each test needs."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_privpy as tp  # noqa: E402

import durations  # noqa: E402

tp.init()


def pytest_addoption(parser):
    durations.pytest_addoption(parser)


def pytest_configure(config):
    durations.pytest_configure(config)


RINGS = [128, 64]
#: a `ring` case ran since the default runtime was last started (config.stash:
#: per session, no module global)
_AFTER_RING = pytest.StashKey[bool]()


@pytest.fixture(params=RINGS, ids=lambda b: f"ring{b}")
def ring(request):
    """A fresh privpy runtime in each ring: one tp.init() per case. The
    default runtime comes back (pytest_runtest_setup below) before the next
    test that does not ask for a ring, not after every case: a run of ring
    cases re-inits once per case instead of twice (the default runtime the old
    teardown made between two ring cases was dropped unused)."""
    tp.reset()
    tp.init(tp.Config(ring_bits=request.param))
    request.config.stash[_AFTER_RING] = True
    yield request.param


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the first test without `ring` after ring cases, and before any
    of its fixtures (module ones included): a fresh default runtime, as the
    ring fixture's teardown used to start after every case."""
    if "ring" in item.fixturenames or not item.config.stash.get(_AFTER_RING, False):
        return
    item.config.stash[_AFTER_RING] = False
    tp.reset()
    tp.init()


@pytest.fixture(params=["eager", "tf_function"])
def mode(request):
    """Runs a test body eagerly and inside tf.function."""
    return request.param


def run(mode, fn, *args):
    """fn(*args) eagerly or as a tf.function; tf.function results are
    returned as the same (tensor / PrivateTensor) values."""
    if mode == "eager":
        return fn(*args)
    return tf.function(fn)(*args)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def reap_tff_worker():
    """Stops the C++ `worker_binary` that TFF's default execution context
    spawns, once the session is over (TFF reuses one worker for the whole
    session; killing it between tests would break the next TFF call).

    TFF 0.87 only kills it from a __del__ that need not run at interpreter exit,
    so without this every test run would leave an orphaned worker process
    (which also keeps the runner's stdout/stderr pipes open).
    """
    yield
    from tf_privpy import federated
    federated._reap_tff_workers()
