"""What the workloads share: the data's public range, its row batches from
memory or a tp.LargeArray, the refusal of inputs the fixed-point range cannot
hold, and traced steps kept on the runtime.

The range is public: the data owner states it (or it is measured on the
owner's own array before sharing), as PrivPy's users declare their public
parameters (§6.1, Fig. 4's initPublicParameters). Every intermediate a
workload makes is bounded from it before anything runs (DESIGN §3: values
that are multiplied stay below the config's bound B, so local truncation
keeps its failure rate); an input that would go past is refused, saying
what to do, rather than computed wrong.
"""
from __future__ import annotations

from typing import Callable, Iterator, Optional, Tuple, Union

import numpy as np

import tf_privpy as tp
from tf_privpy.large.array import LargeArray
from tf_privpy.protocols.mpc.api.ops import _common as C
from tf_privpy.protocols.mpc.api.value import PrivateTensor
from tf_privpy.protocols.mpc.runtime import calling

Data = Union[np.ndarray, PrivateTensor, LargeArray]
#: traced steps kept per runtime (the oldest dropped first)
MAX_STEPS = 32


class RangeError(ValueError):
    """A workload's input whose intermediates would leave the fixed-point range."""


def private_data(x, bound: Optional[float], name: str) -> Tuple[Union[PrivateTensor, LargeArray], float]:
    """(x as a PrivateTensor or LargeArray, the public bound on |x|).

    A NumPy array is the data owner's: its bound is measured here, on the
    owner's side, and it is shared (tp.share's own range check). A private x
    needs the bound stated: the servers cannot measure it without revealing.
    """
    if isinstance(x, (PrivateTensor, LargeArray)):
        if bound is None:
            raise RangeError(f"{name} is private: pass bound=, a public bound on |{name}|'s "
                             "entries (the data owner knows it), so the workload can check "
                             "that its intermediates stay in the fixed-point range")
        if not (np.isfinite(bound) and bound > 0):
            raise RangeError(f"bound must be a positive finite number, got {bound!r}")
        return x, float(bound)
    a = np.asarray(x, np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [rows, features], got shape {a.shape}")
    measured = float(np.max(np.abs(a))) if a.size else 0.0
    b = max(measured, float(bound or 0.0), 2.0 ** -10)
    return tp.share(a, name=name), b


def check_range(what: str, value: float, fix: str) -> None:
    """Refuses a worst-case intermediate at or above the config's bound B."""
    h = C.handle_of()
    limit = float(h.config.bound)
    if not value < limit:
        raise RangeError(
            f"{what} can reach {value:.4g}, at or above the {h.config.ring_bits}-bit ring's "
            f"range bound {limit:.4g} (tp.Config(bound=...), DESIGN §3): products of it would "
            f"fail local truncation. {fix}")


def shape_of(x) -> Tuple[int, int]:
    s = x.shape if isinstance(x, LargeArray) else C.static_shape(x)
    return int(s[0]), int(s[1])


def row_batches(x, batch_rows: Optional[int]) -> Iterator[Tuple[int, int, PrivateTensor]]:
    """(first row, end row, rows in memory) for consecutive batches of rows:
    slices of a PrivateTensor, or views of a LargeArray read block by block
    on S1 and S2 (tp.LargeArray.to_private; nothing reaches the client)."""
    n, _ = shape_of(x)
    b = n if batch_rows is None else int(batch_rows)
    if b < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")
    for r0 in range(0, n, b):
        r1 = min(n, r0 + b)
        if isinstance(x, LargeArray):
            yield r0, r1, x[r0:r1].to_private(max_bytes=1 << 62)
        elif r0 == 0 and r1 == n:
            yield r0, r1, x
        else:
            yield r0, r1, x[r0:r1]


def traced(key: tuple, fn: Callable) -> Callable:
    """fn as a tp.function (no Grappler: runtime/calling.py), kept on the
    runtime under key, so a workload's step traces once per shape and
    hyperparameters and later calls and workloads reuse it."""
    h = C.handle_of()
    steps = h.runtime.__dict__.setdefault("_workload_steps", {})
    f = steps.get(key)
    if f is None:
        while len(steps) >= MAX_STEPS:
            steps.pop(next(iter(steps)))
        f = steps[key] = calling.function(fn, autograph=False)
    return f
