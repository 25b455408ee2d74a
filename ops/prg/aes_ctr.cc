#include "ops/prg/aes_ctr.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <cerrno>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

namespace tf_privpy {
namespace {

constexpr uint64_t kBlock = 16;
// Blocks per parallel shard: large enough to amortize EVP setup (~1 us).
constexpr int64_t kBlocksPerShard = 4096;

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

}  // namespace

bool PrgFill(const uint8_t key[16], uint64_t nonce, uint64_t byte_offset,
             uint8_t* out, size_t len, const ParallelFor& parallel_for,
             std::string* error) {
  if (len == 0) return true;
  uint64_t pos = byte_offset;
  size_t written = 0;
  // Unaligned head: one block into a scratch buffer.
  if (pos % kBlock != 0) {
    uint8_t tmp[kBlock];
    if (!KeystreamBlocks(key, nonce, pos / kBlock, 1, tmp)) {
      *error = "AES-CTR keystream generation failed (OpenSSL EVP error)";
      return false;
    }
    const size_t skip = pos % kBlock;
    const size_t n = std::min<size_t>(kBlock - skip, len);
    memcpy(out, tmp + skip, n);
    written += n;
    pos += n;
  }
  const uint64_t first = pos / kBlock;
  const uint64_t full = (len - written) / kBlock;
  bool ok = true;
  if (full > 0) {
    const int64_t shards =
        static_cast<int64_t>((full + kBlocksPerShard - 1) / kBlocksPerShard);
    std::atomic<bool> failed{false};
    parallel_for(shards, kBlocksPerShard * 40,
                 [&](int64_t b, int64_t e) {
                   const uint64_t lo = b * kBlocksPerShard;
                   const uint64_t hi = std::min<uint64_t>(e * kBlocksPerShard, full);
                   if (!KeystreamBlocks(key, nonce, first + lo, hi - lo,
                                        out + written + lo * kBlock))
                     failed = true;
                 });
    ok = !failed;
    written += full * kBlock;
  }
  // Tail.
  if (ok && written < len) {
    uint8_t tmp[kBlock];
    ok = KeystreamBlocks(key, nonce, first + full, 1, tmp);
    if (ok) memcpy(out + written, tmp, len - written);
  }
  if (!ok) *error = "AES-CTR keystream generation failed (OpenSSL EVP error)";
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
