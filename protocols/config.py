"""Runtime configuration: one immutable object, defaults from defaults.json.

The ring is a property of the config (and so of the runtime), never a
module-level constant (DESIGN §3).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Mapping, Optional

_DEFAULTS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "defaults.json")
with open(_DEFAULTS_PATH) as _f:
    DEFAULTS = json.load(_f)

BACKENDS = ("privpy", "plaintext")
COMPARISONS = ("garbled", "bitwise")
RINGS = (64, 128)


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of a tf_privpy runtime.

    Args:
      ring_bits: 128 (default, PrivPy's precision and range) or 64 (fast mode).
      frac_bits: fractional bits of the fixed-point encoding; defaults to 20 in
        the 128-bit ring and 16 in the 64-bit ring.
      bound: share-time range bound B: sharing a value with |x| >= B raises.
        Defaults to 2^23 (128-bit) and 2^15 (64-bit); see DESIGN §3.
      backend: "privpy" (the four-server protocols) or "plaintext" (same API
        and encoding computed in the clear on the client device: a debugging
        aid and test oracle, never private).
      comparison: the comparison protocol family of the privpy backend:
        "bitwise" (default: boolean shares and a carry tree with triples
        dealt by T1, 8 rounds, about 100 bytes per comparison; measured
        faster in every setting) or "garbled" (PrivPy's garbled comparator:
        2 rounds, about 4 KB); see docs/comparisons.md. Per call:
        `with tp.comparison("garbled"):`.
      comparison_batch: the largest number of comparisons garbled at once;
        bigger batches run in chunks (garbled tables take 2 KB each).
      functions: settings of the non-linear functions (method, iterations),
        keyed by function name; missing keys take defaults.json's values.
      encrypt_links: seal every message between two servers with AES-GCM
        under a key of the pair (protocols/mpc/runtime/sealing.py). None (default):
        on in the distributed mode, where messages cross a network; off in
        the embedded mode, where they stay in one process. True embedded
        costs time and protects nothing: it is for tests.
      large_block_bytes: tp.LargeArray's block: the most bytes of one
        server's share a streaming step reads or writes at once (rows per
        block = this / the bytes of a row's share). A step's working memory
        is a small multiple of it (docs/large_arrays.md).

    Example:
      >>> tp.init(tp.Config(ring_bits=64))   # the fast mode
    """

    ring_bits: int = DEFAULTS["ring_bits"]
    frac_bits: Optional[int] = None
    bound: Optional[float] = None
    backend: str = DEFAULTS["backend"]
    comparison: str = DEFAULTS["comparison"]
    comparison_batch: int = DEFAULTS["comparison_batch"]
    functions: Mapping[str, Any] = dataclasses.field(
        default_factory=lambda: dict(DEFAULTS.get("functions", {})), compare=False, hash=False)
    encrypt_links: Optional[bool] = None
    large_block_bytes: int = DEFAULTS["large_block_bytes"]

    def __post_init__(self):
        if self.ring_bits not in RINGS:
            raise ValueError(f"ring_bits must be 64 or 128, got {self.ring_bits!r}")
        ring = DEFAULTS["rings"][str(self.ring_bits)]
        if self.frac_bits is None:
            object.__setattr__(self, "frac_bits", int(ring["frac_bits"]))
        if self.bound is None:
            object.__setattr__(self, "bound", float(ring["bound"]))
        if int(self.comparison_batch) < 2:
            raise ValueError(f"comparison_batch must be >= 2, got {self.comparison_batch}")
        if self.encrypt_links not in (None, True, False):
            raise ValueError(f"encrypt_links must be None, True or False, got "
                             f"{self.encrypt_links!r}")
        if int(self.large_block_bytes) < 4096:
            raise ValueError(f"large_block_bytes must be >= 4096, got {self.large_block_bytes}")
        if self.comparison not in COMPARISONS:
            raise ValueError(f"comparison must be one of {COMPARISONS}, got {self.comparison!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if not 0 <= self.frac_bits <= 40:
            raise ValueError(f"frac_bits must be in [0, 40], got {self.frac_bits}")
        b = float(self.bound)
        if not (math.isfinite(b) and b > 0):
            raise ValueError(f"bound must be a positive finite number, got {self.bound!r}")
        # An in-range value times 2^f must fit a signed 64-bit integer, and
        # the product of two in-range values must not wrap the ring.
        limit = min(2.0 ** ((self.ring_bits - 2) / 2 - self.frac_bits),
                    2.0 ** (62 - self.frac_bits))
        if b > limit:
            raise ValueError(
                f"bound {b:g} is too large for a {self.ring_bits}-bit ring with "
                f"{self.frac_bits} fractional bits: products would wrap. Use a bound "
                f"<= {limit:g}, fewer fractional bits, or the 128-bit ring.")

    @classmethod
    def fast(cls, **kw) -> "Config":
        """The 64-bit fast mode (16 fractional bits)."""
        return cls(ring_bits=64, **kw)

    @property
    def limbs(self) -> int:
        """int64 limbs per ring element in a share tensor."""
        return self.ring_bits // 64

    @property
    def precision(self) -> float:
        """One unit in the last place of the encoding, 2^-frac_bits."""
        return 2.0 ** -self.frac_bits

    def function_setting(self, function: str, key: str, override: Any = None) -> Any:
        """A non-linear function's setting: the per-call override if given,
        else this config's, else defaults.json's."""
        if override is not None:
            return override
        for source in (self.functions, DEFAULTS.get("functions", {})):
            if key in source.get(function, {}):
                return source[function][key]
        raise KeyError(f"no setting {key!r} for function {function!r} in the config or "
                       f"protocols/defaults.json")

    def replace(self, **changes) -> "Config":
        return dataclasses.replace(self, **changes)
