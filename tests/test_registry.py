"""The op registry (protocols/mpc/api/registry.py): every tp.* function and every
dispatched TF API resolves to an entry, lookups by TF op type, costs from the
protocols' declarations, and the generated supported-ops table."""
import inspect
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.util import dispatch as tf_dispatch
from tensorflow.python.util import tf_inspect

import tf_privpy as tp
from tf_privpy.protocols.mpc.runtime import cost
from tf_privpy.protocols.mpc.api import dispatch, registry
from tf_privpy.protocols.mpc.api.value import PrivateTensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_supported_ops as G  # noqa: E402

#: tp.* functions that are not ops: the runtime, checkpoints of tp.Variables, the converter
RUNTIME_API = {"init", "reset", "servers", "check_servers", "client_devices", "get_runtime",
               "is_initialized", "stats", "cost", "save_variables", "restore_variables", "convert",
               "profile", "load", "publish", "comparison",   # tp.comparison: a runtime scope
               "function",  # tp.function: tf.function called without Grappler
               "share_to_disk",  # tp.LargeArray's owner-side sharing (tf_privpy/large)
               "cond"}  # control flow over callables (tp.cond), like tf.cond: not a tensor op


def _functions(module):
    for name in module.__all__:
        obj = getattr(module, name)
        if callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj):
            yield name, obj


@pytest.mark.parametrize("module,prefix", [(tp, ""), (tp.nn, "nn."), (tp.math, "math.")])
def test_every_tp_function_is_a_registry_entry(module, prefix):
    impls = {id(op.impl) for op in registry.ops()}
    for name, fn in _functions(module):
        if module is tp and name in RUNTIME_API:
            continue
        assert id(fn) in impls, f"tp.{prefix}{name} is not from the registry"
        assert registry.get(prefix + name).impl is fn


def test_tp_namespaces_keep_their_names():
    """The public names before the registry, plus the issue's new ops."""
    for name in ("matmul", "share", "reveal", "where", "sort", "multiply_many", "divide",
                 "garble_comparisons", "tensordot", "square", "pow", "clip_by_value"):
        assert callable(getattr(tp, name)), name
    for name in ("relu", "conv2d", "avg_pool2d", "max_pool2d", "max_pool2d_relu", "softmax",
                 "log_softmax", "sigmoid", "tanh", "softplus", "bias_add",
                 "sigmoid_cross_entropy_with_logits"):
        assert callable(getattr(tp.nn, name)), name
    for name in ("log", "reciprocal", "rsqrt", "top_k", "exp", "square"):
        assert callable(getattr(tp.math, name)), name


def test_every_dispatched_tf_api_resolves_to_its_entry():
    sigs = tf_dispatch._TYPE_BASED_DISPATCH_SIGNATURES
    for api, op in registry.tf_apis():
        assert registry.get(op.name) is op
        targets = sigs.get(api.api, {})
        assert any(getattr(t, "__name__", "").startswith("private_") for t in targets), api.name


def test_every_other_dispatchable_tf_api_is_refused():
    dispatched = {a.api for a, _ in registry.tf_apis()}
    for api in tf_dispatch.apis_with_type_based_dispatch():
        has_params = any(n != "name" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                         for n, p in inspect.signature(api).parameters.items())
        assert api in dispatched or api in dispatch.REFUSED or not has_params, api


def test_refusers_read_tf_dispatch_s_own_signatures():
    """dispatch.positional_parameters reads the wrapped function's code object
    instead of inspect.signature (import time): it must name the parameters
    TF's dispatch indexes (tf_inspect.signature), for every dispatchable API,
    and each refuser must be registered at each of them."""
    sigs = tf_dispatch._TYPE_BASED_DISPATCH_SIGNATURES
    for api in tf_dispatch.apis_with_type_based_dispatch():
        want = [p.name for p in tf_inspect.signature(api).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert dispatch.positional_parameters(api) == want, api
        if api in dispatch.REFUSED:
            got = [n for t, ss in sigs[api].items() if t.__name__ == "refuse"
                   for s in ss for n in s]
            assert got == [n for n in want if n != "name"], api


def test_a_refused_api_names_itself_and_the_tp_equivalent_at_any_position():
    x = tp.share([1.0, 2.0])
    with pytest.raises(TypeError, match=r"tf.image.transpose does not accept .*tp.transpose"):
        tf.image.transpose(x)
    with pytest.raises(TypeError, match=r"tf.math.lgamma is not supported on PrivateTensors"):
        tf.math.lgamma(x=x)
    with pytest.raises(TypeError, match=r"tf.math.squared_difference"):
        tf.math.squared_difference(tf.constant([1.0, 2.0]), x)   # the second parameter


def test_lookup_by_tf_op_type():
    assert registry.by_tf_op("MatMul") is registry.get("matmul")
    assert registry.by_tf_op("BatchMatMulV2") is registry.get("matmul")
    assert registry.by_tf_op("Relu") is registry.get("nn.relu")
    assert registry.by_tf_op("Conv2D") is registry.get("nn.conv2d")
    assert registry.by_tf_op("AddV2") is registry.get("add") is registry.get("math.add")
    assert registry.by_tf_op("Cumprod") is None
    with pytest.raises(KeyError, match="supported_ops"):
        registry.get("no_such_op")


def test_registering_twice_is_refused():
    op = registry.get("matmul")
    with pytest.raises(ValueError, match="twice"):
        registry.register(op)


def test_operators_come_from_the_registry():
    for dunder in ("__add__", "__radd__", "__sub__", "__mul__", "__truediv__", "__matmul__",
                   "__pow__", "__neg__", "__abs__", "__lt__", "__ge__", "__getitem__", "reveal"):
        assert dunder in vars(PrivateTensor), dunder
    x = tp.share([[1.0, -2.0]])
    np.testing.assert_allclose((abs(-x) ** 2)[0, 1:].reveal(), [4.0], atol=1e-4)


@pytest.mark.parametrize("a,b,out", [((2, 3), (3, 4), (2, 4)), ((5, 1), (1, 7), (5, 7)),
                                     ((2, 4, 3), (2, 3, 2), (2, 4, 2))])
def test_matmul_cost_is_the_multiplication_declaration(a, b, out):
    bits = tp.get_runtime().config.ring_bits
    want = cost.mul_cost(a, b, out, bits)
    op = registry.get("matmul")
    assert op.cost(registry.Private(a), registry.Private(b)).as_dict() == want.as_dict()
    # TensorSpecs stand for private operands too
    assert op.cost(tf.TensorSpec(a), tf.TensorSpec(b)).as_dict() == want.as_dict()


@pytest.mark.parametrize("name,args", [
    ("add", (registry.Private((3, 4)), registry.Private((3, 4)))),
    ("add", (registry.Private((3, 4)), 2.0)),
    ("reshape", (registry.Private((3, 4)), [4, 3])),
    ("transpose", (registry.Private((3, 4)),)),
    ("nn.bias_add", (registry.Private((2, 3)), registry.Private((3,)))),
])
def test_local_ops_cost_nothing(name, args):
    """Local ops send nothing between servers and take no round. A public
    operand is the client program's data: it reaches the share holder that
    adds it (S1) through the channel, and the bill says so."""
    c = registry.get(name).cost(*args)
    assert c.rounds == 0 and c.multiplications == 0 and c.comparisons == 0
    public = [a for a in args if not isinstance(a, registry.Private)
              and name not in ("reshape", "transpose")]
    if public:  # the scalar 2.0 in float64, once, to S1 (broadcast there)
        assert {k: tuple(v) for k, v in c.links.items()} == {("client", "S1"): (1, 8)}
    else:
        assert c.messages == 0 and c.bytes == 0


def test_cost_traces_without_running():
    """A cost query only traces: every message the channel sees is a
    symbolic graph tensor, none is an eager value that was sent."""
    seen = []
    with tp.get_runtime().runtime.observe(lambda src, dst, t: seen.append(t)):
        c = registry.get("multiply").cost(registry.Private((4,)), registry.Private((4,)))
    assert c.multiplications == 4 and c.rounds == 2
    assert seen and not any(isinstance(t, type(tf.constant(0))) for t in seen)


def test_every_op_has_a_working_example():
    for op in registry.ops():
        ex = op.example()
        assert isinstance(ex, registry.Example), op.name
        assert op.doc and "\n" not in op.doc and op.doc.endswith("."), op.name
    # a few run for real on sampled values
    for name in ("matmul", "nn.max_pool2d", "clip_by_value", "where", "concat"):
        op = registry.get(name)
        ex = registry.sample(op.example())
        out = op.impl(*ex.args, **ex.kwargs)
        assert isinstance(out, PrivateTensor), name


def test_supported_ops_doc_is_generated():
    """docs/supported_ops.md and README's table are the generator's output
    (`make docs` regenerates them)."""
    doc, readme = G.generate()
    with open(G.OUT) as f:
        assert f.read() == doc, "docs/supported_ops.md is stale: run `make docs`"
    with open(G.README) as f:
        assert f.read() == readme, "README.md's supported-ops table is stale: run `make docs`"
