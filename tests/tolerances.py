"""Test tolerances, in one place, derived from the fixed-point precision.

With f fractional bits (ulp = 2^-f):
- encoding rounds to nearest: |enc(x) - x| <= ulp/2;
- local truncation of a product (PrivPy §5.2) floors each share: the two
  truncated shares add up to floor(xy·2^f)/2^f or one ulp less (or more), so
  a truncation adds at most 1 ulp (2 with the -(-z>>f) rule's rounding);
- a product of encoded values: |x̃ỹ - xy| <= (|x| + |y|)·ulp/2 + ulp²/4.

Everything below is these bounds with nothing added. A peer tests at 5 %
relative error; these tolerances are exact to the last bits.
"""
import numpy as np

TRUNC_ULPS = 2  # at most 2 ulps lost by one local truncation


def ulp(frac_bits: int) -> float:
    return 2.0 ** -frac_bits


def encode_tol(frac_bits: int) -> float:
    return ulp(frac_bits) / 2


def linear_tol(frac_bits: int, n_terms: int = 2) -> float:
    """A sum/difference of n encoded values (no truncation)."""
    return n_terms * encode_tol(frac_bits)


def mul_tol(x, y, frac_bits: int) -> np.ndarray:
    """Elementwise product of two encoded values, then one truncation."""
    u = ulp(frac_bits)
    return (np.abs(x) + np.abs(y)) * u / 2 + u * u / 4 + TRUNC_ULPS * u


def matmul_tol(a, b, frac_bits: int) -> np.ndarray:
    """(a @ b) with encoded inputs: per-term product error summed over k,
    one truncation of the sum."""
    u = ulp(frac_bits)
    a, b = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    k = a.shape[-1]
    return (a @ np.ones_like(b) + np.ones_like(a) @ b) * u / 2 + k * u * u / 4 + TRUNC_ULPS * u


def public_mul_tol(x, c, frac_bits: int, c_frac_bits: int = None) -> np.ndarray:
    """x * c with x shared (f bits) and public c encoded with c_frac_bits."""
    u = ulp(frac_bits)
    uc = ulp(c_frac_bits if c_frac_bits is not None else frac_bits)
    return np.abs(c) * u / 2 + np.abs(x) * uc / 2 + u * uc / 4 + TRUNC_ULPS * u


def select_tol(levels: int, frac_bits: int) -> float:
    """Results of `levels` sequential oblivious selections (max, min, relu,
    where, compare-exchange). A selection multiplies by an exact bit (0 or
    2^f), so each costs only one local truncation: TRUNC_ULPS ulps."""
    return TRUNC_ULPS * levels * ulp(frac_bits)


#: accuracy target of one derived function (exp, log, sigmoid, ...) per ring
#: width, as tests/test_numerics.py enforces and docs/numerics.md measures:
#: DESIGN §3's 1e-4 with f = 20; with f = 16 the ulp is 16 times coarser and
#: no extra precision is available, so the 64-bit ring's target is 1e-3.
FUNCTION_TOL = {128: 1e-4, 64: 1e-3}


def composed_tol(ring_bits: int, frac_bits: int, n_functions: int, levels: int = 0) -> float:
    """A composition of n derived functions, each applied where the next one
    has a Lipschitz constant <= 1 (softplus: exp on x <= 0, whose outputs lie
    in (0, 1], then log on [1, 2]): their errors add, plus `levels` local
    truncations (selections, products by public constants)."""
    return n_functions * FUNCTION_TOL[ring_bits] + select_tol(levels, frac_bits)


# ---------------------------------------------------- converted Keras models
#: absolute error of an activation per ring: 128-bit, the enforced target;
#: 64-bit (no enforced target), docs/numerics.md's measured maxima over the
#: functions' domains (sigmoid 1.42e-3, tanh 3.67e-3, softmax 7.7e-5), rounded up
ACTIVATION_TOL = {128: {"sigmoid": 1e-4, "tanh": 1e-4, "softmax": 1e-4},
                  64: {"sigmoid": 1.5e-3, "tanh": 4e-3, "softmax": 1e-4}}

def _abs_apply(layer, v):
    """The layer's linear part applied with |weights| to a non-negative v."""
    import tensorflow as tf
    kind = type(layer).__name__
    if kind == "Dense":
        return v @ np.abs(layer.kernel.numpy())
    if kind in ("Conv2D", "DepthwiseConv2D"):
        w = np.abs((layer.depthwise_kernel if kind == "DepthwiseConv2D" else layer.kernel
                    ).numpy()).astype(np.float64)
        v = np.asarray(v, np.float64)
        pad = layer.padding.upper()
        if kind == "Conv2D":
            return tf.nn.conv2d(v, w, layer.strides, pad).numpy()
        return tf.nn.depthwise_conv2d(v, w, (1,) + tuple(layer.strides) + (1,), pad).numpy()
    raise ValueError(kind)


def keras_tol(model, x, frac_bits: int, ring_bits: int) -> np.ndarray:
    """An error bound for the outputs of a converted Sequential model on x,
    propagated layer by layer from the bounds above: a linear layer maps an
    input error e to |W|·e plus its own product rounding (matmul_tol with the
    plaintext activations and weights) plus the bias' encoding; ReLU and
    max-pooling are 1-Lipschitz plus their selections' truncations; BatchNorm
    is folded to x·a + b; sigmoid is 1/4-Lipschitz, tanh and softmax
    1-Lipschitz, each plus its ACTIVATION_TOL."""
    import tensorflow as tf
    u = ulp(frac_bits)
    act = np.asarray(x, np.float64)
    err = np.full(act.shape, encode_tol(frac_bits))
    for layer in model.layers:
        kind = type(layer).__name__
        out = layer(act.astype(np.float32), training=False).numpy().astype(np.float64)
        if kind in ("Dense", "Conv2D", "DepthwiseConv2D"):
            w = np.abs((layer.depthwise_kernel if kind == "DepthwiseConv2D"
                        else layer.kernel).numpy())
            k = int(np.prod(w.shape[:-1])) if kind != "Dense" else w.shape[0]
            rounding = (_abs_apply(layer, np.abs(act)) + _abs_apply(layer, np.ones_like(act))
                        ) * u / 2 + k * u * u / 4 + TRUNC_ULPS * u
            err = _abs_apply(layer, err) + rounding + (encode_tol(frac_bits)
                                                         if layer.use_bias else 0)
            act_name = layer.get_config().get("activation", "linear")
        elif kind == "BatchNormalization":
            g, b, m, var = (v.numpy().astype(np.float64) for v in layer.weights)
            a = g / np.sqrt(var + layer.epsilon)
            err = np.abs(a) * err + mul_tol(act, a, frac_bits) + encode_tol(frac_bits)
            act_name = "linear"
        elif kind == "MaxPooling2D":
            p = layer.pool_size
            err = tf.nn.max_pool2d(err, p, layer.strides, layer.padding.upper()).numpy() + \
                select_tol(int(np.ceil(np.log2(p[0] * p[1]))), frac_bits)
            act_name = "linear"
        elif kind in ("AveragePooling2D", "GlobalAveragePooling2D"):
            # an exact sum of n values, then a product by the public 1/n
            n = (int(np.prod(layer.pool_size)) if kind == "AveragePooling2D"
                 else act.shape[1] * act.shape[2])
            pooled = (tf.nn.avg_pool2d(err, layer.pool_size, layer.strides,
                                       layer.padding.upper()) if kind == "AveragePooling2D"
                      else tf.reduce_mean(err, [1, 2])).numpy()
            err = pooled + public_mul_tol(out * n, 1.0 / n, frac_bits)
            act_name = "linear"
        elif kind == "GlobalMaxPooling2D":
            n = act.shape[1] * act.shape[2]
            err = err.max(axis=(1, 2)) + select_tol(int(np.ceil(np.log2(n))), frac_bits)
            act_name = "linear"
        elif kind in ("Flatten", "Reshape", "Dropout", "InputLayer", "ZeroPadding2D"):
            err = layer(err.astype(np.float32), training=False).numpy().astype(np.float64) \
                if kind != "InputLayer" else err
            act_name = "linear"
        elif kind == "Rescaling":
            err = err * abs(layer.scale) + public_mul_tol(act, layer.scale, frac_bits) + \
                encode_tol(frac_bits)
            act_name = "linear"
        elif kind in ("Activation", "ReLU"):
            act_name = "relu" if kind == "ReLU" else layer.get_config()["activation"]
        else:
            raise ValueError(f"keras_tol does not know {kind}")
        if act_name == "relu":
            err = err + select_tol(1, frac_bits)
        elif act_name == "sigmoid":
            err = err / 4 + ACTIVATION_TOL[ring_bits]["sigmoid"]
        elif act_name in ("tanh", "softmax"):
            # softmax: each output moves by at most the largest input error
            e = err.max(axis=-1, keepdims=True) if act_name == "softmax" else err
            err = np.broadcast_to(e, out.shape) + ACTIVATION_TOL[ring_bits][act_name]
        elif act_name != "linear":
            raise ValueError(f"keras_tol does not know activation {act_name}")
        act = out
    return err


def sgd_tol(w0, grads, lr: float, frac_bits: int) -> np.ndarray:
    """w_n = w_0 - lr·g_1 - ... - lr·g_n kept in a tp.Variable (values kept
    as float64, so reveal adds no float32 rounding): sharing w_0 costs one
    encoding; each step's lr·g_k is a product of the encoded g_k by the
    encoded public lr with one local truncation (public_mul_tol); assigning
    a share and subtracting are exact in the ring, so nothing else is lost
    and the step errors simply add up."""
    tol = encode_tol(frac_bits) + np.zeros(np.shape(w0))
    for g in grads:
        tol = tol + public_mul_tol(g, lr, frac_bits)
    return tol
