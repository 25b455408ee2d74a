// Standalone test of the garbled window-thresholds circuit (no TensorFlow):
// the plaintext circuit against a direct reference ([x < c·2^lo] on the
// signed W-bit sum), then garble / encode / evaluate / unmask against it for
// edge values (each threshold, ±1, the window's saturation limits, the
// extremes) and random shares, several windows, serially, with a 2-thread
// ParallelFor and evaluated in two slices; the gate-count formula of
// thresholds.h; invalid specs rejected.
// Build/run: make -f ops/gc/Makefile.standalone test
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/common/test_check.h"
#include "ops/gc/leading_one.h"
#include "ops/gc/thresholds.h"

namespace {

using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::SerialFor;
using tf_privpy::testing::Check;
using namespace tf_privpy::gc;  // NOLINT

int64_t Signed(uint64_t x, int W) {  // x mod 2^W as a signed W-bit integer
  const int s = 64 - W;
  return static_cast<int64_t>(x << s) >> s;
}

// Reference: out[k] = [x < c_k·2^lo] with exact 128-bit arithmetic.
std::vector<uint8_t> Reference(uint64_t a, uint64_t b, const ThresholdsSpec& p) {
  const __int128 x = Signed(a + b, p.width);
  std::vector<uint8_t> out;
  for (int64_t c : p.points) out.push_back(x < static_cast<__int128>(c) * (__int128{1} << p.lo));
  return out;
}

std::vector<ThresholdsSpec> Specs() {
  return {
      {46, 19, 6, {-22, -16, -12, -9, -6, -3, 0, 3, 6, 9, 12, 16, 22}},  // sigmoid (f = 20)
      {46, 20, 6, {-20, -18, -10, -2, 0, 2, 10, 22, 23}},               // exp's pieces
      {34, 15, 6, {-22, -3, 0, 1, 31, -31}},                             // unsorted, extremes
      {64, 0, 64, {0, 1, -1, INT64_MAX, INT64_MIN + 1}},                 // no overflow step
      {10, 9, 1, {0}},                                                   // the sign alone
      {10, 3, 2, {1, -1, 0}},
      {3, 0, 2, {1, 0, -1}},
  };
}

int TzGates(const ThresholdsSpec& p) {  // the formula of thresholds.h
  int g = p.width - 1 + (p.lo + p.window < p.width ? p.width - p.lo - 2 : 0);
  for (int64_t c : p.points) {
    const uint64_t U = static_cast<uint64_t>(c) + (uint64_t{1} << (p.window - 1));
    g += p.window - 1 - __builtin_ctzll(U);
  }
  return g;
}

std::vector<uint64_t> Values(const ThresholdsSpec& p, std::mt19937_64& rng) {
  std::vector<uint64_t> xs = {0, 1, ~uint64_t{0}, uint64_t{1} << 63, (uint64_t{1} << 63) - 1};
  for (int64_t c : p.points)
    for (int d = -2; d <= 2; ++d) xs.push_back(static_cast<uint64_t>(c) * (uint64_t{1} << p.lo) + d);
  for (int s : {-1, 1})
    for (int j = 0; j < 64; ++j)
      for (int d = -1; d <= 1; ++d) xs.push_back(s * (uint64_t{1} << j) + d);
  const uint64_t lim = p.lo + p.window - 1 < 64 ? uint64_t{1} << (p.lo + p.window - 1) : 0;
  for (int d = -2; d <= 2; ++d) {  // saturation limits of the window
    xs.push_back(lim + d);
    xs.push_back(0 - lim + d);
  }
  for (int i = 0; i < 1500; ++i) xs.push_back(rng() >> (rng() % 64));
  for (int i = 0; i < 500; ++i)  // near the window
    xs.push_back(static_cast<uint64_t>(static_cast<int64_t>(rng() % 200) - 100)
                 << (p.lo > 2 ? p.lo - 2 : 0));
  return xs;
}

void TestPlain(std::mt19937_64& rng) {
  for (const auto& p : Specs()) {
    Check(ThresholdsSpecError(p).empty(), "valid spec: " + ThresholdsSpecError(p));
    Check(ThresholdsAndGates(p) == TzGates(p), "gate count formula, W=" + std::to_string(p.width));
    int bad = 0;
    for (uint64_t x : Values(p, rng)) {
      const uint64_t r = rng();
      std::vector<uint8_t> got(p.points.size());
      ThresholdsPlain(r, x - r, p, got.data());
      if (got != Reference(r, x - r, p)) ++bad;
    }
    Check(bad == 0, "plain circuit W=" + std::to_string(p.width) + " lo=" +
                        std::to_string(p.lo) + ": " + std::to_string(bad) + " wrong");
  }
}

void TestGarbled(std::mt19937_64& rng, const ParallelFor& pf, const char* name) {
  uint8_t key[16];
  for (auto& k : key) k = static_cast<uint8_t>(rng());
  uint64_t nonce = 1;
  for (const auto& p : Specs()) {
    const int W = p.width, K = static_cast<int>(p.points.size());
    std::vector<uint64_t> xs = Values(p, rng);
    std::vector<int64_t> a, b;
    for (uint64_t x : xs) {
      const uint64_t r = rng();
      a.push_back(static_cast<int64_t>(r));
      b.push_back(static_cast<int64_t>(x - r));
    }
    const int64_t n = static_cast<int64_t>(xs.size());
    const int G = ThresholdsAndGates(p);
    std::vector<Block> tables(n * G * 2), la(n * W), lb(n * W);
    std::vector<uint8_t> decode(n * K), bits(n * K), m(n * K);
    std::string err;
    ++nonce;
    const BatchSlice all{n, 0, n};
    // T1's and T2's parts [0, h) and [h, n), garbled apart as S1 does (the
    // tables are chunk-major within a part: gc_circuit.h TableIndex).
    const int64_t h = n / 2 + 3;
    bool ok = ThresholdsGarble(key, nonce, BatchSlice{n, 0, h}, p, tables.data(),
                               decode.data(), pf, &err) &&
              ThresholdsGarble(key, nonce, BatchSlice{n, h, n - h}, p,
                               tables.data() + h * G * 2, decode.data() + h * K, pf, &err) &&
              LeadingOneEncode(key, nonce, LoRole::kA, W, a.data(), all, la.data(), pf, &err) &&
              LeadingOneEncode(key, nonce, LoRole::kB, W, b.data(), all, lb.data(), pf, &err) &&
              ThresholdsMask(key, nonce, n, p, m.data(), pf, &err);
    ok = ok &&
         ThresholdsEvaluate(nonce, 0, h, p, tables.data(), decode.data(), la.data(), lb.data(),
                            bits.data(), pf, &err) &&
         ThresholdsEvaluate(nonce, h, n - h, p, tables.data() + h * G * 2,
                            decode.data() + h * K, la.data() + h * W, lb.data() + h * W,
                            bits.data() + h * K, pf, &err);
    Check(ok, std::string(name) + ": kernels failed: " + err);
    if (!ok) continue;
    int bad = 0, ones = 0;
    for (int64_t i = 0; i < n; ++i) {
      const auto want = Reference(static_cast<uint64_t>(a[i]), static_cast<uint64_t>(b[i]), p);
      for (int k = 0; k < K; ++k) {
        bad += (bits[i * K + k] ^ m[i * K + k]) != want[k];
        ones += m[i * K + k];
      }
    }
    Check(bad == 0, std::string(name) + " W=" + std::to_string(W) + " lo=" +
                        std::to_string(p.lo) + ": " + std::to_string(bad) + " wrong bits");
    const double frac = static_cast<double>(ones) / (n * K);
    Check(frac > 0.45 && frac < 0.55, std::string(name) + ": mask ones fraction " +
                                          std::to_string(frac));
    // A wrong label (one bit of S2's input flipped) gives wrong outputs.
    std::vector<Block> lb2 = lb;
    for (int64_t i = 0; i < n; ++i) lb2[i * W + W - 1].lo ^= 3;
    std::vector<uint8_t> bits2(n * K);
    ThresholdsEvaluate(nonce, 0, h, p, tables.data(), decode.data(), la.data(), lb2.data(),
                       bits2.data(), pf, &err);
    ThresholdsEvaluate(nonce, h, n - h, p, tables.data() + h * G * 2, decode.data() + h * K,
                       la.data() + h * W, lb2.data() + h * W, bits2.data() + h * K, pf, &err);
    Check(bits2 != bits, std::string(name) + ": corrupted labels changed nothing");
  }
}

}  // namespace

int main() {
  std::mt19937_64 rng(14);
  TestPlain(rng);
  TestGarbled(rng, SerialFor, "serial");
  TestGarbled(rng, MakeThreadedFor(3, 2), "threaded");
  Check(!ThresholdsSpecError({46, 19, 6, {32}}).empty(), "point 2^(m-1) rejected");
  Check(!ThresholdsSpecError({46, 19, 6, {-32}}).empty(), "point -2^(m-1) rejected");
  Check(!ThresholdsSpecError({46, 41, 6, {0}}).empty(), "window past the width rejected");
  Check(!ThresholdsSpecError({46, 19, 6, {}}).empty(), "no points rejected");
  Check(!ThresholdsSpecError({65, 0, 6, {0}}).empty(), "width 65 rejected");
  return tf_privpy::testing::Report();
}
