"""Taint-checked placement (DESIGN §2, placement and channel seams).

Follows taint from the shares (and every variable a server holds: keys,
nonce counters, garbled tables) through a computation and reports
  - every op that reads a tainted value but does not run on a server, and
  - every value that crosses from one party to another anywhere but through
    the channel (protocols/mpc/runtime/channel.py: an IdentityN in a `tp_channel`
    name scope on the receiver).
Shape, Size and Rank end the taint (their outputs are public metadata), but
the op itself must still run where the value lives. A channel message to
the client (tp.reveal) is a deliberate declassification and ends the taint.

Two checkers: `graph_violations` walks a traced tf.function graph (devices
as placed, an unplaced op counts as the client's, where TF would run it: the
Identity ops by which tf.function returns its outputs included, see
protocols/mpc/runtime/placement.py);
`EagerRecorder` records the device each eager op actually ran on, through
TF's op callbacks.

The same rules run inside the library while a function is traced, one op at
a time, as the trace-time guard (protocols/mpc/runtime/placement.py, which this
module shares its constants and device names with); this walk checks whole
graphs, following loop bodies, for the tests.
"""
from __future__ import annotations

import contextlib
from typing import Dict, List, Sequence

import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework import op_callbacks

import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime.placement import (CHANNEL_SCOPE, SHAPE_OPS,  # noqa: F401
                                               WHILE_OPS, canon)

SERVERS = ("S1", "S2", "T1", "T2")


class Parties:
    def __init__(self, devices: Dict[str, str]):
        self.by_device = {canon(v): k for k, v in devices.items()}
        self.client = devices["client"]

    def of(self, device: str) -> str:
        if not device:
            return "client"  # unplaced: TF runs it on the first CPU, the client's
        return self.by_device.get(canon(device), device)


def _channel_ends(op) -> tuple:
    """(src, dst) of a channel copy op, else None."""
    if op.type != "IdentityN":
        return None
    for part in op.name.split("/"):
        if part.startswith(CHANNEL_SCOPE):
            src, _, dst = part[len(CHANNEL_SCOPE):].partition("_to_")
            return src, dst.split("_")[0]  # drop TF's "_1" uniquifying suffix
    return None


def share_inputs(concrete, n_private: int) -> Dict[str, str]:
    """The placeholders of the first n_private PrivateTensor arguments'
    shares, each with its holder (share0 on S1, share1 on S2)."""
    ints = [t for t in concrete.graph.inputs if t.dtype == tf.int64][:2 * n_private]
    return {t.name: ("S1", "S2")[i % 2] for i, t in enumerate(ints)}


def graph_violations(concrete, devices: Dict[str, str],
                     tainted_inputs: Dict[str, str]) -> List[str]:
    """Violations in a ConcreteFunction's graph; tainted_inputs maps the names
    of its placeholders that hold shares to the party holding each. The
    bodies of while loops (tf.while_loop: the sorting network) are followed."""
    parties = Parties(devices)
    graph = concrete.graph
    party_of_tensor = dict(tainted_inputs)
    tainted = set(tainted_inputs)
    for external, internal in graph.captures:
        p = parties.of(getattr(external, "device", "") or "")
        party_of_tensor[internal.name] = p
        if p in SERVERS:
            tainted.add(internal.name)  # keys, counters, tables held by a server
    library = {f.signature.name: f for f in graph.as_graph_def().library.function}
    bad: List[str] = []
    _walk(graph.get_operations(), parties, party_of_tensor, tainted, library, bad)
    return bad



def _walk(ops, parties, party_of_tensor, tainted, library, bad, where_prefix=""):
    for op in ops:
        if op.type in WHILE_OPS:
            _follow_while(op, parties, party_of_tensor, tainted, library, bad)
            continue
        if any(op.get_attr(a.name) is not None for a in op.op_def.attr
               if a.type == "func"):
            bad.append(f"{op.name} ({op.type}) calls a function: not followed")
        where = parties.of(op.device)
        if not op.device and op.type == "Identity" and op.inputs \
                and op.inputs[0].op.type == "Placeholder":
            # A function returning an argument unchanged (tp.identity): TF
            # runs the Identity with the argument, nothing moves (measured in
            # tests/test_distributed.py). Outputs of computations get their
            # device from protocols/mpc/runtime/placement.py instead.
            where = party_of_tensor.get(op.inputs[0].name, where)
        ends = _channel_ends(op)
        t_in = False
        for inp in op.inputs:
            src = party_of_tensor.get(inp.name, parties.of(inp.op.device))
            t_in |= inp.name in tainted
            if inp.dtype == tf.resource or src == where:
                continue
            if ends is None:
                bad.append(f"{inp.name} crosses {src} -> {where} into {op.name} ({op.type}) "
                           "outside the channel")
            elif ends != (src, where):
                bad.append(f"channel {op.name} named {ends} carries {src} -> {where}")
        if t_in and where not in SERVERS and not (ends and ends[1] == "client"):
            bad.append(f"{op.name} ({op.type}) reads a share or protocol message but "
                       f"runs on {where}")
        for out in op.outputs:
            party_of_tensor.setdefault(out.name, where)  # placeholders keep their holder
            if t_in and op.type not in SHAPE_OPS and not (ends and ends[1] == "client"):
                tainted.add(out.name)


def _follow_while(op, parties, party_of_tensor, tainted, library, bad):
    """A while loop: TF lowers it to Enter/Merge/Switch/NextIteration/Exit
    nodes per loop variable, each on the device of the tensor that enters
    (tensorflow/core/common_runtime/lower_while_op.cc), and inlines the body
    with its ops' own devices. So the loop moves nothing by itself if each
    loop variable leaves the body on the party it entered on; the body and
    the condition are checked like the graph, their inputs held as the
    loop's."""
    from tensorflow.python.framework import function_def_to_graph

    outs = {}
    for attr in ("cond", "body"):
        fg = function_def_to_graph.function_def_to_graph(library[op.get_attr(attr).name])
        inner_party, inner_tainted = {}, set()
        for inp, ph in zip(op.inputs, fg.inputs):
            inner_party[ph.name] = party_of_tensor.get(inp.name, parties.of(inp.op.device))
            if inp.name in tainted:
                inner_tainted.add(ph.name)
        _walk(fg.get_operations(), parties, inner_party, inner_tainted, library, bad)
        if attr == "body":
            outs = [(inner_party.get(t.name, parties.of(t.op.device)), t.name in inner_tainted)
                    for t in fg.outputs]
    for k, (inp, out, (party, t_out)) in enumerate(zip(op.inputs, op.outputs, outs)):
        src = party_of_tensor.get(inp.name, parties.of(inp.op.device))
        if inp.dtype != tf.resource and party != src:
            bad.append(f"{op.name}: loop variable {k} enters on {src} but the body returns "
                       f"it on {party}")
        party_of_tensor.setdefault(out.name, src)
        if t_out or inp.name in tainted:
            tainted.add(out.name)


class EagerRecorder:
    """Records, for every eager op run while active, the device it ran on,
    and checks taint and channel use as graph_violations does."""

    def __init__(self, devices: Dict[str, str], sources: Sequence[tf.Tensor]):
        self.parties = Parties(devices)
        self._keep = list(sources)  # ids stay unique while we hold them
        self.tainted = {id(t) for t in sources}
        self.violations: List[str] = []
        self.ran: List[tuple] = []

    def _device_party(self, t) -> str:
        return self.parties.of(t.device)

    def __call__(self, op_type, inputs, attrs, outputs, op_name=None, graph=None):
        if graph is not None:  # building a graph, not running: graph_violations' job
            return None
        outs = list(outputs or [])
        where_t = outs[0] if outs else (inputs[0] if inputs else None)
        if where_t is None:
            return None
        where = self._device_party(where_t)
        self.ran.append((op_type, where))
        t_in = False
        for inp in inputs:
            if inp.dtype == tf.resource:
                t_in |= self._device_party(inp) in SERVERS  # a server's variable
                continue
            t_in |= id(inp) in self.tainted
            src = self._device_party(inp)
            if src != where and op_type != "IdentityN":
                self.violations.append(f"{op_type} on {where} read a tensor of {src} "
                                       "outside the channel")
        to_client = op_type == "IdentityN" and where == "client"
        if t_in and where not in SERVERS and not to_client:
            self.violations.append(f"{op_type} read a share or protocol message on {where}")
        if t_in and op_type not in SHAPE_OPS and not to_client:
            for o in outs:
                self.tainted.add(id(o))
                self._keep.append(o)
        return None

    @contextlib.contextmanager
    def active(self):
        op_callbacks.add_op_callback(self)
        try:
            yield self
        finally:
            op_callbacks.remove_op_callback(self)


#: the op that turns an encoded plaintext into two shares: what it outputs
#: may leave the client (through the channel); what it reads may not
SHARE_SPLIT = "TfPrivpy>ShareSplit"


def plaintext_violations(concrete, devices: Dict[str, str], n_plain: int) -> List[str]:
    """Ops that read a data owner's plaintext input, or anything computed
    from it before it is split into shares, but do not run on the client:
    owner-side computation (Policy.owner_side, converters/owner.py) must stay
    on the owner's device. The first n_plain arguments of the function are
    the plaintext inputs. Shapes (SHAPE_OPS) end the taint: they are
    public metadata."""
    parties = Parties(devices)
    tainted = {t.name for t in concrete.graph.inputs[:n_plain]}
    bad: List[str] = []
    for op in concrete.graph.get_operations():
        if not any(i.name in tainted for i in op.inputs):
            continue
        where = parties.of(op.device)
        if where != "client":
            bad.append(f"{op.name} ({op.type}) reads the owner's plaintext on {where}")
        if op.type != SHARE_SPLIT and op.type not in SHAPE_OPS:
            tainted.update(o.name for o in op.outputs)
    return bad


def run_metadata(fn, *args):
    """(fn(*args), the RunMetadata of that call alone: its partition graphs
    under `function_graphs`). What earlier runs left is exported and dropped
    first (their partitions would be exported with this call's)."""
    ctx = context.context()
    ctx.enable_run_metadata()
    try:
        ctx.export_run_metadata()
        out = fn(*args)
        md = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
    return out, md


def client_received(fn, *args):
    """(fn(*args), the int64 tensors the client's partition received)."""
    out, md = run_metadata(fn, *args)
    client = canon(tp.servers()["client"])
    parts = [pg for fg in md.function_graphs for pg in fg.partition_graphs]
    assert parts, "no partition graph recorded"
    got = [n.name for pg in parts for n in pg.node if n.op == "_Recv"
           and canon(n.device) == client
           and n.attr["tensor_type"].type == tf.int64.as_datatype_enum]
    return out, got
