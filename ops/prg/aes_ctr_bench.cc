// Benchmark of PrgFill: EVP path (TF_PRIVPY_DISABLE_VAES=1; here the
// system's OpenSSL, inside TF BoringSSL) vs the VAES path the CPU takes by
// default (ZMM with AVX-512, else YMM), and on AVX-512 machines also the YMM
// path (TF_PRIVPY_PRG_YMM=1), on one thread, for the 32 KB chunks of the multiplication kernels (2048 128-bit
// elements) and a 1.6 MB mask.
// Build/run: make -f ops/prg/Makefile.standalone bench
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/prg/aes_ctr.h"
#include "ops/prg/aes_ctr_internal.h"

namespace {

using tf_privpy::ParallelFor;

// Best of 7 rounds of ~50 ms each: seconds per fill.
double TimeFill(size_t len, const ParallelFor& pf, bool vaes, bool ymm) {
  setenv("TF_PRIVPY_DISABLE_VAES", vaes ? "0" : "1", 1);
  setenv("TF_PRIVPY_PRG_YMM", ymm ? "1" : "0", 1);
  std::vector<uint8_t> out(len);
  const uint8_t key[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::string error;
  uint64_t offset = 0;
  auto fill = [&] {
    if (!tf_privpy::PrgFill(key, 7, offset, out.data(), len, pf, &error)) {
      std::printf("PrgFill failed: %s\n", error.c_str());
      std::exit(1);
    }
    offset += len;  // a fresh part of the stream each call, as the kernels do
  };
  using Clock = std::chrono::steady_clock;
  fill();
  int reps = 1;
  for (;;) {  // calibrate to ~50 ms
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fill();
    if (std::chrono::duration<double>(Clock::now() - t0).count() > 0.05) break;
    reps *= 2;
  }
  double best = 1e30;
  for (int round = 0; round < 7; ++round) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fill();
    best = std::min(best,
                    std::chrono::duration<double>(Clock::now() - t0).count() / reps);
  }
  return best;
}

}  // namespace

int main() {
  namespace in = tf_privpy::aes_ctr_internal;
  unsetenv("TF_PRIVPY_DISABLE_VAES");
  unsetenv("TF_PRIVPY_PRG_YMM");
  const bool zmm = in::CpuHasVaes(), ymm = in::CpuHasVaesYmm();
  std::printf("AVX-512 VAES: %s, VAES+AVX2: %s; default path: %s\n", zmm ? "yes" : "no",
              ymm ? "yes" : "no", in::PrgPath());
  struct Case {
    const char* name;
    size_t len;
    ParallelFor pf;
  };
  const Case cases[] = {
      {"32 KB, 1 thread", size_t{32} << 10, tf_privpy::SerialFor},
      {"1.6 MB, 1 thread", 1600000, tf_privpy::SerialFor},
  };
  std::printf("%-20s %-4s %16s %16s %8s\n", "fill", "path", "EVP", "VAES", "speedup");
  for (const Case& c : cases) {
    const double evp = TimeFill(c.len, c.pf, false, false);
    for (int forced = 0; forced <= (zmm && ymm ? 1 : 0); ++forced) {
      const double vaes = TimeFill(c.len, c.pf, true, forced == 1);
      std::printf("%-20s %-4s %6.2f GB/s %5.1fus %6.2f GB/s %5.1fus %7.2fx\n", c.name,
                  in::PrgPath(), c.len / evp * 1e-9, evp * 1e6, c.len / vaes * 1e-9,
                  vaes * 1e6, evp / vaes);
    }
  }
  unsetenv("TF_PRIVPY_DISABLE_VAES");
  unsetenv("TF_PRIVPY_PRG_YMM");
  return 0;
}
