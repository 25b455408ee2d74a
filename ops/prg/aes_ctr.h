// Pseudo-random generator: AES-128 in counter mode (DESIGN §4).
// The 128-bit counter block is nonce (64 bits, big-endian) || block index
// (64 bits, big-endian); a caller never reuses a (key, nonce) pair, and
// within one nonce the stream is addressed by byte offset, so one call can
// carve several independent masks out of one stream without overlap.
// On CPUs with AVX-512 VAES the keystream comes from aes_ctr_vaes.cc (32
// blocks in flight; TF's BoringSSL reaches ~4-5 GB/s per thread with
// AES-NI); on CPUs with VAES and AVX2 but no AVX-512 (AMD Zen 3), or with
// TF_PRIVPY_PRG_YMM=1, from aes_ctr_vaes_ymm.cc (16 blocks in flight, ~2.5x
// EVP on Zen 3); otherwise, or with TF_PRIVPY_DISABLE_VAES=1, from OpenSSL's
// EVP interface, which picks AES-NI at run time and has a constant-time
// portable path otherwise. All paths give identical bytes.
#ifndef TF_PRIVPY_OPS_PRG_AES_CTR_H_
#define TF_PRIVPY_OPS_PRG_AES_CTR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/common/parallel.h"

namespace tf_privpy {

// Fills out[0, len) with bytes [byte_offset, byte_offset + len) of the
// keystream for (key, nonce). Returns false (and sets *error) on failure.
bool PrgFill(const uint8_t key[16], uint64_t nonce, uint64_t byte_offset,
             uint8_t* out, size_t len, const ParallelFor& parallel_for,
             std::string* error);

// Reads len bytes from the operating system's CSPRNG (getrandom(2)).
// Never falls back to anything weaker.
bool OsRandomBytes(uint8_t* out, size_t len, std::string* error);

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_PRG_AES_CTR_H_
