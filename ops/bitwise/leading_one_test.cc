// Standalone test of the bitwise leading one (leading_one.h) against a plain
// reference: S1, S2 and the dealer run in one process on random stream
// words, exchanging messages as the protocol does; every column's revealed
// bit must equal the reference's for every width 3..63, with and without the
// magnitude, in both rings, at 0, -1, the powers of two and their
// neighbours, the width's edges and random values; and the fused finish
// (FinishTable) against the reference bits times a random table.
//   make -f ops/bitwise/Makefile.standalone test
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ops/bitwise/leading_one.h"
#include "ops/common/ring_types.h"
#include "ops/common/test_check.h"

using namespace tf_privpy;
using namespace tf_privpy::bitwise::lo;

namespace {

// The reference: column j < W - 1 of x = (a + b) mod 2^W is [v >= 2^j], v the
// low W - 1 bits of x or of its one's complement (magnitude; column 0 is
// then [x != 0]); column W - 1 is the sign bit.
int Reference(uint64_t a, uint64_t b, int W, bool magnitude, int j) {
  const uint64_t mw = W == 64 ? ~uint64_t{0} : (uint64_t{1} << W) - 1;
  const uint64_t x = (a + b) & mw, s = (x >> (W - 1)) & 1;
  if (j == W - 1) return static_cast<int>(s);
  if (magnitude && j == 0) return x != 0;
  const uint64_t v = (magnitude && s ? ~x : x) & ((uint64_t{1} << (W - 1)) - 1);
  return v >= (uint64_t{1} << j);
}

template <typename T>
T RandomRing(std::mt19937_64& rng) {
  T r = static_cast<T>(rng());
  if (RingTraits<T>::kLimbs == 2) r ^= static_cast<T>(rng()) << (RingTraits<T>::kBits / 2);
  return r;
}

template <typename T>
void Run(int W, bool magnitude, const std::vector<uint64_t>& xs, std::mt19937_64& rng) {
  const Plan plan(W);
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<int> cols, pos;
  for (int j = 0; j < W; ++j) {
    cols.push_back(j);
    pos.push_back(plan.Position(j, magnitude));
  }
  const int K = static_cast<int>(cols.size());
  // shares: a random, b = x - a (mod 2^64: the circuit reads the low W bits)
  std::vector<uint64_t> low[2] = {std::vector<uint64_t>(n), std::vector<uint64_t>(n)};
  for (int64_t i = 0; i < n; ++i) {
    low[0][i] = rng();
    low[1][i] = xs[i] - low[0][i];
  }
  // each party's stream segments, and S1's ring words
  const int G = plan.Segments();
  std::vector<std::vector<uint64_t>> seg[2];
  for (int p = 0; p < 2; ++p)
    for (int g = 0; g < G; ++g) {
      seg[p].emplace_back(n * plan.OwnWords(p, g));
      for (auto& w : seg[p].back()) w = rng();
    }
  std::vector<T> ring1(n * K), ring2(n * K);
  for (auto& r : ring1) r = RandomRing<T>(rng);
  std::vector<uint64_t> corr(n * plan.CorrTotal());
  std::vector<const uint64_t*> p1, p2;
  for (int g = 0; g < G; ++g) {
    p1.push_back(seg[0][g].data());
    p2.push_back(seg[1][g].data());
  }
  Deal(plan, p1.data(), p2.data(), corr.data(), 0, n);
  DealRing<T>(seg[0][G - 1].data(), seg[1][G - 1].data(), ring1.data(), pos.data(), K,
              ring2.data(), 0, n);
  std::vector<uint64_t> state[2], msg[2];
  for (int step = 0; step < plan.Steps(); ++step) {
    std::vector<uint64_t> st[2], m[2];
    for (int p = 0; p < 2; ++p) {
      st[p].resize(n * kStateWords);
      m[p].resize(n * plan.MessageWords(step));
      const uint64_t* prev = step > 0 ? seg[p][step - 1].data() : nullptr;
      Step(plan, magnitude, step, p, low[p].data(), step > 0 ? state[p].data() : nullptr,
           step > 0 ? msg[1 - p].data() : nullptr, prev, seg[p][step].data(),
           p == 1 ? corr.data() : nullptr, st[p].data(), m[p].data(), 0, n);
    }
    for (int p = 0; p < 2; ++p) {
      state[p].swap(st[p]);
      msg[p].swap(m[p]);
    }
  }
  std::vector<T> out[2] = {std::vector<T>(n * K), std::vector<T>(n * K)};
  Finish<T>(0, msg[0].data(), msg[1].data(), ring1.data(), pos.data(), K, out[0].data(), 0, n);
  Finish<T>(1, msg[1].data(), msg[0].data(), ring2.data(), pos.data(), K, out[1].data(), 0, n);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < K; ++c) {
      const T got = out[0][i * K + c] + out[1][i * K + c];
      const int want = Reference(low[0][i], low[1][i], W, magnitude, cols[c]);
      if (got != static_cast<T>(want) && ++bad <= 3)
        std::printf("W=%d magnitude=%d x=%lld column %d: got %llu, want %d\n", W, magnitude,
                    static_cast<long long>(xs[i]), cols[c],
                    static_cast<unsigned long long>(static_cast<uint64_t>(got)), want);
    }
  ::tf_privpy::testing::Check(bad == 0, "bitwise leading one, W=" + std::to_string(W) +
                                            (magnitude ? " magnitude" : " plain") + " (" +
                                            std::to_string(RingTraits<T>::kBits) + "-bit)");
  // FinishTable: the same messages and ring shares times a public table
  // [K + 1, J] of signed values up to 2^62 (the range reductions' grid
  // coefficients are int64), against the plain bits times the table mod 2^l
  const int J = 1 + static_cast<int>(rng() % 5);
  std::vector<int64_t> table((K + 1) * J);
  for (auto& t : table) t = static_cast<int64_t>(rng()) >> (1 + rng() % 62);
  std::vector<T> fused[2] = {std::vector<T>(n * J), std::vector<T>(n * J)};
  FinishTable<T>(0, msg[0].data(), msg[1].data(), ring1.data(), pos.data(), K, table.data(), J,
                 fused[0].data(), 0, n);
  FinishTable<T>(1, msg[1].data(), msg[0].data(), ring2.data(), pos.data(), K, table.data(), J,
                 fused[1].data(), 0, n);
  int bad_table = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < J; ++c) {
      T want = static_cast<T>(table[K * J + c]);
      for (int b = 0; b < K; ++b)
        want += static_cast<T>(Reference(low[0][i], low[1][i], W, magnitude, cols[b])) *
                static_cast<T>(table[b * J + c]);
      if (fused[0][i * J + c] + fused[1][i * J + c] != want) ++bad_table;
    }
  ::tf_privpy::testing::Check(bad_table == 0, "fused leading one x table, W=" +
                                                  std::to_string(W) + " J=" + std::to_string(J) +
                                                  " (" + std::to_string(RingTraits<T>::kBits) +
                                                  "-bit)");
}

std::vector<uint64_t> Values(int W, std::mt19937_64& rng) {
  std::vector<uint64_t> xs = {0, 1, ~uint64_t{0}, 2, ~uint64_t{1}};
  for (int j = 0; j < 64; ++j) {
    const uint64_t p = uint64_t{1} << j;
    for (uint64_t v : {p, p - 1, p + 1, uint64_t{0} - p, uint64_t{0} - p - 1, uint64_t{0} - p + 1})
      xs.push_back(v);
  }
  const uint64_t mw = (uint64_t{1} << W) - 1;
  for (int i = 0; i < 400; ++i) {
    xs.push_back(rng());
    xs.push_back(rng() & mw);
    xs.push_back(rng() >> (rng() % 64));              // every magnitude
    xs.push_back(uint64_t{0} - (rng() >> (rng() % 64)));
  }
  return xs;
}

}  // namespace

int main() {
  std::mt19937_64 rng(20261129);
  for (int W = 3; W <= kMaxWidth; ++W) {
    const auto xs = Values(W, rng);
    for (bool magnitude : {false, true}) {
      Run<uint64_t>(W, magnitude, xs, rng);
      Run<uint128_t>(W, magnitude, xs, rng);
    }
  }
  // the plan's counts: A + O + 2 rounds, A = ceil(log2(W - 1)), O = ceil(log2 W)
  ::tf_privpy::testing::Check(Plan(46).Steps() == 14 && Plan(34).Steps() == 14, "rounds, W 34..46");
  ::tf_privpy::testing::Check(Plan(17).Steps() == 11 && Plan(20).Steps() == 12 && Plan(33).Steps() == 13, "rounds, W = 17, 20, 33");
  return ::tf_privpy::testing::Report();
}
