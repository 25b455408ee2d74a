"""While loops in the converted graph (issue 27: Keras LSTM, GRU, SimpleRNN;
DESIGN §11, control flow over private values runs on each share holder or
is refused).

A traced model with a loop is frozen with its loops kept functional
(trace.py): a While node names its condition and body, functions of the
graph's library, each converted here as a small graph of its own by the
same rewrite (rewrite.evaluate). The converted loop is a tf.while_loop
over the loop variables, PrivateTensors where private: each share stays
on its holder from iteration to iteration (a while loop keeps a loop
variable on the party it entered on, protocols/mpc/api/control_flow.py),
so every holder runs its own loop, and the graph holds the body once (or
twice, see peeling) whatever the number of time steps.

What converts: a loop whose condition sees public values only (counters,
shapes, constants); its trip count is computed while converting from the
public part of the loop (`_trip_count`) and is part of the bill. A
condition that depends on a private value is refused (the servers cannot
branch on what they may not learn).

A loop variable that enters public and leaves the body private takes its
private form at the entry: Keras's zero initial states become sharings
made on the holders (no message); its output TensorList, reserved with the
batch dimension unknown, takes the shape TF's shape inference gives the
elements the plaintext body writes (`_written_shapes`: shapes only, which
are public). Where that says nothing, the first iteration is peeled: it
runs before the loop, in the enclosing graph, and gives every variable its
form and static shape; the loop runs the rest (the body then twice in the
graph, still independent of the number of steps).

The public variables (the step counter) live on the client, as any public
value of the program; where a TensorList is read or written at one, each
holder receives it through the channel (sequence_adapters._index).

Cost: the body is traced once; its protocol calls declare their bill in a
recorder of their own, and the loop declares it once per iteration (what
the channel counts in TF state, per iteration).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def

from tf_privpy.protocols.mpc.runtime import context, cost
from tf_privpy.protocols.mpc.api import sequence_adapters as SA
from tf_privpy.protocols.mpc.api.adapters import Unsupported, Weight
from tf_privpy.protocols.mpc.api.ops.array_ops import _public_as_private
from tf_privpy.protocols.mpc.api.value import PrivateTensor

from .trace import PUBLIC_OUTPUT_OPS, Traced, reads_private, src, topo

WHILE = frozenset({"While", "StatelessWhile"})
#: TensorList op type -> the adapter that converts it whatever its inputs:
#: lists are held densely, public ones too (sequence_adapters.py)
LISTS = SA.LIST_ADAPTERS


def list_problems(traced: Traced, problem: Callable) -> list:
    """TensorList ops other than LISTS, private or not: held densely, a list
    is no longer what TF's own kernels of those ops read."""
    return [problem(n.name, n.op, traced.layer_of.get(n.name, ""),
                    "a TensorList op the converter does not hold lists for",
                    "use TensorLists as Keras's recurrent layers do (from a tensor, "
                    "reserve, get and set an item at a public index, stack)")
            for n in traced.graph_def.node
            if n.op.startswith("TensorList") and n.op not in LISTS]
#: a trip count above this is taken for a loop that does not end
MAX_TRIPS = 1_000_000

PRIVATE_CONDITION = (
    "a loop whose condition depends on a private value: the servers cannot decide "
    "whether to go on without revealing it",
    "loop a public number of times (a count known from shapes or constants), reveal "
    "the condition yourself first (tp.reveal: an explicit, visible declassification), "
    "or make the input public (Policy(inputs='public'))")


# ----------------------------------------------------- the loop's functions
def function(traced: Traced, name: str, layer: str) -> Traced:
    """The library function `name` of the traced graph as a Traced of its
    own (arguments as placeholders), cached on the Traced."""
    cache = traced.__dict__.setdefault("_loop_functions", {})
    if name not in cache:
        lib = {f.signature.name: f for f in traced.graph_def.library.function}
        if name not in lib:
            raise Unsupported(f"a loop whose function {name} is not in the frozen graph",
                              "trace the model with tp.keras.convert or tp.convert")
        fdef = lib[name]
        gd, flat = function_def_to_graph_def(fdef)
        gd.library.CopyFrom(traced.graph_def.library)   # nested loops
        inputs = [a.name for a in fdef.signature.input_arg]
        outputs = [flat[fdef.ret[a.name]] for a in fdef.signature.output_arg]
        cache[name] = Traced(gd, inputs, [], outputs, {}, {n.name: layer for n in gd.node})
    return cache[name]


def _functions(n, traced: Traced, layer: str) -> Tuple[Traced, Traced]:
    names = []
    for key in ("cond", "body"):
        a = n.attr[key]
        names.append(a.func.name)
    return function(traced, names[0], layer), function(traced, names[1], layer)


def private_of(traced: Traced, seeds: Set[str]) -> Set[str]:
    """Nodes of `traced` whose outputs are private when the nodes `seeds`
    (its private arguments) are: trace.private_nodes' rule."""
    private = set(seeds)
    for n in topo(traced.graph_def):
        if n.op not in PUBLIC_OUTPUT_OPS and reads_private(n, private):
            private.add(n.name)
    return private


def _privacy(body: Traced, entering: Sequence[bool]) -> Tuple[List[bool], Set[str]]:
    """Which loop variables are private: those entering private, and those
    the body makes private from them, to a fixed point."""
    priv = list(entering)
    while True:
        inside = private_of(body, {a for a, p in zip(body.inputs, priv) if p})
        nxt = [p or src(o)[0] in inside for p, o in zip(priv, body.outputs)]
        if nxt == priv:
            return priv, inside
        priv = nxt


def _invariant(body: Traced) -> List[bool]:
    """Loop variables the body returns unchanged (weights, the input
    sequence, the number of steps): captured by the converted loop, not
    carried."""
    nodes = {n.name: n for n in body.graph_def.node}
    out = []
    for arg, o in zip(body.inputs, body.outputs):
        name = src(o)[0]
        while nodes[name].op == "Identity":
            name = src(nodes[name].input[0])[0]
        out.append(name == arg)
    return out


MASKED = (
    "a recurrent layer over a masked sequence (a Masking layer, mask_zero=True or a mask "
    "argument): each step would select by a private mask",
    "drop the mask and batch together sequences of one length, unpadded (the number of "
    "steps is public anyway)")


def problems(n, traced: Traced, private: Set[str], analyse: Callable, problem: Callable):
    """The reasons a While node cannot be converted (rewrite.analyse): a
    private condition, a masked sequence, or the body's own unsupported
    nodes."""
    layer = traced.layer_of.get(n.name, "")
    cond, body = _functions(n, traced, layer)
    entering = [src(i)[0] in private for i in n.input if not i.startswith("^")]
    priv, inside = _privacy(body, entering)
    seen = private_of(cond, {a for a, p in zip(cond.inputs, priv) if p})
    if any(src(o)[0] in seen for o in cond.outputs):
        return [problem(n.name, n.op, layer, *PRIVATE_CONDITION)]
    if any(b.op == "TensorListGetItem" and b.name in inside and
           b.attr["element_dtype"].type == tf.bool.as_datatype_enum
           for b in body.graph_def.node):
        return [problem(n.name, n.op, layer, *MASKED)]
    return analyse(body, inside)


def layer_problems(model, problem: Callable) -> list:
    """What a Keras model's layers and inputs refuse before tracing (the
    frozen graph would not say it, or not freeze): a stateful recurrent
    layer, a ragged or sparse input."""
    if not isinstance(model, tf.keras.Model):
        return []
    out = []
    for t in tf.nest.flatten(model.inputs or []):
        if not isinstance(getattr(t, "type_spec", None), tf.TensorSpec):
            out.append(problem(t.name, type(t.type_spec).__name__, "",
                               "a ragged or sparse model input: the converted model would "
                               "read it as a dense tensor, padding included",
                               "pad the sequences to one length (RaggedTensor.to_tensor) "
                               "and build the model on a dense tf.keras.Input"))
    stack = list(model.layers)
    while stack:
        layer = stack.pop()
        stack.extend(getattr(layer, "layers", []))
        stack.extend(v for v in (getattr(layer, "forward_layer", None),
                                 getattr(layer, "backward_layer", None)) if v is not None)
        if getattr(layer, "stateful", False):
            out.append(problem(layer.name, type(layer).__name__, layer.name,
                               "a stateful recurrent layer (stateful=True): every call "
                               "updates its state variables",
                               "build the layer with stateful=False and carry the state "
                               "yourself (return_state=True, then initial_state inputs)"))
    return out


# --------------------------------------------------------------- running
def _private(env, v) -> bool:
    return isinstance(v, PrivateTensor) or (
        isinstance(v, Weight) and env.policy.weights == "private")


def _static(v) -> bool:
    return isinstance(v, (np.ndarray, np.generic, int, float, bool))


def _nested(env, evaluate, traced: Traced, args: Sequence[Any]) -> List[Any]:
    """rewrite.evaluate of a loop's function inside the enclosing
    evaluation, whose state on env it keeps. A loop runs on shares: its
    function has no owner-side part (what the owner computed before the
    loop reaches it shared, converters/owner.py)."""
    saved = {k: getattr(env, k, None) for k in ("branch_tags", "nodes", "batched", "owner")}
    env.owner = None
    try:
        return evaluate(traced, env, list(args))
    finally:
        inner = env.batched
        for k, v in saved.items():
            setattr(env, k, v)
        for kind, (calls, nodes) in (inner or {}).items():
            c, m = env.batched.get(kind, [0, 0])
            env.batched[kind] = [c + calls, m + nodes]


def _prune(traced: Traced, private: Set[str], wanted: Sequence[str]) -> tf.compat.v1.GraphDef:
    """The public nodes `wanted` depends on, without control edges from
    private ones: the public part of a loop's function."""
    nodes = {n.name: n for n in traced.graph_def.node}
    keep, stack = set(), [src(w)[0] for w in wanted]
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack.extend(src(i)[0] for i in nodes[name].input if not i.startswith("^"))
    gd = tf.compat.v1.GraphDef()
    gd.library.CopyFrom(traced.graph_def.library)
    for n in traced.graph_def.node:
        if n.name in keep:
            c = gd.node.add()
            c.CopyFrom(n)
            del c.input[:]
            c.input.extend(i for i in n.input if not i.startswith("^") or
                           (src(i)[0] in keep and src(i)[0] not in private))
    return gd


def _trip_count(cond: Traced, body: Traced, priv: List[bool], inv: List[bool],
                values: Sequence[Any]) -> int:
    """How many times the loop runs, computed now from its public part: the
    condition and the public carried variables depend on public values only
    (by `_privacy`), which must be known while converting."""
    cond_priv = private_of(cond, {a for a, p in zip(cond.inputs, priv) if p})
    body_priv = private_of(body, {a for a, p in zip(body.inputs, priv) if p})
    cond_gd = _prune(cond, cond_priv, cond.outputs)
    # the carried variables the condition depends on, through the body too
    in_cond = {n.name for n in cond_gd.node}
    pub, in_body, grown = [], set(), True
    while grown:
        grown = False
        for i in range(len(priv)):
            if not priv[i] and not inv[i] and i not in pub and (
                    cond.inputs[i] in in_cond or body.inputs[i] in in_body):
                pub.append(i)
                grown = True
        body_gd = _prune(body, body_priv, [body.outputs[i] for i in pub])
        in_body = {n.name for n in body_gd.node}
    pub.sort()
    for i, (a, v) in enumerate(zip(body.inputs, values)):
        if (a in in_body or cond.inputs[i] in in_cond) and not _static(v):
            raise Unsupported("a loop whose number of iterations is not known when "
                              "converting", "give the model static shapes (a fixed number "
                              "of time steps)")

    def feed(graph_def: tf.compat.v1.GraphDef, args: List[str], vs: Dict[int, Any], outs):
        present = {n.name for n in graph_def.node}
        mapping = {f"{a}:0": vs[i] if i in vs else tf.constant(values[i])
                   for i, a in enumerate(args) if a in present and _static(values[i])}
        mapping.update({f"{a}:0": vs[i] for i, a in enumerate(args) if i in vs and a in present})
        return tf.graph_util.import_graph_def(graph_def, input_map=mapping,
                                              return_elements=list(outs), name="trips")

    def count():
        def c(k, *v):
            return feed(cond_gd, cond.inputs, dict(zip(pub, v)), cond.outputs)[0]

        def b(k, *v):
            out = feed(body_gd, body.inputs, dict(zip(pub, v)),
                       [body.outputs[i] for i in pub])
            return (k + 1,) + tuple(out)
        start = (tf.constant(0),) + tuple(tf.constant(values[i]) for i in pub)
        return tf.while_loop(c, b, start, maximum_iterations=MAX_TRIPS + 1)[0]

    with tf.init_scope():
        trips = int(tf.compat.v1.wrap_function(count, [])().numpy())
    if trips > MAX_TRIPS:
        raise Unsupported(f"a loop that runs more than {MAX_TRIPS} times",
                          "check the loop's condition")
    return trips


def _as_carried(env, v, private: bool, what: str):
    """A carried variable's value in the form tf.while_loop carries. A
    public value known while converting (Keras's zero initial states) that
    the loop makes private becomes a sharing made on the holders, with no
    message; one computed at run time reaches S1 through the channel."""
    if isinstance(v, SA.Reserved):
        raise Unsupported(f"a loop whose {what} is a TensorList it never writes",
                          "write the list in the loop, or keep it out of the loop")
    v = env.operand(v)
    if private and not isinstance(v, PrivateTensor):
        h = context.get_handle()
        if _static(v):
            with h.backend.on(0):
                v = tf.constant(v)
        return _public_as_private(h, v)
    return v if isinstance(v, PrivateTensor) else tf.convert_to_tensor(v)


def _shape_of(v) -> List:
    if isinstance(v, Weight):
        return list(v.value.shape)
    return tf.TensorShape(getattr(v, "shape", np.shape(v))).as_list()


def _written_shapes(n, body: Traced, values: Sequence[Any], lists: Sequence[int]):
    """The element shape of each reserved list in `lists` that the body
    writes, from TF's shape inference on the plaintext body with the loop
    variables' shapes (nothing runs; only shapes, which are public): {index:
    shape}, or None if one is not known (the first iteration is peeled)."""
    types = [tf.as_dtype(t) for t in n.attr["T"].list.type]
    g = tf.Graph()
    with g.as_default():
        feeds = {}
        for a, v, t in zip(body.inputs, values, types):
            if t == tf.variant:
                if isinstance(v, SA.Reserved):
                    shape = [-1 if d is None else d for d in v.element_shape or []]
                    if v.element_shape is None:
                        shape = -1
                    lst = tf.raw_ops.TensorListReserve(element_shape=shape, num_elements=v.n,
                                                       element_dtype=v.dtype)
                else:
                    dense = _shape_of(v)
                    lst = tf.raw_ops.TensorListFromTensor(
                        tensor=tf.compat.v1.placeholder(v.dtype, dense),
                        element_shape=[-1 if d is None else d for d in dense[1:]])
                feeds[f"{a}:0"] = lst
            else:
                feeds[f"{a}:0"] = tf.compat.v1.placeholder(t, _shape_of(v))
        outs = tf.graph_util.import_graph_def(body.graph_def, input_map=feeds,
                                              return_elements=list(body.outputs), name="shapes")
    found = {}
    for i in lists:
        op = outs[i].op
        while op.type == "Identity":
            op = op.inputs[0].op
        if op.type != "TensorListSetItem" or not op.inputs[2].shape.is_fully_defined():
            return None
        found[i] = op.inputs[2].shape.as_list()
    return found


def _scaled(bill: cost.Cost, k: int) -> cost.Cost:
    out = cost.Cost(rounds=bill.rounds * k, multiplications=bill.multiplications * k,
                    comparisons=bill.comparisons * k)
    out.links = {link: [m * k, b * k] for link, (m, b) in bill.links.items()}
    return out


def run(n, traced: Traced, env, ins: List[Any], evaluate: Callable) -> List[Any]:
    """The outputs of a While node on `ins` (rewrite.evaluate's values)."""
    layer = traced.layer_of.get(n.name, "")
    cond, body = _functions(n, traced, layer)
    priv, _ = _privacy(body, [_private(env, v) for v in ins])
    inv = _invariant(body)
    trips = _trip_count(cond, body, priv, inv, ins)
    values = list(ins)
    if trips == 0:
        return values
    carried = [i for i in range(len(values)) if not inv[i]]
    reserved = [i for i in carried if isinstance(values[i], SA.Reserved)]
    shapes = _written_shapes(n, body, values, reserved) if reserved else {}
    for i, shape in (shapes or {}).items():
        r = values[i]
        values[i] = (SA.private_zeros([r.n] + shape, r.dtype) if priv[i] else
                     np.zeros([r.n] + shape, r.dtype.as_numpy_dtype))
    if shapes is None:
        # peel the first iteration (module docstring)
        outs = _nested(env, evaluate, body, values)
        for i in carried:
            values[i] = outs[i]
        trips -= 1
        if trips == 0:
            return values
    start = [_as_carried(env, values[i], priv[i], f"loop variable {i}") for i in carried]
    bills = []

    def args_of(vs):
        args = list(values)
        for i, v in zip(carried, vs):
            args[i] = v
        return args

    def cond_fn(*vs):
        (c,) = _nested(env, evaluate, cond, args_of(vs))
        if isinstance(c, PrivateTensor):   # problems() refused it; a bug if here
            raise Unsupported(*PRIVATE_CONDITION)
        return tf.convert_to_tensor(c)

    def body_fn(*vs):
        with cost.paused(), cost.record() as bill:
            outs = _nested(env, evaluate, body, args_of(vs))
            new = []
            for i, v0 in zip(carried, vs):
                v = _as_carried(env, outs[i], priv[i], f"loop variable {i}")
                new.append(v if isinstance(v, PrivateTensor) else tf.cast(v, v0.dtype))
        bills.append(bill)
        return tuple(new)

    out = tf.while_loop(cond_fn, body_fn, tuple(start), parallel_iterations=1)
    out = list(out) if isinstance(out, (list, tuple)) else [out]
    # each iteration's messages, in sequence after everything so far, and the
    # loop's results ready after them
    cost.declare_in_sequence(_scaled(bills[-1], trips))
    cost.propagate((), [s for v in out if isinstance(v, PrivateTensor)
                        for s in (v.share0, v.share1)])
    for i, v in zip(carried, out):
        values[i] = v
    return values
