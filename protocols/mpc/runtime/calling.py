"""How private functions are called (a converted model's predict, a
trainer's step, a user's `tp.function`): without Grappler.

TF instantiates a tf.function at its first call, and runs Grappler's meta
optimizer over the whole graph then (constant folding, remapping, the memory
optimizer's swapping analysis, the TFG passes, each inferring every node's
shape). A private graph is a few hundred custom-kernel ops per layer, placed
by party, with nothing Grappler can fuse or fold that matters: measured on
ResNet50's predict (20,536 ops, 64-bit ring, 2 cores) Grappler took 4.8 of
the first call's 13.9 CPU-seconds, and the steady call's CPU time was the
same with and without it (4.7 s) within the run-to-run noise; a LeNet-5
training step's first call took 7.0 s without it against 13.3 s with it
(128-bit ring, 2 cores under load), its later steps the same. So the
library's own calls ask TF for no Grappler, per call and only for them, and
`tp.function` does the same for a user's private function: a user's other
functions keep the process's settings.

The options are the thread's `function_call_options` with the meta optimizer
disabled; TF keys an instantiated function by their serialized config, so
every call builds the same ones from the same base (a few microseconds; no
cache, no module state).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Optional

import tensorflow as tf

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.autograph.core import config as autograph_config
from tensorflow.python.eager import context as tf_context

#: the package AutoGraph leaves as written (exclude_from_autograph)
PACKAGE = __name__.split(".")[0]


def exclude_from_autograph() -> None:
    """Tells AutoGraph not to convert tf_privpy's own functions, as TF does
    for tensorflow, keras and numpy (its CONVERSION_RULES). Called once by
    `import tf_privpy`; idempotent.

    Why: a tf.function (AutoGraph on, TF's default) calling the library's
    functions (the tp ops were do_not_convert already; the library's own
    helpers, its traced steps, tp.cost's fn, the tests) had AutoGraph
    transform every function on the way down (parse, rewrite, compile) and
    route each call in them through `converted_call`: the first trace of
    math_fns.sqrt_and_rsqrt of 100 values took 14.5 CPU-s (128 functions
    transformed), 0.34 with this rule (2-core AMD EPYC). The library is
    graph code already: its loops over tensors are tf.while_loop and its
    branches on private values are refused, so converting it changed only
    the time. This rule replaces per-function do_not_convert decorators on
    internal helpers; the tp ops keep theirs, which also covers a tp op
    passed to tf.function itself (AutoGraph converts the top-level function
    whatever its module). A user's own function is still converted, and
    tp.cond converts the user's branches as tf.cond does."""
    rules = autograph_config.CONVERSION_RULES
    if not any(isinstance(r, autograph_config.DoNotConvert) and r.matches(PACKAGE)
               for r in rules):
        autograph_config.CONVERSION_RULES = (autograph_config.DoNotConvert(PACKAGE),) + \
            tuple(rules)


def _without_grappler(base: tf_context.FunctionCallOptions) -> tf_context.FunctionCallOptions:
    config = config_pb2.ConfigProto()
    config.ParseFromString(base.config_proto_serialized or b"")
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    return tf_context.FunctionCallOptions(executor_type=base.executor_type,
                                          config_proto=config)


@contextlib.contextmanager
def private_call():
    """Calls of tf.functions in this block (on this thread) are instantiated
    without Grappler. Use around the call of a private graph, not its trace.

    Example:
      >>> with calling.private_call():
      ...     out = self._fn(*inputs)
    """
    ctx = tf_context.context()
    base = ctx.function_call_options
    ctx.function_call_options = _without_grappler(base)
    try:
        yield
    finally:
        ctx.function_call_options = base


class Function:
    """A tf.function whose calls run without Grappler (`private_call`): what
    `tp.function` returns. Traces, retraces and concrete functions are the
    tf.function's own."""

    def __init__(self, fn: Callable, **kwargs: Any):
        if kwargs.get("jit_compile"):
            raise ValueError(
                "tp.function cannot jit_compile: XLA does not compile the protocols' "
                "custom kernels; drop jit_compile=True (private graphs gain nothing from "
                "XLA: their work is in the kernels)")
        self._fn = tf.function(fn, **kwargs)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        with private_call():
            return self._fn(*args, **kwargs)

    def get_concrete_function(self, *args, **kwargs):
        """The tf.function's concrete function (traced, not called)."""
        return self._fn.get_concrete_function(*args, **kwargs)

    @property
    def python_function(self) -> Callable:
        return self._fn.python_function


def function(fn: Optional[Callable] = None, **kwargs: Any):
    """`tf.function` for private computations: the same tracing (kwargs are
    tf.function's: input_signature, autograph, reduce_retracing), called
    without Grappler's graph optimizations, which find nothing to fuse or fold
    in a graph of protocol kernels and cost a third to a half of a first call.
    A plain tf.function works on PrivateTensors too; this one starts sooner.

    Example:
      >>> @tp.function
      ... def score(x, w):
      ...     return tp.nn.relu(x @ w)
      >>> score(tp.share(x), tp.share(w)).reveal()
    """
    if fn is None:
        return lambda f: Function(f, **kwargs)
    return Function(fn, **kwargs)
