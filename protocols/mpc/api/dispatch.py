"""TensorFlow API dispatch for PrivateTensors, generated from the op registry.

`register()` (called once by `import tf_privpy`):
- every TF API listed in the registry (tf.linalg.matmul, tf.nn.relu, ...)
  runs the private implementation when a PrivateTensor is among the
  arguments it dispatches on;
- every OTHER TF API that supports type-based dispatch (about 1100 in TF
  2.14; registering them all takes about 0.05 s, `_refuse`) raises a TypeError
  naming the TF function and the tp equivalent, or saying that it is not
  supported, instead of failing deep inside TF;
- converting a PrivateTensor to a plaintext tf.Tensor (what APIs that do
  not dispatch would try) raises a TypeError: a secret is never silently
  turned into a public tensor.
A tp.Variable (variable.py) is matched like a PrivateTensor and read first.
"""
from __future__ import annotations

import inspect
import types
import typing
from typing import Callable, List, Optional, Set

import tensorflow as tf
# TF's own table of the APIs that accept dispatch (dispatch_for_api's list).
from tensorflow.python.util import dispatch as _tf_dispatch
from tensorflow.python.util import tf_decorator as _tf_decorator

from . import registry
from .registry import OpDef, TFApi
from .value import PrivateTensor
from .variable import PrivateVariable, read_variables

P = PrivateTensor
#: what the dispatchers match: a PrivateTensor or a tp.Variable (read first)
PV = typing.Union[PrivateTensor, PrivateVariable]
_registered = False
#: TF APIs refused with a TypeError (filled by register(); read by tests)
REFUSED: Set[Callable] = set()


def _signature(api: TFApi) -> list:
    return [{p: typing.List[PV] if p in api.lists else PV} for p in api.dispatch_on]


def _target(op: OpDef, api: TFApi) -> Callable:
    sig = inspect.signature(api.api)

    def dispatch_target(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return op.call_tf_api(api, {k: read_variables(v) for k, v in bound.arguments.items()})

    dispatch_target.__name__ = f"private_{op.name.replace('.', '_')}"
    return dispatch_target


def tp_equivalent(name: str) -> Optional[OpDef]:
    """The registry op whose name matches a TF API's last component
    ("tf.math.log" -> math.log), if any."""
    short = name.rsplit(".", 1)[-1]
    for op in registry.ops():
        if any(n.rsplit(".", 1)[-1] == short for n in op.names):
            return op
    return None


_COND_ADVICE = ("use tp.cond(pred, true_fn, false_fn) (a private pred selects obliviously, "
                "both branches run; nest tp.cond for several cases) or tp.where for an "
                "elementwise choice")
_SEQUENCE_ADVICE = ("apply the tp ops to the whole tensor at once (they are elementwise or "
                    "batched), or loop explicitly: a Python loop over x[i], or a "
                    "`for i in tf.range(n)` loop inside tf.function (a while loop with a "
                    "public condition runs on the share holders)")
#: what to do instead of a TF control-flow API given a PrivateTensor
CONTROL_FLOW_ADVICE = {
    "tf.cond": f"tf.cond cannot branch on a PrivateTensor: {_COND_ADVICE}",
    "tf.case": f"tf.case cannot branch on a PrivateTensor: {_COND_ADVICE}",
    "tf.switch_case": f"tf.switch_case cannot branch on a PrivateTensor: {_COND_ADVICE}",
    "tf.keras.backend.switch": f"keras.backend.switch on a PrivateTensor: {_COND_ADVICE}",
    "tensorflow.python.keras.backend.switch": f"keras.backend.switch on a PrivateTensor: "
                                              f"{_COND_ADVICE}",
    "tf.scan": f"tf.scan cannot carry a PrivateTensor: {_SEQUENCE_ADVICE}",
    "tf.foldl": f"tf.foldl cannot carry a PrivateTensor: {_SEQUENCE_ADVICE}",
    "tf.foldr": f"tf.foldr cannot carry a PrivateTensor: {_SEQUENCE_ADVICE}",
}


def unsupported_message(name: str) -> str:
    if name in CONTROL_FLOW_ADVICE:
        return CONTROL_FLOW_ADVICE[name]
    op = tp_equivalent(name)
    if op is not None:
        return (f"{name} does not accept PrivateTensors; use "
                f"tp.{op.name} (see docs/supported_ops.md)")
    return (f"{name} is not supported on PrivateTensors: tf_privpy has no private "
            "implementation of it (see docs/supported_ops.md for the supported ops). "
            "Compute it with supported ops, or tp.reveal() the input first if the value "
            "may be disclosed")


def _conversion_message(shape, what: str = "a PrivateTensor") -> str:
    return (f"{what} (shape {shape}) cannot be converted to a plaintext tf.Tensor: "
            "this TF function has no private implementation (docs/supported_ops.md). Use the "
            "tp.* function, or tp.reveal() it first if the value may be disclosed. As the "
            "predicate of tf.cond/tf.switch_case or a loop condition: choose with tp.cond or "
            "tp.where instead")


def positional_parameters(api: Callable) -> List[str]:
    """The names of `api`'s positional parameters as TF's dispatch sees them
    (tf_inspect.signature: its TF decorators unwrapped), read from the code
    object of the function they wrap when it is a plain one (a tenth of
    inspect.signature's time, x 1,100 APIs at each import)."""
    target = _tf_decorator.unwrap(api)[1]
    code = getattr(target, "__code__", None)
    if isinstance(target, types.FunctionType) and code is not None and \
            "__signature__" not in target.__dict__ and not hasattr(target, "__wrapped__"):
        return list(code.co_varnames[:code.co_argcount])
    params = _tf_dispatch.tf_inspect.signature(api).parameters.values()
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _refuse(api: Callable, checker) -> None:
    """Registers a dispatcher of `api` that raises a TypeError saying what to
    use instead, for any PrivateTensor (or list of them) among its positional
    parameters. What tf.experimental.dispatch_for_api(api, *signatures)
    registers, without its per-call inspection: the target takes (*args,
    **kwargs), so it matches every API signature (what _check_signature
    verifies) and needs no name-scope wrapper (it raises before any op); and
    `checker`, the one type checker of every refused parameter, is built once
    instead of once per parameter. Through dispatch_for_api, registering the
    ~1,100 refusers took about 0.4 s of CPU at every `import tf_privpy` (each
    server process, each test subprocess); this way about 0.05 s."""
    dispatcher = getattr(api, _tf_dispatch.TYPE_BASED_DISPATCH_ATTR, None)
    if dispatcher is None:
        return
    positions = [(k, n) for k, n in enumerate(positional_parameters(api)) if n != "name"]
    if not positions:
        return
    name = registry.api_name(api)
    conversion = name == "tf.convert_to_tensor"

    def refuse(*args, **kwargs):
        if conversion:
            values = list(args) + list(kwargs.values())
            what = ("a tp.Variable" if any(isinstance(v, PrivateVariable) for v in values)
                    else "a PrivateTensor")
            raise TypeError(f"{name}: " + _conversion_message("given", what))
        raise TypeError(unsupported_message(name))  # looked up when raised, not at import

    signatures = _tf_dispatch._TYPE_BASED_DISPATCH_SIGNATURES[api][refuse]  # noqa: SLF001
    for k, n in positions:
        dispatcher.Register(
            _tf_dispatch._api_dispatcher.PySignatureChecker([(k, checker)]), refuse)
        signatures.append({n: typing.Union[PV, typing.List[PV]]})
    REFUSED.add(api)


def _no_conversion(value, dtype=None, name=None, as_ref=False):
    what = "a tp.Variable" if isinstance(value, PrivateVariable) else "a PrivateTensor"
    raise TypeError(_conversion_message(value.shape, what))


def register() -> None:
    """Registers every dispatcher (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    # ExtensionTypes are dispatchable by themselves; a tp.Variable is a plain
    # Python class, which TF's dispatcher only looks at once registered
    # (otherwise a list holding only variables, as in tf.concat, is skipped).
    _tf_dispatch.register_dispatchable_type(PrivateVariable)
    dispatched = set()
    for api, op in registry.tf_apis():
        tf.experimental.dispatch_for_api(api.api, *_signature(api))(_target(op, api))
        dispatched.add(api.api)
    checker = _tf_dispatch.make_type_checker(typing.Union[PV, typing.List[PV]])
    for api in _tf_dispatch.apis_with_type_based_dispatch():
        if api not in dispatched:
            _refuse(api, checker)
    tf.register_tensor_conversion_function(P, _no_conversion)
    tf.register_tensor_conversion_function(PrivateVariable, _no_conversion)
