"""Keras's additive attention masks, brought into the fixed-point range
(issue 27).

Keras masks a softmax by adding a large negative number where the mask is
off: the Softmax layer and MultiHeadAttention (attention_mask,
use_causal_mask) add (1 - mask) * -1e9, the Attention layer subtracts
1e9 * (1 - mask). In float32 the masked weights are then exp(-1e9) = 0.
-1e9 is far outside the fixed-point range |x| < B (DESIGN §3): the sum
could not be shared and the run would fail.

Any K with exp(-K + 2·max|score|) below half a unit of the encoding gives
the same zeros, so this rewrite, applied to every converted graph before
the analysis, replaces a constant of magnitude >= B that a softmax's input
adds (through a product by the mask) by ±B/4:
  - masked scores s - B/4 stay in range while |s| < 3B/4 (the shares'
    range check at sharing and the comparisons' domain);
  - a masked weight is at most exp(-B/4 + 2·max|s|): for |s| < B/16 it is
    below exp(-B/8) = exp(-4096) in the 64-bit ring, 0 in every encoding.
Our softmax's exp returns exactly 0 that far below its range (its range
reduction runs out of octaves), as Keras's does.

One difference remains, stated in the README's converter row: a row whose every
position is masked. Keras then averages uniformly (float32 absorbs the
scores into -1e9); the converted model returns the softmax of the scores.
Neither means anything: mask at least one position per row.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import tensorflow as tf

from .trace import Traced, src

_SOFTMAX = ("Softmax", "LogSoftmax")
#: ops a mask's adder reaches the softmax through (Keras transposes the
#: scores to put the softmax axis last)
_THROUGH = ("Transpose", "Reshape", "Identity", "ExpandDims", "Squeeze")
_ADDERS = ("Add", "AddV2", "Sub")
_SCALERS = ("Mul", "MulNoNan")


def _const(nodes, name: str):
    n = nodes.get(src(name)[0])
    while n is not None and n.op == "Identity":
        n = nodes.get(src(n.input[0])[0])
    return n if n is not None and n.op == "Const" else None


def _shrink(node, bound: float) -> bool:
    """Replaces the entries of magnitude >= bound of a float Const by
    ±bound/4; whether anything changed."""
    value = tf.make_ndarray(node.attr["value"].tensor)
    if value.dtype.kind != "f":
        return False
    big = np.abs(value) >= bound
    if not big.any():
        return False
    value = np.where(big, np.sign(value) * (bound / 4), value).astype(value.dtype)
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value))
    return True


def bring_into_range(traced: Traced, bound: float) -> int:
    """Rewrites, in place, the large constants of the additive masks that
    feed a Softmax or LogSoftmax; returns how many it changed."""
    nodes = {n.name: n for n in traced.graph_def.node}
    changed = 0
    for sm in [n for n in traced.graph_def.node if n.op in _SOFTMAX]:
        stack, seen = [src(sm.input[0])[0]], set()
        while stack:
            n: Optional[object] = nodes.get(stack.pop())
            if n is None or n.name in seen:
                continue
            seen.add(n.name)
            if n.op in _THROUGH:
                stack.append(src(n.input[0])[0])
            elif n.op in _ADDERS:
                for operand in n.input[:2]:
                    m = nodes.get(src(operand)[0])
                    if m is not None and m.op in _SCALERS:
                        for factor in m.input[:2]:
                            c = _const(nodes, factor)
                            if c is not None and c.name not in traced.weights \
                                    and _shrink(c, bound):
                                changed += 1
                    c = _const(nodes, operand)
                    if c is not None and c.name not in traced.weights and _shrink(c, bound):
                        changed += 1
                    stack.append(src(operand)[0])
    return changed
