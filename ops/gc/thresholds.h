// Garbled window-thresholds circuit: [x < θ_k] for K public thresholds in
// ONE garbled circuit per element (issue 14), instead of K comparators of
// 64 AND gates: the interval membership of exp's range reduction and of the
// piecewise polynomials of sigmoid and tanh (protocols/mpc/thresholds.py).
// Garbling, hash and the no-OT input scheme are the comparator's (garble.h;
// PrivPy §5.3, DESIGN §6); batch engines, tweaks and stream layout are
// gc_circuit.h's (tweak shift 23), with W inputs and K outputs per element.
// The input labels are the leading-one circuit's (same layout: one
// LeadingOneEncode serves both).
//
// Function. Inputs a (S1's share x1) and b (S2's share x2): their low W
// bits (3 <= W <= 64); x = a + b mod 2^W EXACTLY (reduction mod 2^W is a
// ring homomorphism), read as a signed W-bit integer. Public parameters: lo
// (the lowest bit of the window), m (its width, lo + m <= W) and K points
// c_k with -2^(m-1) < c_k < 2^(m-1): the thresholds are θ_k = c_k·2^lo.
// Outputs, K bits per element:
//     out[k] = [q < c_k],   q = floor(x / 2^lo) clamped to [-2^(m-1), 2^(m-1))
//            = [x < θ_k]    exactly (floor(x / 2^lo) < c  <=>  x < c·2^lo; the
//                           clamp keeps the order against every allowed c_k).
//
// Circuit (bits least significant first; XOR and NOT free, AND half-gates):
//   adder      x = a + b mod 2^W                              W - 1 ANDs
//   overflow   v = OR_{i = lo+m-1 .. W-2} (x_i ^ s), s = x_{W-1}:
//              x is outside the window's range        W - lo - m - 1 ANDs
//   clamp      q_j = x_(lo+j) ^ (v & (x_(lo+j) ^ ~s)), j < m - 1  m - 1 ANDs
//              (saturated: q = s ? 100..0 : 011..1; the top bit is s either way)
//              (both steps vanish when lo + m = W: q is the top m bits)
//   compare    u = q ^ 2^(m-1) (unsigned order), U_k = c_k + 2^(m-1):
//              ge_j = U_kj ? u_j & ge_(j-1) : u_j | ge_(j-1), ge_(-1) = 1,
//              out[k] = ~ge_(m-1); constant below the lowest set bit of U_k
//                                                  m - 1 - tz(U_k) ANDs each
// So W - 1 + (W - lo - 2) + Σ_k (m - 1 - tz(U_k)) AND gates (the middle term
// only if lo + m < W): sigmoid's 13 breakpoints (lo = f - 1, m = 6, W = 46)
// take 114, against 13 x 64 = 832 for the comparators.
#ifndef TF_PRIVPY_OPS_GC_THRESHOLDS_H_
#define TF_PRIVPY_OPS_GC_THRESHOLDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/gc/garble.h"

namespace tf_privpy {
namespace gc {

constexpr int kThresholdsMaxPoints = 4096;

// The public parameters of a window-thresholds circuit.
struct ThresholdsSpec {
  int width;                   // W: input bits per share
  int lo;                      // lowest bit of the window
  int window;                  // m: window bits
  std::vector<int64_t> points;  // c_k, -2^(m-1) < c_k < 2^(m-1)
};

// Empty string if spec is valid, else what is wrong.
std::string ThresholdsSpecError(const ThresholdsSpec& spec);

// AND gates of the circuit (ciphertext pairs per element); spec valid.
int ThresholdsAndGates(const ThresholdsSpec& spec);

// S1: tables[TableIndex(i, g, slice.count, G) * 2 + {0, 1}] (gc_circuit.h:
// chunk-major, gate-major within chunks of 64) = (TG, TE) of AND gate g of element
// slice.first + i (i < slice.count); decode[i * K + k] = lsb(zero label of
// out k) ^ m[slice.first + i, k].
bool ThresholdsGarble(const uint8_t key12[16], uint64_t nonce,
                      const BatchSlice& slice, const ThresholdsSpec& spec,
                      Block* tables, uint8_t* decode,
                      const ParallelFor& parallel_for, std::string* error);

// T1/T2: bits[i * K + k] = out[k] ^ m[i, k] of elements first_index + i of the
// garbled batch; labels_a/b from LeadingOneEncode with the same width.
bool ThresholdsEvaluate(uint64_t nonce, int64_t first_index, int64_t n,
                        const ThresholdsSpec& spec, const Block* tables,
                        const uint8_t* decode, const Block* labels_a,
                        const Block* labels_b, uint8_t* bits,
                        const ParallelFor& parallel_for, std::string* error);

// S1 and S2: m[i * K + k] in {0, 1}.
bool ThresholdsMask(const uint8_t key12[16], uint64_t nonce, int64_t n,
                    const ThresholdsSpec& spec, uint8_t* m,
                    const ParallelFor& parallel_for, std::string* error);

// Plaintext reference: the same circuit on bits (for tests): out[0..K-1].
void ThresholdsPlain(uint64_t a, uint64_t b, const ThresholdsSpec& spec, uint8_t* out);

}  // namespace gc
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_THRESHOLDS_H_
