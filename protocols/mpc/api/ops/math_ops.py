"""Arithmetic on PrivateTensors: sharing, revealing, + - * /, products, sums.

Products of two private operands run PrivPy's four-server multiplication
(DESIGN §5); products with a public operand are local, followed by local
truncation; sums and differences are always local.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from . import _common as C
from . import array_ops
from ..value import PrivateTensor
from ...runtime import shares as sh
from ...runtime.devscope import device_scope

TensorLike = Union[PrivateTensor, tf.Tensor, np.ndarray, float, int]


def share(x, name: Optional[str] = None, bits: bool = False,
          owner: Optional[str] = None) -> PrivateTensor:
    """Secret-shares x between S1 and S2.

    x is encoded in fixed point on the client device (range-checked: NaN, Inf
    or |x| >= the config's bound raise ValueError naming the tensor and the
    bound), split into two uniformly random-looking shares with a fresh seed
    from the OS CSPRNG, and each share is sent to its server.

    Args:
      x: a float32/float64/int32/int64 tensor or anything convertible to one.
      name: a name used in error messages (default: the tensor's name if any).
      bits: x holds only 0 and 1 (a one-hot the data owner made): shared as
        integer bits (no 2^f scale, a boolean PrivateTensor, as a
        comparison's bits are held), so a product by them needs no
        truncation and selects the other operand's encoding exactly.
      owner: the data owner who shares x: "client" (default) or a
        federated data owner "client1", ... (tp.init(num_clients=N)). x is
        encoded and split on that owner's device and its two shares go
        from there to S1 and S2 through its channels (x must already live
        on that device: a plaintext never moves between owners).

    Returns:
      A PrivateTensor that reveals to x's dtype (bool with bits=True).

    Example:
      >>> p = tp.share([[1.0, 2.0], [3.0, 4.0]], name="features")
    """
    h = C.handle_of()
    t = tf.convert_to_tensor(x)
    if bits and t.dtype == tf.bool:
        t = tf.cast(t, tf.int32)
    dtype = t.dtype
    if dtype not in C.ENCODABLE:
        raise TypeError(f"tp.share takes float32, float64, int32 or int64 values, got "
                        f"{dtype.name}" + (f" for '{name}'" if name else ""))
    label = name or ("" if tf.executing_eagerly() else t.name)
    owner = owner or "client"
    if owner not in h.runtime.devices or not owner.startswith("client"):
        raise ValueError(f"tp.share(owner={owner!r}): the owner must be a data owner of the "
                         f"runtime ('client', or 'client1', ... with tp.init(num_clients=N))")
    with device_scope(h.runtime.device(owner)):
        if bits:
            # unscaled (f = 0); the bound 2 refuses anything of magnitude >= 2
            encoded = _encode_checked(h, t, label, owner, frac_bits=0, bound=2.0)
        else:
            encoded = _encode_checked(h, t, label, owner)
        s = h.backend.share(encoded, owner) if owner != "client" else h.backend.share(encoded)
    return C.wrap_bits(h, s) if bits else C.wrap(h, s, dtype)


def _encode_checked(h, t: tf.Tensor, label: str, owner: str = "client",
                    **encoding) -> tf.Tensor:
    try:
        return h.backend.encode(t, owner, label, **encoding)
    except tf.errors.InvalidArgumentError as e:
        # Eager: a ValueError, as for any bad argument (in a graph the kernel's
        # InvalidArgumentError, which carries the same message, is raised at run).
        raise ValueError(_clean_tf_message(e.message)) from None


def _clean_tf_message(msg: str) -> str:
    """Drops TF's '{{function_node ...}}' prefix and '[Op:...]' suffix."""
    msg = re.sub(r"^\{\{[^}]*\}\}\s*", "", msg)
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", msg, flags=re.S)


def reveal(p: PrivateTensor, to: Optional[str] = None) -> tf.Tensor:
    """Reconstructs a PrivateTensor on the client device.

    Both servers send their share to the client, which adds and decodes them.
    Returns a tf.Tensor of the dtype that was shared (integers are rounded).
    `to`: a federated data owner ("client1", ...) who receives the value
    instead of the client (the aggregate of a federated round).

    Example:
      >>> tp.reveal(tp.share([1.0, 2.0]) * 2.0)
      <tf.Tensor: shape=(2,), dtype=float32, numpy=array([2., 4.], dtype=float32)>
    """
    if not C.is_private(p):
        raise TypeError(f"tp.reveal takes a PrivateTensor, got {type(p).__name__}")
    h = C.handle_of(p)
    to = to or "client"
    if to not in h.runtime.devices or not to.startswith("client"):
        raise ValueError(f"tp.reveal(to={to!r}): reveal to 'client' or a data owner "
                         "'client1', ... of tp.init(num_clients=N)")
    ring = h.backend.reveal(C.shares(p), to) if to != "client" else h.backend.reveal(C.shares(p))
    with device_scope(h.runtime.device(to)):
        x = h.backend.decode(ring, to) if to != "client" else h.backend.decode(ring)
        if p.dtype == tf.bool:
            return x > 0.5
        if p.dtype.is_integer:
            x = tf.round(x)
        return tf.cast(x, p.dtype)


# ----------------------------------------------------------------- add / sub
def _elementwise_prep(a, b, what):
    """(handle, a, b, result dtype): both operands broadcast, public ones as
    exact tensors; the dtype from the operands as given (C.operand_dtype)."""
    h = C.handle_of(a, b)
    dtype = C.result_dtype(C.operand_dtype(a), C.operand_dtype(b))
    shape = C.broadcast_shape(C.static_shape(a), C.static_shape(b), what)
    # A public operand stays as given: the backend broadcasts it on the
    # server after the transfer, so the client sends a scalar, not a tensor.
    a = C.broadcast(h, a, shape) if C.is_private(a) else C.public(a)
    b = C.broadcast(h, b, shape) if C.is_private(b) else C.public(b)
    return h, a, b, dtype


def add(x: TensorLike, y: TensorLike, name: Optional[str] = None) -> PrivateTensor:
    """x + y with broadcasting; local on each server (no messages).

    Example:
      >>> tp.add(tp.share([1.0, 2.0]), 1.0).reveal()   # [2., 3.]
    """
    if not (C.is_private(x) or C.is_private(y)):
        return tf.add(x, y, name=name)
    h, x, y, dtype = _elementwise_prep(x, y, "tp.add")
    if C.is_private(x) and C.is_private(y):
        return C.wrap(h, h.backend.add(C.shares(x), C.shares(y)), dtype)
    p, c = (x, y) if C.is_private(x) else (y, x)
    return C.wrap(h, h.backend.add_public(C.shares(p), c, name or ""), dtype)


def subtract(x: TensorLike, y: TensorLike, name: Optional[str] = None) -> PrivateTensor:
    """x - y with broadcasting; local on each server."""
    if not (C.is_private(x) or C.is_private(y)):
        return tf.subtract(x, y, name=name)
    h, x, y, dtype = _elementwise_prep(x, y, "tp.subtract")
    if C.is_private(x) and C.is_private(y):
        return C.wrap(h, h.backend.sub(C.shares(x), C.shares(y)), dtype)
    if C.is_private(x):
        return C.wrap(h, h.backend.add_public(C.shares(x), -y, name or ""), dtype)
    return C.wrap(h, h.backend.public_sub(x, C.shares(y), name or ""), dtype)


def negative(x: PrivateTensor, name: Optional[str] = None) -> PrivateTensor:
    """-x; local."""
    if not C.is_private(x):
        return tf.negative(x, name=name)
    h = C.handle_of(x)
    return C.wrap(h, h.backend.neg(C.shares(x)), x.dtype)


# ------------------------------------------------------------------ products
def multiply(x: TensorLike, y: TensorLike, name: Optional[str] = None) -> PrivateTensor:
    """Elementwise x * y with broadcasting.

    Private * private runs the four-server protocol (two rounds); private *
    public is local followed by local truncation.

    Example:
      >>> (tp.share([1.5, 2.0]) * tp.share([2.0, -1.0])).reveal()   # [3., -2.]
    """
    if not (C.is_private(x) or C.is_private(y)):
        return tf.multiply(x, y, name=name)
    h, x, y, dtype = _elementwise_prep(x, y, "tp.multiply")
    if C.is_private(x) and C.is_private(y):
        return C.wrap(h, h.backend.mul(C.shares(x), C.shares(y), "mul"), dtype)
    p, c = (x, y) if C.is_private(x) else (y, x)
    return C.wrap(h, h.backend.mul_public(C.shares(p), c, "mul", name=name or ""), dtype)


def multiply_many(pairs: Sequence[tuple]) -> list:
    """Independent private products [(x1, y1), (x2, y2), ...] in ONE protocol
    call: one kernel per step and device, one round trip for all of them.

    Example:
      >>> a, b = tp.multiply_many([(x, y), (u, v)])
    """
    if not pairs:
        return []
    h = C.handle_of(*[v for p in pairs for v in p])
    prepared, dtypes = [], []
    for x, y in pairs:
        if not (C.is_private(x) and C.is_private(y)):
            raise TypeError("tp.multiply_many takes pairs of PrivateTensors")
        _, x, y, dtype = _elementwise_prep(x, y, "tp.multiply_many")
        prepared.append((C.shares(x), C.shares(y)))
        dtypes.append(dtype)
    outs = h.backend.mul_many(prepared)
    return [C.wrap(h, s, d) for s, d in zip(outs, dtypes)]


def divide(x: PrivateTensor, y, name: Optional[str] = None) -> PrivateTensor:
    """x / y for a public y (multiplication by the encoded reciprocal).

    Division by a private value needs the private reciprocal, which comes
    with the comparison protocols.
    """
    if C.is_private(y):
        raise TypeError("math_ops.divide divides by public values; tp.divide handles a "
                        "private divisor")
    if not C.is_private(x):
        return tf.divide(x, y, name=name)
    h = C.handle_of(x)
    # 1/c in float64 (C.public keeps Python floats exact): a float32
    # reciprocal would carry a 2^-25 relative error, several ulps of x/c in
    # the 128-bit ring.
    c = tf.cast(C.public(y), tf.float64)
    shape = C.broadcast_shape(x.shape, c.shape, "tp.divide")
    x = C.broadcast(h, x, shape)
    recip = C.broadcast(h, 1.0 / c, shape)
    dtype = x.dtype if x.dtype.is_floating else tf.float64
    extra = C.recip_frac_bits(h, c)
    s = h.backend.mul_public(C.shares(x), recip, "mul", c_frac_bits=extra,
                             c_bound=None if extra is None else 1.0 + 2.0 ** -20, name=name or "")
    return C.wrap(h, s, dtype)


def _transpose_last2(v):
    r = C.static_shape(v).rank
    perm = list(range(r - 2)) + [r - 1, r - 2]
    return array_ops.transpose(v, perm) if C.is_private(v) else tf.transpose(v, perm)


def _private_size(v) -> Optional[int]:
    """Elements of a private operand (0 for a public one: transposing it is
    local plaintext work), None if its shape is not static."""
    if not C.is_private(v):
        return 0
    s = C.static_shape(v)
    return s.num_elements() if s.is_fully_defined() else None


def _swap_is_cheaper(a, b, transpose_a: bool, transpose_b: bool) -> bool:
    """Whether computing (op'(b)·op'(a))^T transposes fewer private
    elements than op(a)·op(b) (rank-2 operands with static shapes)."""
    sa, sb = C.static_shape(a), C.static_shape(b)
    if sa.rank != 2 or sb.rank != 2:
        return False
    na, nb = _private_size(a), _private_size(b)
    if na is None or nb is None:
        return False
    m = sa[1] if transpose_a else sa[0]
    n = sb[0] if transpose_b else sb[1]
    if m is None or n is None:          # a public operand of unknown shape
        return False
    out = m * n if (C.is_private(a) or C.is_private(b)) else 0
    direct = transpose_a * na + transpose_b * nb
    swapped = (not transpose_a) * na + (not transpose_b) * nb + out
    return swapped < direct


def matmul(a: TensorLike, b: TensorLike, transpose_a: bool = False,
           transpose_b: bool = False, name: Optional[str] = None) -> PrivateTensor:
    """Matrix product a @ b of rank >= 2 operands (batch dims broadcast).

    Two private operands: one run of the four-server protocol with ring
    matrix products on each device (S1 and S2 two each, T1 and T2 one).
    One public operand: a local ring matmul and truncation.

    Example:
      >>> tp.matmul(tp.share(tf.eye(2)), [[1.0], [2.0]]).reveal()   # [[1.], [2.]]
    """
    if not (C.is_private(a) or C.is_private(b)):
        return tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)
    h = C.handle_of(a, b)
    dtype = C.result_dtype(C.operand_dtype(a), C.operand_dtype(b))
    a = a if C.is_private(a) else C.public(a)
    b = b if C.is_private(b) else C.public(b)
    sa, sb = C.static_shape(a), C.static_shape(b)
    if sa.rank is None or sb.rank is None or sa.rank < 2 or sb.rank < 2:
        raise ValueError(f"tp.matmul needs operands of rank >= 2, got shapes {sa} and {sb}; "
                         "use tp.tensordot or tp.dot for vectors")
    if (transpose_a or transpose_b) and _swap_is_cheaper(a, b, transpose_a, transpose_b):
        # op(a)·op(b) = (op'(b)·op'(a))^T: transpose the smaller operands
        # and the result instead of a large private operand (the gradient
        # x^T·g of a dense layer: g and the result, not the batch x)
        return _transpose_last2(matmul(b, a, transpose_a=not transpose_b,
                                       transpose_b=not transpose_a, name=name))
    if transpose_a:
        a = _transpose_last2(a)
        sa = C.static_shape(a)
    if transpose_b:
        b = _transpose_last2(b)
        sb = C.static_shape(b)
    if sa[-1] is not None and sb[-2] is not None and sa[-1] != sb[-2]:
        raise ValueError(f"tp.matmul: inner dimensions differ: {sa} @ {sb}")
    batch = C.broadcast_shape(sa[:-2], sb[:-2], "tp.matmul batch dimensions")
    a = C.broadcast(h, a, batch.concatenate(sa[-2:]))
    b = C.broadcast(h, b, batch.concatenate(sb[-2:]))
    if C.is_private(a) and C.is_private(b):
        (ha, ia), (hb, ib) = C.bit_shares(a), C.bit_shares(b)
        if ia != ib:
            # one operand holds integer bits (a comparison's, or a one-hot
            # shared as bits): the ring product with the other's fixed-point
            # shares is fixed point already, so no truncation: exact (issue 27)
            return C.wrap(h, h.backend.mul(ha if ia else C.shares(a), hb if ib else C.shares(b),
                                           "matmul", truncate=False), dtype)
        return C.wrap(h, h.backend.mul(C.shares(a), C.shares(b), "matmul"), dtype)
    if C.is_private(a):
        s = h.backend.mul_public(C.shares(a), b, "matmul", name=name or "")
    else:
        s = h.backend.mul_public(C.shares(b), a, "matmul", public_left=True, name=name or "")
    return C.wrap(h, s, dtype)


def tensordot(a: TensorLike, b: TensorLike, axes, name: Optional[str] = None):
    """Sum over the given axes of a and b (numpy.tensordot semantics), as one
    matrix product."""
    if not (C.is_private(a) or C.is_private(b)):
        return tf.tensordot(a, b, axes, name=name)
    a = a if C.is_private(a) else C.public(a)
    b = b if C.is_private(b) else C.public(b)
    sa, sb = C.static_shape(a), C.static_shape(b)
    if not (sa.is_fully_defined() and sb.is_fully_defined()):
        raise ValueError("tp.tensordot needs fully known shapes")
    if isinstance(axes, int):
        if axes < 0 or axes > min(sa.rank, sb.rank):
            raise ValueError(f"tp.tensordot: axes={axes} is invalid for ranks {sa.rank}, {sb.rank}")
        ax_a, ax_b = list(range(sa.rank - axes, sa.rank)), list(range(axes))
    else:
        ax_a, ax_b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    ax_a, ax_b = C.normalize_axes(ax_a, sa.rank), C.normalize_axes(ax_b, sb.rank)
    if len(ax_a) != len(ax_b) or any(sa[i] != sb[j] for i, j in zip(ax_a, ax_b)):
        raise ValueError(f"tp.tensordot: contracted dimensions differ: {sa} axes {ax_a}, "
                         f"{sb} axes {ax_b}")
    free_a = [i for i in range(sa.rank) if i not in ax_a]
    free_b = [i for i in range(sb.rank) if i not in ax_b]
    k = int(np.prod([sa[i] for i in ax_a], dtype=np.int64))
    m = int(np.prod([sa[i] for i in free_a], dtype=np.int64))
    n = int(np.prod([sb[i] for i in free_b], dtype=np.int64))

    def prep(v, perm, shape):
        if C.is_private(v):
            return array_ops.reshape(array_ops.transpose(v, perm), shape)
        return tf.reshape(tf.transpose(v, perm), shape)

    a2 = prep(a, free_a + ax_a, [m, k])
    b2 = prep(b, ax_b + free_b, [k, n])
    out = matmul(a2, b2, name=name)
    return array_ops.reshape(out, [sa[i] for i in free_a] + [sb[i] for i in free_b])


def dot(a: TensorLike, b: TensorLike) -> PrivateTensor:
    """numpy.dot semantics: inner product of vectors, matrix product of
    matrices, sum over a's last and b's second-to-last axis otherwise."""
    ra, rb = C.static_shape(a).rank, C.static_shape(b).rank
    if ra == 0 or rb == 0:
        return multiply(a, b)
    return tensordot(a, b, [[-1], [-1 if rb == 1 else -2]])


def outer(a: TensorLike, b: TensorLike) -> PrivateTensor:
    """Outer product of the flattened operands, as one [n,1] @ [1,m] matmul
    (masks of n + m elements instead of n * m)."""

    def col(v, shape):
        return array_ops.reshape(v, shape) if C.is_private(v) else tf.reshape(C.public(v), shape)

    return matmul(col(a, [-1, 1]), col(b, [1, -1]))


# ------------------------------------------------------------------ reductions
def reduce_sum(x: PrivateTensor, axis=None, keepdims: bool = False,
               name: Optional[str] = None) -> PrivateTensor:
    """Sum over `axis` (None: all axes); local on each server."""
    if not C.is_private(x):
        return tf.reduce_sum(x, axis=axis, keepdims=keepdims, name=name)
    h = C.handle_of(x)
    return C.wrap(h, h.backend.reduce_sum(C.shares(x), axis, keepdims), x.dtype)


def reduce_mean(x: PrivateTensor, axis=None, keepdims: bool = False,
                name: Optional[str] = None) -> PrivateTensor:
    """Mean over `axis`: a local sum times the public 1/n."""
    if not C.is_private(x):
        return tf.reduce_mean(x, axis=axis, keepdims=keepdims, name=name)
    kept, red = sh.reduce_axes_layout(x.shape, axis)
    n = int(np.prod([x.shape[i] for i in red], dtype=np.int64))
    if n == 0:
        raise ValueError("tp.reduce_mean over an empty axis")
    return divide(reduce_sum(x, axis, keepdims), tf.constant(float(n), tf.float64))


# ------------------------------------------------------------------ powers
def square(x: TensorLike, name: Optional[str] = None) -> PrivateTensor:
    """x * x elementwise (one private multiplication).

    Example:
      >>> tp.math.square(tp.share([1.5, -2.0])).reveal()   # [2.25, 4.]
    """
    if not C.is_private(x):
        return tf.math.square(x, name=name)
    return multiply(x, x, name=name)
