"""Tracing and freezing (DESIGN §8): a Keras model or tf.function becomes a
ConcreteFunction, then a GraphDef whose variables are constants.

The weights are told apart from the graph's other constants by where they
came from: a frozen variable is a constant that replaced one of the
function's captured resource handles. Nothing here is private yet: this is
the model owner's plaintext view of the model, before any rewriting.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2)


@dataclasses.dataclass
class Traced:
    """A frozen graph and what the converter needs to know about it."""

    graph_def: tf.compat.v1.GraphDef
    inputs: List[str]                   # placeholder node names, in call order
    input_specs: List[tf.TensorSpec]
    outputs: List[str]                  # "node:index" tensor names, in order
    weights: Dict[str, np.ndarray]      # const node name -> value, for frozen variables
    layer_of: Dict[str, str]            # node name -> Keras layer name ("" if none)
    output_structure: object = None     # nest structure of the function's outputs
    #: weight const name -> the captured resource handle it froze (the
    #: training half maps it back to the variable, converters/training.py)
    handles: Dict[str, object] = dataclasses.field(default_factory=dict)


def _keras_specs(model) -> List[tf.TensorSpec]:
    specs = []
    for t in tf.nest.flatten(model.inputs or []):
        specs.append(tf.TensorSpec(t.shape, t.dtype, name=t.name.split(":")[0]))
    if not specs:
        raise ValueError(
            "the Keras model has no known input shape: build it first (give the first "
            "layer an input_shape, use tf.keras.Input, or call the model on data once)")
    return specs


def _layer_names(model) -> List[str]:
    names = []
    for layer in getattr(model, "layers", []):
        names.append(layer.name)
        names.extend(_layer_names(layer))  # nested models
    return sorted(set(names), key=len, reverse=True)


def trace(model_or_fn, input_signature: Optional[Sequence[tf.TensorSpec]] = None) -> Traced:
    """Traces a Keras model (inference: training=False) or a function with an
    input signature, and freezes its variables into constants."""
    layers: List[str] = []
    if isinstance(model_or_fn, tf.keras.Model):
        model = model_or_fn
        specs = list(input_signature) if input_signature else _keras_specs(model)
        layers = _layer_names(model)

        def call(*xs):
            return model(xs[0] if len(xs) == 1 else list(xs), training=False)

        fn = tf.function(call, autograph=False)
    else:
        if input_signature is None:
            sig = getattr(model_or_fn, "input_signature", None)
            if sig is None:
                raise ValueError("tp.convert needs an input_signature (a list of "
                                 "tf.TensorSpec) for a function without one")
            input_signature = sig
        specs = list(input_signature)
        fn = model_or_fn if isinstance(model_or_fn, tf.types.experimental.GenericFunction) \
            else tf.function(model_or_fn, autograph=False)
    concrete = fn.get_concrete_function(*specs)
    resource_inputs = {t.op.name for t in concrete.graph.inputs if t.dtype == tf.resource}
    frozen = convert_variables_to_constants_v2(concrete)
    if any(n.op == "LoopCond" for n in frozen.graph.as_graph_def().node):
        # loops convert in their functional form, While and its functions
        # (converters/loops.py); tf.cond stays lowered to Switch/Merge (a
        # select) in a graph without loops only
        frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    graph_def = frozen.graph.as_graph_def()
    weights = {}
    for node in graph_def.node:
        if node.op == "Const" and node.name in resource_inputs:
            weights[node.name] = tf.make_ndarray(node.attr["value"].tensor)
    inputs = [t.op.name for t in frozen.inputs if t.dtype != tf.resource]
    outputs = [t.name for t in frozen.outputs]
    layer_of = {}
    for node in graph_def.node:
        path = "/" + node.name + "/"
        layer_of[node.name] = next((ln for ln in layers if f"/{ln}/" in path), "")
    handles = {internal.op.name: external for external, internal in concrete.graph.captures
               if internal.op.name in weights}
    return Traced(graph_def, inputs, specs, outputs, weights, layer_of,
                  concrete.structured_outputs, handles)


# ------------------------------------------------------------ graph walks
def src(name: str) -> Tuple[str, int]:
    """(node, output index) of an input name ("node:1", "^node", "node")."""
    node, _, idx = name.lstrip("^").partition(":")
    return node, int(idx or 0)


def topo(graph_def) -> List[Any]:
    """The GraphDef's nodes in a topological order (inputs first)."""
    nodes = {n.name: n for n in graph_def.node}
    order, state = [], {}
    for start in graph_def.node:
        stack = [(start.name, False)]
        while stack:
            name, done = stack.pop()
            if done:
                state[name] = 2
                order.append(nodes[name])
                continue
            if state.get(name):
                continue
            state[name] = 1
            stack.append((name, True))
            for inp in nodes[name].input:
                s = src(inp)[0]
                if not state.get(s):
                    stack.append((s, False))
    return order


#: ops whose outputs are public whatever their inputs: a private value's
#: shape, size and rank are public (static when converting), and so are
#: zeros or ones of its shape. What they feed (Keras's LayerNormalization
#: computes Prod and Fill on a Shape) runs as plain TF (issue 27).
#: (VariableShape: a training step's shape of a private variable)
PUBLIC_OUTPUT_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike",
                               "VariableShape"})


def reads_private(n, private: Set[str]) -> bool:
    """Whether node n has a data input in `private`."""
    return any(src(i)[0] in private for i in n.input if not i.startswith("^"))


def private_nodes(traced: Traced, policy) -> Set[str]:
    """Nodes whose outputs are private under `policy`: those with a private
    data input, except PUBLIC_OUTPUT_OPS. Every other node sees only public
    values (constants, shapes, public inputs or weights) and runs as the TF
    op it is (rewrite.eval_node)."""
    private = set(traced.inputs) if policy.inputs == "private" else set()
    if policy.weights == "private":
        private.update(traced.weights)
    for n in topo(traced.graph_def):
        if n.op not in PUBLIC_OUTPUT_OPS and reads_private(n, private):
            private.add(n.name)
    return private
