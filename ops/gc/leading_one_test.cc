// Standalone test of the garbled leading-one circuit (no TensorFlow): the
// plaintext circuit against a direct reference (two's-complement sum, |x|,
// thresholds 2^j), then garble / encode / evaluate / unmask against the
// plaintext circuit for edge and random shares, widths 3..64, both modes,
// serially, with a 2-thread ParallelFor and evaluated in two slices.
// Build/run: make -f ops/gc/Makefile.standalone test
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/common/test_check.h"
#include "ops/gc/leading_one.h"

namespace {

using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::SerialFor;
using tf_privpy::testing::Check;
using namespace tf_privpy::gc;  // NOLINT

// Reference: x = (a + b) mod 2^W as a signed W-bit integer; v = |x| or the
// low W-1 bits; out[j] = [v >= 2^j], out[W-1] = [x < 0].
std::vector<uint8_t> Reference(uint64_t a, uint64_t b, int W, bool magnitude) {
  const uint64_t mask = W == 64 ? ~uint64_t{0} : (uint64_t{1} << W) - 1;
  const uint64_t x = (a + b) & mask;
  const bool neg = (x >> (W - 1)) & 1;
  uint64_t v;
  if (magnitude) {
    v = neg ? ((~x + 1) & mask) : x;
    v &= (uint64_t{1} << (W - 1)) - 1;  // |-2^(W-1)| wraps to 0 in W-1 bits
  } else {
    v = x & ((uint64_t{1} << (W - 1)) - 1);
  }
  std::vector<uint8_t> out(W);
  for (int j = 0; j < W - 1; ++j) out[j] = v >= (uint64_t{1} << j);
  out[W - 1] = neg;
  return out;
}

std::vector<uint64_t> Edges() {
  std::vector<uint64_t> e = {0, 1, 2, 3, ~uint64_t{0}, ~uint64_t{1}, uint64_t{1} << 62,
                             uint64_t{1} << 63, (uint64_t{1} << 63) - 1};
  for (int j = 0; j < 64; ++j) {
    e.push_back(uint64_t{1} << j);
    e.push_back((uint64_t{1} << j) - 1);
    e.push_back(0 - (uint64_t{1} << j));
    e.push_back(0 - (uint64_t{1} << j) + 1);
  }
  return e;
}

// Secret x split as (a, b) = (r, x - r) for random r.
void Shares(const std::vector<uint64_t>& xs, std::mt19937_64& rng, std::vector<int64_t>* a,
            std::vector<int64_t>* b) {
  a->clear();
  b->clear();
  for (uint64_t x : xs) {
    const uint64_t r = rng();
    a->push_back(static_cast<int64_t>(r));
    b->push_back(static_cast<int64_t>(x - r));
  }
}

void TestPlain(std::mt19937_64& rng) {
  for (int W : {3, 4, 17, 34, 46, 63, 64})
    for (bool mag : {false, true}) {
      std::vector<uint64_t> xs = Edges();
      for (int i = 0; i < 2000; ++i) xs.push_back(rng() >> (rng() % 64));
      int bad = 0;
      for (uint64_t x : xs) {
        const uint64_t r = rng();
        std::vector<uint8_t> got(W);
        LeadingOnePlain(r, x - r, W, mag, got.data());
        if (got != Reference(r, x - r, W, mag)) ++bad;
      }
      Check(bad == 0, "plain circuit W=" + std::to_string(W) + " magnitude=" +
                          std::to_string(mag) + ": " + std::to_string(bad) + " wrong");
    }
}

// Garbles, encodes, evaluates (in two slices, like T1 and T2) and unmasks.
void TestGarbled(std::mt19937_64& rng, const ParallelFor& pf, const char* name) {
  uint8_t key[16];
  for (auto& k : key) k = static_cast<uint8_t>(rng());
  uint64_t nonce = 1;
  for (int W : {3, 34, 46, 64})
    for (bool mag : {false, true}) {
      std::vector<uint64_t> xs = Edges();
      for (int i = 0; i < 700; ++i) xs.push_back(rng() >> (rng() % 64));
      std::vector<int64_t> a, b;
      Shares(xs, rng, &a, &b);
      const int64_t n = static_cast<int64_t>(xs.size());
      const int G = LeadingOneAndGates(W, mag);
      std::vector<Block> tables(n * G * 2), la(n * W), lb(n * W);
      std::vector<uint8_t> decode(n * W), bits(n * W), m(n * W);
      std::string err;
      ++nonce;
      bool ok = LeadingOneGarble(key, nonce, n, W, mag, tables.data(), decode.data(), pf, &err) &&
                LeadingOneEncode(key, nonce, LoRole::kA, W, a.data(), n, la.data(), pf, &err) &&
                LeadingOneEncode(key, nonce, LoRole::kB, W, b.data(), n, lb.data(), pf, &err) &&
                LeadingOneMask(key, nonce, n, W, m.data(), pf, &err);
      const int64_t h = n / 2 + 3;
      ok = ok &&
           LeadingOneEvaluate(nonce, 0, h, W, mag, tables.data(), decode.data(), la.data(),
                              lb.data(), bits.data(), pf, &err) &&
           LeadingOneEvaluate(nonce, h, n - h, W, mag, tables.data() + h * G * 2,
                              decode.data() + h * W, la.data() + h * W, lb.data() + h * W,
                              bits.data() + h * W, pf, &err);
      Check(ok, std::string(name) + ": kernels failed: " + err);
      if (!ok) continue;
      int bad = 0, ones = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto want = Reference(static_cast<uint64_t>(a[i]), static_cast<uint64_t>(b[i]),
                                    W, mag);
        for (int j = 0; j < W; ++j) {
          bad += (bits[i * W + j] ^ m[i * W + j]) != want[j];
          ones += m[i * W + j];
        }
      }
      Check(bad == 0, std::string(name) + " W=" + std::to_string(W) + " magnitude=" +
                          std::to_string(mag) + ": " + std::to_string(bad) + " wrong bits");
      // The masks are uniform bits: what T decodes is b XOR m.
      const double frac = static_cast<double>(ones) / (n * W);
      Check(frac > 0.45 && frac < 0.55, std::string(name) + ": mask ones fraction " +
                                            std::to_string(frac));
      // A wrong label (one bit of S2's input flipped) gives wrong outputs.
      std::vector<Block> lb2 = lb;
      for (int64_t i = 0; i < n; ++i) lb2[i * W].lo ^= 2;
      std::vector<uint8_t> bits2(n * W);
      LeadingOneEvaluate(nonce, 0, n, W, mag, tables.data(), decode.data(), la.data(),
                         lb2.data(), bits2.data(), pf, &err);
      Check(bits2 != bits, std::string(name) + ": corrupted labels changed nothing");
    }
}

}  // namespace

int main() {
  std::mt19937_64 rng(14);
  TestPlain(rng);
  Check(LeadingOneAndGates(64, false) == 125 && LeadingOneAndGates(64, true) == 187 &&
            LeadingOneAndGates(46, true) == 133,
        "AND gate counts");
  TestGarbled(rng, SerialFor, "serial");
  TestGarbled(rng, MakeThreadedFor(3, 2), "threaded");
  uint8_t key[16] = {0};
  std::string err;
  Check(!LeadingOneMask(key, 1, 4, 65, nullptr, SerialFor, &err), "width 65 rejected");
  Check(!LeadingOneMask(key, 1, 4, 2, nullptr, SerialFor, &err), "width 2 rejected");
  return tf_privpy::testing::Report();
}
