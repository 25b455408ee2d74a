// Standalone test for RingGemm: compares against a naive triple loop for both
// rings, all modes, many shapes and leading dimensions, on the AVX-512 path
// (if the CPU has it), the AVX2 path of the 128-bit ring (if it has that) and
// the forced portable path, serially and with a 2-thread ParallelFor. Build/run: make -f ops/ring/Makefile.standalone test
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/ring/ring_gemm.h"
#include "ops/ring/ring_gemm_internal.h"

namespace {

using tf_privpy::GemmMode;
using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::uint128_t;


template <typename T>
T RandomValue(std::mt19937_64& rng, int pattern) {
  switch (pattern) {
    case 1: return ~T(0);  // all ones: worst case for carries / junk bounds
    case 2: return T(rng() % 5) - T(2);  // small signed values
    default: {
      if constexpr (sizeof(T) == 8) {
        return rng();
      } else {
        return (T(rng()) << 64) | T(rng());
      }
    }
  }
}

template <typename T>
void Reference(const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
               int64_t ldc, int64_t M, int64_t K, int64_t N, GemmMode mode) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T s = 0;
      for (int64_t k = 0; k < K; ++k) s += A[i * lda + k] * B[k * ldb + j];
      T& c = C[i * ldc + j];
      c = mode == GemmMode::kSet ? s : (mode == GemmMode::kAdd ? c + s : c - s);
    }
  }
}

struct Shape {
  int64_t M, K, N, lda_pad, ldb_pad, ldc_pad;
};

int g_passed = 0, g_failed = 0;

template <typename T>
void RunCase(const Shape& s, int pattern, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t lda = s.K + s.lda_pad, ldb = s.N + s.ldb_pad,
                ldc = s.N + s.ldc_pad;
  // Allocate at least one element so pointers are valid for 0-sized shapes.
  std::vector<T> A(std::max<int64_t>(1, s.M * lda)),
      B(std::max<int64_t>(1, s.K * ldb)), C0(std::max<int64_t>(1, s.M * ldc));
  for (auto& x : A) x = RandomValue<T>(rng, pattern);
  for (auto& x : B) x = RandomValue<T>(rng, pattern);
  for (auto& x : C0) x = RandomValue<T>(rng, 0);

  const char* paths[] = {"fast",         "avx2",         "portable",
                         "fast-blocked", "avx2-blocked", "portable-blocked"};
  const GemmMode modes[] = {GemmMode::kSet, GemmMode::kAdd, GemmMode::kSub};
  const char* mode_names[] = {"set", "add", "sub"};
  std::vector<std::pair<std::string, ParallelFor>> fors = {
      {"serial", tf_privpy::SerialFor},
      {"2threads", MakeThreadedFor(1)},
      {"2threads-g3", MakeThreadedFor(3)}};
  for (int mi = 0; mi < 3; ++mi) {
    std::vector<T> ref = C0;
    Reference(A.data(), lda, B.data(), ldb, ref.data(), ldc, s.M, s.K, s.N,
              modes[mi]);
    // p % 3: the best kernel, AVX-512 off (the 128-bit ring's AVX2 kernel
    // where the CPU has AVX2), both off (portable); p >= 3: the blocked
    // driver even for skinny shapes
    for (int p = 0; p < 6; ++p) {
      if (p % 3 >= 1) {
        setenv("TF_PRIVPY_DISABLE_AVX512", "1", 1);
      } else {
        unsetenv("TF_PRIVPY_DISABLE_AVX512");
      }
      if (p % 3 == 2) {
        setenv("TF_PRIVPY_DISABLE_AVX2", "1", 1);
      } else {
        unsetenv("TF_PRIVPY_DISABLE_AVX2");
      }
      if (p >= 3) {
        setenv("TF_PRIVPY_DISABLE_SKINNY_GEMM", "1", 1);
      } else {
        unsetenv("TF_PRIVPY_DISABLE_SKINNY_GEMM");
      }
      for (auto& f : fors) {
        std::vector<T> C = C0;
        tf_privpy::RingGemm<T>(A.data(), lda, B.data(), ldb, C.data(), ldc,
                               s.M, s.K, s.N, modes[mi], f.second);
        // Compares padding too: it must be left untouched.
        int64_t bad = -1;
        for (size_t i = 0; i < C.size() && bad < 0; ++i) {
          if (C[i] != ref[i]) bad = static_cast<int64_t>(i);
        }
        if (bad < 0) {
          ++g_passed;
        } else {
          ++g_failed;
          std::printf(
              "FAIL T=u%zu M=%lld K=%lld N=%lld lda=%lld ldb=%lld ldc=%lld "
              "pattern=%d mode=%s path=%s for=%s first bad index %lld\n",
              sizeof(T) * 8, (long long)s.M, (long long)s.K, (long long)s.N,
              (long long)lda, (long long)ldb, (long long)ldc, pattern,
              mode_names[mi], paths[p], f.first.c_str(), (long long)bad);
        }
      }
    }
  }
  unsetenv("TF_PRIVPY_DISABLE_AVX512");
  unsetenv("TF_PRIVPY_DISABLE_AVX2");
  unsetenv("TF_PRIVPY_DISABLE_SKINNY_GEMM");
}

template <typename T>
void RunAll() {
  std::vector<Shape> shapes = {
      {0, 0, 0, 0, 0, 0},     {0, 5, 3, 1, 0, 2},    {3, 0, 4, 0, 1, 3},
      {4, 5, 0, 2, 0, 0},     {1, 1, 1, 0, 0, 0},    {1, 1, 1, 3, 5, 7},
      {17, 33, 65, 0, 0, 0},  {17, 33, 65, 5, 3, 9}, {129, 257, 31, 0, 0, 0},
      {129, 257, 31, 7, 1, 2}, {8, 8, 8, 0, 0, 0},   {16, 256, 16, 0, 0, 0},
      {9, 7, 15, 1, 1, 1},    {7, 300, 9, 0, 0, 3},  {64, 513, 72, 2, 2, 2},
      {1, 600, 1, 0, 0, 0},   {200, 17, 300, 0, 4, 1}, {300, 64, 5, 1, 0, 0},
      {5, 64, 300, 0, 0, 0},  {33, 1000, 9, 0, 0, 0}, {96, 96, 96, 0, 0, 0},
      {130, 70, 270, 3, 3, 3}, {270, 40, 130, 0, 0, 0},
      // skinny: matrix-vector (N <= 2) and vector-matrix (M <= 2) products
      {128, 784, 1, 0, 0, 0}, {784, 128, 1, 3, 2, 1}, {1, 784, 128, 0, 0, 0},
      {2, 300, 259, 1, 2, 3}, {300, 17, 2, 2, 0, 1}, {1, 1000, 513, 0, 0, 0},
      {3, 50, 600, 0, 0, 0}, {600, 50, 3, 0, 0, 0},
      // few outputs over a long contraction (a filter gradient): K split
      // across threads, the slices' sums added into C
      {25, 5000, 5, 0, 0, 0}, {25, 4000, 5, 2, 1, 3}, {70, 3000, 9, 1, 1, 1},
      {3, 2500, 40, 0, 2, 0}};
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 30; ++i) {
    shapes.push_back({int64_t(rng() % 70), int64_t(rng() % 300),
                      int64_t(rng() % 70), int64_t(rng() % 3),
                      int64_t(rng() % 3), int64_t(rng() % 3)});
  }
  uint64_t seed = 1;
  for (const Shape& s : shapes) RunCase<T>(s, 0, seed++);
  // Extreme values with K spanning several k-blocks stress accumulator bounds.
  for (const Shape& s :
       {Shape{9, 1000, 17, 0, 0, 0}, Shape{16, 256, 8, 0, 0, 0},
        Shape{8, 257, 8, 1, 0, 0}, Shape{3, 5, 3, 0, 0, 0},
        Shape{40, 1000, 1, 0, 0, 0}, Shape{2, 1000, 300, 0, 1, 0},
        Shape{6, 3000, 7, 0, 0, 0}}) {
    RunCase<T>(s, 1, seed++);
    RunCase<T>(s, 2, seed++);
  }
}

}  // namespace

int main() {
  std::printf("AVX-512 IFMA path available: %s; AVX2 path: %s\n",
              tf_privpy::ring_gemm_internal::CpuHasAvx512Ifma() ? "yes" : "no",
              tf_privpy::ring_gemm_internal::CpuHasAvx2() ? "yes" : "no");
  RunAll<uint64_t>();
  RunAll<uint128_t>();
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
