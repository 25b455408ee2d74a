"""The graph-rewriting pass (DESIGN §8): a frozen GraphDef, walked node by
node, becomes a private computation placed on S1, S2, T1 and T2.

Two phases. `analyse` decides, before anything runs, which nodes see a
private value (an input or a weight the policy makes private) and collects
EVERY node that cannot be converted into one UnsupportedOpError. `evaluate`
then replays the graph: nodes that see only public values run as the TF op
they are (constants fold at conversion), nodes that see a private value run
their registry implementation through the adapter their row of the op
table names (protocols/mpc/api/registry.py, adapters.py): the converter has no
op table of its own.

The training half (training.py) reuses `topo`, `src`, `node_problem` and
`eval_node` for its own walk over a training step.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.config import COMPARISONS
from tf_privpy.protocols.mpc.runtime import context, cost
from tf_privpy.protocols.mpc.api import registry
from tf_privpy.protocols.mpc.api.adapters import Node, Unsupported, Weight  # noqa: F401
from tf_privpy.protocols.mpc.api.value import PrivateTensor

from . import loops
from .passes import LOCAL_OPS
from .trace import Traced, private_nodes, reads_private, src, topo

#: control flow whose predicate or body would see a private value (tf.cond,
#: which freezing lowers to Switch/Merge, becomes a select: _COND)
CONTROL_FLOW = {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase",
                 "PartitionedCall", "StatefulPartitionedCall",
                 # tf.while_loop as freezing lowers it
                 "Enter", "Exit", "NextIteration", "LoopCond"}
_COND = {"Switch", "Merge"}
_SKIP = {"NoOp"}
_PASS_THROUGH = {"Identity", "StopGradient", "PreventGradient", "Snapshot"}


@dataclasses.dataclass(frozen=True)
class Policy:
    """Which values are private.

    Args:
      inputs: "private" (default: the data owner's input is shared) or
        "public" (the input is known to the servers, e.g. public test data).
      weights: "private" (default, as in PrivPy's MNIST experiments: the
        model owner shares the weights once at conversion) or "public"
        (products by weights are then local, with no messages).
      numerics_mode: the mode of the converted non-linear functions
        (Sigmoid, Tanh, Exp, Log, Reciprocal, RealDiv by a private value,
        Softmax, LogSoftmax and the softmax of the cross-entropy gradients):
        "exact" or "fast" (comparison-free methods on stated domains,
        docs/numerics.md); None (default): the runtime config's.
      comparison: the comparison protocol family of the converted model's
        comparisons (ReLU, max-pooling, argmax, where...): "garbled" or
        "bitwise" (docs/comparisons.md); None (default): the runtime's
        (tp.Config(comparison=...) or an enclosing tp.comparison scope).
      owner_side: True (default): what depends only on one plaintext input
        and public values (a Rescaling, a Reshape, the one-hot of token
        ids) is computed by the data owner, in plain TF on the client
        device, before sharing; what of it a private node reads is shared
        there (converters/owner.py). A Keras Embedding on the owner's ids
        becomes the owner's one-hot times the private table (no
        comparisons; an id outside the table raises at the owner, as TF
        does). An input given as a PrivateTensor is private as before (an
        Embedding on it: the oblivious lookup by comparisons). False:
        every plaintext input is shared as it is and everything after it
        runs on shares. Under weights="public" a model that reads only its
        input and public weights is then computed by the owner entirely
        (its output shared). Prediction only: training shares its inputs
        as they are.

    Example:
      >>> tp.keras.convert_training(model, loss, opt, policy=tp.Policy(numerics_mode="fast"))
      >>> tp.keras.convert(model, policy=tp.Policy(owner_side=False))   # all on shares
    """

    inputs: str = "private"
    weights: str = "private"
    numerics_mode: Optional[str] = None
    comparison: Optional[str] = None
    owner_side: bool = True

    def __post_init__(self):
        for k in ("inputs", "weights"):
            if getattr(self, k) not in ("private", "public"):
                raise ValueError(f"Policy.{k} must be 'private' or 'public', "
                                 f"got {getattr(self, k)!r}")
        if self.comparison not in (None,) + COMPARISONS:
            raise ValueError(f"Policy.comparison must be None (the runtime's) or one of "
                             f"{COMPARISONS}, got {self.comparison!r}")
        if not isinstance(self.owner_side, bool):
            raise ValueError(f"Policy.owner_side must be True or False, got {self.owner_side!r}")
        if self.numerics_mode not in (None, "exact", "fast"):
            raise ValueError(f"Policy.numerics_mode must be None (the config's), 'exact' or "
                             f"'fast', got {self.numerics_mode!r}")

    def comparisons(self):
        """A scope in which the converted graph is built: the comparison
        family the policy asks for, or the runtime's (a no-op scope)."""
        if self.comparison is None:
            return contextlib.nullcontext()
        backend = context.get_handle().backend
        if not hasattr(backend, "comparison"):
            raise ValueError(f"Policy(comparison={self.comparison!r}) needs the privpy backend; "
                             f"the runtime runs {backend.name!r}: drop the setting")
        return backend.comparison(self.comparison)

    def numerics(self) -> Dict[str, str]:
        """The keyword arguments that carry numerics_mode to a function."""
        return {} if self.numerics_mode is None else {"mode": self.numerics_mode}


@dataclasses.dataclass(frozen=True)
class Problem:
    node: str
    op: str
    layer: str
    why: str
    fix: str

    def __str__(self) -> str:
        where = f" (Keras layer '{self.layer}')" if self.layer else ""
        return f"  - {self.node} [{self.op}]{where}: {self.why}. What to do: {self.fix}."


class UnsupportedOpError(ValueError):
    """Every node of a model that cannot be converted, found before anything
    runs (DESIGN §8): one error, not one per attempt."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__(
            f"{len(self.problems)} node(s) cannot be converted to private computation:\n"
            + "\n".join(str(p) for p in self.problems)
            + "\nSupported TF ops: tp.converters.supported_ops().")


def decode_attr(v: tf.compat.v1.AttrValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "s":
        return v.s.decode()
    if kind in ("i", "f", "b"):
        return getattr(v, kind)
    if kind == "type":
        return tf.as_dtype(v.type)
    if kind == "shape":
        return tf.TensorShape(v.shape)
    if kind == "tensor":
        return tf.make_ndarray(v.tensor)
    if kind == "list":
        for f in ("i", "f", "s", "type", "shape"):
            items = list(getattr(v.list, f))
            if items:
                return [x.decode() if f == "s" else x for x in items]
        return []
    if kind == "func":
        return v.func.name
    return None


def node_of(n, layer_of: Dict[str, str]) -> Node:
    """The adapters' view of a NodeDef: op type, decoded attributes, layer."""
    return Node(n.name, n.op, {k: decode_attr(v) for k, v in n.attr.items()},
                layer_of.get(n.name, ""))


def lookup(op_type: str):
    """The converter adapter of a TF op type (its op-table row's), or None."""
    row = registry.converter_row(op_type)
    return row.adapter if row is not None else None


def node_problem(n, layer: str, training: bool = False) -> Optional[Problem]:
    """Why a node that sees a private value cannot be converted, or None if
    it can. A training step (training.py) converts no tf.cond (its Switch and
    Merge have no select there) and gets training advice."""
    if n.op in CONTROL_FLOW:
        if training:
            return Problem(n.name, n.op, layer, "control flow on a private value",
                           "write the branch as a select (tf.where)")
        return Problem(
            n.name, n.op, layer,
            "a conditional or function call kept functional on a private value (in a "
            "graph that has a loop, tf.cond is not lowered to a select)",
            "write the branch as a select (tf.where), or keep the tf.cond and the loop in "
            "separate converted models (loops with a public condition convert: "
            "docs/control_flow.md); reveal a private condition yourself first "
            "(tp.reveal: an explicit, visible declassification), or make the input "
            "public (Policy(inputs='public'))")
    if (n.op in _COND and not training) or lookup(n.op) is not None:
        return None  # a Switch/Merge is evaluated as a select of both branches
    op = registry.by_tf_op(n.op)
    fix = ("use supported layers, losses and optimizers (tp.converters.supported_ops(); SGD "
           "with or without momentum)" if training else
           "rewrite the model with supported ops (tp.converters.supported_ops())")
    return Problem(n.name, n.op, layer, "no private implementation of this TF op",
                   f"call tp.{op.name} yourself" if op else fix)


def analyse(traced: Traced, policy: Policy, private=None, owner: bool = False) -> List[Problem]:
    """Every node that would see a private value and has no private
    implementation, before anything runs (`private`: the nodes computed on
    shares, owner.plan's (owner=True), or a loop body's, converters/loops.py;
    default: everything after a private input)."""
    planned = private is not None
    private = private if planned else private_nodes(traced, policy)
    problems = loops.list_problems(traced, Problem)
    for n in topo(traced.graph_def):
        # a planned private node may read only owner-side values (shared)
        if not (reads_private(n, private) or (planned and n.name in private and n.op not in (
                "Placeholder", "Const"))):
            continue   # it sees only public (or the owner's) values: runs as the TF op it is
        if n.op in loops.WHILE:
            # what the owner computed reaches a loop shared (owner.py): the
            # loop sees it as private (a condition on it is refused)
            seen = private | private_nodes(traced, policy) if owner else private
            problems.extend(loops.problems(n, traced, seen,
                                           lambda t, p: analyse(t, policy, p), Problem))
            continue
        problem = node_problem(n, traced.layer_of.get(n.name, ""))
        refusal = getattr(lookup(n.op), "static_refusal", None)
        if problem is None and refusal is not None:
            # what the adapter would refuse from the node alone, asked now
            node = node_of(n, traced.layer_of)
            u = refusal(node)
            problem = u and Problem(n.name, n.op, node.layer, u.why, u.fix)
        if problem is not None:
            problems.append(problem)
    return problems


class Env:
    """What the adapters need while a private graph is built: how to turn a
    frozen weight into an operand under the policy, sharing each one once."""

    def __init__(self, policy: Policy, batch: bool = False):
        self.policy = policy
        self.batch = batch  # the batch_same_depth pass (converters/passes.py)
        #: kind -> [batched protocol calls, nodes in them] of the last evaluate()
        self.batched: Dict[str, List[int]] = {}
        self._shared: Dict[str, PrivateTensor] = {}
        #: the call's owner-side evaluation (owner.Frontier), or None
        self.owner = None

    def operand(self, v):
        if isinstance(v, Weight):
            if self.policy.weights == "public":
                return v.value
            if v.name not in self._shared:
                # The model owner shares each weight once, eagerly, at
                # conversion: not part of any run's bill.
                with tf.init_scope(), cost.paused():
                    self._shared[v.name] = registry.get("share").impl(v.value, name=v.name)
            return self._shared[v.name]
        return v

    def public(self, v):
        return v.value if isinstance(v, Weight) else v


def _run_public(n, ins: List[Any]) -> List[Any]:
    """A node that sees only public values runs as the TF op it is (on the
    client: public data), imported from its own NodeDef so its attributes
    stay exactly as traced; with constant inputs it folds at conversion."""
    data = [i for i in n.input if not i.startswith("^")]
    nd = tf.compat.v1.NodeDef()
    nd.CopyFrom(n)
    del nd.input[:]
    nd.input.extend(data)
    for k in [k for k in nd.attr if k.startswith("_")]:
        del nd.attr[k]
    single = tf.compat.v1.GraphDef(node=[nd])

    def run(*tensors):
        op = tf.graph_util.import_graph_def(
            single, input_map=dict(zip(data, tensors)), return_elements=[nd.name],
            name="public")[0]
        return list(op.outputs)

    if all(isinstance(v, np.ndarray) for v in ins):
        # wrap_function, not one tf.function per node: TF warns about
        # "retracing" after five functions built in a loop
        with tf.init_scope():
            fn = tf.compat.v1.wrap_function(lambda: run(*[tf.constant(v) for v in ins]), [])
            return [np.asarray(o.numpy()) for o in fn()]
    return run(*ins)


def _levels(traced: Traced, policy: Policy, order: List[Any],
            env_owner=None) -> List[List[Any]]:
    """The nodes grouped by communication depth (DESIGN §8 batching): a
    node's depth is the largest of its inputs' plus one if it sends
    messages (a private op outside passes.LOCAL_OPS; a product only when
    both operands are private). Two communicating nodes of one depth never
    depend on each other, so they can share one protocol call; listing the
    levels in order, each in topological order, is a topological order."""
    private = private_nodes(traced, policy) if env_owner is None else env_owner.plan.private
    depth: Dict[str, int] = {}
    for n in order:
        data = [src(i)[0] for i in n.input if not i.startswith("^")]
        d = max((depth.get(s, 0) for s in data), default=0)
        talks = n.name in private and n.op not in LOCAL_OPS and not (
            n.op == "Mul" and not all(s in private for s in data))
        depth[n.name] = d + int(talks)
    levels: Dict[int, List[Any]] = {}
    for n in order:
        levels.setdefault(depth[n.name], []).append(n)
    return [levels[k] for k in sorted(levels)]


#: node kinds issued together when several of one depth see private values
_BATCHABLE = {"Mul": "multiply", "Relu": "relu", "Less": "compare", "Greater": "compare"}


def _batch_level(level: List[Any], values: Dict, env: Env) -> set:
    """Evaluates a level's independent private products (multiply_many),
    ReLUs (nn.relu_many) and comparisons (less_many) as one protocol call
    per kind: one call's messages, whatever their number (the rounds do not
    change: independent calls overlap on the critical path) (PrivPy §5.6 array
    POs, DESIGN §5 'batching all independent multiplications of a round
    into one kernel call is the point'). Returns the nodes it evaluated."""
    groups: Dict[str, List[Tuple[Any, List[Any]]]] = {}
    for n in level:
        kind = _BATCHABLE.get(n.op)
        if kind is None or (env.owner is not None and env.owner.handles(n)):
            continue
        keys = [src(i) for i in n.input if not i.startswith("^")]
        if any(k not in values for k in keys):
            continue
        ops = [env.operand(values[k]) for k in keys]
        priv = [isinstance(o, PrivateTensor) for o in ops]
        if (kind == "multiply" and all(priv) and len(ops) == 2) or \
                (kind == "relu" and priv == [True]) or (kind == "compare" and any(priv)):
            groups.setdefault(kind, []).append((n, ops))
    done = set()
    for kind, members in groups.items():
        if len(members) < 2:
            continue
        if kind == "multiply":
            outs = registry.get("multiply_many").impl([tuple(o) for _, o in members])
        elif kind == "relu":
            outs = registry.get("nn.relu_many").impl([o[0] for _, o in members])
        else:  # x > y is y < x
            outs = registry.get("less_many").impl(
                [(o[0], o[1]) if n.op == "Less" else (o[1], o[0]) for n, o in members])
        for (n, _), out in zip(members, outs):
            values[(n.name, 0)] = out
            done.add(n.name)
        calls, nodes = env.batched.get(kind, [0, 0])
        env.batched[kind] = [calls + 1, nodes + len(members)]
    return done


def evaluate(traced: Traced, env: Env, inputs: Sequence[Any]) -> List[Any]:
    """Replays the frozen graph on `inputs` (PrivateTensors or public
    tensors, in traced.inputs order); returns the graph's outputs. With
    env.batch, level by level of communication depth (_levels), each
    level's independent products, ReLUs and comparisons batched."""
    values: Dict[Tuple[str, int], Any] = {}
    for name, x in zip(traced.inputs, inputs):
        values[(name, 0)] = x
    if env.owner is not None:
        env.owner.start(values)   # the owner's plaintext inputs stay at the owner
    order = topo(traced.graph_def)
    env.branch_tags = _branch_tags(order)
    env.nodes = {n.name: n for n in order}
    levels = _levels(traced, env.policy, order, env.owner) if env.batch else [order]
    env.batched = {}
    with env.policy.comparisons():
        for level in levels:
            done = _batch_level(level, values, env) if env.batch else set()
            for n in level:
                if n.op in _SKIP or (n.name, 0) in values or n.name in done:
                    continue
                eval_node(n, traced, env, values)
    results = [values[src(o)] for o in traced.outputs]
    return [env.operand(r) if isinstance(r, Weight) else r for r in results]


def eval_node(n, traced: Traced, env: Env, values: Dict) -> None:
    """Evaluates one node into `values` ((node, port) -> value): a constant,
    a select of tf.cond's branches, a pass-through, the node's adapter when
    it sees a private value, else the TF op itself on public values."""
    node = node_of(n, traced.layer_of)
    if n.op == "Const":
        # a weight's exact value: the passes keep folded weights in float64
        values[(n.name, 0)] = (Weight(n.name, traced.weights[n.name])
                               if n.name in traced.weights else node.attr["value"])
        return
    if env.owner is not None and env.owner.handles(n):
        env.owner.eval(n, node, values, _run_public)   # plain TF at the data owner
        return
    ins = [values[src(i)] for i in n.input if not i.startswith("^")]
    if n.op in _COND:
        outs = _select_branches(n, ins, env, values)
        for i, o in enumerate(outs):
            values[(n.name, i)] = o
        return
    private_weight = env.policy.weights == "private" and any(
        isinstance(v, Weight) for v in ins)
    if n.op in _PASS_THROUGH and len(ins) == 1:
        outs = ins  # keeps a weight's marker, so BatchNorm can still fold it
    elif n.op in loops.WHILE:
        outs = loops.run(n, traced, env, ins, evaluate)
    elif n.op in loops.LISTS:
        outs = loops.LISTS[n.op](env, node, ins)
    elif n.op in ("Shape", "Size", "Rank") and tf.TensorShape(
            getattr(ins[0], "shape", None)).is_fully_defined():
        # a public value's static shape folds too, as a private one's: what
        # a loop's trip count and TensorLists' lengths are computed from
        outs = lookup(n.op)(env, node, ins)
    elif private_weight or any(isinstance(v, PrivateTensor) for v in ins):
        fn = lookup(n.op)
        if fn is None:  # analyse() reported it; reaching here is a bug
            raise UnsupportedOpError([Problem(n.name, n.op, node.layer,
                                              "no private implementation", "")])
        outs = fn(env, node, ins)
    else:
        outs = _run_public(n, [env.public(v) for v in ins])
    for i, o in enumerate(outs):
        values[(n.name, i)] = o


# ------------------------------------------------------ tf.cond as a select
def _branch_tags(order) -> Dict[Tuple[str, int], Tuple]:
    """For every output: the chain of (Switch node, port) it depends on.
    Freezing lowers tf.cond to Switch (port 0: false branch, 1: true branch)
    and Merge; branch constants hang on the Switch by control edges."""
    tags: Dict[Tuple[str, int], Tuple] = {}
    for n in order:
        ins = [tags.get(src(i), ()) for i in n.input]
        tag = max(ins, key=len) if ins else ()
        if n.op == "Switch":
            tags[(n.name, 0)] = tag + ((n.name, 0),)
            tags[(n.name, 1)] = tag + ((n.name, 1),)
            continue
        if n.op == "Merge":
            tag = tag[:-1]
        for port in range(8):
            tags[(n.name, port)] = tag
    return tags


def _select_branches(n, ins, env: Env, values) -> List[Any]:
    """tf.cond(p, t, f) on a private p is select(p, t(), f()): both branches
    are computed (they are side-effect free after freezing) and the Merge
    keeps the right one obliviously (DESIGN §8). A Switch passes its data
    to both branches; a Merge selects between them."""
    if n.op == "Switch":
        return [ins[0], ins[0]]
    data = [i for i in n.input if not i.startswith("^")]
    by_port = {}
    for name, v in zip(data, ins):
        tag = env.branch_tags.get(src(name), ())
        if tag:
            by_port[tag[-1]] = v
    switches = {sw for sw, _ in by_port}
    if len(switches) != 1 or len(by_port) != 2:
        raise UnsupportedOpError([Problem(n.name, n.op, "", "a Merge that is not a two-way "
                                          "tf.cond", "write the branch as tf.where")])
    (sw,) = switches
    switch = env.nodes[sw]
    pred = values[src(switch.input[1])]
    t, f = env.operand(by_port[(sw, 1)]), env.operand(by_port[(sw, 0)])
    if isinstance(pred, np.ndarray):
        chosen = t if bool(pred) else f
    elif isinstance(pred, PrivateTensor) or isinstance(t, PrivateTensor) or isinstance(
            f, PrivateTensor):
        chosen = registry.get("where").impl(pred, t, f)
    else:
        chosen = tf.where(pred, t, f)
    return [chosen, np.int32(0)]
