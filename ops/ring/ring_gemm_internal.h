// Internals of RingGemm shared by the portable and the AVX-512 translation
// units: a GotoBLAS-style blocked driver parameterised by a kernel policy.
// Not part of the public API; include only from ops/ring/ring_gemm*.cc.
#ifndef TF_PRIVPY_OPS_RING_RING_GEMM_INTERNAL_H_
#define TF_PRIVPY_OPS_RING_RING_GEMM_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "ops/ring/ring_gemm.h"

namespace tf_privpy {
namespace ring_gemm_internal {

// AVX-512 entry points (ring_gemm_avx512.cc). Call only when
// CpuHasAvx512Ifma() is true: AVX-512 F/VL/DQ/BW + IFMA + VNNI supported by
// CPU and OS.
void GemmAvx512(const uint64_t* A, int64_t lda, const uint64_t* B, int64_t ldb,
                uint64_t* C, int64_t ldc, int64_t M, int64_t K, int64_t N,
                GemmMode mode, const ParallelFor& pf);
void GemmAvx512(const uint128_t* A, int64_t lda, const uint128_t* B,
                int64_t ldb, uint128_t* C, int64_t ldc, int64_t M, int64_t K,
                int64_t N, GemmMode mode, const ParallelFor& pf);
bool CpuHasAvx512Ifma();
// AVX2 kernel of the 128-bit ring (ring_gemm_avx2.cc). Call only when
// CpuHasAvx2().
void GemmAvx2(const uint128_t* A, int64_t lda, const uint128_t* B, int64_t ldb,
              uint128_t* C, int64_t ldc, int64_t M, int64_t K, int64_t N,
              GemmMode mode, const ParallelFor& pf);
bool CpuHasAvx2();

// 64-byte aligned scratch buffer owned by one shard (no shared state).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t words) {
    size_t bytes = ((words * sizeof(uint64_t) + 63) / 64) * 64;
    p_ = static_cast<uint64_t*>(std::aligned_alloc(64, bytes ? bytes : 64));
    if (!p_) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(p_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint64_t* get() const { return p_; }

 private:
  uint64_t* p_;
};

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

template <typename T>
inline void ApplyMode(T* c, T v, GemmMode mode) {
  switch (mode) {
    case GemmMode::kSet: *c = v; break;
    case GemmMode::kAdd: *c += v; break;
    case GemmMode::kSub: *c -= v; break;
  }
}

// Policy interface (see the kernels for concrete ones):
//   using T;  kMR, kNR (micro-tile), kKC, kMC, kNC (cache blocks),
//   kAPanelK, kBPanelK (uint64 words per k of one packed MR-row / NR-column
//   micro-panel), kCyclesPerMac.
//   PackA(A, lda, m, kc, dst): rows [0,m) x cols [0,kc) into MR-row panels,
//     zero-padded to a multiple of MR rows.
//   PackB(B, ldb, kc, n, dst): kc x n into NR-column panels, zero-padded.
//   Micro(kc, a_panel, b_panel, C, ldc, m, n, mode): C[0:m,0:n] op= a*b.
template <class P>
void GemmDriver(const typename P::T* A, int64_t lda, const typename P::T* B,
                int64_t ldb, typename P::T* C, int64_t ldc, int64_t M,
                int64_t K, int64_t N, GemmMode mode, const ParallelFor& pf) {
  using T = typename P::T;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (mode == GemmMode::kSet) {
      for (int64_t i = 0; i < M; ++i) {
        std::memset(C + i * ldc, 0, N * sizeof(T));
      }
    }
    return;
  }
  // Tile C into (mc x nc) blocks; each block is one parallel work unit that
  // packs its own panels, so shards never share mutable memory.
  int64_t mb = CeilDiv(M, P::kMC), nb = CeilDiv(N, P::kNC);
  int64_t mc = RoundUp(CeilDiv(M, mb), P::kMR);
  int64_t nc = RoundUp(CeilDiv(N, nb), P::kNR);
  // Enough equally sized units for 2+ threads when the product is big, while
  // keeping blocks large enough that repacking stays cheap.
  const double macs = static_cast<double>(M) * N * K;
  const int64_t want_units = macs >= (1 << 25)   ? 16
                             : macs >= (1 << 22) ? 8
                             : macs >= (1 << 19) ? 4
                             : macs >= (1 << 16) ? 2
                                                 : 1;
  while (mb * nb < want_units) {
    // Halve the larger side (equal halves keep shards balanced), but keep
    // blocks >= 32 wide so packing stays amortised.
    const bool can_m = mc >= 2 * std::max<int64_t>(32, P::kMR);
    const bool can_n = nc >= 2 * std::max<int64_t>(32, P::kNR);
    if (can_n && (nc >= mc || !can_m)) {
      nb *= 2;
    } else if (can_m) {
      mb *= 2;
    } else {
      break;
    }
    mc = RoundUp(CeilDiv(M, mb), P::kMR);
    nc = RoundUp(CeilDiv(N, nb), P::kNR);
    mb = CeilDiv(M, mc);
    nb = CeilDiv(N, nc);
  }
  const int64_t kc_blocks = CeilDiv(K, P::kKC);
  const int64_t kc_max = CeilDiv(K, kc_blocks);  // balanced k-blocks
  const int64_t units = mb * nb;
  // Few output tiles over a long contraction (a convolution's filter
  // gradient: 25 x 5 outputs, each a sum of 10^5 products) leave a thread
  // idle and the other streaming everything: split K as well, each slice
  // summing into a buffer of its own (kSet), the slices added into C at the
  // end. Only when C is small (the tiles could not be split), so the
  // buffers are too; slices of >= kMinSliceBlocks k-blocks keep the
  // re-packing amortised.
  constexpr int64_t kMinSliceBlocks = 4;
  const int64_t slices =
      units >= want_units ? 1
                          : std::max<int64_t>(1, std::min(CeilDiv(want_units, units),
                                                          kc_blocks / kMinSliceBlocks));
  std::unique_ptr<T[]> part(slices > 1 ? new T[slices * M * N] : nullptr);
  const double unit_cost =
      static_cast<double>(mc) * nc * CeilDiv(K, slices) * P::kCyclesPerMac;
  const int64_t cost =
      unit_cost > 1e15 ? int64_t(1e15) : int64_t(unit_cost) + 1;

  pf(units * slices, cost, [&](int64_t begin, int64_t end) {
    AlignedBuffer abuf(static_cast<size_t>(mc / P::kMR) * kc_max * P::kAPanelK);
    AlignedBuffer bbuf(static_cast<size_t>(nc / P::kNR) * kc_max * P::kBPanelK);
    uint64_t* ap = abuf.get();
    uint64_t* bp = bbuf.get();
    for (int64_t w = begin; w < end; ++w) {
      const int64_t u = w / slices, s = w % slices;
      const int64_t i0 = (u / nb) * mc, j0 = (u % nb) * nc;
      const int64_t m = std::min(mc, M - i0), n = std::min(nc, N - j0);
      // slice s: k-blocks [s·kc_blocks/slices, (s+1)·kc_blocks/slices)
      const int64_t k_begin = std::min(K, (s * kc_blocks / slices) * kc_max);
      const int64_t k_end = std::min(K, ((s + 1) * kc_blocks / slices) * kc_max);
      T* out = slices > 1 ? part.get() + s * M * N : C;
      const int64_t ldo = slices > 1 ? N : ldc;
      const GemmMode first = slices > 1 ? GemmMode::kSet : mode;
      for (int64_t p0 = k_begin; p0 < k_end; p0 += kc_max) {
        const int64_t kc = std::min(kc_max, k_end - p0);
        const GemmMode md =
            p0 == k_begin ? first : (first == GemmMode::kSub ? first : GemmMode::kAdd);
        P::PackB(B + p0 * ldb + j0, ldb, kc, n, bp);
        P::PackA(A + i0 * lda + p0, lda, m, kc, ap);
        // B micro-panel stays in L1 while all A micro-panels stream past.
        for (int64_t jr = 0; jr < n; jr += P::kNR) {
          const uint64_t* bpanel = bp + (jr / P::kNR) * kc * P::kBPanelK;
          const int nn = static_cast<int>(std::min<int64_t>(P::kNR, n - jr));
          for (int64_t ir = 0; ir < m; ir += P::kMR) {
            const int mm = static_cast<int>(std::min<int64_t>(P::kMR, m - ir));
            P::Micro(kc, ap + (ir / P::kMR) * kc * P::kAPanelK, bpanel,
                     out + (i0 + ir) * ldo + j0 + jr, ldo, mm, nn, md);
          }
        }
      }
      if (slices > 1 && k_begin >= k_end) {  // an empty slice still sets its tile
        for (int64_t i = 0; i < m; ++i)
          std::fill(out + (i0 + i) * ldo + j0, out + (i0 + i) * ldo + j0 + n, T(0));
      }
    }
  });
  if (slices > 1) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        T v = T(0);
        for (int64_t s = 0; s < slices; ++s) v += part[s * M * N + i * N + j];
        ApplyMode(C + i * ldc + j, v, mode);
      }
    }
  }
}

}  // namespace ring_gemm_internal
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_RING_RING_GEMM_INTERNAL_H_
