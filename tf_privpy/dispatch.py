"""TensorFlow API dispatch: tf.matmul, tf.add, ... accept PrivateTensors.

Registered once on import with tf.experimental.dispatch_for_api; a call
with any PrivateTensor argument in a dispatched position runs the private
implementation, every other call is TensorFlow's own.
"""
from __future__ import annotations

import typing

import tensorflow as tf

from tf_privpy import array_ops, compare_ops, math_fns, math_ops
from tf_privpy.private_tensor import PrivateTensor

P = PrivateTensor
_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    _registered = True
    d = tf.experimental.dispatch_for_api

    @d(tf.math.add, {"x": P}, {"y": P})
    def _add(x, y, name=None):
        return math_ops.add(x, y, name=name)

    @d(tf.math.subtract, {"x": P}, {"y": P})
    def _sub(x, y, name=None):
        return math_ops.subtract(x, y, name=name)

    @d(tf.math.multiply, {"x": P}, {"y": P})
    def _mul(x, y, name=None):
        return math_ops.multiply(x, y, name=name)

    @d(tf.math.negative, {"x": P})
    def _neg(x, name=None):
        return math_ops.negative(x, name=name)

    @d(tf.linalg.matmul, {"a": P}, {"b": P})
    def _matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
                a_is_sparse=False, b_is_sparse=False, output_type=None, name=None):
        return math_ops.matmul(a, b, transpose_a=transpose_a or adjoint_a,
                               transpose_b=transpose_b or adjoint_b, name=name)

    @d(tf.tensordot, {"a": P}, {"b": P})
    def _tensordot(a, b, axes, name=None):
        return math_ops.tensordot(a, b, axes, name=name)

    @d(tf.math.reduce_sum, {"input_tensor": P})
    def _reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
        return math_ops.reduce_sum(input_tensor, axis, keepdims, name=name)

    @d(tf.math.reduce_mean, {"input_tensor": P})
    def _reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
        return math_ops.reduce_mean(input_tensor, axis, keepdims, name=name)

    @d(tf.reshape, {"tensor": P})
    def _reshape(tensor, shape, name=None):
        return array_ops.reshape(tensor, shape, name=name)

    @d(tf.transpose, {"a": P})
    def _transpose(a, perm=None, conjugate=False, name="transpose"):
        return array_ops.transpose(a, perm)

    @d(tf.concat, {"values": typing.List[P]})
    def _concat(values, axis, name="concat"):
        return array_ops.concat(values, axis)

    @d(tf.stack, {"values": typing.List[P]})
    def _stack(values, axis=0, name="stack"):
        return array_ops.stack(values, axis)

    @d(tf.expand_dims, {"input": P})
    def _expand_dims(input, axis, name=None):
        return array_ops.expand_dims(input, axis)

    @d(tf.squeeze, {"input": P})
    def _squeeze(input, axis=None, name=None):
        return array_ops.squeeze(input, axis)

    @d(tf.tile, {"input": P})
    def _tile(input, multiples, name=None):
        return array_ops.tile(input, multiples)

    @d(tf.pad, {"tensor": P})
    def _pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
        return array_ops.pad(tensor, paddings, mode, constant_values)

    for api, impl in ((tf.math.less, compare_ops.less), (tf.math.greater, compare_ops.greater),
                      (tf.math.less_equal, compare_ops.less_equal),
                      (tf.math.greater_equal, compare_ops.greater_equal),
                      (tf.math.maximum, compare_ops.maximum),
                      (tf.math.minimum, compare_ops.minimum)):
        d(api, {"x": P}, {"y": P})(_binary(impl))

    @d(tf.nn.relu, {"features": P})
    def _relu(features, name=None):
        return compare_ops.relu(features)

    @d(tf.math.abs, {"x": P})
    def _abs(x, name=None):
        return compare_ops.abs(x)

    @d(tf.math.sign, {"x": P})
    def _sign(x, name=None):
        return compare_ops.sign(x)

    @d(tf.math.reduce_max, {"input_tensor": P})
    def _reduce_max(input_tensor, axis=None, keepdims=False, name=None):
        return compare_ops.reduce_max(input_tensor, axis, keepdims)

    @d(tf.math.reduce_min, {"input_tensor": P})
    def _reduce_min(input_tensor, axis=None, keepdims=False, name=None):
        return compare_ops.reduce_min(input_tensor, axis, keepdims)

    @d(tf.where, {"condition": P}, {"x": P}, {"y": P})
    def _where(condition, x=None, y=None, name=None):
        return compare_ops.where(condition, x, y)

    @d(tf.math.argmax, {"input": P})
    def _argmax(input, axis=None, output_type=tf.int64, name=None):
        return compare_ops.argmax(input, 0 if axis is None else axis, output_type)

    @d(tf.sort, {"values": P})
    def _sort(values, axis=-1, direction="ASCENDING", name=None):
        return compare_ops.sort(values, axis, direction)

    for api, impl in ((tf.math.exp, math_fns.exp), (tf.math.log, math_fns.log),
                      (tf.math.sqrt, math_fns.sqrt), (tf.math.rsqrt, math_fns.rsqrt),
                      (tf.math.reciprocal, math_fns.reciprocal),
                      (tf.math.sigmoid, math_fns.sigmoid), (tf.math.tanh, math_fns.tanh)):
        d(api, {"x": P})(_unary(impl))

    @d(tf.math.divide, {"x": P}, {"y": P})
    def _divide(x, y, name=None):
        return math_fns.divide(x, y)

    @d(tf.math.truediv, {"x": P}, {"y": P})
    def _truediv(x, y, name=None):
        return math_fns.divide(x, y)

    @d(tf.math.equal, {"x": P}, {"y": P})
    def _equal(x, y, name=None):
        return compare_ops.equal(x, y)

    @d(tf.math.not_equal, {"x": P}, {"y": P})
    def _not_equal(x, y, name=None):
        return compare_ops.not_equal(x, y)

    @d(tf.nn.softmax, {"logits": P})
    def _softmax(logits, axis=None, name=None):
        return math_fns.softmax(logits, -1 if axis is None else axis)

    @d(tf.nn.log_softmax, {"logits": P})
    def _log_softmax(logits, axis=None, name=None):
        return math_fns.log_softmax(logits, -1 if axis is None else axis)

    @d(tf.math.top_k, {"input": P})
    def _top_k(input, k=1, sorted=True, index_type=tf.int32, name=None):
        return compare_ops.top_k(input, k, sorted)

    @d(tf.math.argmin, {"input": P})
    def _argmin(input, axis=None, output_type=tf.int64, name=None):
        return compare_ops.argmin(input, 0 if axis is None else axis, output_type)

    @d(tf.nn.max_pool2d, {"input": P})
    def _max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
        from tf_privpy import nn
        return nn.max_pool2d(input, ksize, strides, padding, data_format)


def _unary(impl):
    def f(x, name=None):
        return impl(x)
    return f


def _binary(impl):
    def f(x, y, name=None):
        return impl(x, y)
    return f
