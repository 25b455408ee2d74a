// Parallel-for abstraction so that kernel math (ops/*/...) does not depend on
// TensorFlow and can be unit-tested standalone. Kernels pass a function that
// forwards to TF's CPU worker thread pool (see ops/common/tf_parallel.h).
#ifndef TF_PRIVPY_OPS_COMMON_PARALLEL_H_
#define TF_PRIVPY_OPS_COMMON_PARALLEL_H_

#include <cstdint>
#include <functional>

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

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_COMMON_PARALLEL_H_
