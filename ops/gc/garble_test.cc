// Standalone test of the garbled comparator (no TensorFlow): garble, encode
// both inputs, evaluate, unmask, and compare with a plain signed comparison
// for edge and random values, serially and with a 2-thread ParallelFor; also
// determinism, nonce separation and wrong-label behaviour.
// Build/run: make -f ops/gc/Makefile.standalone test
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ops/common/test_check.h"
#include "ops/common/parallel.h"
#include "ops/gc/garble.h"

namespace {

using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using namespace tf_privpy::gc;  // NOLINT

using tf_privpy::testing::Check;


struct Run {
  std::vector<Block> tables, lx, ly;
  std::vector<uint8_t> decode, bits, mask;
};

// y = S1's x1 (role y), x = S2's -x2 (role x); expects bits ^ m = [y < x].
bool GarbleAndEvaluate(const uint8_t key[16], uint64_t nonce,
                       const std::vector<int64_t>& y,
                       const std::vector<int64_t>& x, const ParallelFor& pf,
                       Run* r) {
  const int64_t n = static_cast<int64_t>(x.size());
  r->tables.assign(n * kBits * kTableBlocks, Block{0, 0});
  r->lx.assign(n * kBits, Block{0, 0});
  r->ly.assign(n * kBits, Block{0, 0});
  r->decode.assign(n, 0);
  r->bits.assign(n, 0);
  r->mask.assign(n, 0);
  std::string err;
  // Garbled and encoded in two parts, as for T1 and T2 (the protocol), and
  // the tables once more as one batch: the parts must be its slices.
  const int64_t h = n / 2 + (n > 2 ? 1 : 0);
  std::vector<Block> whole(r->tables.size());
  std::vector<uint8_t> whole_decode(n);
  bool ok = Garble(key, nonce, BatchSlice{n, 0, n}, whole.data(), whole_decode.data(), pf,
                   &err) &&
            OutputMask(key, nonce, n, r->mask.data(), pf, &err);
  for (const BatchSlice& s : {BatchSlice{n, 0, h}, BatchSlice{n, h, n - h}})
    ok = ok &&
         Garble(key, nonce, s, r->tables.data() + s.first * kBits * kTableBlocks,
                r->decode.data() + s.first, pf, &err) &&
         EncodeInput(key, nonce, Role::kX, x.data() + s.first, s,
                     r->lx.data() + s.first * kBits, pf, &err) &&
         EncodeInput(key, nonce, Role::kY, y.data() + s.first, s,
                     r->ly.data() + s.first * kBits, pf, &err) &&
         Evaluate(nonce, s.first, s.count, r->tables.data() + s.first * kBits * kTableBlocks,
                  r->decode.data() + s.first, r->lx.data() + s.first * kBits,
                  r->ly.data() + s.first * kBits, r->bits.data() + s.first, pf, &err);
  if (!ok) std::printf("error: %s\n", err.c_str());
  if (ok && (memcmp(whole.data(), r->tables.data(), whole.size() * sizeof(Block)) != 0 ||
             whole_decode != r->decode)) {
    std::printf("error: parts garbled apart differ from the whole batch\n");
    return false;
  }
  return ok;
}

bool SameBlocks(const std::vector<Block>& a, const std::vector<Block>& b) {
  return a.size() == b.size() &&
         (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof(Block)) == 0);
}

}  // namespace

int main() {
  std::mt19937_64 rng(2024);
  uint8_t key[16];
  for (auto& k : key) k = static_cast<uint8_t>(rng());
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<int64_t> edges = {0, 1, -1, 2, -2, kMin, kMax, kMin + 1,
                                      kMax - 1, 1LL << 62, -(1LL << 62)};
  std::vector<int64_t> ys, xs;
  for (int64_t a : edges)
    for (int64_t b : edges) ys.push_back(a), xs.push_back(b);
  for (int i = 0; i < 20000; ++i) {
    const int kind = i % 4;
    int64_t a = static_cast<int64_t>(rng()), b = static_cast<int64_t>(rng());
    if (kind == 1) b = a;                                       // equal
    if (kind == 2) b = a + static_cast<int64_t>(rng() % 3) - 1;  // near
    if (kind == 3) a = static_cast<int64_t>(rng() % 2001) - 1000,
                   b = static_cast<int64_t>(rng() % 2001) - 1000;
    ys.push_back(a), xs.push_back(b);
  }
  const int64_t n = static_cast<int64_t>(xs.size());

  const ParallelFor serial = tf_privpy::SerialFor;
  const ParallelFor threaded = MakeThreadedFor(3);
  Run r1, r2, r3;
  Check(GarbleAndEvaluate(key, 7, ys, xs, serial, &r1), "serial run");
  Check(GarbleAndEvaluate(key, 7, ys, xs, threaded, &r2), "threaded run");
  int64_t wrong = 0, ones = 0, bad_range = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t want = ys[i] < xs[i];
    wrong += ((r1.bits[i] ^ r1.mask[i]) != want) + ((r2.bits[i] ^ r2.mask[i]) != want);
    ones += r1.mask[i];
    bad_range += r1.bits[i] > 1 || r1.mask[i] > 1;
  }
  Check(wrong == 0, "b' ^ m == [y < x] (" + std::to_string(wrong) + " wrong)");
  Check(bad_range == 0, "bits and mask in {0, 1}");
  Check(ones > n / 2 - n / 20 && ones < n / 2 + n / 20, "mask about uniform");
  Check(SameBlocks(r1.tables, r2.tables) && r1.decode == r2.decode &&
            SameBlocks(r1.lx, r2.lx) && SameBlocks(r1.ly, r2.ly),
        "serial and threaded garbling identical (deterministic)");

  // Another nonce: everything fresh.
  Check(GarbleAndEvaluate(key, 8, ys, xs, threaded, &r3), "nonce 8 run");
  int64_t same_tables = 0;
  for (size_t j = 0; j < r1.tables.size(); ++j)
    same_tables += r1.tables[j].lo == r3.tables[j].lo;
  Check(same_tables < 4, "tables differ across nonces");
  Check(!SameBlocks(r1.lx, r3.lx) && r1.mask != r3.mask, "labels and masks differ across nonces");
  wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += (r3.bits[i] ^ r3.mask[i]) != (ys[i] < xs[i]);
  Check(wrong == 0, "nonce 8 correct");

  // A flipped label bit (not the lsb, which would be a clean bit flip):
  // evaluation must not give the right answer reliably.
  {
    std::vector<Block> lx = r1.lx;
    std::vector<uint8_t> bits(n);
    for (int64_t i = 0; i < n; ++i) lx[i * kBits + 10].hi ^= 1ULL << 17;
    std::string err;
    Check(Evaluate(7, 0, n, r1.tables.data(), r1.decode.data(), lx.data(), r1.ly.data(),
                   bits.data(), threaded, &err), "evaluate tampered");
    int64_t right = 0;
    for (int64_t i = 0; i < n; ++i) right += (bits[i] ^ r1.mask[i]) == (ys[i] < xs[i]);
    Check(right < n * 6 / 10 && right > n * 4 / 10, "wrong label gives garbage");
    // Wrong nonce at evaluation: garbage too.
    Check(Evaluate(9, 0, n, r1.tables.data(), r1.decode.data(), r1.lx.data(), r1.ly.data(),
                   bits.data(), threaded, &err), "evaluate wrong nonce");
    right = 0;
    for (int64_t i = 0; i < n; ++i) right += (bits[i] ^ r1.mask[i]) == (ys[i] < xs[i]);
    Check(right < n * 6 / 10 && right > n * 4 / 10, "wrong nonce gives garbage");
  }

  // T1 and T2 each evaluate a slice of the batch (DESIGN §6): a slice
  // starting at comparison f is evaluated with first_index = f.
  {
    const int64_t f = 4001;
    std::vector<uint8_t> lo(f), hi(n - f), shifted(n - f);
    std::string err;
    bool ok = Evaluate(7, 0, f, r1.tables.data(), r1.decode.data(), r1.lx.data(),
                       r1.ly.data(), lo.data(), threaded, &err) &&
              Evaluate(7, f, n - f, r1.tables.data() + f * kBits * kTableBlocks,
                       r1.decode.data() + f, r1.lx.data() + f * kBits,
                       r1.ly.data() + f * kBits, hi.data(), threaded, &err) &&
              Evaluate(7, 0, n - f, r1.tables.data() + f * kBits * kTableBlocks,
                       r1.decode.data() + f, r1.lx.data() + f * kBits,
                       r1.ly.data() + f * kBits, shifted.data(), threaded, &err);
    int64_t bad = 0, right = 0;
    for (int64_t i = 0; i < n; ++i)
      bad += (i < f ? lo[i] : hi[i - f]) != r1.bits[i];
    for (int64_t i = f; i < n; ++i) right += shifted[i - f] == r1.bits[i];
    Check(ok && bad == 0, "split evaluation with first_index");
    Check(right < (n - f) * 6 / 10, "slice evaluated with the wrong first_index is garbage");
    Check(!Evaluate(7, -1, 1, r1.tables.data(), r1.decode.data(), r1.lx.data(),
                    r1.ly.data(), lo.data(), serial, &err), "first_index < 0 rejected");
  }

  // Batch sizes around the chunk size, n = 0 and the Delta invariant.
  for (int64_t m : {0, 1, 127, 128, 129, 300}) {
    std::vector<int64_t> a(ys.begin(), ys.begin() + m), b(xs.begin(), xs.begin() + m);
    Run r;
    bool ok = GarbleAndEvaluate(key, 100 + m, a, b, threaded, &r);
    for (int64_t i = 0; i < m; ++i) ok = ok && ((r.bits[i] ^ r.mask[i]) == (a[i] < b[i]));
    Check(ok, "n = " + std::to_string(m));
  }
  Block delta;
  std::string err;
  Check(DeriveDelta(key, 7, &delta, &err) && (delta.lo & 1) == 1, "lsb(Delta) = 1");
  Check(!Garble(key, 7, BatchSlice{-1, 0, 0}, nullptr, nullptr, serial, &err), "n < 0 rejected");
  Check(!Garble(key, 7, BatchSlice{4, 3, 2}, nullptr, nullptr, serial, &err),
        "a part beyond the batch rejected");

  return tf_privpy::testing::Report();
}
