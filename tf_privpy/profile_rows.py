"""The party rows of a profile: TF's XSpace host events sorted by party.

TF's CPU profiler groups host events by thread, not by logical device, and
the five parties are logical devices of one CPU (or, distributed, the
servers are processes of their own). Every tf_privpy kernel names its device
in its trace event (TF_PRIVPY_TRACE_KERNEL in ops/common/tf_util.h); a graph
executor's other events (TF's own ops, the Send/Recv pairs of the channels)
take the party of the executor they ran in, known from those kernels and
from the Send/Recv rendezvous keys. The attributed events are added to the
XSpace as one plane per party ("/device:CUSTOM:<k> <party> [<device>]"),
which TF 2.14's trace viewer conversion (TensorBoard's Profile tab) shows as
one process each; the host plane stays as TF wrote it. The same rows can be
written as a Chrome trace-event file (chrome://tracing, ui.perfetto.dev).
"""
from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import os
import re
from typing import Dict, List, Optional

from tf_privpy.protocols.mpc.runtime.runtime import canonical_device

#: the stat every tf_privpy kernel's trace event carries (ops/common/tf_util.h)
DEVICE_STAT = "tp_device"
#: the prefix of our kernels' op types
_OP_PREFIX = "TfPrivpy>"
#: TF 2.14's trace viewer shows planes with this prefix as one process each
PARTY_PLANE_PREFIX = "/device:CUSTOM:"
#: the protocol family of an op type (after "TfPrivpy>"): its ops/ folder
_FAMILIES = (("Mul", "mul"), ("Gc", "gc"), ("Bw", "bitwise"), ("Bit", "b2a"), ("Ring", "ring"),
             ("Prg", "prg"), ("StreamNext", "prg"), ("RandomKey", "prg"),
             ("ShareSplit", "prg"), ("TakeOnce", "prg"), ("Aead", "aead"),
             ("X25519", "kex"), ("Hkdf", "kex"), ("Kex", "kex"),
             ("Paillier", "paillier"), ("Batchcrypt", "batchcrypt"))


def step_name(op_type: str) -> str:
    """The protocol step a kernel's op type names: "TfPrivpy>MulMask" ->
    "mul_mask" (the kernel's Python wrapper in protocols/mpc/runtime/kernels.py)."""
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


def attribute(plane, devices: Dict[str, str], process: str = "client") -> List[Row]:
    """The events of a host plane that belong to a party, as Rows.

    A tf_privpy kernel's event names its device; a graph executor's events
    (one ExecutorState::Process per executed node batch, with the executor's
    context id "_c") take the device of the tf_privpy kernels and Send/Recv
    rendezvous keys seen in the same context; an eager cross-device copy
    belongs to its destination. Other events outside executor work of an
    unknown device are the process's own: `process` is the party whose
    process took the profile (the client for the driver).
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
            # the executor context an event ran in: its own, or its parent's
            in_ctx = stats.get("_c") if md.name in _EXECUTOR_EVENTS else None
            if in_ctx is None and stack:
                in_ctx = stack[-1][1]
            evs.append((ev, md.name, stats, in_ctx))
            stack.append((ev.offset_ps + ev.duration_ps, in_ctx))
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
        for ev, name, stats, ctx in evs:
            op_type, args = "", {k: v for k, v in stats.items() if k != DEVICE_STAT}
            if DEVICE_STAT in stats:
                who = party(str(stats[DEVICE_STAT]))
                op_type, args["device"] = name, str(stats[DEVICE_STAT])
                name = step_name(name)
            elif ctx is not None:
                who = ctx_party.get(ctx)
            else:
                m = _EAGER_COPY.match(name)
                who = party(m.group(2)) if m else process
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


def add_party_planes(space, devices: Dict[str, str], process: str = "client") -> List[Row]:
    """Adds one plane per party that ran something to an XSpace (in place)
    from its host plane; returns the attributed Rows. Planes of an earlier
    rewrite are replaced."""
    keep = [p for p in space.planes if not p.name.startswith(PARTY_PLANE_PREFIX)]
    del space.planes[:]
    space.planes.extend(keep)
    rows = []
    for plane in keep:
        if plane.name == "/host:CPU":
            rows += attribute(plane, devices, process)
    next_id = max([p.id for p in space.planes] + [0]) + 1
    by_party = collections.defaultdict(list)
    for r in rows:
        by_party[r.party].append(r)
    for k, party in enumerate(_party_order(devices)):
        if party not in by_party:  # e.g. the servers, in a distributed driver's profile
            continue
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


