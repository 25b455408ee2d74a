// Ring element types. A share tensor is a TF int64 tensor: shape S in the
// 64-bit ring, S + [2] (little-endian limbs lo, hi) in the 128-bit ring, so
// its buffer is directly an array of uint64_t or unsigned __int128.
#ifndef TF_PRIVPY_OPS_COMMON_RING_TYPES_H_
#define TF_PRIVPY_OPS_COMMON_RING_TYPES_H_

#include <cstdint>

namespace tf_privpy {

using uint128_t = unsigned __int128;
using int128_t = __int128;

template <typename T>
struct RingTraits;

template <>
struct RingTraits<uint64_t> {
  static constexpr int kBits = 64;
  static constexpr int kLimbs = 1;
  using Signed = int64_t;
};

template <>
struct RingTraits<uint128_t> {
  static constexpr int kBits = 128;
  static constexpr int kLimbs = 2;
  using Signed = int128_t;
};

// Local truncation of a share by f bits (PrivPy §5.2, DESIGN §5 step 5):
// party 0 shifts arithmetically, party 1 negates, shifts, negates, so the
// two results add up to x >> f except with probability ~2^(l_x + 1 - l).
template <typename T>
inline T TruncateShare(T z, int party, int frac_bits) {
  using S = typename RingTraits<T>::Signed;
  if (party == 0) return static_cast<T>(static_cast<S>(z) >> frac_bits);
  return static_cast<T>(-(static_cast<S>(static_cast<T>(-z)) >> frac_bits));
}

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_COMMON_RING_TYPES_H_
