// Batch-major half-gates garbling and evaluation of the comparator (see
// garble.h for the circuit, the hash, the tweaks and the stream layout).
//
// Batch-major: comparisons are cut into chunks of kChunk; within a chunk,
// gate g is processed for every comparison before gate g + 1, so each hash
// layer is one EVP_EncryptUpdate over 4 kChunk (garbling) or 2 kChunk
// (evaluation) independent blocks, which the EVP implementation pipelines
// through AES-NI (chosen at run time; constant-time portable AES otherwise).
// Chunks are the units of the ParallelFor; one chunk's data stays in L2.
// In a TensorFlow process the EVP_* symbols resolve to the BoringSSL copy
// exported by libtensorflow_framework.so (as for ops/prg); standalone
// programs use the system OpenSSL. Both give identical results.
#include "ops/gc/garble.h"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops/gc/gc_internal.h"
#include "ops/prg/aes_ctr.h"

namespace tf_privpy {
namespace gc {

const uint8_t kFixedAesKey[16] = {0x24, 0x3F, 0x6A, 0x88, 0x85, 0xA3,
                                  0x08, 0xD3, 0x13, 0x19, 0x8A, 0x2E,
                                  0x03, 0x70, 0x73, 0x44};

namespace {

using internal::Arena;
using internal::Fill;
using internal::FixedKeyAes;
using internal::Select;
using internal::Sigma;
using internal::Xor;

// Comparisons per batch-major chunk: 128 KB of X labels + 128 KB of Y
// labels (garbling) or 512 KB of labels and tables (evaluation) per chunk.
constexpr int64_t kChunk = 128;
// Estimated cycles per comparison (ParallelFor shard sizing).
constexpr int64_t kGarbleCycles = 8000;
constexpr int64_t kEvalCycles = 3000;
constexpr uint64_t kLabelBytes = kBits * sizeof(Block);  // per comparison
// Row strides (in blocks) of the per-chunk scratch copies. The tensors'
// rows are 1 KB (labels) and 2 KB (tables) long, so walking one gate across
// a chunk would hit only 4 (2) of the 64 L1 sets; one extra cache line per
// row (17 and 33 lines, odd) spreads a gate's column over all sets. This
// matters for evaluation (memory-bound, +25%); garbling is AES-bound.
constexpr int64_t kLabelStride = kBits + 4;
constexpr int64_t kTableStride = kBits * kTableBlocks + 4;

// rows x row_len blocks from a dense array into a strided scratch.
void CopyRows(const Block* src, int64_t rows, int64_t row_len, Block* dst,
              int64_t stride) {
  for (int64_t r = 0; r < rows; ++r)
    std::copy(src + r * row_len, src + (r + 1) * row_len, dst + r * stride);
}

inline uint64_t TweakLo(int64_t i, int g, int half) {
  return (static_cast<uint64_t>(i) << 7) | (static_cast<uint64_t>(g) << 1) |
         static_cast<uint64_t>(half);
}

// Copies count blocks to dst (16-byte aligned) with non-temporal stores where
// available: the garbled tables are written once and not read back by this
// thread, so streaming them avoids reading every destination line first.
void StreamOut(Block* dst, const Block* src, int64_t count) {
#if defined(__SSE2__)
  if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
    for (int64_t k = 0; k < count; ++k)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
    _mm_sfence();
    return;
  }
#endif
  std::copy(src, src + count, dst);
}

// Prefetches part `part` of `parts` of the byte range [p, p + len).
inline void PrefetchPart(const void* p, int64_t len, int part, int parts) {
  const char* c = static_cast<const char*>(p);
  const int64_t b = len * part / parts, e = len * (part + 1) / parts;
  for (int64_t o = b & ~int64_t{63}; o < e; o += 64) __builtin_prefetch(c + o);
}

bool CheckComparisonSlice(const BatchSlice& s, std::string* error) {
  if (s.n < 0 || s.n > kMaxComparisons || s.first < 0 || s.count < 0 ||
      s.first > s.n - s.count) {
    *error = "comparison indices out of range";
    return false;
  }
  return true;
}

}  // namespace

bool DeriveDelta(const uint8_t key12[16], uint64_t nonce, Block* delta,
                 std::string* error) {
  if (!Fill(key12, nonce, DeltaOffset(), delta, sizeof(Block), error))
    return false;
  delta->lo |= 1;  // point-and-permute: lsb(L) and lsb(L ^ Delta) differ
  return true;
}

bool Garble(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
            Block* tables, uint8_t* decode, const ParallelFor& parallel_for,
            std::string* error) {
  const int64_t n = slice.n, first = slice.first;
  if (!CheckComparisonSlice(slice, error)) return false;
  if (slice.count == 0) return true;
  Block delta;
  if (!DeriveDelta(key12, nonce, &delta, error)) return false;
  const Block sdelta = Sigma(delta);  // sigma is linear: sigma(A^D) = sigma(A)^sigma(D)
  return internal::ForChunks(slice.count, kChunk, kGarbleCycles, parallel_for, error,
                   [&](int64_t begin, int64_t end, std::string* err) {
    FixedKeyAes aes;
    if (!aes.Init()) {
      *err = "fixed-key AES-128-ECB setup failed (OpenSSL EVP error)";
      return false;
    }
    // Zero labels of the chunk (x0, y0: row k = comparison i0 + k, as in
    // the stream; garbling is AES-bound, so they are used where the PRG
    // writes them), its tables (scratch, strided) before they are streamed
    // out, and the hash inputs / outputs.
    Arena arena(kChunk * (2 * kBits + kTableStride + 11 + 1), /*wipe=*/true);
    Block* x0 = arena.Take(kChunk * kBits);
    Block* y0 = arena.Take(kChunk * kBits);
    Block* scratch = arena.Take(kChunk * kTableStride);
    Block* carry = arena.Take(kChunk);
    Block* a0 = arena.Take(kChunk);
    Block* b0 = arena.Take(kChunk);
    Block* hin = arena.Take(4 * kChunk);
    Block* hout = arena.Take(4 * kChunk);
    uint8_t* mask = reinterpret_cast<uint8_t*>(arena.Take(kChunk / 16 + 1));
    for (int64_t i0 = begin; i0 < end; i0 += kChunk) {
      const int64_t m = std::min(kChunk, end - i0);
      for (Role role : {Role::kX, Role::kY}) {
        if (!Fill(key12, nonce, LabelsOffset(role, n) + (first + i0) * kLabelBytes,
                  role == Role::kX ? x0 : y0, m * kLabelBytes, err))
          return false;
      }
      if (!Fill(key12, nonce, MaskOffset(n) + first + i0, mask, m, err))
        return false;
      std::fill(carry, carry + m, Block{0, 0});  // c_0 = 0
      for (int g = 0; g < kBits; ++g) {
        // Hash inputs sigma(A0), sigma(A1) (tweak half 0), sigma(B0),
        // sigma(B1) (tweak half 1) of gate g for the whole chunk.
        for (int64_t k = 0; k < m; ++k) {
          const Block c = carry[k];
          const Block a = Xor(x0[k * kBits + g], c);
          const Block b = Xor(y0[k * kBits + g], c);
          a0[k] = a;
          b0[k] = b;
          const uint64_t t = TweakLo(first + i0 + k, g, 0);
          const Block sa = Xor(Sigma(a), Block{t, nonce});
          const Block sb = Xor(Sigma(b), Block{t | 1, nonce});
          hin[4 * k] = sa;
          hin[4 * k + 1] = Xor(sa, sdelta);
          hin[4 * k + 2] = sb;
          hin[4 * k + 3] = Xor(sb, sdelta);
        }
        if (!aes.Permute(hin, hout, 4 * m)) {
          *err = "fixed-key AES failed (OpenSSL EVP error)";
          return false;
        }
        Block* row = scratch + g * kTableBlocks;
        for (int64_t k = 0; k < m; ++k) {
          // H(X, j) = pi(sigma(X) ^ j) ^ sigma(X) ^ j.
          const Block ha0 = Xor(hout[4 * k], hin[4 * k]);
          const Block ha1 = Xor(hout[4 * k + 1], hin[4 * k + 1]);
          const Block hb0 = Xor(hout[4 * k + 2], hin[4 * k + 2]);
          const Block hb1 = Xor(hout[4 * k + 3], hin[4 * k + 3]);
          const Block a = a0[k], b = b0[k];
          const uint64_t pa = a.lo & 1, pb = b.lo & 1;
          // Generator half-gate (ZRE15, Fig. 2): TG, WG0.
          const Block tg = Xor(Xor(ha0, ha1), Select(pb, delta));
          const Block wg0 = Xor(ha0, Select(pa, tg));
          // Evaluator half-gate: TE, WE0 = H(B0) ^ pb (TE ^ A0) = H(B_pb).
          const Block hb01 = Xor(hb0, hb1);
          const Block te = Xor(hb01, a);
          const Block we0 = Xor(hb0, Select(pb, hb01));
          // c_{g+1} = x_g XOR (a AND b): zero label X^0 ^ WG0 ^ WE0.
          carry[k] = Xor(x0[k * kBits + g], Xor(wg0, we0));
          Block* out = row + k * kTableStride;
          out[0] = tg;
          out[1] = te;
        }
      }
      for (int64_t k = 0; k < m; ++k)
        StreamOut(tables + (i0 + k) * kBits * kTableBlocks, scratch + k * kTableStride,
                  kBits * kTableBlocks);
      for (int64_t k = 0; k < m; ++k)
        decode[i0 + k] = static_cast<uint8_t>((carry[k].lo ^ mask[k]) & 1);
    }
    return true;
  });
}

bool EncodeInput(const uint8_t key12[16], uint64_t nonce, Role role,
                 const int64_t* values, const BatchSlice& slice, Block* labels,
                 const ParallelFor& parallel_for, std::string* error) {
  if (!CheckComparisonSlice(slice, error)) return false;
  if (slice.count == 0) return true;
  Block delta;
  if (!DeriveDelta(key12, nonce, &delta, error)) return false;
  const uint64_t base = LabelsOffset(role, slice.n) + slice.first * kLabelBytes;
  return internal::ForChunks(slice.count, kChunk, 600, parallel_for, error,
                   [&](int64_t begin, int64_t end, std::string* err) {
    for (int64_t i0 = begin; i0 < end; i0 += kChunk) {
      const int64_t m = std::min(kChunk, end - i0);
      Block* out = labels + i0 * kBits;
      if (!Fill(key12, nonce, base + i0 * kLabelBytes, out, m * kLabelBytes,
                err))
        return false;
      for (int64_t k = 0; k < m; ++k) {
        // Sign flip: signed order of v == unsigned order of v ^ 2^63.
        const uint64_t v =
            static_cast<uint64_t>(values[i0 + k]) ^ (uint64_t{1} << 63);
        Block* l = out + k * kBits;
        for (int g = 0; g < kBits; ++g) l[g] = Xor(l[g], Select(v >> g, delta));
      }
    }
    return true;
  });
}

bool Evaluate(uint64_t nonce, int64_t first_index, int64_t n, const Block* tables,
              const uint8_t* decode, const Block* labels_x,
              const Block* labels_y, uint8_t* bits,
              const ParallelFor& parallel_for, std::string* error) {
  if (n < 0 || first_index < 0 || n > kMaxComparisons ||
      first_index > kMaxComparisons - n) {
    *error = "comparison indices out of range";
    return false;
  }
  return internal::ForChunks(n, kChunk, kEvalCycles, parallel_for, error,
                   [&](int64_t begin, int64_t end, std::string* err) {
    FixedKeyAes aes;
    if (!aes.Init()) {
      *err = "fixed-key AES-128-ECB setup failed (OpenSSL EVP error)";
      return false;
    }
    // Strided copies of the chunk's labels and tables (see kLabelStride).
    Arena arena(kChunk * (2 * kLabelStride + kTableStride + 7), /*wipe=*/false);
    Block* lx = arena.Take(kChunk * kLabelStride);
    Block* ly = arena.Take(kChunk * kLabelStride);
    Block* tab = arena.Take(kChunk * kTableStride);
    Block* carry = arena.Take(kChunk);
    Block* av = arena.Take(kChunk);
    Block* bv = arena.Take(kChunk);
    Block* hin = arena.Take(2 * kChunk);
    Block* hout = arena.Take(2 * kChunk);
    for (int64_t i0 = begin; i0 < end; i0 += kChunk) {
      const int64_t m = std::min(kChunk, end - i0);
      CopyRows(labels_x + i0 * kBits, m, kBits, lx, kLabelStride);
      CopyRows(labels_y + i0 * kBits, m, kBits, ly, kLabelStride);
      CopyRows(tables + i0 * kBits * kTableBlocks, m, kBits * kTableBlocks, tab,
               kTableStride);
      // The next chunk's inputs are three contiguous ranges; fetch 1/64 of
      // them per gate so memory latency overlaps with this chunk's AES.
      const int64_t next = std::min(kChunk, end - i0 - m);
      std::fill(carry, carry + m, Block{0, 0});
      for (int g = 0; g < kBits; ++g) {
        if (next > 0) {
          const int64_t i1 = i0 + m;
          PrefetchPart(labels_x + i1 * kBits, next * kLabelBytes, g, kBits);
          PrefetchPart(labels_y + i1 * kBits, next * kLabelBytes, g, kBits);
          PrefetchPart(tables + i1 * kBits * kTableBlocks, 2 * next * kLabelBytes, g,
                       kBits);
        }
        for (int64_t k = 0; k < m; ++k) {
          const Block c = carry[k];
          const Block a = Xor(lx[k * kLabelStride + g], c);
          const Block b = Xor(ly[k * kLabelStride + g], c);
          av[k] = a;
          bv[k] = b;
          const uint64_t t = TweakLo(first_index + i0 + k, g, 0);
          hin[2 * k] = Xor(Sigma(a), Block{t, nonce});
          hin[2 * k + 1] = Xor(Sigma(b), Block{t | 1, nonce});
        }
        if (!aes.Permute(hin, hout, 2 * m)) {
          *err = "fixed-key AES failed (OpenSSL EVP error)";
          return false;
        }
        const Block* row = tab + g * kTableBlocks;
        for (int64_t k = 0; k < m; ++k) {
          const Block* tt = row + k * kTableStride;
          const Block a = av[k], b = bv[k];
          // WG = H(A) ^ sA TG;  WE = H(B) ^ sB (TE ^ A)   (ZRE15, Fig. 2).
          const Block wg =
              Xor(Xor(hout[2 * k], hin[2 * k]), Select(a.lo, tt[0]));
          const Block we = Xor(Xor(hout[2 * k + 1], hin[2 * k + 1]),
                               Select(b.lo, Xor(tt[1], a)));
          carry[k] = Xor(lx[k * kLabelStride + g], Xor(wg, we));
        }
      }
      for (int64_t k = 0; k < m; ++k)
        bits[i0 + k] = static_cast<uint8_t>((carry[k].lo ^ decode[i0 + k]) & 1);
    }
    return true;
  });
}

bool OutputMask(const uint8_t key12[16], uint64_t nonce, int64_t n,
                uint8_t* m, const ParallelFor& parallel_for,
                std::string* error) {
  if (n < 0 || n > kMaxComparisons) {
    *error = "number of comparisons out of range";
    return false;
  }
  if (n == 0) return true;
  if (!PrgFill(key12, nonce, MaskOffset(n), m, static_cast<size_t>(n),
               parallel_for, error))
    return false;
  parallel_for(n, 1, [m](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) m[i] &= 1;
  });
  return true;
}

}  // namespace gc
}  // namespace tf_privpy
