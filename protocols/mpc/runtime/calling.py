"""How the library calls the private functions it builds (a converted
model's predict): without Grappler.

TF instantiates a tf.function at its first call, and runs Grappler's meta
optimizer over the whole graph then (constant folding, remapping, the memory
optimizer's swapping analysis, the TFG passes, each inferring every node's
shape). A private graph is a few hundred custom-kernel ops per layer, placed
by party, with nothing Grappler can fuse or fold that matters: measured on
ResNet50's predict (20,536 ops, 64-bit ring, 2 cores) Grappler took 4.8 of
the first call's 13.9 CPU-seconds, and the steady call's CPU time was the
same with and without it (4.7 s) within the run-to-run noise. So the
library's own calls ask TF for no Grappler, per call and only for them: a
user's other functions keep the process's settings.

The options are the thread's `function_call_options` with the meta optimizer
disabled; TF keys an instantiated function by their serialized config, so
every call builds the same ones from the same base (a few microseconds; no
cache, no module state).
"""
from __future__ import annotations

import contextlib

from tensorflow.core.protobuf import config_pb2
from tensorflow.python.eager import context as tf_context


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
