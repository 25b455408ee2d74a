"""PrivateTensor: a secret-shared tensor as a TF extension type."""
from __future__ import annotations

import tensorflow as tf

from tf_privpy import runtime as _runtime
from tf_privpy.protocols.mpc import shares as _sh


class PrivateTensor(tf.experimental.ExtensionType):
    """A tensor secret-shared between the servers S1 and S2.

    `share0` lives on S1 and `share1` on S2; each is an int64 tensor of ring
    elements (with a trailing limb dimension of 2 in the 128-bit ring). Their
    sum modulo 2^ring_bits is the fixed-point encoding of the value. Neither
    share alone says anything about the value, and the repr shows neither.

    Create one with `tp.share(x)`; get the value back with `tp.reveal(p)` or
    `p.reveal()`. PrivateTensors work in eager mode and inside tf.function,
    support + - * / @ and indexing, and are accepted by tf.matmul, tf.add,
    tf.multiply, tf.reduce_sum, tf.reshape, tf.transpose and tf.concat.

    Example:
      >>> x = tp.share(tf.constant([1.5, -2.0]))
      >>> (x * x + 1.0).reveal()
      <tf.Tensor: shape=(2,), dtype=float32, numpy=array([3.25, 5.  ], dtype=float32)>
    """

    __name__ = "tf_privpy.PrivateTensor"
    share0: tf.Tensor
    share1: tf.Tensor
    ring_bits: int
    frac_bits: int
    value_dtype: tf.DType
    runtime_id: int

    # numpy defers to our reflected operators (np.ndarray + PrivateTensor).
    __array_ufunc__ = None

    @property
    def limbs(self) -> int:
        return self.ring_bits // 64

    @property
    def shape(self) -> tf.TensorShape:
        """The logical shape of the shared value."""
        return _sh.logical_shape(self.share0, self.limbs)

    @property
    def dtype(self) -> tf.DType:
        """The dtype that was shared, and that reveal() returns."""
        return self.value_dtype

    @property
    def ndim(self) -> int:
        return self.shape.rank

    def __repr__(self) -> str:
        return (f"<tp.PrivateTensor shape={self.shape} dtype={self.value_dtype.name} "
                f"ring=2^{self.ring_bits} frac_bits={self.frac_bits}>")

    __str__ = __repr__

    def __len__(self) -> int:
        if self.shape.rank == 0:
            raise TypeError("len() of a scalar PrivateTensor")
        return self.shape[0]

    def __bool__(self):
        raise TypeError("a PrivateTensor has no truth value that the servers may learn; "
                        "reveal it first (tp.reveal) if the value may be disclosed")

    def reveal(self) -> tf.Tensor:
        """The plaintext value on the client device (see tp.reveal)."""
        from tf_privpy import math_ops
        return math_ops.reveal(self)

    # Operators -> tf_privpy.math_ops / array_ops (imported lazily: cycle).
    def __add__(self, other):
        from tf_privpy import math_ops
        return math_ops.add(self, other)

    def __radd__(self, other):
        from tf_privpy import math_ops
        return math_ops.add(other, self)

    def __sub__(self, other):
        from tf_privpy import math_ops
        return math_ops.subtract(self, other)

    def __rsub__(self, other):
        from tf_privpy import math_ops
        return math_ops.subtract(other, self)

    def __mul__(self, other):
        from tf_privpy import math_ops
        return math_ops.multiply(self, other)

    def __rmul__(self, other):
        from tf_privpy import math_ops
        return math_ops.multiply(other, self)

    def __truediv__(self, other):
        from tf_privpy import math_fns
        return math_fns.divide(self, other)

    def __rtruediv__(self, other):
        from tf_privpy import math_fns
        return math_fns.divide(other, self)

    def __neg__(self):
        from tf_privpy import math_ops
        return math_ops.negative(self)

    def __pos__(self):
        return self

    def __matmul__(self, other):
        from tf_privpy import math_ops
        return math_ops.matmul(self, other)

    def __rmatmul__(self, other):
        from tf_privpy import math_ops
        return math_ops.matmul(other, self)

    def __lt__(self, other):
        from tf_privpy import compare_ops
        return compare_ops.less(self, other)

    def __le__(self, other):
        from tf_privpy import compare_ops
        return compare_ops.less_equal(self, other)

    def __gt__(self, other):
        from tf_privpy import compare_ops
        return compare_ops.greater(self, other)

    def __ge__(self, other):
        from tf_privpy import compare_ops
        return compare_ops.greater_equal(self, other)

    def __abs__(self):
        from tf_privpy import compare_ops
        return compare_ops.abs(self)

    def __getitem__(self, key):
        from tf_privpy import array_ops
        return array_ops.getitem(self, key)


def check_runtime(p: PrivateTensor) -> "_runtime.Handle":
    """The current handle, after checking that p belongs to it."""
    h = _runtime.get_runtime()
    if p.runtime_id != h.runtime.id:
        raise ValueError(
            f"this PrivateTensor was created by tf_privpy runtime #{p.runtime_id}, but "
            f"runtime #{h.runtime.id} is active (tp.init() was called again). Shares of "
            "different runtimes use different keys and cannot be mixed: re-share the value "
            "in the current runtime.")
    if p.ring_bits != h.config.ring_bits or p.frac_bits != h.config.frac_bits:
        raise ValueError("PrivateTensor ring/encoding differs from the runtime's config")
    return h
