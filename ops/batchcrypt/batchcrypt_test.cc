// Standalone test of the BatchCrypt codec (no TensorFlow):
//   make -f ops/batchcrypt/Makefile.standalone test
// Packing is checked bit by bit against a naive bit-vector encoder; sums of
// m plaintexts (schoolbook byte addition, what Paillier addition decrypts
// to) must decode to the exact slot sums, with overflows flagged by sign.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "ops/batchcrypt/batchcrypt.h"

namespace bc = tf_privpy::batchcrypt;

namespace {

int g_passed = 0, g_failed = 0;

void Check(bool ok, const char* what, int64_t a, int64_t b) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    if (g_failed < 20) std::printf("FAIL %s (%lld, %lld)\n", what, (long long)a, (long long)b);
  }
}

// Bit i of the big-endian byte string p (bit 0 = least significant).
int Bit(const std::vector<uint8_t>& p, int64_t i) {
  const int64_t byte = static_cast<int64_t>(p.size()) - 1 - i / 8;
  return byte < 0 ? 0 : (p[byte] >> (i % 8)) & 1;
}

// a += b mod 2^(8B), both B big-endian bytes.
void AddInto(std::vector<uint8_t>* a, const std::vector<uint8_t>& b) {
  int carry = 0;
  for (int64_t j = static_cast<int64_t>(a->size()) - 1; j >= 0; --j) {
    const int s = (*a)[j] + b[j] + carry;
    (*a)[j] = static_cast<uint8_t>(s);
    carry = s >> 8;
  }
}

void TestPackBits(std::mt19937_64& rng) {
  for (int trial = 0; trial < 2000; ++trial) {
    const int w = bc::kMinSlotBits + static_cast<int>(rng() % (bc::kMaxSlotBits - 1));
    const int64_t k = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t bytes = (k * w + 7) / 8 + static_cast<int64_t>(rng() % 3);
    const int64_t n = 1 + static_cast<int64_t>(rng() % k);
    const int64_t half = int64_t{1} << (w - 1);
    std::vector<int64_t> q(n);
    for (auto& v : q) {
      const int pick = static_cast<int>(rng() % 4);
      v = pick == 0 ? -half : pick == 1 ? half - 1
                                        : static_cast<int64_t>(rng() % (2 * half)) - half;
    }
    Check(bc::CheckLayout(w, k, bytes).empty(), "layout", w, k);
    Check(bc::FirstOutOfRange(q.data(), n, w) == -1, "in range", w, n);
    std::vector<uint8_t> p(bytes, 0xAB);
    bc::PackPlaintext(q.data(), n, w, k, bytes, p.data());
    // Naive reference: P = sum_i q_i 2^(w i) mod 2^W, each term written bit
    // by bit (q_i sign-extended from bit w i up to bit W) and added.
    const int64_t total_bits = k * w;
    std::vector<uint8_t> want(bytes, 0);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<uint8_t> term(bytes, 0);
      for (int64_t t = i * w; t < total_bits; ++t) {
        const int64_t b = t - i * w;
        const int bit = b < 63 ? static_cast<int>((q[i] >> b) & 1) : q[i] < 0;
        term[bytes - 1 - t / 8] |= static_cast<uint8_t>(bit << (t % 8));
      }
      AddInto(&want, term);
    }
    bool same = true;
    for (int64_t t = 0; t < 8 * bytes; ++t) same &= Bit(p, t) == (t < total_bits ? Bit(want, t) : 0);
    Check(same, "pack bits", w, k);
    // One plaintext decodes to itself; with bound 2^(w-1) - 1 only -2^(w-1)
    // is out of bounds (a negative overflow).
    std::vector<int64_t> out(n);
    std::vector<char> mask(n);
    bc::OverflowCounts c;
    bc::UnpackPlaintext(p.data(), p.size(), w, k, n, half - 1, out.data(),
                        reinterpret_cast<bool*>(mask.data()), &c);
    int64_t lows = 0;
    bool round = c.positive == 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool low = q[i] == -half;
      lows += low;
      round &= out[i] == (low ? 0 : q[i]) && static_cast<bool>(mask[i]) == low;
    }
    Check(round && c.negative == lows, "round trip", w, k);
  }
  int32_t big[2] = {7, -9};
  Check(bc::FirstOutOfRange(big, 2, 4) == 1, "out of range", 4, 1);
  Check(!bc::CheckLayout(20, 103, 256).empty(), "layout too big", 20, 103);
}

// m clients, slots drawn in [-qmax, qmax] (extremes often); the plaintext sum
// decodes exactly; then extra summands push some slots past the bound.
void TestSums(std::mt19937_64& rng) {
  for (int trial = 0; trial < 600; ++trial) {
    const int r = 3 + static_cast<int>(rng() % 30);
    const int m = 1 + static_cast<int>(rng() % 64);
    int pad = 0;
    while ((1 << pad) < m) ++pad;
    const int w = r + pad;
    const int64_t qmax = (int64_t{1} << (r - 2)) - 1;
    const int64_t key_bits = 256 + static_cast<int64_t>(rng() % 800);
    const int64_t k = (key_bits - 1 - pad) / w, bytes = (key_bits + 7) / 8;
    // Summands beyond m, as long as no slot sum can reach 2^(w-1) (beyond
    // that a sum may wrap: the Python API refuses to decode it).
    const int64_t safe = ((int64_t{1} << (w - 1)) - 1) / qmax;
    const int extra = static_cast<int>(std::min<int64_t>(rng() % 3, safe - m));
    const int64_t n = k;
    std::vector<int64_t> sums(n, 0);
    std::vector<uint8_t> total(bytes, 0);
    for (int c = 0; c < m + extra; ++c) {
      std::vector<int64_t> q(n);
      for (int64_t i = 0; i < n; ++i) {
        const int pick = static_cast<int>(rng() % 5);
        q[i] = pick == 0 ? qmax : pick == 1 ? -qmax
                                             : static_cast<int64_t>(rng() % (2 * qmax + 1)) - qmax;
        if (i % 7 == 3) q[i] = qmax;  // these slots overflow when extra > 0
        sums[i] += q[i];
      }
      std::vector<uint8_t> p(bytes);
      bc::PackPlaintext(q.data(), n, w, k, bytes, p.data());
      AddInto(&total, p);
    }
    const int64_t bound = static_cast<int64_t>(m) * qmax;
    std::vector<int64_t> out(n);
    std::vector<char> mask(n);
    bc::OverflowCounts c;
    bc::UnpackPlaintext(total.data(), total.size(), w, k, n, bound, out.data(),
                        reinterpret_cast<bool*>(mask.data()), &c);
    int64_t want_pos = 0, want_neg = 0;
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) {
      const bool over = sums[i] > bound || sums[i] < -bound;
      want_pos += sums[i] > bound;
      want_neg += sums[i] < -bound;
      ok &= static_cast<bool>(mask[i]) == over && out[i] == (over ? 0 : sums[i]);
    }
    Check(ok, "sum decodes exactly", r, m);
    Check(c.positive == want_pos && c.negative == want_neg, "overflow counts", c.positive,
          want_pos);
    if (extra == 0) Check(want_pos == 0 && want_neg == 0, "no overflow with m summands", r, m);
  }
}

}  // namespace

int main() {
  std::mt19937_64 rng(20240501);
  TestPackBits(rng);
  TestSums(rng);
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
