"""Shared fixtures. tp.init() runs at import, before any test module touches
TensorFlow, because logical devices must be configured before TF initializes
its devices; fixtures then re-init with the config each test needs."""
import dataclasses
import gc
import os
from typing import List, Optional, Sequence, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

import tf_privpy as tp  # noqa: E402
from tf_privpy import runtime as tp_runtime  # noqa: E402

import durations  # noqa: E402

tp.init()

#: Python's cyclic collector at its default thresholds (700, 10, 10) ran
#: about 6,000 times in three test files here and took 8.6 of their 91
#: CPU-s: tracing makes a few hundred objects per graph op, and each full
#: pass walks the worker's whole heap of graphs. At these thresholds it ran
#: 38 times (1.6 CPU-s, the files 85 CPU-s, peak RSS 1.94 against 1.90 GB).
#: The suite's processes only: the library leaves the user's collector alone.
GC_THRESHOLDS = (50_000, 20, 20)
gc.set_threshold(*GC_THRESHOLDS)


def pytest_addoption(parser):
    durations.pytest_addoption(parser)


def pytest_configure(config):
    durations.pytest_configure(config)


def _file_rank(items) -> tuple:
    """A test file's place in the run: files holding `long` tests first
    (test_vit.py's 2,000 private digits, about 2 min on one core once the
    zoo step trained the ViT, 5 with its training; test_training.py's
    network A, about 4 min with its other tests),
    then files with `slow` tests, then the rest; within each, more tests
    first (xdist's own order). With `make test`'s three workers, a file each
    at a time, the longest files start at once and the many short ones fill
    the workers' ends, instead of a long file running alone at the end (the
    long runs used to be a pytest step of their own, whose 250 s ended with
    one worker idle for 25 s)."""
    marks = {m.name for item in items for m in item.iter_markers()}
    return ("long" not in marks, "slow" not in marks, -len(items))


def pytest_collection_modifyitems(config, items):
    """Orders the files by _file_rank, each file's tests in their own order.
    Every xdist worker collects and orders alike (the order depends on the
    collected tests only), and `make test` passes --no-loadscope-reorder so
    that xdist hands the files out in this order."""
    files = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    items[:] = [i for f in sorted(files.values(), key=_file_rank) for i in f]


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
    if ("ring" in item.fixturenames or "case" in item.fixturenames
            or not item.config.stash.get(_AFTER_RING, False)):
        return
    item.config.stash[_AFTER_RING] = False
    tp.reset()
    tp.init()


BACKENDS = ("privpy", "plaintext")
MODES = ("eager", "tf_function")


@dataclasses.dataclass(frozen=True)
class Case:
    """One protocol case: a backend, a ring and how the test body runs
    (mode None: a test that does not run both ways)."""

    backend: str
    ring: int
    mode: Optional[str] = None

    def __str__(self) -> str:
        return f"{self.backend}-ring{self.ring}" + (f"-{self.mode}" if self.mode else "")

    @property
    def config(self) -> tp.Config:
        """The config of the runtime the case made current."""
        return tp.get_runtime().config


def cases(pairs: Optional[Sequence[Tuple[str, int]]] = None,
          modes: Sequence[Optional[str]] = MODES) -> List:
    """Case parameters: each (backend, ring) of `pairs` (default: every
    backend x ring) in each mode."""
    pairs = pairs if pairs is not None else [(b, r) for b in BACKENDS for r in RINGS]
    return [pytest.param(c, id=str(c)) for c in (Case(b, r, m) for b, r in pairs for m in modes)]


#: the session's runtimes, one per (backend, ring), made at first use
_RUNTIMES = pytest.StashKey[dict]()


def activate_runtime(config: pytest.Config, backend: str, ring: int) -> tp_runtime.Handle:
    """The session's runtime for (backend, ring), current, its tp.stats()
    counters as after tp.init(): made by tp.init() the first time, switched to
    by tf_privpy.runtime.activate() after (keys and nonces carry on)."""
    runtimes = config.stash.setdefault(_RUNTIMES, {})
    handle = runtimes.get((backend, ring))
    # a case that put a PRG stream out of step on purpose (test_channel's
    # desync tests) leaves a runtime no later case can use: a new one then
    if handle is None or not handle.runtime.streams_in_step():
        tp.reset()
        handle = tp.init(tp.Config(ring_bits=ring, backend=backend))
        runtimes[(backend, ring)] = handle
    else:
        tp_runtime.activate(handle)
    config.stash[_AFTER_RING] = True
    return handle


def _enter_ring(request) -> int:
    activate_runtime(request.config, "privpy", request.param)
    return request.param


def session_ring_fixture():
    """A `ring` fixture for a module to bind at its top level (`ring =
    session_ring_fixture()`): the same two cases as conftest's `ring`, run
    in the session's privpy runtime of the ring (activate_runtime) instead
    of a fresh tp.init() per case (issue 25): no runtime, and none of what
    it caches, made again for every case; objects one case builds (a
    converted model, a trainer) stay usable in its ring's later cases."""
    return pytest.fixture(params=RINGS, ids=lambda b: f"ring{b}", name="ring")(_enter_ring)


def _enter(request) -> Case:
    c = request.param
    activate_runtime(request.config, c.backend, c.ring)
    return c


def case_fixtures(pairs: Optional[Sequence[Tuple[str, int]]] = None):
    """(case, ring_case) fixtures over `pairs`, for a module that runs other
    (backend, ring) pairs than all four: `case, ring_case = case_fixtures([...])`
    at its top level."""
    return (pytest.fixture(params=cases(pairs), name="case")(_enter),
            pytest.fixture(params=cases(pairs, modes=(None,)), name="ring_case")(_enter))


# `case`: backend x ring x mode, eight cases; `ring_case`: backend x ring, for
# a test that runs one way only. Each (backend, ring) runtime is created once
# per session and made current, its counters as after tp.init(), for each
# case (a test may still tp.init() a config of its own: the next case
# switches back).
case, ring_case = case_fixtures()


@pytest.fixture(params=["eager", "tf_function"])
def mode(request):
    """Runs a test body eagerly and inside tf.function."""
    return request.param


def run(mode, fn, *args):
    """fn(*args) eagerly or traced: as a `tp.function`, the tf.function that
    private computations are documented to use (Grappler off: a third to a
    half of a first call, and nothing for it to optimize in a private graph).
    The protocols under a plain tf.function, Grappler on, are
    tests/test_grappler.py's (every case op family in one graph) and the
    placement tests' (partition graphs). Results come back as the same
    (tensor / PrivateTensor) values."""
    if mode == "eager":
        return fn(*args)
    return tp.function(fn)(*args)


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


@pytest.fixture(scope="session")
def shared_driver_process(tmp_path_factory):
    """tests/distributed_driver.py as a process (tests/driver_client.py), one
    per session: test_distributed.py, test_distributed_models.py and
    test_share_io.py use it when they run in the same worker (each used to start its own: a
    TensorFlow import and a key exchange). Launched before the servers
    (shared_cluster asks for it) so that its imports run while they start."""
    from driver_client import Driver
    d = Driver(tmp_path_factory.mktemp("driver") / "driver.log")
    yield d
    d.close()


@pytest.fixture(scope="session")
def shared_cluster(shared_driver_process):
    """Four tf_privpy servers (LocalCluster on loopback), one set per session
    for the distributed test files (test_distributed.py,
    test_distributed_models.py, test_share_io.py): four TensorFlow processes
    fewer for each further file in the same worker. A test that leaves a server running
    another way (another build, key or cluster file) names its role in
    stale_roles; the next module's driver fixture restarts it first."""
    from tf_privpy.deploy.cluster import LocalCluster
    # S1 and S2 run share services too (test_share_io.py's distributed path);
    # timeout: test_distributed.TIMEOUT
    c = LocalCluster(timeout_s=9.0, start_timeout_s=240, share_services=True,
                     large_arrays=True)  # test_large_array.py's four-process path
    c.start()
    yield c
    c.stop()


@pytest.fixture(scope="session")
def stale_roles():
    """Roles of shared_cluster whose server a test left running with a test
    hook or another file: restarted plainly before a module connects again."""
    return set()
