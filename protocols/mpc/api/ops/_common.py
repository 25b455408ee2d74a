"""Helpers shared by the op modules: operand coercion, wrapping, dtypes."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import tensorflow as tf

from ...runtime import context as _context
from ..value import PrivateTensor, check_runtime

#: dtypes the fixed-point encoder accepts directly (others are cast to float64)
ENCODABLE = (tf.float32, tf.float64, tf.int32, tf.int64)
_DTYPE_ORDER = (tf.bool, tf.int32, tf.int64, tf.float32, tf.float64)


def is_private(v) -> bool:
    return isinstance(v, PrivateTensor)


def _python_floats(v) -> bool:
    """A Python float, or a (nested) list/tuple holding one."""
    if isinstance(v, float):
        return True
    return isinstance(v, (list, tuple)) and any(_python_floats(u) for u in v)


def public(v) -> tf.Tensor:
    """A public operand as a tensor the encoder accepts.

    Python floats (and lists of them) become float64, exact: TF's default
    float32 would round 1000.1 by 3e-5 and 1/3 by 2^-25 relative, tens of
    ulps of the 128-bit ring's 2^-20 grid. The result's dtype still follows
    TF's conversion (`operand_dtype`)."""
    t = tf.constant(v, tf.float64) if _python_floats(v) else tf.convert_to_tensor(v)
    if t.dtype == tf.bool:
        t = tf.cast(t, tf.int32)
    if t.dtype not in ENCODABLE:
        t = tf.cast(t, tf.float64)
    return t


def operand_dtype(v) -> tf.DType:
    """The dtype an operand gives a result: a PrivateTensor's own, else what
    tf.convert_to_tensor makes of it (float32 for Python floats, as in TF)."""
    if is_private(v):
        return v.dtype
    if _python_floats(v):
        return tf.float32
    dtype = getattr(v, "dtype", None)
    try:
        return tf.as_dtype(dtype) if dtype is not None else tf.convert_to_tensor(v).dtype
    except TypeError:
        return tf.convert_to_tensor(v).dtype


def result_dtype(*dtypes: tf.DType) -> tf.DType:
    known = [d for d in dtypes if d in _DTYPE_ORDER]
    return max(known, key=_DTYPE_ORDER.index) if known else tf.float32


def handle_of(*values) -> _context.Handle:
    """The runtime handle, checked against every private operand."""
    h = None
    for v in values:
        if is_private(v):
            h = check_runtime(v)
    return h or _context.get_handle()


def shares(p: PrivateTensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """p's shares in fixed point. The bits a comparison returns are held as
    integer shares (0/1, frac_bits 0) so that selects need no truncation
    (issue 15); they become fixed point here, where they enter arithmetic
    or change form, by an exact local multiplication by 2^f."""
    if p.frac_bits == 0 and p.value_dtype == tf.bool:
        h = _context.get_handle()
        if h.config.frac_bits:
            return h.backend.fixed_from_bits((p.share0, p.share1))
    return p.share0, p.share1


def bit_shares(p: PrivateTensor) -> Tuple[Tuple[tf.Tensor, tf.Tensor], bool]:
    """(p's shares as held, whether they are integer bits): for the ops that
    use a private bit as a bit (tp.where, logical_not), which then multiply
    without truncation."""
    return (p.share0, p.share1), p.frac_bits == 0 and p.value_dtype == tf.bool


def wrap(h: _context.Handle, s, dtype: tf.DType) -> PrivateTensor:
    return PrivateTensor(share0=s[0], share1=s[1], ring_bits=h.config.ring_bits,
                         frac_bits=h.config.frac_bits, value_dtype=dtype,
                         runtime_id=h.runtime.id)


def wrap_bits(h: _context.Handle, s) -> PrivateTensor:
    """A private boolean from integer bit shares (0/1, no 2^f scale)."""
    return PrivateTensor(share0=s[0], share1=s[1], ring_bits=h.config.ring_bits,
                         frac_bits=0, value_dtype=tf.bool, runtime_id=h.runtime.id)


def static_shape(v) -> tf.TensorShape:
    return v.shape if is_private(v) else tf.convert_to_tensor(v).shape


def broadcast_shape(a: tf.TensorShape, b: tf.TensorShape, what: str) -> tf.TensorShape:
    try:
        return tf.broadcast_static_shape(a, b)
    except ValueError as e:
        raise ValueError(f"{what}: shapes {a} and {b} cannot be broadcast together") from e


def broadcast(h: _context.Handle, v, shape: tf.TensorShape):
    """Broadcasts a private or public operand to `shape` (static)."""
    if v.shape == shape:
        return v
    if not shape.is_fully_defined():
        raise ValueError(f"broadcasting to a partially known shape {shape} is not "
                         "supported; give the tensors static shapes")
    if is_private(v):
        from ...runtime import shares as sh
        held, integer = bit_shares(v)  # a structural op keeps integer bits integer
        s = h.backend.map_shares(lambda t: sh.broadcast_to(t, shape.as_list(),
                                                           h.config.limbs), held)
        return wrap_bits(h, s) if integer else wrap(h, s, v.dtype)
    return tf.broadcast_to(v, shape)


def recip_frac_bits(h: _context.Handle, c: tf.Tensor) -> Optional[int]:
    """Extra-precision encoding for multiplying by 1/c, when it is safe.

    In the 128-bit ring, |x| < 2^23 and |1/c| <= 1 leave room for 20 more
    fractional bits in the public factor (|x|·2^f·2^(f+20) < 2^83, so local
    truncation still fails with probability < 2^-44), which makes x / c as
    exact as the encoding of x instead of losing |x|·2^-21.
    """
    if h.config.ring_bits != 128:
        return None
    cv = tf.get_static_value(c)
    if cv is None:
        return None
    import numpy as np
    if np.size(cv) and np.min(np.abs(cv)) >= 1:
        return h.config.frac_bits + 20
    return None


def normalize_axes(axes: Sequence[int], rank: int) -> list:
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    return out
