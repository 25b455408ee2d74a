// AES-128-GCM (SP 800-38D, 96-bit IV, 128-bit tag) with VAES and VPCLMULQDQ
// on 512-bit registers: our own code, the fast path of aead::GcmSeal/GcmOpen.
// Inside TensorFlow the EVP path binds to TF's bundled BoringSSL, whose GCM is
// the AES-NI/PCLMULQDQ "ctr32_ghash_6x" code on 128-bit registers; a profile
// of LeNet-5 (batch 100, four server processes) had it at ~20% of all CPU.
//
// CTR: 16 counter blocks (4 ZMM, or 8 YMM on CPUs with VAES but no AVX-512)
// encrypted per iteration. GHASH: computed as
// POLYVAL on byte-reversed blocks (RFC 8452 Appendix A: GHASH(H, X) =
// ByteReverse(POLYVAL(mulX(ByteReverse(H)), ByteReverse(X)))), whose
// bit order is the native one of carry-less multiplication, so no bit
// reflection is needed; 16 blocks are multiplied by H^16 .. H^1 (precomputed
// per call) and summed unreduced, with one Montgomery reduction per 16 blocks.
//
// The functions are compiled with target attributes only (not -m flags), so
// the library still loads on CPUs without these extensions; Available()
// decides at run time (CPUID, and XGETBV for the OS saving the ZMM and opmask
// state).
#ifndef TF_PRIVPY_OPS_AEAD_GCM_FAST_H_
#define TF_PRIVPY_OPS_AEAD_GCM_FAST_H_

#include <cstddef>
#include <cstdint>

namespace tf_privpy {
namespace aead {
namespace fast {

// The CPU has AES-NI, PCLMULQDQ, VAES and VPCLMULQDQ with either AVX-512
// F/BW/VL (the ZMM code; the OS saves the ZMM/opmask state) or AVX2 (the
// same method on YMM registers; the OS saves the YMM state). Probed once.
bool Supported();

// Which code Seal/Open run: "zmm", "ymm" or "none" (not Supported()). TEST
// HOOK: the environment variable TF_PRIVPY_AEAD_YMM (read at every call),
// set to a non-empty value other than "0", makes a ZMM-capable CPU run the
// YMM code, so tests cover both where AVX-512 exists.
const char* Path();

// Supported(), unless the environment variable TF_PRIVPY_AEAD_EVP is set to a
// non-empty value other than "0" (read at every call). TEST HOOK: it forces
// the EVP path, so that tests and benchmarks can compare the two inside one
// process; nothing in production sets it.
bool Available();

// Callers check Supported() first. len <= 2^36 - 32 (one GCM invocation);
// buffers may be null when their length is 0; out may not overlap in.
void Seal(const uint8_t key[16], const uint8_t iv[12], const uint8_t* aad,
          size_t aad_len, const uint8_t* in, size_t len, uint8_t* out,
          uint8_t tag[16]);

// Decrypts into out while authenticating, then compares the tag in constant
// time; false on a mismatch, and out[0, len) is wiped then.
bool Open(const uint8_t key[16], const uint8_t iv[12], const uint8_t* aad,
          size_t aad_len, const uint8_t* in, size_t len, const uint8_t tag[16],
          uint8_t* out);

}  // namespace fast
}  // namespace aead
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_AEAD_GCM_FAST_H_
