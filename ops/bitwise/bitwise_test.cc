// Standalone test of the bitwise comparison (bitwise.h) against a plain
// reference: the three parties run in one process on random stream words,
// exchanging messages as the protocol does; the revealed bit must equal
// [x1 + x2 < 0] (signed 64-bit) for every pair, at ties, the bounds and
// random values, in both rings. Also checks the 64x64 bit transpose.
//   make -f ops/bitwise/Makefile.standalone test
#include <cstdio>
#include <random>
#include <vector>

#include "ops/bitwise/bitwise.h"
#include "ops/common/test_check.h"

#define CHECK(cond) ::tf_privpy::testing::Check((cond), #cond)

using namespace tf_privpy;
using namespace tf_privpy::bitwise;

namespace {

void TestTranspose(std::mt19937_64& rng) {
  uint64_t a[64], t[64];
  for (auto& w : a) w = rng();
  std::copy(a, a + 64, t);
  Transpose64(t);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) CHECK(((t[i] >> j) & 1) == ((a[j] >> i) & 1));
}

template <typename T>
void RunBatch(const std::vector<uint64_t>& x1, const std::vector<uint64_t>& x2,
              std::mt19937_64& rng, int frac_bits) {
  const int64_t n = static_cast<int64_t>(x1.size());
  const int64_t blocks = Blocks(n), npad = blocks * kBlock;
  std::vector<uint64_t> s[2];
  for (int p = 0; p < 2; ++p) {
    s[p].resize(OwnTotal(p, blocks));
    for (auto& w : s[p]) w = rng();
  }
  std::vector<T> ring1(npad), ring2(npad);
  for (auto& r : ring1) {
    r = static_cast<T>(rng());
    if (RingTraits<T>::kLimbs == 2) r ^= static_cast<T>(rng()) << (RingTraits<T>::kBits / 2);
  }
  std::vector<uint64_t> corr(CorrTotal(blocks));
  const T scale = T(1) << frac_bits;
  Deal(s[0].data(), s[1].data(), blocks, corr.data(), 0, blocks);
  DealRing<T>(s[0].data(), s[1].data(), blocks, ring1.data(), scale, ring2.data(), 0, npad);
  const uint64_t* low[2] = {x1.data(), x2.data()};
  std::vector<uint64_t> state[2], msg[2];
  for (int p = 0; p < 2; ++p) {
    state[p].resize(blocks * StateWords(0));
    msg[p].resize(blocks * MessageWords(0));
    Input(p, low[p], n, s[p].data(), blocks, state[p].data(), msg[p].data(), 0, blocks);
  }
  for (int step = 1; step < kSteps; ++step) {
    std::vector<uint64_t> st2[2], m2[2];
    for (int p = 0; p < 2; ++p) {
      st2[p].resize(blocks * StateWords(step));
      m2[p].resize(blocks * MessageWords(step));
      // only the words the step reads, as the kernel fills them
      int64_t first, last;
      StepRange(step, p, blocks, &first, &last);
      std::vector<uint64_t> own(s[p].begin() + first, s[p].begin() + last);
      Step(step, p, state[p].data(), msg[1 - p].data(), own.data(), first,
           p == 1 ? corr.data() : nullptr, blocks, st2[p].data(), m2[p].data(), 0, blocks);
    }
    for (int p = 0; p < 2; ++p) {
      state[p].swap(st2[p]);
      msg[p].swap(m2[p]);
    }
  }
  std::vector<T> out[2];
  const T* R[2] = {ring1.data(), ring2.data()};
  for (int p = 0; p < 2; ++p) {
    out[p].resize(n);
    Finish<T>(p, msg[p].data(), msg[1 - p].data(), R[p], scale, out[p].data(), 0, n);
  }
  // Select: shares of [msb]·v for k operands from shares of v and of r·v
  // (r the dealt bit, as DealRing reads it); y1 + y2 must be msb·v.
  const int64_t k = 3;
  const int64_t o1 = OwnOffset(0, kSegments - 1, blocks), o2 = OwnOffset(1, kSegments - 1, blocks);
  auto random_t = [&rng] {
    T r = static_cast<T>(rng());
    if (RingTraits<T>::kLimbs == 2) r ^= static_cast<T>(rng()) << (RingTraits<T>::kBits / 2);
    return r;
  };
  std::vector<T> v[2], w[2], y[2];
  for (int p = 0; p < 2; ++p) {
    v[p].resize(k * n);
    w[p].resize(k * n);
    y[p].resize(k * n);
    for (auto& e : v[p]) e = random_t();
  }
  for (int64_t f = 0; f < k * n; ++f) {
    const int64_t i = f % n, b = i / kBlock;
    const T r = static_cast<T>(((s[0][o1 + b] ^ s[1][o2 + b]) >> (i % kBlock)) & 1);
    w[0][f] = random_t();
    w[1][f] = r * (v[0][f] + v[1][f]) - w[0][f];
  }
  for (int p = 0; p < 2; ++p) {   // in two pieces, as the thread pool may split it
    Select<T>(msg[p].data(), msg[1 - p].data(), v[p].data(), w[p].data(), n, y[p].data(), 0,
              k * n / 2);
    Select<T>(msg[p].data(), msg[1 - p].data(), v[p].data(), w[p].data(), n, y[p].data(),
              k * n / 2, k * n);
  }
  int wrong_select = 0;
  for (int64_t f = 0; f < k * n; ++f) {
    const int64_t i = f % n;
    const bool msb = static_cast<int64_t>(x1[i] + x2[i]) < 0;
    if (y[0][f] + y[1][f] != (msb ? v[0][f] + v[1][f] : T(0))) ++wrong_select;
  }
  CHECK(wrong_select == 0);
  int wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool want = static_cast<int64_t>(x1[i] + x2[i]) < 0;
    const T got = out[0][i] + out[1][i];
    if (got != (want ? scale : T(0))) ++wrong;
  }
  CHECK(wrong == 0);
  if (wrong) std::printf("  %d of %lld wrong (ring %d)\n", wrong, (long long)n,
                         RingTraits<T>::kBits);
}

template <typename T>
void TestRing(std::mt19937_64& rng) {
  // Edge values of x = x1 + x2, each split at random: ties (0), +-1, the
  // bounds, powers of two around them; then random values.
  std::vector<int64_t> xs = {0, 1, -1, 2, -2, INT64_MAX, INT64_MIN, INT64_MAX - 1,
                             INT64_MIN + 1};
  for (int k = 0; k < 63; ++k) {
    const int64_t v = int64_t{1} << k;
    xs.insert(xs.end(), {v, -v, v - 1, -v + 1, v + 1, -v - 1});
  }
  std::vector<uint64_t> x1, x2;
  for (int rep = 0; rep < 20; ++rep)
    for (int64_t v : xs) {
      const uint64_t r = rng();
      x1.push_back(r);
      x2.push_back(static_cast<uint64_t>(v) - r);
    }
  for (int i = 0; i < 100000; ++i) {
    x1.push_back(rng());
    x2.push_back(rng());
  }
  // shares of one of them all-zero (a public operand) and n not a multiple of 64
  for (int i = 0; i < 77; ++i) {
    x1.push_back(rng());
    x2.push_back(0);
  }
  RunBatch<T>(x1, x2, rng, 0);
  RunBatch<T>(x1, x2, rng, 20);
  // tiny batches: 1 element, 63, 64, 65
  for (int64_t n : {1, 63, 64, 65}) {
    std::vector<uint64_t> a(x1.begin(), x1.begin() + n), b(x2.begin(), x2.begin() + n);
    RunBatch<T>(a, b, rng, 16);
  }
}

void TestSizes() {
  // bytes per comparison: both servers' messages and the dealer's words
  int64_t msg = 0, corr = 0;
  for (int s = 0; s < kSteps; ++s) msg += 2 * MessageWords(s);
  for (int s = 0; s <= kLevels; ++s) corr += CorrWords(s);
  CHECK(msg == 2 * (63 + 95 + 47 + 23 + 11 + 5 + 2 + 1));
  CHECK(corr == 63 + 120);
  CHECK(OwnTotal(0, 1) == 430);
  CHECK(OwnTotal(1, 1) == 247);
  // the state widths bitwise_ops.cc's shape functions declare (kStateWords)
  const int state_words[kSteps] = {64, 129, 65, 33, 17, 9, 5, 3};
  for (int s = 0; s < kSteps; ++s) CHECK(StateWords(s) == state_words[s]);
  std::printf("  per comparison: %.1f bytes of messages, %.1f of corrections + a ring element\n",
              msg * 8.0 / kBlock, corr * 8.0 / kBlock);
}

}  // namespace

int main() {
  std::mt19937_64 rng(20261128);
  TestTranspose(rng);
  TestSizes();
  TestRing<uint64_t>(rng);
  TestRing<uint128_t>(rng);
  return tf_privpy::testing::Report();
}
