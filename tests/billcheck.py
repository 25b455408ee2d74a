"""One run's declared cost bill against what the channel counted (the cost
model's check, DESIGN §2), eagerly or in a tf.function."""
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime import cost


def declared_and_counted(fn, x, mode: str):
    """(declared bill, tp.stats) of one run of fn(x): eagerly, or as a
    tf.function whose bill is declared while it is traced (once) and whose
    run is counted."""
    f = fn if mode == "eager" else tf.function(fn)
    traced = None
    if mode == "tf_function":
        with cost.record() as traced:
            f.get_concrete_function(x)
    with cost.record() as declared, tp.stats() as counted:
        f(x)
    return (declared if traced is None else traced), counted


def assert_bill_equals_counts(fn, x, mode: str):
    """Links (messages, bytes), rounds and comparisons agree; returns the
    declared bill (for a test's further checks: no second run or trace)."""
    declared, counted = declared_and_counted(fn, x, mode)
    assert {k: tuple(v) for k, v in declared.links.items()} == counted.links
    assert (declared.rounds, declared.comparisons) == (counted.rounds, counted.comparisons)
    return declared
