// AES-128-CTR keystream with VAES on 256-bit registers, for CPUs that have
// VAES and AVX2 but no AVX-512 (AMD Zen 3, Intel Alder Lake and later client
// cores), where aes_ctr_vaes.cc's ZMM code cannot run and PrgFill would
// otherwise fall back to EVP's 128-bit AES-NI. vaesenc on a ymm register runs
// one AES round on 2 independent blocks; 8 registers (16 blocks) are kept in
// flight to cover its latency (4 cycles on Zen 3 at two per cycle). The same
// method as the ZMM path (full AES-128 of FIPS-197: 10 rounds, the §5.2 key
// schedule from ExpandKeyAesni; counter mode of SP 800-38A §6.5 with the
// whole 128-bit counter incrementing as in its Appendix B.1 and in
// OpenSSL/BoringSSL), so the bytes are EVP's, which aes_ctr_test.cc checks.
//
// Every function using VAES/AVX2 carries a target attribute, so this file
// builds with plain -O3 (no -m flags); aes_ctr.cc only calls in here after
// CpuHasVaesYmm().
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ops/prg/aes_ctr_internal.h"

#define VY_TARGET __attribute__((target("aes,avx,avx2,vaes")))
#define VY_INLINE inline __attribute__((always_inline))

namespace tf_privpy {
namespace aes_ctr_internal {
namespace {

constexpr int kRounds = 10;  // AES-128, FIPS-197 §5 (Nr = 10)

// Encrypts R registers (2R blocks) of counters starting at *ctr, advancing
// *ctr by 2R. A counter register holds 2 counters as (hi, lo) native uint64
// pairs; vpshufb (within each 128-bit lane) turns each into the big-endian
// counter block of SP 800-38A §6.5.
template <int R>
VY_TARGET VY_INLINE void EncryptCounters(const __m256i (&rk)[kRounds + 1],
                                         __m256i bswap, __m256i inc2,
                                         __m256i* ctr, __m256i (&b)[R]) {
  __m256i c = *ctr;
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
    b[j] = _mm256_xor_si256(_mm256_shuffle_epi8(c, bswap), rk[0]);
    c = _mm256_add_epi64(c, inc2);
  }
  *ctr = c;
  // FIPS-197 §5.1: AddRoundKey, 9 full rounds, the last without MixColumns.
#pragma GCC unroll 9
  for (int r = 1; r < kRounds; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < R; ++j) b[j] = _mm256_aesenc_epi128(b[j], rk[r]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) b[j] = _mm256_aesenclast_epi128(b[j], rk[kRounds]);
}

// The last n (< 2R) blocks: whole registers, then the low lane of the
// partial one (a register holds 2 blocks, so at most one block is left).
template <int R>
VY_TARGET VY_INLINE void EncryptTail(const __m256i (&rk)[kRounds + 1],
                                     __m256i bswap, __m256i inc2, __m256i ctr,
                                     uint64_t n, uint8_t* out) {
  __m256i b[R];
  EncryptCounters<R>(rk, bswap, inc2, &ctr, b);
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
    const int64_t left = static_cast<int64_t>(n) - 2 * j;
    if (left <= 0) break;
    if (left >= 2) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * j), b[j]);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * j),
                       _mm256_castsi256_si128(b[j]));
    }
  }
}

// n blocks of counters (hi, lo), (hi, lo + 1), ...; the caller guarantees that
// lo + n - 1 does not wrap (the carry into hi is handled in CtrBlocksVaesYmm).
VY_TARGET void CtrRunYmm(const RoundKeys& keys, uint64_t hi, uint64_t lo,
                         uint64_t n, uint8_t* out) {
  __m256i rk[kRounds + 1];
#pragma GCC unroll 11
  for (int r = 0; r <= kRounds; ++r) {
    rk[r] = _mm256_broadcastsi128_si256(
        _mm_load_si128(reinterpret_cast<const __m128i*>(keys.rk[r])));
  }
  // Byte reversal within each 64-bit half: native -> big-endian.
  const __m256i bswap = _mm256_broadcastsi128_si256(
      _mm_set_epi8(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i inc2 = _mm256_set_epi64x(2, 0, 2, 0);
  // Lanes: (hi, lo), (hi, lo + 1). Counters past the end may wrap in the low
  // half; they are computed but never stored.
  __m256i ctr = _mm256_set_epi64x(static_cast<int64_t>(lo + 1), static_cast<int64_t>(hi),
                                  static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  constexpr int kRegs = 8;
  for (; n >= 2 * kRegs; n -= 2 * kRegs, out += 32 * kRegs) {
    __m256i b[kRegs];
    EncryptCounters<kRegs>(rk, bswap, inc2, &ctr, b);
#pragma GCC unroll 8
    for (int j = 0; j < kRegs; ++j) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * j), b[j]);
    }
  }
  // Tail (and the single head/tail blocks of unaligned PrgFill calls): no
  // more registers than needed, so a 1-block call costs one register.
  if (n > 8) {
    EncryptTail<8>(rk, bswap, inc2, ctr, n, out);
  } else if (n > 4) {
    EncryptTail<4>(rk, bswap, inc2, ctr, n, out);
  } else if (n > 2) {
    EncryptTail<2>(rk, bswap, inc2, ctr, n, out);
  } else if (n > 0) {
    EncryptTail<1>(rk, bswap, inc2, ctr, n, out);
  }
}

}  // namespace

bool CpuHasVaesYmm() {
  // As CpuHasVaes: __builtin_cpu_supports reports AVX2 and VAES only when the
  // OS preserves the ymm state (XGETBV).
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vaes") &&
           __builtin_cpu_supports("aes");
  }();
  return ok;
}

bool PrgYmmForced() {
  const char* v = std::getenv("TF_PRIVPY_PRG_YMM");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

void CtrBlocksVaesYmm(const RoundKeys& keys, uint64_t ctr_hi, uint64_t ctr_lo,
                      uint64_t nblocks, uint8_t* out) {
  SplitAtWrap(ctr_hi, ctr_lo, nblocks, out,
              [&keys](uint64_t hi, uint64_t lo, uint64_t n, uint8_t* o) {
                CtrRunYmm(keys, hi, lo, n, o);
              });
}

}  // namespace aes_ctr_internal
}  // namespace tf_privpy
