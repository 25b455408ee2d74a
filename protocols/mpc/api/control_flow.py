"""Conditionals over private values: tp.cond.

TensorFlow's conditionals (tf.cond, tf.case, tf.switch_case, AutoGraph `if`)
merge every output on the one device of their If/Case op, so a PrivateTensor
returned from a branch would bring both shares together there (placement.py
refuses that). tp.cond instead runs both branches, each on the servers as its
ops place it, and chooses on each share holder:
  - a public predicate reaches S1 and S2 through the channel and each keeps
    its share of the chosen branch (a local select, exact: a sharing of the
    chosen value, no multiplication);
  - a private predicate selects obliviously (tp.where: one multiplication),
    so no one learns which branch was taken;
  - a predicate known while tracing (a Python bool, a constant) runs only
    that branch.
Loops need nothing of the kind: a while loop keeps each loop variable on the
party it entered on (placement.py checks it), so tf.while_loop and AutoGraph
loops run over PrivateTensors as long as their condition is public.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from ..runtime import placement
from .ops import _common as C
from .ops import array_ops, compare_ops
from .value import PrivateTensor


def _static_bool(pred) -> Optional[bool]:
    """pred's value if it is known while tracing, else None."""
    if isinstance(pred, PrivateTensor):
        return None
    if isinstance(pred, (bool, np.bool_)):
        return bool(pred)
    value = tf.get_static_value(pred)
    return None if value is None else bool(value)


def cond(pred, true_fn: Callable, false_fn: Callable, name: Optional[str] = None):
    """true_fn() if pred else false_fn(), for branches that return
    PrivateTensors (and public tensors), in nested structures of the same
    shape.

    Both branches run (their protocol messages and any side effects both
    happen); the result keeps, on each share holder, the chosen branch's
    share. A public scalar boolean `pred` is sent to S1 and S2 through the
    channel and each selects locally; a private `pred` (a PrivateTensor
    comparison result) selects obliviously with tp.where. A pred known while
    tracing runs one branch only.

    Use it where tf.cond, tf.case or tf.switch_case would return a
    PrivateTensor (they are refused: TensorFlow merges a conditional's outputs
    on one device); nest it for several cases.

    Example:
      >>> y = tp.cond(flag, lambda: a * b, lambda: a + b)
      >>> z = tp.cond(a < b, lambda: b - a, lambda: a - b)   # private pred
    """
    # AutoGraph leaves the library unconverted (runtime/calling.py): convert
    # the user's branches as tf.cond does, when the caller is being converted
    known = _static_bool(pred)
    status = tf.__internal__.autograph.control_status_ctx()
    true_fn, false_fn = (tf.__internal__.autograph.tf_convert(f, status)
                         for f in (true_fn, false_fn))
    if known is not None:
        return true_fn() if known else false_fn()
    placement.install()
    if not isinstance(pred, PrivateTensor):
        pred = tf.convert_to_tensor(pred)
        if pred.dtype != tf.bool:
            raise TypeError(f"tp.cond: the predicate must be boolean, got {pred.dtype.name}")
    if pred.shape.rank not in (0, None):
        raise ValueError(f"tp.cond: the predicate must be a scalar (shape {pred.shape}); "
                         "for an elementwise choice use tp.where")
    with tf.name_scope(name or "tp_cond"):
        t, f = true_fn(), false_fn()
        try:
            tf.nest.assert_same_structure(t, f)
        except (TypeError, ValueError) as e:
            raise ValueError("tp.cond: both branches must return the same structure "
                             f"({e})") from e
        flat = [_select(pred, a, b) for a, b in zip(tf.nest.flatten(t), tf.nest.flatten(f))]
    return tf.nest.pack_sequence_as(t, flat)


def _select(pred, a, b):
    if isinstance(pred, PrivateTensor):
        return compare_ops.where(pred, a, b)
    if not (C.is_private(a) or C.is_private(b)):
        return tf.where(pred, a, b)
    h = C.handle_of(a, b)
    shape = C.broadcast_shape(C.static_shape(a), C.static_shape(b), "tp.cond")
    a, b = [C.broadcast(h, v if C.is_private(v) else array_ops._public_as_private(h, v), shape)
            for v in (a, b)]
    (sa, ia), (sb, ib) = C.bit_shares(a), C.bit_shares(b)
    if not (ia and ib):  # one is fixed point: both as fixed point
        sa, sb = C.shares(a), C.shares(b)
    backend = h.backend
    out = []
    for i, holder in enumerate(backend.holders):
        p = backend.to_party(pred, holder)  # through the channel (declares its bytes)
        with backend.on(i):
            out.append(tf.where(p, sa[i], sb[i]))
    if ia and ib:
        return C.wrap_bits(h, out)
    return C.wrap(h, out, C.result_dtype(C.operand_dtype(a), C.operand_dtype(b)))

