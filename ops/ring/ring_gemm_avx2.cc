// AVX2 kernel of RingGemm in Z_{2^128}, for CPUs without AVX-512 IFMA (Zen 2
// and Zen 3, Haswell..Skylake client). Every function that uses AVX2 carries a
// target attribute, so this file builds with plain -O3 and ring_gemm.cc only
// calls in here after CpuHasAvx2().
//
// Why: the portable kernel's 128-bit multiply-add is three 64-bit multiplies
// on the one scalar multiplier plus carries, and its 2x4 tile of 128-bit
// accumulators does not fit the 16 general registers (measured about 6 cycles
// per product on a Zen core). AVX2 has no 64x64 multiply, but vpmuludq does
// four 32x32->64 products at a time. Cut x and y into 32-bit limbs
// x = sum x_i 2^(32 i); modulo 2^128 only the ten limb products with
// i + j <= 3 matter:
//   x*y = c0 + 2^32 c1 + 2^64 (c2 + 2^32 c3)          (mod 2^128)
//   c0 = x0y0, c1 = x0y1 + x1y0, c2 = x0y2 + x1y1 + x2y0, c3 = the four i+j=3
// c2 + 2^32 c3 is only needed modulo 2^64 (one wrapping accumulator). c0 and
// c1 are needed beyond 64 bits: each keeps a wrapping sum S mod 2^64 and the
// sum H of the products' high halves; the sum L of their low halves is below
// 2 k 2^32 < 2^64, so L = S - 2^32 H (mod 2^64) exactly and the true sum is
// 2^32 H + L (k < 2^30: the driver's k-blocks are 256).
// Per four products: 10 vpmuludq and 17 adds/shifts.
#include <immintrin.h>

#include <cstdint>

#include "ops/ring/ring_gemm_internal.h"

#define RG2_TARGET __attribute__((target("avx2")))
#define RG2_INLINE inline __attribute__((always_inline))

namespace tf_privpy {
namespace ring_gemm_internal {
namespace {

// Micro-tile 1 x 4*NG: one row of A (its four limbs broadcast) against NG
// groups of four columns of B; 5 accumulators per group.
template <int NG>
struct Avx2Limb128 {
  using T = uint128_t;
  static constexpr int kMR = 1, kNR = 4 * NG;
  static constexpr int64_t kKC = 256, kMC = 64, kNC = 256;
  static constexpr int kAPanelK = 4;           // four limbs of one element
  static constexpr int kBPanelK = 4 * kNR;     // four limb vectors per group
  static constexpr double kCyclesPerMac = 2.5;

  static uint64_t Limb(T x, int i) {
    return static_cast<uint64_t>(static_cast<uint32_t>(x >> (32 * i)));
  }

  static void PackA(const T* A, int64_t lda, int64_t m, int64_t kc,
                    uint64_t* dst) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t k = 0; k < kc; ++k) {
        const T x = A[i * lda + k];
        for (int l = 0; l < 4; ++l) *dst++ = Limb(x, l);
      }
    }
  }

  // Per k and group: limb 0 of the group's four columns, then limb 1, ...
  static void PackB(const T* B, int64_t ldb, int64_t kc, int64_t n,
                    uint64_t* dst) {
    for (int64_t j0 = 0; j0 < n; j0 += kNR) {
      for (int64_t k = 0; k < kc; ++k) {
        const T* b = B + k * ldb + j0;
        for (int g = 0; g < NG; ++g) {
          for (int l = 0; l < 4; ++l) {
            for (int c = 0; c < 4; ++c) {
              const int col = 4 * g + c;
              *dst++ = j0 + col < n ? Limb(b[col], l) : 0;
            }
          }
        }
      }
    }
  }

  RG2_TARGET static void Micro(int64_t kc, const uint64_t* ap,
                               const uint64_t* bp, T* C, int64_t /*ldc: one row*/, int m,
                               int n, GemmMode mode) {
    __m256i s0[NG], h0[NG], s1[NG], h1[NG], s23[NG];
    for (int g = 0; g < NG; ++g) {
      s0[g] = h0[g] = s1[g] = h1[g] = s23[g] = _mm256_setzero_si256();
    }
    for (int64_t k = 0; k < kc; ++k) {
      const __m256i a0 = _mm256_set1_epi64x(static_cast<int64_t>(ap[4 * k]));
      const __m256i a1 = _mm256_set1_epi64x(static_cast<int64_t>(ap[4 * k + 1]));
      const __m256i a2 = _mm256_set1_epi64x(static_cast<int64_t>(ap[4 * k + 2]));
      const __m256i a3 = _mm256_set1_epi64x(static_cast<int64_t>(ap[4 * k + 3]));
      const __m256i* b = reinterpret_cast<const __m256i*>(bp + k * kBPanelK);
      for (int g = 0; g < NG; ++g) {
        const __m256i b0 = _mm256_load_si256(b + 4 * g);
        const __m256i b1 = _mm256_load_si256(b + 4 * g + 1);
        const __m256i b2 = _mm256_load_si256(b + 4 * g + 2);
        const __m256i b3 = _mm256_load_si256(b + 4 * g + 3);
        __m256i p = _mm256_mul_epu32(a0, b0);
        s0[g] = _mm256_add_epi64(s0[g], p);
        h0[g] = _mm256_add_epi64(h0[g], _mm256_srli_epi64(p, 32));
        p = _mm256_mul_epu32(a0, b1);
        s1[g] = _mm256_add_epi64(s1[g], p);
        h1[g] = _mm256_add_epi64(h1[g], _mm256_srli_epi64(p, 32));
        p = _mm256_mul_epu32(a1, b0);
        s1[g] = _mm256_add_epi64(s1[g], p);
        h1[g] = _mm256_add_epi64(h1[g], _mm256_srli_epi64(p, 32));
        const __m256i c2 = _mm256_add_epi64(
            _mm256_add_epi64(_mm256_mul_epu32(a0, b2), _mm256_mul_epu32(a1, b1)),
            _mm256_mul_epu32(a2, b0));
        const __m256i c3 = _mm256_add_epi64(
            _mm256_add_epi64(_mm256_mul_epu32(a0, b3), _mm256_mul_epu32(a1, b2)),
            _mm256_add_epi64(_mm256_mul_epu32(a2, b1), _mm256_mul_epu32(a3, b0)));
        s23[g] = _mm256_add_epi64(s23[g],
                                  _mm256_add_epi64(c2, _mm256_slli_epi64(c3, 32)));
      }
    }
    alignas(32) uint64_t v[5][4 * NG];
    for (int g = 0; g < NG; ++g) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(v[0] + 4 * g), s0[g]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(v[1] + 4 * g), h0[g]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(v[2] + 4 * g), s1[g]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(v[3] + 4 * g), h1[g]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(v[4] + 4 * g), s23[g]);
    }
    if (m < 1) return;
    for (int c = 0; c < n; ++c) {
      const T c0 = (T(v[1][c]) << 32) + (v[0][c] - (v[1][c] << 32));
      const T c1 = (T(v[3][c]) << 32) + (v[2][c] - (v[3][c] << 32));
      ApplyMode(C + c, c0 + (c1 << 32) + (T(v[4][c]) << 64), mode);
    }
  }
};

}  // namespace

bool CpuHasAvx2() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return ok;
}

void GemmAvx2(const uint128_t* A, int64_t lda, const uint128_t* B, int64_t ldb,
              uint128_t* C, int64_t ldc, int64_t M, int64_t K, int64_t N,
              GemmMode mode, const ParallelFor& pf) {
  GemmDriver<Avx2Limb128<2>>(A, lda, B, ldb, C, ldc, M, K, N, mode, pf);
}

}  // namespace ring_gemm_internal
}  // namespace tf_privpy
