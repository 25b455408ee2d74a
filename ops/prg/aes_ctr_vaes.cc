// AES-128-CTR keystream with AVX-512 VAES: vaesenc on a zmm register runs one
// AES round on 4 independent blocks, and 8 registers (32 blocks) are kept in
// flight to cover the instruction's latency (4-5 cycles on Zen 4 / Ice Lake
// at a throughput of one per cycle). Full AES-128 (FIPS-197: 10 rounds, key
// schedule of §5.2) in counter mode (SP 800-38A §6.5); byte-identical to the
// EVP path in aes_ctr.cc, which the standalone test (aes_ctr_test.cc) checks.
//
// Every function using AES-NI/AVX-512 carries a target attribute, so this file
// builds with plain -O3 (no -m flags) like ops/ring/ring_gemm_avx512.cc;
// aes_ctr.cc only calls in here after CpuHasVaes() (ExpandKeyAesni, which
// needs AES-NI only, also after CpuHasVaesYmm()).
#include <immintrin.h>

#include <cstdint>

#include "ops/prg/aes_ctr_internal.h"

#define VA_TARGET __attribute__((target("avx512f,avx512bw,vaes,aes")))
#define VA_INLINE inline __attribute__((always_inline))
// The key schedule needs AES-NI only: the YMM path (aes_ctr_vaes_ymm.cc) runs
// it on CPUs without AVX-512, so it must not be compiled for AVX-512.
#define VA_TARGET_AESNI __attribute__((target("aes")))

// GCC 12 false positive inside its own _mm512_undefined_epi32() helper
// (the unused pass-through operand of _mm512_broadcast_i32x4).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace tf_privpy {
namespace aes_ctr_internal {
namespace {

constexpr int kRounds = 10;  // AES-128, FIPS-197 §5 (Nr = 10)

// One step of the FIPS-197 §5.2 key expansion: w[i..i+3] from w[i-4..i-1]
// and kg = aeskeygenassist(w[i-4..i-1], Rcon), whose dword 3 is
// SubWord(RotWord(w[i-1])) ^ Rcon.
VA_TARGET_AESNI VA_INLINE __m128i ExpandStep(__m128i key, __m128i kg) {
  kg = _mm_shuffle_epi32(kg, 0xFF);
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  key = _mm_xor_si128(key, _mm_slli_si128(key, 4));
  return _mm_xor_si128(key, kg);
}

// Encrypts R registers (4R blocks) of b in place.
template <int R>
VA_TARGET VA_INLINE void EncryptRegs(const __m512i (&rk)[kRounds + 1], __m512i (&b)[R]) {
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) b[j] = _mm512_xor_si512(b[j], rk[0]);
#pragma GCC unroll 9
  for (int r = 1; r < kRounds; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < R; ++j) b[j] = _mm512_aesenc_epi128(b[j], rk[r]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) b[j] = _mm512_aesenclast_epi128(b[j], rk[kRounds]);
}

// Encrypts R registers (4R blocks) of counters starting at *ctr, advancing
// *ctr by 4R. The counter register holds 4 counters as (hi, lo) native
// uint64 pairs; vpshufb turns each into the big-endian block of SP 800-38A.
template <int R>
VA_TARGET VA_INLINE void EncryptCounters(const __m512i (&rk)[kRounds + 1],
                                         __m512i bswap, __m512i inc4,
                                         __m512i* ctr, __m512i (&b)[R]) {
  __m512i c = *ctr;
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
    b[j] = _mm512_shuffle_epi8(c, bswap);
    c = _mm512_add_epi64(c, inc4);
  }
  *ctr = c;
  EncryptRegs<R>(rk, b);
}

// The 11 round keys, each broadcast to the 4 lanes of a register.
VA_TARGET VA_INLINE void BroadcastKeys(const RoundKeys& keys, __m512i (&rk)[kRounds + 1]) {
#pragma GCC unroll 11
  for (int r = 0; r <= kRounds; ++r) {
    rk[r] = _mm512_broadcast_i32x4(
        _mm_load_si128(reinterpret_cast<const __m128i*>(keys.rk[r])));
  }
}

// The last n (< 4R) blocks: whole registers, then a masked store of the
// partial one (2 qwords per block).
template <int R>
VA_TARGET VA_INLINE void EncryptTail(const __m512i (&rk)[kRounds + 1],
                                     __m512i bswap, __m512i inc4, __m512i ctr,
                                     uint64_t n, uint8_t* out) {
  __m512i b[R];
  EncryptCounters<R>(rk, bswap, inc4, &ctr, b);
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
    const int64_t left = static_cast<int64_t>(n) - 4 * j;
    if (left <= 0) break;
    const __mmask8 m = left >= 4 ? __mmask8(0xFF) : __mmask8((1u << (2 * left)) - 1);
    _mm512_mask_storeu_epi64(out + 64 * j, m, b[j]);
  }
}

// n blocks of counters (hi, lo), (hi, lo + 1), ...; the caller guarantees that
// lo + n - 1 does not wrap (the carry into hi is handled in CtrBlocksVaes).
VA_TARGET void CtrRun(const RoundKeys& keys, uint64_t hi, uint64_t lo,
                      uint64_t n, uint8_t* out) {
  __m512i rk[kRounds + 1];
  BroadcastKeys(keys, rk);
  // Byte reversal within each 64-bit half: native -> big-endian.
  const __m512i bswap = _mm512_broadcast_i32x4(
      _mm_set_epi8(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  const __m512i inc4 = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
  // Lanes: (hi, lo), (hi, lo + 1), (hi, lo + 2), (hi, lo + 3). Counters past
  // the end may wrap in the low half; they are computed but never stored.
  __m512i ctr = _mm512_set_epi64(static_cast<int64_t>(lo + 3), static_cast<int64_t>(hi),
                                 static_cast<int64_t>(lo + 2), static_cast<int64_t>(hi),
                                 static_cast<int64_t>(lo + 1), static_cast<int64_t>(hi),
                                 static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  constexpr int kRegs = 8;
  for (; n >= 4 * kRegs; n -= 4 * kRegs, out += 64 * kRegs) {
    __m512i b[kRegs];
    EncryptCounters<kRegs>(rk, bswap, inc4, &ctr, b);
#pragma GCC unroll 8
    for (int j = 0; j < kRegs; ++j) _mm512_storeu_si512(out + 64 * j, b[j]);
  }
  // Tail (and the single head/tail blocks of unaligned PrgFill calls): no
  // more registers than needed, so a 1-block call costs one register.
  if (n > 16) {
    EncryptTail<8>(rk, bswap, inc4, ctr, n, out);
  } else if (n > 8) {
    EncryptTail<4>(rk, bswap, inc4, ctr, n, out);
  } else if (n > 4) {
    EncryptTail<2>(rk, bswap, inc4, ctr, n, out);
  } else if (n > 0) {
    EncryptTail<1>(rk, bswap, inc4, ctr, n, out);
  }
}

// The last n (< 4R) blocks of an ECB run: masked loads and stores of the
// partial register (2 qwords per block); lanes past the end are zero and
// never stored.
template <int R>
VA_TARGET VA_INLINE void EcbTail(const __m512i (&rk)[kRounds + 1], const uint8_t* in,
                                 uint8_t* out, uint64_t n) {
  __m512i b[R];
  __mmask8 m[R];
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) {
    const int64_t left = static_cast<int64_t>(n) - 4 * j;
    m[j] = left >= 4 ? __mmask8(0xFF) : left <= 0 ? __mmask8(0) : __mmask8((1u << (2 * left)) - 1);
    b[j] = _mm512_maskz_loadu_epi64(m[j], in + 64 * j);
  }
  EncryptRegs<R>(rk, b);
#pragma GCC unroll 8
  for (int j = 0; j < R; ++j) _mm512_mask_storeu_epi64(out + 64 * j, m[j], b[j]);
}

}  // namespace

VA_TARGET void EcbBlocksVaes(const RoundKeys& keys, const uint8_t* in, uint8_t* out,
                             uint64_t n) {
  __m512i rk[kRounds + 1];
  BroadcastKeys(keys, rk);
  constexpr int kRegs = 8;          // 32 blocks in flight, as in CtrRun
  for (; n >= 4 * kRegs; n -= 4 * kRegs, in += 64 * kRegs, out += 64 * kRegs) {
    __m512i b[kRegs];
#pragma GCC unroll 8
    for (int j = 0; j < kRegs; ++j) b[j] = _mm512_loadu_si512(in + 64 * j);
    EncryptRegs<kRegs>(rk, b);
#pragma GCC unroll 8
    for (int j = 0; j < kRegs; ++j) _mm512_storeu_si512(out + 64 * j, b[j]);
  }
  if (n > 16) {
    EcbTail<8>(rk, in, out, n);
  } else if (n > 8) {
    EcbTail<4>(rk, in, out, n);
  } else if (n > 4) {
    EcbTail<2>(rk, in, out, n);
  } else if (n > 0) {
    EcbTail<1>(rk, in, out, n);
  }
}

bool CpuHasVaes() {
  // __builtin_cpu_supports only reports AVX-512 and VAES when the OS has
  // enabled the zmm/ymm state (XGETBV), like CpuHasAvx512Ifma().
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("vaes") && __builtin_cpu_supports("aes");
  }();
  return ok;
}

VA_TARGET_AESNI void ExpandKeyAesni(const uint8_t key[16], RoundKeys* keys) {
  __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
  _mm_store_si128(reinterpret_cast<__m128i*>(keys->rk[0]), k);
  // aeskeygenassist takes Rcon (FIPS-197 §5.2) as an immediate.
#define VA_EXPAND(i, rcon)                                          \
  k = ExpandStep(k, _mm_aeskeygenassist_si128(k, rcon));            \
  _mm_store_si128(reinterpret_cast<__m128i*>(keys->rk[i]), k)
  VA_EXPAND(1, 0x01);
  VA_EXPAND(2, 0x02);
  VA_EXPAND(3, 0x04);
  VA_EXPAND(4, 0x08);
  VA_EXPAND(5, 0x10);
  VA_EXPAND(6, 0x20);
  VA_EXPAND(7, 0x40);
  VA_EXPAND(8, 0x80);
  VA_EXPAND(9, 0x1B);
  VA_EXPAND(10, 0x36);
#undef VA_EXPAND
}

void CtrBlocksVaes(const RoundKeys& keys, uint64_t ctr_hi, uint64_t ctr_lo,
                   uint64_t nblocks, uint8_t* out) {
  SplitAtWrap(ctr_hi, ctr_lo, nblocks, out,
              [&keys](uint64_t hi, uint64_t lo, uint64_t n, uint8_t* o) {
                CtrRun(keys, hi, lo, n, o);
              });
}

}  // namespace aes_ctr_internal
}  // namespace tf_privpy
