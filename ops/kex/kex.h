// Authenticated pairwise key exchange between two servers (issue 11): X25519
// (RFC 7748) and HKDF-SHA256 (RFC 5869), in a Noise-KK-like pattern. TF-free;
// the op kernels are in kex_kernels.cc.
//
// Each server has a long-term identity key pair (s, S = X25519(s, 9)); every
// server knows every other server's S from the cluster file. For one exchange
// each side draws a fresh ephemeral pair (e, E) from the OS CSPRNG and sends
// E to the peer. The lexicographically smaller role name is the initiator I,
// the other the responder R, so both sides order the terms the same way:
//
//   ikm  = DH(e_I, E_R) || DH(s_I, E_R) || DH(e_I, S_R) || DH(s_I, S_R)
//          (Noise KK's ee, se, es, ss; each side computes each term from its
//           own private key and the peer's public key)
//   salt = kSalt (the protocol label)
//   info = lp(context) || lp(role_I) || lp(role_R) || S_I || S_R || E_I || E_R
//          lp(x) = 2-byte big-endian length of x || x
//   key  = HKDF-SHA256(salt, ikm, info, 16 bytes)
//
// Why these terms: ee gives forward secrecy; es and se bind the key to the
// long-term keys of R and I (a man in the middle who substitutes its own E
// knows neither e_I nor s_R, so it cannot compute DH(e_I, S_R), and symmetric
// for se); ss keeps the key secret even if both ephemerals leak (a weak RNG),
// as long as the identity keys do not. The transcript in info binds the key
// to who talked to whom with which keys (no unknown-key-share or reflection).
//
// Only functions that OpenSSL 3 and BoringSSL share with identical signatures
// are called: inside a TF process they bind to TF's bundled BoringSSL, in the
// standalone test to the system's libcrypto. See kex.cc for the list.
#ifndef TF_PRIVPY_OPS_KEX_KEX_H_
#define TF_PRIVPY_OPS_KEX_KEX_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace tf_privpy {
namespace kex {

constexpr size_t kKeyBytes = 32;      // X25519 private / public / shared
constexpr size_t kPairKeyBytes = 16;  // the 128-bit PRG key (int64[2])
constexpr size_t kMaxRoleBytes = 255;
constexpr size_t kMaxContextBytes = 1024;
constexpr size_t kMaxHkdfBytes = 255 * 32;  // RFC 5869 §2.3: L <= 255 HashLen

// The HKDF salt: names the protocol and its version, so keys derived by
// another protocol (or a later version of this one) from the same DH values
// differ (RFC 5869 §3.1).
constexpr char kSalt[] = "tf_privpy/kex/v1 X25519 Noise-KK-like HKDF-SHA256";

// What went wrong, so kernels can map it to a TF error code.
struct Error {
  enum Code { kNone, kInvalidArgument, kUnavailable, kInternal, kPermissionDenied,
              kNotFound };
  Code code = kNone;
  std::string message;
  bool Set(Code c, std::string m) {
    code = c;
    message = std::move(m);
    return false;
  }
};

// A fresh key pair; the private key is 32 bytes from the OS CSPRNG
// (getrandom; no weaker fallback). X25519 clamps on use (RFC 7748 §5).
bool GenerateKeypair(uint8_t private_key[kKeyBytes], uint8_t public_key[kKeyBytes],
                     Error* error);

// public = X25519(private, 9).
bool PublicFromPrivate(const uint8_t private_key[kKeyBytes],
                       uint8_t public_key[kKeyBytes], Error* error);

// shared = X25519(private, peer_public). Fails (kInvalidArgument) on an
// all-zero result: peer_public is a small-order point (RFC 7748 §6.1), which
// would make the shared value independent of our private key. `what` names
// the peer key in error messages.
bool Agree(const uint8_t private_key[kKeyBytes], const uint8_t peer_public[kKeyBytes],
           uint8_t shared[kKeyBytes], const char* what, Error* error);

// HKDF-SHA256 (RFC 5869): okm = Expand(Extract(salt, ikm), info, okm_len).
bool HkdfSha256(const uint8_t* salt, size_t salt_len, const uint8_t* ikm, size_t ikm_len,
                const uint8_t* info, size_t info_len, uint8_t* okm, size_t okm_len,
                Error* error);

// The pair key of the formula above, computed by the side named own_role.
// Both sides get the same key iff each holds the private keys matching the
// public keys the other one used.
bool DerivePairKey(const uint8_t own_static_private[kKeyBytes],
                   const uint8_t own_ephemeral_private[kKeyBytes],
                   const uint8_t peer_static_public[kKeyBytes],
                   const uint8_t peer_ephemeral_public[kKeyBytes],
                   const std::string& own_role, const std::string& peer_role,
                   const std::string& context, uint8_t key[kPairKeyBytes], Error* error);

// Identity key files: the private key as 64 hex digits between
//   -----BEGIN TF_PRIVPY X25519 PRIVATE KEY-----
//   -----END TF_PRIVPY X25519 PRIVATE KEY-----
// (protocols/mpc/identity.py writes them). Reading refuses anything but a
// regular file without group/other permissions (like ssh), and symlinks.
bool ParsePrivateKey(const char* text, size_t len, uint8_t private_key[kKeyBytes],
                     Error* error);
bool ReadPrivateKeyFile(const std::string& path, uint8_t private_key[kKeyBytes],
                        Error* error);

}  // namespace kex
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_KEX_KEX_H_
