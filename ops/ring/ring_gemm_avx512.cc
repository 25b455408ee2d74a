// AVX-512 IFMA kernels for RingGemm. Every function that uses AVX-512 carries
// a target attribute, so this file builds with plain -O3 (no -m flags) and the
// rest of the binary stays runnable on CPUs without AVX-512; ring_gemm.cc only
// calls in here after CpuHasAvx512Ifma().
//
// Why IFMA: on Ice Lake-SP vpmullq is 3 uops (one 8-lane 64-bit multiply per
// ~2.5 cycles) while vpmadd52{l,h}uq is one uop on both 512-bit ports and
// fuses the accumulation. Elements are cut into 52-bit limbs and each
// micro-tile keeps per-limb-weight accumulators in registers.
// Requires AVX-512 F/VL/DQ/BW + IFMA + VNNI (Ice Lake, Sapphire Rapids, Zen 4).
#include <immintrin.h>

#include <cstdint>

#include "ops/ring/ring_gemm_internal.h"

#define RG_TARGET                                                  \
  __attribute__((target(                                           \
      "avx512f,avx512ifma,avx512vl,avx512dq,avx512bw,avx512vnni")))
#define RG_INLINE inline __attribute__((always_inline))

// GCC 12 false positive inside its own _mm512_undefined_epi32() helper.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tf_privpy {
namespace ring_gemm_internal {
namespace {

constexpr uint64_t kMask52 = (uint64_t{1} << 52) - 1;

RG_TARGET RG_INLINE __m512i Lo52(__m512i acc, __m512i a, __m512i b) {
  return _mm512_madd52lo_epu64(acc, a, b);
}
RG_TARGET RG_INLINE __m512i Hi52(__m512i acc, __m512i a, __m512i b) {
  return _mm512_madd52hi_epu64(acc, a, b);
}

// Lanes [0, count) of 8, count clamped to [0, 8].
RG_INLINE __mmask8 LaneMask(int count) {
  return count >= 8 ? __mmask8(0xFF)
                    : (count <= 0 ? __mmask8(0) : __mmask8((1u << count) - 1));
}

RG_TARGET RG_INLINE __m512i ApplyVec(__m512i c, __m512i v, GemmMode mode) {
  switch (mode) {
    case GemmMode::kAdd: return _mm512_add_epi64(c, v);
    case GemmMode::kSub: return _mm512_sub_epi64(c, v);
    default: return v;
  }
}

// ---------------------------------------------------------------------------
// Z_{2^64}. x = x0 + 2^52 x1 (x0 < 2^52, x1 < 2^12):
//   x*y = lo52(x0 y0) + 2^52 (hi52(x0 y0) + x0 y1 + x1 y0)   (mod 2^64)
// and only (x0 y1 + x1 y0) mod 2^12 matters, so it only needs the low 12 bits
// x0' of x0: with int16 pairs (x0', x1) and (y1, y0') in a dword, one VNNI
// vpdpwssd yields x0'y1 + x1y0' for 16 columns (dword sums wrap mod 2^32,
// harmless since only mod 2^12 is kept; no bound on k). Cost per 8 products:
// 2 IFMA + 0.5 vpdpwssd (vs ~2.5 cycles for one vpmullq here).
// Micro-tile MR x 16: lo/hi IFMA accumulators per 8 columns plus one dword
// cross accumulator per row.

// B-side int16 pairs (y1, y0') for 16 columns given as two 8-qword vectors.
RG_TARGET RG_INLINE __m512i PairOperandB(__m512i lo8, __m512i hi8) {
  const __m512i m12 = _mm512_set1_epi64(0xFFF);
  const __m512i a =
      _mm512_or_si512(_mm512_srli_epi64(lo8, 52),
                      _mm512_slli_epi64(_mm512_and_si512(lo8, m12), 16));
  const __m512i b =
      _mm512_or_si512(_mm512_srli_epi64(hi8, 52),
                      _mm512_slli_epi64(_mm512_and_si512(hi8, m12), 16));
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a)),
                            _mm512_cvtepi64_epi32(b), 1);
}

template <int MR>
struct Vnni64 {
  using T = uint64_t;
  static constexpr int kMR = MR, kNR = 16;
  // B micro-panel (kc x 16, 24 words per k) ~36 KB stays in the 48 KB L1.
  static constexpr int64_t kKC = 192, kMC = 256, kNC = 256;
  // Per k: MR qwords x0, then MR dwords (x0' | x1 << 16).
  static constexpr int kAPanelK = MR + MR / 2, kBPanelK = 24;
  static constexpr double kCyclesPerMac = 0.2;
  static_assert(MR % 2 == 0 && MR <= 8, "dword pairs fill whole words");

  RG_TARGET static void PackA(const T* A, int64_t lda, int64_t m,
                                   int64_t kc, uint64_t* d) {
    const __m512i m52 = _mm512_set1_epi64(kMask52);
    const __m512i m12 = _mm512_set1_epi64(0xFFF);
    const __m512i idx = _mm512_mullo_epi64(
        _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(lda));
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      const __mmask8 mk = LaneMask(static_cast<int>(m - i0 < MR ? m - i0 : MR));
      const T* a = A + i0 * lda;
      for (int64_t k = 0; k < kc; ++k) {
        const __m512i x = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(),
                                                      mk, idx, a + k, 8);
        _mm512_mask_storeu_epi64(d, LaneMask(MR), _mm512_and_si512(x, m52));
        const __m512i pr = _mm512_or_si512(
            _mm512_and_si512(x, m12),
            _mm512_slli_epi64(_mm512_srli_epi64(x, 52), 16));
        _mm512_mask_cvtepi64_storeu_epi32(d + MR, LaneMask(MR), pr);
        d += kAPanelK;
      }
    }
  }

  RG_TARGET static void PackB(const T* B, int64_t ldb, int64_t kc,
                                   int64_t n, uint64_t* dst) {
    const __m512i m52 = _mm512_set1_epi64(kMask52);
    const int64_t panel = kc * 24;
    for (int64_t k = 0; k < kc; ++k) {
      const T* b = B + k * ldb;
      uint64_t* d = dst + k * 24;
      for (int64_t j = 0; j < n; j += 16) {
        const __m512i y0 = _mm512_maskz_loadu_epi64(
            LaneMask(static_cast<int>(n - j)), b + j);
        const __m512i y1 = _mm512_maskz_loadu_epi64(
            LaneMask(static_cast<int>(n - j - 8)), b + j + 8);
        uint64_t* p = d + (j / 16) * panel;
        _mm512_store_si512(p, _mm512_and_si512(y0, m52));
        _mm512_store_si512(p + 8, _mm512_and_si512(y1, m52));
        _mm512_store_si512(p + 16, PairOperandB(y0, y1));
      }
    }
  }

  RG_TARGET static void Micro(int64_t kc, const uint64_t* a,
                                   const uint64_t* b, T* C, int64_t ldc, int m,
                                   int n, GemmMode mode) {
    // C is touched once per k-block: start fetching it under the k loop.
    for (int r = 0; r < m; ++r) {
      const char* c = reinterpret_cast<const char*>(C + r * ldc);
      _mm_prefetch(c, _MM_HINT_T0);
      _mm_prefetch(c + 127, _MM_HINT_T0);
    }
    __m512i lo[MR][2], hi[MR][2], cr[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      lo[r][0] = lo[r][1] = hi[r][0] = hi[r][1] = _mm512_setzero_si512();
      cr[r] = _mm512_setzero_si512();
    }
    for (int64_t k = 0; k < kc; ++k) {
      const __m512i ya = _mm512_load_si512(b);
      const __m512i yb = _mm512_load_si512(b + 8);
      const __m512i yp = _mm512_load_si512(b + 16);
      const int32_t* ap = reinterpret_cast<const int32_t*>(a + MR);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512i x0 = _mm512_set1_epi64(a[r]);
        const __m512i xp = _mm512_set1_epi32(ap[r]);
        lo[r][0] = Lo52(lo[r][0], x0, ya);
        hi[r][0] = Hi52(hi[r][0], x0, ya);
        lo[r][1] = Lo52(lo[r][1], x0, yb);
        hi[r][1] = Hi52(hi[r][1], x0, yb);
        cr[r] = _mm512_dpwssd_epi32(cr[r], xp, yp);
      }
      a += kAPanelK;
      b += 24;
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      if (r >= m) break;
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        const __m512i c32 = _mm512_cvtepu32_epi64(
            v == 0 ? _mm512_castsi512_si256(cr[r])
                   : _mm512_extracti64x4_epi64(cr[r], 1));
        const __m512i h = _mm512_add_epi64(hi[r][v], c32);
        const __m512i res =
            _mm512_add_epi64(lo[r][v], _mm512_slli_epi64(h, 52));
        T* c = C + r * ldc + 8 * v;
        if (n >= kNR) {
          const __m512i old = mode == GemmMode::kSet ? res
                                                     : _mm512_loadu_si512(c);
          _mm512_storeu_si512(c, ApplyVec(old, res, mode));
        } else {
          const __mmask8 mk = LaneMask(n - 8 * v);
          const __m512i old = _mm512_maskz_loadu_epi64(mk, c);
          _mm512_mask_storeu_epi64(c, mk, ApplyVec(old, res, mode));
        }
      }
    }
  }
};

// ---------------------------------------------------------------------------
// Z_{2^128}. x = x0 + 2^52 x1 + 2^104 x2 (x0, x1 < 2^52, x2 < 2^24):
//   x*y = W0 + 2^52 W1 + 2^104 W2  (mod 2^128) with
//   W0 = lo(x0y0)
//   W1 = hi(x0y0) + lo(x0y1) + lo(x1y0)
//   W2 = hi(x0y1) + hi(x1y0) + lo(x0y2) + lo(x1y1) + lo(x2y0)  (mod 2^24)
// where lo/hi are the 52-bit halves of a 104-bit product. Eight IFMAs per
// 8 products. W0, W1 must be exact: 3 * kc * 2^52 < 2^64 needs kc <= 1365.
RG_TARGET RG_INLINE void Limbs128(__m512i lo, __m512i hi, __m512i* x0,
                                  __m512i* x1, __m512i* x2) {
  const __m512i m52 = _mm512_set1_epi64(kMask52);
  *x0 = _mm512_and_si512(lo, m52);
  *x1 = _mm512_and_si512(
      _mm512_or_si512(_mm512_srli_epi64(lo, 52), _mm512_slli_epi64(hi, 12)),
      m52);
  *x2 = _mm512_srli_epi64(hi, 40);
}

template <int MR, int NV>
struct Ifma128 {
  using T = uint128_t;
  static constexpr int kMR = MR, kNR = 8 * NV;
  // B micro-panel (kc x 8, 24 words per k) 24 KB in L1; A block 0.75 MB in L2.
  static constexpr int64_t kKC = 128, kMC = 256, kNC = 256;
  static constexpr int kAPanelK = 3 * MR, kBPanelK = 3 * kNR;
  static constexpr double kCyclesPerMac = 0.6;
  static_assert(kKC <= 1365, "W1 accumulator would overflow");

  static_assert(MR == 8, "PackA gathers one zmm per limb and k");
  // Panel layout per k: [x0 of MR rows][x1 ...][x2 ...].
  RG_TARGET static void PackA(const T* A, int64_t lda, int64_t m, int64_t kc,
                              uint64_t* d) {
    const __m512i idx = _mm512_mullo_epi64(
        _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(2 * lda));
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      const __mmask8 mk = LaneMask(static_cast<int>(m - i0));
      const uint64_t* a = reinterpret_cast<const uint64_t*>(A + i0 * lda);
      for (int64_t k = 0; k < kc; ++k) {
        const __m512i z = _mm512_setzero_si512();
        const __m512i lo =
            _mm512_mask_i64gather_epi64(z, mk, idx, a + 2 * k, 8);
        const __m512i hi =
            _mm512_mask_i64gather_epi64(z, mk, idx, a + 2 * k + 1, 8);
        __m512i x0, x1, x2;
        Limbs128(lo, hi, &x0, &x1, &x2);
        _mm512_store_si512(d, x0);
        _mm512_store_si512(d + MR, x1);
        _mm512_store_si512(d + 2 * MR, x2);
        d += 3 * MR;
      }
    }
  }

  // Panel layout per k: [y0 of NR cols][y1 ...][y2 ...], B read row by row.
  RG_TARGET static void PackB(const T* B, int64_t ldb, int64_t kc, int64_t n,
                              uint64_t* dst) {
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const int64_t panel = kc * 3 * kNR;
    for (int64_t k = 0; k < kc; ++k) {
      const uint64_t* b = reinterpret_cast<const uint64_t*>(B + k * ldb);
      uint64_t* d = dst + k * 3 * kNR;
      for (int64_t j = 0; j < RoundUp(n, kNR); j += 8) {
        const int cols = static_cast<int>(n - j);
        const __mmask8 m0 = LaneMask(2 * cols), m1 = LaneMask(2 * cols - 8);
        const __m512i p0 = _mm512_maskz_loadu_epi64(m0, b + 2 * j);
        const __m512i p1 = _mm512_maskz_loadu_epi64(m1, b + 2 * j + 8);
        __m512i y0, y1, y2;
        Limbs128(_mm512_permutex2var_epi64(p0, even, p1),
                 _mm512_permutex2var_epi64(p0, odd, p1), &y0, &y1, &y2);
        uint64_t* p = d + (j / kNR) * panel + (j % kNR);
        _mm512_store_si512(p, y0);
        _mm512_store_si512(p + kNR, y1);
        _mm512_store_si512(p + 2 * kNR, y2);
      }
    }
  }

  RG_TARGET static void Micro(int64_t kc, const uint64_t* a,
                              const uint64_t* b, T* C, int64_t ldc, int m,
                              int n, GemmMode mode) {
    for (int r = 0; r < m; ++r) {
      const char* c = reinterpret_cast<const char*>(C + r * ldc);
      _mm_prefetch(c, _MM_HINT_T0);
      _mm_prefetch(c + 64, _MM_HINT_T0);
      _mm_prefetch(c + 127, _MM_HINT_T0);
    }
    __m512i w0[MR][NV], w1[MR][NV], w2[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        w0[r][v] = w1[r][v] = w2[r][v] = _mm512_setzero_si512();
      }
    }
    for (int64_t k = 0; k < kc; ++k) {
      __m512i y0[NV], y1[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        y0[v] = _mm512_load_si512(b + 8 * v);
        y1[v] = _mm512_load_si512(b + kNR + 8 * v);
      }
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i x0 = _mm512_set1_epi64(a[r]);
        const __m512i x1 = _mm512_set1_epi64(a[MR + r]);
        const __m512i x2 = _mm512_set1_epi64(a[2 * MR + r]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
          const __m512i y2 = _mm512_load_si512(b + 2 * kNR + 8 * v);
          w0[r][v] = Lo52(w0[r][v], x0, y0[v]);
          w1[r][v] = Hi52(w1[r][v], x0, y0[v]);
          w1[r][v] = Lo52(w1[r][v], x0, y1[v]);
          w1[r][v] = Lo52(w1[r][v], x1, y0[v]);
          w2[r][v] = Hi52(w2[r][v], x0, y1[v]);
          w2[r][v] = Hi52(w2[r][v], x1, y0[v]);
          w2[r][v] = Lo52(w2[r][v], x0, y2);
          w2[r][v] = Lo52(w2[r][v], x1, y1[v]);
          w2[r][v] = Lo52(w2[r][v], x2, y0[v]);
        }
      }
      a += 3 * MR;
      b += 3 * kNR;
    }
    const __m512i m52 = _mm512_set1_epi64(kMask52);
    const __m512i ilo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i ihi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    const __m512i ones = _mm512_set1_epi64(-1);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      if (r >= m) break;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        // Normalise W0 so the three weights occupy disjoint bit ranges of
        // the low word, then form the 128-bit lanes.
        __m512i W0 = w0[r][v], W1 = w1[r][v];
        W1 = _mm512_add_epi64(W1, _mm512_srli_epi64(W0, 52));
        W0 = _mm512_and_si512(W0, m52);
        const __m512i lo = _mm512_or_si512(W0, _mm512_slli_epi64(W1, 52));
        const __m512i hi = _mm512_add_epi64(_mm512_srli_epi64(W1, 12),
                                            _mm512_slli_epi64(w2[r][v], 40));
        uint64_t* c = reinterpret_cast<uint64_t*>(C + r * ldc + 8 * v);
        const int cols = n - 8 * v;
        const __m512i part[2] = {_mm512_permutex2var_epi64(lo, ilo, hi),
                                 _mm512_permutex2var_epi64(lo, ihi, hi)};
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __mmask8 mk = LaneMask(2 * (cols - 4 * h));
          const __m512i p = part[h];
          __m512i res;
          if (mode == GemmMode::kSet) {
            res = p;
          } else {
            const __m512i old = _mm512_maskz_loadu_epi64(mk, c + 8 * h);
            // 128-bit add/sub on (lo, hi) lane pairs: carry/borrow from the
            // even (low-word) lanes into the following odd lane.
            if (mode == GemmMode::kAdd) {
              res = _mm512_add_epi64(old, p);
              const __mmask8 cy = _mm512_cmplt_epu64_mask(res, old) & 0x55;
              res = _mm512_mask_sub_epi64(res, __mmask8(cy << 1), res, ones);
            } else {
              res = _mm512_sub_epi64(old, p);
              const __mmask8 bw = _mm512_cmplt_epu64_mask(old, p) & 0x55;
              res = _mm512_mask_add_epi64(res, __mmask8(bw << 1), res, ones);
            }
          }
          _mm512_mask_storeu_epi64(c + 8 * h, mk, res);
        }
      }
    }
  }
};

}  // namespace

bool CpuHasAvx512Ifma() {
  // __builtin_cpu_supports also requires OS support for the zmm state.
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512ifma") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return ok;
}

void GemmAvx512(const uint64_t* A, int64_t lda, const uint64_t* B, int64_t ldb,
                uint64_t* C, int64_t ldc, int64_t M, int64_t K, int64_t N,
                GemmMode mode, const ParallelFor& pf) {
  GemmDriver<Vnni64<4>>(A, lda, B, ldb, C, ldc, M, K, N, mode, pf);
}

void GemmAvx512(const uint128_t* A, int64_t lda, const uint128_t* B,
                int64_t ldb, uint128_t* C, int64_t ldc, int64_t M, int64_t K,
                int64_t N, GemmMode mode, const ParallelFor& pf) {
  GemmDriver<Ifma128<8, 1>>(A, lda, B, ldb, C, ldc, M, K, N, mode, pf);
}

}  // namespace ring_gemm_internal
}  // namespace tf_privpy
