"""PrivateTrainer (DESIGN §8 "Training"): the user-facing object of
tp.keras.convert_training, around the traced and rewritten SGD step of
training.py: weights and optimizer slots in tp.Variables, one traced
tf.function per batch shape, cost, graph and a predictor of the trained
model."""
from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.mpc.runtime import calling, context, cost
from tf_privpy.protocols.mpc.api import registry
from tf_privpy.protocols.mpc.api.adapters import Weight
from tf_privpy.protocols.mpc.api.value import PrivateTensor
from tf_privpy.protocols.mpc.api.variable import PrivateVariable

from . import owner as owner_mod
from .model import PrivateModel
from .rewrite import Env, Policy, UnsupportedOpError
from .trace import trace
from .optimizers import check_numerics, check_optimizer
from .training import (PASSES, TracedStep, _resolve_loss, analyse_step, check_step,
                       evaluate_step, owner_plan, trace_step)


# --------------------------------------------------------------- trainer
def _var_name(v: tf.Variable) -> str:
    return v.name.split(":")[0]


class _VariableEnv(Env):
    """An Env whose weights are the trainer's tp.Variables, read anew in
    every traced predict (so the predictor sees the latest step)."""

    def __init__(self, policy: Policy, by_const: Dict[str, PrivateVariable], batch: bool):
        super().__init__(policy, batch=batch)
        self._by_const = by_const

    def operand(self, v):
        if isinstance(v, Weight):
            if v.name not in self._by_const:
                raise ValueError(f"weight '{v.name}' is not one of the trainer's variables")
            return self._by_const[v.name].read_value()
        return v


class PrivateTrainer:
    """Private SGD, Adam or AMSGrad training of a Keras model: one converted training step,
    weights (and optimizer slots) kept in tp.Variables on S1 and S2.

    Built by `tp.keras.convert_training(model, loss, optimizer)`. Each call
    of `step(x, y)` runs one traced tf.function: the client shares the
    batch, the servers run forward, loss gradient, backward pass and the
    SGD update on shares, and each server assigns its own shares of the new
    weights. Nothing is revealed until `weights(reveal=True)`.

    Example:
      >>> model = tp.models.logistic_regression(784)
      >>> trainer = tp.keras.convert_training(
      ...     model, tf.keras.losses.BinaryCrossentropy(), tf.keras.optimizers.SGD(0.1))
      >>> for xb, yb in batches:                      # plain batches, shared per step
      ...     trainer.step(xb, yb)
      >>> w, b = trainer.weights(reveal=True)         # plaintext, at the end
      >>> trainer.predictor().predict(x_test, reveal=True)
      >>> print(trainer.cost(128))                    # the bill of one step
      >>> tp.save_variables(trainer.variables, "/tmp/ckpt")
    """

    def __init__(self, model: tf.keras.Model, loss, optimizer,
                 policy: Optional[Policy] = None, name: Optional[str] = None,
                 passes: Optional[Sequence[str]] = None):
        self.policy = policy or Policy()
        if self.policy.weights != "private":
            raise ValueError("convert_training keeps the weights private: the updates depend "
                             "on the (private) data; use Policy(weights='private')")
        self.name = name or model.name
        self.model = model
        self.loss = _resolve_loss(loss)
        self.optimizer = optimizer
        check_optimizer(optimizer)   # refused before anything is traced or shared
        check_numerics(optimizer, self.policy)
        self.passes = PASSES if passes is None else tuple(passes)
        unknown = set(self.passes) - set(PASSES)
        if unknown:
            raise ValueError(f"unknown pass(es) {sorted(unknown)}; passes are {list(PASSES)}")
        self._traces: Dict[Tuple, TracedStep] = {}
        self._env = Env(self.policy)
        self._private: Dict[int, PrivateVariable] = {}   # id(tf variable) -> tp.Variable
        self._fn = tf.function(self._run, autograph=False, reduce_retracing=False)
        # trace once at the model's own shapes (batch 1), with a dry run of
        # the private step, so that every unsupported node is reported now,
        # before anything is shared
        self._check = True
        self._traced(self._specs(1), False)
        self._check = False

    # ------------------------------------------------------------ tracing
    def _specs(self, batch_size: int, y_dtype=None, y_shape=None) -> List[tf.TensorSpec]:
        x = self.model.inputs[0]
        xs = tf.TensorSpec([batch_size] + x.shape.as_list()[1:], x.dtype, name="x")
        if y_shape is None:
            out = self.model.outputs[0].shape.as_list()[1:]
            sparse = isinstance(self.loss, tf.keras.losses.SparseCategoricalCrossentropy)
            y_shape = [batch_size] + ([] if sparse else out)
            y_dtype = y_dtype or (tf.int32 if sparse else self.model.outputs[0].dtype)
        return [xs, tf.TensorSpec(y_shape, y_dtype or tf.float32, name="y")]

    def _traced(self, specs, return_loss: bool) -> TracedStep:
        key = (tuple(specs[0].shape), tuple(specs[1].shape), specs[1].dtype, return_loss)
        if key not in self._traces:
            ts = trace_step(self.model, self.loss, self.optimizer, specs[0], specs[1],
                            return_loss, self.passes)
            problems = check_step(ts, self.policy) if self._check else \
                analyse_step(ts, self.policy, owner_plan(ts, self.policy))
            if problems:
                raise UnsupportedOpError(problems)
            self._bind(ts)
            self._traces[key] = ts
        return self._traces[key]

    def _bind(self, ts: TracedStep) -> None:
        """Shares each weight and optimizer slot once (eagerly, by the model
        owner), the same tp.Variable for every traced shape."""
        for r in ts.resources.values():
            if not r.is_private:
                continue
            key = id(r.variable)
            if key not in self._private:
                with tf.init_scope(), cost.paused():
                    self._private[key] = PrivateVariable(
                        r.variable.numpy().astype(np.float64) * r.scale,
                        name=_var_name(r.variable),
                        dtype=tf.float64)
            r.private = self._private[key]

    # ------------------------------------------------------------ running
    def _share(self, v, name):
        if isinstance(v, (PrivateTensor, PrivateVariable)) or self.policy.inputs == "public":
            return v.read_value() if isinstance(v, PrivateVariable) else v
        return registry.get("share").impl(v, name=name)

    def _run(self, x, y, return_loss=False):
        return self._step_graph(self._env, x, y, return_loss)

    def _step_graph(self, env: Env, x, y, return_loss: bool):
        """The private step on (x, y) under env's policy: plain inputs go
        through the data owner first (Policy.owner_side: what depends on
        the owner's x or y alone is computed there, in plain TF, and only
        what a private node reads is shared; converters/owner.py)."""
        ts = self._traced(self._specs(x.shape[0], y.dtype, y.shape.as_list()), return_loss)
        plain = [not isinstance(v, (PrivateTensor, PrivateVariable)) for v in (x, y)]
        plan = owner_plan(ts, env.policy, plain)
        if plan is not None and not all(plain):
            # a PrivateTensor input puts more on shares than the conversion
            # checked: refuse before anything is built, as it would have
            problems = analyse_step(ts, env.policy, plan)
            if problems:
                raise UnsupportedOpError(problems)
        if plan is not None:
            env.owner = owner_mod.Frontier(plan, ts, env)
            xs = [v.read_value() if isinstance(v, PrivateVariable) else v for v in (x, y)]
        else:
            xs = [self._share(x, "x"), self._share(y, "y")]
        try:
            # one counter update per link for the whole step (channel.py)
            with context.get_handle().runtime.channels.counted_at_end():
                outs = evaluate_step(ts, env, xs)
        finally:
            env.owner = None
        return outs[0] if outs else None

    def _inputs(self, x, y):
        def conv(v, dtype):
            if isinstance(v, (PrivateTensor, PrivateVariable)):
                return v
            return tf.convert_to_tensor(v, dtype)
        x = conv(x, self.model.inputs[0].dtype)
        sparse = isinstance(self.loss, tf.keras.losses.SparseCategoricalCrossentropy)
        y = conv(y, tf.int32 if sparse else self.model.outputs[0].dtype)
        if x.shape.rank is None or x.shape[0] is None or x.shape[0] != y.shape[0]:
            raise ValueError(f"x and y need one static batch size, got {x.shape} and {y.shape}")
        return x, y

    def step(self, x, y, return_loss: bool = False):
        """One private SGD step on the batch (x, y), as one traced tf.function.

        Args:
          x, y: plain data (shared by the client inside the step) or
            PrivateTensors already shared; y in the loss' label format
            (one-hot or [0, 1] targets; integer labels for
            SparseCategoricalCrossentropy). Each new batch shape traces the
            step once more.
          return_loss: also compute the loss (a PrivateTensor): costs the
            private logarithms the gradient form avoids.
        """
        x, y = self._inputs(x, y)
        with calling.private_call():   # no Grappler, as predict (runtime/calling.py)
            out = self._fn(x, y, bool(return_loss))
        return out if return_loss else None

    __call__ = step

    # ---------------------------------------------------------- inspecting
    @property
    def variables(self) -> List[PrivateVariable]:
        """The private weights (model.trainable_variables' order), then the
        optimizer's private slots (momentum; Adam's moments, which hold S·m̂
        and S²·v̂, converters/optimizers.py): what tp.save_variables saves."""
        weights = [self._private[id(v)] for v in self.model.trainable_variables]
        slots = [p for k, p in self._private.items() if p not in weights]
        return weights + slots

    @property
    def trainable_variables(self) -> List[PrivateVariable]:
        """The private weights, in model.trainable_variables' order."""
        return [self._private[id(v)] for v in self.model.trainable_variables]

    def weights(self, reveal: bool = True):
        """The current weights in model.trainable_variables' order: plaintext
        numpy arrays (revealed to the client, e.g. to the model owner at the
        end of training) or, with reveal=False, PrivateTensors."""
        vals = [v.read_value() for v in self.trainable_variables]
        return [v.reveal().numpy() for v in vals] if reveal else vals

    def assign_to(self, model: Optional[tf.keras.Model] = None) -> tf.keras.Model:
        """Reveals the weights into a Keras model (default: the trained one)."""
        model = model or self.model
        for v, w in zip(model.trainable_variables, self.weights(reveal=True)):
            v.assign(w.astype(v.dtype.as_numpy_dtype))
        return model

    def cost(self, batch_size: int = 1) -> cost.Cost:
        """The bill of one step on a batch, from the protocols' declarations,
        computed by tracing (nothing runs): rounds, multiplications,
        comparisons, messages and bytes per server pair, sharing the batch
        included (sharing the weights happened once, at conversion)."""
        specs = self._specs(batch_size)
        fn = tf.function(self._run, autograph=False)
        with cost.record() as bill:
            fn.get_concrete_function(*specs)
        return bill

    def owner_saving(self, batch_size: int = 1) -> Dict[str, int]:
        """What computing at the data owner (Policy.owner_side) saves on one
        step of plain inputs: the bill with Policy(owner_side=False) minus
        this trainer's, both costed by tracing (rounds, multiplications,
        comparisons, messages, bytes). All zero when the policy does not
        compute at the owner.

        Raises UnsupportedOpError when the step converts only with the
        owner's part (an Embedding: its lookup and gradient by the owner's
        one-hot), naming what the shares alone could not compute.

        Example:
          >>> saved = trainer.owner_saving(128)     # a model that rescales its input
          >>> saved["multiplications"], saved["bytes"]
        """
        keys = ("rounds", "multiplications", "comparisons", "messages", "bytes")
        if not (self.policy.owner_side and self.policy.inputs == "private"):
            return dict.fromkeys(keys, 0)
        off = Env(dataclasses.replace(self.policy, owner_side=False))
        problems = analyse_step(self.traced_step(batch_size), off.policy)
        if problems:
            raise UnsupportedOpError(problems)
        fn = tf.function(lambda x, y: self._step_graph(off, x, y, False), autograph=False)
        with cost.record() as before:
            fn.get_concrete_function(*self._specs(batch_size))
        after = self.cost(batch_size)
        return {k: getattr(before, k) - getattr(after, k) for k in keys}

    def graph(self, batch_size: int = 1) -> tf.compat.v1.GraphDef:
        """The rewritten training step (GraphDef), every op on its party."""
        return self.concrete(batch_size).graph.as_graph_def()

    def concrete(self, batch_size: int = 1):
        """The converted step's ConcreteFunction (x, y plain) at a batch size."""
        return self._fn.get_concrete_function(*self._specs(batch_size), False)

    def traced_step(self, batch_size: int = 1) -> TracedStep:
        """The traced (plaintext) training step the trainer converts."""
        return self._traced(self._specs(batch_size), False)

    def summary(self, batch_size: int = 1) -> str:
        ts = self.traced_step(batch_size)
        ops = collections.Counter(n.op for n in ts.graph_def.node
                                  if n.op not in ("Const", "NoOp", "Placeholder", "Identity"))
        bill = self.cost(batch_size)
        plan = owner_plan(ts, self.policy)
        if plan is not None:
            at_owner = collections.Counter(n.op for n in ts.graph_def.node
                                           if n.name in plan.owner_of
                                           and n.op not in ("Placeholder", "Identity"))
            if plan.one_hot:
                at_owner.update(f"one-hot for {self._node_op(ts, k)}" for k in plan.one_hot)
            try:
                saved = self.owner_saving(batch_size)
                gain = (f"saves {saved['bytes']} bytes, {saved['comparisons']} comparisons, "
                        f"{saved['multiplications']} multiplications, {saved['rounds']} rounds "
                        f"per step (vs Policy(owner_side=False))")
            except UnsupportedOpError as e:
                gain = (f"needed: Policy(owner_side=False) cannot convert {len(e.problems)} "
                        f"node(s) of this step ({e.problems[0].op} first)")
            owner = ("  owner-side (run by the data owner before sharing): "
                     + (", ".join(f"{k} x{v}" for k, v in sorted(at_owner.items())) or "-")
                     + "; " + gain)
        else:
            owner = "  owner-side: off (Policy(owner_side=False) or public inputs)"
        return "\n".join([
            f"private trainer '{self.name}': {len(self.trainable_variables)} private weights, "
            f"optimizer {type(self.optimizer).__name__}",
            "  passes: " + (", ".join(f"{k} x{v}" for k, v in ts.pass_report.items()) or "-"),
            "  TF ops of the step: " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())),
            owner,
            f"  cost of one step (batch {batch_size}): {bill.rounds} rounds, "
            f"{bill.multiplications} multiplications, {bill.comparisons} comparisons, "
            f"{bill.messages} messages, {bill.bytes / 1e3:.1f} KB"])

    @staticmethod
    def _node_op(ts: TracedStep, name: str) -> str:
        return next(n.op for n in ts.graph_def.node if n.name == name)

    def predictor(self, name: Optional[str] = None):
        """A PrivateModel (predict, cost, graph, summary) of the trained model
        whose weights are the trainer's tp.Variables, read at every predict:
        it follows later steps, and nothing is revealed or re-shared."""
        traced = trace(self.model)
        by_handle = {id(v.handle): v for v in self.model.variables}
        by_const = {}
        for const, handle in traced.handles.items():
            v = by_handle.get(id(handle))
            if v is None or id(v) not in self._private:
                raise ValueError(f"the model's variable '{const}' is not trained privately "
                                 "(non-trainable state cannot be used by the predictor)")
            by_const[const] = self._private[id(v)]
        pm = PrivateModel(traced, self.policy, name or f"{self.name}_private",
                          ("batch_same_depth",), {})
        pm._env = _VariableEnv(self.policy, by_const, batch=True)
        return pm


def convert_training(model: tf.keras.Model, loss, optimizer, policy: Optional[Policy] = None,
                     name: Optional[str] = None,
                     passes: Optional[Sequence[str]] = None) -> PrivateTrainer:
    """A PrivateTrainer for `model` (see tp.keras.convert_training)."""
    if not isinstance(model, tf.keras.Model):
        raise TypeError(f"convert_training takes a tf.keras.Model, got {type(model).__name__}")
    return PrivateTrainer(model, loss, optimizer, policy, name, passes)
