// Standalone test of the VAES/VPCLMULQDQ AES-128-GCM (gcm_fast.h) against
// known answers and against the EVP path (here the system's OpenSSL):
// - known answers: the AES-128 test cases with 96-bit IVs of the GCM
//   specification (D. McGrew and J. Viega, "The Galois/Counter Mode of
//   Operation (GCM)", 2005, Appendix B, test cases 1-4; cases 5 and 6 use
//   other IV lengths, which the channel never does);
// - byte-identical ciphertext and tag to EVP for the lengths around every
//   branch of the code (0, 1, 15, 16, 17, 63, 64, 255, 256, 257, 4095, 1 MiB,
//   1 MiB + 7), AAD lengths 0 .. 300, and random lengths, keys and IVs;
// - the chunked wire format (Seal/Open) identical under both, serial and
//   threaded;
// - open: the fast path accepts what EVP sealed, and rejects (kAuthFailed,
//   output wiped) a flipped ciphertext, tag or AAD bit, as EVP does.
// Run on the ZMM (AVX-512) code and the YMM (AVX2) code where the CPU has
// both, on the one it has otherwise; skipped, with a line saying so, where
// the CPU lacks VAES/VPCLMULQDQ.
// Build/run: make -f ops/aead/Makefile.standalone test
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/aead/aead.h"
#include "ops/aead/gcm_fast.h"
#include "ops/common/test_check.h"

namespace {

namespace aead = tf_privpy::aead;
using aead::GcmImpl;
using Bytes = std::vector<uint8_t>;
using tf_privpy::testing::Check;

Bytes Hex(const char* s) {
  Bytes v;
  for (; s[0] && s[1]; s += 2)
    v.push_back(static_cast<uint8_t>(std::strtoul(std::string(s, 2).c_str(), nullptr, 16)));
  return v;
}

Bytes Random(std::mt19937_64* rng, size_t n) {
  Bytes v(n);
  for (auto& b : v) b = static_cast<uint8_t>((*rng)());
  return v;
}

void TestVectors() {
  struct Case {
    const char *name, *key, *iv, *aad, *plain, *cipher, *tag;
  };
  // McGrew & Viega, Appendix B (AES-128, 96-bit IV).
  const Case cases[] = {
      {"case 1", "00000000000000000000000000000000", "000000000000000000000000", "", "", "",
       "58e2fccefa7e3061367f1d57a4e7455a"},
      {"case 2", "00000000000000000000000000000000", "000000000000000000000000", "",
       "00000000000000000000000000000000", "0388dace60b6a392f328c2b971b2fe78",
       "ab6e47d42cec13bdf53a67b21257bddf"},
      {"case 3", "feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "",
       "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
       "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
       "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
       "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
       "4d5c2af327cd64a62cf35abd2ba6fab4"},
      {"case 4", "feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
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
    aead::fast::Seal(key.data(), iv.data(), aad.data(), aad.size(), p.data(), p.size(),
                     ct.data(), tag.data());
    Check(ct == Hex(c.cipher) && tag == Hex(c.tag), std::string("fast GCM ") + c.name + " seal");
    Check(aead::fast::Open(key.data(), iv.data(), aad.data(), aad.size(), ct.data(),
                           ct.size(), tag.data(), back.data()) && back == p,
          std::string("fast GCM ") + c.name + " open");
  }
}

// Seals with both paths; checks equal bytes, then opens the EVP message with
// the fast path and the fast message with EVP. Returns false on a mismatch.
bool CrossCheck(std::mt19937_64* rng, size_t len, size_t aad_len) {
  const Bytes key = Random(rng, 16), iv = Random(rng, 12), aad = Random(rng, aad_len),
              p = Random(rng, len);
  Bytes c1(len), c2(len), t1(16), t2(16), b1(len), b2(len);
  std::string err;
  bool ok = aead::GcmSeal(key.data(), iv.data(), aad.data(), aad_len, p.data(), len,
                          c1.data(), t1.data(), &err, GcmImpl::kEvp) &&
            aead::GcmSeal(key.data(), iv.data(), aad.data(), aad_len, p.data(), len,
                          c2.data(), t2.data(), &err, GcmImpl::kFast);
  ok = ok && c1 == c2 && t1 == t2;
  ok = ok && aead::GcmOpen(key.data(), iv.data(), aad.data(), aad_len, c1.data(), len,
                           t1.data(), b1.data(), &err, GcmImpl::kFast) == aead::OpenStatus::kOk;
  ok = ok && aead::GcmOpen(key.data(), iv.data(), aad.data(), aad_len, c2.data(), len,
                           t2.data(), b2.data(), &err, GcmImpl::kEvp) == aead::OpenStatus::kOk;
  return ok && b1 == p && b2 == p;
}

void TestCrossCheck() {
  std::mt19937_64 rng(11);
  const size_t lens[] = {0,   1,   15,   16,   17,   31,   32,   48,         63,
                         64,  65,  127,  128,  191,  192,  240,  255,        256,
                         257, 271, 511,  512,  1000, 4095, 4096, 1u << 20,   (1u << 20) + 7};
  for (size_t len : lens)
    for (size_t aad_len : {size_t{0}, size_t{1}, size_t{13}, size_t{16}, size_t{40}})
      Check(CrossCheck(&rng, len, aad_len),
            "fast == EVP, len " + std::to_string(len) + ", aad " + std::to_string(aad_len));
  bool all = true;
  for (size_t aad_len = 0; aad_len <= 300; ++aad_len) all = all && CrossCheck(&rng, 37, aad_len);
  Check(all, "fast == EVP, AAD lengths 0..300");
  all = true;
  for (int i = 0; i < 300; ++i) {
    const size_t len = rng() % (i < 250 ? 3000 : 200000), aad_len = rng() % 100;
    if (!CrossCheck(&rng, len, aad_len)) {
      all = false;
      std::printf("mismatch at len %zu aad %zu\n", len, aad_len);
    }
  }
  Check(all, "fast == EVP, 300 random lengths, keys, IVs and AADs");
}

void TestChunkedFormat() {
  std::mt19937_64 rng(12);
  uint8_t key[16];
  for (auto& b : key) b = static_cast<uint8_t>(rng());
  const std::string aad = "chunked";
  const auto pool = tf_privpy::MakeThreadedFor(1, 2);
  for (size_t len : {size_t{0}, size_t{1} << 20, (size_t{3} << 20) + 8}) {
    const Bytes p = Random(&rng, len);
    Bytes m1(aead::MessageBytes(len)), m2(m1.size()), out(len);
    std::string err;
    Check(aead::Seal(key, 5, 77, aad, p.data(), len, m1.data(), &err, tf_privpy::SerialFor,
                     GcmImpl::kEvp) &&
              aead::Seal(key, 5, 77, aad, p.data(), len, m2.data(), &err, pool,
                         GcmImpl::kFast) &&
              m1 == m2,
          "chunked seal: fast (threaded) == EVP (serial), len " + std::to_string(len));
    uint64_t counter = 0;
    Check(aead::Open(key, 5, aad, m1.data(), m1.size(), out.data(), &counter, &err, pool,
                     GcmImpl::kFast) == aead::OpenStatus::kOk &&
              out == p && counter == 77,
          "chunked open (fast), len " + std::to_string(len));
  }
}

void TestTamper() {
  std::mt19937_64 rng(13);
  for (size_t len : {size_t{0}, size_t{17}, size_t{300}, size_t{4096}}) {
    const Bytes key = Random(&rng, 16), iv = Random(&rng, 12), aad = Random(&rng, 21),
                p = Random(&rng, len);
    Bytes c(len), t(16), out(len);
    std::string err;
    aead::GcmSeal(key.data(), iv.data(), aad.data(), aad.size(), p.data(), len, c.data(),
                  t.data(), &err, GcmImpl::kFast);
    auto open = [&](const Bytes& cc, const Bytes& tt, const Bytes& aa) {
      std::fill(out.begin(), out.end(), 0xAA);
      const auto s = aead::GcmOpen(key.data(), iv.data(), aa.data(), aa.size(), cc.data(),
                                   len, tt.data(), out.data(), &err, GcmImpl::kFast);
      bool wiped = true;
      for (uint8_t b : out) wiped = wiped && b == 0;
      return s == aead::OpenStatus::kAuthFailed && wiped && err == "AES-GCM tag mismatch";
    };
    bool all = true;
    // Every bit of short messages, a spread of bits of the longer ones.
    const size_t stride = len <= 300 ? 1 : 61;
    for (size_t bit = 0; bit < 8 * len; bit += stride) {
      Bytes cc = c;
      cc[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      all = all && open(cc, t, aad);
    }
    for (size_t bit = 0; bit < 128; ++bit) {
      Bytes tt = t;
      tt[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      all = all && open(c, tt, aad);
    }
    for (size_t bit = 0; bit < 8 * aad.size(); ++bit) {
      Bytes aa = aad;
      aa[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      all = all && open(c, t, aa);
    }
    Bytes shorter(aad.begin(), aad.end() - 1);
    all = all && open(c, t, shorter);
    Check(all, "fast open rejects every tampered ciphertext, tag and AAD bit, len " +
                   std::to_string(len));
  }
}

}  // namespace

int main() {
  if (!aead::fast::Supported()) {
    std::printf("SKIP: this CPU/OS lacks VAES or VPCLMULQDQ (EVP path only)\n");
    return tf_privpy::testing::Report();
  }
  // Every case on the code this CPU runs, and on a ZMM-capable CPU again on
  // the YMM code (the test hook), so both are checked where both exist.
  const bool both = std::strcmp(aead::fast::Path(), "zmm") == 0;
  for (int pass = 0; pass < (both ? 2 : 1); ++pass) {
    if (pass == 1) setenv("TF_PRIVPY_AEAD_YMM", "1", 1);
    std::printf("testing the %s path\n", aead::fast::Path());
    TestVectors();
    TestCrossCheck();
    TestChunkedFormat();
    TestTamper();
  }
  unsetenv("TF_PRIVPY_AEAD_YMM");
  return tf_privpy::testing::Report();
}
