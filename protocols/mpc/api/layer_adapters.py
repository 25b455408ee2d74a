"""Converter adapters of the TF ops today's Keras layers trace to (issue 27):
Einsum (MultiHeadAttention's projections, scores and context) and
ResizeNearestNeighbor (UpSampling2D). Same contract as adapters.py: an
adapter gets the node and its inputs (PrivateTensors, public values or
Weights) and returns the node's outputs, or raises Unsupported."""
from __future__ import annotations

from typing import List

import numpy as np

from .adapters import Unsupported, impl, static


def _letters(spec: str, what: str) -> str:
    if "." in spec:
        raise Unsupported(f"an einsum with an ellipsis ({what})",
                          "write the equation with explicit axis letters")
    if len(set(spec)) != len(spec):
        raise Unsupported(f"an einsum that repeats an axis within an operand ({what}: a "
                          "diagonal or trace)", "take the diagonal with tp ops first")
    return spec


def _sum_unused(x, spec: str, keep: str):
    """Sums x over the axes of `spec` not in `keep` (einsum's summed-away
    letters of one operand): returns (x, spec without them)."""
    gone = [i for i, c in enumerate(spec) if c not in keep]
    if not gone:
        return x, spec
    return impl("reduce_sum")(x, gone), "".join(c for c in spec if c in keep)


def _equation(node):
    """(operand letter strings, output letters) of an Einsum node, or
    Unsupported."""
    eq = node.attr.get("equation")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    if "->" not in eq:
        raise Unsupported("an einsum in implicit form", "write the output after '->'")
    lhs, out = eq.replace(" ", "").split("->")
    specs = [_letters(s, "an operand") for s in lhs.split(",")]
    if len(specs) not in (1, 2):
        raise Unsupported(f"an einsum of {len(specs)} operands", "use one or two operands")
    return specs, _letters(out, "the output")


def einsum_refusal(node):
    """What einsum refuses from the equation alone (asked by the
    converter's analysis, before anything runs)."""
    try:
        _equation(node)
    except Unsupported as u:
        return u
    return None


def einsum(env, node, ins) -> List:
    """tf.einsum of one or two operands as transposes, reshapes and one
    (batched) matrix product: the letters of both operands and the output
    are the batch axes, those of both but not the output are contracted,
    the rest are each side's free axes. One private product (one
    truncation), none when an operand is public."""
    specs, out = _equation(node)
    xs = [env.operand(v) for v in ins]
    if len(xs) == 1:
        x, s = _sum_unused(xs[0], specs[0], out)
        return [impl("transpose")(x, [s.index(c) for c in out])]
    (a, sa), (b, sb) = (_sum_unused(x, s, specs[1 - i] + out)
                        for i, (x, s) in enumerate(zip(xs, specs)))
    dims = {}
    for x, s in ((a, sa), (b, sb)):
        for c, d in zip(s, x.shape.as_list()):
            if d is None:
                raise Unsupported("an einsum on a shape unknown when converting",
                                  "give the model static shapes")
            if dims.setdefault(c, d) != d:
                raise Unsupported(f"an einsum whose axis '{c}' has sizes {dims[c]} and {d} "
                                  "(broadcasting)", "give both operands the same size there")
    batch = [c for c in out if c in sa and c in sb]
    contr = [c for c in sa if c in sb and c not in out]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = lambda cs: int(np.prod([dims[c] for c in cs], dtype=np.int64))  # noqa: E731
    nb = [dims[c] for c in batch]
    a = impl("reshape")(impl("transpose")(a, [sa.index(c) for c in batch + left + contr]),
                        nb + [size(left), size(contr)])
    b = impl("reshape")(impl("transpose")(b, [sb.index(c) for c in batch + contr + right]),
                        nb + [size(contr), size(right)])
    y = impl("reshape")(impl("matmul")(a, b), nb + [dims[c] for c in left + right])
    have = batch + left + right
    return [impl("transpose")(y, [have.index(c) for c in out])]


einsum.static_refusal = einsum_refusal


def _nearest(out: int, inn: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """The source index of each output row of TF's ResizeNearestNeighbor
    (its CPU kernel's arithmetic, in float32)."""
    i = np.arange(out, dtype=np.float32)
    if align_corners and out > 1:
        scale = np.float32((inn - 1) / (out - 1))
    else:
        scale = np.float32(inn / out)
    if half_pixel:
        src = (i + np.float32(0.5)) * scale
    else:
        src = i * scale
    # roundf rounds halves away from zero (np.round to even); src >= 0
    src = np.floor(src + np.float32(0.5)) if align_corners else np.floor(src)
    return np.clip(src.astype(np.int64), 0, inn - 1)


def resize_nearest(env, node, ins) -> List:
    """ResizeNearestNeighbor (UpSampling2D, tf.image.resize "nearest"): each
    output pixel copies one input pixel, chosen by public arithmetic on the
    sizes, so two local gathers of the shares (NHWC)."""
    x = env.operand(ins[0])
    h, w = static(env, ins[1], "size").tolist()
    shape = x.shape.as_list()
    if len(shape) != 4 or None in shape[1:3]:
        raise Unsupported("a resize of an input that is not 4-D with known height and width",
                          "give the model static shapes (NHWC)")
    ac = bool(node.attr.get("align_corners", False))
    hp = bool(node.attr.get("half_pixel_centers", False))
    x = impl("gather")(x, _nearest(h, shape[1], ac, hp), 1)
    return [impl("gather")(x, _nearest(w, shape[2], ac, hp), 2)]
