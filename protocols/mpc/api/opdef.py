"""The op registry's records and store (DESIGN §2, "Op registry"): OpDef,
TFApi, the Private and Example markers, cost tracing, and the lookups by tp
name and by TF op type. The table itself is registry.py, which re-exports
everything here; import `registry`, not this module, above protocols/mpc.

An OpDef row is either a private op (a tp.* function with an implementation)
or a converter-only row (impl None): a TF op type the converter accepts
that has no tp function of its own (the gradient ops of a training step,
fused BatchNorm, Relu6). Both carry the converter adapter of their TF op
types (adapters.py), the domain on which the op is computed and the
tolerance it is computed within, which the generated supported-ops table
shows and tests/test_op_table.py checks.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf

from ..runtime import context, cost, placement, shares
from .ops import math_ops
from .value import PrivateTensor
from .variable import read_variables

#: a converter adapter: (conversion env, graph node, input values) -> the
#: node's outputs (adapters.py says what it may use of the env)
Adapter = Callable[[Any, Any, List[Any]], List[Any]]

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
    """One row of the op table (see the module docstring).

    Attributes:
      name: the tp name ("matmul", "nn.relu"); for a converter-only row,
        its first TF op type.
      impl: the private implementation (the tp.* function); None for a
        converter-only row.
      doc: one line for the generated table.
      example: sample arguments (cost and placement tests); None for a
        converter-only row.
      tf_ops: the TF op types the converter maps to this row.
      tf_apis: the TF Python APIs that dispatch to impl.
      aliases: further tp names.
      cost_fn: a declared cost, where tracing impl is not the cost.
      adapter: the converter's adapter of tf_ops (required when there are
        tf_ops).
      domain: the inputs the op is computed for ("" : every value the
        fixed-point encoding holds).
      tolerance: the largest absolute error against float64 on the domain,
        inputs in [-2, 2), 128-bit ring; 0.0: exact on the encoded inputs
        (local ops, selections).
    """

    name: str
    impl: Optional[Callable]
    doc: str
    example: Optional[Callable[[], Example]]
    tf_ops: Tuple[str, ...] = ()
    tf_apis: Tuple[TFApi, ...] = ()
    aliases: Tuple[str, ...] = ()
    cost_fn: Optional[Callable[..., cost.Cost]] = None
    adapter: Optional[Adapter] = None
    domain: str = ""
    tolerance: float = 0.0

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
        """The declared cost of the example (needs impl and example)."""
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


# -------------------------------------------------------------- the table
_OPS: List[OpDef] = []
_BY_NAME: Dict[str, OpDef] = {}
_BY_TF_OP: Dict[str, OpDef] = {}
_CONVERTER_ONLY: List[OpDef] = []
_ADAPTERS: Dict[str, OpDef] = {}  # every TF op type, private ops' and converter-only rows'


def accepting_variables(impl: Callable) -> Callable:
    """impl, reading every tp.Variable among its arguments first (also in
    lists, as tf.concat's), so that an op takes a variable wherever it takes
    a PrivateTensor, passing TF errors through the runtime's error
    translator, and keeping a traced function's private results on their
    servers (placement.py). Keeps impl's name, doc and signature.

    Not converted by AutoGraph: the protocol code is plain Python over
    static shapes (its loops are tf.while_loops it builds itself), so inside
    a user's tf.function AutoGraph only rewrote every protocol call of every
    op it reaches, which made a trace about 3x slower (a 3x7x5 reduce_max:
    15 s against 5 s, the same 1,622 ops). A TF API does not convert its
    internals either; tp.sort did this first (compare_ops._sort)."""
    @functools.wraps(impl)
    def op(*args, **kwargs):
        placement.keep_returns_in_place()  # a tf.function returns shares where they live
        try:
            with _counted_at_end():
                return impl(*read_variables(args),
                            **{k: read_variables(v) for k, v in kwargs.items()})
        except tf.errors.OpError as e:
            # distributed mode: an error naming the server at fault, if one is
            # (context.set_error_translator, tf_privpy/distributed.py)
            translated = context.translate_error(e)
            if translated is e:
                raise
            raise translated from e
    return _without_wrapped(tf.autograph.experimental.do_not_convert(op), impl)


def _counted_at_end():
    """While an op is traced: its messages and protocol calls counted by one
    counter update per link at its end, not one op per message
    (Channels.counted_at_end). In a relu+sigmoid+max trace of 100 values
    the per-message counters were 240 of its 1,256 ops."""
    if not tf.inside_function() or not context.is_initialized():
        return contextlib.nullcontext()
    return context.get_handle().runtime.channels.counted_at_end()


def _without_wrapped(op: Callable, impl: Callable) -> Callable:
    """op with impl's signature but no `__wrapped__` chain. TF's trace types
    follow `__wrapped__` (trace_type_builder.from_value), so a wrapped op
    passed as an argument of a tf.function (`tf.function(lambda a, fn=tp.exp:
    fn(a))`) reached the function as its bare implementation: AutoGraph
    converted the whole protocol (exp on 2x10: 15 s of trace instead of
    0.6 s) and the variable reading and placement above were skipped."""
    op.__signature__ = inspect.signature(impl)
    del op.__wrapped__
    return op


def register(op: OpDef) -> OpDef:
    """Adds a row (a private op's implementation accepting tp.Variables, see
    accepting_variables); its names and TF op types must be new, and TF op
    types need an adapter."""
    names = op.names if op.impl is not None else ()
    for n in names:
        if n in _BY_NAME:
            raise ValueError(f"op name {n!r} is registered twice")
    for t in op.tf_ops:
        if t in _ADAPTERS:
            raise ValueError(f"TF op type {t!r} already maps to {_ADAPTERS[t].name!r}")
    if op.tf_ops and op.adapter is None:
        raise ValueError(f"{op.name}: TF op types {op.tf_ops} need a converter adapter")
    if op.impl is None:
        if not op.tf_ops or op.tf_apis or op.aliases:
            raise ValueError(f"{op.name}: a converter-only row has TF op types and no "
                             "tp names or TF APIs")
        _CONVERTER_ONLY.append(op)
    else:
        op = dataclasses.replace(op, impl=accepting_variables(op.impl))
        _OPS.append(op)
        _BY_NAME.update({n: op for n in names})
        _BY_TF_OP.update({t: op for t in op.tf_ops})
    _ADAPTERS.update({t: op for t in op.tf_ops})
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
    """The private op implementing a TF op type ("MatMul"), or None (also
    for a converter-only op type: see converter_row)."""
    return _BY_TF_OP.get(op_type)


def converter_row(op_type: str) -> Optional[OpDef]:
    """The row whose adapter converts a TF op type (a private op or a
    converter-only row), or None: the converter's one lookup."""
    return _ADAPTERS.get(op_type)


def converter_rows() -> Tuple[OpDef, ...]:
    """The converter-only rows, in registration order."""
    return tuple(_CONVERTER_ONLY)


def tf_op_types() -> List[str]:
    """Every TF op type the converter accepts, sorted."""
    return sorted(_ADAPTERS)


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


