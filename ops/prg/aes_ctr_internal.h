// Internals of PrgFill shared by aes_ctr.cc (dispatch, EVP path) and
// aes_ctr_vaes.cc (AVX-512 VAES path) and aes_ctr_vaes_ymm.cc (VAES on
// 256-bit registers, for CPUs with VAES and AVX2 but no AVX-512), exposed for the standalone test
// (known-answer vectors need the raw key schedule and an arbitrary 128-bit
// initial counter). Not part of the public API.
#ifndef TF_PRIVPY_OPS_PRG_AES_CTR_INTERNAL_H_
#define TF_PRIVPY_OPS_PRG_AES_CTR_INTERNAL_H_

#include <cstdint>

namespace tf_privpy {
namespace aes_ctr_internal {

// AES-128 key schedule (FIPS-197 §5.2): 11 round keys in FIPS byte order.
struct RoundKeys {
  alignas(16) uint8_t rk[11][16];
};

// True when CPU and OS support AVX-512 F/BW + VAES + AES-NI (zmm state
// enabled); only then may CtrBlocksVaes and EcbBlocksVaes be called.
bool CpuHasVaes();

// True when CPU and OS support VAES + AVX2 + AES-NI (ymm state enabled,
// checked with XGETBV); only then may CtrBlocksVaesYmm be called.
// ExpandKeyAesni needs AES-NI only, which both checks include.
bool CpuHasVaesYmm();

// TF_PRIVPY_PRG_YMM set to anything but "" or "0": PrgFill takes the YMM path
// where it would take the ZMM one, so AVX-512 machines test the YMM code.
// Read per call, like VaesDisabled (which still wins: it forces EVP).
bool PrgYmmForced();

// The keystream path PrgFill takes now (per the CPU and the two variables
// above): "zmm", "ymm" or "evp".
const char* PrgPath();

// TF_PRIVPY_DISABLE_VAES set to anything but "" or "0". Read per call so
// tests can compare both paths in one process.
bool VaesDisabled();

// FIPS-197 §5.2 key expansion with AES-NI (aeskeygenassist).
void ExpandKeyAesni(const uint8_t key[16], RoundKeys* keys);

// AES-128-CTR keystream (SP 800-38A §6.5), nblocks blocks into out: block i
// is AES_k(counter + i), the counter a 128-bit big-endian integer whose high
// and low 64-bit halves are ctr_hi, ctr_lo (the whole 128 bits increment, as
// OpenSSL's/BoringSSL's CTR mode does). out needs no alignment.
void CtrBlocksVaes(const RoundKeys& keys, uint64_t ctr_hi, uint64_t ctr_lo,
                   uint64_t nblocks, uint8_t* out);

// CtrBlocksVaes on 256-bit registers (16 blocks in flight): the same bytes,
// for CPUs where CpuHasVaesYmm() but not CpuHasVaes().
void CtrBlocksVaesYmm(const RoundKeys& keys, uint64_t ctr_hi, uint64_t ctr_lo,
                      uint64_t nblocks, uint8_t* out);

// The two widths' common driver: run(hi, lo, n, out) encrypts n counter
// blocks whose low half lo + n - 1 does not wrap; the vector lanes add in
// 64 bits, so the run is split where the low half wraps and the carry goes
// into the high half there (the 128-bit big-endian increment of SP 800-38A
// B.1 / OpenSSL). PrgFill never wraps (its low half is a block index
// < 2^60), but the test does.
template <typename Run>
inline void SplitAtWrap(uint64_t ctr_hi, uint64_t ctr_lo, uint64_t nblocks, uint8_t* out,
                        Run run) {
  while (nblocks > 0) {
    const uint64_t to_wrap = 0 - ctr_lo;  // 2^64 - lo; 0 stands for 2^64
    const uint64_t n = (to_wrap == 0 || to_wrap > nblocks) ? nblocks : to_wrap;
    run(ctr_hi, ctr_lo, n, out);
    out += n * 16;
    nblocks -= n;
    ctr_lo += n;
    if (ctr_lo == 0) ++ctr_hi;
  }
}

// AES-128-ECB (FIPS-197 encryption of each block), nblocks blocks from in to
// out; in and out may be the same buffer and need no alignment. The garbled
// circuits' fixed-key permutation (ops/gc/gc_internal.h) runs on it: one
// call per AND gate and chunk, where EVP's per-call dispatch and its 128-bit
// AES-NI cost about twice as much.
void EcbBlocksVaes(const RoundKeys& keys, const uint8_t* in, uint8_t* out,
                   uint64_t nblocks);

}  // namespace aes_ctr_internal
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_PRG_AES_CTR_INTERNAL_H_
