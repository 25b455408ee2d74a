// Standalone benchmark of the BatchCrypt codec on one thread (no TensorFlow):
//   make -f ops/batchcrypt/Makefile.standalone bench
// 10^6 values, r = 16, m = 9, 2048-bit plaintexts (w = 20, k = 102).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "ops/batchcrypt/batchcrypt.h"

namespace bc = tf_privpy::batchcrypt;

int main() {
  const int r = 16, pad = 4, w = r + pad;
  const int64_t key_bits = 2048, k = (key_bits - 1 - pad) / w, bytes = key_bits / 8;
  const int64_t n = 1000000, nct = (n + k - 1) / k, qmax = (1 << (r - 2)) - 1;
  std::mt19937 rng(1);
  std::vector<int32_t> q(n);
  for (auto& v : q) v = static_cast<int32_t>(rng() % (2 * qmax + 1)) - static_cast<int32_t>(qmax);
  std::vector<uint8_t> pts(nct * bytes);
  std::vector<int64_t> values(n);
  std::vector<char> mask(n);
  using clock = std::chrono::steady_clock;
  double best_pack = 1e9, best_unpack = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = clock::now();
    for (int64_t j = 0; j < nct; ++j) {
      bc::PackPlaintext(q.data() + j * k, std::min(k, n - j * k), w, k, bytes,
                        pts.data() + j * bytes);
    }
    auto t1 = clock::now();
    bc::OverflowCounts c;
    for (int64_t j = 0; j < nct; ++j) {
      bc::UnpackPlaintext(pts.data() + j * bytes, bytes, w, k, std::min(k, n - j * k),
                          9 * qmax, values.data() + j * k,
                          reinterpret_cast<bool*>(mask.data()) + j * k, &c);
    }
    auto t2 = clock::now();
    best_pack = std::min(best_pack, std::chrono::duration<double>(t1 - t0).count());
    best_unpack = std::min(best_unpack, std::chrono::duration<double>(t2 - t1).count());
    if (c.positive || c.negative) return 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (values[i] != q[i]) return 1;
  }
  std::printf("pack   %.1f ns/value (%.0f M values/s)\n", best_pack * 1e9 / n, n / best_pack / 1e6);
  std::printf("unpack %.1f ns/value (%.0f M values/s)\n", best_unpack * 1e9 / n,
              n / best_unpack / 1e6);
  return 0;
}
