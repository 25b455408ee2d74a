"""Conv2DBackpropInput and Conv2DBackpropFilter on private operands against
TF's own, over strides, kernel sizes and paddings: the strided ones go
through the polyphase adapters (grad_adapters._strided_input_grad and
_filter_grad: no dilated dy), the stride-1 ones through one plain conv2d.
Each within its op-table row's tolerance (1e-5 in the default 128-bit
ring: the products of one conv2d, each truncated once), plus what
revealing in float32 rounds away, as tests/test_op_table.py."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.api import registry

R = tf.raw_ops

#: (input H, W, C; filter kh, kw, O; strides sh, sw; padding)
CASES = [
    ((9, 8, 2), (3, 3, 3), (2, 2), "SAME"),     # SAME pads unevenly at odd sizes
    ((9, 8, 2), (3, 3, 3), (2, 2), "VALID"),    # rows no window reaches
    ((12, 11, 1), (5, 5, 2), (2, 2), "SAME"),   # network D's 5x5 stride 2
    ((7, 9, 2), (2, 3, 2), (3, 2), "VALID"),    # stride above the kernel's height
    ((8, 8, 1), (4, 4, 2), (4, 4), "VALID"),    # patches: stride = kernel
    ((6, 7, 2), (1, 1, 1), (2, 3), "SAME"),     # a strided 1x1
    ((5, 6, 2), (3, 2, 2), (1, 1), "SAME"),     # stride 1: the plain path
]


@pytest.mark.parametrize("shape,kernel,strides,padding", CASES,
                         ids=[f"{s[0]}x{s[1]}-k{k[0]}x{k[1]}-s{t[0]}x{t[1]}-{p}"
                              for s, k, t, p in CASES])
def test_conv_gradients_equal_tf(shape, kernel, strides, padding):
    rng = np.random.default_rng(7)
    (h, w, c), (kh, kw, o), (sh, sw) = shape, kernel, strides
    n = 2
    x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    f = rng.uniform(-1, 1, (kh, kw, c, o)).astype(np.float32)
    y = tf.nn.conv2d(x, f, [1, sh, sw, 1], padding)
    dy = rng.uniform(-1, 1, y.shape).astype(np.float32)
    geo = dict(strides=[1, sh, sw, 1], padding=padding, data_format="NHWC")

    def grads(x, f, dy):
        return [R.Conv2DBackpropInput(input_sizes=[n, h, w, c], filter=f, out_backprop=dy,
                                      **geo),
                R.Conv2DBackpropFilter(input=x, filter_sizes=[kh, kw, c, o], out_backprop=dy,
                                       **geo)]

    fn = tf.function(grads)
    specs = [tf.TensorSpec(v.shape, tf.float32) for v in (x, f, dy)]
    private = tp.convert(fn, specs, passes=False, policy=tp.Policy(owner_side=False))
    got = private.predict([x, f, dy], reveal=True)
    want = fn(x, f, dy)
    for name, g, v in zip(("Conv2DBackpropInput", "Conv2DBackpropFilter"), got, want):
        g, v = np.asarray(g, np.float64), np.asarray(v, np.float64)
        assert g.shape == v.shape, name
        tol = registry.converter_row(name).tolerance
        err = np.max(np.abs(g - v))
        assert err <= tol + 1e-6 * max(1.0, np.max(np.abs(v))), f"{name}: error {err:.3g}"
