// AES-128-GCM channel encryption (see aead.h for key, nonce, AAD and wire
// format). Only EVP/SHA calls that OpenSSL 3 and BoringSSL share, with the
// same signatures and control codes (EVP_CTRL_GCM_SET_IVLEN = 0x9,
// GET_TAG = 0x10, SET_TAG = 0x11 in both): inside TensorFlow these symbols
// resolve to TF's bundled BoringSSL, in the standalone test to the system's
// OpenSSL, and tests/test_aead.py checks the in-TF result against an
// independent GCM (the `cryptography` package). HMAC() itself is avoided:
// its key_len is an int in OpenSSL and a size_t in BoringSSL.
#include "ops/aead/aead.h"

#include "ops/aead/gcm_fast.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace tf_privpy {
namespace aead {

const char kKdfLabel[] = "tf_privpy channel key AES-128-GCM v1";
const char kAadLabel[] = "tf_privpy aead v1";

namespace {

// EVP lengths are ints: feed at most 1 GiB (a multiple of the block) per call.
constexpr size_t kMaxUpdate = size_t{1} << 30;

struct CtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxDeleter>;

void PutBe32(uint32_t v, uint8_t* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

void PutBe64(uint64_t v, uint8_t* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

uint64_t GetBe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

void AppendBe(std::string* s, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) s->push_back(static_cast<char>(v >> (8 * i)));
}

bool NameOk(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                    (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// Feeds [p, p + len) to update(out_or_null, in, n) in int-sized pieces.
template <typename Update>
bool Chunked(const uint8_t* in, uint8_t* out, size_t len, const Update& update) {
  for (size_t done = 0; done < len;) {
    const size_t n = std::min(len - done, kMaxUpdate);
    int outl = 0;
    if (update(out ? out + done : nullptr, &outl, in + done, static_cast<int>(n)) != 1)
      return false;
    // GCM is a streaming mode: EVP returns each update's bytes at once
    // (AAD updates, with a null out, return outl = len too).
    if (outl != static_cast<int>(n)) return false;
    done += n;
  }
  return true;
}

// EVP_{En,De}cryptInit with a 96-bit IV (the default, set explicitly anyway:
// SP 800-38D §8.2.1 needs exactly 96 bits for the deterministic construction).
bool InitGcm(EVP_CIPHER_CTX* ctx, bool encrypt, const uint8_t key[kKeyBytes],
             const uint8_t iv[kNonceBytes]) {
  auto init = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
  return init(ctx, EVP_aes_128_gcm(), nullptr, nullptr, nullptr) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN,
                             static_cast<int>(kNonceBytes), nullptr) == 1 &&
         init(ctx, nullptr, nullptr, key, iv) == 1;
}

// Whether GcmSeal/GcmOpen take gcm_fast.cc's path; sets *error for a kFast
// request that this CPU cannot serve.
bool UseFast(GcmImpl impl, std::string* error) {
  switch (impl) {
    case GcmImpl::kAuto:
      return fast::Available();
    case GcmImpl::kEvp:
      return false;
    case GcmImpl::kFast:
      if (fast::Supported()) return true;
      *error = "AES-GCM: the VAES/VPCLMULQDQ path was requested but this CPU or OS "
               "lacks it (use GcmImpl::kAuto)";
      return false;
  }
  return false;
}

}  // namespace

void Wipe(void* p, size_t len) {
  if (p != nullptr && len > 0) OPENSSL_cleanse(p, len);
}

bool ValidLink(const std::string& link, std::string* why) {
  const size_t arrow = link.find("->");
  if (arrow == std::string::npos) {
    *why = "link must read \"<src>-><dst>\", e.g. \"S1->T1\"; got \"" + link + "\"";
    return false;
  }
  const std::string src = link.substr(0, arrow), dst = link.substr(arrow + 2);
  if (!NameOk(src) || !NameOk(dst)) {
    *why = "link \"" + link +
           "\": party names must be non-empty and made of [A-Za-z0-9_]";
    return false;
  }
  if (src == dst) {
    *why = "link \"" + link + "\": a party does not send messages to itself";
    return false;
  }
  return true;
}

void HmacSha256(const uint8_t* key, size_t key_len, const uint8_t* msg,
                size_t msg_len, uint8_t out[32]) {
  constexpr size_t kBlock = 64;  // SHA-256's block size (RFC 2104's B)
  uint8_t k0[kBlock] = {0};
  if (key_len > kBlock) {
    SHA256(key, key_len, k0);
  } else if (key_len > 0) {
    memcpy(k0, key, key_len);
  }
  std::vector<uint8_t> buf(kBlock + std::max<size_t>(msg_len, 32));
  uint8_t inner[32];
  for (size_t i = 0; i < kBlock; ++i) buf[i] = k0[i] ^ 0x36;
  if (msg_len > 0) memcpy(buf.data() + kBlock, msg, msg_len);
  SHA256(buf.data(), kBlock + msg_len, inner);
  for (size_t i = 0; i < kBlock; ++i) buf[i] = k0[i] ^ 0x5c;
  memcpy(buf.data() + kBlock, inner, 32);
  SHA256(buf.data(), kBlock + 32, out);
  Wipe(k0, sizeof(k0));
  Wipe(inner, sizeof(inner));
  Wipe(buf.data(), buf.size());
}

void DeriveLinkKey(const uint8_t pair_key[kKeyBytes], const std::string& link,
                   uint8_t link_key[kKeyBytes]) {
  // SP 800-108r1 §4.1 (counter mode), r = 32, i = 1, L = 128: one PRF call.
  std::string input;
  AppendBe(&input, 1, 4);
  input += kKdfLabel;
  input.push_back('\0');
  input += link;
  AppendBe(&input, 8 * kKeyBytes, 4);
  uint8_t full[32];
  HmacSha256(pair_key, kKeyBytes, reinterpret_cast<const uint8_t*>(input.data()),
             input.size(), full);
  memcpy(link_key, full, kKeyBytes);
  Wipe(full, sizeof(full));
}

void MakeNonce(uint32_t stream, uint64_t counter, uint8_t nonce[kNonceBytes]) {
  PutBe32(stream, nonce);
  PutBe64(counter, nonce + 4);
}

std::string MakeAad(const std::string& link, uint32_t stream,
                    const int64_t* dims, int rank) {
  // Injective: the label and link hold no NUL, the rest has fixed widths.
  std::string aad(kAadLabel);
  aad.push_back('\0');
  aad += link;
  aad.push_back('\0');
  AppendBe(&aad, stream, 4);
  AppendBe(&aad, static_cast<uint32_t>(rank), 4);
  for (int i = 0; i < rank; ++i) AppendBe(&aad, static_cast<uint64_t>(dims[i]), 8);
  return aad;
}

bool GcmSeal(const uint8_t key[kKeyBytes], const uint8_t iv[kNonceBytes],
             const uint8_t* aad, size_t aad_len, const uint8_t* in, size_t len,
             uint8_t* out, uint8_t tag[kTagBytes], std::string* error,
             GcmImpl impl) {
  *error = "AES-GCM encryption failed (OpenSSL EVP error)";
  if (len > kMaxPlaintextBytes) {
    *error = "AES-GCM: a message holds at most 2^36 - 32 bytes (SP 800-38D §5.2.1.1)";
    return false;
  }
  if (UseFast(impl, error)) {
    fast::Seal(key, iv, aad, aad_len, in, len, out, tag);
    error->clear();
    return true;
  }
  if (impl == GcmImpl::kFast) return false;
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx || !InitGcm(ctx.get(), true, key, iv)) return false;
  auto update = [&ctx](uint8_t* o, int* outl, const uint8_t* i, int n) {
    return EVP_EncryptUpdate(ctx.get(), o, outl, i, n);
  };
  if (!Chunked(aad, nullptr, aad_len, update) || !Chunked(in, out, len, update))
    return false;
  uint8_t tail[16];  // GCM's final produces no bytes; EVP still wants a buffer
  int outl = 0;
  if (EVP_EncryptFinal_ex(ctx.get(), tail, &outl) != 1 || outl != 0 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG,
                          static_cast<int>(kTagBytes), tag) != 1)
    return false;
  error->clear();
  return true;
}

OpenStatus GcmOpen(const uint8_t key[kKeyBytes], const uint8_t iv[kNonceBytes],
                   const uint8_t* aad, size_t aad_len, const uint8_t* in,
                   size_t len, const uint8_t tag[kTagBytes], uint8_t* out,
                   std::string* error, GcmImpl impl) {
  *error = "AES-GCM decryption failed (OpenSSL EVP error)";
  if (len > kMaxPlaintextBytes) {
    *error = "AES-GCM: a message holds at most 2^36 - 32 bytes (SP 800-38D §5.2.1.1)";
    return OpenStatus::kError;
  }
  if (UseFast(impl, error)) {
    // Same outcomes as EVP's: kOk, or kAuthFailed with out wiped.
    if (fast::Open(key, iv, aad, aad_len, in, len, tag, out)) {
      error->clear();
      return OpenStatus::kOk;
    }
    *error = "AES-GCM tag mismatch";
    return OpenStatus::kAuthFailed;
  }
  if (impl == GcmImpl::kFast) {
    Wipe(out, len);
    return OpenStatus::kError;
  }
  OpenStatus status = OpenStatus::kError;
  Ctx ctx(EVP_CIPHER_CTX_new());
  uint8_t expected[kTagBytes];  // SET_TAG takes a non-const pointer
  memcpy(expected, tag, kTagBytes);
  auto update = [&ctx](uint8_t* o, int* outl, const uint8_t* i, int n) {
    return EVP_DecryptUpdate(ctx.get(), o, outl, i, n);
  };
  if (ctx && InitGcm(ctx.get(), false, key, iv) &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG,
                          static_cast<int>(kTagBytes), expected) == 1 &&
      Chunked(aad, nullptr, aad_len, update) && Chunked(in, out, len, update)) {
    uint8_t tail[16];
    int outl = 0;
    // The tag comparison (constant time) happens here; 0 = mismatch.
    status = EVP_DecryptFinal_ex(ctx.get(), tail, &outl) == 1 && outl == 0
                 ? OpenStatus::kOk
                 : OpenStatus::kAuthFailed;
  }
  if (status != OpenStatus::kOk) Wipe(out, len);
  if (status == OpenStatus::kOk) error->clear();
  if (status == OpenStatus::kAuthFailed) *error = "AES-GCM tag mismatch";
  return status;
}

uint64_t ChunkCount(uint64_t len) {
  return len <= kChunkBytes ? 1 : (len - 1) / kChunkBytes + 1;
}

uint64_t MessageBytes(uint64_t len) {
  return kCounterBytes + len + kTagBytes * ChunkCount(len);
}

bool PlaintextBytes(uint64_t msg_len, uint64_t* len) {
  if (msg_len < kOverhead) return false;
  // msg_len - 8 = len + 16 K with (K - 1) C < len <= K C (K > 1), so
  // K = ceil((msg_len - 8) / (C + 16)); K = 1 covers len = 0 too.
  const uint64_t body = msg_len - kCounterBytes;
  const uint64_t k = (body - 1) / (kChunkBytes + kTagBytes) + 1;
  *len = body - kTagBytes * k;
  return MessageBytes(*len) == msg_len;
}

std::string ChunkAad(const std::string& aad, uint64_t index, uint64_t count) {
  if (count == 1) return aad;
  std::string a = aad;
  AppendBe(&a, index, 8);
  AppendBe(&a, count, 8);
  return a;
}

namespace {

// Where chunk i of a len-byte plaintext lies: plaintext [*off, *off + *n),
// its ciphertext at msg + *at, its tag at msg + *at + *n.
void ChunkSpan(uint64_t i, size_t len, size_t* off, size_t* n, size_t* at) {
  *off = i * kChunkBytes;
  *n = std::min<size_t>(kChunkBytes, len - *off);
  *at = kCounterBytes + i * (kChunkBytes + kTagBytes);
}

// Runs chunk(i, &error) for i in [0, count) on parallel_for (directly when
// count == 1) until one fails; returns the worst status, *error that chunk's.
template <typename Chunk>
OpenStatus ForEachChunk(uint64_t count, const ParallelFor& parallel_for,
                        const Chunk& chunk, std::string* error) {
  if (count == 1) return chunk(0, error);
  std::atomic<int> worst{static_cast<int>(OpenStatus::kOk)};
  std::mutex mu;
  // GCM runs at ~1-2 cycles per byte: a chunk is worth a thread.
  parallel_for(static_cast<int64_t>(count), static_cast<int64_t>(2 * kChunkBytes),
               [&](int64_t b, int64_t e) {
                 std::string err;
                 for (int64_t i = b; i < e; ++i) {
                   // Once a chunk has failed the message is lost: stop.
                   if (worst.load(std::memory_order_relaxed) != 0) return;
                   const OpenStatus s = chunk(static_cast<uint64_t>(i), &err);
                   if (s == OpenStatus::kOk) continue;
                   std::lock_guard<std::mutex> l(mu);
                   if (static_cast<int>(s) > worst.load()) {
                     worst.store(static_cast<int>(s));
                     *error = err + " (chunk " + std::to_string(i) + " of " +
                              std::to_string(count) + ")";
                   }
                   return;
                 }
               });
  return static_cast<OpenStatus>(worst.load());
}

}  // namespace

bool Seal(const uint8_t link_key[kKeyBytes], uint32_t stream, uint64_t counter,
          const std::string& aad, const uint8_t* in, size_t len, uint8_t* msg,
          std::string* error, const ParallelFor& parallel_for, GcmImpl impl) {
  return SealSegments(link_key, stream, counter, aad, {Segment{in, len}}, msg, error,
                      parallel_for, impl);
}

bool SealSegments(const uint8_t link_key[kKeyBytes], uint32_t stream, uint64_t counter,
                  const std::string& aad, const std::vector<Segment>& segments,
                  uint8_t* msg, std::string* error, const ParallelFor& parallel_for,
                  GcmImpl impl) {
  // starts[s] = offset of segment s in the plaintext; starts.back() = len.
  std::vector<size_t> starts(1, 0);
  for (const Segment& seg : segments) starts.push_back(starts.back() + seg.len);
  const size_t len = starts.back();
  const uint64_t count = ChunkCount(len);
  if (count - 1 > ~uint64_t{0} - counter) {
    *error = "the message's counters would wrap around";
    return false;
  }
  PutBe64(counter, msg);
  auto chunk = [&](uint64_t i, std::string* err) {
    size_t off, n, at;
    ChunkSpan(i, len, &off, &n, &at);
    uint8_t nonce[kNonceBytes];
    MakeNonce(stream, counter + i, nonce);
    const std::string a = ChunkAad(aad, i, count);
    // The last segment starting at or before off (skipping empty ones).
    size_t s = static_cast<size_t>(
                   std::upper_bound(starts.begin(), starts.end() - 1, off) - starts.begin()) - 1;
    while (s + 1 < segments.size() && segments[s].len == 0) ++s;
    const uint8_t* in = nullptr;
    std::vector<uint8_t> gathered;
    if (n == 0) {
      in = nullptr;
    } else if (off + n <= starts[s + 1]) {
      in = segments[s].data + (off - starts[s]);
    } else {
      gathered.resize(n);
      for (size_t done = 0; done < n; ++s) {
        const size_t from = off + done - starts[s];
        const size_t take = std::min(n - done, segments[s].len - from);
        if (take) memcpy(gathered.data() + done, segments[s].data + from, take);
        done += take;
      }
      in = gathered.data();
    }
    const bool ok = GcmSeal(link_key, nonce, reinterpret_cast<const uint8_t*>(a.data()),
                            a.size(), in, n, msg + at, msg + at + n, err, impl);
    if (!gathered.empty()) Wipe(gathered.data(), gathered.size());  // plaintext
    return ok ? OpenStatus::kOk : OpenStatus::kError;
  };
  return ForEachChunk(count, parallel_for, chunk, error) == OpenStatus::kOk;
}

OpenStatus Open(const uint8_t link_key[kKeyBytes], uint32_t stream,
                const std::string& aad, const uint8_t* msg, size_t msg_len,
                uint8_t* out, uint64_t* counter, std::string* error,
                const ParallelFor& parallel_for, GcmImpl impl) {
  if (msg_len < kOverhead) {
    *error = "message shorter than its 24-byte header and tag";
    return OpenStatus::kAuthFailed;
  }
  *counter = GetBe64(msg);
  uint64_t len = 0;
  if (!PlaintextBytes(msg_len, &len)) {
    *error = "no plaintext length makes a message of " + std::to_string(msg_len) +
             " bytes";
    return OpenStatus::kAuthFailed;
  }
  const uint64_t count = ChunkCount(len);
  // Nonces past 2^64 would wrap: no sender makes them (it reserves its
  // counters below 2^63), so such a message is a forgery.
  if (count - 1 > ~uint64_t{0} - *counter) {
    *error = "the message's counters would wrap around";
    Wipe(out, len);
    return OpenStatus::kAuthFailed;
  }
  auto chunk = [&](uint64_t i, std::string* err) {
    size_t off, n, at;
    ChunkSpan(i, len, &off, &n, &at);
    uint8_t nonce[kNonceBytes];
    MakeNonce(stream, *counter + i, nonce);
    const std::string a = ChunkAad(aad, i, count);
    return GcmOpen(link_key, nonce, reinterpret_cast<const uint8_t*>(a.data()),
                   a.size(), msg + at, n, msg + at + n, out + off, err, impl);
  };
  const OpenStatus status = ForEachChunk(count, parallel_for, chunk, error);
  // Chunks verified before the failing one hold plaintext: none leaves.
  if (status != OpenStatus::kOk) Wipe(out, len);
  return status;
}

}  // namespace aead
}  // namespace tf_privpy
