"""The check op (ops/check, kernels.check) and why the protocols use it
instead of Assert.

Inside a tf.function, TensorFlow's automatic control dependencies chain every
stateful op without a resource input in program order, on whatever device it
runs. The protocols' run-time checks (PRG nonces in step, sealed message
lengths and shapes) run on T1, then S2, then T2, ...: as Assert ops they put a
control edge between two servers into every round, which on a 20 ms WAN cost
a network trip per round (the sealed LR step: 2 RTTs a round, 1.04 s against
0.43 s unsealed). kernels.check is stateless and passes a tensor through.

The broken variant: with Assert back in channel.check_stream (as before this
test), test_no_control_edge_crosses_between_parties finds the chain of
control edges between T1's, T2's, S1's and S2's checks and fails.
"""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime import kernels
from tf_privpy.protocols.mpc.runtime import sealing
from tf_privpy.protocols.mpc.runtime.runtime import canonical_device


def test_check_passes_its_input_through_and_fails_with_the_data():
    x = tf.constant([[1, 2], [3, 4]], tf.int64)
    np.testing.assert_array_equal(kernels.check(tf.constant(True), x, "never").numpy(), x)
    f = tf.function(lambda c, v: kernels.check(c, v, "bad values:", v, tf.constant(7)))
    np.testing.assert_array_equal(f(tf.constant(True), x).numpy(), x)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"bad values: \[1 2\]\[3 4\] 7"):
        f(tf.constant(False), x)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be a scalar"):
        kernels.check(tf.constant([True, True]), x, "m")


def test_check_is_stateless_and_kept_while_its_output_is_used():
    from tensorflow.python.framework import op_def_registry
    assert not op_def_registry.get("TfPrivpy>Check").is_stateful
    # grappler must not prune or fold it: the failure still surfaces in a
    # function whose only use of the check is its pass-through output
    f = tf.function(lambda v: kernels.check(tf.reduce_all(v > 0), v, "not positive") * 2)
    assert f(tf.constant([1.0])).numpy()[0] == 2.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="not positive"):
        f(tf.constant([-1.0]))


def test_check_equal_compares_in_the_kernel():
    """kernels.check_equal (the channel's stream checks): passes x through
    when the two int64 tensors agree, else fails with both values; a shape
    mismatch is a failure, not a broadcast. Stateless, as check."""
    from tensorflow.python.framework import op_def_registry
    assert not op_def_registry.get("TfPrivpy>CheckEqual").is_stateful
    x = tf.constant([1.5, 2.5])
    f = tf.function(lambda a, b: kernels.check_equal(a, b, x, "nonces differ:") * 2)
    seven = tf.constant(7, tf.int64)
    np.testing.assert_array_equal(f(seven, seven).numpy(), [3.0, 5.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="nonces differ: 7 8"):
        f(seven, tf.constant(8, tf.int64))
    with pytest.raises(tf.errors.InvalidArgumentError, match="differ"):
        kernels.check_equal(tf.constant([7, 7], tf.int64), tf.constant([7], tf.int64), x,
                            "differ")


def test_count_message_adds_one_message_and_its_bytes():
    """kernels.count_message (the channel's counters): [1, static bytes +
    elements x dtype size of each tensor, strings by their lengths], eagerly
    and per run of a tf.function (TF state, not the trace)."""
    counter = tf.Variable(tf.zeros([2], tf.int64))
    kernels.count_message(counter, [], 24)
    np.testing.assert_array_equal(counter.numpy(), [1, 24])
    kernels.count_message(counter, [tf.zeros([3, 2], tf.int64), tf.zeros([5], tf.uint8),
                                    tf.constant(["ab", "", "cde"])], 1)
    np.testing.assert_array_equal(counter.numpy(), [2, 24 + 48 + 5 + 5 + 1])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def count(v):
        kernels.count_message(counter, [v], 8)
    count(tf.zeros([4], tf.int32))
    count(tf.zeros([1], tf.int32))
    np.testing.assert_array_equal(counter.numpy(), [4, 83 + (16 + 8) + (4 + 8)])


def _parties(rt):
    return {canonical_device(d): p for p, d in rt.devices.items()}


@pytest.mark.parametrize("encrypt", [False, True])
def test_no_control_edge_crosses_between_parties(encrypt):
    """A multiplication, a comparison and a reveal traced in one function: no
    control dependency joins ops of two different parties (each would be a
    network trip in the distributed runtime)."""
    tp.reset()
    tp.init(tp.Config(encrypt_links=encrypt))
    try:
        rt = tp.get_runtime().runtime
        parties = _parties(rt)
        a, b = tp.share(np.arange(6.0)), tp.share(np.ones(6))
        g = tf.function(lambda a, b: tp.reveal(tp.less(a * b, b) * a)).get_concrete_function(
            a, b).graph

        def party(op):
            return parties.get(canonical_device(op.device)) if op.device else None
        crossing = sorted({(c.type, party(c), op.type, party(op))
                           for op in g.get_operations() for c in op.control_inputs
                           if party(op) and party(c) and party(op) != party(c)})
        assert crossing == [], crossing
        assert not [op for op in g.get_operations() if op.type == "Assert"]
    finally:
        tp.reset()
        tp.init()


def test_a_sealed_message_of_the_wrong_length_or_shape_is_refused():
    """The receiver's length and shape checks (sealing.open_): of a message of
    known shapes, the open kernel's own length check; of one carrying its
    shape, check ops."""
    tp.reset()
    tp.init(tp.Config(encrypt_links=True))
    try:
        link = tp.get_runtime().runtime.channels._links[("S1", "T1")]
        rt = tp.get_runtime().runtime
        with tf.device(rt.devices["S1"]):
            message = sealing.seal(link, [tf.constant(np.arange(3, dtype=np.int64))])
        with tf.device(rt.devices["T1"]), pytest.raises(
                tf.errors.InvalidArgumentError,
                match=r"S1->T1 \(stream 0\) has 48 bytes, but an int64 tensor of shape \[4\] travels in 56"):
            sealing.open_(link, message, [tf.zeros([4], tf.int64)])

        @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.int64)])
        def send(v):
            with tf.device(rt.devices["S1"]):
                m = sealing.seal(link, [v])
            with tf.device(rt.devices["T1"]):
                # the receiver expects [None, 3]: the dimension carried (2) does not fit
                return sealing.open_(link, m, [tf.zeros([0, 3], tf.int64)[:tf.shape(v)[0]]])
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="S1->T1 carries a shape that does not fit"):
            send(tf.constant(np.zeros((3, 2), np.int64)))
    finally:
        tp.reset()
        tp.init()
