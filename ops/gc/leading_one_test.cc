// Standalone test of the garbled leading-one circuit (no TensorFlow): the
// plaintext circuit against a direct reference (two's-complement sum, one's
// complement magnitude, thresholds 2^j), then garble / encode / evaluate /
// unmask against the plaintext circuit for edge and random shares, widths
// 3..64, both modes, all columns or a subset, serially and with a 2-thread
// ParallelFor, garbled, encoded and evaluated in two slices (T1's and T2's);
// the slices' tables equal those of the whole batch.
// Build/run: make -f ops/gc/Makefile.standalone test
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/common/test_check.h"
#include "ops/gc/gc_circuit.h"
#include "ops/gc/leading_one.h"

namespace {

using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::SerialFor;
using tf_privpy::testing::Check;
using namespace tf_privpy::gc;  // NOLINT

// Reference: x = (a + b) mod 2^W as a signed W-bit integer; v = the low W-1
// bits, or (magnitude) |x| - 1 for x < 0 (|x| <= 2^(W-1)) and x otherwise;
// out[j] = [v >= 2^j], except out[0] = [x != 0] with magnitude; out[W-1] =
// [x < 0]; then the columns picked (all if empty).
std::vector<uint8_t> Reference(uint64_t a, uint64_t b, const LeadingOneSpec& spec) {
  const int W = spec.width;
  const uint64_t mask = W == 64 ? ~uint64_t{0} : (uint64_t{1} << W) - 1;
  const uint64_t x = (a + b) & mask;
  const bool neg = (x >> (W - 1)) & 1;
  uint64_t v = x & ((uint64_t{1} << (W - 1)) - 1);
  if (spec.magnitude && neg) v = ((~x + 1) & mask) - 1;  // |x| - 1, |x| in [1, 2^(W-1)]
  std::vector<uint8_t> out(W);
  for (int j = 0; j < W - 1; ++j) out[j] = v >= (uint64_t{1} << j);
  if (spec.magnitude) out[0] = x != 0;
  out[W - 1] = neg;
  if (spec.columns.empty()) return out;
  std::vector<uint8_t> picked;
  for (int c : spec.columns) picked.push_back(out[c]);
  return picked;
}

// Columns a caller would pick: some thresholds out of order and the sign.
std::vector<int> SomeColumns(int W) {
  std::vector<int> cols;
  for (int c : {W - 1, 0, W / 2, W - 2, 1})
    if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
  return cols;
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
      const LeadingOneSpec spec{W, mag, {}};
      for (uint64_t x : xs) {
        const uint64_t r = rng();
        std::vector<uint8_t> got(W);
        LeadingOnePlain(r, x - r, spec, got.data());
        if (got != Reference(r, x - r, spec)) ++bad;
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
    for (bool mag : {false, true})
      for (bool subset : {false, true}) {
      const LeadingOneSpec spec{W, mag, subset ? SomeColumns(W) : std::vector<int>{}};
      const std::string what = std::string(name) + " W=" + std::to_string(W) + " magnitude=" +
                               std::to_string(mag) + " subset=" + std::to_string(subset);
      std::vector<uint64_t> xs = Edges();
      for (int i = 0; i < 700; ++i) xs.push_back(rng() >> (rng() % 64));
      std::vector<int64_t> a, b;
      Shares(xs, rng, &a, &b);
      const int64_t n = static_cast<int64_t>(xs.size());
      const int G = LeadingOneAndGates(W, mag), K = LeadingOneOutputs(spec);
      std::vector<Block> tables(n * G * 2), la(n * W), lb(n * W), whole(n * G * 2);
      std::vector<uint8_t> decode(n * K), bits(n * K), m(n * K), whole_dec(n * K);
      std::string err;
      ++nonce;
      // Everything in two slices [0, h) and [h, n), as S1, S2, T1 and T2 do.
      // Tables are chunk-major (TableIndex): the slices' equal the whole
      // batch's when h starts a chunk; an unaligned h is only evaluated.
      const bool aligned = nonce % 2 == 0;
      const int64_t h = aligned ? (n / 2) / tf_privpy::gc::internal::kCircuitChunk *
                                        tf_privpy::gc::internal::kCircuitChunk
                                : n / 2 + 3;
      const BatchSlice s0{n, 0, h}, s1{n, h, n - h};
      bool ok = LeadingOneMask(key, nonce, n, spec, m.data(), pf, &err) &&
                LeadingOneGarble(key, nonce, BatchSlice{n, 0, n}, spec, whole.data(),
                                 whole_dec.data(), pf, &err);
      for (const BatchSlice& s : {s0, s1})
        ok = ok &&
             LeadingOneGarble(key, nonce, s, spec, tables.data() + s.first * G * 2,
                              decode.data() + s.first * K, pf, &err) &&
             LeadingOneEncode(key, nonce, LoRole::kA, W, a.data() + s.first, s,
                              la.data() + s.first * W, pf, &err) &&
             LeadingOneEncode(key, nonce, LoRole::kB, W, b.data() + s.first, s,
                              lb.data() + s.first * W, pf, &err) &&
             LeadingOneEvaluate(nonce, s.first, s.count, spec, tables.data() + s.first * G * 2,
                                decode.data() + s.first * K, la.data() + s.first * W,
                                lb.data() + s.first * W, bits.data() + s.first * K, pf, &err);
      Check(ok, what + ": kernels failed: " + err);
      if (!ok) continue;
      Check(decode == whole_dec &&
                (!aligned || std::equal(tables.begin(), tables.end(), whole.begin(),
                           [](const Block& x, const Block& y) {
                             return x.lo == y.lo && x.hi == y.hi;
                           })),
            what + ": slices garbled apart differ from the whole batch");
      int bad = 0, ones = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto want = Reference(static_cast<uint64_t>(a[i]), static_cast<uint64_t>(b[i]),
                                    spec);
        for (int j = 0; j < K; ++j) {
          bad += (bits[i * K + j] ^ m[i * K + j]) != want[j];
          ones += m[i * K + j];
        }
      }
      Check(bad == 0, what + ": " + std::to_string(bad) + " wrong bits");
      // The masks are uniform bits: what T decodes is b XOR m.
      const double frac = static_cast<double>(ones) / (n * K);
      Check(frac > 0.45 && frac < 0.55, what + ": mask ones fraction " + std::to_string(frac));
      // A wrong label (one bit of S2's input flipped) gives wrong outputs.
      std::vector<Block> lb2 = lb;
      for (int64_t i = 0; i < n; ++i) lb2[i * W].lo ^= 2;
      std::vector<uint8_t> bits2(n * K);
      LeadingOneEvaluate(nonce, 0, n, spec, tables.data(), decode.data(), la.data(), lb2.data(),
                         bits2.data(), pf, &err);
      Check(bits2 != bits, what + ": corrupted labels changed nothing");
    }
}

}  // namespace

int main() {
  std::mt19937_64 rng(14);
  TestPlain(rng);
  Check(LeadingOneAndGates(64, false) == 125 && LeadingOneAndGates(64, true) == 126 &&
            LeadingOneAndGates(46, true) == 90,
        "AND gate counts");
  TestGarbled(rng, SerialFor, "serial");
  TestGarbled(rng, MakeThreadedFor(3, 2), "threaded");
  uint8_t key[16] = {0};
  std::string err;
  Check(!LeadingOneMask(key, 1, 4, {65, false, {}}, nullptr, SerialFor, &err),
        "width 65 rejected");
  Check(!LeadingOneMask(key, 1, 4, {2, false, {}}, nullptr, SerialFor, &err), "width 2 rejected");
  Check(!LeadingOneSpecError({8, false, {1, 1}}).empty(), "repeated column rejected");
  Check(!LeadingOneSpecError({8, false, {8}}).empty(), "column 8 of width 8 rejected");
  Check(!LeadingOneGarble(key, 1, BatchSlice{4, 3, 2}, {8, false, {}}, nullptr, nullptr,
                          SerialFor, &err),
        "slice beyond the batch rejected");
  return tf_privpy::testing::Report();
}
