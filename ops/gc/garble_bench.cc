// Standalone benchmark of the garbled comparator: garbling (S1), input
// encoding (S1 + S2) and evaluation (T) throughput in comparisons per second
// for n = 10^3 .. 10^6, 2 threads. Run with OPENSSL_ia32cap="~0x200000200000000"
// to time OpenSSL's portable AES path.
// Build/run: make -f ops/gc/Makefile.standalone bench
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/gc/garble.h"

namespace {

using namespace tf_privpy::gc;  // NOLINT

// Two std::threads pulling one unit at a time (thread start-up, ~0.1 ms,
// is included in the timings).
const tf_privpy::ParallelFor TwoThreadFor = tf_privpy::MakeThreadedFor(1);

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

struct Timing {
  double wall = 1e30, cpu = 1e30;  // best wall-clock and best process CPU seconds
};

// Best of `reps` runs of fn(). CPU time (both threads summed) is reported
// too: on a shared machine it is far less noisy than wall-clock time.
template <typename Fn>
Timing Best(int reps, const Fn& fn) {
  Timing best;
  for (int r = 0; r < reps; ++r) {
    const double c0 = CpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    best.wall = std::min(best.wall, std::chrono::duration<double>(t1 - t0).count());
    best.cpu = std::min(best.cpu, CpuSeconds() - c0);
  }
  return best;
}

}  // namespace

int main() {
  std::mt19937_64 rng(1);
  uint8_t key[16];
  for (auto& k : key) k = static_cast<uint8_t>(rng());
  std::printf("comparisons per second, 2 threads, wall clock (in brackets: per "
              "CPU-second x 2, i.e. 2 fully available cores)\n");
  std::printf("%8s %22s %22s %22s %22s\n", "n", "garble", "encode x+y", "evaluate",
              "garble+encode+eval");
  for (int64_t n : {1000, 10000, 100000, 1000000}) {
    std::vector<int64_t> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) x[i] = rng(), y[i] = rng();
    std::vector<Block> tables(n * kBits * kTableBlocks), lx(n * kBits), ly(n * kBits);
    std::vector<uint8_t> decode(n), bits(n), mask(n);
    const int reps = n >= 1000000 ? 3 : n >= 100000 ? 5 : 20;
    std::string err;
    bool ok = true;
    uint64_t nonce = 1;
    const BatchSlice all{n, 0, n};
    const Timing tg = Best(reps, [&] {
      ok &= Garble(key, nonce, all, tables.data(), decode.data(), TwoThreadFor, &err);
    });
    const Timing te = Best(reps, [&] {
      ok &= EncodeInput(key, nonce, Role::kX, x.data(), all, lx.data(), TwoThreadFor, &err);
      ok &= EncodeInput(key, nonce, Role::kY, y.data(), all, ly.data(), TwoThreadFor, &err);
    });
    const Timing tv = Best(reps, [&] {
      ok &= Evaluate(nonce, 0, n, tables.data(), decode.data(), lx.data(), ly.data(),
                     bits.data(), TwoThreadFor, &err);
    });
    ok &= OutputMask(key, nonce, n, mask.data(), TwoThreadFor, &err);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += (bits[i] ^ mask[i]) != (y[i] < x[i]);
    if (!ok || wrong) {
      std::printf("FAILED (n = %lld, %lld wrong): %s\n", static_cast<long long>(n),
                  static_cast<long long>(wrong), err.c_str());
      return 1;
    }
    auto cell = [n](double wall, double cpu) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%9.0f (%9.0f)", n / wall, 2 * n / cpu);
      return std::string(buf);
    };
    std::printf("%8lld %22s %22s %22s %22s\n", static_cast<long long>(n),
                cell(tg.wall, tg.cpu).c_str(), cell(te.wall, te.cpu).c_str(),
                cell(tv.wall, tv.cpu).c_str(),
                cell(tg.wall + te.wall + tv.wall, tg.cpu + te.cpu + tv.cpu).c_str());
  }
  return 0;
}
