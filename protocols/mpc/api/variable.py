"""tp.Variable: private weights that stay private between training steps.

A `PrivateVariable` holds the two shares of a value in two TF variables, one
on each share holder (share 0 on S1, share 1 on S2), created under those
devices: int64 ring elements with the trailing limb dimension of the 128-bit
ring. Reading it gives a PrivateTensor (each server reads its own share);
assigning it makes each server overwrite its own share with the matching
share of the new value. No share ever leaves its server for either, so
weights updated by a training step stay secret-shared from one step to the
next, eagerly and inside tf.function.

Ops accept a variable wherever they accept a PrivateTensor: the op registry
reads it (`read_variables`) before calling an implementation, and the TF
dispatchers do the same, so `v * x`, `x @ v`, `tp.matmul(v, x)` and
`tf.matmul(v, x)` all work. Like a PrivateTensor, a variable never converts
to a plaintext tf.Tensor.

A variable belongs to the runtime it was created in (its devices, ring and
encoding). Its shares do not depend on the runtime's PRG keys, so they can be
saved per server and restored into a variable of a later runtime
(checkpoint.py: `tp.save_variables` / `tp.restore_variables`).

This module is below the API: it imports nothing above the protocols.
"""
from __future__ import annotations

import re
from typing import Optional

import tensorflow as tf

from ..runtime import context as _context
from ..runtime import shares as _sh
from .ops import _common as C
from .ops import math_ops as _math_ops
from .value import PrivateTensor

_NAME_OK = re.compile(r"[^A-Za-z0-9_.\-/]")


class PrivateVariable:
    """A private variable: a PrivateTensor value kept in TF state on S1 and S2.

    Args:
      initial_value: a PrivateTensor of the current runtime, another
        tp.Variable (its current value), or plain values (a tensor, numpy
        array, Python numbers), which the client shares first with tp.share.
      name: the variable's name (default "Variable"); the share variables
        are named `<name>/share0` (on S1) and `<name>/share1` (on S2).
      trainable: whether the converter's training half updates it (kept as
        metadata; the TF share variables themselves are never trainable).
      dtype: for plain initial values, the dtype the variable reveals to
        (default: the values' own). A private initial value keeps its dtype.

    The value is read with `read_value()` / `value()` (a PrivateTensor) and
    replaced with `assign`, `assign_add` and `assign_sub`, which take a
    PrivateTensor of the same runtime and shape, a tp.Variable, or plain
    values. Plain values are shared by the client first (they are the
    client's to give; the servers see only shares): `w.assign(np.zeros(..))`
    works, as `tf.Variable.assign` converts plain values.

    A PrivateTensor's dtype only says what reveal() returns (the ring
    encoding is the same), so an assigned value takes the variable's dtype;
    only a float value into an integer variable raises a TypeError.

    Create variables outside tf.function (or from plain values, which are
    shared eagerly); assign and read them anywhere. Save and restore them
    with `tp.save_variables` / `tp.restore_variables`: each server writes its
    own share to its own directory. Do not put them into a
    tf.train.Checkpoint, which would write both shares into one file (it
    refuses them: a tp.Variable is not a TF trackable).

    Example:
      >>> w = tp.Variable(tp.share([[0.5], [-1.0]]), name="w")
      >>> x = tp.share([[1.0, 2.0]])
      >>> tp.reveal(x @ w)                       # operators read the variable
      <tf.Tensor: shape=(1, 1), dtype=float32, numpy=array([[-1.5]], dtype=float32)>
      >>> @tf.function
      ... def sgd_step(grad):
      ...     w.assign_sub(0.1 * grad)          # each server updates its share
      >>> sgd_step(tp.share([[1.0], [1.0]]))
      >>> w.read_value().reveal()                # ≈ [[0.4], [-1.1]] (2^-20 grid)
      <tf.Tensor: shape=(2, 1), dtype=float32, numpy=...>
      >>> tp.save_variables([w], "/tmp/ckpt")    # S1 -> /tmp/ckpt/S1, S2 -> /tmp/ckpt/S2
    """

    # numpy defers to our reflected operators (np.ndarray * variable).
    __array_ufunc__ = None

    def __init__(self, initial_value, name: Optional[str] = None, trainable: bool = True,
                 dtype: Optional[tf.DType] = None):
        self._name = name or "Variable"
        self._trainable = bool(trainable)
        h = _context.get_handle()
        self._runtime_id = h.runtime.id
        self._ring_bits = h.config.ring_bits
        self._frac_bits = h.config.frac_bits
        self._devices = tuple(h.runtime.device(p) for p in h.backend.holders)
        with tf.init_scope():  # the share variables exist once, eagerly
            value = self._initial(h, initial_value, dtype)
            shape = value.shape
            if not shape.is_fully_defined():
                raise ValueError(f"tp.Variable '{self._name}' needs a fully known shape, "
                                 f"got {shape}")
            self._shape = shape
            self._dtype = value.dtype
            base = _NAME_OK.sub("_", self._name)
            self._vars = []
            for i, s in enumerate(C.shares(value)):
                with tf.device(self._devices[i]):
                    self._vars.append(tf.Variable(s, trainable=False, name=f"{base}/share{i}",
                                                  dtype=tf.int64))

    def _initial(self, h, v, dtype) -> PrivateTensor:
        if isinstance(v, PrivateVariable):
            v = v.read_value()
        if isinstance(v, PrivateTensor):
            if not _is_eager_value(v.share0):
                raise ValueError(
                    f"tp.Variable '{self._name}': the initial value is a PrivateTensor "
                    "computed inside a tf.function; create the variable outside it (or from "
                    "plain values), then assign to it inside the function")
            C.handle_of(v)  # same runtime, ring and encoding
            return v
        if isinstance(v, tf.Tensor) and not _is_eager_value(v):
            raise ValueError(f"tp.Variable '{self._name}': the initial value is a symbolic "
                             "tensor of a tf.function; create the variable outside it")
        return _share_plain(h, v, tf.as_dtype(dtype) if dtype is not None
                            else C.operand_dtype(v), self._name)

    # ------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        return self._name

    @property
    def shape(self) -> tf.TensorShape:
        """The logical shape of the value (without the ring's limb dimension)."""
        return self._shape

    @property
    def dtype(self) -> tf.DType:
        """The dtype that reveal() of the value returns."""
        return self._dtype

    @property
    def ndim(self) -> int:
        return self._shape.rank

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def ring_bits(self) -> int:
        return self._ring_bits

    @property
    def frac_bits(self) -> int:
        return self._frac_bits

    @property
    def runtime_id(self) -> int:
        return self._runtime_id

    @property
    def devices(self):
        """TF device names of the two share variables (S1, S2)."""
        return self._devices

    @property
    def share_variables(self):
        """The two TF variables holding the shares: (on S1, on S2). Each server
        may read only its own; reading one elsewhere copies a share off its
        server."""
        return tuple(self._vars)

    def __repr__(self) -> str:
        return (f"<tp.Variable '{self._name}' shape={self._shape} dtype={self._dtype.name} "
                f"ring=2^{self._ring_bits} frac_bits={self._frac_bits}>")

    __str__ = __repr__

    def __len__(self) -> int:
        if self._shape.rank == 0:
            raise TypeError("len() of a scalar tp.Variable")
        return self._shape[0]

    def __bool__(self):
        raise TypeError("a tp.Variable has no truth value that the servers may learn; "
                        "reveal it first (tp.reveal) if the value may be disclosed")

    # The operators (+ - * / @ **, comparisons, indexing) and reveal() are
    # attached by the op registry (registry.py), as for PrivateTensor.

    # ------------------------------------------------------------- reading
    def _handle(self) -> _context.Handle:
        h = _context.get_handle()
        if h.runtime.id != self._runtime_id:
            raise ValueError(
                f"tp.Variable '{self._name}' was created by tf_privpy runtime "
                f"#{self._runtime_id}, but runtime #{h.runtime.id} is active (tp.init() was "
                "called again). Its shares live on the old runtime's devices: save it with "
                "tp.save_variables before tp.reset(), create a tp.Variable of the same shape "
                "in the new runtime and tp.restore_variables into it.")
        return h

    def read_value(self) -> PrivateTensor:
        """The current value as a PrivateTensor (each server reads its share).

        Example:
          >>> v = tp.Variable([1.0, 2.0]); v.read_value().reveal()
          <tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>
        """
        h = self._handle()
        s = []
        for i in range(2):
            with tf.device(self._devices[i]):
                s.append(self._vars[i].read_value())
        return C.wrap(h, s, self._dtype)

    def value(self) -> PrivateTensor:
        """The current value as a PrivateTensor (same as read_value())."""
        return self.read_value()

    # ------------------------------------------------------------ writing
    def _coerce(self, value, what: str) -> PrivateTensor:
        """value as a PrivateTensor of this variable's runtime (plain values
        shared by the client), checked against the variable's dtype kind."""
        h = self._handle()
        if isinstance(value, PrivateVariable):
            value = value.read_value()
        if isinstance(value, PrivateTensor):
            C.handle_of(value)  # the active runtime's, same ring and encoding
            _check_kind(value.dtype, self._dtype, f"tp.Variable '{self._name}'.{what}")
            return value
        if isinstance(value, (tf.Variable, tf.__internal__.CompositeTensor)):
            raise TypeError(f"tp.Variable '{self._name}'.{what} takes a PrivateTensor, a "
                            f"tp.Variable or plain values, got {type(value).__name__}")
        return _share_plain(h, value, self._dtype, f"{self._name}.{what}")

    def _write(self, value: PrivateTensor, what: str, read_value: bool):
        h = self._handle()
        if not value.shape.is_compatible_with(self._shape):
            raise ValueError(f"tp.Variable '{self._name}'.{what}: the variable has shape "
                             f"{self._shape}, the new value has shape {value.shape}")
        storage = _sh.storage(self._shape.as_list(), h.config.limbs)
        for i, s in enumerate(C.shares(value)):
            with tf.device(self._devices[i]):
                if not s.shape.is_fully_defined():
                    s = tf.ensure_shape(s, storage)  # checked when it runs, on the server
                self._vars[i].assign(s, read_value=False)
        # In a tf.function the assignments run in program order (automatic
        # control dependencies), so no op needs to be returned.
        return self.read_value() if read_value else None

    def assign(self, value, read_value: bool = True, name: Optional[str] = None):
        """Replaces the value: each server assigns its own share of `value`.

        Args:
          value: a PrivateTensor of the active runtime with the variable's
            shape, a tp.Variable, or plain values (shared by the client first).
          read_value: return the new value (a PrivateTensor); otherwise None
            (inside tf.function the assignment still runs, in program order).
          name: unused (TF compatibility).

        Raises:
          ValueError: wrong shape, or a value or variable of another runtime.
          TypeError: a value of another dtype kind (float vs integer).

        Example:
          >>> v = tp.Variable(tp.share([1.0, 2.0]))
          >>> v.assign(tp.share([3.0, 4.0])).reveal()
          <tf.Tensor: shape=(2,), dtype=float32, numpy=array([3., 4.], dtype=float32)>
        """
        del name
        return self._write(self._coerce(value, "assign"), "assign", read_value)

    def assign_add(self, delta, read_value: bool = True, name: Optional[str] = None):
        """value += delta (a private or public delta; local on each server).

        A public delta is added by S1 to its share alone (as tp.add does);
        it must keep the variable's shape (it may broadcast into it).

        Example:
          >>> v = tp.Variable(tp.share([1.0, 2.0])); v.assign_add(1.0).reveal()
          <tf.Tensor: shape=(2,), dtype=float32, numpy=array([2., 3.], dtype=float32)>
        """
        del name
        return self._update(_math_ops.add, delta, "assign_add", read_value)

    def assign_sub(self, delta, read_value: bool = True, name: Optional[str] = None):
        """value -= delta: the SGD update `w.assign_sub(lr * grad)`.

        Example:
          >>> w = tp.Variable(tp.share([1.0, 2.0]))
          >>> w.assign_sub(0.5 * tp.share([2.0, 2.0])).reveal()
          <tf.Tensor: shape=(2,), dtype=float32, numpy=array([0., 1.], dtype=float32)>
        """
        del name
        return self._update(_math_ops.subtract, delta, "assign_sub", read_value)

    def _update(self, op, delta, what: str, read_value: bool):
        current = self.read_value()
        if isinstance(delta, PrivateVariable):
            delta = delta.read_value()
        elif not isinstance(delta, PrivateTensor):
            if isinstance(delta, (tf.Variable, tf.__internal__.CompositeTensor)):
                raise TypeError(f"tp.Variable '{self._name}'.{what} takes a PrivateTensor, a "
                                f"tp.Variable or plain values, got {type(delta).__name__}")
        _check_kind(C.operand_dtype(delta), self._dtype, f"tp.Variable '{self._name}'.{what}")
        dshape = C.static_shape(delta)
        try:
            joint = tf.broadcast_static_shape(self._shape, dshape)
        except ValueError:
            joint = None
        if joint is None or joint != self._shape:
            raise ValueError(f"tp.Variable '{self._name}'.{what}: the variable has shape "
                             f"{self._shape}, the delta has shape {dshape}")
        return self._write(op(current, delta), what, read_value)


def _check_kind(value: tf.DType, variable: tf.DType, what: str) -> None:
    """Only a float into an integer variable is refused: the ring encoding
    does not depend on the dtype, which only says what reveal() returns."""
    if _kind(variable) == "int" and _kind(value) == "float":
        raise TypeError(f"{what}: the variable holds {variable.name} values, the value is "
                        f"{value.name}; a float value does not fit an integer variable")


def _share_plain(h, v, dtype: tf.DType, label: str) -> PrivateTensor:
    """Plain values shared by the client, revealing as `dtype`.

    Python floats are encoded from their exact float64 value (C.public), and
    a value of the same kind is shared as it is and only tagged with `dtype`
    (the encoding does not depend on it). Integers into a float variable are
    converted; floats into an integer variable raise, as tf.Variable does."""
    t = C.public(v)
    _check_kind(t.dtype, dtype, label)
    if _kind(t.dtype) != _kind(dtype):
        t = tf.cast(t, dtype)
    p = _math_ops.share(t, name=label)
    return C.wrap(h, C.shares(p), dtype)


def _kind(dtype: tf.DType) -> str:
    return "float" if dtype.is_floating else "int"


def _is_eager_value(t) -> bool:
    """A concrete (eager) tensor, not a symbolic one of a graph being built."""
    return isinstance(t, tf.Tensor) and not tf.is_symbolic_tensor(t)


def read_variables(v):
    """v with every PrivateVariable replaced by its value, also inside
    (nested) lists and tuples: what the op registry and the TF dispatchers
    apply to an op's arguments so that variables work wherever private
    tensors do."""
    if isinstance(v, PrivateVariable):
        return v.read_value()
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        out = [read_variables(u) for u in v]
        if any(a is not b for a, b in zip(out, v)):
            return type(v)(out)
    return v
