// Standalone test of the channel AEAD (no TensorFlow; the system's OpenSSL
// libcrypto): HMAC-SHA256 against RFC 4231, AES-128-GCM against the GCM
// specification's test cases (McGrew & Viega, cases 1, 2 and 4, 96-bit IVs),
// the link-key derivation against a value computed with Python's hmac, the
// nonce and wire layout, round trips of many lengths, and rejection of every
// single-bit change of a message, of a wrong key, AAD or stream, with the
// output wiped. Chunked messages (more than kChunkBytes): the size formula
// and its inverse, a known answer (SHA-256 of a 3-chunk message computed with
// Python's `cryptography`), the same bytes from serial and threaded runs,
// and rejection of tampered chunks and tags, swapped, dropped, cut and
// spliced chunks (from another message, and the "window splice" of chunks
// 1.. of one message with chunk 0 of the next, which only the chunk index in
// the AAD stops). In-TF behaviour (BoringSSL) is tests/test_aead.py's job.
// Build/run: make -f ops/aead/Makefile.standalone test
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <openssl/sha.h>
#include <random>
#include <string>
#include <vector>

#include "ops/common/test_check.h"
#include "ops/aead/aead.h"

namespace {

namespace aead = tf_privpy::aead;
using Bytes = std::vector<uint8_t>;

using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::SerialFor;
using tf_privpy::testing::Check;

constexpr size_t C = aead::kChunkBytes;

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

void TestChunkSizes() {
  Check(aead::ChunkCount(0) == 1 && aead::ChunkCount(C) == 1 &&
            aead::ChunkCount(C + 1) == 2 && aead::ChunkCount(2 * C) == 2 &&
            aead::ChunkCount(3 * C + 8) == 4,
        "chunk counts");
  Check(aead::MessageBytes(0) == 24 && aead::MessageBytes(C) == C + 24 &&
            aead::MessageBytes(C + 8) == C + 8 + 8 + 32 &&
            aead::MessageBytes(3 * C + 8) == 3 * C + 8 + 8 + 64,
        "message sizes");
  // The inverse, over every message size up to 4 chunks: each size is either
  // exactly one plaintext length's, or refused.
  uint64_t accepted = 0;
  bool inverse_ok = true;
  for (uint64_t m = 0; m <= aead::MessageBytes(4 * C); ++m) {
    uint64_t len = 0;
    if (!aead::PlaintextBytes(m, &len)) continue;
    ++accepted;
    inverse_ok &= aead::MessageBytes(len) == m;
  }
  Check(inverse_ok && accepted == 4 * C + 1,
        "PlaintextBytes inverts MessageBytes: " + std::to_string(accepted) + " sizes");
  uint64_t len = 0;
  Check(!aead::PlaintextBytes(23, &len) && !aead::PlaintextBytes(C + 25, &len) &&
            !aead::PlaintextBytes(C + 40, &len) && aead::PlaintextBytes(C + 41, &len) &&
            len == C + 1,
        "sizes between K - 1 and K chunks are refused");
  Check(aead::ChunkAad("a", 0, 1) == "a" &&
            aead::ChunkAad("a", 2, 3) == std::string("a") + std::string(7, '\0') + "\x02" +
                                             std::string(7, '\0') + "\x03",
        "chunk AAD layout");
}

Bytes Pattern(size_t len) {
  Bytes p(len);
  for (size_t j = 0; j < len; ++j) p[j] = static_cast<uint8_t>((j * 131 + 7) % 251);
  return p;
}

void TestChunkedKnownAnswer() {
  // The digest of a 3-chunk message computed in Python, chunk by chunk, with
  // hmac (the link key of the KDF vector above) and the `cryptography`
  // package's AESGCM, from the formulas of aead.h.
  Bytes pair(16);
  for (int i = 0; i < 16; ++i) pair[i] = static_cast<uint8_t>(i);
  uint8_t key[16];
  aead::DeriveLinkKey(pair.data(), "S1->T1", key);
  const size_t len = 2 * C + 40;
  const int64_t dims[] = {static_cast<int64_t>(len / 8)};
  const std::string aad = aead::MakeAad("S1->T1", 7, dims, 1);
  const Bytes p = Pattern(len);
  std::string err;
  for (const ParallelFor& pf : {ParallelFor(SerialFor), MakeThreadedFor(1)}) {
    Bytes msg(aead::MessageBytes(len));
    Check(aead::Seal(key, 7, 5, aad, p.data(), len, msg.data(), &err, pf), "KAT seal " + err);
    uint8_t digest[32];
    SHA256(msg.data(), msg.size(), digest);
    Check(msg.size() == 2097248 &&
              Bytes(digest, digest + 32) ==
                  Hex("61652d4612e95883cd2359aa88e498bc0716432110fed79d4f1b0944f5a2aa1c"),
          "3-chunk known answer");
  }
}

// Seals len pattern bytes at `counter`; opens (and checks) them back.
struct Chunked {
  uint8_t key[16];
  std::string aad = "header";
  uint32_t stream = 3;
  ParallelFor pf = MakeThreadedFor(1);

  Bytes Seal(const Bytes& p, uint64_t counter) const {
    Bytes msg(aead::MessageBytes(p.size()));
    std::string err;
    Check(aead::Seal(key, stream, counter, aad, p.data(), p.size(), msg.data(), &err, pf),
          "chunked seal " + err);
    return msg;
  }
  // The status of opening m; out (prefilled with 0xee) must be wiped unless ok.
  aead::OpenStatus Open(const Bytes& m, Bytes* out, uint64_t* counter) const {
    uint64_t len = 0;
    out->assign(aead::PlaintextBytes(m.size(), &len) ? len : 0, 0xee);
    std::string err;
    const aead::OpenStatus s =
        aead::Open(key, stream, aad, m.data(), m.size(), out->data(), counter, &err, pf);
    if (s != aead::OpenStatus::kOk && !AllZero(*out)) {
      Check(false, "failed open left plaintext");
    }
    return s;
  }
  bool Rejected(const Bytes& m) const {
    Bytes out;
    uint64_t c = 0;
    return Open(m, &out, &c) == aead::OpenStatus::kAuthFailed;
  }
};

// Where chunk i (ciphertext then tag) lies in a message.
size_t ChunkAt(size_t i) { return aead::kCounterBytes + i * (C + aead::kTagBytes); }

void TestChunkedRoundTrips() {
  std::mt19937_64 rng(7);
  Chunked ch;
  for (auto& b : ch.key) b = static_cast<uint8_t>(rng());
  for (size_t len : {size_t{0}, C - 8, C, C + 8, 2 * C, 3 * C + 8}) {
    const std::string at = " len " + std::to_string(len);
    Bytes p(len);
    for (auto& b : p) b = static_cast<uint8_t>(rng());
    const uint64_t k = aead::ChunkCount(len);
    const Bytes msg = ch.Seal(p, 1000);
    // Serial, 1-chunk-grain and 3-thread runs make the same bytes.
    Chunked serial = ch, three = ch;
    serial.pf = SerialFor;
    three.pf = MakeThreadedFor(1, 3);
    Check(serial.Seal(p, 1000) == msg && three.Seal(p, 1000) == msg,
          "serial and threaded seals agree" + at);
    // Structure: chunk i is GCM under counter + i and AAD_i.
    bool layout = Bytes(msg.begin(), msg.begin() + 8) == Hex("00000000000003e8");
    for (uint64_t i = 0; i < k; ++i) {
      const size_t off = i * C, n = std::min(C, len - off);
      uint8_t nonce[12], tag[16];
      aead::MakeNonce(ch.stream, 1000 + i, nonce);
      const std::string a = aead::ChunkAad(ch.aad, i, k);
      Bytes ct(n);
      std::string err;
      aead::GcmSeal(ch.key, nonce, reinterpret_cast<const uint8_t*>(a.data()), a.size(),
                    p.data() + off, n, ct.data(), tag, &err);
      layout &= std::equal(ct.begin(), ct.end(), msg.begin() + ChunkAt(i)) &&
                std::equal(tag, tag + 16, msg.begin() + ChunkAt(i) + n);
    }
    Check(layout, "chunk i = GCM(counter + i, AAD_i), tag after it" + at);
    for (const Chunked* c : {&ch, &serial, &three}) {
      Bytes out;
      uint64_t counter = 0;
      Check(c->Open(msg, &out, &counter) == aead::OpenStatus::kOk && out == p &&
                counter == 1000,
            "chunked round trip" + at);
    }
    if (len == 0) continue;
    // Every chunk's ciphertext (first, middle, last byte) and tag, the header.
    bool all = ch.Rejected([&] { Bytes m = msg; m[3] ^= 1; return m; }());
    for (uint64_t i = 0; i < k; ++i) {
      const size_t n = std::min(C, len - i * C);
      for (size_t pos : {size_t{0}, n / 2, n - 1, n, n + 15}) {
        Bytes m = msg;
        m[ChunkAt(i) + pos] ^= 0x80;
        all &= ch.Rejected(m);
      }
    }
    Check(all, "every chunk and tag tampered is rejected" + at);
  }
}

void TestChunkedSplices() {
  std::mt19937_64 rng(9);
  Chunked ch;
  for (auto& b : ch.key) b = static_cast<uint8_t>(rng());
  const size_t len = 3 * C;  // 3 full chunks: whole chunks can move around
  const size_t cl = C + aead::kTagBytes;
  Bytes p(len), q(len);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  for (auto& b : q) b = static_cast<uint8_t>(rng());
  const Bytes a = ch.Seal(p, 100), b = ch.Seal(q, 103);  // b right after a
  auto chunk = [&](const Bytes& m, size_t i) {
    return Bytes(m.begin() + ChunkAt(i), m.begin() + ChunkAt(i) + cl);
  };
  auto put = [&](Bytes* m, size_t i, const Bytes& c) {
    std::copy(c.begin(), c.end(), m->begin() + ChunkAt(i));
  };
  Bytes swapped = a;
  put(&swapped, 0, chunk(a, 1));
  put(&swapped, 1, chunk(a, 0));
  Check(ch.Rejected(swapped), "swapped chunks rejected");
  Bytes spliced = a;
  put(&spliced, 1, chunk(b, 1));
  Check(ch.Rejected(spliced), "chunk of another message rejected");
  // Chunks 1, 2 of a and chunk 0 of b have the nonces 101, 102, 103: as a
  // message with header 101 only the chunk index in the AAD tells.
  Bytes window = a;
  window[7] = 101;
  put(&window, 0, chunk(a, 1));
  put(&window, 1, chunk(a, 2));
  put(&window, 2, chunk(b, 0));
  Check(ch.Rejected(window), "window splice (chunks 1.. of one message + 0 of the next) "
                             "rejected");
  // Dropping the last chunk leaves a well-formed 2-chunk size; K in the AAD
  // tells (this layer has no shape).
  Check(ch.Rejected(Bytes(a.begin(), a.end() - cl)), "dropped last chunk rejected");
  // Cutting the last chunk's ciphertext short (tag kept) gives another valid
  // size, too.
  Bytes cut(a.begin(), a.end() - cl);
  const Bytes last = chunk(a, 2);
  cut.insert(cut.end(), last.begin(), last.begin() + 8);
  cut.insert(cut.end(), last.end() - 16, last.end());
  Check(cut.size() == aead::MessageBytes(2 * C + 8) && ch.Rejected(cut),
        "cut last chunk rejected");
  Check(ch.Rejected(Bytes(a.begin(), a.end() - 1)) &&
            ch.Rejected([&] { Bytes m = a; m.push_back(0); return m; }()),
        "sizes no plaintext has rejected");
  // A message with a 2-chunk header whose nonces would pass 2^64.
  Bytes wrap = a;
  for (int i = 0; i < 8; ++i) wrap[i] = 0xff;
  Check(ch.Rejected(wrap), "wrapping counters rejected");
  Bytes msg(aead::MessageBytes(len));
  std::string err;
  Check(!aead::Seal(ch.key, 3, ~uint64_t{0} - 1, ch.aad, p.data(), len, msg.data(), &err,
                    ch.pf) &&
            aead::Seal(ch.key, 3, ~uint64_t{0} - 2, ch.aad, p.data(), len, msg.data(), &err,
                       ch.pf),
        "seal refuses counters that would wrap");
}

}  // namespace

// SealSegments (the kernel's input tensors read in place) makes exactly the
// bytes of Seal of their concatenation: cuts inside a chunk, at chunk
// boundaries, empty segments, a segment spanning several chunks, one byte.
void TestSealSegments() {
  std::mt19937_64 rng(11);
  Chunked ch;
  for (auto& b : ch.key) b = static_cast<uint8_t>(rng());
  const std::vector<std::vector<size_t>> splits = {
      {0},         {8},           {C},          {C, 0},           {0, C + 8},
      {16, C - 8}, {C - 8, 16},   {C, C},       {3, 5, 7, 2 * C}, {2 * C + 24, 0, 40},
      {C / 2, C, C / 2 + 8},      {1, 1, 1, C - 3, 1}};
  for (const auto& lens : splits) {
    size_t len = 0;
    for (size_t n : lens) len += n;
    Bytes p(len);
    for (auto& b : p) b = static_cast<uint8_t>(rng());
    std::vector<aead::Segment> segs;
    size_t off = 0;
    for (size_t n : lens) {
      segs.push_back(aead::Segment{p.data() + off, n});
      off += n;
    }
    std::string at = " segments";
    for (size_t n : lens) at += " " + std::to_string(n);
    const Bytes want = ch.Seal(p, 77);
    for (const ParallelFor& pf : {ParallelFor(SerialFor), MakeThreadedFor(1, 3)}) {
      Bytes msg(aead::MessageBytes(len), 0xee);
      std::string err;
      Check(aead::SealSegments(ch.key, ch.stream, 77, ch.aad, segs, msg.data(), &err, pf),
            "segment seal" + at + " " + err);
      Check(msg == want, "segment seal equals the concatenation's" + at);
    }
    Bytes out(len, 0xee);
    uint64_t counter = 0;
    Check(ch.Open(want, &out, &counter) == aead::OpenStatus::kOk && out == p,
          "segment seal opens" + at);
  }
}

int main() {
  TestHmac();
  TestGcmVectors();
  TestKdfAndLayout();
  TestShortMessage();
  TestRoundTripsAndTamper();
  TestChunkSizes();
  TestChunkedKnownAnswer();
  TestChunkedRoundTrips();
  TestChunkedSplices();
  TestSealSegments();
  return tf_privpy::testing::Report();
}
