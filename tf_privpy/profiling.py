"""tp.profile(logdir): a private run in TensorBoard (DESIGN §10).

Inside `with tp.profile(logdir):` TensorFlow's profiler records the run; on
exit the profile is rewritten so that its trace viewer shows one row per
party (S1, S2, T1, T2, client), and per-step scalars (rounds,
multiplications, comparisons, messages and bytes per link, kernel time per
protocol family and per party) are written beside it with tf.summary.

Why a rewrite: TF's CPU profiler groups host events by thread, not by logical
device, and the five parties are logical devices of one CPU. Every tf_privpy
kernel names its device in its trace event (TF_PRIVPY_TRACE_KERNEL in
ops/common/tf_util.h); a graph executor's other events (TF's own ops, the
Send/Recv pairs of the channels) take the party of the executor they ran in,
known from those kernels and from the Send/Recv rendezvous keys. The
attributed events are added to the profile's XSpace as one plane per party
("/device:CUSTOM:<k> <party> [<device>]"), which TensorBoard's Profile tab
(tensorboard-plugin-profile) lists as one process each; the host plane is
left as TF wrote it. The same rows are also written as a Chrome trace-event
file (plugins/tf_privpy/<run>/parties.trace.json.gz) that chrome://tracing
and ui.perfetto.dev open without the plugin.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import gzip
import json
import os
import re
from typing import Dict, Iterator, List, Optional, Tuple

import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from tf_privpy import runtime as _runtime
from tf_privpy.stats import Stats, _snapshot
from tf_privpy.protocols.mpc.runtime import canonical_device

#: the stat every tf_privpy kernel's trace event carries (ops/common/tf_util.h)
DEVICE_STAT = "tp_device"
#: the prefix of our kernels' op types
_OP_PREFIX = "TfPrivpy>"
#: TF 2.14's trace viewer shows planes with this prefix as one process each
PARTY_PLANE_PREFIX = "/device:CUSTOM:"
#: the protocol family of an op type (after "TfPrivpy>"): its ops/ folder
_FAMILIES = (("Mul", "mul"), ("Gc", "gc"), ("Bit", "b2a"), ("Ring", "ring"),
             ("Prg", "prg"), ("StreamNext", "prg"), ("RandomKey", "prg"),
             ("ShareSplit", "prg"), ("TakeOnce", "prg"), ("Aead", "aead"),
             ("X25519", "kex"), ("Hkdf", "kex"), ("Kex", "kex"),
             ("Paillier", "paillier"), ("Batchcrypt", "batchcrypt"))


class ProfileError(RuntimeError):
    """tp.profile could not start or could not read what TF wrote."""


def step_name(op_type: str) -> str:
    """The protocol step a kernel's op type names: "TfPrivpy>MulMask" ->
    "mul_mask" (the kernel's Python wrapper in protocols/mpc/kernels.py)."""
    base = op_type[len(_OP_PREFIX):] if op_type.startswith(_OP_PREFIX) else op_type
    return re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()


def family(op_type: str) -> str:
    """The protocol family (ops/ folder) of a tf_privpy op type."""
    base = op_type[len(_OP_PREFIX):] if op_type.startswith(_OP_PREFIX) else op_type
    for prefix, fam in _FAMILIES:
        if base.startswith(prefix):
            return fam
    return "other"


@dataclasses.dataclass
class Step:
    """What one profiled step ran: counters (as tp.stats) and kernel time.

    time_ms maps a protocol family (mul, gc, b2a, ring, prg, aead, ...) to the
    summed duration of its kernels on all parties; party_time_ms maps a party
    to the summed duration of the tf_privpy kernels it ran.
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
    """

    logdir: str
    first_step: int = 0
    run_dir: Optional[str] = None
    xplane_paths: List[str] = dataclasses.field(default_factory=list)
    trace_json: Optional[str] = None
    steps: List[Step] = dataclasses.field(default_factory=list)
    #: (counters at the current step's start, its boundary marker's number)
    _mark: Optional[Tuple[Stats, int]] = None

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
def profile(logdir: str, graph=None, first_step: int = 0,
            host_tracer_level: int = 2) -> Iterator[Profile]:
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

    Yields:
      A Profile; call its step() between steps to get scalars per step.

    Raises:
      ProfileError: another profile is running, or the profile written could
        not be read.

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
    handle = _runtime.get_runtime()
    devices = dict(handle.runtime.devices)
    graph_def = None if graph is None else _graph_def(graph)
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
        try:
            tf.profiler.experimental.start(logdir, options=options)
        except (tf.errors.AlreadyExistsError, tf.errors.UnavailableError) as e:
            raise ProfileError(
                "another TensorFlow profile is being taken in this process: stop it "
                "(tf.profiler.experimental.stop()) or leave the enclosing tp.profile "
                "block before starting this one") from e
    prof._mark = (_snapshot(), _boundary(0))
    try:
        yield prof
    except BaseException:
        prof._mark = None
        with tf.init_scope():
            tf.profiler.experimental.stop()
            writer.close()
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
    prof.xplane_paths = sorted(os.path.join(prof.run_dir, f)
                               for f in os.listdir(prof.run_dir) if f.endswith(".xplane.pb"))
    rows: List[Row] = []
    marks: Dict[int, int] = {}
    for path in prof.xplane_paths:
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        rows += add_party_planes(space, devices)
        marks.update(_markers(space))
        with open(path, "wb") as f:
            f.write(space.SerializeToString())
    _kernel_times(prof.steps, rows, marks)
    prof.trace_json = os.path.join(logdir, "plugins", "tf_privpy", new[-1],
                                   "parties.trace.json.gz")
    write_chrome_trace(prof.trace_json, rows)
    with tf.init_scope():
        with writer.as_default():
            for i, step in enumerate(prof.steps):
                _write_scalars(step, first_step + i)
        writer.close()


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


# ------------------------------------------------------------ the rewrite
@dataclasses.dataclass
class Row:
    """One event of a party's row: where it ran and what it was."""

    party: str
    thread_id: int
    thread: str
    start_ps: int          # absolute, as TF's clock: line timestamp + offset
    duration_ps: int
    name: str
    args: Dict[str, object]
    op_type: str = ""      # a tf_privpy kernel's op type, else ""


def _stat_value(plane, stat):
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return plane.stat_metadata[stat.ref_value].name
    return getattr(stat, kind) if kind else None


def _party_of(devices: Dict[str, str]):
    by_spec = {canonical_device(d): p for p, d in devices.items()}
    cache: Dict[str, Optional[str]] = {}

    def lookup(device: str) -> Optional[str]:
        if device not in cache:
            try:
                cache[device] = by_spec.get(canonical_device(device))
            except ValueError:
                cache[device] = None
        return cache[device]
    return lookup


def _rendezvous_device(kind: str, key: str) -> Optional[str]:
    # key: "src_device;incarnation;dst_device;edge;frame"
    parts = key.split(";")
    if len(parts) < 3:
        return None
    return parts[0] if kind == "_Send" else parts[2]


_EXECUTOR_EVENTS = ("ExecutorState::Process", "ExecutorDoneCallback")
_EAGER_COPY = re.compile(r"^_Send input \d+ from (\S+) to (\S+)$")


def attribute(plane, devices: Dict[str, str]) -> List[Row]:
    """The events of a host plane that belong to a party, as Rows.

    A tf_privpy kernel's event names its device; a graph executor's events
    (one ExecutorState::Process per executed node batch, with the executor's
    context id "_c") take the device of the tf_privpy kernels and Send/Recv
    rendezvous keys seen in the same context; an eager cross-device copy
    belongs to its destination. Other events of a thread that ran no
    executor work of an unknown device are the driver's: the client's row.
    """
    party = _party_of(devices)
    lines = []
    votes: Dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in plane.lines:
        evs, stack = [], []
        for ev in sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps)):
            while stack and stack[-1][0] <= ev.offset_ps:
                stack.pop()
            md = plane.event_metadata[ev.metadata_id]
            stats = {plane.stat_metadata[s.metadata_id].name: _stat_value(plane, s)
                     for s in list(md.stats) + list(ev.stats)}
            ctx = stats.get("_c") if md.name in _EXECUTOR_EVENTS else None
            outer = next((c for _, c in reversed(stack) if c is not None), None)
            evs.append((ev, md.name, stats, ctx if ctx is not None else outer, len(stack)))
            stack.append((ev.offset_ps + ev.duration_ps, ctx if ctx is not None else outer))
            in_ctx = ctx if ctx is not None else outer
            if in_ctx is None:
                continue
            kind = md.name.rsplit(":", 1)[-1]
            if DEVICE_STAT in stats:
                votes[in_ctx][party(str(stats[DEVICE_STAT]))] += 1
            elif kind in ("_Send", "_Recv", "_HostSend", "_HostRecv") and "key" in stats:
                dev = _rendezvous_device(kind.replace("_Host", "_"), str(stats["key"]))
                if dev:
                    votes[in_ctx][party(dev)] += 1
        lines.append((line, evs))
    ctx_party = {}
    for ctx, c in votes.items():
        c.pop(None, None)
        if c:
            ctx_party[ctx] = c.most_common(1)[0][0]
    rows = []
    for line, evs in lines:
        for ev, name, stats, ctx, depth in evs:
            op_type, args = "", {k: v for k, v in stats.items() if k != DEVICE_STAT}
            if DEVICE_STAT in stats:
                who = party(str(stats[DEVICE_STAT]))
                op_type, args["device"] = name, str(stats[DEVICE_STAT])
                name = step_name(name)
            elif ctx is not None:
                who = ctx_party.get(ctx)
            else:
                m = _EAGER_COPY.match(name)
                who = party(m.group(2)) if m else "client"
                if m:
                    name = f"copy from {party(m.group(1)) or m.group(1)}"
            if who is None:
                continue
            rows.append(Row(who, line.id, line.display_name or line.name,
                            line.timestamp_ns * 1000 + ev.offset_ps, ev.duration_ps, name,
                            args, op_type))
    return rows


def _party_order(devices: Dict[str, str]) -> List[str]:
    first = ["S1", "S2", "T1", "T2", "client"]
    return [p for p in first if p in devices] + sorted(p for p in devices if p not in first)


def add_party_planes(space, devices: Dict[str, str]) -> List[Row]:
    """Adds one plane per party to an XSpace (in place) from its host plane;
    returns the attributed Rows. Planes of an earlier rewrite are replaced."""
    keep = [p for p in space.planes if not p.name.startswith(PARTY_PLANE_PREFIX)]
    del space.planes[:]
    space.planes.extend(keep)
    rows = []
    for plane in keep:
        if plane.name == "/host:CPU":
            rows += attribute(plane, devices)
    next_id = max([p.id for p in space.planes] + [0]) + 1
    by_party = collections.defaultdict(list)
    for r in rows:
        by_party[r.party].append(r)
    for k, party in enumerate(_party_order(devices)):
        plane = space.planes.add()
        plane.id = next_id + k
        plane.name = f"{PARTY_PLANE_PREFIX}{k} {party} [{devices[party]}]"
        names: Dict[str, int] = {}
        stat_ids: Dict[str, int] = {}
        lines: Dict[int, object] = {}
        for r in by_party.get(party, []):
            line = lines.get(r.thread_id)
            if line is None:
                line = lines[r.thread_id] = plane.lines.add()
                line.id, line.name, line.display_name = r.thread_id, r.thread, r.thread
                line.timestamp_ns = min(x.start_ps for x in by_party[party]
                                        if x.thread_id == r.thread_id) // 1000
            if r.name not in names:
                names[r.name] = len(names) + 1
                md = plane.event_metadata[names[r.name]]
                md.id, md.name, md.display_name = names[r.name], r.name, r.name
            ev = line.events.add()
            ev.metadata_id = names[r.name]
            ev.offset_ps = r.start_ps - line.timestamp_ns * 1000
            ev.duration_ps = r.duration_ps
            for key, value in r.args.items():
                if key not in stat_ids:
                    stat_ids[key] = len(stat_ids) + 1
                    sm = plane.stat_metadata[stat_ids[key]]
                    sm.id, sm.name = stat_ids[key], key
                st = ev.stats.add()
                st.metadata_id = stat_ids[key]
                if isinstance(value, float):
                    st.double_value = value
                elif isinstance(value, int) and -2**63 <= value < 2**63:
                    st.int64_value = value
                else:
                    st.str_value = str(value)
    return rows


def write_chrome_trace(path: str, rows: List[Row]) -> None:
    """Writes Rows as a Chrome trace-event file: one process per party, one
    thread per TF thread (chrome://tracing and ui.perfetto.dev open it)."""
    parties = sorted({r.party for r in rows},
                     key=lambda p: (["S1", "S2", "T1", "T2", "client"] + [p]).index(p))
    pid = {p: i + 1 for i, p in enumerate(parties)}
    events = []
    for p in parties:
        events.append({"ph": "M", "name": "process_name", "pid": pid[p], "args": {"name": p}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid[p],
                       "args": {"sort_index": pid[p]}})
    threads = {(r.party, r.thread_id): r.thread for r in rows}
    for (p, tid), name in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": pid[p], "tid": tid,
                       "args": {"name": name}})
    t0 = min((r.start_ps for r in rows), default=0)
    for r in rows:
        args = {k: (v if isinstance(v, (int, float, str)) else str(v))
                for k, v in r.args.items()}
        events.append({"ph": "X", "name": r.name, "pid": pid[r.party], "tid": r.thread_id,
                       "ts": (r.start_ps - t0) / 1e6, "dur": r.duration_ps / 1e6,
                       "args": args})
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)


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
    tf_privpy kernel events that started between its boundary markers."""
    edges = [marks.get(k) for k in range(len(steps) + 1)]
    if any(e is None for e in edges):
        raise ProfileError("the profile lacks tf_privpy's step markers: was the profiler "
                           "stopped inside the tp.profile block? Stop only the profile "
                           "you started.")
    for r in rows:
        if not r.op_type:
            continue
        for i, step in enumerate(steps):
            if edges[i] <= r.start_ps < edges[i + 1]:
                ms = r.duration_ps / 1e9
                fam = family(r.op_type)
                step.time_ms[fam] = step.time_ms.get(fam, 0.0) + ms
                step.party_time_ms[r.party] = step.party_time_ms.get(r.party, 0.0) + ms
                break
