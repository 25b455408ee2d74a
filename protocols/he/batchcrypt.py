"""BatchCrypt's codec (Zhang et al., USENIX ATC'20; DESIGN §9): gradients ->
quantized slots -> packed Paillier plaintexts, and sums of such plaintexts ->
exact slot sums -> averaged gradients.

Pipeline for m clients, per training round:

1. Each client reports per-layer (min, max, size) (`layer_stats`); the
   aggregator merges them (`merge_stats`) and computes one clipping threshold
   alpha per layer with dACIQ (`daciq_alpha`, protocols/daciq.py).
2. Each client quantizes (`quantize`) and packs (`pack`) its update:
   `BatchCryptCodec.encode` does both for a list of layers.
3. The plaintexts are Paillier-encrypted, multiplied (= added) at the
   aggregator and decrypted; the result is T = sum_c P_c, the plain integer
   sum (`sum_plaintexts` computes exactly that, without encryption).
4. `unpack_sum` / `BatchCryptCodec.decode` recover the slot sums exactly and
   dequantize (`dequantize_sum`).

Definitions (r bits, m clients, a key_bits-bit Paillier modulus n >= 2^(key_bits-1)):

- Quantization, two sign bits: qmax = 2^(r-2) - 1; a value x of a layer with
  threshold alpha becomes q = SR(clip(x, -alpha, alpha) / alpha * qmax) in
  [-qmax, qmax], SR(y) = floor(y + u) with u uniform on [0, 1) (computed as
  floor(y) + [u < y - floor(y)], exact in floating point): E[q] = y exactly.
  The randomness need not be secret; it comes from NumPy's PCG64 seeded from
  the OS unless a seed or Generator is passed.
- Slot width w = r + p, p = ceil(log2 m) padding bits: a sum of m slot values
  has |s| <= m qmax < 2^(w-2), so its two top bits (the sign bits) agree.
- Plaintext of k slots: P = (sum_i q_i 2^(w i)) mod 2^W, W = k w, slot 0 the
  least significant: the W-bit two's complement of the signed integer
  sum_i q_i 2^(w i). (Not the concatenation of each slot's own two's
  complement, which differs by a borrow: see ops/batchcrypt/batchcrypt.h.)
  Stored as ceil(key_bits / 8) big-endian unsigned bytes in a tf.string, the
  plaintext format of the Paillier kernels.
- Capacity: k = floor((key_bits - 1 - p) / w), so a sum of up to 2^p >= m
  plaintexts is T < 2^p 2^W <= 2^(key_bits-1) <= n: Paillier returns T itself.
  2048-bit key, r = 16, m = 16: w = 20, k = 102 slots, 512-byte ciphertexts:
  5.02 bytes per value.
- Exact decoding for any m: T_0 = T mod 2^W; for slot i from the lowest,
  d_i = (T_i mod 2^w) read as signed in [-2^(w-1), 2^(w-1)),
  T_(i+1) = (T_i - d_i) / 2^w. Then d_i = sum_c q_(c,i) whenever every slot
  sum satisfies |s| < 2^(w-1), which holds for any N <= max_summands in-range
  summands. (BatchCrypt's released code writes each slot's own two's
  complement and decodes each slot on its own with a table of sign patterns;
  it is right only for m = 2. tests/test_batchcrypt.py models it.)
- Overflow: with N summands, a legitimate slot sum has |s| <= bound =
  min(N, m) qmax. A decoded |d| > bound (this includes every slot whose two
  sign bits disagree) is a positive (d > bound) or negative (d < -bound)
  overflow: it is counted, flagged in a mask, and never returned as a value
  (NaN after dequantization). Causes: more summands than m, or plaintexts not
  made by this codec (other r or m, corrupted). `unpack_sum` refuses N >
  max_summands, where a slot sum or T itself could wrap undetectably.
  A client that crafts its plaintext maliciously can still shift sums within
  the bound: the codec is not a defense against malicious clients.
- Dequantization of a slot sum s of a layer: s * alpha / qmax (divide by N
  for the mean).
"""
from __future__ import annotations

import dataclasses
import math
from typing import List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from . import kernels
from .daciq import (MAX_BITS, MIN_BITS, check_bits, daciq_alpha, expected_normal_range,
                    gaussian_fit, max_level, optimal_alpha, quantization_mse)

__all__ = [
    "MAX_BITS", "MIN_BITS", "BatchCryptCodec", "BatchCryptOverflowError", "LayerStats",
    "Layout", "SumDecode", "daciq_alpha", "dequantize_sum", "expected_normal_range",
    "gaussian_fit", "layer_stats", "max_level", "merge_stats", "optimal_alpha",
    "quantization_mse", "quantize", "sum_plaintexts",
]

MAX_PAD_BITS = 30   # m <= 2^30 clients: w = r + p <= 62, what the kernels decode


class BatchCryptOverflowError(OverflowError):
    """Decoded slot sums beyond the range the codec was configured for.

    Attributes: positive, negative (counts), num_summands, num_clients (m),
    per_layer (list of (layer name, overflowed values))."""

    def __init__(self, positive: int, negative: int, num_summands: int, num_clients: int,
                 bound: int, per_layer: Sequence[Tuple[str, int]] = (), padding: int = 0):
        self.positive, self.negative = int(positive), int(negative)
        self.num_summands, self.num_clients = int(num_summands), int(num_clients)
        self.per_layer, self.padding = list(per_layer), int(padding)
        parts = [f"{name}: {c}" for name, c in self.per_layer if c]
        if padding:
            parts.append(f"{padding} in the zero padding after the last value")
        where = " (" + ", ".join(parts) + ")" if parts else ""
        if padding:
            fix = ("the padding of a sum of this codec's plaintexts is 0, so the plaintexts "
                   "do not match this layout or codec (other r, m, key or layer shapes)")
        elif num_summands > num_clients:
            fix = (f"{num_summands} plaintexts were summed but the codec is built for m = "
                   f"{num_clients} clients: build it with m >= {num_summands} (all clients and "
                   "the aggregator must use the same m)")
        else:
            fix = (f"a sum of {num_summands} <= m = {num_clients} in-range values cannot "
                   "overflow, so some plaintexts were not made by this codec's encode/pack "
                   "(a client used another r or m, or a plaintext is corrupted)")
        super().__init__(
            f"BatchCrypt decoding found {self.positive} positive and {self.negative} negative "
            f"overflows (slot sums beyond +-{bound}){where}. Overflowed values are not "
            f"returned. Cause: {fix}. Pass on_overflow='nan' to get NaN in their place.")


class SumDecode(NamedTuple):
    """Result of unpack_sum: exact slot sums (0 where overflowed) and the
    overflow report."""
    values: np.ndarray          # int64 [count]
    positive_overflows: int
    negative_overflows: int
    overflow_mask: np.ndarray   # bool [count]


@dataclasses.dataclass(frozen=True)
class LayerStats:
    """What a client reports about one layer for dACIQ: min, max, size."""
    minimum: float
    maximum: float
    size: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each layer sits in the flat slot sequence, and its threshold.
    Every client and the decoder must use the same layout."""
    shapes: Tuple[Tuple[int, ...], ...]
    alphas: Tuple[float, ...]
    names: Tuple[str, ...]
    dtypes: Tuple[str, ...]

    @property
    def sizes(self) -> Tuple[int, ...]:
        return tuple(int(np.prod(s, dtype=np.int64)) for s in self.shapes)

    @property
    def count(self) -> int:
        """Number of slots (values) of the whole update."""
        return sum(self.sizes)


# ------------------------------------------------------------ input checks
def _layer_names(n: int, names: Optional[Sequence[str]]) -> List[str]:
    if names is None:
        return [f"layer {i}" for i in range(n)]
    if len(names) != n:
        raise ValueError(f"{len(names)} names for {n} layers")
    return [str(x) for x in names]


def _as_float_array(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise TypeError(f"{name}: BatchCrypt encodes real numbers, got dtype {a.dtype}")
    return a


def _check_finite(a: np.ndarray, name: str) -> None:
    if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        raise ValueError(
            f"{name} has {nan} NaN and {inf} infinite values; BatchCrypt encodes finite "
            "gradients only. Nothing was encoded. Fix the training step (e.g. a lower "
            "learning rate or gradient clipping) before aggregating.")


def _check_alpha(alpha, name: str = "alpha") -> float:
    a = float(alpha)
    if not (math.isfinite(a) and a > 0.0):
        raise ValueError(f"{name}: the clipping threshold must be finite and > 0, got {alpha!r}")
    return a


def _generator(rng) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng()   # seeded from the OS, fresh every call
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer, np.random.SeedSequence)) and not isinstance(rng, bool):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be None, a seed or a numpy Generator, got {type(rng).__name__}")


# ------------------------------------------------------- per-value functions
def quantize(x, alpha: float, r: int, rng=None) -> np.ndarray:
    """int32 q in [-qmax, qmax], qmax = 2^(r-2) - 1: q = SR(clip(x, -alpha,
    alpha) / alpha * qmax), SR stochastic rounding (E[q] = the scaled value).

    Computed in float64 whatever x's dtype. rng: None (fresh OS-seeded
    randomness), a seed, or a numpy Generator (reproducible). Raises
    ValueError on NaN/Inf."""
    qmax = max_level(r)
    alpha = _check_alpha(alpha)
    a = _as_float_array(x, "x")
    _check_finite(a, "x")
    y = a.astype(np.float64) * (qmax / alpha)
    np.clip(y, -qmax, qmax, out=y)          # = clip(x, -alpha, alpha) / alpha * qmax
    low = np.floor(y)
    y -= low                                 # fractional part, exact
    up = _generator(rng).random(y.shape) < y
    low += up
    return low.astype(np.int32)


def dequantize_sum(values, alpha: float, r: int, mask=None, num_summands: int = 1
                   ) -> np.ndarray:
    """float64 values * alpha / qmax / num_summands; NaN where mask is true."""
    out = np.asarray(values, dtype=np.float64) * (_check_alpha(alpha) / max_level(r))
    if num_summands != 1:
        out /= num_summands
    if mask is not None:
        out[np.asarray(mask, dtype=bool)] = np.nan
    return out


def sum_plaintexts(batches: Sequence, plaintext_bytes: int) -> tf.Tensor:
    """Elementwise integer sum of several plaintext vectors (tf.string
    [nct] of big-endian unsigned integers), as plaintext_bytes-byte strings.

    This is what decrypting the product of the plaintexts' Paillier
    ciphertexts yields (the sum mod n, and the codec keeps sums below n): the
    reference for tests and for simulating aggregation in the clear."""
    arrays = [_bytes_list(b) for b in batches]
    if not arrays:
        raise ValueError("sum_plaintexts needs at least one batch")
    nct = len(arrays[0])
    if any(len(a) != nct for a in arrays):
        raise ValueError(f"plaintext batches differ in length: {[len(a) for a in arrays]}")
    out = []
    for j in range(nct):
        total = sum(int.from_bytes(a[j], "big") for a in arrays)
        if total.bit_length() > 8 * plaintext_bytes:
            raise ValueError(f"the sum of plaintexts {j} does not fit {plaintext_bytes} bytes")
        out.append(total.to_bytes(plaintext_bytes, "big"))
    return tf.constant(out, dtype=tf.string, shape=[nct])


def _bytes_list(batch) -> list:
    if isinstance(batch, (tf.Tensor, np.ndarray)):
        return [bytes(b) for b in np.asarray(batch).reshape(-1)]
    return [bytes(b) for b in batch]


# ------------------------------------------------------------ layer-wise
def layer_stats(layers: Sequence, names: Optional[Sequence[str]] = None) -> List[LayerStats]:
    """Per-layer (min, max, size) of one client's update; raises ValueError
    naming the first layer with NaN or Inf values."""
    names = _layer_names(len(layers), names)
    out = []
    for layer, name in zip(layers, names):
        a = _as_float_array(layer, name)
        _check_finite(a, name)
        if a.size == 0:
            out.append(LayerStats(0.0, 0.0, 0))
        else:
            out.append(LayerStats(float(a.min()), float(a.max()), int(a.size)))
    return out


def merge_stats(per_client: Sequence[Sequence[LayerStats]]) -> List[LayerStats]:
    """Global per-layer stats from every client's layer_stats: min of mins,
    max of maxes, sum of sizes."""
    if not per_client:
        raise ValueError("merge_stats needs the stats of at least one client")
    nl = len(per_client[0])
    if any(len(c) != nl for c in per_client):
        raise ValueError(f"clients report different numbers of layers: "
                         f"{[len(c) for c in per_client]}")
    merged = []
    for i in range(nl):
        live = [c[i] for c in per_client if c[i].size > 0]
        if not live:
            merged.append(LayerStats(0.0, 0.0, 0))
            continue
        merged.append(LayerStats(min(s.minimum for s in live), max(s.maximum for s in live),
                                 sum(int(s.size) for s in live)))
    return merged


class BatchCryptCodec:
    """BatchCrypt's quantize-and-pack codec for r-bit values, m clients and a
    key_bits-bit Paillier key (definitions in the module docstring).

    >>> codec = BatchCryptCodec(r=16, m=16, key_bits=2048)
    >>> codec.slot_bits, codec.slots_per_plaintext, round(codec.bytes_per_value, 2)
    (20, 102, 5.02)
    """

    def __init__(self, r: int = 16, m: int = 2, key_bits: int = 2048):
        self.r = check_bits(r)
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
            raise ValueError(f"the number of clients m must be an integer >= 1, got {m!r}")
        self.m = int(m)
        self.pad_bits = (self.m - 1).bit_length()          # ceil(log2 m)
        if self.pad_bits > MAX_PAD_BITS:
            raise ValueError(f"m = {m} clients exceeds the supported 2^{MAX_PAD_BITS}")
        if isinstance(key_bits, bool) or not isinstance(key_bits, (int, np.integer)):
            raise ValueError(f"key_bits must be an integer, got {key_bits!r}")
        self.key_bits = int(key_bits)
        self.qmax = max_level(self.r)
        self.slot_bits = self.r + self.pad_bits
        self.slots_per_plaintext = (self.key_bits - 1 - self.pad_bits) // self.slot_bits
        if self.slots_per_plaintext < 1:
            raise ValueError(
                f"a {key_bits}-bit key is too small for one {self.slot_bits}-bit slot "
                f"(r = {r}, m = {m}): it needs key_bits >= {self.slot_bits + 1 + self.pad_bits}")
        self.plaintext_bits = self.slots_per_plaintext * self.slot_bits
        self.plaintext_bytes = (self.key_bits + 7) // 8
        self.bound = self.m * self.qmax
        # Largest number of in-range summands whose slot sums stay below
        # 2^(w-1) (exact decoding) and whose total stays below 2^(key_bits-1) <= n.
        self.max_summands = min(((1 << (self.slot_bits - 1)) - 1) // self.qmax,
                                1 << (self.key_bits - 1 - self.plaintext_bits))

    def __repr__(self) -> str:
        return (f"BatchCryptCodec(r={self.r}, m={self.m}, key_bits={self.key_bits}: "
                f"{self.slots_per_plaintext} slots of {self.slot_bits} bits)")

    @property
    def bytes_per_value(self) -> float:
        """Paillier ciphertext bytes (2 ceil(key_bits/8)) per packed value."""
        return 2 * self.plaintext_bytes / self.slots_per_plaintext

    def num_plaintexts(self, count: int) -> int:
        return -(-int(count) // self.slots_per_plaintext)

    # -------------------------------------------------------------- values
    def quantize(self, x, alpha: float, rng=None) -> np.ndarray:
        return quantize(x, alpha, self.r, rng)

    def pack(self, q) -> tf.Tensor:
        """Quantized values (any shape, read flat; |q| <= qmax) -> tf.string
        [ceil(N / k)] plaintexts, the last one zero-padded."""
        q = np.asarray(q)
        if not np.issubdtype(q.dtype, np.integer):
            raise TypeError(f"pack takes integer slot values, got dtype {q.dtype}")
        if q.size and (q.min() < -self.qmax or q.max() > self.qmax):
            raise ValueError(f"slot values must lie in [-{self.qmax}, {self.qmax}] (r = {self.r}),"
                             f" got [{q.min()}, {q.max()}]")
        q = q.astype(np.int32, copy=False)
        return kernels.batchcrypt_pack(q.reshape(-1), self.slot_bits, self.slots_per_plaintext,
                                       self.plaintext_bytes)

    def unpack_sum(self, plaintexts, num_summands: int, count: int) -> SumDecode:
        """Exact slot sums of the sum of num_summands packed plaintexts.

        plaintexts: tf.string [ceil(count / k)] (decrypted sums), or a list
        of bytes or of non-negative Python ints. Returns SumDecode(values,
        positive_overflows, negative_overflows, overflow_mask); overflowed
        values are 0 in `values` and true in the mask."""
        n = self._check_summands(num_summands)
        count = int(count)
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        t = self._as_plaintexts(plaintexts)
        if int(t.shape[0]) != self.num_plaintexts(count):
            raise ValueError(f"{count} values take {self.num_plaintexts(count)} plaintexts of "
                             f"{self.slots_per_plaintext} slots, got {int(t.shape[0])}")
        values, pos, neg, mask = kernels.batchcrypt_unpack(
            t, self.slot_bits, self.slots_per_plaintext, count, min(n, self.m) * self.qmax)
        return SumDecode(values.numpy(), int(pos), int(neg), mask.numpy())

    def dequantize_sum(self, values, alpha: float, mask=None, num_summands: int = 1):
        return dequantize_sum(values, alpha, self.r, mask, num_summands)

    def _check_summands(self, num_summands) -> int:
        if isinstance(num_summands, bool) or not isinstance(num_summands, (int, np.integer)) \
                or num_summands < 1:
            raise ValueError(f"num_summands must be an integer >= 1, got {num_summands!r}")
        if num_summands > self.max_summands:
            raise ValueError(
                f"{num_summands} summands exceed what this codec decodes reliably "
                f"({self.max_summands} for r = {self.r}, m = {self.m}): slot sums could wrap "
                f"without detection. Build the codec with m >= {num_summands}.")
        return int(num_summands)

    def _as_plaintexts(self, plaintexts) -> tf.Tensor:
        if isinstance(plaintexts, tf.Tensor):
            if plaintexts.dtype != tf.string:
                raise TypeError(f"plaintexts must be a tf.string tensor, got {plaintexts.dtype}")
            return tf.reshape(plaintexts, [-1])
        items = list(plaintexts)
        if items and all(isinstance(v, (int, np.integer)) for v in items):
            limit = 8 * self.plaintext_bytes
            if any(v < 0 or int(v).bit_length() > limit for v in items):
                raise ValueError(f"plaintext integers must lie in [0, 2^{limit})")
            items = [int(v).to_bytes(self.plaintext_bytes, "big") for v in items]
        return tf.constant(items, dtype=tf.string, shape=[len(items)])

    # -------------------------------------------------------------- layers
    def alphas(self, stats: Sequence[LayerStats]) -> List[float]:
        """dACIQ thresholds from GLOBAL per-layer stats (merge_stats)."""
        return [1.0 if s.size == 0 else daciq_alpha(s.minimum, s.maximum, s.size, self.r)
                for s in stats]

    def encode(self, layers: Sequence, alphas: Sequence[float], rng=None,
               names: Optional[Sequence[str]] = None) -> Tuple[tf.Tensor, Layout]:
        """One client's update (a list of per-layer arrays) -> (tf.string
        [nct] plaintexts of all layers' slots, flattened and concatenated in
        order, and the Layout to decode their sums with).

        Every layer is checked for NaN/Inf before anything is quantized."""
        names = _layer_names(len(layers), names)
        if len(alphas) != len(layers):
            raise ValueError(f"{len(alphas)} thresholds for {len(layers)} layers")
        arrays = [_as_float_array(x, n) for x, n in zip(layers, names)]
        for a, n in zip(arrays, names):
            _check_finite(a, n)
        alphas = tuple(_check_alpha(al, f"alpha of {n}") for al, n in zip(alphas, names))
        gen = _generator(rng)
        q = [quantize(a, al, self.r, gen).reshape(-1) for a, al in zip(arrays, alphas)]
        flat = np.concatenate(q) if q else np.zeros([0], np.int32)
        layout = Layout(tuple(tuple(int(d) for d in a.shape) for a in arrays), alphas,
                        tuple(names), tuple(_out_dtype(a.dtype) for a in arrays))
        return kernels.batchcrypt_pack(flat, self.slot_bits, self.slots_per_plaintext,
                                       self.plaintext_bytes), layout

    def decode(self, plaintexts, layout: Layout, num_summands: int, reduce: str = "mean",
               on_overflow: str = "raise") -> List[np.ndarray]:
        """Sum of num_summands clients' encode() plaintexts -> list of
        per-layer arrays (their mean, or sum with reduce="sum"), in the
        layers' original shapes and float dtypes.

        on_overflow="raise" (default): BatchCryptOverflowError if any slot
        overflowed; "nan": overflowed values come back as NaN. Plaintexts
        inconsistent with the layout (nonzero padding slots) always raise."""
        self._check_decode_args(reduce, on_overflow)
        return self.decode_sum(self.unpack_sum(plaintexts, num_summands, layout.count),
                               layout, num_summands, reduce, on_overflow)

    @staticmethod
    def _check_decode_args(reduce: str, on_overflow: str) -> None:
        if reduce not in ("mean", "sum"):
            raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
        if on_overflow not in ("raise", "nan"):
            raise ValueError(f"on_overflow must be 'raise' or 'nan', got {on_overflow!r}")

    def decode_sum(self, res: SumDecode, layout: Layout, num_summands: int,
                   reduce: str = "mean", on_overflow: str = "raise") -> List[np.ndarray]:
        """decode() from unpack_sum's result, for callers that also read its
        overflow counts (one unpacking, not two)."""
        self._check_decode_args(reduce, on_overflow)
        offsets = np.cumsum((0,) + layout.sizes)
        per_layer = [(nm, int(res.overflow_mask[a:b].sum()))
                     for nm, a, b in zip(layout.names, offsets[:-1], offsets[1:])]
        total = res.positive_overflows + res.negative_overflows
        padding = total - int(res.overflow_mask.sum())
        if padding or (on_overflow == "raise" and total):
            raise BatchCryptOverflowError(
                res.positive_overflows, res.negative_overflows, num_summands, self.m,
                min(num_summands, self.m) * self.qmax, per_layer, padding)
        div = num_summands if reduce == "mean" else 1
        out = []
        for shape, alpha, dtype, a, b in zip(layout.shapes, layout.alphas, layout.dtypes,
                                             offsets[:-1], offsets[1:]):
            v = dequantize_sum(res.values[a:b], alpha, self.r, res.overflow_mask[a:b], div)
            out.append(v.reshape(shape).astype(dtype))
        return out


def _out_dtype(dtype) -> str:
    return np.dtype(dtype).name if np.issubdtype(dtype, np.floating) else "float32"
