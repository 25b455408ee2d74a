#include "ops/kex/kex.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>

#include "ops/prg/aes_ctr.h"  // OsRandomBytes

// Crypto library calls, all with the same signature and meaning in OpenSSL 3
// and BoringSSL (TF 2.14's libtensorflow_framework.so.2 exports each of them:
// `nm -D --defined-only`; tests/test_kex.py runs RFC vectors through the ops
// inside TF, and kex_test.cc against the system's OpenSSL):
//   OBJ_sn2nid; EVP_PKEY_new_raw_private_key, EVP_PKEY_new_raw_public_key,
//   EVP_PKEY_get_raw_public_key, EVP_PKEY_free; EVP_PKEY_CTX_new,
//   EVP_PKEY_CTX_free, EVP_PKEY_derive_init, EVP_PKEY_derive_set_peer,
//   EVP_PKEY_derive; EVP_MD_CTX_new, EVP_MD_CTX_free, EVP_DigestInit_ex,
//   EVP_DigestUpdate, EVP_DigestFinal_ex, EVP_sha256; OPENSSL_cleanse;
//   ERR_get_error, ERR_error_string_n, ERR_clear_error.
// Deliberately not used: HMAC(), HMAC_Init_ex (key length int in OpenSSL,
// size_t in BoringSSL: a different ABI for the same header), the HKDF APIs
// (different in the two), and the EVP_PKEY_X25519 constant (see X25519Nid).

namespace tf_privpy {
namespace kex {

namespace {

constexpr size_t kSha256Bytes = 32;
constexpr size_t kSha256Block = 64;
constexpr size_t kMaxKeyFileBytes = 4096;
constexpr char kBegin[] = "-----BEGIN TF_PRIVPY X25519 PRIVATE KEY-----";
constexpr char kEnd[] = "-----END TF_PRIVPY X25519 PRIVATE KEY-----";

std::string LibError(const char* what) {
  // ERR_get_error returns unsigned long in OpenSSL and uint32_t in BoringSSL;
  // the packed code fits 32 bits in both, so only those bits are read.
  const uint32_t code = static_cast<uint32_t>(ERR_get_error());
  ERR_clear_error();
  char buf[256] = "no library error code";
  if (code != 0) ERR_error_string_n(code, buf, sizeof(buf));
  return std::string(what) + " failed (" + buf + ")";
}

// OpenSSL's NID_X25519 (= EVP_PKEY_X25519) is 1034, BoringSSL's is 948: the
// constant from the headers we compile against would name no algorithm
// inside TF. The short name "X25519" is the same in both.
int X25519Nid() {
  static const int nid = OBJ_sn2nid("X25519");
  return nid;
}

struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }  // wipes private keys
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
struct PkeyCtxDeleter {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }  // wipes the state
};

bool IsZero(const uint8_t* p, size_t n) {
  uint8_t acc = 0;  // constant time: no early exit on secret bytes
  for (size_t i = 0; i < n; ++i) acc |= p[i];
  return acc == 0;
}

bool LoadKey(const uint8_t key[kKeyBytes], bool is_private, Pkey* out, Error* error) {
  const int nid = X25519Nid();
  if (nid == NID_undef)
    return error->Set(Error::kInternal,
                      "the crypto library does not know X25519 (OBJ_sn2nid failed)");
  out->reset(is_private ? EVP_PKEY_new_raw_private_key(nid, nullptr, key, kKeyBytes)
                        : EVP_PKEY_new_raw_public_key(nid, nullptr, key, kKeyBytes));
  if (!*out)
    return error->Set(Error::kInternal,
                      LibError(is_private ? "EVP_PKEY_new_raw_private_key(X25519)"
                                          : "EVP_PKEY_new_raw_public_key(X25519)"));
  return true;
}

struct Bytes {
  const uint8_t* data;
  size_t size;
};

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    ok_ = ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  }
  void Update(Bytes b) {
    if (ok_ && b.size > 0) ok_ = EVP_DigestUpdate(ctx_.get(), b.data, b.size) == 1;
  }
  bool Final(uint8_t out[kSha256Bytes]) {
    unsigned int len = 0;
    if (ok_) ok_ = EVP_DigestFinal_ex(ctx_.get(), out, &len) == 1 && len == kSha256Bytes;
    return ok_;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx_;
  bool ok_ = false;
};

// HMAC-SHA256 (RFC 2104) of the concatenation of `data`, on the digest API
// that OpenSSL and BoringSSL share (their HMAC() ABIs differ, see the top).
bool HmacSha256(Bytes key, std::initializer_list<Bytes> data, uint8_t out[kSha256Bytes]) {
  uint8_t k0[kSha256Block] = {0};
  uint8_t pad[kSha256Block];
  uint8_t inner[kSha256Bytes];
  bool ok = true;
  if (key.size > kSha256Block) {  // long keys are hashed first
    Sha256 h;
    h.Update(key);
    ok = h.Final(k0);
  } else if (key.size > 0) {
    memcpy(k0, key.data, key.size);
  }
  for (size_t i = 0; i < kSha256Block; ++i) pad[i] = k0[i] ^ 0x36;
  Sha256 hi;
  hi.Update({pad, kSha256Block});
  for (const Bytes& b : data) hi.Update(b);
  ok = hi.Final(inner) && ok;
  for (size_t i = 0; i < kSha256Block; ++i) pad[i] = k0[i] ^ 0x5c;
  Sha256 ho;
  ho.Update({pad, kSha256Block});
  ho.Update({inner, kSha256Bytes});
  ok = ho.Final(out) && ok;
  OPENSSL_cleanse(k0, sizeof(k0));
  OPENSSL_cleanse(pad, sizeof(pad));
  OPENSSL_cleanse(inner, sizeof(inner));
  return ok;
}

// lp(x) of the transcript: 2-byte big-endian length, then x.
void AppendLp(std::string* out, const std::string& x) {
  out->push_back(static_cast<char>(x.size() >> 8));
  out->push_back(static_cast<char>(x.size() & 0xff));
  out->append(x);
}

void Append(std::string* out, const uint8_t* p, size_t n) {
  out->append(reinterpret_cast<const char*>(p), n);
}

// [b, e) with surrounding blanks (and a CR of CRLF files) removed.
void Trim(const char** b, const char** e) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (*b < *e && blank(**b)) ++*b;
  while (*e > *b && blank((*e)[-1])) --*e;
}

bool Equals(const char* b, const char* e, const char* s) {
  return static_cast<size_t>(e - b) == strlen(s) && memcmp(b, s, e - b) == 0;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool GenerateKeypair(uint8_t private_key[kKeyBytes], uint8_t public_key[kKeyBytes],
                     Error* error) {
  // RFC 7748 §5/§7: 32 uniform bytes are a private key (X25519 clamps).
  std::string os_error;
  if (!OsRandomBytes(private_key, kKeyBytes, &os_error)) {
    OPENSSL_cleanse(private_key, kKeyBytes);
    return error->Set(Error::kUnavailable, os_error);
  }
  return PublicFromPrivate(private_key, public_key, error);
}

bool PublicFromPrivate(const uint8_t private_key[kKeyBytes],
                       uint8_t public_key[kKeyBytes], Error* error) {
  Pkey k;
  if (!LoadKey(private_key, true, &k, error)) return false;
  size_t len = kKeyBytes;
  if (EVP_PKEY_get_raw_public_key(k.get(), public_key, &len) != 1 || len != kKeyBytes)
    return error->Set(Error::kInternal, LibError("EVP_PKEY_get_raw_public_key"));
  return true;
}

bool Agree(const uint8_t private_key[kKeyBytes], const uint8_t peer_public[kKeyBytes],
           uint8_t shared[kKeyBytes], const char* what, Error* error) {
  Pkey k, peer;
  if (!LoadKey(private_key, true, &k, error) || !LoadKey(peer_public, false, &peer, error))
    return false;
  std::unique_ptr<EVP_PKEY_CTX, PkeyCtxDeleter> ctx(EVP_PKEY_CTX_new(k.get(), nullptr));
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1)
    return error->Set(Error::kInternal, LibError("EVP_PKEY_derive_init(X25519)"));
  size_t len = kKeyBytes;
  // Both libraries already refuse an all-zero X25519 output (set_peer or
  // derive fails); the explicit check keeps that property whatever the
  // library does. A small-order peer point makes the result independent of
  // our private key (RFC 7748 §6.1, §7), so the "secret" would be public.
  const bool ok = EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) == 1 &&
                  EVP_PKEY_derive(ctx.get(), shared, &len) == 1 && len == kKeyBytes;
  const std::string lib = ok ? "" : LibError("EVP_PKEY_derive");
  if (!ok || IsZero(shared, kKeyBytes)) {
    OPENSSL_cleanse(shared, kKeyBytes);
    std::string msg = std::string("X25519 with ") + what +
                      " gives no shared secret: it is a small-order point (the result "
                      "would be all zeros, RFC 7748 §6.1); refusing it";
    if (!ok) msg += " [" + lib + "]";
    return error->Set(Error::kInvalidArgument, msg);
  }
  return true;
}

bool HkdfSha256(const uint8_t* salt, size_t salt_len, const uint8_t* ikm, size_t ikm_len,
                const uint8_t* info, size_t info_len, uint8_t* okm, size_t okm_len,
                Error* error) {
  if (okm_len == 0 || okm_len > kMaxHkdfBytes)
    return error->Set(Error::kInvalidArgument,
                      "HKDF-SHA256 output length must be in [1, 8160] (RFC 5869 §2.3), got " +
                          std::to_string(okm_len));
  // Extract (RFC 5869 §2.2): PRK = HMAC(salt, IKM). An empty salt is
  // HashLen zeros, which HMAC's zero padding of the key already gives.
  uint8_t prk[kSha256Bytes], t[kSha256Bytes], next[kSha256Bytes];
  bool ok = HmacSha256({salt, salt_len}, {{ikm, ikm_len}}, prk);
  // Expand (§2.3): T(i) = HMAC(PRK, T(i-1) || info || i), T(0) empty.
  size_t t_len = 0, done = 0;
  for (int i = 1; ok && done < okm_len; ++i) {
    const uint8_t counter = static_cast<uint8_t>(i);
    ok = HmacSha256({prk, kSha256Bytes}, {{t, t_len}, {info, info_len}, {&counter, 1}},
                    next);
    memcpy(t, next, kSha256Bytes);
    t_len = kSha256Bytes;
    const size_t n = std::min(kSha256Bytes, okm_len - done);
    memcpy(okm + done, t, n);
    done += n;
  }
  OPENSSL_cleanse(prk, sizeof(prk));
  OPENSSL_cleanse(t, sizeof(t));
  OPENSSL_cleanse(next, sizeof(next));
  if (!ok) {
    OPENSSL_cleanse(okm, okm_len);
    return error->Set(Error::kInternal, LibError("SHA-256 (EVP_Digest*)"));
  }
  return true;
}

bool DerivePairKey(const uint8_t own_static_private[kKeyBytes],
                   const uint8_t own_ephemeral_private[kKeyBytes],
                   const uint8_t peer_static_public[kKeyBytes],
                   const uint8_t peer_ephemeral_public[kKeyBytes],
                   const std::string& own_role, const std::string& peer_role,
                   const std::string& context, uint8_t key[kPairKeyBytes], Error* error) {
  using E = Error;
  if (own_role.empty() || peer_role.empty() || own_role.size() > kMaxRoleBytes ||
      peer_role.size() > kMaxRoleBytes)
    return error->Set(E::kInvalidArgument, "role names must have 1 to 255 bytes");
  // Equal roles would leave the initiator undefined and invite reflection.
  if (own_role == peer_role)
    return error->Set(E::kInvalidArgument, "own_role and peer_role are both '" + own_role +
                                               "': a pair key needs two different roles");
  if (context.size() > kMaxContextBytes)
    return error->Set(E::kInvalidArgument, "context must have at most 1024 bytes");
  // An all-zero private key is an uninitialized or wiped buffer, not a key.
  if (IsZero(own_static_private, kKeyBytes) || IsZero(own_ephemeral_private, kKeyBytes))
    return error->Set(E::kInvalidArgument,
                      "a private key is all zeros (uninitialized or already wiped)");
  uint8_t own_static_public[kKeyBytes], own_ephemeral_public[kKeyBytes];
  if (!PublicFromPrivate(own_static_private, own_static_public, error) ||
      !PublicFromPrivate(own_ephemeral_private, own_ephemeral_public, error))
    return false;
  // Our own public key coming back as the peer's is a misconfigured cluster
  // file or a reflection by a man in the middle.
  if (memcmp(own_static_public, peer_static_public, kKeyBytes) == 0)
    return error->Set(E::kInvalidArgument,
                      "the peer's static public key '" + peer_role + "' equals our own ('" +
                          own_role + "'): check the cluster file");
  if (memcmp(own_ephemeral_public, peer_ephemeral_public, kKeyBytes) == 0)
    return error->Set(E::kInvalidArgument,
                      "the peer's ephemeral public key equals our own (reflected)");

  // DH terms in the initiator's order (Noise KK: ee, se, es, ss), each
  // computed from our private key and the peer's public key.
  const bool initiator = own_role < peer_role;
  uint8_t ikm[4 * kKeyBytes];
  const uint8_t* se_private = initiator ? own_static_private : own_ephemeral_private;
  const uint8_t* se_public = initiator ? peer_ephemeral_public : peer_static_public;
  const uint8_t* es_private = initiator ? own_ephemeral_private : own_static_private;
  const uint8_t* es_public = initiator ? peer_static_public : peer_ephemeral_public;
  const bool ok =
      Agree(own_ephemeral_private, peer_ephemeral_public, ikm, "the peer's ephemeral key",
            error) &&
      Agree(se_private, se_public, ikm + kKeyBytes,
            initiator ? "the peer's ephemeral key" : "the peer's static key", error) &&
      Agree(es_private, es_public, ikm + 2 * kKeyBytes,
            initiator ? "the peer's static key" : "the peer's ephemeral key", error) &&
      Agree(own_static_private, peer_static_public, ikm + 3 * kKeyBytes,
            "the peer's static key", error);
  if (!ok) {
    OPENSSL_cleanse(ikm, sizeof(ikm));
    return false;
  }

  // The transcript: who (roles, by initiator order) with which keys.
  const std::string& role_i = initiator ? own_role : peer_role;
  const std::string& role_r = initiator ? peer_role : own_role;
  std::string info;
  AppendLp(&info, context);
  AppendLp(&info, role_i);
  AppendLp(&info, role_r);
  Append(&info, initiator ? own_static_public : peer_static_public, kKeyBytes);
  Append(&info, initiator ? peer_static_public : own_static_public, kKeyBytes);
  Append(&info, initiator ? own_ephemeral_public : peer_ephemeral_public, kKeyBytes);
  Append(&info, initiator ? peer_ephemeral_public : own_ephemeral_public, kKeyBytes);

  const bool derived =
      HkdfSha256(reinterpret_cast<const uint8_t*>(kSalt), sizeof(kSalt) - 1, ikm,
                 sizeof(ikm), reinterpret_cast<const uint8_t*>(info.data()), info.size(),
                 key, kPairKeyBytes, error);
  OPENSSL_cleanse(ikm, sizeof(ikm));
  return derived;
}

bool ParsePrivateKey(const char* text, size_t len, uint8_t private_key[kKeyBytes],
                     Error* error) {
  const char* const bad =
      "not a tf_privpy identity key: expected the lines '-----BEGIN TF_PRIVPY X25519 "
      "PRIVATE KEY-----', 64 hex digits, '-----END TF_PRIVPY X25519 PRIVATE KEY-----'";
  // Non-empty lines, as pointer ranges into `text` (no copies of the secret).
  const char* lines[3][2];
  int count = 0;
  const char* p = text;
  const char* const end = text + len;
  while (p < end) {
    const char* nl = static_cast<const char*>(memchr(p, '\n', end - p));
    const char* e = nl ? nl : end;
    const char* b = p;
    Trim(&b, &e);
    if (b < e) {
      if (count == 3) return error->Set(Error::kInvalidArgument, bad);
      lines[count][0] = b;
      lines[count][1] = e;
      ++count;
    }
    p = nl ? nl + 1 : end;
  }
  if (count != 3 || !Equals(lines[0][0], lines[0][1], kBegin) ||
      !Equals(lines[2][0], lines[2][1], kEnd) ||
      lines[1][1] - lines[1][0] != static_cast<std::ptrdiff_t>(2 * kKeyBytes))
    return error->Set(Error::kInvalidArgument, bad);
  int invalid = 0;
  for (size_t i = 0; i < kKeyBytes; ++i) {
    const int hi = HexValue(lines[1][0][2 * i]), lo = HexValue(lines[1][0][2 * i + 1]);
    invalid |= (hi | lo) < 0;
    private_key[i] = static_cast<uint8_t>((hi << 4) | lo);
  }
  if (invalid) {
    OPENSSL_cleanse(private_key, kKeyBytes);
    return error->Set(Error::kInvalidArgument, bad);
  }
  return true;
}

bool ReadPrivateKeyFile(const std::string& path, uint8_t private_key[kKeyBytes],
                        Error* error) {
  // O_NOFOLLOW: the mode checked below is that of the file read, not of a link.
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT)
      return error->Set(Error::kNotFound, "identity key file " + path + " does not exist");
    if (err == ELOOP)
      return error->Set(Error::kPermissionDenied,
                        "identity key file " + path + " is a symbolic link; refusing it");
    return error->Set(Error::kPermissionDenied,
                      "cannot open identity key file " + path + ": " + strerror(err));
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  if (!ok || !S_ISREG(st.st_mode)) {
    close(fd);
    return error->Set(Error::kInvalidArgument,
                      "identity key file " + path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return error->Set(Error::kPermissionDenied,
                      "identity key file " + path + " has mode " + mode +
                          ": a private key must not be accessible to group or others; "
                          "run `chmod 600 " + path + "`");
  }
  char buf[kMaxKeyFileBytes + 1];
  size_t got = 0;
  while (got <= kMaxKeyFileBytes) {
    const ssize_t r = read(fd, buf + got, sizeof(buf) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ok = r == 0;
      break;
    }
    got += static_cast<size_t>(r);
  }
  close(fd);
  if (!ok || got > kMaxKeyFileBytes) {
    OPENSSL_cleanse(buf, sizeof(buf));
    return error->Set(Error::kInvalidArgument,
                      "cannot read identity key file " + path +
                          (ok ? " (larger than 4 KiB)" : ""));
  }
  ok = ParsePrivateKey(buf, got, private_key, error);
  OPENSSL_cleanse(buf, sizeof(buf));
  if (!ok) error->message = "identity key file " + path + ": " + error->message;
  return ok;
}

}  // namespace kex
}  // namespace tf_privpy
