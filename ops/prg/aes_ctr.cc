// PrgFill: runtime dispatch between the AVX-512 VAES keystream
// (aes_ctr_vaes.cc), the same on 256-bit VAES registers for CPUs without
// AVX-512 (aes_ctr_vaes_ymm.cc), and OpenSSL's EVP AES-128-CTR (BoringSSL
// inside TF). All produce the same SP 800-38A CTR keystream byte for byte.
#include "ops/prg/aes_ctr.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ops/prg/aes_ctr_internal.h"

namespace tf_privpy {
namespace aes_ctr_internal {

bool VaesDisabled() {
  const char* v = std::getenv("TF_PRIVPY_DISABLE_VAES");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

const char* PrgPath() {
  if (VaesDisabled()) return "evp";
  if (CpuHasVaes() && !PrgYmmForced()) return "zmm";
  // Every AVX-512 VAES CPU also has AVX2 VAES; CpuHasVaesYmm checks it anyway.
  if (CpuHasVaesYmm()) return "ymm";
  return "evp";
}

}  // namespace aes_ctr_internal

namespace {

constexpr uint64_t kBlock = 16;
// Blocks per parallel shard: large enough to amortize EVP setup (~1 us).
constexpr int64_t kBlocksPerShard = 4096;
// Parallel-for cost hints (cycles per block) of the three paths.
constexpr int64_t kEvpCyclesPerBlock = 40;
constexpr int64_t kVaesCyclesPerBlock = 4;
constexpr int64_t kVaesYmmCyclesPerBlock = 6;
constexpr const char* kEvpError =
    "AES-CTR keystream generation failed (OpenSSL EVP error)";

struct CtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

void MakeIv(uint64_t nonce, uint64_t block, uint8_t iv[16]) {
  for (int i = 0; i < 8; ++i) {
    iv[i] = static_cast<uint8_t>(nonce >> (56 - 8 * i));
    iv[8 + i] = static_cast<uint8_t>(block >> (56 - 8 * i));
  }
}

// Keystream blocks [first_block, first_block + nblocks) into out.
bool KeystreamBlocks(const uint8_t key[16], uint64_t nonce,
                     uint64_t first_block, uint64_t nblocks, uint8_t* out) {
  std::unique_ptr<EVP_CIPHER_CTX, CtxDeleter> ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return false;
  uint8_t iv[16];
  MakeIv(nonce, first_block, iv);
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_ctr(), nullptr, key, iv) != 1)
    return false;
  // CTR keystream = encryption of zeros; OpenSSL allows in-place.
  uint64_t done = 0;
  while (done < nblocks) {
    // EVP_EncryptUpdate takes an int length.
    const uint64_t chunk = std::min<uint64_t>(nblocks - done, 1u << 20);
    uint8_t* p = out + done * kBlock;
    memset(p, 0, chunk * kBlock);
    int outl = 0;
    if (EVP_EncryptUpdate(ctx.get(), p, &outl, p,
                          static_cast<int>(chunk * kBlock)) != 1 ||
        outl != static_cast<int>(chunk * kBlock))
      return false;
    done += chunk;
  }
  return true;
}

// Bytes [byte_offset, byte_offset + len) of the keystream, given
// blocks(first, n, dst) writing keystream blocks [first, first + n): the
// unaligned head and tail go through a one-block scratch, the whole blocks
// straight into out, in shards when there are many.
template <typename Blocks>
bool FillBytes(const Blocks& blocks, uint64_t byte_offset, uint8_t* out,
               size_t len, const ParallelFor& parallel_for,
               int64_t cycles_per_block) {
  uint64_t pos = byte_offset;
  size_t written = 0;
  // Unaligned head: one block into a scratch buffer.
  if (pos % kBlock != 0) {
    uint8_t tmp[kBlock];
    if (!blocks(pos / kBlock, 1, tmp)) return false;
    const size_t skip = pos % kBlock;
    const size_t n = std::min<size_t>(kBlock - skip, len);
    memcpy(out, tmp + skip, n);
    written += n;
    pos += n;
  }
  const uint64_t first = pos / kBlock;
  const uint64_t full = (len - written) / kBlock;
  if (full > 0) {
    uint8_t* dst = out + written;
    if (full <= static_cast<uint64_t>(kBlocksPerShard)) {
      // One shard: called directly, so small fills (the per-chunk masks of
      // the multiplication kernels) build no std::function (no allocation).
      if (!blocks(first, full, dst)) return false;
    } else {
      const int64_t shards =
          static_cast<int64_t>((full + kBlocksPerShard - 1) / kBlocksPerShard);
      std::atomic<bool> failed{false};
      parallel_for(shards, kBlocksPerShard * cycles_per_block,
                   [&](int64_t b, int64_t e) {
                     const uint64_t lo = b * kBlocksPerShard;
                     const uint64_t hi =
                         std::min<uint64_t>(e * kBlocksPerShard, full);
                     if (!blocks(first + lo, hi - lo, dst + lo * kBlock))
                       failed = true;
                   });
      if (failed) return false;
    }
    written += full * kBlock;
  }
  // Tail.
  if (written < len) {
    uint8_t tmp[kBlock];
    if (!blocks(first + full, 1, tmp)) return false;
    memcpy(out + written, tmp, len - written);
  }
  return true;
}

}  // namespace

bool PrgFill(const uint8_t key[16], uint64_t nonce, uint64_t byte_offset,
             uint8_t* out, size_t len, const ParallelFor& parallel_for,
             std::string* error) {
  namespace in = aes_ctr_internal;
  if (len == 0) return true;
  // getenv per call (not cached) so tests can toggle the path.
  const char* path = in::PrgPath();
  if (std::strcmp(path, "evp") != 0) {
    const bool zmm = std::strcmp(path, "zmm") == 0;
    // Key schedule once per call (~100 cycles), on the stack, shared
    // read-only by the shards; wiped afterwards like EVP wipes its context.
    in::RoundKeys keys;
    in::ExpandKeyAesni(key, &keys);
    FillBytes(
        [&](uint64_t first, uint64_t n, uint8_t* dst) {
          if (zmm) {
            in::CtrBlocksVaes(keys, nonce, first, n, dst);
          } else {
            in::CtrBlocksVaesYmm(keys, nonce, first, n, dst);
          }
          return true;
        },
        byte_offset, out, len, parallel_for,
        zmm ? kVaesCyclesPerBlock : kVaesYmmCyclesPerBlock);
    OPENSSL_cleanse(&keys, sizeof(keys));
    return true;
  }
  const bool ok = FillBytes(
      [&](uint64_t first, uint64_t n, uint8_t* dst) {
        return KeystreamBlocks(key, nonce, first, n, dst);
      },
      byte_offset, out, len, parallel_for, kEvpCyclesPerBlock);
  if (!ok) *error = kEvpError;
  return ok;
}

bool OsRandomBytes(uint8_t* out, size_t len, std::string* error) {
  size_t got = 0;
  while (got < len) {
    const ssize_t r = getrandom(out + got, len - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      *error = std::string("the OS CSPRNG (getrandom) failed: ") +
               strerror(errno) + "; refusing to use weaker randomness";
      return false;
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace tf_privpy
