// The bitwise comparison family (issue 26): [x < 0] for x = x1 + x2 (mod
// 2^64, the low halves of the shares: reduction mod 2^64 is a ring
// homomorphism, DESIGN §3) by a carry circuit on boolean shares, its AND
// gates from Beaver triples dealt by an assistant T who shares a PRG stream
// with each server. No TensorFlow here: the kernels (bitwise_kernels.cc)
// fill the streams with PrgFill and call these functions per block.
//
// The construction: MSB(a + b) = a_63 ^ b_63 ^ carry_63, and carry_63 is the
// generate signal of the low 63 bit positions, computed by a Brent-Kung /
// Sklansky reduction tree of (G, P) pairs, (G, P) o (G', P') = (G ^ P·G',
// P·P') (G and P·G' are never both 1) - ABY3 (Mohassel & Rindal, CCS 2018)
// §5.3's parallel prefix adder restricted to its top output, SPU's SEMI2K
// A2B/MSB with a trusted dealer, and the dealer-generated triples of Beaver
// (CRYPTO 1991) with most of their bits derived from the pairwise PRG keys,
// as in Cryptflow2/SecureNN-style "third-party" dealers (only S2's product
// shares travel). Level 0 is one-sided: S1 owns a, S2 owns b, so
// g = a & b needs a correlation (u, v, r1 ^ r2 = u & v), one bit per
// position each way; levels 1-6 are Beaver ANDs on shared bits, P_hi's
// opening shared by its two ANDs. The last step opens msb ^ r for a dealt
// random bit r that the dealer also shares arithmetically, so
// [msb] = m + (1 - 2m)[r] (m public): one round, like PrivPy's re-sharing
// of the garbled output (DESIGN §6 step 5).
//
// Layout: comparisons go in blocks of 64, bit-sliced: word `pos` of a block
// holds bit `pos` of its 64 comparisons (bit j = comparison j), so every
// gate is a word operation on 64 comparisons and every message is a whole
// number of words (no bit packing). Eight message rounds (steps 0-7) plus
// the dealer's one message, which overlaps round 1.
//
// Streams (AES-CTR, one nonce per call; the per-block words of a segment
// are contiguous and segments follow each other, "level-major", so a step
// reads one range): S1's stream with T gives u, r1 (segment 0), its Beaver
// shares a1, b1, b1', c1, c1' per level (segments 1-6), its bit share of r
// (segment 7), then n_pad ring elements [r·2^f]_1. S2's stream with T gives
// v (0), a2, b2, b2' per level (1-6), its bit share of r (7). The dealer's
// correction message to S2 holds r2 (0), c2, c2' per level (1-6), then
// n_pad ring elements [r·2^f]_2.
#ifndef TF_PRIVPY_OPS_BITWISE_BITWISE_H_
#define TF_PRIVPY_OPS_BITWISE_BITWISE_H_

#include <cstdint>

#include "ops/common/parallel.h"
#include "ops/common/ring_types.h"

namespace tf_privpy {
namespace bitwise {

constexpr int kBlock = 64;        // comparisons per block (one word per bit position)
constexpr int kLevels = 6;        // log2(64) levels of the reduction tree
constexpr int kSteps = 8;         // message rounds: input, 6 tree levels, the B2A opening
constexpr int kSegments = 8;      // stream segments: level 0, levels 1-6, the r bit

// AND groups at tree level l (1..6).
constexpr int Groups(int level) { return kBlock >> level; }

// A party's state after step k, per block, holds only what the next step
// reads (the tree halves at every level; a fixed 129 words per block was
// read and written whole at every step, mostly dead words):
//   step 0: the 64 bit-sliced words of its low half (word 63: the top bit);
//   step k >= 1: G[w], P[w], then the top bit word, w = Pairs(k) = 64 after
//   step 1 (position 63 the identity), Groups(k - 1) after.
constexpr int Pairs(int step) { return step <= 1 ? kBlock : Groups(step - 1); }
constexpr int StateWords(int step) { return step == 0 ? kBlock : 2 * Pairs(step) + 1; }

// Words per block of each party's stream segment (party 0: S1, 1: S2).
int OwnWords(int party, int segment);
// Words per block of the dealer's correction segment (0-6).
int CorrWords(int segment);
// Words per block of the message of step 0-7.
int MessageWords(int step);
// Words before segment `segment` for a batch of `blocks` (level-major).
int64_t OwnOffset(int party, int segment, int64_t blocks);
int64_t CorrOffset(int segment, int64_t blocks);
// Words of all segments of a party's stream, or of the corrections, for a
// batch of `blocks` (the ring elements follow them).
inline int64_t OwnTotal(int party, int64_t blocks) {
  return OwnOffset(party, kSegments, blocks);
}
inline int64_t CorrTotal(int64_t blocks) { return CorrOffset(kLevels + 1, blocks); }

inline int64_t Blocks(int64_t n) { return (n + kBlock - 1) / kBlock; }

// Bit-transposes a 64x64 block in place: afterwards bit j of a[i] is what
// bit i of a[j] was.
void Transpose64(uint64_t a[64]);

// Step 0 of party p for blocks [b0, b1): low [n] (values past n read as 0),
// own_seg0 = its segment-0 words from block `base` on (level-major), state
// [blocks, StateWords(0)], msg [blocks, 63].
void Input(int party, const uint64_t* low, int64_t n, const uint64_t* own_seg0,
           int64_t blocks, uint64_t* state, uint64_t* msg, int64_t b0, int64_t b1,
           int64_t base = 0);

// Step k (1..7) of party p for blocks [b0, b1): state_in from step k - 1,
// recv = the other server's step k - 1 message, own = party p's stream words
// from word `own_start` of the batch's stream (it must cover segments k - 1
// and k: StepRange), corr = the dealer's corrections (party 1 only; nullptr
// for party 0); state_in [blocks, StateWords(k - 1)]. Writes state_out
// [blocks, StateWords(k)] and this step's message.
void Step(int step, int party, const uint64_t* state_in, const uint64_t* recv,
          const uint64_t* own, int64_t own_start, const uint64_t* corr, int64_t blocks,
          uint64_t* state_out, uint64_t* msg, int64_t b0, int64_t b1);

// The same from segment pointers: seg_prev (seg_cur) points at party p's
// segment k - 1 (k) words of block `base` (the kernel generates a few blocks
// of each at a time, in cache).
void StepSegments(int step, int party, const uint64_t* state_in, const uint64_t* recv,
                  const uint64_t* seg_prev, const uint64_t* seg_cur, int64_t base,
                  const uint64_t* corr, int64_t blocks, uint64_t* state_out, uint64_t* msg,
                  int64_t b0, int64_t b1);

// [first, last) words of party p's stream that step k (1..7) reads.
inline void StepRange(int step, int party, int64_t blocks, int64_t* first, int64_t* last) {
  *first = OwnOffset(party, step - 1, blocks);
  *last = OwnOffset(party, step + 1, blocks);
}

// The dealer for blocks [b0, b1): from both servers' stream words (whole
// batch), the correction words [CorrTotal(blocks)].
void Deal(const uint64_t* s1, const uint64_t* s2, int64_t blocks, uint64_t* corr, int64_t b0,
          int64_t b1);

// The same from segment pointers: seg1[s] (seg2[s]) points at S1's (S2's)
// segment-s words of block `base` (the kernel generates a few blocks of
// each segment at a time, in cache, instead of both whole streams).
void DealSegments(const uint64_t* const seg1[kSegments], const uint64_t* const seg2[kSegments],
                  int64_t base, int64_t blocks, uint64_t* corr, int64_t b0, int64_t b1);

// The dealer's ring corrections for comparisons [i0, i1): ring2[i] = r_i·scale
// - ring1[i], r_i = bit i of the r words of both streams, given from block
// `base` on (one word per block; ring1[i - 64·base] for comparison i: the
// kernel's chunks).
template <typename T>
void DealRingSegments(const uint64_t* r1, const uint64_t* r2, const T* ring1, T scale,
                      T* ring2, int64_t i0, int64_t i1, int64_t base) {
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t b = i / kBlock - base;
    const T r = static_cast<T>(((r1[b] ^ r2[b]) >> (i % kBlock)) & 1);
    ring2[i] = ((T(0) - r) & scale) - ring1[i - base * kBlock];
  }
}

// The same from both whole streams (words of the batch, level-major).
template <typename T>
void DealRing(const uint64_t* s1, const uint64_t* s2, int64_t blocks, const T* ring1,
              T scale, T* ring2, int64_t i0, int64_t i1) {
  DealRingSegments<T>(s1 + OwnOffset(0, kSegments - 1, blocks),
                      s2 + OwnOffset(1, kSegments - 1, blocks), ring1, scale, ring2, i0, i1, 0);
}

// Party p's arithmetic share of the bit for comparisons [i0, i1), from both
// step-7 messages (m = own ^ recv, one word per block) and its share R of
// r·scale (R[i - base] for comparison i): m·scale (party 0) + (1 - 2m)·R.
template <typename T>
void Finish(int party, const uint64_t* own, const uint64_t* recv, const T* R, T scale, T* out,
            int64_t i0, int64_t i1, int64_t base = 0) {
  const T add = party == 0 ? scale : T(0);
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t b = i / kBlock;
    const T s = T(0) - static_cast<T>(((own[b] ^ recv[b]) >> (i % kBlock)) & 1);
    const T r = R[i - base];
    out[i] = ((r ^ s) - s) + (s & add);  // s all ones: -R + scale; else R
  }
}

// Server p's share of [msb]·v for k operands of n elements each (the
// select beside a comparison, protocols/mpc/bitwise/selects.py): with m =
// own ^ recv opened as in Finish and w its share of [r·v],
// m·v + (1 - 2m)·[r·v] is v - w where m = 1 and w where m = 0, exact in the
// ring. v, w, out are [k, n] row-major; flat indices [f0, f1) of k·n.
template <typename T>
void Select(const uint64_t* own, const uint64_t* recv, const T* v, const T* w, int64_t n,
            T* out, int64_t f0, int64_t f1) {
  for (int64_t f = f0; f < f1; ++f) {
    const int64_t i = f % n, b = i / kBlock;
    const T s = T(0) - static_cast<T>(((own[b] ^ recv[b]) >> (i % kBlock)) & 1);
    out[f] = ((v[f] - w[f]) & s) | (w[f] & ~s);
  }
}

}  // namespace bitwise
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_BITWISE_BITWISE_H_
