"""Graph ops built without TF's per-call Python wrapper layers.

While a tf.function is traced, every op a protocol makes passes through the
generated wrapper: API dispatch, `op_def_library._apply_op_helper`, and its
`graph.as_default()` and `name_scope` blocks (two tf_contextlib decorators,
each computing an `inspect.signature`). For the library's own kernels that
made about 250 µs of trace per op against 110-140 µs for creating the same
op directly (2,000 RingAdds in a FuncGraph, 2-core AMD EPYC), and a traced
protocol call makes hundreds of ops.

`GraphOps` wraps the generated module: in a graph it builds the NodeDef from
the OpDef itself (inputs by the OpDef's order, type and length attributes
from the inputs, the rest converted by TF's own `value_to_attr_value`) and
calls `Graph._create_op_internal`, which still applies device functions,
control dependencies, colocation and FuncGraph captures. The nodes are the
ones the wrapper makes (tests/test_op_builder.py compares them for every
op). Whatever the fast path does not cover goes to the generated wrapper
unchanged: eager execution, an input that is not yet a tensor, a gradient
tape recording, tfdbg's op callbacks.
"""
from __future__ import annotations

import collections
import re
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.eager import execute as _execute
from tensorflow.python.framework import op_callbacks, op_def_library, op_def_registry
from tensorflow.python.framework import ops as _tf_ops

#: the library's op types are "TfPrivpy>Name"; their generated Python names
#: "tf_privpy_name" (raw ops: "TfPrivpy_Name")
_PREFIX, _RAW_PREFIX = "TfPrivpy>", "TfPrivpy_"


class _Input(NamedTuple):
    name: str
    type_attr: str        # the attr this input's dtype sets, or ""
    number_attr: str      # the attr a list input's length sets, or ""
    type_list_attr: str   # the attr a heterogeneous list's dtypes set, or ""


class _Output(NamedTuple):
    name: str
    number_attr: str
    type_list_attr: str


class _Plan:
    """What building one op type needs, read once from its OpDef."""

    def __init__(self, op_type: str):
        op_def = op_def_registry.get(op_type)
        if op_def is None:
            raise ValueError(f"no op {op_type!r} is registered")
        self.op_type, self.op_def = op_type, op_def
        self.inputs = [_Input(a.name, a.type_attr, a.number_attr, a.type_list_attr)
                       for a in op_def.input_arg]
        self.outputs = [_Output(a.name, a.number_attr, a.type_list_attr)
                        for a in op_def.output_arg]
        self.attr_types = {a.name: a.type for a in op_def.attr}
        self.simple = not any(a.is_ref for a in op_def.input_arg) and not any(
            t in ("func", "list(func)") for t in self.attr_types.values())
        self.result = (collections.namedtuple(op_type.replace(">", "_"),
                                              [o.name for o in self.outputs])
                       if len(self.outputs) > 1 else None)

    def build(self, graph: tf.Graph, kwargs: Dict[str, Any], name: Optional[str]):
        """The op's outputs, structured as the generated wrapper returns them."""
        flat: List[tf.Tensor] = []
        arg_names: List[str] = []  # each flat input's name: "x", a list's "keys_0"
        attrs: Dict[str, attr_value_pb2.AttrValue] = {}
        for arg in self.inputs:
            value = kwargs.pop(arg.name)
            if arg.number_attr or arg.type_list_attr:
                flat.extend(value)
                arg_names.extend(f"{arg.name}_{i}" for i in range(len(value)))
                if arg.number_attr:
                    attrs[arg.number_attr] = attr_value_pb2.AttrValue(i=len(value))
                    if arg.type_attr and value:
                        attrs.setdefault(arg.type_attr, attr_value_pb2.AttrValue(
                            type=value[0].dtype.as_datatype_enum))
                else:
                    attrs[arg.type_list_attr] = attr_value_pb2.AttrValue(
                        list=attr_value_pb2.AttrValue.ListValue(
                            type=[v.dtype.as_datatype_enum for v in value]))
            else:
                flat.append(value)
                arg_names.append(arg.name)
                if arg.type_attr:
                    attrs.setdefault(arg.type_attr, attr_value_pb2.AttrValue(
                        type=value.dtype.as_datatype_enum))
        for key, value in kwargs.items():
            if key not in self.attr_types:
                raise TypeError(f"{self.op_type} got an unexpected keyword argument {key!r}")
            attrs[key] = op_def_library.value_to_attr_value(value, self.attr_types[key], key)
        name = name or self.op_type
        if any(getattr(t, "graph", None) is not graph for t in flat):
            # a tensor of an outer graph (a variable's handle): captured in
            # the op's name scope, by its argument's name, as the wrapper's
            # conversion captures it ("TfPrivpy>StreamNext_3/key"); a name
            # ending in "/" is that scope already (std_ops)
            if not name.endswith("/"):
                name = graph.unique_name(name) + "/"
            with graph.name_scope(name):
                flat = [t if getattr(t, "graph", None) is graph else graph.capture(t, name=n)
                        for t, n in zip(flat, arg_names)]
        op = graph._create_op_internal(  # pylint: disable=protected-access
            self.op_type, flat, name=name, attrs=attrs, op_def=self.op_def)
        if not self.outputs:
            return op
        outs, at = [], 0
        for o in self.outputs:
            if o.number_attr or o.type_list_attr:
                a = op.get_attr(o.number_attr or o.type_list_attr)
                n = a if o.number_attr else len(a)
                outs.append(list(op.outputs[at:at + n]))
                at += n
            else:
                outs.append(op.outputs[at])
                at += 1
        return self.result._make(outs) if self.result is not None else outs[0]


def _is_tensor_input(value, is_list: bool) -> bool:
    if is_list:
        return isinstance(value, (list, tuple)) and all(isinstance(v, tf.Tensor) for v in value)
    return isinstance(value, tf.Tensor)


def _snake(camel: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", camel)
    return re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s).lower()


class GraphOps:
    """The generated op module of a loaded library, with each op built
    directly into the graph while tracing (see the module docstring).

    `GraphOps(module).tf_privpy_ring_add(x=..., y=..., ring_bits=64)` is
    `module.tf_privpy_ring_add(...)`: same arguments, same nodes, same
    results."""

    def __init__(self, module):
        self._module = module
        self._types: Dict[str, str] = {
            "tf_privpy_" + _snake(a[len(_RAW_PREFIX):]): _PREFIX + a[len(_RAW_PREFIX):]
            for a in dir(module) if a.startswith(_RAW_PREFIX)}

    def op_names(self) -> List[str]:
        """The Python names of the library's ops."""
        return sorted(self._types)

    def __getattr__(self, name: str):
        # called for a name not yet looked up: the op is made once and kept
        # as an instance attribute, so later lookups skip this method
        if name.startswith("_"):
            raise AttributeError(name)
        fn = self._make(name)
        setattr(self, name, fn)
        return fn

    def _make(self, name: str) -> Callable:
        wrapper = getattr(self._module, name)
        op_type = self._types.get(name)
        if op_type is None:
            return wrapper
        plan = _Plan(op_type)
        if not plan.simple:
            return wrapper
        build = _builder(plan, wrapper)
        build.__name__ = build.__qualname__ = name
        build.__doc__ = wrapper.__doc__
        return build


def _builder(plan: _Plan, wrapper: Callable) -> Callable:
    """plan.build while a graph is built and every input is a tensor
    already; the generated wrapper otherwise (eager execution, an input to
    convert, a gradient tape recording, tfdbg's op callbacks)."""
    lists = {a.name for a in plan.inputs if a.number_attr or a.type_list_attr}

    def build(**kwargs):
        if (tf.executing_eagerly() or _execute.must_record_gradient()
                or op_callbacks.should_invoke_op_callbacks()
                or not all(a.name in kwargs and _is_tensor_input(kwargs[a.name], a.name in lists)
                           for a in plan.inputs)):
            return wrapper(**kwargs)
        op_name = kwargs.pop("name", None)
        return plan.build(_tf_ops.get_default_graph(), dict(kwargs), op_name)
    return build


def raw_op(op_type: str) -> Callable:
    """`tf.raw_ops.<op_type>` (a TF op: "IdentityN"), built as GraphOps
    builds the library's ops while tracing; the raw op itself otherwise."""
    return _builder(_Plan(op_type), getattr(tf.raw_ops, op_type))
