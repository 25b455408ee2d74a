// AES-128-GCM with VAES/VPCLMULQDQ (see gcm_fast.h for the method).
// Notation: blocks are kept byte-reversed ("rev"), so that a GCM block's
// first byte is the most significant byte of the 128-bit integer; then
// - a CTR counter block IV || [c]_32 reads as dword 0 = c (so inc32 is a
//   32-bit add that wraps exactly like SP 800-38D's inc32), and
// - GHASH becomes POLYVAL (RFC 8452): little-endian polynomials mod
//   P = x^128 + x^127 + x^126 + x^121 + 1, with dot(a, b) = a b x^-128 mod P.
#include "ops/aead/gcm_fast.h"

#include <cstdlib>
#include <cstring>

#include "ops/aead/aead.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define TFP_GCM_X86 1
// GCC 12's AVX-512 headers fill "don't care" operands with self-initialised
// variables (_mm512_undefined_*), which -Wall/-Wextra report as
// uninitialised at every inlined use: a false positive in the headers.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tf_privpy {
namespace aead {
namespace fast {

#ifdef TFP_GCM_X86

namespace {

// Only these functions use the extensions; the rest of the library is built
// for the baseline x86-64 (setup.py passes no -m flags). TFP_TARGET: the ZMM
// path; TFP_TARGET_YMM: the same method on 256-bit registers (VAES and
// VPCLMULQDQ without AVX-512: AMD Zen 3, Intel Alder Lake and later client
// cores); TFP_BASE: the 128-bit helpers both inline (GCC inlines a callee
// whose target is a subset of the caller's).
#define TFP_TARGET \
  __attribute__((target("aes,pclmul,avx2,avx512f,avx512bw,avx512vl,vaes,vpclmulqdq")))
#define TFP_TARGET_YMM __attribute__((target("aes,pclmul,avx,avx2,vaes,vpclmulqdq")))
#define TFP_BASE __attribute__((target("aes,pclmul,sse4.1")))
#define TFP_INLINE TFP_TARGET static inline __attribute__((always_inline))
#define TFP_INLINE_YMM TFP_TARGET_YMM static inline __attribute__((always_inline))
#define TFP_INLINE_BASE TFP_BASE static inline __attribute__((always_inline))

bool CpuSupportedYmm() {
  // __builtin_cpu_supports reports AVX2, VAES and VPCLMULQDQ only when the OS
  // preserves the ymm state (XGETBV), as ops/prg's CpuHasVaes relies on.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vaes") &&
         __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("aes") &&
         __builtin_cpu_supports("pclmul");
}

bool CpuSupported() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = (c >> 27) & 1, aes = (c >> 25) & 1, pclmul = (c >> 1) & 1;
  if (!osxsave || !aes || !pclmul) return false;
  // XCR0: SSE (bit 1), AVX (2), opmask (5), ZMM_Hi256 (6), Hi16_ZMM (7) state
  // enabled by the OS; otherwise ZMM registers are not preserved.
  uint32_t xlo = 0, xhi = 0;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  if ((xlo & 0xE6u) != 0xE6u) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool f = (b >> 16) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
  const bool vaes = (c >> 9) & 1, vpclmul = (c >> 10) & 1;
  return f && bw && vl && vaes && vpclmul;
}

// AES-128 key expansion (FIPS 197 §5.2) with AESKEYGENASSIST.
TFP_INLINE_BASE __m128i KeyStep(__m128i k, __m128i g) {
  g = _mm_shuffle_epi32(g, 0xff);
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
  return _mm_xor_si128(k, g);
}

#define TFP_EXPAND(i, rcon) \
  rk[i] = KeyStep(rk[i - 1], _mm_aeskeygenassist_si128(rk[i - 1], rcon))

TFP_INLINE_BASE void ExpandKey(const uint8_t key[16], __m128i rk[11]) {
  rk[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
  TFP_EXPAND(1, 0x01);
  TFP_EXPAND(2, 0x02);
  TFP_EXPAND(3, 0x04);
  TFP_EXPAND(4, 0x08);
  TFP_EXPAND(5, 0x10);
  TFP_EXPAND(6, 0x20);
  TFP_EXPAND(7, 0x40);
  TFP_EXPAND(8, 0x80);
  TFP_EXPAND(9, 0x1b);
  TFP_EXPAND(10, 0x36);
}

TFP_INLINE_BASE __m128i Aes1(__m128i x, const __m128i rk[11]) {
  x = _mm_xor_si128(x, rk[0]);
  for (int r = 1; r < 10; ++r) x = _mm_aesenc_si128(x, rk[r]);
  return _mm_aesenclast_si128(x, rk[10]);
}

// Four ZMM = 16 blocks through AES-128, round by round (independent chains
// keep the AES units busy).
TFP_INLINE void Aes16(__m512i x[4], const __m512i k[11]) {
  for (int j = 0; j < 4; ++j) x[j] = _mm512_xor_si512(x[j], k[0]);
  for (int r = 1; r < 10; ++r)
    for (int j = 0; j < 4; ++j) x[j] = _mm512_aesenc_epi128(x[j], k[r]);
  for (int j = 0; j < 4; ++j) x[j] = _mm512_aesenclast_epi128(x[j], k[10]);
}

TFP_INLINE_BASE __m128i Rev128() {
  return _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

// The pre-counter block J0 = IV || [1]_32 of a 96-bit IV (SP 800-38D §7.1),
// shared by the ZMM and YMM code.
TFP_INLINE_BASE __m128i PreCounter(const uint8_t iv[12]) {
  uint8_t j0[16];
  memcpy(j0, iv, 12);
  j0[12] = j0[13] = j0[14] = 0;
  j0[15] = 1;
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(j0));
}

// dot's reduction of a 256-bit product hi:lo to hi:lo x^-128 mod P: two
// Montgomery steps. P = 1 mod x^64, so adding D0 P clears the low 64 bits
// D0 of D, and (D + D0 P) / x^64 = D / x^64 + D0 (x^57 + x^62 + x^63) +
// D0 x^64, the middle term a carry-less multiplication by 0xC2 << 56.
TFP_INLINE_BASE __m128i Reduce(__m128i hi, __m128i lo) {
  const __m128i poly = _mm_set_epi64x(static_cast<long long>(0xC200000000000000ull), 1);
  const __m128i t = _mm_clmulepi64_si128(lo, poly, 0x10);
  const __m128i s = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4E), t);
  const __m128i u = _mm_clmulepi64_si128(s, poly, 0x10);
  return _mm_xor_si128(_mm_xor_si128(hi, _mm_shuffle_epi32(s, 0x4E)), u);
}

TFP_INLINE_BASE __m128i Dot(__m128i a, __m128i b) {
  __m128i lo = _mm_clmulepi64_si128(a, b, 0x00);
  __m128i hi = _mm_clmulepi64_si128(a, b, 0x11);
  const __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01),
                                    _mm_clmulepi64_si128(a, b, 0x10));
  lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
  hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
  return Reduce(hi, lo);
}

TFP_INLINE __m128i Fold4(__m512i v) {
  const __m256i a = _mm256_xor_si256(_mm512_castsi512_si256(v),
                                     _mm512_extracti64x4_epi64(v, 1));
  return _mm_xor_si128(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
}

// kPowers[i] = H^(16 - i) (dot powers, i < 16), then zeros: a run of nb
// blocks multiplies block b by H^(nb - b) = pw[16 - nb + b]; lanes past nb
// hold zero data and read at most pw[18].
constexpr int kPowers = 20;

struct Ghash {
  __m128i y;  // the running POLYVAL value
  alignas(64) __m128i pw[kPowers];
};

TFP_INLINE_BASE void InitGhash(Ghash* g, __m128i h_block) {
  // mulX_POLYVAL(ByteReverse(H)) (RFC 8452 Appendix A): H x mod P.
  const __m128i r = _mm_shuffle_epi8(h_block, Rev128());
  const uint64_t lo = static_cast<uint64_t>(_mm_cvtsi128_si64(r));
  const uint64_t hi = static_cast<uint64_t>(_mm_extract_epi64(r, 1));
  const uint64_t carry = 0 - (hi >> 63);  // all ones iff x^127 shifts out
  const uint64_t nlo = (lo << 1) ^ (carry & 1);
  const uint64_t nhi = ((hi << 1) | (lo >> 63)) ^ (carry & 0xC200000000000000ull);
  __m128i h = _mm_set_epi64x(static_cast<long long>(nhi), static_cast<long long>(nlo));
  g->y = _mm_setzero_si128();
  g->pw[15] = h;
  for (int i = 14; i >= 0; --i) g->pw[i] = Dot(g->pw[i + 1], h);
  for (int i = 16; i < kPowers; ++i) g->pw[i] = _mm_setzero_si128();
}

// What both widths' GCM start from: the round keys, GHASH keyed by
// H = AES_K(0), the pre-counter block J0 = IV || [1]_32 and its encryption,
// which masks the tag (SP 800-38D §7.1).
struct GcmStart {
  __m128i rk[11];
  Ghash g;
  __m128i j0, tag_mask;
};

TFP_INLINE_BASE void Start(const uint8_t key[16], const uint8_t iv[12], GcmStart* st) {
  ExpandKey(key, st->rk);
  InitGhash(&st->g, Aes1(_mm_setzero_si128(), st->rk));
  st->j0 = PreCounter(iv);
  st->tag_mask = Aes1(st->j0, st->rk);
}

// The tag: GHASH of the length block [len(A)]_64 || [len(C)]_64 (in bits,
// byte-reversed) XOR the encrypted J0; wipes `st` (round keys, H powers).
TFP_INLINE_BASE __m128i Finish(GcmStart* st, size_t aad_len, size_t len) {
  const __m128i lens = _mm_set_epi64x(static_cast<long long>(uint64_t{aad_len} * 8),
                                      static_cast<long long>(uint64_t{len} * 8));
  const __m128i y = Dot(_mm_xor_si128(st->g.y, lens), st->g.pw[15]);
  const __m128i tag = _mm_xor_si128(_mm_shuffle_epi8(y, Rev128()), st->tag_mask);
  Wipe(st, sizeof(*st));
  return tag;
}

// Absorbs nb (1..16) blocks, already byte-reversed, in d[0..3] (lanes past
// nb zero): y = (y + X_1) H^nb + X_2 H^(nb-1) + ... + X_nb H, with the
// products summed unreduced and one reduction (aggregated reduction).
TFP_INLINE void Absorb(Ghash* g, __m512i d[4], int nb) {
  const __m128i* p = g->pw + (16 - nb);
  const __m512i d0 = _mm512_xor_si512(d[0], _mm512_zextsi128_si512(g->y));
  __m512i h = _mm512_loadu_si512(p);
  __m512i lo = _mm512_clmulepi64_epi128(d0, h, 0x00);
  __m512i hi = _mm512_clmulepi64_epi128(d0, h, 0x11);
  __m512i mid = _mm512_xor_si512(_mm512_clmulepi64_epi128(d0, h, 0x01),
                                 _mm512_clmulepi64_epi128(d0, h, 0x10));
  const int zmms = (nb + 3) / 4;
  for (int j = 1; j < zmms; ++j) {
    h = _mm512_loadu_si512(p + 4 * j);
    lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(d[j], h, 0x00));
    hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(d[j], h, 0x11));
    mid = _mm512_ternarylogic_epi64(mid, _mm512_clmulepi64_epi128(d[j], h, 0x01),
                                    _mm512_clmulepi64_epi128(d[j], h, 0x10), 0x96);
  }
  const __m128i m = Fold4(mid);
  const __m128i l = _mm_xor_si128(Fold4(lo), _mm_slli_si128(m, 8));
  const __m128i u = _mm_xor_si128(Fold4(hi), _mm_srli_si128(m, 8));
  g->y = Reduce(u, l);
}

TFP_INLINE __mmask64 Mask(size_t bytes) {
  return bytes >= 64 ? ~__mmask64{0} : ((__mmask64{1} << bytes) - 1);
}

// GHASH of len bytes, the last block zero-padded (the AAD).
TFP_INLINE void AbsorbBytes(Ghash* g, const uint8_t* p, size_t len, __m512i rev) {
  __m512i d[4];
  for (; len >= 256; p += 256, len -= 256) {
    for (int j = 0; j < 4; ++j)
      d[j] = _mm512_shuffle_epi8(_mm512_loadu_si512(p + 64 * j), rev);
    Absorb(g, d, 16);
  }
  if (len == 0) return;
  for (int j = 0; j < 4; ++j) {
    const size_t at = 64 * static_cast<size_t>(j);
    const size_t n = len > at ? len - at : 0;
    d[j] = _mm512_shuffle_epi8(_mm512_maskz_loadu_epi8(Mask(n), p + (n ? at : 0)), rev);
  }
  Absorb(g, d, static_cast<int>((len + 15) / 16));
}

// One GCM invocation. kSeal: in = plaintext, GHASH over what is written;
// else in = ciphertext, GHASH over what is read. Returns the tag block.
template <bool kSeal>
TFP_TARGET __m128i Gcm(const uint8_t key[16], const uint8_t iv[12], const uint8_t* aad,
                       size_t aad_len, const uint8_t* in, size_t len, uint8_t* out) {
  GcmStart st;
  Start(key, iv, &st);
  Ghash& g = st.g;
  const __m128i j0 = st.j0;
  __m512i k[11];
  for (int r = 0; r < 11; ++r) k[r] = _mm512_broadcast_i32x4(st.rk[r]);
  const __m128i rev1 = Rev128();
  const __m512i rev = _mm512_broadcast_i32x4(rev1);

  if (aad_len > 0) AbsorbBytes(&g, aad, aad_len, rev);

  // Counters, byte-reversed: lane l of ctr[j] holds inc32 applied 1 + 4j + l
  // times to J0 (the first data block uses inc32(J0)).
  const __m512i j0r = _mm512_broadcast_i32x4(_mm_shuffle_epi8(j0, rev1));
  __m512i ctr[4];
  for (int j = 0; j < 4; ++j)
    ctr[j] = _mm512_add_epi32(j0r, _mm512_set_epi32(0, 0, 0, 4 * j + 4, 0, 0, 0, 4 * j + 3,
                                                    0, 0, 0, 4 * j + 2, 0, 0, 0, 4 * j + 1));
  const __m512i step = _mm512_set_epi32(0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 16, 0, 0, 0, 16);

  __m512i x[4], d[4];
  size_t i = 0;
  for (; i + 256 <= len; i += 256) {
    for (int j = 0; j < 4; ++j) {
      x[j] = _mm512_shuffle_epi8(ctr[j], rev);
      ctr[j] = _mm512_add_epi32(ctr[j], step);
    }
    Aes16(x, k);
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(in + i + 64 * j);
      const __m512i c = _mm512_xor_si512(v, x[j]);
      _mm512_storeu_si512(out + i + 64 * j, c);
      d[j] = _mm512_shuffle_epi8(kSeal ? c : v, rev);
    }
    Absorb(&g, d, 16);
  }
  if (i < len) {
    // The last 1..255 bytes: masked loads and stores, the final partial block
    // zero-padded for GHASH (SP 800-38D §7.1 step 5: u zero bits).
    const size_t rest = len - i;
    for (int j = 0; j < 4; ++j) x[j] = _mm512_shuffle_epi8(ctr[j], rev);
    Aes16(x, k);
    for (int j = 0; j < 4; ++j) {
      const size_t at = 64 * static_cast<size_t>(j);
      const size_t n = rest > at ? rest - at : 0;
      const __mmask64 m = Mask(n);
      const size_t off = i + (n ? at : 0);
      const __m512i v = _mm512_maskz_loadu_epi8(m, in + off);
      const __m512i c = _mm512_xor_si512(v, x[j]);
      const __m512i cm = _mm512_maskz_mov_epi8(m, c);
      _mm512_mask_storeu_epi8(out + off, m, cm);
      d[j] = _mm512_shuffle_epi8(kSeal ? cm : v, rev);
    }
    Absorb(&g, d, static_cast<int>((rest + 15) / 16));
  }
  Wipe(k, sizeof(k));  // the round keys are key material
  return Finish(&st, aad_len, len);
}

// ----------------------------------------------------------- the YMM path
// Gcm's method on 256-bit registers: 16 blocks per iteration in eight YMM
// (two blocks each), the same powers of H and one reduction per 16 blocks.
// No masked byte loads without AVX-512: the last 1..255 bytes go through a
// zero-padded stack block (wiped afterwards: it held plaintext).

TFP_INLINE_YMM void Aes16Ymm(__m256i x[8], const __m256i k[11]) {
  for (int j = 0; j < 8; ++j) x[j] = _mm256_xor_si256(x[j], k[0]);
  for (int r = 1; r < 10; ++r)
    for (int j = 0; j < 8; ++j) x[j] = _mm256_aesenc_epi128(x[j], k[r]);
  for (int j = 0; j < 8; ++j) x[j] = _mm256_aesenclast_epi128(x[j], k[10]);
}

TFP_INLINE_YMM __m128i Fold2(__m256i v) {
  return _mm_xor_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// Absorb on eight YMM: nb (1..16) byte-reversed blocks in d[0..7], lanes
// past nb zero; block b is multiplied by pw[16 - nb + b] = H^(nb - b).
TFP_INLINE_YMM void AbsorbYmm(Ghash* g, const __m256i d[8], int nb) {
  const __m128i* p = g->pw + (16 - nb);
  const __m256i d0 = _mm256_xor_si256(d[0], _mm256_zextsi128_si256(g->y));
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  __m256i lo = _mm256_clmulepi64_epi128(d0, h, 0x00);
  __m256i hi = _mm256_clmulepi64_epi128(d0, h, 0x11);
  __m256i mid = _mm256_xor_si256(_mm256_clmulepi64_epi128(d0, h, 0x01),
                                 _mm256_clmulepi64_epi128(d0, h, 0x10));
  const int ymms = (nb + 1) / 2;
  for (int j = 1; j < ymms; ++j) {
    h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * j));
    lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128(d[j], h, 0x00));
    hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128(d[j], h, 0x11));
    mid = _mm256_xor_si256(mid, _mm256_xor_si256(_mm256_clmulepi64_epi128(d[j], h, 0x01),
                                                 _mm256_clmulepi64_epi128(d[j], h, 0x10)));
  }
  const __m128i m = Fold2(mid);
  const __m128i l = _mm_xor_si128(Fold2(lo), _mm_slli_si128(m, 8));
  const __m128i u = _mm_xor_si128(Fold2(hi), _mm_srli_si128(m, 8));
  g->y = Reduce(u, l);
}

TFP_INLINE_YMM void LoadRev8(const uint8_t* p, __m256i rev, __m256i d[8]) {
  for (int j = 0; j < 8; ++j)
    d[j] = _mm256_shuffle_epi8(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * j)), rev);
}

// GHASH of len bytes, the last block zero-padded (the AAD).
TFP_INLINE_YMM void AbsorbBytesYmm(Ghash* g, const uint8_t* p, size_t len, __m256i rev) {
  __m256i d[8];
  for (; len >= 256; p += 256, len -= 256) {
    LoadRev8(p, rev, d);
    AbsorbYmm(g, d, 16);
  }
  if (len == 0) return;
  alignas(32) uint8_t buf[256] = {0};
  memcpy(buf, p, len);
  LoadRev8(buf, rev, d);
  AbsorbYmm(g, d, static_cast<int>((len + 15) / 16));
}

template <bool kSeal>
TFP_TARGET_YMM __m128i GcmYmm(const uint8_t key[16], const uint8_t iv[12], const uint8_t* aad,
                              size_t aad_len, const uint8_t* in, size_t len, uint8_t* out) {
  GcmStart st;
  Start(key, iv, &st);
  Ghash& g = st.g;
  const __m128i j0 = st.j0;
  __m256i k[11];
  for (int r = 0; r < 11; ++r) k[r] = _mm256_broadcastsi128_si256(st.rk[r]);
  const __m128i rev1 = Rev128();
  const __m256i rev = _mm256_broadcastsi128_si256(rev1);

  if (aad_len > 0) AbsorbBytesYmm(&g, aad, aad_len, rev);

  // Lane l of ctr[j] holds inc32 applied 1 + 2j + l times to J0.
  const __m256i j0r = _mm256_broadcastsi128_si256(_mm_shuffle_epi8(j0, rev1));
  __m256i ctr[8];
  for (int j = 0; j < 8; ++j)
    ctr[j] = _mm256_add_epi32(j0r, _mm256_set_epi32(0, 0, 0, 2 * j + 2, 0, 0, 0, 2 * j + 1));
  const __m256i step = _mm256_set_epi32(0, 0, 0, 16, 0, 0, 0, 16);

  __m256i x[8], d[8];
  size_t i = 0;
  for (; i + 256 <= len; i += 256) {
    for (int j = 0; j < 8; ++j) {
      x[j] = _mm256_shuffle_epi8(ctr[j], rev);
      ctr[j] = _mm256_add_epi32(ctr[j], step);
    }
    Aes16Ymm(x, k);
    for (int j = 0; j < 8; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 32 * j));
      const __m256i c = _mm256_xor_si256(v, x[j]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 32 * j), c);
      d[j] = _mm256_shuffle_epi8(kSeal ? c : v, rev);
    }
    AbsorbYmm(&g, d, 16);
  }
  if (i < len) {
    // The last 1..255 bytes through zero-padded blocks; the final partial
    // block zero-padded for GHASH (SP 800-38D §7.1 step 5).
    const size_t rest = len - i;
    alignas(32) uint8_t src[256] = {0};
    alignas(32) uint8_t dst[256];
    memcpy(src, in + i, rest);
    for (int j = 0; j < 8; ++j) x[j] = _mm256_shuffle_epi8(ctr[j], rev);
    Aes16Ymm(x, k);
    for (int j = 0; j < 8; ++j) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + 32 * j));
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32 * j), _mm256_xor_si256(v, x[j]));
    }
    memset(dst + rest, 0, sizeof(dst) - rest);
    memcpy(out + i, dst, rest);
    LoadRev8(kSeal ? dst : src, rev, d);
    AbsorbYmm(&g, d, static_cast<int>((rest + 15) / 16));
    Wipe(src, sizeof(src));
    Wipe(dst, sizeof(dst));
  }
  Wipe(k, sizeof(k));  // the round keys are key material
  return Finish(&st, aad_len, len);
}

TFP_BASE bool TagsEqual(__m128i a, const uint8_t* b) {
  // No data-dependent branch: one test of the OR of all differences.
  const __m128i diff = _mm_xor_si128(a, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  return _mm_testz_si128(diff, diff) != 0;
}

TFP_BASE void StoreTag(__m128i t, uint8_t* tag) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(tag), t);
}

bool SupportedZmm() {
  static const bool ok = CpuSupported();
  return ok;
}

bool SupportedYmm() {
  static const bool ok = CpuSupportedYmm();
  return ok;
}

// The ZMM code where the CPU has it, unless the test hook asks for YMM.
bool UseZmm() {
  if (!SupportedZmm()) return false;
  const char* ymm = std::getenv("TF_PRIVPY_AEAD_YMM");
  return ymm == nullptr || ymm[0] == '\0' || strcmp(ymm, "0") == 0;
}

}  // namespace

bool Supported() { return SupportedZmm() || SupportedYmm(); }

const char* Path() { return !Supported() ? "none" : UseZmm() ? "zmm" : "ymm"; }

void Seal(const uint8_t key[16], const uint8_t iv[12], const uint8_t* aad, size_t aad_len,
          const uint8_t* in, size_t len, uint8_t* out, uint8_t tag[16]) {
  StoreTag(UseZmm() ? Gcm<true>(key, iv, aad, aad_len, in, len, out)
                    : GcmYmm<true>(key, iv, aad, aad_len, in, len, out), tag);
}

bool Open(const uint8_t key[16], const uint8_t iv[12], const uint8_t* aad, size_t aad_len,
          const uint8_t* in, size_t len, const uint8_t tag[16], uint8_t* out) {
  const __m128i t = UseZmm() ? Gcm<false>(key, iv, aad, aad_len, in, len, out)
                             : GcmYmm<false>(key, iv, aad, aad_len, in, len, out);
  const bool ok = TagsEqual(t, tag);
  if (!ok) Wipe(out, len);
  return ok;
}

#else  // not x86-64: the EVP path only

bool Supported() { return false; }

const char* Path() { return "none"; }

void Seal(const uint8_t*, const uint8_t*, const uint8_t*, size_t, const uint8_t*, size_t,
          uint8_t*, uint8_t*) {
  abort();  // callers check Supported()
}

bool Open(const uint8_t*, const uint8_t*, const uint8_t*, size_t, const uint8_t*, size_t,
          const uint8_t*, uint8_t*) {
  abort();
}

#endif

bool Available() {
  if (!Supported()) return false;
  // getenv per call (not cached), like TF_PRIVPY_DISABLE_VAES of the PRG, so
  // tests can toggle the path inside one process; ~0.1 us against a GCM
  // invocation's ~1 us fixed cost.
  const char* evp = std::getenv("TF_PRIVPY_AEAD_EVP");
  return evp == nullptr || evp[0] == '\0' || strcmp(evp, "0") == 0;
}

}  // namespace fast
}  // namespace aead
}  // namespace tf_privpy
