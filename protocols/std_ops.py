"""TensorFlow's shape ops, built without their Python wrappers while tracing.

The protocols move shares with a handful of standard ops (Reshape,
BroadcastTo, Transpose, GatherV2, ConcatV2, Pack, Tile, ExpandDims, Slice,
Unpack), most with a small constant argument ([4, -1], an axis). Through
`tf.reshape(x, [4, -1])` one such op cost about 400 µs of trace (API
dispatch, `_apply_op_helper`, two `tf_contextlib` scopes, the constant's own
`convert_to_tensor`), against about 210 µs for the same two nodes made here
(a FuncGraph, 2-core AMD EPYC); a traced protocol call makes hundreds.

Each function below makes the nodes the TF function it names makes: the same
op types, attributes, inputs and node names (the constant argument
"Reshape/shape" inside the op's name scope), built with op_builder's plan of
the op. tests/test_op_builder.py traces the protocols both ways and compares
the graphs. Anything else goes to the TF function itself: eager execution, a
gradient tape recording, op callbacks, an argument that is not a graph tensor
or a short list of Python ints.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.eager import execute as _execute
from tensorflow.python.framework import op_callbacks, tensor_util
from tensorflow.python.framework import ops as _tf_ops

from .op_builder import _Plan

#: tests set this False to trace through the TF functions themselves
FAST = True

_INT32 = (-(1 << 31), (1 << 31) - 1)
#: each op's plan, read once from its OpDef at import (never changed after)
_PLANS: Dict[str, _Plan] = {t: _Plan(t) for t in (
    "Reshape", "BroadcastTo", "Transpose", "GatherV2", "ConcatV2", "Pack", "Unpack", "Tile",
    "ExpandDims", "Slice")}


def _graph_tensor(t) -> bool:
    return isinstance(t, tf.Tensor) and not isinstance(t, _tf_ops.EagerTensor)


def _int32s(v) -> bool:
    """A Python int or a non-empty flat list/tuple of them, each an int32
    (what the wrapper's conversion makes an int32 constant of)."""
    if type(v) is int:  # noqa: E721  (bool is not an axis)
        return _INT32[0] <= v <= _INT32[1]
    return (isinstance(v, (list, tuple)) and len(v) > 0
            and all(type(e) is int and _INT32[0] <= e <= _INT32[1] for e in v))  # noqa: E721


def _fast(tensors: Sequence[Any], consts: Sequence[Any]) -> bool:
    """While tracing (no tape, no op callbacks), with graph tensors and
    arguments that are Python ints or graph tensors already (a shape the
    protocols keep as a constant per graph and server)."""
    return (FAST and not tf.executing_eagerly() and not _execute.must_record_gradient()
            and not op_callbacks.should_invoke_op_callbacks()
            and all(_graph_tensor(t) for t in tensors)
            and all(_graph_tensor(c) or _int32s(c) for c in consts))


def _const(graph: tf.Graph, value, name: str) -> tf.Tensor:
    proto = attr_value_pb2.AttrValue()
    proto.tensor.CopyFrom(tensor_util.make_tensor_proto(value, tf.int32))
    return graph._create_op_internal(  # pylint: disable=protected-access
        "Const", [], [tf.int32], name=name,
        attrs={"value": proto, "dtype": attr_value_pb2.AttrValue(type=tf.int32.as_datatype_enum)}
    ).outputs[0]


def _arg(v):
    return list(v) if isinstance(v, (list, tuple)) else v


def _build(op_type: str, scope: str, inputs: Dict[str, Any], consts: Dict[str, Any],
           attrs: Optional[Dict[str, Any]] = None):
    """`op_type` named `scope` (made unique as TF does), its Python-int
    arguments `consts` as int32 Const nodes "<scope>/<argument>" (a tensor
    among them is an input as it is)."""
    graph = _tf_ops.get_default_graph()
    full = graph.unique_name(scope)
    kwargs = dict(inputs)
    if consts:
        old = graph._name_stack  # pylint: disable=protected-access
        graph._name_stack = full  # pylint: disable=protected-access
        try:
            for arg, value in consts.items():
                kwargs[arg] = value if _graph_tensor(value) else _const(graph, value, arg)
        finally:
            graph._name_stack = old  # pylint: disable=protected-access
    if attrs:
        kwargs.update(attrs)
    return _PLANS[op_type].build(graph, kwargs, full + "/")


def reshape(tensor: tf.Tensor, shape) -> tf.Tensor:
    """tf.reshape(tensor, shape)."""
    if _fast([tensor], [shape]):
        return _build("Reshape", "Reshape", {"tensor": tensor}, {"shape": _arg(shape)})
    return tf.reshape(tensor, shape)


def broadcast_to(tensor: tf.Tensor, shape) -> tf.Tensor:
    """tf.broadcast_to(tensor, shape)."""
    if _fast([tensor], [shape]):
        return _build("BroadcastTo", "BroadcastTo", {"input": tensor}, {"shape": _arg(shape)})
    return tf.broadcast_to(tensor, shape)


def transpose(a: tf.Tensor, perm: List[int]) -> tf.Tensor:
    """tf.transpose(a, perm) of a real tensor."""
    if _fast([a], [perm]) and not a.dtype.is_complex:
        return _build("Transpose", "transpose", {"x": a}, {"perm": _arg(perm)})
    return tf.transpose(a, perm)


def gather(params: tf.Tensor, indices, axis: int) -> tf.Tensor:
    """tf.gather(params, indices, axis=axis) of a tensor (not a variable)."""
    if _fast([params], [indices, axis]):
        return _build("GatherV2", "GatherV2", {"params": params},
                      {"indices": _arg(indices), "axis": axis})
    return tf.gather(params, indices, axis=axis)


def concat(values: Sequence[tf.Tensor], axis: int) -> tf.Tensor:
    """tf.concat(values, axis) of two or more tensors of one dtype."""
    values = list(values)
    if len(values) > 1 and _fast(values, [axis]) and len({v.dtype for v in values}) == 1:
        return _build("ConcatV2", "concat", {"values": values}, {"axis": axis})
    return tf.concat(values, axis)


def stack(values: Sequence[tf.Tensor], axis: int) -> tf.Tensor:
    """tf.stack(values, axis) of tensors of one dtype, axis >= 0."""
    values = list(values)
    if (values and axis >= 0 and _fast(values, []) and len({v.dtype for v in values}) == 1
            and (values[0].shape.rank is None or axis <= values[0].shape.rank)):
        return _build("Pack", "stack", {"values": values}, {}, {"axis": axis})
    return tf.stack(values, axis)


def unstack(value: tf.Tensor, num: int, axis: int) -> List[tf.Tensor]:
    """tf.unstack(value, num=num, axis=axis)."""
    if _fast([value], []) and type(num) is int and type(axis) is int:  # noqa: E721
        return _build("Unpack", "unstack", {"value": value}, {}, {"num": num, "axis": axis})
    return tf.unstack(value, num=num, axis=axis)


def tile(x: tf.Tensor, multiples) -> tf.Tensor:
    """tf.tile(x, multiples)."""
    if _fast([x], [multiples]):
        return _build("Tile", "Tile", {"input": x}, {"multiples": _arg(multiples)})
    return tf.tile(x, multiples)


def expand_dims(x: tf.Tensor, axis: int) -> tf.Tensor:
    """tf.expand_dims(x, axis)."""
    if _fast([x], [axis]):
        return _build("ExpandDims", "ExpandDims", {"input": x}, {"dim": axis})
    return tf.expand_dims(x, axis)


def slice(x: tf.Tensor, begin, size) -> tf.Tensor:  # noqa: A001  (tf.slice's name)
    """tf.slice(x, begin, size)."""
    if _fast([x], [begin, size]):
        return _build("Slice", "Slice", {"input": x}, {"begin": _arg(begin), "size": _arg(size)})
    return tf.slice(x, begin, size)
