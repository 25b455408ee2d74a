// Standalone test of the key-exchange math (no TensorFlow; the system's
// OpenSSL 3 libcrypto, where tests/test_kex.py runs the same code against
// TF's BoringSSL): X25519 against RFC 7748 §5.2 and §6.1, HKDF-SHA256
// against RFC 5869 Appendix A (test cases 1-3), both sides of DerivePairKey,
// its authentication (a substituted ephemeral or a wrong static key gives
// different keys), small-order rejection and the identity key file parser.
// Build/run: make -f ops/kex/Makefile.standalone test
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ops/common/test_check.h"
#include "ops/kex/kex.h"

namespace {

namespace kex = tf_privpy::kex;
using kex::kKeyBytes;
using kex::kPairKeyBytes;

using tf_privpy::testing::Check;

std::vector<uint8_t> Hex(const char* s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; s[i] && s[i + 1]; i += 2) {
    unsigned v = 0;
    std::sscanf(s + i, "%2x", &v);
    out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

std::vector<uint8_t> Public(const std::vector<uint8_t>& priv) {
  std::vector<uint8_t> pub(kKeyBytes);
  kex::Error e;
  Check(kex::PublicFromPrivate(priv.data(), pub.data(), &e), "PublicFromPrivate: " + e.message);
  return pub;
}

void TestRfc7748() {
  // §6.1: Alice and Bob.
  const auto a = Hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const auto b = Hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  Check(Public(a) == Hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"),
        "RFC 7748 6.1 Alice's public key");
  Check(Public(b) == Hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"),
        "RFC 7748 6.1 Bob's public key");
  const auto k = Hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  std::vector<uint8_t> ka(kKeyBytes), kb(kKeyBytes);
  kex::Error e;
  Check(kex::Agree(a.data(), Public(b).data(), ka.data(), "Bob", &e) && ka == k,
        "RFC 7748 6.1 K at Alice " + e.message);
  Check(kex::Agree(b.data(), Public(a).data(), kb.data(), "Alice", &e) && kb == k,
        "RFC 7748 6.1 K at Bob " + e.message);
  // §5.2: scalars times arbitrary u-coordinates (clamping, masking of bit 255).
  const char* v[2][3] = {
      {"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
       "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
       "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
      {"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
       "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
       "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"}};
  for (int i = 0; i < 2; ++i) {
    std::vector<uint8_t> out(kKeyBytes);
    Check(kex::Agree(Hex(v[i][0]).data(), Hex(v[i][1]).data(), out.data(), "u", &e) &&
              out == Hex(v[i][2]),
          "RFC 7748 5.2 vector " + std::to_string(i + 1));
  }
}

void TestSmallOrder() {
  const auto a = Hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  // u = 0 and u = 1 are points of order 1 and 4: X25519 gives all zeros.
  for (int u = 0; u < 2; ++u) {
    std::vector<uint8_t> point(kKeyBytes, 0), out(kKeyBytes, 0xaa);
    point[0] = static_cast<uint8_t>(u);
    kex::Error e;
    const bool ok = kex::Agree(a.data(), point.data(), out.data(), "the test point", &e);
    Check(!ok && e.code == kex::Error::kInvalidArgument &&
              e.message.find("small-order") != std::string::npos &&
              out == std::vector<uint8_t>(kKeyBytes, 0),
          "small-order point u=" + std::to_string(u) + " rejected: " + e.message);
  }
}

void TestRfc5869() {
  struct Case {
    std::vector<uint8_t> ikm, salt, info;
    const char* okm;
  };
  std::vector<uint8_t> ikm2, salt2, info2;
  for (int i = 0; i < 80; ++i) {
    ikm2.push_back(static_cast<uint8_t>(i));
    salt2.push_back(static_cast<uint8_t>(0x60 + i));
    info2.push_back(static_cast<uint8_t>(0xb0 + i));
  }
  const std::vector<uint8_t> ikm(22, 0x0b);
  const Case cases[3] = {
      {ikm, Hex("000102030405060708090a0b0c"), Hex("f0f1f2f3f4f5f6f7f8f9"),
       "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"},
      {ikm2, salt2, info2,
       "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c6"
       "5e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"},
      {ikm, {}, {},
       "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"},
  };
  for (int i = 0; i < 3; ++i) {
    const auto want = Hex(cases[i].okm);
    std::vector<uint8_t> okm(want.size());
    kex::Error e;
    Check(kex::HkdfSha256(cases[i].salt.data(), cases[i].salt.size(), cases[i].ikm.data(),
                          cases[i].ikm.size(), cases[i].info.data(), cases[i].info.size(),
                          okm.data(), okm.size(), &e) &&
              okm == want,
          "RFC 5869 A." + std::to_string(i + 1) + " " + e.message);
  }
  uint8_t big[8161];
  kex::Error e;
  Check(!kex::HkdfSha256(nullptr, 0, ikm.data(), ikm.size(), nullptr, 0, big, sizeof(big), &e),
        "HKDF L > 255 HashLen rejected");
}

struct Party {
  std::vector<uint8_t> s, S, e, E;
  Party() : s(kKeyBytes), S(kKeyBytes), e(kKeyBytes), E(kKeyBytes) {
    kex::Error err;
    Check(kex::GenerateKeypair(s.data(), S.data(), &err) &&
              kex::GenerateKeypair(e.data(), E.data(), &err),
          "GenerateKeypair " + err.message);
  }
};

std::vector<uint8_t> Derive(const Party& own, const std::vector<uint8_t>& peer_S,
                            const std::vector<uint8_t>& peer_E, const std::string& own_role,
                            const std::string& peer_role, kex::Error* e = nullptr) {
  std::vector<uint8_t> key(kPairKeyBytes, 0);
  kex::Error local;
  if (!kex::DerivePairKey(own.s.data(), own.e.data(), peer_S.data(), peer_E.data(), own_role,
                          peer_role, "", key.data(), e ? e : &local))
    return {};
  return key;
}

void TestDerive() {
  Party a, b, m;  // S1, S2 and a man in the middle
  const auto ka = Derive(a, b.S, b.E, "S1", "S2"), kb = Derive(b, a.S, a.E, "S2", "S1");
  Check(!ka.empty() && ka == kb, "both sides derive the same key");
  Party a2, b2;
  Check(Derive(a2, b2.S, b2.E, "S1", "S2") != ka, "fresh ephemerals give a fresh key");
  Check(Derive(a, b.S, b.E, "S1", "T1") != ka, "another role pair gives another key");
  // The MITM replaces S2's ephemeral by its own: the keys differ.
  Check(Derive(a, b.S, m.E, "S1", "S2") != Derive(b, a.S, a.E, "S2", "S1"),
        "substituted ephemeral -> different keys");
  // ... and posing as S2 with its own static key it does not get S1's key.
  Check(Derive(m, a.S, a.E, "S2", "S1") != Derive(a, b.S, m.E, "S1", "S2"),
        "MITM does not learn S1's key");
  // A wrong static key of the peer in the cluster file.
  Check(Derive(a, m.S, b.E, "S1", "S2") != Derive(b, a.S, a.E, "S2", "S1"),
        "wrong static key -> different keys");
  kex::Error e;
  Check(Derive(a, b.S, b.E, "S1", "S1", &e).empty() &&
            e.code == kex::Error::kInvalidArgument,
        "equal roles rejected");
  Check(Derive(a, a.S, b.E, "S1", "S2", &e).empty() &&
            e.message.find("equals our own") != std::string::npos,
        "own static key as the peer's rejected");
  const std::vector<uint8_t> zero(kKeyBytes, 0);
  Check(Derive(a, b.S, zero, "S1", "S2", &e).empty() &&
            e.message.find("small-order") != std::string::npos,
        "all-zero ephemeral rejected: " + e.message);
  Check(Derive(a, zero, b.E, "S1", "S2", &e).empty() &&
            e.message.find("small-order") != std::string::npos,
        "all-zero static key rejected: " + e.message);
}

void TestKeyFile() {
  const std::string hex = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a";
  const std::string text = "-----BEGIN TF_PRIVPY X25519 PRIVATE KEY-----\r\n" + hex +
                           "\n-----END TF_PRIVPY X25519 PRIVATE KEY-----\n";
  uint8_t key[kKeyBytes];
  kex::Error e;
  Check(kex::ParsePrivateKey(text.data(), text.size(), key, &e) &&
            std::vector<uint8_t>(key, key + kKeyBytes) == Hex(hex.c_str()),
        "parse identity key " + e.message);
  const std::string bad = text.substr(0, 50) + "zz" + text.substr(52);
  Check(!kex::ParsePrivateKey(bad.data(), bad.size(), key, &e), "non-hex rejected");
  char dir[] = "/tmp/kex_test_XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    Check(false, "mkdtemp");
    return;
  }
  const std::string path = std::string(dir) + "/id.key";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  chmod(path.c_str(), 0600);
  Check(kex::ReadPrivateKeyFile(path, key, &e), "0600 key file read " + e.message);
  chmod(path.c_str(), 0644);
  Check(!kex::ReadPrivateKeyFile(path, key, &e) &&
            e.code == kex::Error::kPermissionDenied &&
            e.message.find("0644") != std::string::npos,
        "0644 key file rejected: " + e.message);
  const std::string link = std::string(dir) + "/link.key";
  chmod(path.c_str(), 0600);
  Check(symlink(path.c_str(), link.c_str()) == 0 && !kex::ReadPrivateKeyFile(link, key, &e),
        "symlinked key file rejected");
  unlink(link.c_str());
  unlink(path.c_str());
  rmdir(dir);
}

}  // namespace

int main() {
  TestRfc7748();
  TestSmallOrder();
  TestRfc5869();
  TestDerive();
  TestKeyFile();
  return tf_privpy::testing::Report();
}
