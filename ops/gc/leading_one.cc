// Garbling and evaluation of the leading-one circuit (see leading_one.h for
// the function, the circuit, the tweaks and the stream layout): the circuit
// below, run by the shared batch-major engines of gc_circuit.h. Slots are
// reused (the sum bits are overwritten by |x| and then by the prefix OR),
// so a chunk's labels stay in L2.
#include "ops/gc/leading_one.h"

#include <string>

#include "ops/gc/gc_circuit.h"

namespace tf_privpy {
namespace gc {

namespace {

using internal::CircuitShape;
using internal::InputRole;

constexpr int kExtraSlots = 5;          // carry, three temporaries, d
constexpr int kTweakShift = 9;          // fewer than 256 gates

// The circuit of leading_one.h on slots 0..W-1 (bit i of x, then of v, then
// o_i; slot W-1 keeps the sign) and W..W+4 (carry, temporaries, d).
template <class E>
void Circuit(E& e, int W, bool magnitude) {
  const int C = W, T1 = W + 1, T2 = W + 2, T3 = W + 3, D = W + 4;
  const int S = W - 1;
  internal::AddShares(e, W, C, T1, T2, T3);  // x = a + b mod 2^W
  if (magnitude) {  // |x| = (x ^ s) + s on bits 0..W-2: an incrementer
    e.Copy(D, S);
    for (int i = 0; i < W - 1; ++i) {
      e.Xor(T1, i, S);
      e.Xor(i, T1, D);
      if (i < W - 2) e.And(D, D, T1);
    }
  }
  for (int i = W - 3; i >= 0; --i) {  // o_i = o_{i+1} OR v_i
    e.And(T1, i + 1, i);
    e.Xor(i, i, i + 1);
    e.Xor(i, i, T1);
  }
}

CircuitShape Shape(int width, bool magnitude) {
  CircuitShape s{width, width + kExtraSlots, LeadingOneAndGates(width, magnitude), kTweakShift,
                 {}};
  for (int j = 0; j < width; ++j) s.out_slots.push_back(j);
  return s;
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

void LeadingOnePlain(uint64_t a, uint64_t b, int width, bool magnitude, uint8_t* out) {
  internal::PlainCircuit(a, b, Shape(width, magnitude),
                         [&](auto& e) { Circuit(e, width, magnitude); }, out);
}

bool LeadingOneGarble(const uint8_t key12[16], uint64_t nonce, int64_t n, int width,
                      bool magnitude, Block* tables, uint8_t* decode,
                      const ParallelFor& parallel_for, std::string* error) {
  if (!CheckWidth(width, error)) return false;
  return internal::GarbleCircuit(key12, nonce, n, Shape(width, magnitude),
                                 [&](auto& e) { Circuit(e, width, magnitude); }, tables,
                                 decode, parallel_for, error);
}

bool LeadingOneEncode(const uint8_t key12[16], uint64_t nonce, LoRole role, int width,
                      const int64_t* values, int64_t n, Block* labels,
                      const ParallelFor& parallel_for, std::string* error) {
  if (!CheckWidth(width, error)) return false;
  return internal::EncodeCircuitInput(key12, nonce, ToInput(role), width, values, n, labels,
                                      parallel_for, error);
}

bool LeadingOneEvaluate(uint64_t nonce, int64_t first_index, int64_t n, int width,
                        bool magnitude, const Block* tables, const uint8_t* decode,
                        const Block* labels_a, const Block* labels_b, uint8_t* bits,
                        const ParallelFor& parallel_for, std::string* error) {
  if (!CheckWidth(width, error)) return false;
  return internal::EvaluateCircuit(nonce, first_index, n, Shape(width, magnitude),
                                   [&](auto& e) { Circuit(e, width, magnitude); }, tables,
                                   decode, labels_a, labels_b, bits, parallel_for, error);
}

bool LeadingOneMask(const uint8_t key12[16], uint64_t nonce, int64_t n, int width, uint8_t* m,
                    const ParallelFor& parallel_for, std::string* error) {
  if (!CheckWidth(width, error)) return false;
  return internal::CircuitMask(key12, nonce, n, width, width, m, parallel_for, error);
}

}  // namespace gc
}  // namespace tf_privpy
