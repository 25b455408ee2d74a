// Authenticated encryption of the messages between servers (DESIGN §2
// "Channel", §11): AES-128-GCM (SP 800-38D) through OpenSSL's EVP interface,
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
// Wire format of one message (bytes):
//   [counter]_64 big-endian (the invocation field) || ciphertext || tag (16)
// i.e. kOverhead = 24 bytes more than the plaintext (RFC 5116 §5.1's layout
// with an explicit nonce prefix, as in TLS 1.2 GCM, RFC 5288 §3).
//
// AAD (RFC 5116 §2.1), rebuilt by the receiver from what it expects:
//   kAadLabel || 0x00 || link || 0x00 || [stream]_32 || [rank]_32 || [dim]_64...
// so a message for another link, stream or tensor shape fails authentication.
#ifndef TF_PRIVPY_OPS_AEAD_AEAD_H_
#define TF_PRIVPY_OPS_AEAD_AEAD_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tf_privpy {
namespace aead {

constexpr size_t kKeyBytes = 16;
constexpr size_t kNonceBytes = 12;
constexpr size_t kCounterBytes = 8;
constexpr size_t kTagBytes = 16;
constexpr size_t kOverhead = kCounterBytes + kTagBytes;
// SP 800-38D §5.2.1.1: len(P) <= 2^39 - 256 bits.
constexpr uint64_t kMaxPlaintextBytes = (uint64_t{1} << 36) - 32;

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

// Raw AES-128-GCM with a 96-bit IV and 128-bit tag; len may be 0 and the
// buffers may be null then. out may not overlap in. One EVP context per call;
// the data goes through EVP in as few updates as its int lengths allow.
bool GcmSeal(const uint8_t key[kKeyBytes], const uint8_t iv[kNonceBytes],
             const uint8_t* aad, size_t aad_len, const uint8_t* in, size_t len,
             uint8_t* out, uint8_t tag[kTagBytes], std::string* error);

enum class OpenStatus { kOk, kAuthFailed, kError };

// Decrypts into out and verifies the tag (constant time, inside EVP). On any
// status but kOk, out[0, len) is wiped: unauthenticated plaintext never
// leaves this function.
OpenStatus GcmOpen(const uint8_t key[kKeyBytes], const uint8_t iv[kNonceBytes],
                   const uint8_t* aad, size_t aad_len, const uint8_t* in,
                   size_t len, const uint8_t tag[kTagBytes], uint8_t* out,
                   std::string* error);

// One wire message: msg must hold kOverhead + len bytes.
bool Seal(const uint8_t link_key[kKeyBytes], uint32_t stream, uint64_t counter,
          const std::string& aad, const uint8_t* in, size_t len, uint8_t* msg,
          std::string* error);

// Opens a wire message of msg_len >= kOverhead bytes into out
// (msg_len - kOverhead bytes); *counter is the message's counter (set even
// when authentication fails, for the error message; trust it only on kOk).
OpenStatus Open(const uint8_t link_key[kKeyBytes], uint32_t stream,
                const std::string& aad, const uint8_t* msg, size_t msg_len,
                uint8_t* out, uint64_t* counter, std::string* error);

// Overwrites secrets so the compiler cannot drop the stores.
void Wipe(void* p, size_t len);

}  // namespace aead
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_AEAD_AEAD_H_
