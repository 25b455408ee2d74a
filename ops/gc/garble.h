// Garbled comparison circuit of PrivPy's Protocol 2 (PrivPy §5.3; DESIGN §6),
// without oblivious transfer: the garbler S1 and the other input holder S2
// both derive every wire label from their pair key, so each sends its own
// input labels and an assistant T evaluates.
//
// Function. For a batch of n comparisons, input i of role "y" (S1's share
// x1) and of role "x" (S2's negated share -x2) are signed int64 values; the
// circuit computes
//     b[i] = [ y[i] < x[i] ]          (SIGNED 64-bit comparison)
//          = [ x1 < -x2 ]             (= [x < 0] when x1 + x2 does not wrap)
// by flipping the sign bit of both inputs (v XOR 2^63 maps signed order to
// unsigned order) and comparing unsigned X = x ^ 2^63 > Y = y ^ 2^63.
// T learns only b'[i] = b[i] XOR m[i], m a mask bit known to S1 and S2.
//
// Circuit: the Kolesnikov-Sadeghi-Schneider comparator (CANS 2009), one AND
// gate per bit, bits least significant first:
//     c_0 = 0,  c_{g+1} = x_g XOR ((x_g XOR c_g) AND (y_g XOR c_g)),  b = c_64.
// XOR is free (free-XOR, Kolesnikov-Schneider, ICALP 2008: labels of a wire
// are L and L XOR Delta, lsb(Delta) = 1 for point-and-permute); each AND is
// garbled with half-gates (Zahur-Rosulek-Evans, EUROCRYPT 2015): two
// ciphertexts (TG, TE), four hash calls to garble, two to evaluate. The
// constant wire c_0 has the public zero label 0, so gate 0 is x_0 AND y_0.
//
// Hash: fixed-key AES in the MMO^sigma form of Guo-Katz-Wang-Yu (IEEE S&P
// 2020, section 7), also used by emp-toolkit's half-gates:
//     H(X, j) = AES_K(sigma(X) XOR j) XOR sigma(X) XOR j,
//     sigma(X_hi || X_lo) = (X_hi XOR X_lo) || X_hi       (a linear orthomorphism),
// K = kFixedAesKey below (public). The 128-bit tweak j is unique for every
// hashed gate half of every garbling of a (key12, nonce) pair:
//     j.hi = nonce,  j.lo = i << 7 | g << 1 | half    (i the comparison's
//     index in the garbled batch, g the gate, half 0 = generator half-gate,
//     1 = evaluator half-gate). Within one garbling Delta is shared by all
//     comparisons, so i must be in the tweak; a (key12, nonce) pair is
//     garbled once (DESIGN §4), so nonce separates garblings.
//
// Secret material: ONE AES-128-CTR stream of the S1-S2 key key12 with the
// call's nonce (ops/prg/aes_ctr.h), cut at these byte offsets for a batch of
// n comparisons:
//     [0, 16)                          Delta (then lsb forced to 1)
//     [16, 16 + 1024 n)                zero labels of X's wires: block
//                                      16 + 16 (64 i + g) is X_{i,g}^0
//     [16 + 1024 n, 16 + 2048 n)       zero labels of Y's wires, same order
//     [16 + 2048 n, 16 + 2049 n)       m[i] = lsb of byte i
// A block is 16 stream bytes read as two little-endian uint64 (lo, hi), the
// same layout as an int64[2] tensor row. The batch size n is part of the
// layout, so S1 and S2 must use the same n for one nonce.
#ifndef TF_PRIVPY_OPS_GC_GARBLE_H_
#define TF_PRIVPY_OPS_GC_GARBLE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "ops/common/parallel.h"

namespace tf_privpy {
namespace gc {

// A 128-bit wire label / ciphertext: two little-endian 64-bit halves.
struct Block {
  uint64_t lo, hi;
};
static_assert(sizeof(Block) == 16, "Block must be 16 bytes");

constexpr int kBits = 64;            // input bits = AND gates per comparison
constexpr int kTableBlocks = 2;      // (TG, TE) per AND gate
// Upper bound on n: keeps the tweak's comparison index below 2^57 and every
// stream offset far from overflow (tables alone would be 2 PB at the bound).
constexpr int64_t kMaxComparisons = int64_t{1} << 40;

// Elements [first, first + count) of a garbled batch of n (the part of it
// one assistant evaluates): the circuits' garbling and encoding kernels
// produce such a slice directly (gc_circuit.h).
struct BatchSlice {
  int64_t n;
  int64_t first;
  int64_t count;
};

// The public fixed AES-128 key of the hash: the first 128 fractional bits of
// pi (0x243F6A88 85A308D3 13198A2E 03707344), as bytes in this order.
extern const uint8_t kFixedAesKey[16];

enum class Role { kX, kY };  // kX: S2's (-x2); kY: S1's x1.

// Byte offsets of the stream layout above.
inline uint64_t DeltaOffset() { return 0; }
inline uint64_t LabelsOffset(Role role, int64_t n) {
  return 16 + (role == Role::kX ? 0 : static_cast<uint64_t>(n) * kBits * 16);
}
inline uint64_t MaskOffset(int64_t n) {
  return 16 + 2 * static_cast<uint64_t>(n) * kBits * 16;
}

// Delta of (key12, nonce), lsb forced to 1.
bool DeriveDelta(const uint8_t key12[16], uint64_t nonce, Block* delta,
                 std::string* error);

// S1: garbles comparators slice.first .. slice.first + slice.count - 1 of a
// batch of slice.n (T1's or T2's part: no copy of a slice of the tables).
// tables[(i * 64 + g) * 2 + {0, 1}] = (TG, TE) of AND gate g of comparison
// slice.first + i; decode[i] = lsb(zero label of c_64) XOR m[slice.first + i].
bool Garble(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
            Block* tables, uint8_t* decode, const ParallelFor& parallel_for,
            std::string* error);

// S1 (role kY, values = x1) or S2 (role kX, values = -x2): the active labels
// labels[i * 64 + g] = L_{j,g}^0 XOR bit_g(values[i] XOR 2^63) * Delta of
// comparison j = slice.first + i of the batch (i < slice.count).
bool EncodeInput(const uint8_t key12[16], uint64_t nonce, Role role,
                 const int64_t* values, const BatchSlice& slice, Block* labels,
                 const ParallelFor& parallel_for, std::string* error);

// T1/T2: evaluates; bits[i] = b[i] XOR m[i] in {0, 1} (only lsb of decode[i]
// is used). nonce is public: it only feeds the tweaks. The inputs may be a
// slice of a garbled batch (DESIGN §6: T1 and T2 each evaluate part of it):
// row k is comparison first_index + k of the batch, which fixes its tweaks.
bool Evaluate(uint64_t nonce, int64_t first_index, int64_t n, const Block* tables,
              const uint8_t* decode, const Block* labels_x,
              const Block* labels_y, uint8_t* bits,
              const ParallelFor& parallel_for, std::string* error);

// S1 and S2: m[i] in {0, 1}.
bool OutputMask(const uint8_t key12[16], uint64_t nonce, int64_t n,
                uint8_t* m, const ParallelFor& parallel_for,
                std::string* error);

}  // namespace gc
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_GARBLE_H_
