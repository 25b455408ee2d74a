// Standalone RingGemm benchmark: square M=K=N in {256, 512, 1024}, both
// rings, 2 threads, AVX-512 path and forced portable path.
// Build/run: make -f ops/ring/Makefile.standalone bench
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/ring/ring_gemm.h"
#include "ops/ring/ring_gemm_internal.h"

namespace {

using tf_privpy::GemmMode;
using tf_privpy::uint128_t;

// Two std::threads pulling one unit at a time (thread start-up, ~0.1 ms,
// is included in the timings).
const tf_privpy::ParallelFor TwoThreadFor = tf_privpy::MakeThreadedFor(1);

template <typename T>
double BenchMs(int64_t n, int reps) {
  std::mt19937_64 rng(42);
  std::vector<T> A(n * n), B(n * n), C(n * n);
  auto rnd = [&rng]() -> T {
    if constexpr (sizeof(T) == 8) {
      return rng();
    } else {
      return (T(rng()) << 64) ^ T(rng());
    }
  };
  for (auto& x : A) x = rnd();
  for (auto& x : B) x = rnd();
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {  // first run is warm-up
    auto t0 = std::chrono::steady_clock::now();
    tf_privpy::RingGemm<T>(A.data(), n, B.data(), n, C.data(), n, n, n, n,
                           GemmMode::kSet, TwoThreadFor);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    if (r > 0) best = std::min(best, ms);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool have = tf_privpy::ring_gemm_internal::CpuHasAvx512Ifma();
  std::printf("AVX-512 IFMA available: %s; 2 threads; best of N runs\n",
              have ? "yes" : "no");
  for (int path = 0; path < 2; ++path) {
    if (path == 0 && !have) continue;
    if (path == 1) setenv("TF_PRIVPY_DISABLE_AVX512", "1", 1);
    const char* name = path == 0 ? "fast(avx512-ifma)" : "portable";
    for (int64_t n : {256, 512, 1024}) {
      const int reps = quick ? 1 : (n <= 256 ? 20 : (n <= 512 ? 8 : 4));
      const int reps_portable = path == 1 && n == 1024 ? 2 : reps;
      std::printf("%-18s n=%4lld  uint64: %9.2f ms   uint128: %9.2f ms\n",
                  name, (long long)n, BenchMs<uint64_t>(n, reps_portable),
                  BenchMs<uint128_t>(n, reps_portable));
      std::fflush(stdout);
    }
  }
  return 0;
}
