"""The op registry: one table from op name to private implementation.

Each OpDef records a private op: its tp name ("matmul", "nn.relu"), the TF
op types the converter maps to it ("MatMul", "BatchMatMulV2"), the TF Python
APIs that dispatch to it (tf.linalg.matmul, with an argument adapter), the
implementation (ops/), a one-line doc, its cost and a small example. The
tp.* functions, the TF dispatchers (dispatch.py), the converter and the
generated supported-ops table (tools/gen_supported_ops.py) all read this
table; nothing above it re-implements an op (DESIGN §2, "Op registry").

Importing this module also attaches PrivateTensor's operators, so that the
value type (value.py) needs no op module.

Example:
  >>> op = registry.get("matmul")
  >>> registry.by_tf_op("BatchMatMulV2") is op
  True
  >>> op.cost(registry.Private((2, 3)), registry.Private((3, 4))).rounds
  2
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from . import context, cost, placement, shares
from .ops import array_ops, compare_ops, math_fns, math_ops, nn
from .value import PrivateTensor
from .variable import PrivateVariable, read_variables


# ------------------------------------------------------------------ records
@dataclasses.dataclass(frozen=True)
class Private:
    """A private operand of a given shape in an example or a cost query.

    Sample values are drawn uniformly from [low, high) (the op's domain:
    log's example uses low > 0)."""

    shape: Tuple[int, ...]
    low: float = -2.0
    high: float = 2.0
    dtype: tf.DType = tf.float32


@dataclasses.dataclass(frozen=True)
class Example:
    """Sample arguments of an op: Private markers for private operands,
    anything else (numbers, arrays, strings) passed as it is."""

    args: tuple = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TFApi:
    """A TF Python API that dispatches to an op when given PrivateTensors.

    Attributes:
      api: the TF function (tf.linalg.matmul).
      dispatch_on: its parameters that may hold a PrivateTensor.
      lists: those of them that hold a list of tensors (tf.concat's values).
      rename: TF parameter name -> the implementation's (features -> x).
      adapter: optional function of the TF API's arguments (by keyword,
        defaults applied) returning the private result, where renaming is
        not enough (tf.linalg.matmul's adjoint_a).
    """

    api: Callable
    dispatch_on: Tuple[str, ...]
    lists: Tuple[str, ...] = ()
    rename: Mapping[str, str] = dataclasses.field(default_factory=dict)
    adapter: Optional[Callable[..., Any]] = None

    @property
    def name(self) -> str:
        return api_name(self.api)


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One private op (see the module docstring)."""

    name: str
    impl: Callable
    doc: str
    example: Callable[[], Example]
    tf_ops: Tuple[str, ...] = ()
    tf_apis: Tuple[TFApi, ...] = ()
    aliases: Tuple[str, ...] = ()
    cost_fn: Optional[Callable[..., cost.Cost]] = None

    @property
    def names(self) -> Tuple[str, ...]:
        return (self.name,) + self.aliases

    def cost(self, *args, **kwargs) -> cost.Cost:
        """The declared cost of one call on these arguments (Private markers
        or tf.TensorSpecs for private operands), from tracing the implementation once in a
        FuncGraph without running it, unless the op declares its own."""
        if self.cost_fn is not None:
            return self.cost_fn(*args, **kwargs)
        return trace_cost(self.impl, args, kwargs)

    def example_cost(self) -> cost.Cost:
        ex = self.example()
        return self.cost(*ex.args, **ex.kwargs)

    def call_tf_api(self, api: TFApi, arguments: Dict[str, Any]):
        """Runs the op for a TF API call (its arguments bound by name)."""
        if api.adapter is not None:
            return api.adapter(**arguments)
        params = inspect.signature(self.impl).parameters
        call, defaults = {}, inspect.signature(api.api).parameters
        for k, v in arguments.items():
            target = api.rename.get(k, k)
            if target in params:
                call[target] = v
            elif k != "name" and not _is_default(v, defaults[k].default):
                raise ValueError(f"{api.name}: argument {k}={v!r} is not supported on "
                                 f"PrivateTensors by tp.{self.name}; leave it at its default")
        return self.impl(**call)


def _is_default(v, default) -> bool:
    if v is default:
        return True
    try:
        return bool(v == default)
    except Exception:  # tensors, arrays: not a default  # noqa: BLE001
        return False


def api_name(api: Callable) -> str:
    """The public name of a TF API: "tf.nn.conv2d", "tf.keras.activations.relu"."""
    from tensorflow.python.util import tf_export  # the names TF exports its APIs under
    name = tf_export.get_canonical_name_for_symbol(api)
    if name:
        return "tf." + name
    name = tf_export.get_canonical_name_for_symbol(api, api_name="keras")
    if name:  # "keras.activations.relu"
        return "tf." + name
    return f"{getattr(api, '__module__', '?')}.{getattr(api, '__qualname__', api)}"


# ------------------------------------------------------------------- costs
def private_spec(shape, dtype: tf.DType = tf.float32) -> tf.TypeSpec:
    """The TypeSpec of a PrivateTensor of `shape` in the current runtime."""
    h = context.get_handle()
    storage = tf.TensorSpec(shares.storage(list(shape), h.config.limbs), tf.int64)
    return PrivateTensor.Spec(share0=storage, share1=storage, ring_bits=h.config.ring_bits,
                              frac_bits=h.config.frac_bits, value_dtype=dtype,
                              runtime_id=h.runtime.id)


def _is_private(v) -> bool:
    return isinstance(v, (Private, tf.TensorSpec))


def _substitute(args, kwargs, fn):
    flat = tf.nest.flatten((list(args), dict(kwargs)))
    vals = [fn(v) if _is_private(v) else v for v in flat]
    a, k = tf.nest.pack_sequence_as((list(args), dict(kwargs)), vals)
    return a, k


def trace_cost(impl: Callable, args, kwargs) -> cost.Cost:
    """Declared cost of impl(*args, **kwargs), Private markers (or
    tf.TensorSpecs) standing for private operands: traces it once into a
    FuncGraph inside cost.record() (nothing runs, no message is sent).

    Example:
      >>> trace_cost(math_ops.matmul, (tf.TensorSpec([2, 3]), tf.TensorSpec([3, 4])), {})
    """
    markers = [v for v in tf.nest.flatten((list(args), dict(kwargs))) if _is_private(v)]
    specs = [private_spec(m.shape, m.dtype) for m in markers]

    def body(*private):
        it = iter(private)
        a, k = _substitute(args, kwargs, lambda _: next(it))
        return impl(*a, **k)

    with cost.record() as bill:
        tf.function(body, autograph=False).get_concrete_function(*specs)
    return bill


def sample(example: Example, rng: Optional[np.random.Generator] = None) -> Example:
    """The example with each Private marker shared from random values in its
    domain (needs tp.init()): arguments to call the op with."""
    rng = rng or np.random.default_rng(0)

    def make(m: Private):
        x = rng.uniform(m.low, m.high, m.shape).astype(m.dtype.as_numpy_dtype)
        return math_ops.share(x)

    a, k = _substitute(example.args, example.kwargs, make)
    return Example(tuple(a), k)


def _garble_cost(shape) -> cost.Cost:
    """The setup phase sends each assistant its half of the tables (offline)."""
    n = cost._elems(shape)
    c = cost.Cost(rounds=1)
    for t, k in (("T1", n // 2), ("T2", n - n // 2)):
        c.send("S1", t, k * (cost.GC_TABLE_BYTES + cost.GC_DECODE_BYTES))
    return c


# -------------------------------------------------------------- the table
_OPS: List[OpDef] = []
_BY_NAME: Dict[str, OpDef] = {}
_BY_TF_OP: Dict[str, OpDef] = {}


def accepting_variables(impl: Callable) -> Callable:
    """impl, reading every tp.Variable among its arguments first (also in
    lists, as tf.concat's), so that an op takes a variable wherever it takes
    a PrivateTensor, passing TF errors through the runtime's error
    translator, and keeping a traced function's private results on their
    servers (placement.py). Keeps impl's name, doc and signature."""
    @functools.wraps(impl)
    def op(*args, **kwargs):
        placement.keep_returns_in_place()  # a tf.function returns shares where they live
        try:
            return impl(*read_variables(args),
                        **{k: read_variables(v) for k, v in kwargs.items()})
        except tf.errors.OpError as e:
            # distributed mode: an error naming the server at fault, if one is
            # (context.set_error_translator, tf_privpy/distributed.py)
            translated = context.translate_error(e)
            if translated is e:
                raise
            raise translated from e
    return op


def register(op: OpDef) -> OpDef:
    """Adds an op (its implementation accepting tp.Variables, see
    accepting_variables); its names and TF op types must be new."""
    for n in op.names:
        if n in _BY_NAME:
            raise ValueError(f"op name {n!r} is registered twice")
    for t in op.tf_ops:
        if t in _BY_TF_OP:
            raise ValueError(f"TF op type {t!r} already maps to {_BY_TF_OP[t].name!r}")
    op = dataclasses.replace(op, impl=accepting_variables(op.impl))
    _OPS.append(op)
    _BY_NAME.update({n: op for n in op.names})
    _BY_TF_OP.update({t: op for t in op.tf_ops})
    return op


def ops() -> Tuple[OpDef, ...]:
    """Every registered op, in registration order."""
    return tuple(_OPS)


def get(name: str) -> OpDef:
    """The op of a tp name or alias ("matmul", "nn.relu", "math.exp")."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no private op named {name!r}; see docs/supported_ops.md") from None


def find(name: str) -> Optional[OpDef]:
    return _BY_NAME.get(name)


def by_tf_op(op_type: str) -> Optional[OpDef]:
    """The op implementing a TF op type ("MatMul"), or None."""
    return _BY_TF_OP.get(op_type)


def namespace(prefix: str = "") -> Dict[str, Callable]:
    """The functions of a tp namespace by short name: "" is tp itself,
    "nn" is tp.nn, "math" is tp.math."""
    out = {}
    for n, op in _BY_NAME.items():
        ns, _, short = n.rpartition(".")
        if ns == prefix:
            out[short] = op.impl
    return out


def tf_apis() -> Iterator[Tuple[TFApi, OpDef]]:
    for op in _OPS:
        for a in op.tf_apis:
            yield a, op


def _ex(*args, **kwargs) -> Callable[[], Example]:
    return lambda: Example(args, kwargs)


def _api(api, *dispatch_on, **kw) -> TFApi:
    return TFApi(api, dispatch_on, **kw)


X23, Y23 = Private((2, 3)), Private((2, 3))
POS = Private((2, 3), 0.5, 4.0)
IMG = Private((1, 4, 4, 2))
_keras = tf.keras.activations


def _unary(api, **kw):
    return _api(api, "x", **kw)


def _binary(api, **kw):
    return _api(api, "x", "y", **kw)


def _keras_relu(x, alpha=0.0, max_value=None, threshold=0.0):
    if alpha != 0.0 or max_value is not None or threshold != 0.0:
        raise ValueError("tf.keras.activations.relu on PrivateTensors supports the plain "
                         "ReLU only (alpha=0, max_value=None, threshold=0)")
    return compare_ops.relu(x)


def _matmul(a, b, transpose_a, transpose_b, adjoint_a, adjoint_b, a_is_sparse, b_is_sparse,
            output_type, name):
    if output_type is not None:
        raise ValueError("tf.linalg.matmul: output_type is not supported on PrivateTensors")
    return math_ops.matmul(a, b, transpose_a or adjoint_a, transpose_b or adjoint_b, name)


def _pool(impl):
    def adapter(input, ksize, strides, padding, data_format, name):  # noqa: A002
        return impl(input, ksize, strides, padding, data_format or "NHWC", name)
    return adapter


def _reveal_cost(x: Private) -> cost.Cost:
    return cost.reveal_cost(x.shape, context.get_handle().config.ring_bits)


_TABLE = [
    # --------------------------------------------------------- sharing
    OpDef("share", math_ops.share, "Secret-shares a public tensor between S1 and S2.",
          _ex(np.ones((2, 3), np.float32))),
    OpDef("reveal", math_ops.reveal, "Reconstructs a PrivateTensor on the client.",
          _ex(X23), cost_fn=_reveal_cost),
    # -------------------------------------------------------- arithmetic
    OpDef("add", math_ops.add, "x + y with broadcasting; local.", _ex(X23, Y23),
          ("Add", "AddV2"), (_binary(tf.math.add),), ("math.add",)),
    OpDef("subtract", math_ops.subtract, "x - y with broadcasting; local.", _ex(X23, Y23),
          ("Sub",), (_binary(tf.math.subtract),), ("math.subtract",)),
    OpDef("negative", math_ops.negative, "-x; local.", _ex(X23), ("Neg",),
          (_unary(tf.math.negative),), ("math.negative",)),
    OpDef("multiply", math_ops.multiply, "Elementwise x * y (one multiplication if both private).",
          _ex(X23, Y23), ("Mul",), (_binary(tf.math.multiply),), ("math.multiply",)),
    OpDef("multiply_many", math_ops.multiply_many,
          "Independent private products in one protocol call.", _ex([(X23, Y23), (X23, Y23)])),
    OpDef("square", math_ops.square, "x * x (one multiplication).", _ex(X23), ("Square",),
          (_unary(tf.math.square),), ("math.square",)),
    OpDef("pow", math_fns.pow, "x ** n for a public integer n, by square-and-multiply.",
          _ex(X23, 3), ("Pow",), (_binary(tf.math.pow),), ("math.pow",)),
    OpDef("matmul", math_ops.matmul, "Matrix product (batch dimensions broadcast).",
          _ex(Private((2, 3)), Private((3, 4))), ("MatMul", "BatchMatMul", "BatchMatMulV2"),
          (_api(tf.linalg.matmul, "a", "b", adapter=_matmul),)),
    OpDef("tensordot", math_ops.tensordot, "Sum over given axes, as one matrix product.",
          _ex(Private((2, 3)), Private((3, 4)), 1), (), (_api(tf.tensordot, "a", "b"),)),
    OpDef("dot", math_ops.dot, "numpy.dot semantics.", _ex(Private((3,)), Private((3,)))),
    OpDef("outer", math_ops.outer, "Outer product as one [n,1] @ [1,m] matmul.",
          _ex(Private((3,)), Private((2,)))),
    OpDef("reduce_sum", math_ops.reduce_sum, "Sum over axes; local.", _ex(X23, 1), ("Sum",),
          (_api(tf.math.reduce_sum, "input_tensor", rename={"input_tensor": "x"}),),
          ("math.reduce_sum",)),
    OpDef("reduce_mean", math_ops.reduce_mean, "Mean over axes: a local sum times 1/n.",
          _ex(X23, 1), ("Mean",),
          (_api(tf.math.reduce_mean, "input_tensor", rename={"input_tensor": "x"}),),
          ("math.reduce_mean",)),
    OpDef("divide", math_fns.divide, "x / y: local for a public y, Goldschmidt for a private y.",
          _ex(X23, POS), ("RealDiv",),
          (_binary(tf.math.divide), _binary(tf.math.truediv)), ("math.divide",)),
    # ------------------------------------------------------- comparisons
    OpDef("less", compare_ops.less, "Private [x < y] (one garbled comparison per element).",
          _ex(X23, Y23), ("Less",), (_binary(tf.math.less),), ("math.less",)),
    OpDef("greater", compare_ops.greater, "Private [x > y].", _ex(X23, Y23), ("Greater",),
          (_binary(tf.math.greater),), ("math.greater",)),
    OpDef("less_equal", compare_ops.less_equal, "Private [x <= y].", _ex(X23, Y23),
          ("LessEqual",), (_binary(tf.math.less_equal),), ("math.less_equal",)),
    OpDef("greater_equal", compare_ops.greater_equal, "Private [x >= y].", _ex(X23, Y23),
          ("GreaterEqual",), (_binary(tf.math.greater_equal),), ("math.greater_equal",)),
    OpDef("equal", compare_ops.equal, "Private [x == y] (two comparisons in one round).",
          _ex(X23, Y23), ("Equal",), (_binary(tf.math.equal),), ("math.equal",)),
    OpDef("not_equal", compare_ops.not_equal, "Private [x != y].", _ex(X23, Y23),
          ("NotEqual",), (_binary(tf.math.not_equal),), ("math.not_equal",)),
    OpDef("logical_not", compare_ops.logical_not, "1 - c for a private bit; local.",
          _ex(X23), ("LogicalNot",), (_unary(tf.math.logical_not, rename={"x": "c"}),)),
    OpDef("garble_comparisons", compare_ops.garble_comparisons,
          "Setup phase: garbles the comparators of one later comparison.", _ex([2, 3]),
          cost_fn=_garble_cost),
    OpDef("sign", compare_ops.sign, "-1, 0 or 1 per element.", _ex(X23), ("Sign",),
          (_unary(tf.math.sign),), ("math.sign",)),
    OpDef("abs", compare_ops.abs, "|x| (one comparison, one multiplication).", _ex(X23),
          ("Abs",), (_unary(tf.math.abs),), ("math.abs",)),
    OpDef("where", compare_ops.where, "condition ? x : y (oblivious select if private).",
          _ex(Private((2, 3), 0.0, 1.0), X23, Y23), ("Select", "SelectV2"),
          (_api(tf.where, "condition", "x", "y"),)),
    OpDef("maximum", compare_ops.maximum, "Elementwise max (one comparison).", _ex(X23, Y23),
          ("Maximum",), (_binary(tf.math.maximum),), ("math.maximum",)),
    OpDef("minimum", compare_ops.minimum, "Elementwise min (one comparison).", _ex(X23, Y23),
          ("Minimum",), (_binary(tf.math.minimum),), ("math.minimum",)),
    OpDef("clip_by_value", compare_ops.clip_by_value, "min(max(t, lo), hi) elementwise.",
          _ex(X23, -1.0, 1.0), ("ClipByValue",),
          (_api(tf.clip_by_value, "t", "clip_value_min", "clip_value_max"),)),
    OpDef("nn.relu", compare_ops.relu, "max(x, 0) = x·[x >= 0].", _ex(X23), ("Relu",),
          (_api(tf.nn.relu, "features", rename={"features": "x"}),
           _api(_keras.relu, "x", adapter=_keras_relu))),
    OpDef("nn.relu_many", compare_ops.relu_many,
          "Independent ReLUs in one comparison and one multiplication batch.",
          _ex([X23, Private((3,))])),
    OpDef("less_many", compare_ops.less_many,
          "Independent comparisons [x < y] in one comparison batch.",
          _ex([(X23, Y23), (Private((3,)), 0.0)])),
    OpDef("reduce_max", compare_ops.reduce_max, "Max over axes by a comparison tree.",
          _ex(X23, 1), ("Max",), (_api(tf.math.reduce_max, "input_tensor"),),
          ("math.reduce_max",)),
    OpDef("reduce_min", compare_ops.reduce_min, "Min over axes by a comparison tree.",
          _ex(X23, 1), ("Min",), (_api(tf.math.reduce_min, "input_tensor"),),
          ("math.reduce_min",)),
    OpDef("argmax", compare_ops.argmax, "Private index of the maximum along an axis.",
          _ex(X23, 1), ("ArgMax",), (_api(tf.math.argmax, "input", adapter=lambda input, axis,
                                            output_type, name: compare_ops.argmax(
                                                input, 0 if axis is None else axis,
                                                output_type)),), ("math.argmax",)),
    OpDef("argmin", compare_ops.argmin, "Private index of the minimum along an axis.",
          _ex(X23, 1), ("ArgMin",), (_api(tf.math.argmin, "input", adapter=lambda input, axis,
                                            output_type, name: compare_ops.argmin(
                                                input, 0 if axis is None else axis,
                                                output_type)),), ("math.argmin",)),
    OpDef("sort", compare_ops.sort, "Sort along an axis (Batcher's odd-even merge network).",
          _ex(Private((2, 4))), (), (_api(tf.sort, "values"),)),
    OpDef("math.top_k", compare_ops.top_k, "The k largest entries and their indices.",
          _ex(Private((2, 4)), 2), ("TopKV2",),
          (_api(tf.math.top_k, "input", adapter=lambda input, k, sorted, index_type, name:
                compare_ops.top_k(input, k, sorted)),)),
    # --------------------------------------------------- shape operations
    OpDef("reshape", array_ops.reshape, "tf.reshape; local.", _ex(X23, [3, 2]), ("Reshape",),
          (_api(tf.reshape, "tensor", rename={"tensor": "x"}),)),
    OpDef("transpose", array_ops.transpose, "tf.transpose; local.", _ex(X23), ("Transpose",),
          (_api(tf.transpose, "a", rename={"a": "x"}),)),
    OpDef("getitem", array_ops.getitem, "Indexing and slicing (x[1:, ..., None]); local.",
          _ex(X23, (slice(None), slice(1, None))), ("StridedSlice",),
          (_api(tf.__operators__.getitem, "tensor",
                adapter=lambda tensor, slice_spec, var: array_ops.getitem(tensor, slice_spec)),)),
    OpDef("concat", array_ops.concat, "tf.concat; local.", _ex([X23, Y23], 0), ("ConcatV2",),
          (_api(tf.concat, "values", lists=("values",)),)),
    OpDef("stack", array_ops.stack, "tf.stack; local.", _ex([X23, Y23]), ("Pack",),
          (_api(tf.stack, "values", lists=("values",)),)),
    OpDef("tile", array_ops.tile, "tf.tile; local.", _ex(X23, [2, 1]), ("Tile",),
          (_api(tf.tile, "input", rename={"input": "x"}),)),
    OpDef("repeat", array_ops.repeat, "tf.repeat; local.", _ex(X23, 2, 1), (),
          (_api(tf.repeat, "input", rename={"input": "x"}),)),
    OpDef("expand_dims", array_ops.expand_dims, "tf.expand_dims; local.", _ex(X23, 0),
          ("ExpandDims",), (_api(tf.expand_dims, "input", rename={"input": "x"}),)),
    OpDef("squeeze", array_ops.squeeze, "tf.squeeze; local.", _ex(Private((2, 1, 3))),
          ("Squeeze",), (_api(tf.squeeze, "input", rename={"input": "x"}),)),
    OpDef("pad", array_ops.pad, "Zero padding; local.", _ex(X23, [[1, 0], [0, 1]]), ("Pad",),
          (_api(tf.pad, "tensor", rename={"tensor": "x"}),)),
    OpDef("gather", array_ops.gather, "tf.gather with public indices; local.",
          _ex(X23, [1, 0]), ("GatherV2",),
          (_api(tf.gather, "params", adapter=lambda params, indices, validate_indices, axis,
                batch_dims, name: array_ops.gather(params, indices, axis or 0)),)),
    OpDef("broadcast_to", array_ops.broadcast_to, "tf.broadcast_to; local.",
          _ex(Private((1, 3)), [2, 3]), ("BroadcastTo",),
          (_api(tf.broadcast_to, "input", rename={"input": "x"}),)),
    OpDef("identity", array_ops.identity, "The value itself (no protocol).", _ex(X23),
          ("Identity",), (_api(tf.identity, "input", rename={"input": "x"}),
                          _api(_keras.linear, "x"))),
    # ------------------------------------------------- derived functions
    OpDef("exp", math_fns.exp, "e^x by range reduction and a polynomial.", _ex(X23), ("Exp",),
          (_unary(tf.math.exp), _api(_keras.exponential, "x")), ("math.exp",)),
    OpDef("math.log", math_fns.log, "Natural logarithm for x > 0.", _ex(POS), ("Log",),
          (_unary(tf.math.log),)),
    OpDef("sqrt", math_fns.sqrt, "sqrt(x) for x >= 0.", _ex(POS), ("Sqrt",),
          (_unary(tf.math.sqrt),), ("math.sqrt",)),
    OpDef("math.rsqrt", math_fns.rsqrt, "1/sqrt(x) for x > 0.", _ex(POS), ("Rsqrt",),
          (_unary(tf.math.rsqrt),)),
    OpDef("math.reciprocal", math_fns.reciprocal, "1/x by Goldschmidt iterations.", _ex(POS),
          ("Reciprocal", "Inv"), (_unary(tf.math.reciprocal),)),
    OpDef("sigmoid", math_fns.sigmoid, "Logistic function as a piecewise polynomial.",
          _ex(X23), ("Sigmoid",), (_unary(tf.math.sigmoid), _api(_keras.sigmoid, "x")),
          ("math.sigmoid", "nn.sigmoid")),
    OpDef("tanh", math_fns.tanh, "tanh as a piecewise polynomial.", _ex(X23), ("Tanh",),
          (_unary(tf.math.tanh), _api(_keras.tanh, "x")), ("math.tanh", "nn.tanh")),
    OpDef("nn.softmax", math_fns.softmax, "exp(x - max) / sum along an axis.", _ex(X23),
          ("Softmax",), (_api(tf.nn.softmax, "logits", adapter=lambda logits, axis, name:
                              math_fns.softmax(logits, -1 if axis is None else axis)),
                         _api(_keras.softmax, "x", adapter=lambda x, axis:
                              math_fns.softmax(x, axis)))),
    OpDef("nn.log_softmax", math_fns.log_softmax, "(x - max) - log sum exp along an axis.",
          _ex(X23), ("LogSoftmax",),
          (_api(tf.nn.log_softmax, "logits", adapter=lambda logits, axis, name:
                math_fns.log_softmax(logits, -1 if axis is None else axis)),)),
    OpDef("nn.softplus", nn.softplus, "log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)).",
          _ex(X23), ("Softplus",), (_api(tf.math.softplus, "features"),
                                    _api(_keras.softplus, "x", rename={"x": "features"}))),
    OpDef("nn.sigmoid_cross_entropy_with_logits", nn.sigmoid_cross_entropy_with_logits,
          "Logistic loss max(x, 0) - x·z + log(1 + exp(-|x|)).",
          _ex(labels=Private((2, 3), 0.0, 1.0), logits=X23), (),
          (_api(tf.nn.sigmoid_cross_entropy_with_logits, "labels", "logits"),)),
    # -------------------------------------------------------------- nn
    OpDef("nn.conv2d", nn.conv2d, "2-D convolution (NHWC, HWIO), one multiplication.",
          _ex(IMG, Private((2, 2, 2, 3)), 1, "VALID"), ("Conv2D",),
          (_api(tf.nn.conv2d, "input", "filters"),)),
    OpDef("nn.bias_add", nn.bias_add, "value + bias along the channel axis; local.",
          _ex(IMG, Private((2,))), ("BiasAdd",), (_api(tf.nn.bias_add, "value", "bias"),)),
    OpDef("nn.avg_pool2d", nn.avg_pool2d, "Average pooling; local.", _ex(IMG, 2, 2, "VALID"),
          ("AvgPool",), (_api(tf.nn.avg_pool2d, "input", adapter=_pool(nn.avg_pool2d)),
                         _api(tf.nn.avg_pool, "input", adapter=_pool(nn.avg_pool2d)))),
    OpDef("nn.max_pool2d", nn.max_pool2d, "Max pooling by a comparison tree per window.",
          _ex(IMG, 2, 2, "VALID"), ("MaxPool",),
          (_api(tf.nn.max_pool2d, "input", adapter=_pool(nn.max_pool2d)),
           _api(tf.nn.max_pool, "input", adapter=_pool(nn.max_pool2d)))),
    OpDef("nn.max_pool2d_relu", nn.max_pool2d_relu, "relu(max_pool2d(x)): fewer comparisons.",
          _ex(IMG, 2, 2, "VALID")),
]
for _op in _TABLE:
    register(_op)


# ------------------------------------------------------------- operators
def _attach_operators() -> None:
    """The Python operators of PrivateTensor and tp.Variable (which reads
    itself first), from the registered ops."""
    for P in (PrivateTensor, PrivateVariable):
        binary = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
                  "matmul": "matmul"}
        for dunder, name in binary.items():
            impl = get(name).impl
            setattr(P, f"__{dunder}__", lambda self, other, f=impl: f(self, other))
            setattr(P, f"__r{dunder}__", lambda self, other, f=impl: f(other, self))
        for dunder, name in (("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                             ("ge", "greater_equal")):
            setattr(P, f"__{dunder}__", lambda self, other, f=get(name).impl: f(self, other))
        P.__pow__ = lambda self, n: get("pow").impl(self, n)
        P.__rpow__ = lambda self, base: get("pow").impl(base, self)
        P.__neg__ = lambda self: get("negative").impl(self)
        P.__abs__ = lambda self: get("abs").impl(self)
        P.__getitem__ = lambda self, key: get("getitem").impl(self, key)
        P.reveal = lambda self: get("reveal").impl(self)
        P.reveal.__doc__ = "The plaintext value on the client device (see tp.reveal)."
    PrivateTensor.__pos__ = lambda self: self
    PrivateVariable.__pos__ = lambda self: self.read_value()


_attach_operators()
