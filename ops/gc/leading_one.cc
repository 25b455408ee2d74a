// Garbling and evaluation of the leading-one circuit (see leading_one.h for
// the function, the circuit, the tweaks and the stream layout): the circuit
// below, run by the shared batch-major engines of gc_circuit.h. Slots are
// reused (the sum bits are overwritten by v and then by the prefix OR),
// so a chunk's labels stay in L2.
#include "ops/gc/leading_one.h"

#include <string>
#include <vector>

#include "ops/gc/gc_circuit.h"

namespace tf_privpy {
namespace gc {

namespace {

using internal::CircuitShape;
using internal::InputRole;

constexpr int kExtraSlots = 4;          // carry, three temporaries
constexpr int kTweakShift = 9;          // fewer than 256 gates

// The circuit of leading_one.h on slots 0..W-1 (bit i of x, then of v, then
// o_i; slot W-1 keeps the sign) and W..W+3 (carry, temporaries).
template <class E>
void Circuit(E& e, int W, bool magnitude) {
  const int C = W, T1 = W + 1, T2 = W + 2, T3 = W + 3;
  const int S = W - 1;
  internal::AddShares(e, W, C, T1, T2, T3);  // x = a + b mod 2^W
  if (magnitude)  // one's complement: v = x XOR s on bits 0..W-2, free
    for (int i = 0; i < W - 1; ++i) e.Xor(i, i, S);
  for (int i = W - 3; i >= 0; --i) {  // o_i = o_{i+1} OR v_i
    e.And(T1, i + 1, i);
    e.Xor(i, i, i + 1);
    e.Xor(i, i, T1);
  }
  if (magnitude) {  // o_0 = o_0 OR s: x = -1 (v = 0) is not zero
    e.And(T1, 0, S);
    e.Xor(0, 0, S);
    e.Xor(0, 0, T1);
  }
}

std::vector<int> Columns(const LeadingOneSpec& spec) {
  if (!spec.columns.empty()) return spec.columns;
  std::vector<int> all(spec.width);
  for (int j = 0; j < spec.width; ++j) all[j] = j;
  return all;
}

CircuitShape Shape(const LeadingOneSpec& spec) {
  return CircuitShape{spec.width, spec.width + kExtraSlots,
                      LeadingOneAndGates(spec.width, spec.magnitude), kTweakShift,
                      Columns(spec)};   // out[j] is slot j
}

bool Check(const LeadingOneSpec& spec, std::string* error) {
  *error = LeadingOneSpecError(spec);
  return error->empty();
}

bool CheckWidth(int width, std::string* error) {
  if (width < kLeadingOneMinWidth || width > kLeadingOneMaxWidth) {
    *error = "width must be in [3, 64]";
    return false;
  }
  return true;
}

InputRole ToInput(LoRole role) { return role == LoRole::kA ? InputRole::kA : InputRole::kB; }

}  // namespace

std::string LeadingOneSpecError(const LeadingOneSpec& spec) {
  std::string err;
  if (!CheckWidth(spec.width, &err)) return err;
  std::vector<bool> seen(spec.width, false);
  for (int c : spec.columns) {
    if (c < 0 || c >= spec.width) return "columns must be in [0, width)";
    if (seen[c]) return "columns must not repeat";
    seen[c] = true;
  }
  return "";
}

int LeadingOneOutputs(const LeadingOneSpec& spec) {
  return spec.columns.empty() ? spec.width : static_cast<int>(spec.columns.size());
}

void LeadingOnePlain(uint64_t a, uint64_t b, const LeadingOneSpec& spec, uint8_t* out) {
  internal::PlainCircuit(a, b, Shape(spec),
                         [&](auto& e) { Circuit(e, spec.width, spec.magnitude); }, out);
}

bool LeadingOneGarble(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
                      const LeadingOneSpec& spec, Block* tables, uint8_t* decode,
                      const ParallelFor& parallel_for, std::string* error) {
  if (!Check(spec, error)) return false;
  return internal::GarbleCircuit(key12, nonce, slice, Shape(spec),
                                 [&](auto& e) { Circuit(e, spec.width, spec.magnitude); },
                                 tables, decode, parallel_for, error);
}

bool LeadingOneEncode(const uint8_t key12[16], uint64_t nonce, LoRole role, int width,
                      const int64_t* values, const BatchSlice& slice, Block* labels,
                      const ParallelFor& parallel_for, std::string* error) {
  if (!CheckWidth(width, error)) return false;
  return internal::EncodeCircuitInput(key12, nonce, ToInput(role), width, values, slice,
                                      labels, parallel_for, error);
}

bool LeadingOneEvaluate(uint64_t nonce, int64_t first_index, int64_t n,
                        const LeadingOneSpec& spec, const Block* tables, const uint8_t* decode,
                        const Block* labels_a, const Block* labels_b, uint8_t* bits,
                        const ParallelFor& parallel_for, std::string* error) {
  if (!Check(spec, error)) return false;
  return internal::EvaluateCircuit(nonce, first_index, n, Shape(spec),
                                   [&](auto& e) { Circuit(e, spec.width, spec.magnitude); },
                                   tables, decode, labels_a, labels_b, bits, parallel_for,
                                   error);
}

bool LeadingOneMask(const uint8_t key12[16], uint64_t nonce, int64_t n,
                    const LeadingOneSpec& spec, uint8_t* m, const ParallelFor& parallel_for,
                    std::string* error) {
  if (!Check(spec, error)) return false;
  return internal::CircuitMask(key12, nonce, n, spec.width, LeadingOneOutputs(spec), m,
                               parallel_for, error);
}

}  // namespace gc
}  // namespace tf_privpy
