"""The device scope the protocols build their ops under.

`device_scope(device)` is `tf.device(device)`, made cheaper while a function is
traced: there TF's `tf.device` enters the graph's device scope and, through a
context manager it decorates anew on every call (`tf_contextlib`, an
`inspect.signature` each time), the eager context's device as well. Nothing
built inside a trace reads the eager one: ops take the graph's device
functions, and `tf.init_scope` lifts to eager under the innermost graph
device. A traced protocol call enters about one scope per op it makes: 32 µs
each with `tf.device` against about 5 µs with the graph's own (2-core AMD
EPYC). Eagerly (also under `tf.init_scope` inside a trace, whose default
graph is still the function's), or outside any function, it is `tf.device`
itself: with the graph's scope alone, a converted model's weights shared at
their first use inside the trace landed on the client
(tests/test_converter_rnn.py::test_loop_placement caught it).
"""
from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops


def device_scope(device: str):
    """The device scope of `device` (a party's device name)."""
    # executing eagerly inside a trace (tf.init_scope: a converted model's
    # weights shared at their first use) the default graph is still the
    # function's, but the ops run eagerly: they need the eager device
    if tf.inside_function() and not tf.executing_eagerly():
        return ops.get_default_graph().device(device)
    return tf.device(device)
