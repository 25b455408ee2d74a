// BatchCrypt slot packing and exact decoding of sums (layout and proofs in
// batchcrypt.h).
#include "ops/batchcrypt/batchcrypt.h"

#include <string>

namespace tf_privpy {
namespace batchcrypt {

namespace {

using u128 = unsigned __int128;

inline uint64_t LowMask(int bits) { return (uint64_t{1} << bits) - 1; }

}  // namespace

std::string CheckLayout(int slot_bits, int64_t slots_per_plaintext, int64_t plaintext_bytes) {
  if (slot_bits < kMinSlotBits || slot_bits > kMaxSlotBits) {
    return "slot_bits must be in [" + std::to_string(kMinSlotBits) + ", " +
           std::to_string(kMaxSlotBits) + "], got " + std::to_string(slot_bits);
  }
  if (slots_per_plaintext < 1) {
    return "slots_per_plaintext must be >= 1, got " + std::to_string(slots_per_plaintext);
  }
  if (plaintext_bytes < 1 || plaintext_bytes > (int64_t{1} << 40) ||
      slots_per_plaintext > plaintext_bytes * 8 / slot_bits) {
    return std::to_string(slots_per_plaintext) + " slots of " + std::to_string(slot_bits) +
           " bits do not fit in a plaintext of " + std::to_string(plaintext_bytes) + " bytes";
  }
  return "";
}

std::string CheckUnpackLayout(int slot_bits, int64_t slots_per_plaintext, int64_t bound) {
  if (slot_bits < kMinSlotBits || slot_bits > kMaxSlotBits) {
    return "slot_bits must be in [" + std::to_string(kMinSlotBits) + ", " +
           std::to_string(kMaxSlotBits) + "], got " + std::to_string(slot_bits);
  }
  if (slots_per_plaintext < 1 || slots_per_plaintext > (int64_t{1} << 40) / slot_bits) {
    return "slots_per_plaintext must be in [1, 2^40 / slot_bits], got " +
           std::to_string(slots_per_plaintext);
  }
  if (bound < 0 || bound >= (int64_t{1} << (slot_bits - 1))) {
    return "bound must be in [0, 2^(slot_bits-1)) = [0, " +
           std::to_string(int64_t{1} << (slot_bits - 1)) + "), got " + std::to_string(bound);
  }
  return "";
}

template <typename T>
int64_t FirstOutOfRange(const T* q, int64_t n, int slot_bits) {
  const int64_t hi = (int64_t{1} << (slot_bits - 1)) - 1;
  const int64_t lo = -hi - 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(q[i]);
    if (v < lo || v > hi) return i;
  }
  return -1;
}

template <typename T>
void PackPlaintext(const T* q, int64_t n, int slot_bits, int64_t slots_per_plaintext,
                   int64_t plaintext_bytes, uint8_t* out) {
  // Base-2^w digits of V mod 2^W, V = sum_i q_i 2^(w i), from the lowest:
  // x = q_i + borrow, digit = x mod 2^w, borrow = floor(x / 2^w) in {-1, 0}
  // (|x| <= 2^(w-1)). Padding slots (i >= n) have q_i = 0, so a negative V
  // fills them with ones up to bit W; the bytes above W are zero. Streamed
  // from the least significant bit: little-endian byte j is out[B - 1 - j].
  const uint64_t mask = LowMask(slot_bits);
  uint8_t* byte = out + plaintext_bytes;  // one past little-endian byte 0
  u128 acc = 0;
  int nbits = 0;
  int64_t borrow = 0;
  for (int64_t i = 0; i < slots_per_plaintext; ++i) {
    const int64_t x = (i < n ? static_cast<int64_t>(q[i]) : 0) + borrow;
    borrow = x < 0 ? -1 : 0;
    acc |= static_cast<u128>(static_cast<uint64_t>(x) & mask) << nbits;
    nbits += slot_bits;
    while (nbits >= 8) {
      *--byte = static_cast<uint8_t>(acc);
      acc >>= 8;
      nbits -= 8;
    }
  }
  if (nbits > 0) *--byte = static_cast<uint8_t>(acc);
  while (byte > out) *--byte = 0;
}

void UnpackPlaintext(const uint8_t* t, size_t len, int slot_bits, int64_t slots_per_plaintext,
                     int64_t n, int64_t bound, int64_t* values, bool* mask,
                     OverflowCounts* counts) {
  const uint64_t field_mask = LowMask(slot_bits);
  const uint64_t half = uint64_t{1} << (slot_bits - 1);
  const int64_t modulus = int64_t{1} << slot_bits;
  // Reads T from its least significant byte (t[len - 1]); bytes past the
  // string's start are zero. Only the k w low bits are read: T mod 2^W.
  const uint8_t* byte = t + len;
  u128 acc = 0;
  int nbits = 0;
  uint64_t carry = 0;
  for (int64_t i = 0; i < slots_per_plaintext; ++i) {
    while (nbits < slot_bits) {
      acc |= static_cast<u128>(byte > t ? *--byte : 0) << nbits;
      nbits += 8;
    }
    const uint64_t v = (static_cast<uint64_t>(acc) & field_mask) + carry;  // <= 2^w
    acc >>= slot_bits;
    nbits -= slot_bits;
    int64_t d;
    if (v >= half) {  // negative: d = v - 2^w, and T_(i+1) gets the borrow back
      d = static_cast<int64_t>(v) - modulus;
      carry = 1;
    } else {
      d = static_cast<int64_t>(v);
      carry = 0;
    }
    if (i < n) {
      const bool over = d > bound || d < -bound;
      mask[i] = over;
      values[i] = over ? 0 : d;
      if (d > bound) ++counts->positive;
      if (d < -bound) ++counts->negative;
    } else if (d != 0) {  // padding slot: must be 0 in any sum of our plaintexts
      if (d > 0) ++counts->positive;
      else ++counts->negative;
    }
  }
}

template int64_t FirstOutOfRange<int32_t>(const int32_t*, int64_t, int);
template int64_t FirstOutOfRange<int64_t>(const int64_t*, int64_t, int);
template void PackPlaintext<int32_t>(const int32_t*, int64_t, int, int64_t, int64_t, uint8_t*);
template void PackPlaintext<int64_t>(const int64_t*, int64_t, int, int64_t, int64_t, uint8_t*);

}  // namespace batchcrypt
}  // namespace tf_privpy
