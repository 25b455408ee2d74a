"""Control flow over PrivateTensors (issue 24 section 2): every construct
either runs with each share on its holder or is refused with what to do.

What runs is checked in the PARTITION graphs of a real run (run metadata):
the client's partition receives no int64 tensor (a share or protocol
message) from S1, S2, T1 or T2. Run against the code before this change
(commit 4e77c4b, where protocols/mpc/runtime/placement.py re-placed only the return
Identity of a plain op), the reviewer's reproductions fail exactly here:
  test_loops_keep_shares_on_their_holders[autograph_range], [tf_while_loop],
    [autograph_while]: the client received 2 int64 tensors (while/exit/_30
    and _31: both shares of the loop's result); [nested]: 4;
  test_conditionals_returning_private_values_are_refused[*] (tf.cond, tf.case,
    tf.switch_case, AutoGraph if, a returned capture): DID NOT RAISE, and a
    run gave the client 4 int64 tensors (each branch's two shares).

The trace-time guard (placement.py) refuses a graph that would put a share
on the client, naming the op: test_guard_refuses_a_misplaced_op.
"""

import functools

import numpy as np
import pytest
import tensorflow as tf

import graphcheck
import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime import placement
from tolerances import linear_tol, mul_tol, public_mul_tol

A = np.array([0.5, -1.25, 2.0, 3.5])
B = np.array([1.5, 2.0, -0.75, 1.0])


def _f(ring):
    return tp.get_runtime().config.frac_bits


# ------------------------------------------------------------------ loops
def _while_loop(a, b, n):
    return tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 0.5 + 1.0),
                         (tf.constant(0), a))[1]


def _autograph_range(a, b, n):
    for _ in tf.range(n):
        a = a * 0.5 + 1.0
    return a


def _autograph_while(a, b, n):
    i = tf.constant(0)
    while i < n:
        a = a * 0.5 + 1.0
        i += 1
    return a


def _nested(a, b, n):
    for _ in tf.range(n):
        for _ in tf.range(1):
            a = a * 0.5 + 1.0
    return a


def _tp_cond_in_loop(a, b, n):
    for i in tf.range(n):
        a = tp.cond(i >= 0, lambda: a * 0.5 + 1.0, lambda: a)
    return a


def _private_product_loop(a, b, n):
    for _ in tf.range(n):
        a = a * b
    return a


LOOPS = {"tf_while_loop": _while_loop, "autograph_range": _autograph_range,
         "autograph_while": _autograph_while, "nested": _nested,
         "tp_cond_in_loop": _tp_cond_in_loop}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_loops_keep_shares_on_their_holders(name):
    """x -> x * 0.5 + 1 three times: numpy's result within one public
    product's bound per step, and the client receives no share."""
    f = _f(None)
    a, b = tp.share(A), tp.share(B)
    out, got = graphcheck.client_received(tf.function(LOOPS[name]), a, b, tf.constant(3))
    want, tol = A.copy(), 0.0
    for _ in range(3):
        tol = tol * 0.5 + public_mul_tol(want, 0.5, f) + linear_tol(f)
        want = want * 0.5 + 1.0
    np.testing.assert_allclose(out.reveal().numpy(), want, rtol=0, atol=np.max(tol))
    assert got == [], got


def test_loop_of_private_products(ring):
    """A loop whose body runs the multiplication protocol (S1, S2, T1, T2)."""
    f = tp.get_runtime().config.frac_bits
    a, b = tp.share(A), tp.share(B)
    out, got = graphcheck.client_received(tf.function(_private_product_loop), a, b, tf.constant(2))
    tol = mul_tol(A, B, f) * np.abs(B) + mul_tol(A * B, B, f)
    np.testing.assert_allclose(out.reveal().numpy(), A * B * B, rtol=0, atol=np.max(tol))
    assert got == [], got


def test_loop_on_a_private_condition_is_refused():
    a = tp.share(A)
    with pytest.raises(tp.PlacementError, match="condition of a while loop.*public"):
        tf.function(lambda x: tf.while_loop(lambda v: tp.reduce_sum(v) < 30.0,
                                            lambda v: (v * 2.0,), (x,))[0])(a)

    def python_while(x):
        while tp.reduce_sum(x) < 30.0:
            x = x * 2.0
        return x

    with pytest.raises(TypeError, match="tp.cond"):
        tf.function(python_while)(a)


# ------------------------------------------------------------ conditionals
def _tf_cond(a, b, flag):
    return tf.cond(flag, lambda: a * b, lambda: a + b)


def _tf_case(a, b, flag):
    return tf.case([(flag, lambda: a * b)], default=lambda: a + b)


def _tf_switch_case(a, b, flag):
    return tf.switch_case(tf.cast(flag, tf.int32), [lambda: a + b, lambda: a * b])


def _autograph_if(a, b, flag):
    if flag:
        c = a * b
    else:
        c = a + b
    return c


def _cond_returning_a_capture(a, b, flag):
    return tf.cond(flag, lambda: a, lambda: b)


CONDS = {"tf_cond": _tf_cond, "tf_case": _tf_case, "tf_switch_case": _tf_switch_case,
         "autograph_if": _autograph_if, "returning_a_capture": _cond_returning_a_capture}


@pytest.mark.parametrize("name", sorted(CONDS))
def test_conditionals_returning_private_values_are_refused(name):
    """TF merges a conditional's outputs on one device: refused at trace
    time, before anything runs, pointing to tp.cond."""
    a, b = tp.share(A), tp.share(B)
    with pytest.raises(tp.PlacementError, match="tp.cond"):
        tf.function(CONDS[name]).get_concrete_function(a, b, tf.TensorSpec([], tf.bool))


def test_conditionals_on_a_private_predicate_are_refused():
    a, b = tp.share(A), tp.share(B)
    with pytest.raises(TypeError, match="tp.cond"):
        tf.function(lambda x, y: tf.cond(tp.reduce_sum(x) < 1.0, lambda: x, lambda: y))(a, b)
    with pytest.raises(TypeError, match="branch_index"):  # TF's own check
        tf.function(lambda x, y: tf.switch_case(tp.reduce_sum(x), [lambda: x, lambda: y]))(a, b)

    def autograph_if(x, y):
        if tp.reduce_sum(x) < 1.0:
            return x
        return y

    with pytest.raises(TypeError, match="tp.cond"):
        tf.function(autograph_if)(a, b)


def test_a_conditional_returning_revealed_values_runs():
    """Branches may read shares (their ops run on the servers); only
    private outputs are refused."""
    a, b = tp.share(A), tp.share(B)
    fn = tf.function(lambda x, y, flag: tf.cond(flag, lambda: tp.reveal(x + y),
                                                lambda: tp.reveal(x - y)))
    f = tp.get_runtime().config.frac_bits
    np.testing.assert_allclose(fn(a, b, tf.constant(True)).numpy(), A + B, atol=linear_tol(f))
    np.testing.assert_allclose(fn(a, b, tf.constant(False)).numpy(), A - B, atol=linear_tol(f))


@pytest.mark.parametrize("flag", [True, False])
def test_tp_cond_public_predicate(ring, flag):
    """Both branches run; each holder keeps its share of the chosen one (the
    predicate reaches S1 and S2 through the channel): exact selection, no
    share on the client. Eagerly the known predicate runs one branch."""
    f = tp.get_runtime().config.frac_bits
    a, b = tp.share(A), tp.share(B)
    want = A * B if flag else A + B
    tol = mul_tol(A, B, f) if flag else linear_tol(f)
    fn = tf.function(lambda x, y, p: tp.cond(p, lambda: x * y, lambda: x + y))
    out, got = graphcheck.client_received(fn, a, b, tf.constant(flag))
    np.testing.assert_allclose(out.reveal().numpy(), want, rtol=0, atol=np.max(tol))
    assert got == [], got
    eager = tp.cond(tf.constant(flag), lambda: a * b, lambda: a + b)
    np.testing.assert_allclose(eager.reveal().numpy(), want, rtol=0, atol=np.max(tol))
    # nested structures, and a public value in one branch
    out = tf.function(lambda x, p: tp.cond(p, lambda: {"v": x, "w": 1.0},
                                           lambda: {"v": 2.0, "w": x}))(a, tf.constant(flag))
    np.testing.assert_allclose(out["v"].reveal().numpy(), A if flag else 2.0,
                               atol=linear_tol(f))
    np.testing.assert_allclose(out["w"].reveal().numpy(), 1.0 if flag else A,
                               atol=linear_tol(f))


def test_tp_cond_private_predicate(ring):
    """A private predicate selects obliviously (tp.where)."""
    f = tp.get_runtime().config.frac_bits
    a, b = tp.share(A), tp.share(B)
    for x in (A, -A):
        px = tp.share(x)
        fn = tf.function(lambda v, y: tp.cond(tp.reduce_sum(v) < 0.0, lambda: v * y,
                                              lambda: v - y))
        out, got = graphcheck.client_received(fn, px, b)
        want = x * B if x.sum() < 0 else x - B
        np.testing.assert_allclose(out.reveal().numpy(), want, rtol=0,
                                   atol=np.max(mul_tol(x, B, f)))
        assert got == [], got
    with pytest.raises(ValueError, match="tp.where"):
        tp.cond(a < b, lambda: a, lambda: b)  # not a scalar


def _scaled(x, t):
    """A branch written outside the traced function, with a Python `if` on a
    public tensor: only AutoGraph makes it a graph."""
    k = 1.0
    if t > 0.0:
        k = 3.0
    return x * k


def test_tp_cond_branches_are_converted_like_tf_conds():
    """AutoGraph leaves the library as written (next test), but a user's
    branch is converted as tf.cond's would be (a lambda written inside the
    traced function is converted with it; a function from elsewhere is not):
    _scaled's `if` becomes a public tf.cond. Broken variant (control_flow.cond
    without its tf_convert): OperatorNotAllowedInGraphError, "using a
    tf.Tensor as a Python bool is not allowed"."""
    a = tp.share(A)
    fn = tf.function(lambda x, t: tp.cond(t > -1.0, functools.partial(_scaled, x, t),
                                          lambda: x))
    f = tp.get_runtime().config.frac_bits
    for t, k in ((1.0, 3.0), (-0.5, 1.0)):
        np.testing.assert_allclose(fn(a, tf.constant(t)).reveal().numpy(), A * k, rtol=0,
                                   atol=np.max(public_mul_tol(A, k, f)))


def _library_conversions(monkeypatch, fn, *args) -> list:
    """The tf_privpy functions AutoGraph converted while tracing fn."""
    from tensorflow.python.autograph.impl import api as autograph_api
    from tensorflow.python.autograph.impl import conversion
    from tensorflow.python.autograph.pyct import cache
    # AutoGraph remembers what it let through unconverted: start afresh
    monkeypatch.setattr(conversion, "_ALLOWLIST_CACHE", cache.UnboundInstanceCache())
    seen, convert = [], autograph_api._convert_actual

    def spy(entity, program_ctx):
        seen.append(getattr(entity, "__module__", "") or "")
        return convert(entity, program_ctx)
    monkeypatch.setattr(autograph_api, "_convert_actual", spy)
    tf.function(fn).get_concrete_function(*args)
    return sorted({m for m in seen if m.split(".")[0] == "tf_privpy"})


def test_autograph_leaves_the_library_unconverted(monkeypatch):
    """A user's tf.function (AutoGraph on) calling the library's functions
    (tp ops are do_not_convert already): AutoGraph converts the user's
    function and none of tf_privpy's
    (runtime/calling.py's exclude_from_autograph: the first trace of
    sqrt_and_rsqrt took 14.5 CPU-s converted against 0.3). The same trace
    without the rule converts the library's functions: the check can fail."""
    from tensorflow.python.autograph.core import config as autograph_config

    from tf_privpy.protocols.mpc.api.ops import array_ops

    def user(v):   # a library function, as tests and the library's own steps call them
        return tp.nn.relu(array_ops.transpose(array_ops.reshape(v, [2, 4])) * v[:2]).reveal()

    v = tp.share(np.linspace(0.5, 4.0, 8))
    assert _library_conversions(monkeypatch, user, v) == []
    rules = tuple(r for r in autograph_config.CONVERSION_RULES if not r.matches("tf_privpy"))
    monkeypatch.setattr(autograph_config, "CONVERSION_RULES", rules)
    assert _library_conversions(monkeypatch, lambda w: user(w), v) != []


# --------------------------------------------------- sequences, datasets
#: construct -> (error, what its message must say): each says what to do.
#: tf.vectorized_map of private elements and tf.map_fn with a private
#: fn_output_signature used to stop at TF's own BatchableTypeSpec checks
#: ("map_fn can not generate ...", "must provide a `BatchableTypeSpec`"),
#: which say nothing of what to do; PrivateTensor.Spec is now registered as
#: one and refuses batching itself (value.py).
SEQUENCES = {
    "map_fn": (lambda a: tf.map_fn(lambda r: r * 2.0, a), TypeError, "tf.range"),
    "map_fn_private_output": (lambda a: tf.map_fn(
        lambda r: a * r, tf.ones([2, 4]), fn_output_signature=tf.type_spec_from_value(a)),
        TypeError, "tf.range"),
    "scan": (lambda a: tf.scan(lambda acc, r: acc + r, a), TypeError, "tf.range"),
    "foldl": (lambda a: tf.foldl(lambda acc, r: acc + r, a), TypeError, "tf.range"),
    "vectorized_map": (lambda a: tf.vectorized_map(lambda r: r * 2.0, a), TypeError,
                       "tf.range"),
    "vectorized_map_private_output": (lambda a: tf.vectorized_map(lambda r: a * r,
                                                                  tf.ones([2, 4])),
                                      TypeError, "tf.range"),
    "dataset_of_private": (lambda a: tf.data.Dataset.from_tensors(a), TypeError, "tf.data"),
}


def _dataset_loop(a):
    for _ in tf.data.Dataset.range(3):
        a = a * 0.5 + 1.0
    return a


SEQUENCES["dataset_loop"] = (_dataset_loop, TypeError, "tf.range")


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_sequence_constructs_are_refused(name):
    """Each refused while tracing, ours with what to do instead (a Python or
    tf.range loop, or the whole batch at once)."""
    fn, error, says = SEQUENCES[name]
    with pytest.raises(error, match=says):
        tf.function(fn)(tp.share(A))


# ---------------------------------------------------------------- the guard
def _misplaced(x):
    """A deliberately broken op: S1's share reshaped with no device scope."""
    y = tp.reshape(x, [2, 2])
    return tp.PrivateTensor(share0=tf.reshape(x.share0, y.share0.shape), share1=y.share1,
                            ring_bits=y.ring_bits, frac_bits=y.frac_bits,
                            value_dtype=y.value_dtype, runtime_id=y.runtime_id)


def test_guard_refuses_a_misplaced_op():
    """Refused while tracing, naming the op and the holder, before any run:
    an argument's share, a share computed inside, and a conditional over a
    PrivateTensor captured from outside (small: by value, large: by
    placeholder; no tp op in the function)."""
    a = tp.share(A)
    with pytest.raises(tp.PlacementError, match=r"'Reshape.*' \(Reshape\) reads .* held by S1"):
        tf.function(_misplaced).get_concrete_function(a)
    with pytest.raises(tp.PlacementError, match=r"\(Neg\) reads .* held by S2"):
        tf.function(lambda x: tf.negative(x.share1)).get_concrete_function(a)
    # a PrivateTensor captured from outside, small or large (both captured
    # through placeholders: test_small_captured_shares_stay_on_their_servers),
    # and no tp op in the function: the conditional is refused
    big = tp.share(np.ones(300))
    for captured in (a, big):
        with pytest.raises(tp.PlacementError, match="tp.cond"):
            tf.function(lambda p: tf.cond(p, lambda: captured, lambda: captured)
                        ).get_concrete_function(tf.TensorSpec([], tf.bool))
    with pytest.raises(tp.PlacementError, match=r"\(AddV2\) reads"):
        tf.function(lambda x: (x * 2.0).share0 + 1).get_concrete_function(a)


def _int64_constants(graph):
    """The values of every int64 Const in a traced graph and the functions it calls."""
    out = [tf.make_ndarray(op.get_attr("value")) for op in graph.get_operations()
           if op.type == "Const" and op.get_attr("dtype") == tf.int64]
    for fn in graph._functions.values():  # pylint: disable=protected-access
        out += [tf.make_ndarray(n.attr["value"].tensor) for n in fn.definition.node_def
                if n.op == "Const" and n.attr["dtype"].type == tf.int64.as_datatype_enum]
    return out


def test_small_captured_shares_stay_on_their_servers():
    """TF 2.14 captures an eager tensor of up to 128 elements by value: it
    reads it (.numpy()) while tracing, in the driver's process, and puts it in
    the graph as a Const. A PrivateTensor of 4 elements captured from outside
    a tf.function thus brought both shares to the driver at trace time (on the
    code before placement.capture_shares_by_reference: both shares appeared
    as int64 Consts of the traced graph, and this test failed on its first
    assertion). Now every server's int64 tensor is captured through a
    placeholder and reaches the function where it lives."""
    a = tp.share(A)
    shares = [a.share0.numpy(), a.share1.numpy()]
    fn = tf.function(lambda: a * 2.0 + a)
    consts = _int64_constants(fn.get_concrete_function().graph)
    assert not any(c.shape == s.shape and np.array_equal(c, s) for c in consts for s in shares)
    out, got = graphcheck.client_received(fn)
    assert got == []
    np.testing.assert_allclose(tp.reveal(out).numpy(), 3.0 * A,
                               atol=np.max(public_mul_tol(A, 2.0, _f(None))))


def test_guard_allows_what_the_api_does():
    """share, reveal, products, comparisons and a sort loop trace and run."""
    a = tp.share(A)
    out = tf.function(lambda v, w: tp.reveal(tp.sort(tp.share(v) * w)))(A, a)
    np.testing.assert_allclose(out.numpy(), np.sort(A * A),
                               atol=np.max(mul_tol(A, A, tp.get_runtime().config.frac_bits)))
