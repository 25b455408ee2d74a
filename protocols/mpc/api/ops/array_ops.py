"""Shape operations on PrivateTensors. All local: each server reshapes,
slices or pads its own share; no message, no randomness."""
from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from . import _common as C
from ..value import PrivateTensor
from ...runtime import shares as sh


def _map(x: PrivateTensor, fn) -> PrivateTensor:
    h = C.handle_of(x)
    limbs = h.config.limbs
    return C.wrap(h, h.backend.map_shares(lambda s: fn(s, limbs), C.shares(x)), x.dtype)


def _many(values: Sequence, fn, what: str) -> PrivateTensor:
    values = list(values)
    if not values:
        raise ValueError(f"{what} needs at least one tensor")
    h = C.handle_of(*values)
    dtype = C.result_dtype(*[C.operand_dtype(v) for v in values])
    if not all(C.is_private(v) for v in values):
        # Public members are shared as public constants (share 1 holds zero).
        values = [v if C.is_private(v) else _public_as_private(h, v) for v in values]
    limbs = h.config.limbs
    s = h.backend.map_many(lambda parts: fn(parts, limbs), [C.shares(v) for v in values])
    return C.wrap(h, s, dtype)


def _public_as_private(h, v) -> PrivateTensor:
    c, dtype = C.public(v), C.operand_dtype(v)
    zero = C.wrap(h, h.backend.local(
        lambda party: tf.zeros(sh.storage(c.shape.as_list(), h.config.limbs), tf.int64)), dtype)
    return C.wrap(h, h.backend.add_public(C.shares(zero), c), dtype)


def reshape(x: PrivateTensor, shape, name: Optional[str] = None) -> PrivateTensor:
    """tf.reshape for a PrivateTensor."""
    if not C.is_private(x):
        return tf.reshape(x, shape, name=name)
    shape = list(shape) if isinstance(shape, (list, tuple, tf.TensorShape)) else shape
    return _map(x, lambda s, l: sh.reshape(s, shape, l))


def transpose(x: PrivateTensor, perm=None, name: Optional[str] = None) -> PrivateTensor:
    """tf.transpose for a PrivateTensor (default: reverse the axes)."""
    if not C.is_private(x):
        return tf.transpose(x, perm, name=name)
    return _map(x, lambda s, l: sh.transpose(s, perm, l))


def identity(x: PrivateTensor, name: Optional[str] = None) -> PrivateTensor:
    """x itself (tf.identity; tf.keras.activations.linear). Shares are
    immutable values, so no copy is needed.

    Example:
      >>> tp.identity(tp.share([1.0])).reveal()   # [1.]
    """
    if not C.is_private(x):
        return tf.identity(x, name=name)
    return x


def getitem(x: PrivateTensor, key) -> PrivateTensor:
    """Indexing and slicing with TensorFlow's semantics (x[1:, ..., None])."""
    return _map(x, lambda s, l: sh.getitem(s, key, l))


def concat(values: Sequence, axis: int, name: Optional[str] = None) -> PrivateTensor:
    """tf.concat of PrivateTensors (public members are allowed)."""
    return _many(values, lambda parts, l: sh.concat(parts, axis, l), "tp.concat")


def stack(values: Sequence, axis: int = 0, name: Optional[str] = None) -> PrivateTensor:
    """tf.stack of PrivateTensors."""
    return _many(values, lambda parts, l: sh.stack(parts, axis, l), "tp.stack")


def tile(x: PrivateTensor, multiples: Sequence[int], name: Optional[str] = None):
    """tf.tile for a PrivateTensor."""
    if len(multiples) != x.shape.rank:
        raise ValueError(f"tp.tile: multiples {list(multiples)} must have one entry per "
                         f"dimension of {x.shape}")
    return _map(x, lambda s, l: sh.tile(s, multiples, l))


def repeat(x: PrivateTensor, repeats, axis: Optional[int] = None, name: Optional[str] = None):
    """tf.repeat for a PrivateTensor (axis None: flatten first)."""
    return _map(x, lambda s, l: sh.repeat(s, repeats, axis, l))


def expand_dims(x: PrivateTensor, axis: int, name: Optional[str] = None) -> PrivateTensor:
    """tf.expand_dims for a PrivateTensor."""
    return _map(x, lambda s, l: sh.expand_dims(s, axis, l))


def squeeze(x: PrivateTensor, axis=None, name: Optional[str] = None) -> PrivateTensor:
    """tf.squeeze for a PrivateTensor."""
    return _map(x, lambda s, l: sh.squeeze(s, axis, l))


def pad(x: PrivateTensor, paddings, mode: str = "CONSTANT", constant_values=0,
        name: Optional[str] = None) -> PrivateTensor:
    """Zero padding (tf.pad with mode CONSTANT and constant_values 0)."""
    if mode.upper() != "CONSTANT" or constant_values != 0:
        raise ValueError("tp.pad supports zero padding only (mode='CONSTANT', "
                         "constant_values=0); add a public constant afterwards if needed")
    return _map(x, lambda s, l: sh.pad(s, paddings, l))


def gather(x: PrivateTensor, indices, axis: int = 0, name: Optional[str] = None):
    """tf.gather with public indices."""
    return _map(x, lambda s, l: sh.gather(s, indices, axis, l))


def broadcast_to(x: PrivateTensor, shape, name: Optional[str] = None) -> PrivateTensor:
    """tf.broadcast_to for a PrivateTensor."""
    return _map(x, lambda s, l: sh.broadcast_to(s, list(shape), l))
