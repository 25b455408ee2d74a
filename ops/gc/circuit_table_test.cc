// Standalone test of the circuit table (circuit_table.h; no TensorFlow):
// every row runs garble / encode / evaluate / mask through its uniform
// signatures (as the kernels do) and matches the circuit's own reference on
// random shares, evaluated in two slices as T1 and T2 do; rows are found by
// name; widths resolve to the row's default or must be given; a parameter of
// another circuit, an unknown name and invalid parameters are refused.
// Build/run: make -f ops/gc/Makefile.standalone test
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/common/test_check.h"
#include "ops/gc/circuit_table.h"
#include "ops/gc/leading_one.h"
#include "ops/gc/thresholds.h"

namespace {

using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::testing::Check;
using namespace tf_privpy::gc;  // NOLINT

// The circuit's output bits for inputs a (S1) and b (S2) in the clear.
std::vector<uint8_t> Reference(const std::string& name, const CircuitParams& p, uint64_t a,
                               uint64_t b) {
  if (name == "compare")  // b is S2's -x2: out = [a < b] as signed int64
    return {static_cast<uint8_t>(static_cast<int64_t>(a) < static_cast<int64_t>(b))};
  std::vector<uint8_t> out(name == "thresholds" ? p.points.size()
                                                : (p.columns.empty() ? p.width : p.columns.size()));
  if (name == "leading_one")
    LeadingOnePlain(a, b, {p.width, p.magnitude, p.columns}, out.data());
  else
    ThresholdsPlain(a, b, {p.width, p.lo, p.window, p.points}, out.data());
  return out;
}

void TestRow(const std::string& name, CircuitParams p, std::mt19937_64& rng) {
  const CircuitDescriptor* row = FindCircuit(name);
  Check(row != nullptr, name + " found");
  if (row == nullptr) return;
  Check(ResolveCircuitParams(*row, &p).empty(), name + " parameters valid");
  const int64_t n = 301, h = n / 3, G = row->gates(p), K = row->outputs(p), W = p.width;
  Check(row->one_bit == (name == "compare") && (!row->one_bit || K == 1), name + " one_bit");
  std::vector<int64_t> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<int64_t>(rng());
    b[i] = static_cast<int64_t>(rng() >> (rng() % 64));
  }
  const uint8_t key[16] = {7, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
  const uint64_t nonce = 42;
  const ParallelFor pf = MakeThreadedFor(5, 2);
  std::string err;
  std::vector<uint8_t> m(n * K), bits(n * K);
  Check(row->mask(key, nonce, n, p, m.data(), pf, &err), name + " mask: " + err);
  for (const auto& part : {std::pair<int64_t, int64_t>{0, h}, {h, n - h}}) {
    const BatchSlice s{n, part.first, part.second};
    std::vector<Block> tables(s.count * G * 2), la(s.count * W), lb(s.count * W);
    std::vector<uint8_t> decode(s.count * K);
    Check(row->garble(key, nonce, s, p, tables.data(), decode.data(), pf, &err),
          name + " garble: " + err);
    Check(row->encode(key, nonce, Party::kA, p, a.data() + s.first, s, la.data(), pf, &err),
          name + " encode a: " + err);
    Check(row->encode(key, nonce, Party::kB, p, b.data() + s.first, s, lb.data(), pf, &err),
          name + " encode b: " + err);
    Check(row->evaluate(nonce, s.first, s.count, p, tables.data(), decode.data(), la.data(),
                        lb.data(), bits.data() + s.first * K, pf, &err),
          name + " evaluate: " + err);
  }
  int wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<uint8_t> want = Reference(name, p, a[i], b[i]);
    for (int64_t k = 0; k < K; ++k) wrong += ((bits[i * K + k] ^ m[i * K + k]) & 1) != want[k];
  }
  Check(wrong == 0, name + ": " + std::to_string(wrong) + " wrong output bits");
}

void TestParams() {
  const CircuitDescriptor* cmp = FindCircuit("compare");
  const CircuitDescriptor* lo = FindCircuit("leading_one");
  const CircuitDescriptor* th = FindCircuit("thresholds");
  Check(FindCircuit("comparison") == nullptr, "unknown name not found");
  Check(CircuitNames() == "'compare', 'leading_one', 'thresholds'", "names: " + CircuitNames());
  CircuitParams p;
  Check(ResolveCircuitParams(*cmp, &p).empty() && p.width == 64, "compare width defaults to 64");
  p = CircuitParams();
  p.width = 46;
  Check(!ResolveCircuitParams(*cmp, &p).empty(), "compare width 46 refused");
  p = CircuitParams();
  p.columns = {1};
  Check(ResolveCircuitParams(*cmp, &p).find("takes no columns") != std::string::npos,
        "compare refuses columns");
  p = CircuitParams();
  Check(ResolveCircuitParams(*lo, &p).find("needs its width") != std::string::npos,
        "leading_one needs a width");
  p = CircuitParams();
  p.width = 46;
  p.points = {1};
  Check(ResolveCircuitParams(*lo, &p).find("takes no points") != std::string::npos,
        "leading_one refuses points");
  p = CircuitParams();
  p.width = 10;
  p.columns = {3, 3};
  Check(ResolveCircuitParams(*lo, &p).find("repeat") != std::string::npos,
        "leading_one refuses repeated columns");
  p = CircuitParams();
  p.width = 46;
  p.lo = 19;
  p.window = 6;
  p.points = {32};
  Check(ResolveCircuitParams(*th, &p).find("window") != std::string::npos,
        "thresholds refuses a point outside the window");
  p.points = {3};
  p.magnitude = true;
  Check(ResolveCircuitParams(*th, &p).find("takes no magnitude") != std::string::npos,
        "thresholds refuses magnitude");
}

}  // namespace

int main() {
  std::mt19937_64 rng(25);
  TestRow("compare", CircuitParams(), rng);
  CircuitParams lo;
  lo.width = 46;
  lo.magnitude = true;
  lo.columns = {45, 0, 20, 3};
  TestRow("leading_one", lo, rng);
  lo.magnitude = false;
  lo.columns = {};
  TestRow("leading_one", lo, rng);
  CircuitParams th;
  th.width = 46;
  th.lo = 19;
  th.window = 6;
  th.points = {-22, -16, -6, 0, 3, 16, 22};
  TestRow("thresholds", th, rng);
  TestParams();
  return tf_privpy::testing::Report();
}
