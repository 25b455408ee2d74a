// Garbling and evaluation of the window-thresholds circuit (function,
// circuit and gate count in thresholds.h): the circuit below, run by the
// shared batch-major engines of gc_circuit.h.
#include "ops/gc/thresholds.h"

#include <string>

#include "ops/gc/gc_circuit.h"

namespace tf_privpy {
namespace gc {

namespace {

using internal::CircuitShape;

constexpr int kExtraSlots = 7;   // carry, three temporaries, overflow, ~s, zero
constexpr int kTweakShift = 23;  // i < 2^40 and fewer than 2^22 gates

// Slots 0..W-1: bit i of x (bits lo..lo+m-2 then of the clamped q); W..W+6:
// carry, temporaries, overflow v, ~s, a constant 0; W+7+k: output k.
template <class E>
void Circuit(E& e, const ThresholdsSpec& p) {
  const int W = p.width, lo = p.lo, m = p.window;
  const int C = W, T1 = W + 1, T2 = W + 2, T3 = W + 3, V = W + 4, NS = W + 5, Z = W + 6;
  const int S = W - 1, top = lo + m - 1;
  internal::AddShares(e, W, C, T1, T2, T3);
  if (top < W - 1) {
    e.Xor(V, top, S);  // v = OR of (x_i ^ s), i = top .. W-2
    for (int i = top + 1; i < W - 1; ++i) {
      e.Xor(T1, i, S);
      e.And(T2, V, T1);  // v | t = v ^ t ^ (v & t)
      e.Xor(V, V, T1);
      e.Xor(V, V, T2);
    }
    for (int i = lo; i < top; ++i) {  // clamp: x_i <- v ? ~s : x_i
      e.Xor(T1, i, S);
      e.Not(T1, T1);
      e.And(T2, V, T1);
      e.Xor(i, i, T2);
    }
  }
  e.Not(NS, S);  // u_(m-1) = q_(m-1) ^ 1 = ~s
  e.Zero(Z);
  for (size_t k = 0; k < p.points.size(); ++k) {
    const uint64_t U = static_cast<uint64_t>(p.points[k]) + (uint64_t{1} << (m - 1));
    const int o = W + kExtraSlots + static_cast<int>(k);
    bool one = true;  // ge is the constant 1 below the lowest set bit of U
    for (int j = 0; j < m; ++j) {
      const int u = j < m - 1 ? lo + j : NS;
      if ((U >> j) & 1) {
        if (one) {
          e.Copy(o, u);
          one = false;
        } else {
          e.And(o, o, u);
        }
      } else if (!one) {  // ge | u
        e.And(T1, o, u);
        e.Xor(o, o, u);
        e.Xor(o, o, T1);
      }
    }
    if (one) {
      e.Copy(o, Z);  // U = 0 is excluded by the spec check; kept total
    } else {
      e.Not(o, o);  // [u < U] = ~[u >= U]
    }
  }
}

CircuitShape Shape(const ThresholdsSpec& p) {
  const int K = static_cast<int>(p.points.size());
  CircuitShape s{p.width, p.width + kExtraSlots + K, ThresholdsAndGates(p), kTweakShift, {}};
  for (int k = 0; k < K; ++k) s.out_slots.push_back(p.width + kExtraSlots + k);
  return s;
}

bool Check(const ThresholdsSpec& p, std::string* error) {
  *error = ThresholdsSpecError(p);
  return error->empty();
}

}  // namespace

std::string ThresholdsSpecError(const ThresholdsSpec& p) {
  if (p.width < 3 || p.width > 64) return "width must be in [3, 64]";
  if (p.lo < 0 || p.window < 1 || p.lo + p.window > p.width)
    return "the window [lo, lo + window) must be inside the width's bits (lo >= 0, window >= 1)";
  if (p.points.empty() || p.points.size() > static_cast<size_t>(kThresholdsMaxPoints))
    return "the number of points must be in [1, 4096]";
  const uint64_t half = uint64_t{1} << (p.window - 1);
  for (int64_t c : p.points)  // U = c + 2^(m-1) in [1, 2^m - 1] (mod 2^64 arithmetic)
    if (static_cast<uint64_t>(c) + half - 1 > 2 * half - 2)
      return "points must be in (-2^(window-1), 2^(window-1)), got " + std::to_string(c);
  return "";
}

int ThresholdsAndGates(const ThresholdsSpec& p) {
  return internal::CountGates([&](auto& e) { Circuit(e, p); });
}

void ThresholdsPlain(uint64_t a, uint64_t b, const ThresholdsSpec& p, uint8_t* out) {
  internal::PlainCircuit(a, b, Shape(p), [&](auto& e) { Circuit(e, p); }, out);
}

bool ThresholdsGarble(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
                      const ThresholdsSpec& p, Block* tables, uint8_t* decode,
                      const ParallelFor& parallel_for, std::string* error) {
  if (!Check(p, error)) return false;
  return internal::GarbleCircuit(key12, nonce, slice, Shape(p), [&](auto& e) { Circuit(e, p); },
                                 tables, decode, parallel_for, error);
}

bool ThresholdsEvaluate(uint64_t nonce, int64_t first_index, int64_t n,
                        const ThresholdsSpec& p, const Block* tables, const uint8_t* decode,
                        const Block* labels_a, const Block* labels_b, uint8_t* bits,
                        const ParallelFor& parallel_for, std::string* error) {
  if (!Check(p, error)) return false;
  return internal::EvaluateCircuit(nonce, first_index, n, Shape(p),
                                   [&](auto& e) { Circuit(e, p); }, tables, decode, labels_a,
                                   labels_b, bits, parallel_for, error);
}

bool ThresholdsMask(const uint8_t key12[16], uint64_t nonce, int64_t n, const ThresholdsSpec& p,
                    uint8_t* m, const ParallelFor& parallel_for, std::string* error) {
  if (!Check(p, error)) return false;
  return internal::CircuitMask(key12, nonce, n, p.width, static_cast<int>(p.points.size()), m,
                               parallel_for, error);
}

}  // namespace gc
}  // namespace tf_privpy
