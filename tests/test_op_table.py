"""The op registry is the converter's one op table (issue 25): every TF op
type a row names converts through that row's adapter and computes what TF
computes within the row's tolerance; the converter accepts exactly those op
types; the generated supported-ops table lists every one of them.

Every op type appears in one small tf.function per input family (raw TF ops,
so that gradient and fused ops appear as they do in a traced training step
or a Keras model), converted once with the passes off (they would fold some
op types away) and run once."""
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.converters import rewrite
from tf_privpy.converters.trace import private_nodes, reads_private
from tf_privpy.protocols.mpc.api import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_supported_ops as G  # noqa: E402

R = tf.raw_ops
F = 20  # fractional bits of the default config: inputs on its grid encode exactly


def _grid(a):
    return (np.round(np.asarray(a, np.float64) * 2.0 ** F) / 2.0 ** F).astype(np.float32)


def _vectors():
    """x, y in [-2, 2), pos in [0.5, 4), each [2, 3]; entries distinct (no ties)."""
    rng = np.random.default_rng(7)
    x, y = (_grid(rng.permutation(np.linspace(-1.9, 1.9, 6)).reshape(2, 3) + d)
            for d in (0.013, -0.029))
    pos = _grid(rng.uniform(0.5, 4.0, (2, 3)))
    return x, y, pos


def vector_ops(x, y, pos):
    """op type -> output(s) of one node of that type on private operands."""
    lt = R.Less(x=x, y=y)
    labels = tf.constant([[0.0, 1.0, 0.0], [0.25, 0.25, 0.5]])
    return {
        "Add": R.Add(x=x, y=y), "AddV2": R.AddV2(x=x, y=y), "Sub": R.Sub(x=x, y=y),
        "Mul": R.Mul(x=x, y=y), "RealDiv": R.RealDiv(x=x, y=pos),
        "Maximum": R.Maximum(x=x, y=y), "Minimum": R.Minimum(x=x, y=y), "Less": lt,
        "Greater": R.Greater(x=x, y=y), "LessEqual": R.LessEqual(x=x, y=y),
        "GreaterEqual": R.GreaterEqual(x=x, y=y), "Equal": R.Equal(x=x, y=x),
        "NotEqual": R.NotEqual(x=x, y=y), "Pow": R.Pow(x=x, y=tf.constant(3.0)),
        "LogicalNot": R.LogicalNot(x=lt), "Select": R.Select(condition=lt, x=x, y=y),
        "SelectV2": R.SelectV2(condition=lt, t=x, e=y),
        "Neg": R.Neg(x=x), "Abs": R.Abs(x=x), "Sign": R.Sign(x=x), "Square": R.Square(x=x),
        "Relu": R.Relu(features=x), "Relu6": R.Relu6(features=x * 4.0),
        "LeakyRelu": R.LeakyRelu(features=x, alpha=0.3), "Softplus": R.Softplus(features=x),
        "Sigmoid": R.Sigmoid(x=x), "Tanh": R.Tanh(x=x), "Exp": R.Exp(x=x),
        "Log": R.Log(x=pos), "Sqrt": R.Sqrt(x=pos), "Rsqrt": R.Rsqrt(x=pos),
        "Reciprocal": R.Reciprocal(x=pos), "Inv": R.Inv(x=pos), "Erf": R.Erf(x=x),
        "ClipByValue": R.ClipByValue(t=x, clip_value_min=-1.0, clip_value_max=1.0),
        "Identity": R.Identity(input=x), "StopGradient": R.StopGradient(input=x),
        "PreventGradient": R.PreventGradient(input=x), "Snapshot": R.Snapshot(input=x),
        "IdentityN": R.IdentityN(input=[x, y]),
        "MatMul": R.MatMul(a=x, b=y, transpose_b=True),
        "Einsum": R.Einsum(inputs=[x, y], equation="ij,kj->ki"),
        "BatchMatMul": R.BatchMatMul(x=x[None], y=y[None], adj_y=True),
        "BatchMatMulV2": R.BatchMatMulV2(x=x, y=y, adj_y=True),
        "Sum": R.Sum(input=x, axis=1), "Mean": R.Mean(input=x, axis=1, keep_dims=True),
        "Max": R.Max(input=x, axis=1), "Min": R.Min(input=x, axis=0),
        "ArgMax": R.ArgMax(input=x, dimension=1), "ArgMin": R.ArgMin(input=x, dimension=0),
        "TopKV2": R.TopKV2(input=x, k=2),
        "Softmax": R.Softmax(logits=x), "LogSoftmax": R.LogSoftmax(logits=x),
        "Reshape": R.Reshape(tensor=x, shape=[3, 2]),
        "Shape": R.Reshape(tensor=y, shape=R.Shape(input=x)),
        "ShapeN": R.Reshape(tensor=x, shape=R.ShapeN(input=[x, y])[1]),
        "Transpose": R.Transpose(x=x, perm=[1, 0]), "ExpandDims": R.ExpandDims(input=x, axis=0),
        "Squeeze": R.Squeeze(input=x[:, None], axis=[1]),
        "Pad": R.Pad(input=x, paddings=[[1, 0], [0, 1]]),
        "PadV2": R.PadV2(input=x, paddings=[[0, 1], [1, 0]], constant_values=0.0),
        "ConcatV2": R.ConcatV2(values=[x, y], axis=0), "Pack": R.Pack(values=[x, y], axis=1),
        "Tile": R.Tile(input=x, multiples=[1, 2]),
        "GatherV2": R.GatherV2(params=x, indices=[2, 0], axis=1),
        "BroadcastTo": R.BroadcastTo(input=x[:1], shape=[2, 3]),
        "StridedSlice": x[1:, ::2], "Slice": R.Slice(input=x, begin=[0, 1], size=[2, 2]),
        "Split": R.Split(axis=0, value=x, num_split=2),
        "SplitV": R.SplitV(value=x, size_splits=[1, -1], axis=1, num_split=2),
        "Unpack": R.Unpack(value=x, num=2, axis=0), "ReverseV2": R.ReverseV2(tensor=x, axis=[1]),
        **tensor_list_ops(x, y),
        # a training step's gradient, loss and bookkeeping ops
        "ReluGrad": R.ReluGrad(gradients=y, features=x),
        "SigmoidGrad": R.SigmoidGrad(y=x, dy=y), "TanhGrad": R.TanhGrad(y=x, dy=y),
        "SoftmaxCrossEntropyWithLogits": R.SoftmaxCrossEntropyWithLogits(
            features=x, labels=labels),
        "SparseSoftmaxCrossEntropyWithLogits": R.SparseSoftmaxCrossEntropyWithLogits(
            features=x, labels=tf.constant([1, 2])),
        "SquaredDifference": R.SquaredDifference(x=x, y=y), "AddN": R.AddN(inputs=[x, y, x]),
        "Cast": R.Cast(x=x, DstT=tf.float64),
        "DivNoNan": R.DivNoNan(x=x, y=tf.constant([2.0, 0.0, 4.0])),
        "ZerosLike": x + R.ZerosLike(x=x), "OnesLike": x * R.OnesLike(x=x),
        "Size": x * tf.cast(R.Size(input=x), x.dtype),
        "Rank": x + tf.cast(R.Rank(input=x), x.dtype),
    }


def tensor_list_ops(x, y):
    """The TensorList ops of Keras's recurrent layers (held densely by the
    converter), on private elements; a reserved list with an unknown
    element shape takes its shape from its first write."""
    f32 = tf.float32
    lst = R.TensorListFromTensor(tensor=x, element_shape=[3])
    stack = lambda h: R.TensorListStack(input_handle=h, element_shape=[-1],  # noqa: E731
                                        element_dtype=f32)
    empty = R.TensorListReserve(element_shape=[-1], num_elements=2, element_dtype=f32)
    filled = R.TensorListSetItem(input_handle=R.TensorListSetItem(
        input_handle=empty, index=1, item=x[0]), index=0, item=y[1])
    return {
        "TensorListFromTensor": stack(R.TensorListFromTensor(tensor=y, element_shape=[3])),
        "TensorListGetItem": R.TensorListGetItem(input_handle=lst, index=1, element_shape=[3],
                                                 element_dtype=f32),
        "TensorListSetItem": stack(R.TensorListSetItem(input_handle=lst, index=0, item=y[1])),
        "TensorListStack": stack(filled),
        "TensorListLength": x * tf.cast(R.TensorListLength(input_handle=lst), f32),
    }


def _images():
    rng = np.random.default_rng(8)
    img = _grid(rng.permutation(np.linspace(-1.9, 1.9, 32)).reshape(1, 4, 4, 2))
    return (img,)


def _weights():
    rng = np.random.default_rng(9)
    w = lambda *s, lo=-1.0, hi=1.0: tf.Variable(_grid(rng.uniform(lo, hi, s)))  # noqa: E731
    return dict(conv=w(2, 2, 2, 3), dw=w(2, 2, 2, 2), bias=w(2), scale=w(2), offset=w(2),
                mean=w(2), var=w(2, lo=0.5, hi=2.0))


def image_ops(img, W):
    nhwc = dict(strides=[1, 1, 1, 1], padding="VALID")
    conv = R.Conv2D(input=img, filter=W["conv"], **nhwc)
    pooled = R.MaxPool(input=img, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    bn = dict(x=img, scale=W["scale"], offset=W["offset"], mean=W["mean"],
              variance=W["var"], epsilon=1e-3, is_training=False)
    return {
        "Conv2D": conv, "BiasAdd": R.BiasAdd(value=img, bias=W["bias"]),
        "BiasAddV1": R.BiasAddV1(value=img, bias=W["bias"]),
        "DepthwiseConv2dNative": R.DepthwiseConv2dNative(input=img, filter=W["dw"], **nhwc),
        "FusedBatchNorm": R.FusedBatchNorm(**bn)[0],
        "FusedBatchNormV2": R.FusedBatchNormV2(**bn)[0],
        "FusedBatchNormV3": R.FusedBatchNormV3(**bn)[0],
        "MaxPool": pooled,
        "ResizeNearestNeighbor": R.ResizeNearestNeighbor(images=img, size=[6, 7],
                                                         half_pixel_centers=True),
        "AvgPool": R.AvgPool(value=img, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                             padding="VALID"),
        "BiasAddGrad": R.BiasAddGrad(out_backprop=img),
        "MaxPoolGrad": R.MaxPoolGrad(orig_input=img, orig_output=pooled, grad=pooled,
                                     ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                     padding="VALID"),
        "Conv2DBackpropInput": R.Conv2DBackpropInput(
            input_sizes=[1, 4, 4, 2], filter=W["conv"], out_backprop=conv, **nhwc),
        "Conv2DBackpropFilter": R.Conv2DBackpropFilter(
            input=img, filter_sizes=[2, 2, 2, 3], out_backprop=conv, **nhwc),
    }


def _convert_and_compare(ops, inputs):
    """Converts the function returning ops(*inputs), checks that each op
    type reached the converter on a private value, and compares each output
    with TF's within its row's tolerance; returns the op types checked."""
    names = sorted(ops(*[tf.constant(v) for v in inputs]))
    # one flat output list: (op type, tensor) for each output of each case
    keys = [(k, i) for k, v in sorted(ops(*[tf.constant(v) for v in inputs]).items())
            for i in range(len(tf.nest.flatten(v)))]
    fn = tf.function(lambda *a: (lambda out: [tf.nest.flatten(out[k])[i] for k, i in keys])(
        ops(*a)))
    specs = [tf.TensorSpec(v.shape, tf.float32) for v in inputs]
    # on shares: by default the data owner would compute these ops on its
    # own input before sharing (Policy.owner_side)
    private = tp.convert(fn, specs, passes=False, policy=tp.Policy(owner_side=False))
    traced = private._traced
    private_ = private_nodes(traced, private.policy)
    seen = {n.op for n in traced.graph_def.node if reads_private(n, private_)}
    assert set(names) <= seen, f"not converted on a private value: {set(names) - seen}"
    got = private.predict(list(inputs) if len(inputs) > 1 else inputs[0], reveal=True)
    want = fn(*[tf.constant(v) for v in inputs])
    assert len(got) == len(want) == len(keys)
    for (name, _), g, w in zip(keys, got, want):
        tol = registry.converter_row(name).tolerance
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g.shape == w.shape, name
        err = np.max(np.abs(g - w), initial=0.0)
        # + what revealing in float32 rounds away
        assert err <= tol + 1e-6 * max(1.0, np.max(np.abs(w), initial=0.0)), \
            f"{name}: error {err:.3g} > tolerance {tol:.3g}"
    return set(names)


#: the derived functions: their private graphs take most of the tracing time
#: (about a minute on 2 loaded cores), so they run in the slow half
DERIVED = {"Exp", "Log", "Sqrt", "Rsqrt", "Reciprocal", "Inv", "RealDiv", "Sigmoid", "Tanh", "Erf",
           "Softplus", "Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
           "SparseSoftmaxCrossEntropyWithLogits"}


def _only(ops, keep):
    return lambda *a: {k: v for k, v in ops(*a).items() if keep(k)}


def test_the_cases_cover_every_tf_op_type_of_the_table():
    """A new row's TF op type needs a case here (run eagerly in plaintext)."""
    W = _weights()
    cases = set(vector_ops(*map(tf.constant, _vectors())))
    cases |= set(image_ops(*map(tf.constant, _images()), W))
    assert cases == set(registry.tf_op_types())
    assert DERIVED <= cases


def test_every_tf_op_type_of_the_table_converts_within_its_tolerance():
    """Each TF op type a row of the op table names (but the derived
    functions, below) is converted through its row's adapter and computes
    what TF computes within the row's stated tolerance."""
    W = _weights()
    checked = _convert_and_compare(_only(vector_ops, lambda k: k not in DERIVED), _vectors())
    checked |= _convert_and_compare(lambda img: image_ops(img, W), _images())
    assert checked == set(registry.tf_op_types()) - DERIVED


@pytest.mark.slow
def test_every_derived_tf_op_type_converts_within_its_tolerance():
    assert _convert_and_compare(_only(vector_ops, DERIVED.__contains__), _vectors()) == DERIVED


def test_the_converter_reads_its_adapters_from_the_table():
    assert tp.converters.supported_ops() == registry.tf_op_types()
    for t in registry.tf_op_types():
        row = registry.converter_row(t)
        assert rewrite.lookup(t) is row.adapter is not None, t
        assert (row.impl is None) == (registry.by_tf_op(t) is None), t
    assert rewrite.lookup("Cumprod") is None and registry.converter_row("Cumprod") is None


def test_the_generated_table_lists_every_op_type_the_converter_accepts():
    """Read from docs/supported_ops.md as committed: test_registry's
    test_supported_ops_doc_is_generated checks that the file is the
    generator's output, so together they check the generated table without
    generating it a second time (one generate() costs ~20 s of tracing)."""
    with open(G.OUT) as f:
        doc = f.read()
    for t in tp.converters.supported_ops():
        assert f"`{t}`" in doc, f"{t} is missing from docs/supported_ops.md"
    for row in registry.ops() + registry.converter_rows():
        if row.domain:
            assert row.domain.replace("|", "\\|") in doc, row.name


def test_a_row_with_tf_op_types_needs_an_adapter():
    row = registry.OpDef("no_adapter", None, "Nothing.", None, ("NoSuchOp",))
    with pytest.raises(ValueError, match="adapter"):
        registry.register(row)
    assert registry.converter_row("NoSuchOp") is None


def test_importing_the_command_line_module_keeps_tp_convert_the_function():
    """`import tf_privpy.convert` (the module of `python -m tf_privpy.convert`)
    used to rebind tp.convert to that module (tp.convert(...) then raised
    "'module' object is not callable"; seen failing on the old code)."""
    import importlib
    fn = tp.convert
    importlib.import_module("tf_privpy.convert")
    import tf_privpy.convert  # noqa: F401
    assert tp.convert is fn and callable(tp.convert)
