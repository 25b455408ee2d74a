// Building blocks shared by the garbled circuits of this family (the
// comparator, garble.cc, and the leading-one encoder, leading_one.cc): label
// arithmetic, the fixed-key AES permutation of the hash, per-thread scratch
// memory and the chunked ParallelFor. Internal to ops/gc.
#ifndef TF_PRIVPY_OPS_GC_GC_INTERNAL_H_
#define TF_PRIVPY_OPS_GC_GC_INTERNAL_H_

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/gc/garble.h"
#include "ops/prg/aes_ctr.h"
#include "ops/prg/aes_ctr_internal.h"

namespace tf_privpy {
namespace gc {
namespace internal {

inline Block Xor(Block a, Block b) { return {a.lo ^ b.lo, a.hi ^ b.hi}; }
// a if bit (lsb) is set, else 0; branch-free.
inline Block Select(uint64_t bit, Block a) {
  const uint64_t m = 0 - (bit & 1);
  return {a.lo & m, a.hi & m};
}
// sigma(X_hi || X_lo) = (X_hi XOR X_lo) || X_hi   (GKWY 2020, section 7).
inline Block Sigma(Block x) { return {x.hi, x.hi ^ x.lo}; }

// Per-thread scratch memory, reused across shards and calls: a shard of a
// few chunks would otherwise allocate (and page-fault) ~0.5 MB every time.
// A shard body never calls ParallelFor, so a thread runs one body at a time.
// With wipe set (garbling: zero labels, which T must never see) the used
// part is zeroed when the shard ends; the evaluator's scratch only holds
// copies of its own input tensors.
class Arena {
 public:
  Arena(int64_t blocks, bool wipe) : wipe_(wipe) {
    thread_local std::vector<Block> storage;
    if (static_cast<int64_t>(storage.size()) < blocks) storage.resize(blocks);
    begin_ = next_ = storage.data();
  }
  ~Arena() {
    if (wipe_) std::fill(begin_, next_, Block{0, 0});  // storage outlives us
  }
  Block* Take(int64_t blocks) {
    Block* p = next_;
    next_ += blocks;
    return p;
  }

 private:
  bool wipe_;
  Block* begin_;
  Block* next_;
};

struct CtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

// AES-128-ECB under the public fixed key: the permutation pi of the hash.
// With AVX-512 VAES (and TF_PRIVPY_DISABLE_VAES unset) the blocks go through
// aes_ctr_vaes.cc's 32-blocks-in-flight loop; otherwise through EVP (same
// permutation: the standalone tests compare both).
class FixedKeyAes {
 public:
  bool Init() {
    namespace in = aes_ctr_internal;
    vaes_ = in::CpuHasVaes() && !in::VaesDisabled();
    if (vaes_) {
      in::ExpandKeyAesni(kFixedAesKey, &keys_);
      return true;
    }
    ctx_.reset(EVP_CIPHER_CTX_new());
    return ctx_ &&
           EVP_EncryptInit_ex(ctx_.get(), EVP_aes_128_ecb(), nullptr,
                              kFixedAesKey, nullptr) == 1 &&
           EVP_CIPHER_CTX_set_padding(ctx_.get(), 0) == 1;
  }
  // out[k] = pi(in[k]), k < count (count * 16 < 2^31).
  bool Permute(const Block* in, Block* out, int64_t count) {
    if (count == 0) return true;
    if (vaes_) {
      aes_ctr_internal::EcbBlocksVaes(keys_, reinterpret_cast<const uint8_t*>(in),
                                      reinterpret_cast<uint8_t*>(out),
                                      static_cast<uint64_t>(count));
      return true;
    }
    int outl = 0;
    const int len = static_cast<int>(count * sizeof(Block));
    return EVP_EncryptUpdate(ctx_.get(), reinterpret_cast<uint8_t*>(out),
                             &outl, reinterpret_cast<const uint8_t*>(in),
                             len) == 1 &&
           outl == len;
  }

 private:
  bool vaes_ = false;
  aes_ctr_internal::RoundKeys keys_;
  std::unique_ptr<EVP_CIPHER_CTX, CtxDeleter> ctx_;
};

// len bytes of the (key, nonce) stream from byte offset `offset`.
inline bool Fill(const uint8_t key[16], uint64_t nonce, uint64_t offset,
                 void* out, size_t len, std::string* error) {
  return PrgFill(key, nonce, offset, static_cast<uint8_t*>(out), len,
                 SerialFor, error);
}

// Runs body(chunk_begin, chunk_end, error) over all chunks of `chunk` items
// of [0, n) in parallel; reports the first error.
template <typename Body>
bool ForChunks(int64_t n, int64_t chunk, int64_t cycles_per_item,
               const ParallelFor& parallel_for, std::string* error,
               const Body& body) {
  if (n <= 0) return true;
  const int64_t chunks = (n + chunk - 1) / chunk;
  std::atomic<bool> failed{false};
  std::string first_error;
  std::atomic_flag error_taken = ATOMIC_FLAG_INIT;
  parallel_for(chunks, chunk * cycles_per_item, [&](int64_t cb, int64_t ce) {
    std::string err;
    if (!body(cb * chunk, std::min(n, ce * chunk), &err)) {
      if (!error_taken.test_and_set()) first_error = err;
      failed = true;
    }
  });
  if (failed) *error = first_error;
  return !failed;
}

}  // namespace internal
}  // namespace gc
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_GC_INTERNAL_H_
