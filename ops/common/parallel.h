// Parallel-for abstraction so that kernel math (ops/*/...) does not depend on
// TensorFlow and can be unit-tested standalone. Kernels pass a function that
// forwards to TF's CPU worker thread pool (see ops/common/tf_parallel.h).
#ifndef TF_PRIVPY_OPS_COMMON_PARALLEL_H_
#define TF_PRIVPY_OPS_COMMON_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tf_privpy {

// Runs fn(begin, end) over disjoint sub-ranges covering [0, total).
// cost_per_unit is an estimate of CPU cycles per unit, used to choose shards.
using ParallelFor = std::function<void(
    int64_t total, int64_t cost_per_unit,
    const std::function<void(int64_t begin, int64_t end)>& fn)>;

// Sequential implementation (tests, tiny inputs).
inline void SerialFor(int64_t total, int64_t /*cost_per_unit*/,
                      const std::function<void(int64_t, int64_t)>& fn) {
  if (total > 0) fn(0, total);
}

// `threads` std::threads pulling shards of `grain` units from a shared
// counter, so shard boundaries land anywhere in [0, total). For standalone
// C++ tests and benchmarks; the op library uses TF's pool (tf_util.h).
inline ParallelFor MakeThreadedFor(int64_t grain, int threads = 2) {
  return [grain, threads](int64_t total, int64_t,
                          const std::function<void(int64_t, int64_t)>& fn) {
    std::atomic<int64_t> next{0};
    auto worker = [&] {
      for (;;) {
        const int64_t b = next.fetch_add(grain);
        if (b >= total) return;
        fn(b, std::min(total, b + grain));
      }
    };
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  };
}

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_COMMON_PARALLEL_H_
