// Authenticated encryption of the messages between servers (DESIGN §2
// "Channel", §11): AES-128-GCM (SP 800-38D), by our VAES/VPCLMULQDQ code
// (gcm_fast.h) where the CPU has it, else through OpenSSL's EVP interface,
// which inside TensorFlow binds to the BoringSSL that TF bundles. TF-free, so
// it is unit-tested standalone (aead_test.cc); kernels: aead_kernels.cc.
//
// Key. Each link (an ordered pair of parties, "S1->T1") has its own GCM key,
// derived from the pair's 128-bit PRG key with the SP 800-108r1 KDF in
// counter mode, PRF = HMAC-SHA256 (RFC 2104), one iteration:
//   K_link = HMAC-SHA256(K_pair, [1]_32 || kKdfLabel || 0x00 || link || [128]_32)[0:16]
// HMAC is a different primitive from the PRG's AES-128-CTR under K_pair, so no
// AES input of the PRG can ever produce a channel key (an AES-based derivation
// E_K(label) would rely on the label lying outside every PRG counter block),
// and the two directions of a pair, and different pairs, get independent keys.
//
// Nonce (96 bits, SP 800-38D §8.2.1 deterministic construction):
//   fixed field = [stream]_32 (big-endian) || invocation field = [counter]_64.
// The counter is the sender's per-(link, stream) counter in TF state, taken
// atomically and never reused; the link is separated by the key, the stream
// by the fixed field, so every (key, nonce) pair is used at most once.
//
// Wire format of one message of at most kChunkBytes plaintext bytes:
//   [counter]_64 big-endian (the invocation field) || ciphertext || tag (16)
// i.e. kOverhead = 24 bytes more than the plaintext (RFC 5116 §5.1's layout
// with an explicit nonce prefix, as in TLS 1.2 GCM, RFC 5288 §3).
//
// AAD (RFC 5116 §2.1), rebuilt by the receiver from what it expects:
//   kAadLabel || 0x00 || link || 0x00 || [stream]_32 || [rank]_32 || [dim]_64...
// so a message for another link, stream or tensor shape fails authentication.
//
// Larger messages: chunks (so that one message seals and opens on several
// cores; GHASH is a chain, so one GCM invocation runs on one core). A
// plaintext of len bytes is cut into K = ChunkCount(len) =
// max(1, ceil(len / kChunkBytes)) chunks, all of kChunkBytes but the last
// (1..kChunkBytes bytes). Chunk i (0 <= i < K) is one GCM invocation with
//   nonce  [stream]_32 || [counter + i]_64
//   AAD_i  AAD || [i]_64 || [K]_64          (K > 1 only; K = 1: AAD as above)
// and the message is
//   [counter]_64 || ct_0 || tag_0 || ct_1 || tag_1 || ... || ct_{K-1} || tag_{K-1}
// (each tag right after its chunk, the record layout of RFC 8188 §2), so
// MessageBytes(len) = 8 + len + 16 K. For K = 1 (len <= kChunkBytes, 0
// included) this is exactly the single-invocation format above, byte for
// byte. The sender takes the K counters counter .. counter + K - 1 in one
// atomic step; the receiver, once every chunk verified, requires counter >=
// its state and sets the state to counter + K. Both ends know len (the
// receiver from the shape), hence K; neither reads K from the wire.
// What binds a chunk to its place (the STREAM construction's guarantees,
// Hoang, Reyhanitabar, Rogaway and Vizár, CRYPTO 2015, §7):
// - the nonce binds it to counter + i, so chunks of one message cannot be
//   swapped and chunks of messages whose counter ranges are disjoint cannot
//   be mixed;
// - the index i in AAD_i binds it to its position: without it, chunks
//   1 .. K-1 of one message followed by chunk 0 of the next one (whose first
//   counter is counter + K) would open under the header counter + 1, since
//   their nonces run on consecutively (tests: "window splice");
// - K in AAD_i marks where the message ends (STREAM's last-segment flag):
//   dropping or cutting chunks fails even where the shape would not tell.
// The AAD encoding stays injective: the rank fixes how many dims follow, so
// the 16-byte suffix is recognisable, and a K = 1 AAD is 16 bytes shorter
// than every chunk AAD of the same link, stream and shape.
#ifndef TF_PRIVPY_OPS_AEAD_AEAD_H_
#define TF_PRIVPY_OPS_AEAD_AEAD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/common/parallel.h"

namespace tf_privpy {
namespace aead {

constexpr size_t kKeyBytes = 16;
constexpr size_t kNonceBytes = 12;
constexpr size_t kCounterBytes = 8;
constexpr size_t kTagBytes = 16;
// The overhead of a single-chunk message (len <= kChunkBytes).
constexpr size_t kOverhead = kCounterBytes + kTagBytes;
// SP 800-38D §5.2.1.1: len(P) <= 2^39 - 256 bits for one invocation; kept as
// the bound of a whole message (65536 chunks at most).
constexpr uint64_t kMaxPlaintextBytes = (uint64_t{1} << 36) - 32;
// Plaintext bytes per chunk (a multiple of 16 and of 8, so chunks hold whole
// GCM blocks and int64 elements). 1 MiB, by measurement (tf.function loops,
// 2 cores): messages up to 1 MiB keep the single-invocation path. 256 KiB
// chunks were faster on 4 MiB messages (~6 GB/s against ~5) but made 1 MiB
// ones 20-30% slower than one invocation (the thread-pool hand-off outweighs
// four ~60 µs chunks); 4 MiB chunks leave 2-4 MiB messages on one core
// (~4 GB/s); from 16 MiB on all three reach ~8 GB/s. A GCM invocation's
// fixed cost (EVP context, key schedule, GHASH key) is 1.25 µs, 0.5% of a
// 1 MiB chunk; its tag adds 0.0015%.
constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
static_assert(kChunkBytes % 16 == 0, "chunks hold whole GCM blocks");

// The SP 800-108 Label of the channel-key derivation.
extern const char kKdfLabel[];
// The first field of every AAD (a version tag of this format).
extern const char kAadLabel[];

// A link is "<src>-><dst>": two different non-empty names of [A-Za-z0-9_].
bool ValidLink(const std::string& link, std::string* why);

// HMAC-SHA256 (RFC 2104 / FIPS 198-1) over SHA256(); out is 32 bytes.
void HmacSha256(const uint8_t* key, size_t key_len, const uint8_t* msg,
                size_t msg_len, uint8_t out[32]);

// K_link from the pair key (see the file comment).
void DeriveLinkKey(const uint8_t pair_key[kKeyBytes], const std::string& link,
                   uint8_t link_key[kKeyBytes]);

void MakeNonce(uint32_t stream, uint64_t counter, uint8_t nonce[kNonceBytes]);

std::string MakeAad(const std::string& link, uint32_t stream,
                    const int64_t* dims, int rank);

// K: the number of chunks of a len-byte plaintext, max(1, ceil(len / C)).
uint64_t ChunkCount(uint64_t len);

// The wire size of a len-byte plaintext: kCounterBytes + len + kTagBytes K.
// (len <= kMaxPlaintextBytes, so it cannot overflow.)
uint64_t MessageBytes(uint64_t len);

// The inverse of MessageBytes: the plaintext length whose message has
// msg_len bytes; false when no length has (msg_len < 24, or msg_len falls
// between the sizes of K - 1 and K chunks).
bool PlaintextBytes(uint64_t msg_len, uint64_t* len);

// AAD_i of chunk `index` of `count` (the aad itself when count == 1).
std::string ChunkAad(const std::string& aad, uint64_t index, uint64_t count);

// Which AES-GCM code runs. kAuto: our VAES/VPCLMULQDQ code (gcm_fast.h)
// where the CPU and OS support it and TF_PRIVPY_AEAD_EVP (a test hook, read
// at every call) is not set, else EVP. kEvp and kFast choose explicitly
// (tests and benchmarks compare them; kFast fails where unsupported). Both
// produce the same bytes: GCM is deterministic given key, IV, AAD and data.
enum class GcmImpl { kAuto, kEvp, kFast };

// Raw AES-128-GCM with a 96-bit IV and 128-bit tag; len may be 0 and the
// buffers may be null then. out may not overlap in. EVP path: one EVP context
// per call, the data in as few updates as its int lengths allow.
bool GcmSeal(const uint8_t key[kKeyBytes], const uint8_t iv[kNonceBytes],
             const uint8_t* aad, size_t aad_len, const uint8_t* in, size_t len,
             uint8_t* out, uint8_t tag[kTagBytes], std::string* error,
             GcmImpl impl = GcmImpl::kAuto);

enum class OpenStatus { kOk, kAuthFailed, kError };

// Decrypts into out and verifies the tag (constant time, inside EVP or
// gcm_fast.cc). On any status but kOk, out[0, len) is wiped: unauthenticated
// plaintext never leaves this function.
OpenStatus GcmOpen(const uint8_t key[kKeyBytes], const uint8_t iv[kNonceBytes],
                   const uint8_t* aad, size_t aad_len, const uint8_t* in,
                   size_t len, const uint8_t tag[kTagBytes], uint8_t* out,
                   std::string* error, GcmImpl impl = GcmImpl::kAuto);

// One wire message, with counters counter .. counter + ChunkCount(len) - 1
// (the caller has reserved them all): msg must hold MessageBytes(len) bytes.
// The chunks run on parallel_for; false (and *error) if any failed.
bool Seal(const uint8_t link_key[kKeyBytes], uint32_t stream, uint64_t counter,
          const std::string& aad, const uint8_t* in, size_t len, uint8_t* msg,
          std::string* error, const ParallelFor& parallel_for = SerialFor,
          GcmImpl impl = GcmImpl::kAuto);

// A piece of a plaintext that lies in several buffers (a message's tensors,
// read in place instead of first copied into one).
struct Segment {
  const uint8_t* data;
  size_t len;
};

// Seal of the concatenation of `segments` (the same bytes on the wire as
// Seal of one buffer holding them in order). A chunk inside one segment is
// read in place; one that spans segments is gathered into a buffer of at
// most kChunkBytes first (wiped afterwards).
bool SealSegments(const uint8_t link_key[kKeyBytes], uint32_t stream, uint64_t counter,
                  const std::string& aad, const std::vector<Segment>& segments,
                  uint8_t* msg, std::string* error,
                  const ParallelFor& parallel_for = SerialFor,
                  GcmImpl impl = GcmImpl::kAuto);

// Opens a wire message of msg_len bytes into out (PlaintextBytes(msg_len)
// bytes; a msg_len that no plaintext length has is kAuthFailed). Every
// chunk's tag is verified, on parallel_for, before kOk; on any other status
// all of out is wiped. *counter is the message's first counter (set even
// when authentication fails, for the error message; trust it only on kOk).
OpenStatus Open(const uint8_t link_key[kKeyBytes], uint32_t stream,
                const std::string& aad, const uint8_t* msg, size_t msg_len,
                uint8_t* out, uint64_t* counter, std::string* error,
                const ParallelFor& parallel_for = SerialFor,
                GcmImpl impl = GcmImpl::kAuto);

// Overwrites secrets so the compiler cannot drop the stores.
void Wipe(void* p, size_t len);

}  // namespace aead
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_AEAD_AEAD_H_
