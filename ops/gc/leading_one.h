// Garbled leading-one circuit (priority encoder): the range reduction of the
// private numerics (protocols/mpc/leading_one.py; issue 14) in ONE garbled
// circuit per element instead of a binary search of 7-8 comparators.
// Garbling, hash, tweaks and the no-OT input scheme are those of the
// comparator (garble.h; PrivPy §5.3, DESIGN §6): S1 garbles, S1 and S2 derive
// every wire label from their pair key, an assistant T evaluates.
//
// Function. Inputs a (S1's share x1) and b (S2's share x2) are the low W bits
// (W = width, 3 <= W <= 64) of the shares in any ring Z_2^l, l >= W: reduction
// mod 2^W is a ring homomorphism, so x mod 2^W = a + b mod 2^W EXACTLY (no
// wrap probability, unlike the comparator's [x1 < -x2]). Read as a signed
// W-bit integer this is x when |x| < 2^(W-1). Outputs, W bits per element:
//     out[j] = [v >= 2^j]   (j = 0 .. W-2, a "thermometer"),
//     out[W-1] = s = [x < 0] (the sign bit of x mod 2^W),
// where v = x mod 2^(W-1) (magnitude = false: the W-1 low bits as an
// unsigned number; a negative x >= -2^(W-2) then has out[W-2] = 1, which
// callers use as the "x <= 0" row for free), or (magnitude = true) the one's
// complement magnitude v = (x XOR s) mod 2^(W-1), i.e. x for x >= 0 and
// |x| - 1 for x < 0, except that out[0] = [x != 0] (s is ORed in, so x = -1
// does not look like 0). For x < 0, out[j] = [|x| > 2^j] (j >= 1): the octave
// of |x| except at |x| = 2^j exactly, which gets the octave below; callers
// check that this is harmless (reciprocal's guess: |1 - y·g| = 1/3 there,
// the bound it needs anyway, protocols/mpc/range_reduction.py). Two's
// complement |x| would cost an incrementer, W - 2 more AND gates.
// The leading one of v is at p = Σ_j out[j] - 1 and the one-hot vector of p
// is out[j] - out[j+1]: both are linear in the outputs, so once the bits are
// arithmetic shares, any table of p (2^-p, p·ln 2, ...) is a local dot product.
//
// Circuit (bits least significant first; XOR free, AND half-gates):
//   adder     c_0 = 0, x_i = a_i ^ b_i ^ c_i,
//             c_{i+1} = c_i ^ ((a_i ^ c_i) & (b_i ^ c_i))        W - 1 ANDs
//   magnitude v_i = x_i ^ s (i < W-1)                             free
//   prefix OR o_{W-2} = v_{W-2}, o_i = o_{i+1} | v_i
//             = o_{i+1} ^ v_i ^ (o_{i+1} & v_i)                   W - 2 ANDs
//   magnitude o_0 = o_0 | s                                        1 AND
// so 2W - 3 AND gates (2W - 2 with magnitude): 89 / 90 at W = 46, 125 / 126
// at W = 64, against 64 for one comparator.
//
// Only the requested outputs (LeadingOneSpec::columns, in that order) are
// decoded, masked and returned: K = len(columns) (all W if empty).
//
// Hash tweak j.hi = nonce, j.lo = i << 9 | g << 1 | half (g < 256 gates).
//
// Stream of (key12, nonce): the layout of gc_circuit.h with W inputs and
// K outputs per element (Delta, zero labels of a then b, output masks
// m[i, k] = lsb of byte 16 + 32 W n + K i + k).
// W, the columns and n are part of the layout: S1 and S2 must use the same
// for one nonce.
#ifndef TF_PRIVPY_OPS_GC_LEADING_ONE_H_
#define TF_PRIVPY_OPS_GC_LEADING_ONE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/gc/garble.h"

namespace tf_privpy {
namespace gc {

constexpr int kLeadingOneMinWidth = 3;
constexpr int kLeadingOneMaxWidth = 64;

// AND gates of the circuit (ciphertext pairs per element).
inline int LeadingOneAndGates(int width, bool magnitude) {
  return (width - 1) + (width - 2) + (magnitude ? 1 : 0);
}

// The public parameters of one batch: width, mode and the outputs wanted
// (indices into out[0..W-1], in order, no repeats; empty: all W).
struct LeadingOneSpec {
  int width;
  bool magnitude;
  std::vector<int> columns;
};

// "" if the spec is valid, else why not.
std::string LeadingOneSpecError(const LeadingOneSpec& spec);

// K: the number of outputs per element.
int LeadingOneOutputs(const LeadingOneSpec& spec);

enum class LoRole { kA, kB };  // kA: S1's x1; kB: S2's x2.

// S1: tables[TableIndex(i, g, slice.count, G) * 2 + {0, 1}] (gc_circuit.h:
// chunk-major, gate-major within chunks of 64) = (TG, TE) of AND gate g of element
// slice.first + i (G = LeadingOneAndGates, i < slice.count);
// decode[i * K + k] = lsb(zero label of output k) ^ m[slice.first + i, k].
bool LeadingOneGarble(const uint8_t key12[16], uint64_t nonce,
                      const BatchSlice& slice, const LeadingOneSpec& spec,
                      Block* tables, uint8_t* decode,
                      const ParallelFor& parallel_for, std::string* error);

// S1 (kA, values = x1) or S2 (kB, values = x2): labels[i * W + k] = active
// label of bit k of values[i], element slice.first + i of the batch (only
// the low W bits are used).
bool LeadingOneEncode(const uint8_t key12[16], uint64_t nonce, LoRole role,
                      int width, const int64_t* values,
                      const BatchSlice& slice, Block* labels,
                      const ParallelFor& parallel_for, std::string* error);

// T1/T2: bits[i * K + k] = out[k] ^ m[i, k] of elements first_index + i of
// the garbled batch (a slice of it, as for the comparator).
bool LeadingOneEvaluate(uint64_t nonce, int64_t first_index, int64_t n,
                        const LeadingOneSpec& spec, const Block* tables,
                        const uint8_t* decode, const Block* labels_a,
                        const Block* labels_b, uint8_t* bits,
                        const ParallelFor& parallel_for, std::string* error);

// S1 and S2: m[i * K + k] in {0, 1}.
bool LeadingOneMask(const uint8_t key12[16], uint64_t nonce, int64_t n,
                    const LeadingOneSpec& spec, uint8_t* m,
                    const ParallelFor& parallel_for, std::string* error);

// Plaintext reference: the same circuit on bits (for tests): out[0..K-1].
void LeadingOnePlain(uint64_t a, uint64_t b, const LeadingOneSpec& spec,
                     uint8_t* out);

}  // namespace gc
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_LEADING_ONE_H_
