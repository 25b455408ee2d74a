// Ring matrix product C = A @ B in Z_{2^l}, l = 64 (uint64_t) or 128
// (unsigned __int128). Row-major, dense. Used by private matmul and conv2d.
#ifndef TF_PRIVPY_OPS_RING_RING_GEMM_H_
#define TF_PRIVPY_OPS_RING_RING_GEMM_H_

#include <cstdint>

#include "ops/common/parallel.h"

namespace tf_privpy {

using uint128_t = unsigned __int128;

enum class GemmMode { kSet, kAdd, kSub };  // C = AB, C += AB, C -= AB

// A is M x K, B is K x N, C is M x N, all row-major with leading dimensions
// lda, ldb, ldc (elements). All arithmetic is modulo 2^(8*sizeof(T)).
template <typename T>
void RingGemm(const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
              int64_t ldc, int64_t M, int64_t K, int64_t N, GemmMode mode,
              const ParallelFor& parallel_for);

extern template void RingGemm<uint64_t>(const uint64_t*, int64_t,
                                        const uint64_t*, int64_t, uint64_t*,
                                        int64_t, int64_t, int64_t, int64_t,
                                        GemmMode, const ParallelFor&);
extern template void RingGemm<uint128_t>(const uint128_t*, int64_t,
                                         const uint128_t*, int64_t, uint128_t*,
                                         int64_t, int64_t, int64_t, int64_t,
                                         GemmMode, const ParallelFor&);

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_RING_RING_GEMM_H_
