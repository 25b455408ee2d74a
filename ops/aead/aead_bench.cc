// Throughput of the channel AEAD (aead::Seal / aead::Open, the wire format
// with 1 MiB chunks) with the EVP path and with gcm_fast.cc's VAES path, in
// the same process, on one thread and on a 2-thread pool (the chunks of a
// message spread over the threads as on TF's pool). Which EVP runs depends on
// the link: benchmarks/aead_gcm.py links TF's libtensorflow_framework, i.e.
// the BoringSSL that the op library uses inside TensorFlow.
// Usage: aead_bench [runs] [MiB...]   (default: 7 runs of 1, 16 and 128 MiB)
// Prints one line per case: median GB/s (10^9 bytes of plaintext per second)
// of `runs` timed runs, each at least ~100 ms of back-to-back calls, the
// slowest and fastest run, and the median GB per CPU-second (process CPU
// time of all threads: on a shared machine, what one core does while it
// runs; for the pool, the efficiency, not the speed).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "ops/aead/aead.h"
#include "ops/aead/gcm_fast.h"
#include "ops/common/parallel.h"

namespace {

namespace aead = tf_privpy::aead;
using aead::GcmImpl;
using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

struct Timing {
  double wall, cpu;  // seconds per call: elapsed, and CPU time of all threads
};

// One timed run: calls repeated until >= 0.1 s.
template <typename F>
Timing TimeRun(const F& f) {
  int reps = 0;
  const auto t0 = Clock::now();
  const double c0 = CpuSeconds();
  double s = 0;
  do {
    f();
    ++reps;
    s = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (s < 0.1);
  return {s / reps, (CpuSeconds() - c0) / reps};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Fail(const std::string& what) {
  std::printf("FAILED: %s\n", what.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 7;
  std::vector<size_t> mib;
  for (int i = 2; i < argc; ++i) mib.push_back(static_cast<size_t>(std::atoi(argv[i])));
  if (mib.empty()) mib = {1, 16, 128};
  std::printf("fast path supported: %s (%s)\n", aead::fast::Supported() ? "yes" : "no",
              aead::fast::Path());
  if (!aead::fast::Supported()) return 0;
  const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const std::string aad = "tf_privpy aead bench";
  const auto pool = tf_privpy::MakeThreadedFor(1, 2);
  std::printf("%-6s %-8s %-5s %-5s %8s %8s %8s %8s\n", "MiB", "threads", "op", "impl",
              "median", "min", "max", "per_cpu");
  for (size_t m : mib) {
    const size_t len = m << 20;
    std::vector<uint8_t> plain(len), back(len), msg(aead::MessageBytes(len));
    for (size_t i = 0; i < len; ++i) plain[i] = static_cast<uint8_t>(i * 131 + 7);
    for (int threads : {1, 2}) {
      const tf_privpy::ParallelFor& pf = threads == 1 ? tf_privpy::SerialFor : pool;
      for (const char* op : {"seal", "open"}) {
        // Both implementations alternate run by run, so load changes on the
        // shared machine hit them alike.
        std::vector<double> gbs[2], per_cpu[2];
        for (int r = 0; r < runs; ++r) {
          for (int k = 0; k < 2; ++k) {
            const GcmImpl impl = k == 0 ? GcmImpl::kEvp : GcmImpl::kFast;
            std::string err;
            uint64_t counter = 0, got = 0;
            auto seal = [&] {
              if (!aead::Seal(key, 0, counter, aad, plain.data(), len, msg.data(), &err, pf,
                              impl))
                Fail("seal: " + err);
            };
            auto open = [&] {
              if (aead::Open(key, 0, aad, msg.data(), msg.size(), back.data(), &got, &err, pf,
                             impl) != aead::OpenStatus::kOk)
                Fail("open: " + err);
            };
            Timing t;
            if (op[0] == 's') {
              t = TimeRun(seal);
            } else {
              seal();
              t = TimeRun(open);
              if (back != plain) Fail("open returned other bytes");
            }
            gbs[k].push_back(len / t.wall / 1e9);
            per_cpu[k].push_back(len / t.cpu / 1e9);
          }
        }
        for (int k = 0; k < 2; ++k) {
          std::sort(gbs[k].begin(), gbs[k].end());
          std::printf("%-6zu %-8d %-5s %-5s %8.2f %8.2f %8.2f %8.2f\n", m, threads, op,
                      k == 0 ? "evp" : "fast", Median(gbs[k]), gbs[k].front(),
                      gbs[k].back(), Median(per_cpu[k]));
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
