// Standalone test of the AES-128-CTR keystream (no TensorFlow; OpenSSL's
// libcrypto from the system): the VAES key schedule and block function
// against the FIPS-197 and SP 800-38A known-answer vectors, the 128-bit
// counter increment across the 2^8..2^64 carries against EVP, and PrgFill's
// VAES path against its EVP path (TF_PRIVPY_DISABLE_VAES=1) and an
// independent EVP reference on random (key, nonce, offset, len), serially and
// with a 2-thread ParallelFor. Each VAES width the CPU has is tested: the ZMM
// code (AVX-512) and the YMM code (VAES + AVX2; on AVX-512 machines through
// TF_PRIVPY_PRG_YMM=1). Build/run: make -f ops/prg/Makefile.standalone test
#include <openssl/evp.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/common/test_check.h"
#include "ops/common/parallel.h"
#include "ops/prg/aes_ctr.h"
#include "ops/prg/aes_ctr_internal.h"

namespace {

namespace in = tf_privpy::aes_ctr_internal;
using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::PrgFill;

using tf_privpy::testing::Check;

std::vector<uint8_t> Hex(const char* s) {
  std::vector<uint8_t> v;
  for (; s[0] && s[1]; s += 2) {
    v.push_back(static_cast<uint8_t>(std::strtoul(std::string(s, 2).c_str(), nullptr, 16)));
  }
  return v;
}

uint64_t LoadBe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

void StoreBe64(uint64_t v, uint8_t* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}

// Independent reference: n keystream blocks of EVP AES-128-CTR from a raw
// 16-byte initial counter block.
std::vector<uint8_t> EvpCtr(const uint8_t key[16], const uint8_t iv[16],
                            size_t nbytes) {
  std::vector<uint8_t> out(nbytes + 16, 0);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int outl = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx, EVP_aes_128_ctr(), nullptr, key, iv) != 1 ||
      EVP_EncryptUpdate(ctx, out.data(), &outl, out.data(), static_cast<int>(nbytes)) != 1) {
    std::printf("EVP reference failed\n");
    std::exit(2);
  }
  EVP_CIPHER_CTX_free(ctx);
  out.resize(nbytes);
  return out;
}

// The VAES width under test: CtrBlocksVaes (ZMM) or CtrBlocksVaesYmm.
bool g_ymm = false;

std::vector<uint8_t> VaesCtr(const uint8_t key[16], const uint8_t iv[16],
                             uint64_t nblocks) {
  in::RoundKeys keys;
  in::ExpandKeyAesni(key, &keys);
  // Guard bytes after the end catch stores past nblocks.
  std::vector<uint8_t> out(nblocks * 16 + 64, 0xA5);
  (g_ymm ? in::CtrBlocksVaesYmm : in::CtrBlocksVaes)(
      keys, LoadBe64(iv), LoadBe64(iv + 8), nblocks, out.data());
  for (size_t i = nblocks * 16; i < out.size(); ++i) {
    if (out[i] != 0xA5) {
      std::printf("FAILED: CtrBlocksVaes wrote past block %llu\n",
                  static_cast<unsigned long long>(nblocks));
      ++tf_privpy::testing::tally().failed;
      break;
    }
  }
  out.resize(nblocks * 16);
  return out;
}

// FIPS-197 Appendix A.1 (key expansion) and C.1 (AES-128 cipher).
void TestFips197() {
  const auto key = Hex("2b7e151628aed2a6abf7158809cf4f3c");
  in::RoundKeys keys;
  in::ExpandKeyAesni(key.data(), &keys);
  const char* want[] = {
      "2b7e151628aed2a6abf7158809cf4f3c", "a0fafe1788542cb123a339392a6c7605",
      "f2c295f27a96b9435935807a7359f67f", "3d80477d4716fe3e1e237e446d7a883b",
      "ef44a541a8525b7fb671253bdb0bad00", "d4d1c6f87c839d87caf2b8bc11f915bc",
      "6d88a37a110b3efddbf98641ca0093fd", "4e54f70e5f5fc9f384a64fb24ea6dc4f",
      "ead27321b58dbad2312bf5607f8d292f", "ac7766f319fadc2128d12941575c006e",
      "d014f9a8c9ee2589e13f0cc8b6630ca6"};
  for (int r = 0; r <= 10; ++r) {
    Check(std::memcmp(keys.rk[r], Hex(want[r]).data(), 16) == 0,
          "FIPS-197 A.1 round key " + std::to_string(r));
  }
  // One CTR block with the plaintext as counter block = AES_k(plaintext).
  const auto k2 = Hex("000102030405060708090a0b0c0d0e0f");
  const auto pt = Hex("00112233445566778899aabbccddeeff");
  Check(VaesCtr(k2.data(), pt.data(), 1) == Hex("69c4e0d86a7b0430d8cdb78070b4c55a"),
        "FIPS-197 C.1 AES-128");
}

// EcbBlocksVaes (the garbled circuits' fixed-key permutation) against EVP
// AES-128-ECB: FIPS-197 C.1, then random blocks for every length 0..70
// (whole registers, every partial tail) and one long run, out of place with
// guard bytes after the end, and in place.
void TestEcb(std::mt19937_64& rng) {
  const auto k2 = Hex("000102030405060708090a0b0c0d0e0f");
  in::RoundKeys keys;
  in::ExpandKeyAesni(k2.data(), &keys);
  auto one = Hex("00112233445566778899aabbccddeeff");
  in::EcbBlocksVaes(keys, one.data(), one.data(), 1);
  Check(one == Hex("69c4e0d86a7b0430d8cdb78070b4c55a"), "FIPS-197 C.1 by ECB");
  uint8_t key[16];
  for (auto& x : key) x = static_cast<uint8_t>(rng());
  in::ExpandKeyAesni(key, &keys);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (!ctx || EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, key, nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(ctx, 0) != 1) {
    std::printf("EVP ECB reference failed\n");
    std::exit(2);
  }
  std::vector<uint64_t> lens;
  for (uint64_t n = 0; n <= 70; ++n) lens.push_back(n);
  lens.push_back(4096 + 13);
  bool ok_out = true, ok_in = true, ok_guard = true;
  for (uint64_t n : lens) {
    std::vector<uint8_t> src(n * 16), want(n * 16 + 16), got(n * 16 + 64, 0xA5);
    for (auto& x : src) x = static_cast<uint8_t>(rng());
    int outl = 0;
    if (n && EVP_EncryptUpdate(ctx, want.data(), &outl, src.data(),
                               static_cast<int>(n * 16)) != 1) {
      std::printf("EVP ECB reference failed\n");
      std::exit(2);
    }
    want.resize(n * 16);
    in::EcbBlocksVaes(keys, src.data(), got.data(), n);
    for (size_t i = n * 16; i < got.size(); ++i) ok_guard &= got[i] == 0xA5;
    got.resize(n * 16);
    ok_out &= got == want;
    in::EcbBlocksVaes(keys, src.data(), src.data(), n);
    ok_in &= src == want;
  }
  EVP_CIPHER_CTX_free(ctx);
  Check(ok_out, "EcbBlocksVaes == EVP ECB, lengths 0..70 and 4109");
  Check(ok_in, "EcbBlocksVaes in place == EVP ECB");
  Check(ok_guard, "EcbBlocksVaes writes nothing past the last block");
}

// SP 800-38A F.5.1 CTR-AES128.Encrypt: keystream = plaintext ^ ciphertext.
// The counter f0f1...feff has a carry from byte 15 into byte 14 at block 2.
void TestSp80038a() {
  const auto key = Hex("2b7e151628aed2a6abf7158809cf4f3c");
  const auto iv = Hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
  const auto pt = Hex(
      "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
      "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710");
  const auto ct = Hex(
      "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
      "5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee");
  for (uint64_t n = 1; n <= 4; ++n) {
    const auto ks = VaesCtr(key.data(), iv.data(), n);
    bool ok = true;
    for (size_t i = 0; i < n * 16; ++i) ok &= (pt[i] ^ ks[i]) == ct[i];
    Check(ok, "SP 800-38A F.5.1, " + std::to_string(n) + " blocks");
  }
  Check(EvpCtr(key.data(), iv.data(), 64) == VaesCtr(key.data(), iv.data(), 4),
        "SP 800-38A F.5.1 counter, EVP == VAES");
}

// The low 64-bit half just below 2^k for every byte carry, and the carry into
// the high half (including the 128-bit wrap), against EVP.
void TestCounterCarries(std::mt19937_64& rng) {
  const int bits[] = {8, 16, 24, 32, 40, 48, 56, 63, 64};
  for (int hi_kind = 0; hi_kind < 3; ++hi_kind) {
    for (int b : bits) {
      for (uint64_t d : {1, 2, 3, 5, 17, 31, 32, 33, 100}) {
        uint8_t key[16], iv[16];
        for (auto& x : key) x = static_cast<uint8_t>(rng());
        const uint64_t hi = hi_kind == 0 ? rng() : (hi_kind == 1 ? 0 : ~uint64_t{0});
        const uint64_t lo = (b == 64 ? 0 : (uint64_t{1} << b)) - d;
        StoreBe64(hi, iv);
        StoreBe64(lo, iv + 8);
        const uint64_t n = 1 + rng() % 120;
        Check(EvpCtr(key, iv, n * 16) == VaesCtr(key, iv, n),
              "counter carry 2^" + std::to_string(b) + "-" + std::to_string(d) +
                  " hi kind " + std::to_string(hi_kind) + " n " + std::to_string(n));
      }
    }
  }
}

std::vector<uint8_t> Fill(const uint8_t key[16], uint64_t nonce, uint64_t off,
                          size_t len, const ParallelFor& pf, bool vaes) {
  setenv("TF_PRIVPY_DISABLE_VAES", vaes ? "0" : "1", 1);
  setenv("TF_PRIVPY_PRG_YMM", g_ymm ? "1" : "0", 1);
  const char* want = !vaes ? "evp" : g_ymm ? "ymm" : in::CpuHasVaes() ? "zmm" : "evp";
  Check(std::strcmp(in::PrgPath(), want) == 0,
        std::string("PrgFill takes the ") + want + " path, not " + in::PrgPath());
  std::vector<uint8_t> out(len + 1, 0xA5);  // +1: a guard byte
  std::string error;
  if (!PrgFill(key, nonce, off, out.data(), len, pf, &error)) {
    std::printf("FAILED: PrgFill: %s\n", error.c_str());
    ++tf_privpy::testing::tally().failed;
  }
  Check(out[len] == 0xA5, "PrgFill wrote past len");
  out.resize(len);
  return out;
}

// PrgFill's stream position off through an independent EVP computation.
std::vector<uint8_t> Reference(const uint8_t key[16], uint64_t nonce,
                               uint64_t off, size_t len) {
  uint8_t iv[16];
  StoreBe64(nonce, iv);
  StoreBe64(off / 16, iv + 8);
  const auto s = EvpCtr(key, iv, off % 16 + len);
  return std::vector<uint8_t>(s.begin() + off % 16, s.end());
}

void TestPrgFill(std::mt19937_64& rng) {
  const ParallelFor serial = tf_privpy::SerialFor;
  const ParallelFor threads = MakeThreadedFor(1);
  // Block indices near the 2^8..2^32 carries and near the largest ones a
  // uint64 byte offset reaches (2^60).
  const uint64_t bases[] = {0, uint64_t{1} << 8, uint64_t{1} << 32,
                            uint64_t{1} << 40, uint64_t{1} << 59,
                            (uint64_t{1} << 60) - 1000};
  for (int t = 0; t < 600; ++t) {
    uint8_t key[16];
    for (auto& x : key) x = static_cast<uint8_t>(rng());
    const uint64_t nonce = t % 5 == 0 ? ~uint64_t{0} : rng();
    const size_t len = t < 10 ? t : rng() % 5001;
    const uint64_t base = bases[t % 6];
    uint64_t block = base >= 200 ? base - 200 + rng() % 400 : rng() % 400;
    if (t % 6 == 5) block = base + rng() % 100;  // below 2^60, room for len
    const uint64_t off = block * 16 + (t % 3 == 0 ? 0 : rng() % 16);
    const auto evp = Fill(key, nonce, off, len, serial, false);
    const auto vaes = Fill(key, nonce, off, len, serial, true);
    const std::string what = "PrgFill t=" + std::to_string(t) +
                             " off=" + std::to_string(off) +
                             " len=" + std::to_string(len);
    Check(vaes == evp, what + (g_ymm ? " VAES YMM == EVP" : " VAES ZMM == EVP"));
    Check(evp == Reference(key, nonce, off, len), what + " EVP == reference");
  }
  // Many shards, shard boundaries anywhere: 2 threads vs serial EVP.
  for (size_t len : {size_t{1600000}, size_t{4096 * 16 * 3 + 77}}) {
    uint8_t key[16];
    for (auto& x : key) x = static_cast<uint8_t>(rng());
    const uint64_t nonce = rng(), off = (uint64_t{1} << 32) * 16 - 12345;
    const auto evp = Fill(key, nonce, off, len, serial, false);
    Check(Fill(key, nonce, off, len, threads, true) == evp,
          "PrgFill 2 threads len " + std::to_string(len));
    Check(Fill(key, nonce, off, len, serial, true) == evp,
          "PrgFill serial len " + std::to_string(len));
  }
  // The switch is read per call.
  setenv("TF_PRIVPY_DISABLE_VAES", "1", 1);
  Check(in::VaesDisabled(), "TF_PRIVPY_DISABLE_VAES=1 disables");
  setenv("TF_PRIVPY_DISABLE_VAES", "0", 1);
  Check(!in::VaesDisabled(), "TF_PRIVPY_DISABLE_VAES=0 enables");
  unsetenv("TF_PRIVPY_DISABLE_VAES");
  Check(!in::VaesDisabled(), "unset enables");
  setenv("TF_PRIVPY_PRG_YMM", "1", 1);
  Check(in::PrgYmmForced(), "TF_PRIVPY_PRG_YMM=1 forces YMM");
  setenv("TF_PRIVPY_PRG_YMM", "0", 1);
  Check(!in::PrgYmmForced(), "TF_PRIVPY_PRG_YMM=0 does not");
  unsetenv("TF_PRIVPY_PRG_YMM");
  Check(!in::PrgYmmForced(), "unset does not force YMM");
}

// Which path PrgFill takes by default and under each variable.
void TestSelection() {
  unsetenv("TF_PRIVPY_DISABLE_VAES");
  unsetenv("TF_PRIVPY_PRG_YMM");
  const char* fast = in::CpuHasVaes() ? "zmm" : in::CpuHasVaesYmm() ? "ymm" : "evp";
  Check(std::strcmp(in::PrgPath(), fast) == 0, std::string("default path ") + fast);
  setenv("TF_PRIVPY_PRG_YMM", "1", 1);
  const char* forced = in::CpuHasVaesYmm() ? "ymm" : "evp";
  Check(std::strcmp(in::PrgPath(), forced) == 0,
        std::string("TF_PRIVPY_PRG_YMM=1 path ") + forced);
  setenv("TF_PRIVPY_DISABLE_VAES", "1", 1);
  Check(std::strcmp(in::PrgPath(), "evp") == 0, "TF_PRIVPY_DISABLE_VAES=1 wins: evp");
  unsetenv("TF_PRIVPY_DISABLE_VAES");
  unsetenv("TF_PRIVPY_PRG_YMM");
}

// Everything that runs on one VAES width.
void TestWidth(std::mt19937_64& rng, bool ymm) {
  g_ymm = ymm;
  std::printf("VAES %s path\n", ymm ? "YMM (256-bit)" : "ZMM (AVX-512)");
  TestFips197();
  TestSp80038a();
  TestCounterCarries(rng);
  TestPrgFill(rng);
}

}  // namespace

int main() {
  std::mt19937_64 rng(20240531);
  TestSelection();
  if (in::CpuHasVaes()) {
    TestEcb(rng);  // ECB exists on ZMM only (the garbled circuits' PRP)
    TestWidth(rng, false);
  }
  if (in::CpuHasVaesYmm()) TestWidth(rng, true);
  if (!in::CpuHasVaes() && !in::CpuHasVaesYmm()) {
    // No VAES: check PrgFill's EVP path against the reference.
    std::printf("no VAES on this CPU: EVP path only\n");
    g_ymm = false;
    TestPrgFill(rng);
  }
  return tf_privpy::testing::Report();
}
