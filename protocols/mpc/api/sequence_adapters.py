"""Converter adapters of the ops Keras's recurrent layers (LSTM, GRU,
SimpleRNN) trace to, besides their loop (converters/loops.py): the
TensorList ops by which a loop reads its time steps and collects its
outputs, and Split, SplitV, Unpack and ReverseV2 (gates, biases,
go_backwards). Same contract as adapters.py.

A TensorList is held densely: a list of n elements is a value of shape
[n] + element shape, public (a tf.Tensor or numpy array) or a
PrivateTensor. Every index is public (a loop counter, a constant), so
reading or writing an element is a local gather or scatter of each share
on its holder: no message but the index's, which a holder receives from
the client's channel when it is computed there (a loop counter). An
element written is exactly the written value's sharing. A list reserved
with an element shape unknown when converting (the batch) stays a
`Reserved` marker until its first write says the shape.

These adapters serve the public lists too (the converter routes every
TensorList op here), so that one representation flows into a loop."""
from __future__ import annotations

import dataclasses
from typing import List, Optional

import numpy as np
import tensorflow as tf

from .adapters import Unsupported, impl, private, static
from .ops import _common as C
from .ops.array_ops import _public_as_private
from ..runtime import shares as sh



@dataclasses.dataclass
class Reserved:
    """An empty TensorList of n elements whose element shape may still have
    unknown dimensions (-1: Keras's batch), until an element is written."""

    n: int
    element_shape: Optional[List[Optional[int]]]
    dtype: tf.DType

    def known(self) -> Optional[List[int]]:
        s = self.element_shape
        return s if s is not None and all(d is not None for d in s) else None

    def zeros(self, what: str):
        shape = self.known()
        if shape is None:
            raise Unsupported(f"a {what} of a reserved TensorList no element of which was "
                              "written, with an element shape unknown when converting",
                              "write every element before reading the list")
        return np.zeros([self.n] + shape, self.dtype.as_numpy_dtype)


def _element_shape(env, v) -> Optional[List[Optional[int]]]:
    s = np.asarray(static(env, v, "element shape"))
    if s.ndim == 0:   # -1: unknown rank
        return None
    return [None if d < 0 else int(d) for d in s.tolist()]


def _index(h, index, party: int):
    """A public index on holder `party`: a constant made there, or a tensor
    of the client's program sent through the channel (declared)."""
    if isinstance(index, (np.ndarray, np.generic, int)):
        with h.backend.on(party):
            return tf.constant(np.asarray(index, np.int32))
    return h.backend.to_party(index, h.backend.holders[party])


def _get(x, index):
    if not private(x):
        return tf.gather(x, index, axis=0)
    h = C.handle_of(x)
    idx = [_index(h, index, i) for i in range(2)]
    s = h.backend.local(lambda s, party: tf.gather(s, idx[party], axis=0), C.shares(x))
    return C.wrap(h, s, x.dtype)


def _set(x, index, item):
    if not (private(x) or private(item)):
        i = tf.reshape(tf.cast(index, tf.int32), [1, 1])
        return tf.tensor_scatter_nd_update(x, i, tf.convert_to_tensor(item, x.dtype)[None])
    h = C.handle_of(x, item)
    x, item = [v if private(v) else _public_as_private(h, v) for v in (x, item)]
    idx = [_index(h, index, i) for i in range(2)]

    def put(s, t, party):
        i = tf.reshape(tf.cast(idx[party], tf.int32), [1, 1])
        return tf.tensor_scatter_nd_update(s, i, t[None])
    return C.wrap(h, h.backend.local(put, C.shares(x), C.shares(item)), x.dtype)


def private_zeros(shape: List[int], dtype) -> "C.PrivateTensor":
    """A sharing of zeros of a static shape, made on each holder (both
    shares zero: no message)."""
    h = C.handle_of()
    storage = sh.storage(list(shape), h.config.limbs)
    s = h.backend.local(lambda party: tf.zeros(storage, tf.int64))
    return C.wrap(h, s, dtype)


def _private_zeros(h, n: int, item, dtype):
    """A sharing of zeros of shape [n] + item's shape, made on each holder
    (both shares zero: no message, no randomness needed)."""
    def zeros(s, party):
        return tf.zeros(tf.concat([[n], tf.shape(s, out_type=tf.int32)], 0), tf.int64)
    return C.wrap(h, h.backend.local(zeros, C.shares(item)), dtype)


def from_tensor(env, node, ins):
    """TensorListFromTensor: the tensor is the list (elements along axis 0)."""
    return [env.operand(ins[0]) if private(ins[0]) else env.public(ins[0])]


def reserve(env, node, ins):
    n = int(static(env, ins[1], "number of elements"))
    if n < 0:
        raise Unsupported("a TensorList of a length unknown when converting",
                          "give the model static shapes (a fixed number of time steps)")
    return [Reserved(n, _element_shape(env, ins[0]), node.attr.get("element_dtype"))]


def get_item(env, node, ins):
    """TensorListGetItem by a public index: a local gather of each share."""
    lst, index = ins[0], env.public(ins[1])
    if private(index):
        raise Unsupported("a TensorList read at a private index",
                          "index with a public value (a loop counter)")
    if isinstance(lst, Reserved):
        lst = lst.zeros("read")
    return [_get(env.operand(lst), index)]


def set_item(env, node, ins):
    """TensorListSetItem at a public index: a local scatter of each share
    (a reserved list becomes zeros of the element's shape first)."""
    lst, index, item = ins[0], env.public(ins[1]), env.operand(ins[2])
    if private(index):
        raise Unsupported("a TensorList written at a private index",
                          "index with a public value (a loop counter)")
    if isinstance(lst, Reserved):
        if private(item):
            lst = _private_zeros(C.handle_of(item), lst.n, item, item.dtype)
        else:
            item = tf.convert_to_tensor(item, lst.dtype)
            lst = tf.zeros(tf.concat([[lst.n], tf.shape(item)], 0), lst.dtype)
    return [_set(lst, index, item)]


def stack(env, node, ins):
    """TensorListStack: the dense list itself."""
    lst = ins[0]
    if isinstance(lst, Reserved):
        return [lst.zeros("stack")]
    return [lst]


def length(env, node, ins):
    lst = ins[0]
    n = lst.n if isinstance(lst, Reserved) else lst.shape[0]
    if n is None:
        raise Unsupported("a TensorList of a length unknown when converting",
                          "give the model static shapes")
    return [np.asarray(n, np.int32)]


# ------------------------------------------------ gates, biases, reversal
def split(env, node, ins):
    """Split into num_split equal parts along a static axis: local slices."""
    axis, x = int(static(env, ins[0], "axis")), env.operand(ins[1])
    k = int(node.attr["num_split"])
    n = x.shape.as_list()[axis]
    if n is None or n % k:
        raise Unsupported(f"a split of an axis of size {n} into {k} parts",
                          "give the model static shapes")
    return _slices(x, axis, [n // k] * k)


def split_v(env, node, ins):
    """SplitV by static sizes (one may be -1: the rest) along a static axis."""
    x = env.operand(ins[0])
    sizes = [int(s) for s in static(env, ins[1], "sizes").tolist()]
    axis = int(static(env, ins[2], "axis"))
    n = x.shape.as_list()[axis]
    if n is None:
        raise Unsupported("a split of an axis of unknown size", "give the model static shapes")
    if -1 in sizes:
        sizes[sizes.index(-1)] = n - sum(s for s in sizes if s != -1)
    return _slices(x, axis, sizes)


def _slices(x, axis: int, sizes: List[int]) -> List:
    rank = x.shape.rank
    axis %= rank
    out, start = [], 0
    for s in sizes:
        key = (slice(None),) * axis + (slice(start, start + s),)
        out.append(impl("getitem")(x, key) if private(x) else x[key])
        start += s
    return out


def unpack(env, node, ins):
    """Unpack (tf.unstack) along a static axis: local slices."""
    x = env.operand(ins[0])
    axis = int(node.attr.get("axis", 0)) % x.shape.rank
    n = int(node.attr["num"])
    return [impl("getitem")(x, (slice(None),) * axis + (i,)) for i in range(n)]


def reverse(env, node, ins):
    """ReverseV2 along static axes (go_backwards): a local gather each."""
    x = env.operand(ins[0])
    for a in np.atleast_1d(static(env, ins[1], "axis")).tolist():
        n = x.shape.as_list()[a]
        if n is None:
            raise Unsupported("a reversal of an axis of unknown size",
                              "give the model static shapes")
        x = impl("gather")(x, np.arange(n - 1, -1, -1), int(a))
    return [x]



#: TensorList op type -> adapter: the converter runs these whatever their
#: inputs (public lists are held densely too); the registry's rows name
#: those that can see a private value (not TensorListReserve: its inputs
#: are a shape and a length)
LIST_ADAPTERS = {"TensorListFromTensor": from_tensor, "TensorListReserve": reserve,
                 "TensorListGetItem": get_item, "TensorListSetItem": set_item,
                 "TensorListStack": stack, "TensorListLength": length}
