// Standalone test of the channel AEAD (no TensorFlow; the system's OpenSSL
// libcrypto): HMAC-SHA256 against RFC 4231, AES-128-GCM against the GCM
// specification's test cases (McGrew & Viega, cases 1, 2 and 4, 96-bit IVs),
// the link-key derivation against a value computed with Python's hmac, the
// nonce and wire layout, round trips of many lengths, and rejection of every
// single-bit change of a message, of a wrong key, AAD or stream, with the
// output wiped. In-TF behaviour (BoringSSL) is tests/test_aead.py's job.
// Build/run: make -f ops/aead/Makefile.standalone test
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/common/test_check.h"
#include "ops/aead/aead.h"

namespace {

namespace aead = tf_privpy::aead;
using Bytes = std::vector<uint8_t>;

using tf_privpy::testing::Check;

Bytes Hex(const char* s) {
  Bytes v;
  for (; s[0] && s[1]; s += 2) {
    v.push_back(static_cast<uint8_t>(std::strtoul(std::string(s, 2).c_str(), nullptr, 16)));
  }
  return v;
}

Bytes Str(const char* s) { return Bytes(s, s + std::strlen(s)); }

bool AllZero(const Bytes& b) {
  for (uint8_t x : b)
    if (x != 0) return false;
  return true;
}

void TestHmac() {
  struct Case {
    Bytes key, msg;
    const char* mac;
  };
  const Case cases[] = {
      {Bytes(20, 0x0b), Str("Hi There"),
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {Str("Jefe"), Str("what do ya want for nothing?"),
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {Bytes(131, 0xaa), Str("Test Using Larger Than Block-Size Key - Hash Key First"),
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
  };
  int i = 1;
  for (const Case& c : cases) {
    uint8_t out[32];
    aead::HmacSha256(c.key.data(), c.key.size(), c.msg.data(), c.msg.size(), out);
    Check(Bytes(out, out + 32) == Hex(c.mac), "HMAC-SHA256 RFC 4231 case " + std::to_string(i++));
  }
}

void TestGcmVectors() {
  struct Case {
    const char *name, *key, *iv, *aad, *plain, *cipher, *tag;
  };
  const Case cases[] = {
      {"GCM test case 1", "00000000000000000000000000000000", "000000000000000000000000", "",
       "", "", "58e2fccefa7e3061367f1d57a4e7455a"},
      {"GCM test case 2", "00000000000000000000000000000000", "000000000000000000000000", "",
       "00000000000000000000000000000000", "0388dace60b6a392f328c2b971b2fe78",
       "ab6e47d42cec13bdf53a67b21257bddf"},
      {"GCM test case 4", "feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
       "feedfacedeadbeeffeedfacedeadbeefabaddad2",
       "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
       "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
       "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
       "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
       "5bc94fbc3221a5db94fae95ae7121a47"},
  };
  for (const Case& c : cases) {
    const Bytes key = Hex(c.key), iv = Hex(c.iv), aad = Hex(c.aad), p = Hex(c.plain);
    Bytes ct(p.size()), tag(16), back(p.size());
    std::string err;
    Check(aead::GcmSeal(key.data(), iv.data(), aad.data(), aad.size(), p.data(), p.size(),
                        ct.data(), tag.data(), &err) &&
              ct == Hex(c.cipher) && tag == Hex(c.tag),
          std::string(c.name) + " seal " + err);
    Check(aead::GcmOpen(key.data(), iv.data(), aad.data(), aad.size(), ct.data(), ct.size(),
                        tag.data(), back.data(), &err) == aead::OpenStatus::kOk &&
              back == p,
          std::string(c.name) + " open " + err);
  }
}

void TestKdfAndLayout() {
  Bytes pair(16);
  for (int i = 0; i < 16; ++i) pair[i] = static_cast<uint8_t>(i);
  uint8_t k[16];
  // hmac.new(bytes(range(16)), b"\0\0\0\1" + LABEL + b"\0" + link + (128).to_bytes(4, "big"),
  //          "sha256").digest()[:16]
  aead::DeriveLinkKey(pair.data(), "S1->T1", k);
  Check(Bytes(k, k + 16) == Hex("d8194092be79d6e111dbd1c2ba41abd3"), "KDF S1->T1");
  aead::DeriveLinkKey(pair.data(), "T1->S1", k);
  Check(Bytes(k, k + 16) == Hex("15324643d6d2581c801bdcb11b100bdd"), "KDF T1->S1");

  uint8_t nonce[12];
  aead::MakeNonce(0x01020304u, 0x05060708090a0b0cull, nonce);
  Check(Bytes(nonce, nonce + 12) == Hex("0102030405060708090a0b0c"), "nonce layout");

  const int64_t dims[] = {3, 4};
  const std::string aad = aead::MakeAad("S1->T1", 7, dims, 2);
  Bytes expect = Str("tf_privpy aead v1");
  expect.push_back(0);
  for (uint8_t b : Str("S1->T1")) expect.push_back(b);
  for (uint8_t b : Hex("00" "00000007" "00000002" "0000000000000003" "0000000000000004"))
    expect.push_back(b);
  Check(Bytes(aad.begin(), aad.end()) == expect, "AAD layout");

  std::string why;
  Check(aead::ValidLink("S1->T1", &why) && aead::ValidLink("client->S2", &why),
        "valid links");
  for (const char* bad : {"S1T1", "->T1", "S1->", "S1->S1", "S1->T1->T2", "S 1->T1", "S1-T1"})
    Check(!aead::ValidLink(bad, &why), std::string("rejects link ") + bad);
}

void TestShortMessage() {
  uint8_t key[16] = {0}, out[1];
  uint64_t c = 0;
  std::string err;
  const Bytes m(aead::kOverhead - 1);
  Check(aead::Open(key, 0, "", m.data(), m.size(), out, &c, &err) ==
            aead::OpenStatus::kAuthFailed,
        "message shorter than the overhead rejected");
}

void TestRoundTripsAndTamper() {
  std::mt19937_64 rng(42);
  uint8_t key[16], other[16];
  for (auto& b : key) b = static_cast<uint8_t>(rng());
  for (auto& b : other) b = static_cast<uint8_t>(rng());
  const std::string aad = "header";
  std::string err;
  for (size_t len : {0, 1, 15, 16, 17, 1000, 1 << 20}) {
    Bytes p(len), msg(len + aead::kOverhead), back(len, 0xee);
    for (auto& b : p) b = static_cast<uint8_t>(rng());
    Check(aead::Seal(key, 3, 1234567, aad, p.data(), len, msg.data(), &err),
          "seal len " + std::to_string(len));
    Check(Bytes(msg.begin(), msg.begin() + 8) == Hex("000000000012d687"),
          "wire counter big-endian");
    uint64_t counter = 0;
    Check(aead::Open(key, 3, aad, msg.data(), msg.size(), back.data(), &counter, &err) ==
                  aead::OpenStatus::kOk &&
              back == p && counter == 1234567,
          "round trip len " + std::to_string(len));
    // Different counter -> different ciphertext of the same plaintext.
    Bytes msg2(msg.size());
    aead::Seal(key, 3, 1234568, aad, p.data(), len, msg2.data(), &err);
    Check(!std::equal(msg.begin() + 8, msg.end(), msg2.begin() + 8), "fresh nonce, fresh bytes");
    auto rejected = [&](const uint8_t* k, uint32_t stream, const std::string& a,
                        const Bytes& m) {
      Bytes out(len, 0xee);
      uint64_t c = 0;
      return aead::Open(k, stream, a, m.data(), m.size(), out.data(), &c, &err) ==
                 aead::OpenStatus::kAuthFailed &&
             AllZero(out);
    };
    Check(rejected(other, 3, aad, msg), "wrong key rejected, len " + std::to_string(len));
    Check(rejected(key, 4, aad, msg), "wrong stream rejected, len " + std::to_string(len));
    Check(rejected(key, 3, "headex", msg), "wrong AAD rejected, len " + std::to_string(len));
    // Every bit of small messages; sampled bits of large ones.
    const size_t bits = msg.size() * 8;
    const size_t step = bits <= 8 * 1100 ? 1 : bits / 997;
    int flips = 0, caught = 0;
    for (size_t bit = 0; bit < bits; bit += step) {
      Bytes m = msg;
      m[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      ++flips;
      caught += rejected(key, 3, aad, m);
    }
    Check(flips == caught, "every bit flip rejected, len " + std::to_string(len) + ": " +
                               std::to_string(caught) + "/" + std::to_string(flips));
    if (len > 0) {  // a truncated message: the tag moves, nothing verifies
      Bytes cut(msg.begin(), msg.end() - 1), out(len - 1, 0xee);
      uint64_t c = 0;
      Check(aead::Open(key, 3, aad, cut.data(), cut.size(), out.data(), &c, &err) ==
                    aead::OpenStatus::kAuthFailed && AllZero(out),
            "truncated message rejected, len " + std::to_string(len));
    }
  }
}

}  // namespace

int main() {
  TestHmac();
  TestGcmVectors();
  TestKdfAndLayout();
  TestShortMessage();
  TestRoundTripsAndTamper();
  return tf_privpy::testing::Report();
}
