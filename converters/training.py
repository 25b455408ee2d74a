"""The training half of the converter (DESIGN §8 "Training"): one SGD step
of a Keras model, traced and rewritten so that its weights stay private
from step to step.

  trace_step   traces `forward → loss → tf.GradientTape gradients →
               optimizer.apply_gradients` of a Keras model as a tf.function,
               at a fixed batch shape, and keeps the part of its GraphDef the
               weight updates need (the loss value only when asked for).
               Nothing is re-implemented in Python: the gradient ops are the
               ones TF's autodiff emits (MatMul with transposes, BiasAddGrad,
               ReluGrad, SigmoidGrad, SoftmaxCrossEntropyWithLogits, ...),
               each converted by its op-table row's adapter
               (protocols/mpc/api/registry.py).
  analyse_step every node that cannot be converted, in one
               UnsupportedOpError, before anything is shared or run; also a
               private value written into a public variable (e.g. the moving
               statistics of BatchNormalization).
  evaluate_step replays the step: the variables' resource handles become
               references to tp.Variables (weights and optimizer slots,
               shared once) or to the public optimizer state (learning rate,
               iteration counter), ReadVariableOp reads the current value,
               Assign*VariableOp / ResourceApply* update it in program
               order, and at the end each server assigns its own share.
  PrivateTrainer the user-facing object (tp.keras.convert_training),
               in trainer.py.
  optimizers   (optimizers.py) which optimizers and options are refused
               before tracing; Adam and AMSGrad's update, written there on
               the optimizer's own slots instead of traced from Keras.

Two passes (trace level, `passes=` of convert_training, both on by
default). `loss_scale`: the step differentiates N·loss (N the batch size)
and multiplies each weight's gradient by the public 1/N before the
optimizer, the same math. A mean over the batch puts 1/N into the backward
pass at the loss, where the fixed-point errors of every later product are
absolute (about one ulp, 2^-20) on values N times smaller than they need be:
measured on network A, the updates' relative error falls from ~2e-2 to
~1e-3. (What remains after many steps is the weights' own rounding, one ulp
per update, which SGD's dynamics may amplify: see tests/test_training.py.)

`loss_gradient_form`: a
sigmoid output with binary cross-entropy (and a softmax output with
categorical cross-entropy) is differentiated in its gradient form. Keras'
BinaryCrossentropy on a sigmoid output traces to log, log1p, exp and
selects whose gradient graph needs private logarithms, exponentials,
reciprocals and comparisons; but d loss / d z = (sigmoid(z) − y) / n for the
logits z, so the step differentiates the surrogate
Σ stop_gradient(p − y)·z / n instead, whose gradient with respect to every
weight is the same and costs nothing beyond the forward pass (p − y is a
subtraction). The loss value itself is computed only when step(...,
return_loss=True) asks for it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python import pywrap_tfe

from tf_privpy.protocols.mpc.runtime import cost
from tf_privpy.protocols.mpc.api import registry
from tf_privpy.protocols.mpc.api.adapters import Unsupported, paired_roots
from tf_privpy.protocols.mpc.api.value import PrivateTensor
from tf_privpy.protocols.mpc.api.variable import PrivateVariable

from . import optimizers
from . import owner as owner_mod
from .rewrite import (Env, Policy, Problem, UnsupportedOpError, _branch_tags, _run_public,
                      eval_node, lookup, node_of, node_problem)
from .trace import Traced, _layer_names, src, topo

#: the training half's passes (trace level), all on by default
PASSES = ("loss_gradient_form", "loss_scale")
#: stateful ops of the optimizer update, handled here (not adapters)
UPDATE_OPS = ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
              "ResourceApplyGradientDescent", "ResourceApplyMomentum",
              "ResourceApplyKerasMomentum")
READ_OPS = ("ReadVariableOp",)
#: ops that only order the step's side effects
_SKIP = {"NoOp"}


@dataclasses.dataclass
class Resource:
    """A variable the traced step reads or updates."""

    placeholder: str              # its resource placeholder in the step's graph
    variable: tf.Variable         # the Keras / optimizer variable
    kind: str                     # "weight", "slot" (private) or "public"
    private: Optional[PrivateVariable] = None
    #: a private slot holds its Keras value times this (Adam's scaled moments)
    scale: float = 1.0

    @property
    def is_private(self) -> bool:
        return self.kind in ("weight", "slot")


@dataclasses.dataclass
class TracedStep(Traced):
    """A traced training step: Traced's fields (inputs x and y, no frozen
    weights) plus the resources and the nodes that update them."""

    resources: Dict[str, Resource] = dataclasses.field(default_factory=dict)
    updates: List[str] = dataclasses.field(default_factory=list)
    loss: Optional[str] = None    # tensor name of the loss, when returned
    pass_report: Dict[str, int] = dataclasses.field(default_factory=dict)
    #: node name -> its outputs' static shapes (for check_step's dry run)
    shapes: Dict[str, List[tf.TensorShape]] = dataclasses.field(default_factory=dict)


# ------------------------------------------------------------------ loss
def _through_identity(t: tf.Tensor) -> tf.Tensor:
    while t.op.type == "Identity":
        t = t.op.inputs[0]
    return t


def _loss_kind(loss) -> Tuple[str, Any]:
    """(kind, reduction) of a Keras loss: kind 'bce', 'cce' (from
    probabilities) or '' for a loss traced as it is."""
    L = tf.keras.losses
    if isinstance(loss, L.BinaryCrossentropy):
        cfg = loss.get_config()
        if not cfg.get("from_logits") and not cfg.get("label_smoothing"):
            return "bce", loss.reduction
    elif isinstance(loss, L.CategoricalCrossentropy):
        cfg = loss.get_config()
        if not cfg.get("from_logits") and not cfg.get("label_smoothing"):
            return "cce", loss.reduction
    elif loss in (L.binary_crossentropy, "binary_crossentropy"):
        return "bce", L.Reduction.AUTO
    elif loss in (L.categorical_crossentropy, "categorical_crossentropy"):
        return "cce", L.Reduction.AUTO
    return "", None


def _gradient_form(loss, y, p, report) -> Optional[tf.Tensor]:
    """The loss_gradient_form pass: a surrogate whose gradient is the
    loss's, (p − y)/n with respect to the logits, or None when the pattern
    (sigmoid + BCE, softmax + CCE, default reductions) does not apply."""
    kind, reduction = _loss_kind(loss)
    act = _through_identity(p)
    want = {"bce": "Sigmoid", "cce": "Softmax"}.get(kind)
    R = tf.keras.losses.Reduction
    if want is None or act.op.type != want or reduction not in (
            R.AUTO, R.SUM_OVER_BATCH_SIZE, R.SUM) or not p.shape.is_fully_defined():
        return None
    z = act.op.inputs[0]
    batch, units = p.shape[0], int(np.prod(p.shape[1:]))
    # BCE averages over the units of a sample, CCE sums over the classes
    n = float((units if kind == "bce" else 1) * (1 if reduction == R.SUM else batch))
    residual = tf.stop_gradient(act - tf.cast(y, act.dtype))
    report["loss_gradient_form"] = report.get("loss_gradient_form", 0) + 1
    return tf.reduce_sum(residual * z) / n


def _resolve_loss(loss):
    if isinstance(loss, str):
        return tf.keras.losses.get(loss)
    return loss


# ----------------------------------------------------------------- trace
def _optimizer_variables(optimizer) -> List[tf.Variable]:
    v = optimizer.variables
    out = list(v() if callable(v) else v)
    # hyperparameters kept as variables (Keras 2.14: _learning_rate,
    # _iterations; legacy optimizers: the _hyper dict, weights)
    extra = list(vars(optimizer).values()) + list(getattr(optimizer, "_hyper", {}).values())
    try:
        extra += list(optimizer.weights)
    except Exception:  # noqa: BLE001
        pass
    for a in extra:
        if isinstance(a, tf.Variable) and not any(a is o for o in out):
            out.append(a)
    for a in ("iterations", "learning_rate", "lr"):
        try:
            x = getattr(optimizer, a)
        except Exception:  # noqa: BLE001  (legacy optimizers raise for unknown names)
            continue
        if isinstance(x, tf.Variable) and not any(x is o for o in out):
            out.append(x)
    return out


def trace_step(model: tf.keras.Model, loss, optimizer, x_spec: tf.TensorSpec,
               y_spec: tf.TensorSpec, return_loss: bool = False,
               passes: Sequence[str] = PASSES) -> TracedStep:
    """Traces one training step of `model` at fixed shapes and keeps what
    the weight updates (and the loss, if return_loss) need."""
    loss = _resolve_loss(loss)
    kind = optimizers.check_optimizer(optimizer)  # refused before anything is traced
    if getattr(optimizer, "jit_compile", False):
        optimizer.jit_compile = False  # an XLA cluster would hide the update's ops
    if kind == "adam" and not hasattr(optimizer, "_index_dict"):
        optimizer.build(model.trainable_variables)  # its slots, before the trace
    elif hasattr(optimizer, "build") and not getattr(optimizer, "_built", True):
        optimizer.build(model.trainable_variables)
    elif hasattr(optimizer, "_create_all_weights"):  # legacy optimizers
        optimizer._create_all_weights(model.trainable_variables)
    report: Dict[str, int] = {}

    def step(x, y):
        with tf.GradientTape() as tape:
            p = model(x, training=True)
            value = loss(y, p)
            target = (_gradient_form(loss, y, p, report)
                      if "loss_gradient_form" in passes else None)
            target = value if target is None else target
            scale = float(x.shape[0]) if "loss_scale" in passes else 1.0
            if scale != 1.0:
                report["loss_scale"] = report.get("loss_scale", 0) + 1
                target = target * scale
        weights = model.trainable_variables
        # an Embedding's IndexedSlices gradient, which Keras scatters at the
        # batch's ids (rows the servers would learn), made dense: every row
        # updated alike (an UnsortedSegmentSum: the owner's one-hot, owner.py)
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in tape.gradient(target, weights)]
        if kind == "adam":  # 1/N joins Adam's own public gradient scale
            optimizers.adam_update(optimizer, grads, weights, 1.0 / scale)
            return value
        if scale != 1.0:
            grads = [g * (1.0 / scale) for g in grads]
        optimizer.apply_gradients(zip(grads, weights))
        return value

    # Traced eagerly (also when asked while the trainer's own step function
    # is traced), so that the captures are the variables' own handles.
    # init_scope stops every gradient tape on the thread; the step's own
    # tape must record, so recording restarts for the trace only.
    with tf.init_scope():
        stopped = pywrap_tfe.TFE_Py_TapeSetIsStopped()
        if stopped:
            pywrap_tfe.TFE_Py_TapeSetRestartOnThread()
        try:
            concrete = tf.function(step, autograph=False).get_concrete_function(x_spec, y_spec)
        finally:
            if stopped:
                pywrap_tfe.TFE_Py_TapeSetStopOnThread()
    graph_def = concrete.graph.as_graph_def()
    if graph_def.library.function:
        names = [f.signature.name for f in graph_def.library.function]
        raise UnsupportedOpError([Problem(
            names[0], "function call", "", "the training step calls functions "
            f"({', '.join(names[:3])}): their bodies cannot be rewritten",
            "use an optimizer without jit_compile and layers without nested tf.functions")])
    captured = {internal.op.name: external for external, internal in concrete.graph.captures}
    trainable = {id(v.handle): v for v in model.trainable_variables}
    shapes = {tuple(v.shape) for v in model.trainable_variables}
    opt_vars = _optimizer_variables(optimizer)
    slot_scale = (optimizers.slot_scales(optimizer, model.trainable_variables)
                  if kind == "adam" else {})
    others = {id(v.handle): v for v in list(model.variables) + opt_vars}
    resources: Dict[str, Resource] = {}
    for ph, handle in captured.items():
        if handle.dtype != tf.resource:
            continue
        if id(handle) in trainable:
            resources[ph] = Resource(ph, trainable[id(handle)], "weight")
        elif id(handle) in others:
            v = others[id(handle)]
            # an optimizer slot (momentum) has its weight's shape and holds
            # gradient information: private; hyperparameters are public
            slot = v.dtype.is_floating and tuple(v.shape) in shapes and bool(v.shape.rank) \
                and any(v is s for s in opt_vars)
            resources[ph] = Resource(ph, v, "slot" if slot else "public",
                                     scale=slot_scale.get(id(v), 1.0))
        else:
            raise ValueError(f"the training step captures a variable that is neither the "
                             f"model's nor the optimizer's ({ph})")
    inputs = [t.op.name for t in concrete.inputs if t.dtype != tf.resource]
    updates = [n.name for n in graph_def.node if n.op in UPDATE_OPS]
    out = concrete.outputs[0].name
    keep = updates + ([src(out)[0]] if return_loss else [])
    pruned = _prune(graph_def, keep)
    layers = _layer_names(model)
    layer_of = {}
    for node in pruned.node:
        path = "/" + node.name + "/"
        layer_of[node.name] = next((ln for ln in layers if f"/{ln}/" in path), "")
    return TracedStep(pruned, inputs, [x_spec, y_spec], [out] if return_loss else [], {},
                      layer_of, None, resources=resources, updates=updates,
                      loss=out if return_loss else None, pass_report=report,
                      shapes={op.name: [o.shape for o in op.outputs]
                              for op in concrete.graph.get_operations()})


def _prune(graph_def, keep: Sequence[str]):
    """The nodes `keep` needs (data and control inputs), in graph order."""
    nodes = {n.name: n for n in graph_def.node}
    need, stack = set(), list(keep)
    while stack:
        name = stack.pop()
        if name in need:
            continue
        need.add(name)
        stack.extend(src(i)[0] for i in nodes[name].input)
    out = tf.compat.v1.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.node.extend(n for n in graph_def.node if n.name in need)
    return out


# --------------------------------------------------------------- analyse
def owner_plan(ts: TracedStep, policy: Policy,
               plain: Sequence[bool] = (True, True)) -> Optional[owner_mod.Plan]:
    """What the data owner computes before sharing (converters/owner.py) in
    one step whose inputs x, y are of these kinds (plain: the owner's
    plaintext, else a PrivateTensor): None when the policy computes nothing
    there. The private variables are private roots; reads and updates of
    variables never run at the owner."""
    if not (policy.owner_side and policy.inputs == "private" and any(plain)):
        return None
    roots = [ph for ph, r in ts.resources.items() if r.is_private]
    return owner_mod.plan(ts, policy, plain, private_roots=roots,
                          stay_private=frozenset(UPDATE_OPS + READ_OPS))


def analyse_step(ts: TracedStep, policy: Policy,
                 plan: Optional[owner_mod.Plan] = None) -> List[Problem]:
    """Every node of the step that would see a private value and cannot be
    converted, and every private value written into a public variable.
    With an owner `plan`, the private nodes are the plan's (what the owner
    computes runs as the TF op it is)."""
    private = set(ts.inputs) if policy.inputs == "private" and plan is None else set()
    private_res = {ph for ph, r in ts.resources.items() if r.is_private}
    problems = []
    for n in topo(ts.graph_def):
        data = [src(i)[0] for i in n.input if not i.startswith("^")]
        layer = ts.layer_of.get(n.name, "")
        if n.op in READ_OPS:
            if data and data[0] in private_res:
                private.add(n.name)
            continue
        if plan is not None and n.name in ts.inputs:
            if n.name in plan.private:
                private.add(n.name)
            continue
        if n.op in UPDATE_OPS:
            res = data[0] if data else ""
            # (an update reading the owner's values is private too)
            if res not in private_res and (any(s in private for s in data[1:]) or (
                    plan is not None and n.name in plan.private)):
                v = ts.resources.get(res)
                problems.append(Problem(
                    n.name, n.op, layer,
                    f"a private value would be written into the public variable "
                    f"'{v.variable.name if v else res}' (e.g. BatchNormalization's moving "
                    "statistics, which the servers cannot keep in the clear)",
                    "train a model whose only updated state is its trainable weights "
                    "(freeze BatchNormalization or fold it before training)"))
            continue
        if plan is not None and n.name in plan.one_hot:
            private.add(n.name)   # the owner's one-hot times the private values
            continue
        # an owner plan's private node may read only owner-side values (shared)
        if not any(s in private for s in data) and not (
                plan is not None and n.name in plan.private and n.op != "Placeholder"):
            continue
        private.add(n.name)
        problem = node_problem(n, layer, training=True)
        if problem is not None:
            problems.append(problem)
    return problems


# -------------------------------------------------------------- evaluate
@dataclasses.dataclass
class _Ref:
    """A resource handle in the replayed graph."""

    placeholder: str


def _consumed(graph_def) -> set:
    used = set()
    for n in graph_def.node:
        for i in n.input:
            if not i.startswith("^"):
                used.add(src(i))
    return used


def evaluate_step(ts: TracedStep, env: Env, inputs: Sequence[Any],
                  problems: Optional[List[Problem]] = None) -> List[Any]:
    """`_evaluate_step` with the comparisons of the policy's family."""
    with env.policy.comparisons():
        return _evaluate_step(ts, env, inputs, problems)


def _evaluate_step(ts: TracedStep, env: Env, inputs: Sequence[Any],
                   problems: Optional[List[Problem]] = None) -> List[Any]:
    """Replays the step on `inputs` (x, y: PrivateTensors or public
    tensors); updates the variables; returns the loss if traced with it.

    With a `problems` list (check_step's dry run, traced and never run),
    private variables read as shared zeros, nothing is assigned, and a node
    whose adapter cannot convert it is appended to `problems` instead of
    raising, its outputs and everything depending on them skipped: so
    every such node is found in one pass."""
    checking = problems is not None
    values: Dict[Tuple[str, int], Any] = {}
    for name, x in zip(ts.inputs, inputs):
        values[(name, 0)] = x
    owner = getattr(env, "owner", None)
    order = topo(ts.graph_def)
    if owner is not None:
        env.branch_tags = _branch_tags(order)
        env.nodes = {n.name: n for n in order}
        owner.start(values)   # the owner's plaintext inputs stay at the owner
    current: Dict[str, Any] = {}
    written: set = set()
    poisoned: set = set()
    env.consumed = _consumed(ts.graph_def) | {src(o) for o in ts.outputs}
    env.relu_bits, env.roots = {}, paired_roots(order)

    def read(ph):
        if ph not in current:
            r = ts.resources[ph]
            if r.is_private and checking:
                current[ph] = registry.get("share").impl(
                    tf.zeros(r.variable.shape, tf.float64), name="check")
            else:
                current[ph] = (r.private.read_value() if r.is_private
                               else r.variable.read_value())
        return current[ph]

    if owner is not None:
        owner.resolve = lambda v: read(v.placeholder) if isinstance(v, _Ref) else v
    for n in order:
        if n.op in _SKIP or (n.name, 0) in values:
            continue
        if owner is not None and owner.handles(n):
            # plain TF on the client, before sharing (converters/owner.py)
            owner.eval(n, node_of(n, ts.layer_of), values, _run_public)
            continue
        if n.name in ts.resources:
            values[(n.name, 0)] = _Ref(n.name)
            continue
        srcs = [src(i) for i in n.input if not i.startswith("^")]
        if any(s[0] in poisoned or s not in values for s in srcs):
            # after an unconvertible node, when checking: zeros where the
            # traced shapes are known, so that later nodes are checked too
            _zeros(ts, n.name, values)
            if (n.name, 0) not in values:
                poisoned.add(n.name)
            continue
        ins = [values[s] for s in srcs]
        try:
            if n.op == "VariableShape":   # public: the variable's static shape
                values[(n.name, 0)] = np.asarray(
                    ts.resources[ins[0].placeholder].variable.shape.as_list(),
                    tf.as_dtype(n.attr["out_type"].type).as_numpy_dtype)
            elif n.op in READ_OPS:
                values[(n.name, 0)] = read(ins[0].placeholder)
            elif n.op in UPDATE_OPS:
                _update(n, ins, read, current, written, env)
            elif checking and _refuses_nothing(n, ins, ts):
                # traced, never run: only its result's privacy, dtype and
                # shape matter to the nodes after it
                _zeros(ts, n.name, values, dtype=_private_dtype(ins))
            else:  # a ReLU keeps its private bit for ReluGrad (env.relu_bits)
                eval_node(n, ts, env, values)
        except (Unsupported, UnsupportedOpError) as e:
            if not checking:
                raise
            if isinstance(e, Unsupported):
                problems.append(Problem(n.name, n.op, ts.layer_of.get(n.name, ""),
                                        e.why, e.fix))
            # go on with private zeros of the node's traced shapes, so that
            # the nodes after it are checked too
            _zeros(ts, n.name, values)
    if checking:
        return []
    for ph in written:
        r = ts.resources[ph]
        if r.is_private:
            new = current[ph]
            if not isinstance(new, PrivateTensor):  # a public value (e.g. zeros)
                new = registry.get("share").impl(tf.cast(new, tf.float64), name=ph)
            r.private.assign(new, read_value=False)
        else:
            r.variable.assign(current[ph], read_value=False)
    return [values[src(o)] for o in ts.outputs]


def _zeros(ts: TracedStep, name: str, values: Dict, dtype: tf.DType = tf.float64) -> None:
    """Shared zeros for the outputs of `name` whose traced shapes are known
    (check_step's dry run goes on past an unconvertible node with them)."""
    share = registry.get("share").impl
    for i, sh in enumerate(ts.shapes.get(name, [])):
        if sh.is_fully_defined():
            values[(name, i)] = share(tf.zeros(sh, dtype), name="check")


def _private_dtype(ins) -> tf.DType:
    return next(v.dtype for v in ins if isinstance(v, PrivateTensor))


def _refuses_nothing(n, ins, ts: TracedStep) -> bool:
    """Whether check_step's dry run may skip the node's protocol: its
    adapter refuses nothing (a moded function of floats, adapters.binary),
    it sees a private float and its one output's traced shape is known.
    A setting of the config these functions cannot meet (a fast-mode
    domain too wide for its error, an unknown method) is a ValueError of
    the function itself: it is raised when the first step is traced, still
    before anything runs, instead of here."""
    fn = lookup(n.op)
    shapes = ts.shapes.get(n.name, [])
    private = [v for v in ins if isinstance(v, PrivateTensor)]
    return (getattr(fn, "refuses_nothing", False) and len(shapes) == 1
            and shapes[0].is_fully_defined() and bool(private)
            and all(v.dtype.is_floating for v in private))


def check_step(ts: TracedStep, policy: Policy) -> List[Problem]:
    """Every problem of the step, before anything is shared or run:
    analyse_step's, then a dry run (the private step traced once, never
    run, on shared zeros) for the adapters' own refusals (dilated
    convolution gradients, overlapping max-pooling gradients, ...).

    The dry run does not trace the protocols of the moded functions (exp,
    log, divide, reciprocal, sigmoid, tanh on private floats): their
    adapters refuse nothing, and what later nodes' refusals depend on (a
    private float of the traced shape) is shared zeros of that shape. Their
    protocols were most of the dry run (network A on a loaded machine: 6.4
    CPU-s, now 2.3; see _refuses_nothing). The problems are a full dry
    run's (tested)."""
    plan = owner_plan(ts, policy)
    problems = analyse_step(ts, policy, plan)
    found: List[Problem] = []

    def run(x, y):
        env = Env(policy)
        if plan is not None:   # plain x, y: the owner computes its part first
            env.owner = owner_mod.Frontier(plan, ts, env)
            xs = [x, y]
        else:
            share = registry.get("share").impl
            xs = [v if policy.inputs == "public" else share(v, name="check") for v in (x, y)]
        evaluate_step(ts, env, xs, problems=found)

    with cost.paused():
        tf.function(run, autograph=False).get_concrete_function(*ts.input_specs)
    seen = {p.node for p in problems}
    return problems + [p for p in found if p.node not in seen]


def _update(n, ins, read, current, written, env) -> None:
    op = lambda name: registry.get(name).impl  # noqa: E731
    ph = ins[0].placeholder
    v = env.operand
    if n.op == "AssignVariableOp":
        new = v(ins[1])
    elif n.op == "AssignAddVariableOp":
        new = _add(op, read(ph), v(ins[1]))
    elif n.op == "AssignSubVariableOp":
        new = op("subtract")(read(ph), v(ins[1]))
    elif n.op == "ResourceApplyGradientDescent":  # var -= alpha·delta
        new = op("subtract")(read(ph), op("multiply")(v(ins[2]), v(ins[1])))
    elif n.op == "ResourceApplyKerasMomentum":
        # accum = accum·momentum − lr·grad; var += accum (Nesterov: var +=
        # accum·momentum − lr·grad)
        acc_ph, lr, grad, mom = ins[1].placeholder, v(ins[2]), v(ins[3]), v(ins[4])
        step = op("multiply")(grad, lr)
        acc = op("subtract")(op("multiply")(read(acc_ph), mom), step)
        current[acc_ph] = acc
        written.add(acc_ph)
        delta = (op("subtract")(op("multiply")(acc, mom), step)
                 if _nesterov(n) else acc)
        new = op("add")(read(ph), delta)
    elif n.op == "ResourceApplyMomentum":
        # accum = accum·momentum + grad; var −= lr·accum (Nesterov: var −=
        # lr·grad + lr·momentum·accum)
        acc_ph, lr, grad, mom = ins[1].placeholder, v(ins[2]), v(ins[3]), v(ins[4])
        acc = op("add")(op("multiply")(read(acc_ph), mom), grad)
        current[acc_ph] = acc
        written.add(acc_ph)
        delta = (op("add")(op("multiply")(grad, lr), op("multiply")(op("multiply")(acc, mom), lr))
                 if _nesterov(n) else op("multiply")(acc, lr))
        new = op("subtract")(read(ph), delta)
    else:  # analyse_step reported it
        raise UnsupportedOpError([Problem(n.name, n.op, "", "unsupported update", "")])
    current[ph] = new
    written.add(ph)


def _nesterov(n) -> bool:
    a = n.attr.get("use_nesterov")
    return bool(a.b) if a is not None else False


def _add(op, a, b):
    if isinstance(a, PrivateTensor) or isinstance(b, PrivateTensor):
        return op("add")(a, b)
    return tf.add(a, tf.cast(b, tf.as_dtype(a.dtype)))
