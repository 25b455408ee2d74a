// Pass/fail tally of the standalone C++ tests (ops/*/*_test.cc, run by
// tests/test_cc_programs.py): one Check per assertion, Report() at the end.
#ifndef TF_PRIVPY_OPS_COMMON_TEST_CHECK_H_
#define TF_PRIVPY_OPS_COMMON_TEST_CHECK_H_

#include <cstdio>
#include <string>

namespace tf_privpy {
namespace testing {

struct Tally {
  int passed = 0, failed = 0;
};

inline Tally& tally() {
  static Tally t;
  return t;
}

// Counts one check; prints the first 30 failures (later ones only count).
inline void Check(bool ok, const std::string& what) {
  if (ok) {
    ++tally().passed;
  } else if (++tally().failed <= 30) {
    std::printf("FAILED: %s\n", what.c_str());
  }
}

// Prints the totals; the process exit code (0 when nothing failed).
inline int Report() {
  std::printf("%d passed, %d failed\n", tally().passed, tally().failed);
  return tally().failed == 0 ? 0 : 1;
}

}  // namespace testing
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_COMMON_TEST_CHECK_H_
