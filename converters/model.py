"""The converted model: `predict` as one traced tf.function, the rewritten
graph, and the cost bill computed before anything runs (DESIGN §8)."""
from __future__ import annotations

import collections
import copy
import dataclasses
import re
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.mpc.runtime import calling, context, cost
from tf_privpy.protocols.mpc.api import registry
from tf_privpy.protocols.mpc.api.value import PrivateTensor

from . import loops, masks
from . import owner as owner_mod
from . import passes as passes_mod
from . import rewrite
from .rewrite import Env, Policy, UnsupportedOpError
from .trace import Traced, private_nodes, reads_private, trace


class PrivateModel:
    """A model converted to private inference on the four servers.

    Example:
      >>> private = tp.keras.convert(model)          # weights shared once, here
      >>> logits = private.predict(x_test[:10])      # a PrivateTensor
      >>> labels = private.predict(x_test[:10], reveal=True).numpy().argmax(-1)
      >>> print(private.summary())                    # layers, ops and the cost bill
    """

    def __init__(self, traced: Traced, policy: Policy, name: str = "model",
                 passes: Sequence[str] = (), pass_report: Optional[Dict[str, int]] = None):
        self.name = name
        self.policy = policy
        #: the optimizer passes enabled (converters/passes.py) and, for the
        #: GraphDef passes, how many places each changed
        self.passes = tuple(passes)
        self.pass_report = dict(pass_report or {})
        self._traced = traced
        self._env = Env(policy, batch="batch_same_depth" in self.passes)
        self._fn = tf.function(self._run, autograph=False, reduce_retracing=False)
        #: the bill of each trace of predict, by _bill_key: cost() after a
        #: predict of that batch reads it instead of tracing the model again
        #: (recording only collects declarations: the graph is the same)
        self._traced_bills: Dict[tuple, cost.Cost] = {}

    # ------------------------------------------------------------ running
    def _run(self, *inputs):
        # one counter update per link for the whole graph (channel.py)
        with context.get_handle().runtime.channels.counted_at_end(), cost.record() as bill:
            out = self._evaluate(self._env, inputs)
        self._traced_bills[self._bill_key(
            [(isinstance(x, PrivateTensor), tuple(x.shape)) for x in inputs])] = bill
        return out

    @staticmethod
    def _bill_key(inputs) -> tuple:
        """What a trace's bill depends on besides the model: the runtime, the
        comparison family in force (tp.comparison applies when a function is
        traced) and each input's kind and shape."""
        handle = context.get_handle()
        family = getattr(handle.backend, "comparison_family", None)
        return id(handle.runtime), family, tuple(inputs)

    def _evaluate(self, env: Env, inputs):
        policy = env.policy
        env.owner = None
        if policy.owner_side and policy.inputs == "private":
            # the data owner computes what depends on its input alone
            # before sharing (converters/owner.py); a PrivateTensor input is
            # private as it is
            plain = [not isinstance(x, PrivateTensor) for x in inputs]
            p = owner_mod.plan(self._traced, policy, plain)
            if not all(plain):
                # more runs on shares than convert() checked: refuse before
                # anything is built, as convert() would have
                problems = rewrite.analyse(self._traced, policy, p.private, owner=True)
                if problems:
                    raise UnsupportedOpError(problems)
            env.owner = owner_mod.Frontier(p, self._traced, env)
            xs = list(inputs)
        else:
            xs = []
            for x, spec in zip(inputs, self._traced.input_specs):
                if isinstance(x, PrivateTensor) or policy.inputs == "public":
                    xs.append(x)
                elif x.dtype == tf.bool:   # a mask: shared as integer bits
                    xs.append(registry.get("share").impl(x, name=spec.name or "input",
                                                         bits=True))
                else:
                    xs.append(registry.get("share").impl(x, name=spec.name or "input"))
        try:
            outs = rewrite.evaluate(self._traced, env, xs)
        finally:
            env.owner = None
        return outs[0] if len(outs) == 1 else outs

    def _inputs(self, x) -> List[Any]:
        xs = list(x) if isinstance(x, (list, tuple)) and len(self._traced.inputs) > 1 else [x]
        if len(xs) != len(self._traced.inputs):
            raise ValueError(f"{self.name} takes {len(self._traced.inputs)} inputs, "
                             f"got {len(xs)}")
        out = []
        for v, spec in zip(xs, self._traced.input_specs):
            if not isinstance(v, PrivateTensor):
                v = tf.convert_to_tensor(v, spec.dtype)
            if not spec.shape.is_compatible_with(v.shape):
                raise ValueError(f"input '{spec.name}' must have shape {spec.shape}, "
                                 f"got {v.shape}")
            out.append(v)
        return out

    def predict(self, x, reveal: bool = False):
        """Private inference on x, as one traced tf.function.

        Args:
          x: plain data (shared on the client device inside the function, or
            used as public data under Policy(inputs="public")), or a
            PrivateTensor already shared; a list for several inputs.
          reveal: return the plaintext result to the client (tp.reveal)
            instead of a PrivateTensor.
        """
        try:
            with calling.private_call():   # no Grappler (runtime/calling.py)
                out = self._fn(*self._inputs(x))
        except tf.errors.InvalidArgumentError as e:
            # the owner's index check (converters/owner.py), as TF's own
            # gather would refuse: a ValueError saying which node
            found = re.search(re.escape(owner_mod.BAD_INDEX) + r" ([^\]]*)", e.message)
            if found is None:
                raise
            why = found.group(1).replace("\\'", "'")
            raise ValueError(f"{why} (Policy(owner_side=True): as tf.gather on CPU, an "
                             f"out-of-range id is refused)") from None
        if reveal:
            return tf.nest.map_structure(
                lambda o: o.reveal() if isinstance(o, PrivateTensor) else o, out)
        return out

    __call__ = predict

    # ---------------------------------------------------------- inspecting
    def _specs(self, batch_size: Optional[int]) -> List[tf.TypeSpec]:
        specs = []
        for spec in self._traced.input_specs:
            shape = spec.shape
            if shape.rank and shape[0] is None:
                shape = tf.TensorShape([batch_size or 1] + shape.as_list()[1:])
            specs.append(tf.TensorSpec(shape, spec.dtype, name=spec.name))
        return specs

    def cost(self, batch_size: int = 1) -> cost.Cost:
        """The bill of one predict on a batch, from the protocols' declarations,
        computed by tracing (nothing runs): rounds, multiplications,
        comparisons, and messages and bytes per server pair. Sharing the
        input (or what the data owner computed from it, Policy.owner_side)
        is included; sharing the weights happened once at conversion."""
        key = self._bill_key([(False, tuple(s.shape)) for s in self._specs(batch_size)])
        if key in self._traced_bills:     # predict traced this batch: its bill
            return copy.deepcopy(self._traced_bills[key])
        return self._bill(batch_size, self._env)

    def _bill(self, batch_size: int, env: Env) -> cost.Cost:
        fn = tf.function(lambda *xs: self._evaluate(env, xs), autograph=False)
        with cost.record() as bill:
            fn.get_concrete_function(*self._specs(batch_size))
        return bill

    def owner_saving(self, batch_size: int = 1) -> Dict[str, int]:
        """What computing at the data owner (Policy.owner_side) saves on one
        predict of plain inputs: the bill with Policy(owner_side=False)
        minus this model's, both costed by tracing (rounds,
        multiplications, comparisons, messages, bytes). All zero when the
        policy does not compute at the owner.

        Example:
          >>> saved = tp.keras.convert(embedding_model).owner_saving(32)
          >>> saved["comparisons"], saved["bytes"]    # the oblivious lookup's, avoided
        """
        keys = ("rounds", "multiplications", "comparisons", "messages", "bytes")
        if not (self.policy.owner_side and self.policy.inputs == "private"):
            return dict.fromkeys(keys, 0)
        off = Env(dataclasses.replace(self.policy, owner_side=False), batch=self._env.batch)
        off._shared = self._env._shared   # the same weight shares: shared once
        before, after = self._bill(batch_size, off), self.cost(batch_size)
        return {k: getattr(before, k) - getattr(after, k) for k in keys}

    def concrete(self, batch_size: int = 1):
        """predict's ConcreteFunction at a batch size (plain inputs), traced
        now if it was not yet: the graph build, without running anything;
        a later predict on that shape reuses it."""
        return self._fn.get_concrete_function(*self._specs(batch_size))

    def graph(self, batch_size: int = 1) -> tf.compat.v1.GraphDef:
        """The rewritten graph (GraphDef) of predict, every op placed on its
        party's device: TensorBoard's Graphs tab colours it by device."""
        return self.concrete(batch_size).graph.as_graph_def()

    def summary(self, batch_size: int = 1) -> str:
        """Layers and TF ops converted, and the cost bill of one predict."""
        owner_on = self.policy.owner_side and self.policy.inputs == "private"
        split = owner_mod.plan(self._traced, self.policy, [True] * len(self._traced.inputs)) \
            if owner_on else None
        private = split.private if split else private_nodes(self._traced, self.policy)
        ops, public, at_owner = (collections.Counter() for _ in range(3))
        for n in self._traced.graph_def.node:
            if n.op in ("Const", "NoOp", "Placeholder", "Identity"):
                continue
            if split and n.name in split.owner_of:
                at_owner[n.op] += 1
            elif n.name in private:
                ops[n.op] += 1
            elif not reads_private(n, private):
                public[n.op] += 1
        layers = sorted({v for v in self._traced.layer_of.values() if v})
        bill = self.cost(batch_size)
        lines = [f"private model '{self.name}': inputs {self.policy.inputs}, weights "
                 f"{self.policy.weights}",
                 f"  layers: {', '.join(layers) or '-'}",
                 "  TF ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())),
                 "  public, run as plain TF: " + (", ".join(
                     f"{k} x{v}" for k, v in sorted(public.items())) or "-"),
                 f"  cost of one predict (batch {batch_size}): {bill.rounds} rounds, "
                 f"{bill.multiplications} multiplications, {bill.comparisons} comparisons, "
                 f"{bill.messages} messages, {bill.bytes / 1e3:.1f} KB"]
        if split:
            done = [f"{k} x{v}" for k, v in sorted(at_owner.items())]
            if split.one_hot:
                done.append(f"one-hot for GatherV2 x{len(split.one_hot)}")
            saved = self.owner_saving(batch_size)
            lines.insert(4, "  owner-side (run by the data owner before sharing): "
                         + (", ".join(done) or "-")
                         + f"; saves {saved['bytes']} bytes, {saved['comparisons']} comparisons, "
                         f"{saved['multiplications']} multiplications, {saved['rounds']} rounds "
                         f"per predict (vs Policy(owner_side=False))")
        else:
            lines.insert(4, "  owner-side: off (Policy(owner_side=False) or public inputs)")
        changed = [f"{k} x{v}" for k, v in self.pass_report.items()]
        changed += [f"batch_same_depth x{calls} ({nodes} {kind} nodes)"
                    for kind, (calls, nodes) in sorted(self._env.batched.items())]
        lines.insert(5, "  passes: " + (", ".join(changed) or
                                        ("none changed the graph" if self.passes else "off")))
        for (s, d), (m, b) in sorted(bill.links.items()):
            lines.append(f"    {s:>6} -> {d:<6} {m:6d} messages {b / 1e3:12.1f} KB")
        return "\n".join(lines)


def convert(model_or_fn, input_signature: Optional[Sequence[tf.TensorSpec]] = None,
            policy: Optional[Policy] = None, name: Optional[str] = None,
            passes=None) -> PrivateModel:
    """Traces, freezes and rewrites a Keras model or a tf.function into a
    PrivateModel. Every unsupported node is reported in one
    UnsupportedOpError before anything runs or is shared.

    `passes` selects the optimizer passes (converters/passes.py, DESIGN §8):
    None (default: all), False (none), a list of names, or a dict
    {name: False} turning some off."""
    policy = policy or Policy()
    enabled = passes_mod.resolve(passes)
    refused = loops.layer_problems(model_or_fn, rewrite.Problem)
    if refused:
        raise UnsupportedOpError(refused)
    traced = trace(model_or_fn, input_signature)
    masks.bring_into_range(traced, context.get_handle().config.bound)
    traced, report = passes_mod.run(traced, policy, enabled)
    # what runs on shares for plain inputs (owner-side nodes run as plain TF
    # at the owner); a call with a PrivateTensor input checks its own split
    private = None
    if policy.owner_side and policy.inputs == "private":
        private = owner_mod.plan(traced, policy, [True] * len(traced.inputs)).private
    problems = rewrite.analyse(traced, policy, private, owner=private is not None)
    if problems:
        raise UnsupportedOpError(problems)
    name = name or getattr(model_or_fn, "name", None) or getattr(
        model_or_fn, "__name__", "function")
    return PrivateModel(traced, policy, name, enabled, report)


def supported_ops() -> List[str]:
    """TF op types the converter rewrites when they see a private value (the
    op table's, protocols/mpc/api/registry.py)."""
    return registry.tf_op_types()
