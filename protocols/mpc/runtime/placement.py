"""Where a traced tf.function's ops run, and the trace-time guard that refuses
a graph which would move a share or protocol message to the client.

Two jobs, both done by one device function that `install()` puts at the
bottom of the device stack of the graph being traced (so that every explicit
scope overrides it) and of every graph it is nested in:

1. Returns stay where they live. tf.function returns each output through an
   Identity it adds after the body (auto_control_deps.mark_as_return),
   outside every device scope; TF would run it on the function call's device,
   the client's, copying both shares there. An unplaced Identity is placed
   where its input lives (`home`): the input's device, or for the output of a
   while loop the device of the loop variable that entered it (TF 2.14's
   lower_while_op.cc puts a loop variable's Enter/Merge/Switch/Exit nodes on
   the device of the op that produced it).

2. The guard. As each op is created, it follows taint (shares, and everything
   computed from them or from a server's variables) and refuses, with an error
   naming the op and saying what to do:
   - an op that reads a share or protocol message but would run on the client
     (no device scope; tp.reveal's channel copy to the client is the one
     allowed reader);
   - a conditional (tf.cond, tf.case, tf.switch_case, AutoGraph `if`) that
     returns a PrivateTensor: TF's lowering (lower_if_op.cc, lower_case_op.cc)
     merges every output on the If/Case op's one device, so both shares would
     meet there outside the channel (use tp.cond);
   - a while loop whose condition reads a private value, or whose body returns
     a loop variable on another party than the one it entered on.
   Shares are recognised by their type: `PrivateTensor.Spec` tags the
   placeholders it is rebuilt from (function arguments, loop variables) with
   their holder (`tag_shares`).

Cost: a few dictionary look-ups per input of each traced op (taint is
memoised per graph, on the graph object): measured 4-8 % of the trace time
(50-70 us per op; LeNet-5's converted predict: 126 ms of a 1.5 s trace),
docs/control_flow.md.

Example:
  >>> f = tf.function(lambda a, b: a * b)
  >>> out = f.get_concrete_function(x, y).graph.outputs
  >>> [t.op.device for t in out]    # S1's and S2's devices, not the client's
"""
from __future__ import annotations

import contextlib
import time
from typing import Dict, Iterator, List, Optional

import tensorflow as tf
from tensorflow.python.framework import ops, traceable_stack
from tensorflow.python.ops import control_flow_v2_func_graphs as cf_graphs

from . import context as _context

_MARK = "_tp_placement_installed"
_STATE = "_tp_placement_state"
#: the attribute `tag_shares` sets on a share's placeholder op: its holder's party
HOLDER_ATTR = "_tp_holder"

CLIENT = "client"
#: ops whose outputs are public metadata of their input
SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
WHILE_OPS = frozenset({"While", "StatelessWhile"})
COND_OPS = frozenset({"If", "StatelessIf", "Case", "StatelessCase"})
#: a nested tf.function's call: TF inlines it, its outputs are its body's
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
#: the name scope of every channel copy (channel.SCOPE): an IdentityN in it
#: is the one allowed way across parties
CHANNEL_SCOPE = "tp_channel_"


class PlacementError(Exception):
    """A traced computation would put a share or protocol message on a party
    that must not hold it (the client, in distributed mode the driver).

    A direct subclass of Exception so that AutoGraph re-raises it as itself
    (it re-creates only exceptions whose __init__ is Exception's)."""


COND_ADVICE = (
    "Use tp.cond(pred, true_fn, false_fn) instead: both branches run on the servers and each "
    "share holder keeps its branch's share (a public pred reaches S1 and S2 through the "
    "channel; a private pred selects obliviously). For an elementwise choice use tp.where; "
    "for several cases nest tp.cond; or return only tp.reveal()ed values from the branches.")
LOOP_ADVICE = (
    "Make the condition public (a tf.range loop, a counter, a public tensor), run a fixed "
    "number of iterations and choose results with tp.where, or tp.reveal() the condition "
    "first if it may be disclosed.")


# ------------------------------------------------------------------ parties
class _Parties:
    """Party of a device string, for the current runtime (memoised)."""

    def __init__(self, devices: Dict[str, str]):
        self.by_device = {canon(d): p for p, d in devices.items()}
        self.client = devices.get(CLIENT, "")
        self._memo: Dict[str, str] = {"": CLIENT}

    def of(self, device: str) -> str:
        party = self._memo.get(device)
        if party is None:
            party = self.by_device.get(canon(device), device)
            self._memo[device] = party
        return party


def canon(device: str) -> str:
    """'/device:CPU:1' and '/job:localhost/replica:0/task:0/device:CPU:1' alike."""
    if not device:
        return ""
    d = tf.DeviceSpec.from_string(device)
    return tf.DeviceSpec(job=d.job or "localhost", replica=d.replica or 0, task=d.task or 0,
                         device_type=d.device_type, device_index=d.device_index).to_string()


class _GraphState:
    """Per traced graph: taint of its tensors (by name) and the capture map."""

    def __init__(self, parties: _Parties, runtime_id: int):
        self.parties = parties
        self.runtime_id = runtime_id
        self.tainted: Dict[str, bool] = {}
        self.externals: Dict[int, object] = {}
        self.n_captures = -1


def _state(graph) -> Optional[_GraphState]:
    if not _context.is_initialized():
        return None
    h = _context.get_handle()
    st = getattr(graph, _STATE, None)
    if st is None or st.runtime_id != h.runtime.id:
        st = _GraphState(_Parties(h.runtime.devices), h.runtime.id)
        setattr(graph, _STATE, st)
    return st


def _external(graph, t):
    """The outer tensor a FuncGraph placeholder captures, else None."""
    st = _state(graph)
    captures = getattr(graph, "captures", None)
    if st is None or captures is None:
        return None
    if st.n_captures != len(captures):
        st.externals = {id(internal): external for external, internal in captures}
        st.n_captures = len(captures)
    return st.externals.get(id(t))


# --------------------------------------------------------------- home, taint
def home(t) -> str:
    """The device a traced tensor lives on when the function runs ("" for the
    client's, or not known while tracing)."""
    for _ in range(64):  # While -> loop input -> ...; bounded, never a cycle
        if isinstance(t, ops.EagerTensor) or not hasattr(t, "op"):
            return getattr(t, "device", "") or ""
        op = t.op
        if op.device:
            return op.device
        if op.type in WHILE_OPS and t.value_index < len(op.inputs):
            t = op.inputs[t.value_index]
            continue
        holder = getattr(op, HOLDER_ATTR, None)
        if holder is not None:
            return holder
        if op.type in CALL_OPS:
            inner = _called_output(t)
            if inner is not None:
                t = inner
                continue
        if op.type == "Placeholder":
            ext = _external(op.graph, t)
            if ext is not None:
                t = ext
                continue
        return ""
    return ""


def tainted(t) -> bool:
    """Whether a traced tensor holds (or is computed from) a share, a protocol
    message or a server's secret state."""
    if isinstance(t, ops.EagerTensor) or not hasattr(t, "op"):
        return False
    st = _state(t.graph)
    if st is None:
        return False
    known = st.tainted.get(t.name)
    if known is not None:
        return known
    # Iteratively (graphs traced before install() can be deep): resolve the
    # inputs first, then the op.
    stack = [t]
    while stack:
        u = stack[-1]
        if u.name in st.tainted:
            stack.pop()
            continue
        pending = [i for i in _taint_sources(u) if hasattr(i, "op") and
                   not isinstance(i, ops.EagerTensor) and i.graph is u.graph and
                   i.name not in st.tainted]
        if pending:
            stack.extend(pending)
            continue
        st.tainted[u.name] = _taint_of(u, st)
        stack.pop()
    return st.tainted[t.name]


def _taint_sources(t):
    """The same-graph tensors t's taint depends on."""
    op = t.op
    if op.type in WHILE_OPS:
        return [op.inputs[t.value_index]] if t.value_index < len(op.inputs) else []
    if op.type in COND_OPS or op.type in ("Placeholder", "Const"):
        return []
    return list(op.inputs)


def _taint_of(t, st: _GraphState) -> bool:
    op = t.op
    if getattr(op, HOLDER_ATTR, None) is not None:
        return st.parties.of(getattr(op, HOLDER_ATTR)) != CLIENT
    if op.type == "Placeholder":
        ext = _external(op.graph, t)
        if ext is None:
            return False
        if isinstance(ext, ops.EagerTensor) or not hasattr(ext, "op"):
            # a captured eager value: a server's variable handle, key or share
            return st.parties.of(getattr(ext, "device", "") or "") != CLIENT
        return tainted(ext) or (ext.dtype == tf.resource and
                                st.parties.of(home(ext)) != CLIENT)
    if op.type == "Const" and _captured_server_value(t, st):
        # TF captures an eager tensor of up to 128 elements by value, as a
        # Const (capture_container.py): a server's share captured that way
        # was read on the client while tracing (issue 24: not refused here,
        # the converter's weights are captured so), and is still a share.
        return True
    if op.type in WHILE_OPS:
        return t.value_index < len(op.inputs) and (
            st.tainted.get(op.inputs[t.value_index].name, False)
            or getattr(op, "_tp_tainted_outputs", {}).get(t.value_index, False))
    if op.type in CALL_OPS:
        inner = _called_output(t)
        if inner is not None:
            return tainted(inner) or any(tainted(i) for i in op.inputs)
    if op.type in COND_OPS:
        return any(tainted(g.outputs[t.value_index]) for g in _branch_graphs(op)
                   if t.value_index < len(g.outputs))
    if op.type in SHAPE_OPS or _to_client(op):
        return False
    if _channel_dst(op) not in (None, CLIENT):
        return True  # a message to a server: a share, or part of a protocol
    return any(st.tainted.get(i.name, False) for i in op.inputs)


def _captured_server_value(t, st: _GraphState) -> bool:
    """Whether a Const is an eager tensor of a server captured by value."""
    ext = _external(t.graph, t)
    return ext is not None and isinstance(ext, ops.EagerTensor) and \
        st.parties.of(ext.device) != CLIENT


def _channel_dst(op) -> Optional[str]:
    """The receiving party of a channel copy (an IdentityN in the channel's
    name scope, channel.Channels.send), else None."""
    if op.type != "IdentityN":
        return None
    for part in op.name.split("/"):
        if part.startswith(CHANNEL_SCOPE):
            return part[len(CHANNEL_SCOPE):].partition("_to_")[2].split("_")[0]
    return None


def _to_client(op) -> bool:
    """A channel copy to the client (tp.reveal): a declassification."""
    return _channel_dst(op) == CLIENT


def _branch_graphs(op):
    """The FuncGraphs of an If/Case op's branches (from the graph's library)."""
    attrs = ("then_branch", "else_branch") if op.type in ("If", "StatelessIf") else ()
    names = [op.get_attr(a).name for a in attrs] if attrs else \
        [f.name for f in op.get_attr("branches")]
    graphs = []
    for name in names:
        fn = _find_function(op.graph, name)
        g = getattr(fn, "graph", None) if fn is not None else None
        if g is not None:
            graphs.append(g)
    return graphs


def _called_output(t):
    """The output of a nested tf.function's graph that a call op's output t is."""
    fn = _find_function(t.op.graph, t.op.get_attr("f").name)
    g = getattr(fn, "graph", None) if fn is not None else None
    if g is None or t.value_index >= len(g.outputs):
        return None
    return g.outputs[t.value_index]


def _find_function(graph, name: str):
    while graph is not None:
        fn = getattr(graph, "_functions", {}).get(name)
        if fn is not None:
            return fn
        graph = getattr(graph, "outer_graph", None)
    return None


# ------------------------------------------------------------ the check
def _where(op) -> str:
    """The device op will run on: its own, else the colocation group's."""
    if op.device:
        return op.device
    stack = op.graph._colocation_stack  # pylint: disable=protected-access
    if stack:
        for other in stack.peek_objs():
            if other.device:
                return other.device
    return ""


def _check(op, st: _GraphState) -> None:
    """Raises PlacementError if op would move a share or protocol message to
    the client; records the taint of op's outputs."""
    parties = st.parties
    if op.type in COND_OPS:
        for k, out in enumerate(op.outputs):
            if tainted(out):
                raise PlacementError(
                    f"{op.type} '{op.name}' (tf.cond, tf.case, tf.switch_case or an AutoGraph "
                    f"`if` on a tensor) returns a PrivateTensor (output {k}): TensorFlow merges "
                    "a conditional's outputs on one device, here "
                    f"{parties.of(_where(op))}, so both shares would meet there outside the "
                    f"channel. {COND_ADVICE}")
        return
    if op.type in WHILE_OPS:
        _check_while(op, st)
        return
    if op.type in ("Placeholder", "Const"):
        return  # a capture is registered after its op is made: resolved lazily
    # The hot path of every traced op: inputs read once, their taint from the
    # graph's memo (made when their ops were checked), and for an ordinary op
    # one taint for all its outputs (what _taint_of decides for each).
    inputs, graph, memo = op.inputs, op.graph, st.tainted
    t_in = []
    for i in inputs:
        known = memo.get(i.name) if i.graph is graph else None
        if known is None:
            known = tainted(i)
        if known:
            t_in.append(i)
    dst = _channel_dst(op)
    if op.type in CALL_OPS or getattr(op, HOLDER_ATTR, None) is not None:
        for o in op.outputs:
            memo[o.name] = _taint_of(o, st)
    else:
        taint = (False if op.type in SHAPE_OPS or dst == CLIENT
                 else dst is not None or bool(t_in))
        for o in op.outputs:
            memo[o.name] = taint
    # TF colocates an op with the variable it reads: a server's variable is
    # read on the server.
    if not t_in or dst == CLIENT or any(i.dtype == tf.resource for i in inputs):
        return
    where = parties.of(_where(op))
    if where != CLIENT:
        return
    src = parties.of(home(t_in[0]))
    if isinstance(op.graph, cf_graphs.WhileCondFuncGraph):
        raise PlacementError(_loop_condition_message(op, t_in[0]))
    origin = t_in[0].op
    while origin.type == "Identity" and not origin.device and origin.inputs:
        origin = origin.inputs[0].op
    if origin.type in COND_OPS:
        raise PlacementError(
            f"op '{op.name}' ({op.type}) reads '{t_in[0].name}', a PrivateTensor's share "
            f"returned by {origin.type} '{origin.name}' (tf.cond, tf.case, tf.switch_case or an "
            "AutoGraph `if` on a tensor): TensorFlow merges a conditional's outputs on one "
            f"device, the client's, so both shares would meet there. {COND_ADVICE}")
    if origin.type == "Const" and _captured_server_value(origin.outputs[0], st):
        raise PlacementError(
            f"op '{op.name}' ({op.type}) reads '{t_in[0].name}', a server's tensor (a share) "
            "that TensorFlow captured into the traced function as a constant: it copies eager "
            "tensors of up to 128 elements into the graph, on the client. Pass the "
            "PrivateTensor to the tf.function as an argument instead of capturing it from "
            "outside.")
    held = (f"a share or protocol message held by {src}" if src != CLIENT else
            "a value computed from a share or protocol message")
    scope = (f"the holder's device scope (tf.device(tp.servers()['{src}']))" if src != CLIENT
             else "the holder's device scope")
    raise PlacementError(
        f"op '{op.name}' ({op.type}) reads '{t_in[0].name}', {held}, but would run on the "
        "client (it has no device scope): in distributed mode that sends it to the driver "
        f"outside the channel. Build it under {scope}, use the tp op for it, or tp.reveal() "
        "the value first if it may be disclosed.")


def _loop_condition_message(op, t) -> str:
    return (f"the condition of a while loop (tf.while_loop, or a Python while/for that "
            f"AutoGraph turns into one) reads '{t.name}', a share or a value computed from "
            f"private data (op '{op.name}'): the servers cannot decide whether to loop on a "
            f"secret without revealing it. {LOOP_ADVICE}")


def _check_while(op, st: _GraphState) -> None:
    """Each loop variable must leave the body on the party it entered on (its
    Enter/Merge/Switch/NextIteration nodes run there); taint of the outputs."""
    body = _find_function(op.graph, op.get_attr("body").name)
    body = getattr(body, "graph", None)
    if body is None:
        return
    inner = {ph.name: op.inputs[k] for k, ph in enumerate(body.inputs) if k < len(op.inputs)}
    tainted_out = {}
    for k, (inp, out) in enumerate(zip(op.inputs, body.outputs)):
        if inp.dtype == tf.resource:
            continue
        t = tainted(inp) or tainted(out)
        tainted_out[k] = t
        if not t:
            continue
        src = out.op.inputs[0] if out.op.type == "Identity" and not out.op.device \
            and out.op.inputs else out
        out_home = home(inner[src.name]) if src.name in inner else home(src)
        a, b = st.parties.of(home(inp)), st.parties.of(out_home)
        if a != b:
            raise PlacementError(
                f"while loop '{op.name}': loop variable {k} holds a share or protocol message "
                f"and enters on {a} but the body returns it on {b}: TF would copy it between "
                "them on every iteration outside the channel. Compute the loop variable with "
                "tp ops (they keep each share on its holder), or keep it out of the loop.")
    op._tp_tainted_outputs = tainted_out  # pylint: disable=protected-access


def _place_and_check(op) -> str:
    """Device function: places an unplaced return where its input lives, then
    runs the guard. Returns op's device."""
    st = _state(op.graph)
    if not op.device and op.type == "Identity" and op.inputs:
        if st is not None and isinstance(op.graph, cf_graphs.WhileCondFuncGraph) and \
                tainted(op.inputs[0]):
            # the loop condition itself (its return) would be private
            raise PlacementError(_loop_condition_message(op, op.inputs[0]))
        where = home(op.inputs[0])
        if where:
            op._set_device_from_string(where)  # pylint: disable=protected-access
    if st is not None:
        _check(op, st)
    return op.device


@contextlib.contextmanager
def timed() -> Iterator[List[float]]:
    """Yields [seconds] the guard spends checking the ops traced inside the
    block, filled in as they are traced (tp.profiling.guard_time)."""
    global _check  # pylint: disable=global-statement
    spent, check = [0.0], _check

    def timed_check(op, st):
        t0 = time.perf_counter()
        try:
            return check(op, st)
        finally:
            spent[0] += time.perf_counter() - t0
    _check = timed_check
    try:
        yield spent
    finally:
        _check = check


def install(graph=None) -> None:
    """Installs the placement device function and guard in the graph being
    traced and every graph it is nested in (once per graph; a no-op when
    executing eagerly)."""
    if graph is None:
        if not tf.inside_function():
            return
        graph = ops.get_default_graph()
    while graph is not None and not getattr(graph, _MARK, False):
        stack = graph._device_function_stack  # pylint: disable=protected-access
        # TF 2.14's stack of _UserDeviceSpecs; applied top first, so the
        # bottom entry acts last, where no scope has set a device.
        stack._stack.insert(0, traceable_stack.TraceableObject(  # pylint: disable=protected-access
            ops._UserDeviceSpec(_place_and_check)))  # pylint: disable=protected-access
        setattr(graph, _MARK, True)
        graph = getattr(graph, "outer_graph", None)


def keep_returns_in_place() -> None:
    """What every tp op calls while it is traced (registry.accepting_variables):
    installs the device function and guard, and refuses to run inside
    tf.vectorized_map, whose vectorizer copies ops without their devices."""
    if not tf.inside_function():
        return
    graph = ops.get_default_graph()
    install(graph)
    scope = graph.get_name_scope().split("/")
    if "loop_body" in scope:
        # tf.vectorized_map (parallel_for.pfor) traces the body under
        # "loop_body", its loop index a PlaceholderWithDefault in that scope
        prefix = "/".join(scope[:scope.index("loop_body") + 1])
        try:
            graph.get_operation_by_name(prefix + "/PlaceholderWithDefault")
        except KeyError:
            return
        raise TypeError(
            "tf.vectorized_map cannot run tp ops: its vectorizer rebuilds the body's ops "
            "without their devices, so shares would be computed on the client. Apply the tp "
            "ops to the whole batch at once (they are elementwise or batched), or loop "
            "explicitly: a Python loop over x[i] with tp.stack, or a `for i in tf.range(n)` "
            "loop inside tf.function.")


def tag_shares(share0, share1, holders) -> None:
    """Marks the placeholders a PrivateTensor is rebuilt from (function
    arguments, loop variables) with their holders' devices, so that `home`
    and the guard know them; installs the guard in their graph."""
    if not _context.is_initialized():
        return
    devices = _context.get_handle().runtime.devices
    for t, party in ((share0, holders[0]), (share1, holders[1])):
        if isinstance(t, ops.EagerTensor) or not hasattr(t, "op"):
            continue
        if t.op.type == "Placeholder" and not t.op.device and party in devices:
            setattr(t.op, HOLDER_ATTR, devices[party])
            install(t.graph)


# ------------------------------------------------------ captures by reference
def _on_a_server(device: str) -> bool:
    """Whether an eager tensor's device is a server's of the current runtime."""
    if not device or not _context.is_initialized():
        return False
    return _Parties(_context.get_handle().runtime.devices).of(device) != CLIENT


def capture_shares_by_reference() -> None:
    """Makes a traced function capture a server's int64 eager tensor (a share)
    through a placeholder, never by value.

    TF 2.14 captures an eager tensor of up to 128 elements as a Const
    (capture_container.FunctionCaptures.capture_by_value calls
    `tensor_util.constant_value`, i.e. `.numpy()`): the value is copied to the
    tracing process, the driver, at trace time, so a small PrivateTensor
    captured from outside a tf.function (a tp.load'ed scalar, a converted
    model's bias shares) would bring both shares to the driver in
    distributed mode, before any guard could see an op. Through a placeholder
    the function instead receives the tensor where it lives when it runs.
    Only int64 tensors on a server's device are affected (shares and protocol
    state); everything else keeps TF's behaviour. Idempotent; a no-op without
    a runtime."""
    from tensorflow.core.function.capture import capture_container as cc

    cls = cc.FunctionCaptures
    if getattr(cls.capture_by_value, _MARK, False):
        return
    by_value = cls.capture_by_value

    def capture_by_value(self, graph, tensor, name=None):
        if (isinstance(tensor, ops.EagerTensor) and tensor.dtype == tf.int64
                and _on_a_server(tensor.device)):
            return self._create_placeholder_helper(  # pylint: disable=protected-access
                graph, tensor, name or f"tp_share_capture_{ops.uid()}")
        return by_value(self, graph, tensor, name)

    setattr(capture_by_value, _MARK, True)
    capture_by_value.__doc__ = by_value.__doc__
    cls.capture_by_value = capture_by_value
