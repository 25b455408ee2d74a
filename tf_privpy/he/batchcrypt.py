"""BatchCrypt: batched, quantized gradient aggregation under additively
homomorphic encryption (Zhang et al., USENIX ATC'20; DESIGN §9).

Instead of one Paillier ciphertext per gradient value, each client clips its
update per layer (dACIQ thresholds agreed from global per-layer min, max and
size), quantizes it to r-bit signed integers with stochastic rounding, and
packs about a hundred of them into one plaintext (2048-bit key, r = 16:
~5 ciphertext bytes per value instead of 512). The aggregator multiplies the
clients' ciphertexts, which adds the plaintexts; the decoder recovers every
slot's sum exactly, for any number of clients, and reports overflows instead
of returning wrong numbers.

Plaintexts are tf.string tensors of big-endian unsigned integers
(ceil(key_bits / 8) bytes each), the format the Paillier kernels encrypt and
decrypt to. Definitions, bounds and guarantees: tf_privpy/protocols/batchcrypt.py
(codec) and tf_privpy/protocols/daciq.py (clipping).

Example (3 clients; `sum_plaintexts` stands in for encrypt, add, decrypt):

  >>> import numpy as np
  >>> from tf_privpy.he import batchcrypt as bc
  >>> rng = np.random.default_rng(0)
  >>> updates = [[rng.normal(0, 0.01, (784, 10)).astype(np.float32),
  ...             rng.normal(0, 0.1, (10,)).astype(np.float32)] for _ in range(3)]
  >>> codec = bc.BatchCryptCodec(r=16, m=3, key_bits=2048)
  >>> stats = bc.merge_stats([bc.layer_stats(u) for u in updates])  # clients -> aggregator
  >>> alphas = codec.alphas(stats)                                   # aggregator -> clients
  >>> encoded = [codec.encode(u, alphas) for u in updates]           # each client
  >>> layout = encoded[0][1]
  >>> total = bc.sum_plaintexts([p for p, _ in encoded], codec.plaintext_bytes)
  >>> mean = codec.decode(total, layout, num_summands=3)             # list of 2 arrays
  >>> exact = np.mean([u[0] for u in updates], axis=0)
  >>> bool(np.abs(mean[0] - exact).max() < 2 * alphas[0] / codec.qmax)
  True

Codec figures: `codec.slot_bits` (w = r + ceil(log2 m)),
`codec.slots_per_plaintext` (k = floor((key_bits - 1 - ceil(log2 m)) / w)),
`codec.bytes_per_value`, `codec.max_summands`.

Errors: NaN/Inf in a layer -> ValueError naming the layer, before anything is
encoded; r outside [3, 32], m < 1 or a key too small for one slot ->
ValueError; overflowed sums -> BatchCryptOverflowError (an OverflowError) with
the positive and negative counts and the cause, or NaN in their place with
decode(..., on_overflow="nan").
"""
from tf_privpy.protocols.he.batchcrypt import (MAX_BITS, MIN_BITS, BatchCryptCodec,
                                            BatchCryptOverflowError, LayerStats, Layout,
                                            SumDecode, daciq_alpha, dequantize_sum,
                                            expected_normal_range, gaussian_fit, layer_stats,
                                            max_level, merge_stats, optimal_alpha,
                                            quantization_mse, quantize, sum_plaintexts)

__all__ = [
    "MAX_BITS", "MIN_BITS", "BatchCryptCodec", "BatchCryptOverflowError", "LayerStats",
    "Layout", "SumDecode", "daciq_alpha", "dequantize_sum", "expected_normal_range",
    "gaussian_fit", "layer_stats", "max_level", "merge_stats", "optimal_alpha",
    "quantization_mse", "quantize", "sum_plaintexts",
]
