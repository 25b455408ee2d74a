// RingGemm: runtime dispatch between the AVX-512 IFMA kernels
// (ring_gemm_avx512.cc), the 128-bit ring's AVX2 kernel (ring_gemm_avx2.cc)
// and a portable register-blocked C++ kernel.
#include "ops/ring/ring_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "ops/ring/ring_gemm_internal.h"

namespace tf_privpy {
namespace ring_gemm_internal {
namespace {

// Portable policy: packed panels hold plain T values; the compiler keeps the
// MR x NR accumulator tile in registers and wraps modulo 2^bits for free.
template <typename TT, int MR, int NR>
struct PortablePolicy {
  using T = TT;
  static constexpr int kMR = MR, kNR = NR;
  static constexpr int64_t kKC = 256, kMC = 128, kNC = 256;
  static constexpr int kAPanelK = MR * sizeof(T) / 8;
  static constexpr int kBPanelK = NR * sizeof(T) / 8;
  static constexpr double kCyclesPerMac = sizeof(T) == 8 ? 1.0 : 4.0;

  static void PackA(const T* A, int64_t lda, int64_t m, int64_t kc,
                    uint64_t* dst) {
    T* d = reinterpret_cast<T*>(dst);
    for (int64_t i0 = 0; i0 < m; i0 += MR) {
      for (int64_t k = 0; k < kc; ++k) {
        for (int r = 0; r < MR; ++r) {
          *d++ = i0 + r < m ? A[(i0 + r) * lda + k] : T(0);
        }
      }
    }
  }

  static void PackB(const T* B, int64_t ldb, int64_t kc, int64_t n,
                    uint64_t* dst) {
    T* d = reinterpret_cast<T*>(dst);
    for (int64_t j0 = 0; j0 < n; j0 += NR) {
      for (int64_t k = 0; k < kc; ++k) {
        const T* b = B + k * ldb + j0;
        for (int c = 0; c < NR; ++c) *d++ = j0 + c < n ? b[c] : T(0);
      }
    }
  }

  static void Micro(int64_t kc, const uint64_t* ap, const uint64_t* bp, T* C,
                    int64_t ldc, int m, int n, GemmMode mode) {
    const T* a = reinterpret_cast<const T*>(ap);
    const T* b = reinterpret_cast<const T*>(bp);
    T acc[MR][NR] = {};
    for (int64_t k = 0; k < kc; ++k) {
      for (int r = 0; r < MR; ++r) {
        const T ar = a[k * MR + r];
        for (int c = 0; c < NR; ++c) acc[r][c] += ar * b[k * NR + c];
      }
    }
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < n; ++c) ApplyMode(C + r * ldc + c, acc[r][c], mode);
    }
  }
};

// Skinny products (one side of C at most kSkinny wide: the matrix-vector
// products of logistic regression, a batch of one through a dense layer).
// The blocked driver pads the narrow side to a whole micro-tile (up to 16x
// the work) and packs the wide operand; these loops stream it once instead.
constexpr int64_t kSkinny = 2;

// N <= kSkinny: rows of C in parallel, each a few dot products of a row of A
// with the columns of B.
template <typename T>
void SkinnyN(const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
             int64_t ldc, int64_t M, int64_t K, int64_t N, GemmMode mode,
             const ParallelFor& pf) {
  pf(M, K * N * (sizeof(T) == 8 ? 1 : 4) + 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* a = A + i * lda;
      T acc[kSkinny] = {};
      for (int64_t k = 0; k < K; ++k) {
        const T* bk = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) acc[j] += a[k] * bk[j];
      }
      for (int64_t j = 0; j < N; ++j) ApplyMode(C + i * ldc + j, acc[j], mode);
    }
  });
}

// M <= kSkinny: column blocks of C in parallel, each the rows of B scaled by
// A's few entries and summed in a block-sized accumulator.
template <typename T>
void SkinnyM(const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
             int64_t ldc, int64_t M, int64_t K, int64_t N, GemmMode mode,
             const ParallelFor& pf) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = CeilDiv(N, kBlock);
  pf(blocks, kBlock * K * M * (sizeof(T) == 8 ? 1 : 4) + 1, [&](int64_t bb, int64_t be) {
    T acc[kSkinny][kBlock];
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t j0 = blk * kBlock, n = std::min(kBlock, N - j0);
      for (int64_t i = 0; i < M; ++i) std::fill(acc[i], acc[i] + n, T(0));
      for (int64_t k = 0; k < K; ++k) {
        const T* bk = B + k * ldb + j0;
        for (int64_t i = 0; i < M; ++i) {
          const T a = A[i * lda + k];
          T* ai = acc[i];
          for (int64_t j = 0; j < n; ++j) ai[j] += a * bk[j];
        }
      }
      for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < n; ++j) ApplyMode(C + i * ldc + j0 + j, acc[i][j], mode);
      }
    }
  });
}

bool Avx2Disabled() {
  const char* v = std::getenv("TF_PRIVPY_DISABLE_AVX2");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

bool Avx512Disabled() {
  const char* v = std::getenv("TF_PRIVPY_DISABLE_AVX512");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

// Tests compare the skinny loops with the blocked kernels on the same shapes.
bool SkinnyDisabled() {
  const char* v = std::getenv("TF_PRIVPY_DISABLE_SKINNY_GEMM");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace
}  // namespace ring_gemm_internal

template <typename T>
void RingGemm(const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
              int64_t ldc, int64_t M, int64_t K, int64_t N, GemmMode mode,
              const ParallelFor& parallel_for) {
  namespace in = ring_gemm_internal;
  if (M > 0 && N > 0 && K > 0 && (N <= in::kSkinny || M <= in::kSkinny) &&
      !in::SkinnyDisabled()) {
    if (N <= in::kSkinny) {
      in::SkinnyN(A, lda, B, ldb, C, ldc, M, K, N, mode, parallel_for);
    } else {
      in::SkinnyM(A, lda, B, ldb, C, ldc, M, K, N, mode, parallel_for);
    }
    return;
  }
  // getenv per call (not cached) so tests can toggle the path; it is
  // negligible next to the GEMM itself.
  if (in::CpuHasAvx512Ifma() && !in::Avx512Disabled()) {
    in::GemmAvx512(A, lda, B, ldb, C, ldc, M, K, N, mode, parallel_for);
    return;
  }
  if constexpr (sizeof(T) == 16) {
    if (in::CpuHasAvx2() && !in::Avx2Disabled()) {
      in::GemmAvx2(A, lda, B, ldb, C, ldc, M, K, N, mode, parallel_for);
      return;
    }
  }
  using Policy = typename std::conditional<
      sizeof(T) == 8, in::PortablePolicy<T, 4, 4>,
      in::PortablePolicy<T, 2, 4>>::type;
  in::GemmDriver<Policy>(A, lda, B, ldb, C, ldc, M, K, N, mode, parallel_for);
}

template void RingGemm<uint64_t>(const uint64_t*, int64_t, const uint64_t*,
                                 int64_t, uint64_t*, int64_t, int64_t, int64_t,
                                 int64_t, GemmMode, const ParallelFor&);
template void RingGemm<uint128_t>(const uint128_t*, int64_t, const uint128_t*,
                                  int64_t, uint128_t*, int64_t, int64_t,
                                  int64_t, int64_t, GemmMode,
                                  const ParallelFor&);

}  // namespace tf_privpy
