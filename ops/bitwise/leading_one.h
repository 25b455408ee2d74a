// The leading one of a shared value on boolean shares (the bitwise family's
// sibling of ops/gc/leading_one.h): the thermometer bits o_j = [v >= 2^j]
// of v = x mod 2^(W-1) (or of the one's complement magnitude, o_0 = [x != 0])
// and the sign [x < 0] of x = a + b mod 2^W, a = S1's low word, b = S2's.
// No TensorFlow here: the kernels (leading_one_kernels.cc) fill the streams
// with PrgFill and call these functions per range of elements.
//
// The comparisons of bitwise.h compute one carry per element, bit-sliced;
// here every bit of x is needed, so an element is ONE 64-bit word (bit i =
// position i) and each gate level is a few word operations per element:
//   1. level 0: g = a & b from a one-sided correlation (u, v, r1 ^ r2 = u & v),
//      p = a ^ b shared as (a, b) for free;
//   2. a Kogge-Stone prefix of (G, P) pairs, (G, P) o (G', P') = (G ^ P·G',
//      P·P') on whole words shifted by 1, 2, 4, ... (ABY3, Mohassel & Rindal,
//      CCS 2018, §5.3's parallel-prefix adder with all outputs kept, as SPU's
//      SEMI2K A2B): carries c = G << 1 and the bits x = a ^ b ^ c;
//   3. the magnitude and a suffix OR, Y = Y | (Y >> t) for t = 1, 2, 4, ...
//      (OR(a, b) = a ^ b ^ a·b: one AND per level): bit j + 1 of Y is o_j;
//   4. the B2A of DESIGN §6 step 5 per requested bit: M = F ^ R is opened
//      for a dealt random word R, and [o] = m + (1 - 2m)[r] (m public) with
//      arithmetic shares of the requested bits of R from the dealer.
// AND gates are Beaver triples (CRYPTO 1991) dealt by an assistant T that
// shares a PRG stream with each server: both halves of every triple are
// derived from those streams, only S2's product words travel (T -> S2).
// Each server sees only words masked by the other's stream words; T sees
// nothing but nonces.
//
// Layout of y before the suffix OR: bit 0 = the sign s (magnitude) or 0,
// bits 1..W-1 = v's bits 0..W-2; so o_j is Y's bit j + 1, and with the
// magnitude o_0 = Y's bit 0 = OR(v) | s = [x != 0]. The sign column goes to
// bit 63 of the opened word (W <= 63).
//
// Streams (AES-CTR words, segment-major: segment g holds n·OwnWords(p, g)
// words, element i's at i·OwnWords(p, g) within it):
//   segment 0      S1: u, r1          S2: v
//   adder level l  S1: A, B, B', C, C' S2: A, B, B'   (last level: no B', C')
//   OR level q     S1: A, B, C        S2: A, B
//   final          S1: R              S2: R
// then S1's stream holds n·K ring elements [r_k]_1 (K requested bits). The
// dealer's corrections to S2, element-major ([n, CorrWords]): r2, then C2
// (and C2') per adder level, C2 per OR level; and S2's ring shares [r_k]_2.
//
// Messages, one per step: step 0 the level-0 word (a ^ u or b ^ v); steps
// 1..A the adder levels' openings (e, f, f'; the last level e, f); steps
// A+1..A+O the OR levels' (e, f); the last step M's share. A + O + 2
// rounds: 14 for 33 <= W <= 63.
#ifndef TF_PRIVPY_OPS_BITWISE_LEADING_ONE_H_
#define TF_PRIVPY_OPS_BITWISE_LEADING_ONE_H_

#include <cstdint>

namespace tf_privpy {
namespace bitwise {
namespace lo {

constexpr int kMaxWidth = 63;   // the sign column needs word bit 63
constexpr int kStateWords = 6;  // own word, G (then Y), P (then the sign), e, f, f'

inline int CeilLog2(int v) {
  int k = 0;
  while ((1 << k) < v) ++k;
  return k;
}

// The circuit's shape for a width W in [3, 63].
struct Plan {
  int width = 0, add = 0, ors = 0;
  explicit Plan(int w) : width(w), add(CeilLog2(w - 1)), ors(CeilLog2(w)) {}
  int Steps() const { return add + ors + 2; }      // messages (rounds)
  int Segments() const { return add + ors + 2; }   // stream segments
  // segment kind: 0 level 0, 1..add adder levels, then OR levels, last final
  bool IsAdder(int g) const { return g >= 1 && g <= add; }
  bool IsOr(int g) const { return g > add && g <= add + ors; }
  bool LastAdder(int g) const { return g == add; }
  uint64_t Shift(int g) const {   // the level's shift
    return IsAdder(g) ? uint64_t{1} << (g - 1) : uint64_t{1} << (g - add - 1);
  }
  int OwnWords(int party, int g) const {
    if (g == 0) return party == 0 ? 2 : 1;
    if (IsAdder(g)) return (LastAdder(g) ? 2 : 3) + (party == 0 ? (LastAdder(g) ? 1 : 2) : 0);
    if (IsOr(g)) return party == 0 ? 3 : 2;
    return 1;   // final: R
  }
  int64_t OwnOffset(int party, int g, int64_t n) const {   // words before segment g
    int64_t w = 0;
    for (int s = 0; s < g; ++s) w += OwnWords(party, s);
    return w * n;
  }
  int CorrWords(int g) const {   // the dealer's words per element in segment g
    if (g == 0) return 1;
    if (IsAdder(g)) return LastAdder(g) ? 1 : 2;
    if (IsOr(g)) return 1;
    return 0;
  }
  int CorrOffset(int g) const {
    int w = 0;
    for (int s = 0; s < g; ++s) w += CorrWords(s);
    return w;
  }
  int CorrTotal() const { return CorrOffset(Segments()); }
  int MessageWords(int step) const {
    if (step == 0) return 1;
    if (IsAdder(step)) return LastAdder(step) ? 2 : 3;
    if (IsOr(step)) return 2;
    return 1;
  }
  // the opened word's bit of leading-one column j (W - 1: the sign)
  int Position(int column, bool magnitude) const {
    if (column == width - 1) return 63;
    return (magnitude && column == 0) ? 0 : column + 1;
  }
};

// Step `step` of party p (0: S1, 1: S2) for elements [i0, i1). Step 0
// reads `low` (the party's low words, [n]) instead of a state; steps >= 1
// read state_in [n, kStateWords] and recv = the other server's message of
// step - 1 ([n, MessageWords(step - 1)]). prev / cur point at element i0's
// words of the party's segments step - 1 and step (prev unused at step 0);
// corr (party 1 only) [n, CorrTotal]. Writes state_out [n, kStateWords] and
// msg [n, MessageWords(step)].
void Step(const Plan& plan, bool magnitude, int step, int party, const uint64_t* low,
          const uint64_t* state_in, const uint64_t* recv, const uint64_t* prev,
          const uint64_t* cur, const uint64_t* corr, uint64_t* state_out, uint64_t* msg,
          int64_t i0, int64_t i1);

// The dealer for elements [i0, i1): seg1[g] / seg2[g] point at element i0's
// words of S1's / S2's segment g. Writes corr [n, CorrTotal] rows i0..i1.
void Deal(const Plan& plan, const uint64_t* const* seg1, const uint64_t* const* seg2,
          uint64_t* corr, int64_t i0, int64_t i1);

// S2's ring shares [n, K] of the requested bits r_k of R = R1 ^ R2 for
// elements [i0, i1): ring2 = r_k - ring1 (ring1 of element i0 onwards, K per
// element; R1 / R2 one word per element from element i0).
template <typename T>
void DealRing(const uint64_t* r1, const uint64_t* r2, const T* ring1, const int* pos, int k,
              T* ring2, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const uint64_t r = r1[i - i0] ^ r2[i - i0];
    for (int c = 0; c < k; ++c)
      ring2[i * k + c] = static_cast<T>((r >> pos[c]) & 1) - ring1[(i - i0) * k + c];
  }
}

// Party p's share of bit `pos` of m from its ring share r of the dealt bit:
// m_b (party 0, add = 1) + (1 - 2 m_b)·r, branch-free (s = -m_b: m_b = 1
// gives 1 - r for party 0 and -r for party 1, m_b = 0 gives r).
template <typename T>
inline T BitShare(uint64_t m, int pos, T r, T add) {
  const T s = T(0) - static_cast<T>((m >> pos) & 1);
  return ((r ^ s) - s) + (s & add);
}

// Party p's integer shares [n, K] of the requested bits for elements
// [i0, i1), from both final messages (M = own ^ recv) and its ring shares
// R of the r bits (R of element i0 onwards): m (party 0) + (1 - 2m)·R.
template <typename T>
void Finish(int party, const uint64_t* own, const uint64_t* recv, const T* R, const int* pos,
            int k, T* out, int64_t i0, int64_t i1) {
  const T add = party == 0 ? T(1) : T(0);
  for (int64_t i = i0; i < i1; ++i) {
    const uint64_t m = own[i] ^ recv[i];
    for (int c = 0; c < k; ++c) out[i * k + c] = BitShare(m, pos[c], R[(i - i0) * k + c], add);
  }
}

// Finish fused with a public integer table [k + 1, j] (row-major): party
// p's shares [n, j] of bits @ table[:k] + table[k] for elements [i0, i1),
// the bits as Finish makes them, never stored. Why: the range reductions
// multiply the K leading-one columns by such a table at once
// (fixedpoint/range_reduction.py); a separate ring matmul wrote and read
// back K ring words per element for a few (j) outputs. The sums stay in
// registers, kTableBlock columns at a time (j is 2-5 in the derived
// functions; a wider table takes more passes over the bits). Exact: the
// ring reduces the products as the matmul did.
constexpr int kTableBlock = 8;

template <typename T>
void FinishTable(int party, const uint64_t* own, const uint64_t* recv, const T* R, const int* pos,
                 int k, const int64_t* table, int j, T* out, int64_t i0, int64_t i1) {
  const T add = party == 0 ? T(1) : T(0);
  for (int64_t i = i0; i < i1; ++i) {
    const uint64_t m = own[i] ^ recv[i];
    const T* r = R + (i - i0) * k;
    for (int c0 = 0; c0 < j; c0 += kTableBlock) {
      const int w = j - c0 < kTableBlock ? j - c0 : kTableBlock;
      T acc[kTableBlock];
      for (int c = 0; c < w; ++c) acc[c] = party == 0 ? static_cast<T>(table[k * j + c0 + c]) : T(0);
      for (int b = 0; b < k; ++b) {
        const T bit = BitShare(m, pos[b], r[b], add);
        const int64_t* row = table + b * j + c0;
        for (int c = 0; c < w; ++c) acc[c] += bit * static_cast<T>(row[c]);
      }
      T* o = out + i * j + c0;
      for (int c = 0; c < w; ++c) o[c] = acc[c];
    }
  }
}

}  // namespace lo
}  // namespace bitwise
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_BITWISE_LEADING_ONE_H_
