"""tp.profile(logdir): a private run in TensorBoard (DESIGN §10).

Inside `with tp.profile(logdir):` TensorFlow's profiler records the run; on
exit the profile is rewritten so that its trace viewer shows one row per
party (S1, S2, T1, T2, client; profile_rows.py says how), and per-step
scalars (rounds, multiplications, comparisons, messages and bytes per link,
kernel time per protocol family and per party) are written beside it with
tf.summary. The rows are also written as a Chrome trace-event file
(plugins/tf_privpy/<run>/parties.trace.json.gz) that chrome://tracing and
ui.perfetto.dev open without TensorBoard's profile plugin.

Distributed mode: the driver's profile holds the client's row only, since
the servers' kernels run in their own processes. Given server_trace_ms, each
server's own profile is collected over gRPC (TF's servers run the profiler
service) and added to the run as one host per server.
"""
from __future__ import annotations

import bisect
import contextlib
import dataclasses
import glob
import os
import shutil
import tempfile
import threading
import time
from typing import Dict, Iterator, List, Optional, Tuple, Union

import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from tf_privpy import distributed as _distributed
from tf_privpy import runtime as _runtime
from tf_privpy.protocols.mpc.runtime import placement as _placement
from tf_privpy.profile_rows import Row, add_party_planes, family, write_chrome_trace
from tf_privpy.stats import Stats, _snapshot


def guard_time():
    """A context manager yielding [seconds] the trace-time placement guard
    (docs/control_flow.md) spends on the ops traced inside it: its share of
    a tf.function's trace time.

    Example:
      >>> with tp.profiling.guard_time() as spent:
      ...     private.concrete(1)
      >>> spent[0]
      0.126
    """
    return _placement.timed()


class ProfileError(RuntimeError):
    """tp.profile could not start or could not read what TF wrote."""


@dataclasses.dataclass
class Step:
    """What one profiled step ran: counters (as tp.stats) and kernel time.

    time_ms maps a protocol family (mul, gc, bitwise, b2a, ring, prg, ...) to the
    summed duration of its kernels on all parties; party_time_ms maps a party
    to the summed duration of the tf_privpy kernels it ran.

    Example:
      >>> step = prof.steps[0]
      >>> step.stats.rounds, sorted(step.time_ms)
      (9, ['b2a', 'gc', 'mul', 'prg', 'ring'])
    """

    stats: Stats
    time_ms: Dict[str, float] = dataclasses.field(default_factory=dict)
    party_time_ms: Dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Profile:
    """The result of a `tp.profile` block: where it was written and what the
    steps counted. `step()` inside the block closes a step.

    Attributes:
      logdir: the TensorBoard log directory.
      run_dir: the profile run (logdir/plugins/profile/<run>), set on exit.
      xplane_paths: the rewritten XSpace files of the run.
      trace_json: the Chrome trace-event file with one process per party.
      steps: one Step per step, in order.
      first_step: the scalars' step number of steps[0].

    Example:
      >>> with tp.profile("logs/run1") as prof:
      ...     y = tp.share([1.0, -2.0]) * 3.0
      ...     prof.step()
      >>> prof.steps[0].stats.multiplications, prof.trace_json.endswith(".json.gz")
      (0, True)
    """

    logdir: str
    first_step: int = 0
    run_dir: Optional[str] = None
    xplane_paths: List[str] = dataclasses.field(default_factory=list)
    trace_json: Optional[str] = None
    steps: List[Step] = dataclasses.field(default_factory=list)
    #: (counters at the current step's start, its boundary marker's number)
    _mark: Optional[Tuple[Stats, int]] = dataclasses.field(default=None, repr=False)

    def step(self) -> None:
        """Ends the current step and starts the next: each step gets its own
        scalars (step numbers first_step, first_step + 1, ...)."""
        if self._mark is None:
            raise ProfileError("Profile.step() is for use inside its `with tp.profile(...)` "
                               "block")
        snap, k = self._mark
        now = _snapshot()
        self.steps.append(Step(_diff(snap, now)))
        self._mark = (now, _boundary(k + 1))


_MARKER = "tf_privpy_step_boundary_"
#: seconds the servers' traces are given to start (distributed mode)
_SERVER_START_S = 0.5


def _boundary(k: int) -> int:
    """Marks step boundary k in the trace itself: TF rebases the profile's
    timestamps, so steps are cut where these markers are, not by a clock."""
    with tf.profiler.experimental.Trace(f"{_MARKER}{k}"):
        pass
    return k


def _diff(a: Stats, b: Stats) -> Stats:
    links = {k: (b.links[k][0] - a.links.get(k, (0, 0))[0],
                 b.links[k][1] - a.links.get(k, (0, 0))[1]) for k in b.links}
    return Stats(links={k: v for k, v in links.items() if v != (0, 0)},
                        rounds=b.rounds - a.rounds,
                        multiplications=b.multiplications - a.multiplications,
                        comparisons=b.comparisons - a.comparisons)


@contextlib.contextmanager
def profile(logdir: Union[str, os.PathLike], graph=None, first_step: int = 0, host_tracer_level: int = 2,
            server_trace_ms: Optional[int] = None) -> Iterator[Profile]:
    """Profiles the private run inside the block for TensorBoard.

    Writes to `logdir`: the profile (Profile tab; its trace viewer shows one
    process per party S1, S2, T1, T2 and client, our kernels named by their
    protocol step: mul_mask, mul_assist, mul_finish, gc_garble, gc_evaluate,
    bit_share_assist, ...), per-step scalars under tf_privpy/ (Scalars tab),
    and, if `graph` is given, that graph with its device placement (Graphs
    tab). Works around eager code, tf.functions and converted models.

    Args:
      logdir: the TensorBoard log directory (`tensorboard --logdir LOGDIR`).
      graph: optional: a converted model (tp.keras.convert / tp.convert), a
        ConcreteFunction or a GraphDef, written for the Graphs tab.
      first_step: the step number of the block's first step's scalars.
      host_tracer_level: TF's host tracer level (1-3; our kernels show at 1).
      server_trace_ms: distributed mode: also collect each server's own
        profile, for this many milliseconds from the block's start (the
        block starts 0.5 s later, once they run; its exit waits for them). Without it only the driver (client)
        is traced there; the scalars are complete either way.

    Yields:
      A Profile; call its step() between steps to get scalars per step.

    Raises:
      ProfileError: another profile is running, the profile could not be
        written, or a server's profile could not be collected.

    Example:
      >>> private = tp.keras.convert(model)
      >>> with tp.profile("logs/run1", graph=private) as prof:
      ...     for batch in batches:
      ...         private.predict(batch)
      ...         prof.step()
      >>> prof.steps[0].stats.rounds == private.cost(len(batches[0])).rounds
      True
      $ tensorboard --logdir logs      # Profile, Scalars and Graphs tabs
    """
    logdir = os.fspath(logdir)
    handle = _runtime.get_runtime()
    devices = dict(handle.runtime.devices)
    graph_def = None if graph is None else _graph_def(graph)
    servers = _server_addresses(devices) if server_trace_ms else {}
    os.makedirs(logdir, exist_ok=True)
    prof = Profile(logdir=logdir, first_step=first_step)
    runs_dir = os.path.join(logdir, "plugins", "profile")
    before = set(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else set()
    with tf.init_scope():
        writer = tf.summary.create_file_writer(logdir)
        if graph_def is not None:
            with writer.as_default():
                tf.summary.graph(graph_def)
        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=host_tracer_level, python_tracer_level=0,
            device_tracer_level=1)
        t0 = time.time_ns()
        try:
            tf.profiler.experimental.start(logdir, options=options)
        except (tf.errors.AlreadyExistsError, tf.errors.UnavailableError) as e:
            writer.close()
            raise ProfileError(
                "another TensorFlow profile is being taken in this process: stop it "
                "(tf.profiler.experimental.stop()) or leave the enclosing tp.profile "
                "block before starting this one") from e
    remote = [_RemoteTrace(party, addr, server_trace_ms, host_tracer_level)
              for party, addr in servers.items()]
    if remote:
        # Each server starts tracing when the request reaches it: give the
        # requests time to arrive, or the block's first kernels go unrecorded.
        time.sleep(_SERVER_START_S)
    prof._mark = (_snapshot(), _boundary(0))
    try:
        yield prof
    except BaseException:
        prof._mark = None
        with tf.init_scope():
            tf.profiler.experimental.stop()
            writer.close()
        for r in remote:
            r.join()
        raise
    if not prof.steps or prof._mark[0] != _snapshot():
        prof.step()
    prof._mark = None
    with tf.init_scope():
        tf.profiler.experimental.stop()
    new = sorted(set(os.listdir(runs_dir)) - before) if os.path.isdir(runs_dir) else []
    if not new:
        raise ProfileError(f"TensorFlow's profiler wrote no run under {runs_dir}: check "
                           "that the directory is writable")
    prof.run_dir = os.path.join(runs_dir, new[-1])
    rows: List[Row] = []
    marks: Dict[int, int] = {}
    for path in sorted(glob.glob(os.path.join(prof.run_dir, "*.xplane.pb"))):
        rows += _rewrite(path, path, devices, "client")
        marks.update(_markers(_read(path)))
        prof.xplane_paths.append(path)
    failed = {}
    for r in remote:
        r.join()
        if r.error or not r.path:
            failed[r.party] = r.error or "it wrote no profile"
            continue
        # The server's timeline starts when its trace did: shift it onto ours.
        out = os.path.join(prof.run_dir, f"{r.party}.xplane.pb")
        server_rows = _rewrite(r.path, out, devices, r.party)
        for row in server_rows:
            row.start_ps += (r.started_ns - t0) * 1000
        rows += server_rows
        prof.xplane_paths.append(out)
        shutil.rmtree(r.dir, ignore_errors=True)
    _kernel_times(prof.steps, rows, marks)
    prof.trace_json = os.path.join(logdir, "plugins", "tf_privpy", new[-1],
                                   "parties.trace.json.gz")
    write_chrome_trace(prof.trace_json, rows)
    with tf.init_scope():
        with writer.as_default():
            for i, step in enumerate(prof.steps):
                _write_scalars(step, first_step + i)
        writer.close()
    if failed:
        raise ProfileError(
            "the profiles of " + "; ".join(f"{p} ({servers[p]}): {e}" for p, e in failed.items())
            + " could not be collected (the driver's profile and the scalars were written). "
            "Check that the driver reaches the servers' gRPC ports, and give server_trace_ms "
            "at least the block's duration")


def _read(path: str):
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    return space


def _rewrite(src: str, dst: str, devices: Dict[str, str], process: str) -> List[Row]:
    """Adds the party planes to the XSpace file src that `process` wrote;
    the result goes to dst."""
    space = _read(src)
    rows = add_party_planes(space, devices, process)
    with open(dst, "wb") as f:
        f.write(space.SerializeToString())
    return rows


def _server_addresses(devices: Dict[str, str]) -> Dict[str, str]:
    """{party: gRPC address} of the servers of a distributed runtime; {} in
    the embedded mode (one process: its own profile has every party)."""
    conn = _distributed.connection()
    if conn is None:
        return {}
    from tf_privpy.deploy import cluster_file
    return {cluster_file.party(role): addr for role, addr in conn.cluster.servers.items()
            if cluster_file.party(role) in devices}


class _RemoteTrace:
    """One server's own profile, taken over gRPC (TF's servers run the
    profiler service) for a fixed duration, in a thread."""

    def __init__(self, party: str, address: str, duration_ms: int, level: int):
        self.party, self.address = party, address
        self.dir = tempfile.mkdtemp(prefix=f"tf_privpy_profile_{party}_")
        self.error: Optional[str] = None
        self.started_ns = time.time_ns()
        options = tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=level, python_tracer_level=0, device_tracer_level=1)

        def take():
            try:
                tf.profiler.experimental.client.trace(
                    f"grpc://{address}", self.dir, int(duration_ms), options=options)
            except Exception as e:  # reported by name once the block is over
                self.error = f"{type(e).__name__}: {e}"
        self._thread = threading.Thread(target=take, daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    @property
    def path(self) -> Optional[str]:
        found = sorted(glob.glob(os.path.join(self.dir, "plugins", "profile", "*",
                                              "*.xplane.pb")))
        return found[-1] if found else None


def _graph_def(graph) -> tf.compat.v1.GraphDef:
    if isinstance(graph, tf.compat.v1.GraphDef):
        return graph
    if hasattr(graph, "concrete") and hasattr(graph, "cost"):  # a converted model
        return graph.graph()
    if hasattr(graph, "graph") and hasattr(graph.graph, "as_graph_def"):
        return graph.graph.as_graph_def()
    if isinstance(graph, tf.Graph):
        return graph.as_graph_def()
    raise TypeError("graph must be a converted model (tp.keras.convert / tp.convert), a "
                    f"ConcreteFunction, a tf.Graph or a GraphDef; got {type(graph).__name__}")


def _write_scalars(step: Step, n: int) -> None:
    s = step.stats
    for name in ("rounds", "multiplications", "comparisons", "messages", "bytes"):
        tf.summary.scalar(f"tf_privpy/{name}", getattr(s, name), step=n)
    for (src, dst), (msgs, nbytes) in sorted(s.links.items()):
        tf.summary.scalar(f"tf_privpy/bytes/{src}->{dst}", nbytes, step=n)
        tf.summary.scalar(f"tf_privpy/messages/{src}->{dst}", msgs, step=n)
    for fam, ms in sorted(step.time_ms.items()):
        tf.summary.scalar(f"tf_privpy/time_ms/{fam}", ms, step=n)
    for party, ms in sorted(step.party_time_ms.items()):
        tf.summary.scalar(f"tf_privpy/party_time_ms/{party}", ms, step=n)


def _markers(space) -> Dict[int, int]:
    """{k: time (ps, the trace's clock)} of the step boundary markers."""
    out = {}
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        ids = {i: int(md.name[len(_MARKER):]) for i, md in plane.event_metadata.items()
               if md.name.startswith(_MARKER)}
        for line in plane.lines:
            for ev in line.events:
                if ev.metadata_id in ids:
                    out[ids[ev.metadata_id]] = line.timestamp_ns * 1000 + ev.offset_ps
    return out


def _kernel_times(steps: List[Step], rows: List[Row], marks: Dict[int, int]) -> None:
    """Fills each step's kernel time per family and per party from the
    tf_privpy kernel events that started between its boundary markers
    (marks: {k: time of marker k, ps on the driver's timeline})."""
    edges = [marks.get(k) for k in range(len(steps) + 1)]
    if any(e is None for e in edges):
        raise ProfileError("the profile lacks tf_privpy's step markers: was the profiler "
                           "stopped inside the tp.profile block? Stop only the profile "
                           "you started.")
    for r in rows:
        if not r.op_type:
            continue
        # kernels outside the markers (a server's timeline is only aligned to
        # a few ms) count in the first or last step
        step = steps[bisect.bisect_right(edges, r.start_ps, 1, len(edges) - 1) - 1]
        ms, fam = r.duration_ps / 1e9, family(r.op_type)
        step.time_ms[fam] = step.time_ms.get(fam, 0.0) + ms
        step.party_time_ms[r.party] = step.party_time_ms.get(r.party, 0.0) + ms
