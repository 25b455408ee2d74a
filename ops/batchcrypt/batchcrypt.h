// BatchCrypt's slot codec (Zhang et al., USENIX ATC'20; DESIGN §9): packing
// of signed slot values into one big integer, and the exact decoding of a sum
// of such integers. Plain bit placement on fixed-width byte strings; no
// TensorFlow, no GMP.
//
// Layout. A plaintext holds k slots of w bits each, slot 0 the least
// significant, slot values q_i in [-2^(w-1), 2^(w-1)). The plaintext is the
// non-negative integer
//     P = (sum_i q_i 2^(w i)) mod 2^W,       W = k w,
// the W-bit two's complement of the signed integer V = sum_i q_i 2^(w i),
// stored as B big-endian unsigned bytes (8 B >= W; the bytes above W are
// zero). Its w-bit field i is (q_i - [V_i < 0]) mod 2^w, V_i = sum_(j<i)
// q_j 2^(w j): one less than q_i's own two's complement when the slots
// below form a negative number. (Writing each slot's own two's complement,
// as BatchCrypt's released encoder does, makes a different integer: in a sum
// of those, each slot also carries the count of its negative summands, which
// for 3 or more summands cannot be told apart from the value.)
//
// Decoding a sum. Let T = sum_c P_c be the plain integer sum of plaintexts
// (what Paillier decrypts the product of their ciphertexts to, when T < n).
// Then T mod 2^W = (sum_i s_i 2^(w i)) mod 2^W with s_i = sum_c q_(c,i), and
// the decoder takes, from the lowest slot up,
//     d_i = (T_i mod 2^w) read as a signed w-bit integer in [-2^(w-1), 2^(w-1)),
//     T_(i+1) = (T_i - d_i) / 2^w          (T_0 = T mod 2^W).
// The subtraction of a negative d_i is a borrow into slot i + 1; with it,
// d_i = s_i exactly whenever |s_j| < 2^(w-1) for every j <= i. Decoding each
// slot on its own (no borrow) is off by one in every slot above a negative
// one. On raw fields: with carry c_0 = 0 and v_i = field_i + c_i,
//     d_i = v_i - 2^w and c_(i+1) = 1 if v_i >= 2^(w-1), else d_i = v_i, c_(i+1) = 0.
//
// Overflow. The caller passes bound = the largest |s_i| a legitimate sum can
// have (BatchCrypt: min(#summands, m) * qmax < 2^(w-2)). A slot with
// |d_i| > bound is an overflow: positive if d_i > bound, negative if
// d_i < -bound. This includes every slot whose two top bits (the two sign
// bits) disagree, since those have |d_i| >= 2^(w-2) > bound. Overflowed slots
// are reported in a mask, counted by sign, and their value is set to 0: the
// decoder never returns an out-of-range value as if it were a sum. Slots of a
// plaintext past the last real value (the zero padding of the last plaintext)
// must decode to 0; a nonzero one (a wrapped sum carried into it, or
// plaintexts packed with another layout) is counted as an overflow of its
// sign, without a mask entry.
#ifndef TF_PRIVPY_OPS_BATCHCRYPT_BATCHCRYPT_H_
#define TF_PRIVPY_OPS_BATCHCRYPT_BATCHCRYPT_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tf_privpy {
namespace batchcrypt {

constexpr int kMinSlotBits = 2;
constexpr int kMaxSlotBits = 62;  // slot sums and the carry stay in int64

// Returns "" if (w, k, B) is a valid packing layout, else the reason.
std::string CheckLayout(int slot_bits, int64_t slots_per_plaintext, int64_t plaintext_bytes);

// Returns "" if (w, k, bound) is a valid decoding layout, else the reason.
std::string CheckUnpackLayout(int slot_bits, int64_t slots_per_plaintext, int64_t bound);

// Index of the first q[i] (i < n) outside [-2^(w-1), 2^(w-1)), or -1.
template <typename T>
int64_t FirstOutOfRange(const T* q, int64_t n, int slot_bits);

// Packs the n <= k slot values q[0..n) into the B bytes out[0..B) (slots
// n..k-1 are 0). Every q[i] must be in [-2^(w-1), 2^(w-1)) (FirstOutOfRange)
// and k w <= 8 B (CheckLayout).
template <typename T>
void PackPlaintext(const T* q, int64_t n, int slot_bits, int64_t slots_per_plaintext,
                   int64_t plaintext_bytes, uint8_t* out);

struct OverflowCounts {
  int64_t positive = 0;
  int64_t negative = 0;
};

// Decodes the sum T, given as `len` big-endian bytes (any length: missing
// high bytes are zero, bits at or above W are ignored), into its k slots.
// Writes slots 0..n-1 (n <= k) to values[] and mask[] (mask true = overflow,
// value 0); slots n..k-1 are padding and must decode to 0. Adds the overflows
// found to *counts. 0 <= bound < 2^(w-1) (CheckUnpackLayout).
void UnpackPlaintext(const uint8_t* t, size_t len, int slot_bits, int64_t slots_per_plaintext,
                     int64_t n, int64_t bound, int64_t* values, bool* mask,
                     OverflowCounts* counts);

}  // namespace batchcrypt
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_BATCHCRYPT_BATCHCRYPT_H_
