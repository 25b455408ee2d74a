// The bitwise comparison's per-block math (see bitwise.h for the protocol).
#include "ops/bitwise/bitwise.h"

#include <cstring>

namespace tf_privpy {
namespace bitwise {

namespace {

constexpr int kPositions = 63;  // bit positions below the sign bit

// Segment sizes (words per block). S1, level l with g groups: a[g], b[g],
// b'[g-1] (the lowest group's P is never needed), c[g], c'[g-1]; S2: a, b,
// b' only, its c, c' come from the dealer.
int GroupsOf(int segment) { return Groups(segment); }

// The Beaver shares of one level for one block.
struct Masks {
  const uint64_t *a, *b, *bp, *c, *cp;
};

// seg: the party's segment-`level` words of block `base` (rel = block - base).
Masks LevelMasks(int party, int level, const uint64_t* seg, int64_t rel,
                 const uint64_t* corr, int64_t blocks, int64_t block) {
  const int g = Groups(level);
  const uint64_t* w = seg + rel * OwnWords(party, level);
  Masks m{w, w + g, w + 2 * g, nullptr, nullptr};
  if (party == 0) {
    m.c = w + 3 * g - 1;
    m.cp = w + 4 * g - 1;
  } else {
    const uint64_t* k = corr + CorrOffset(level, blocks) + block * CorrWords(level);
    m.c = k;
    m.cp = k + g;
  }
  return m;
}

// A party's opening of level l (g groups) from its shares of the level
// below: d_j = P[2j+1] ^ a_j, e_j = G[2j] ^ b_j, e'_j = P[2j] ^ b'_j (j >= 1).
void Open(int g, const uint64_t* G, const uint64_t* P, const Masks& m, uint64_t* out) {
  for (int j = 0; j < g; ++j) {
    out[j] = P[2 * j + 1] ^ m.a[j];
    out[g + j] = G[2 * j] ^ m.b[j];
  }
  for (int j = 1; j < g; ++j) out[2 * g + j - 1] = P[2 * j] ^ m.bp[j - 1];
}

// Beaver: x·y = c ^ d·b ^ e·a ^ d·e (d = x ^ a, e = y ^ b public; d·e added
// by party 0 only). G_j = G[2j+1] ^ P[2j+1]·G[2j], P_j = P[2j+1]·P[2j].
void Combine(int party, int g, const uint64_t* G, const uint64_t* own, const uint64_t* other,
             const Masks& m, uint64_t* G2, uint64_t* P2) {
  const uint64_t first = party == 0 ? ~uint64_t{0} : 0;
  for (int j = 0; j < g; ++j) {
    const uint64_t d = own[j] ^ other[j], e = own[g + j] ^ other[g + j];
    G2[j] = G[2 * j + 1] ^ m.c[j] ^ (d & m.b[j]) ^ (e & m.a[j]) ^ (first & d & e);
    if (j == 0) {
      P2[0] = 0;  // the lowest group's P is never used
      continue;
    }
    const uint64_t f = own[2 * g + j - 1] ^ other[2 * g + j - 1];
    P2[j] = m.cp[j - 1] ^ (d & m.bp[j - 1]) ^ (f & m.a[j]) ^ (first & d & f);
  }
}

}  // namespace

int OwnWords(int party, int segment) {
  if (segment == 0) return party == 0 ? 2 * kPositions : kPositions;
  if (segment == kSegments - 1) return 1;
  const int g = GroupsOf(segment);
  return party == 0 ? 5 * g - 2 : 3 * g - 1;
}

int CorrWords(int segment) { return segment == 0 ? kPositions : 2 * GroupsOf(segment) - 1; }

int MessageWords(int step) {
  if (step == 0) return kPositions;
  if (step == kSteps - 1) return 1;
  return 3 * Groups(step) - 1;
}

int64_t OwnOffset(int party, int segment, int64_t blocks) {
  int64_t w = 0;
  for (int s = 0; s < segment; ++s) w += OwnWords(party, s);
  return w * blocks;
}

int64_t CorrOffset(int segment, int64_t blocks) {
  int64_t w = 0;
  for (int s = 0; s < segment; ++s) w += CorrWords(s);
  return w * blocks;
}

void Transpose64(uint64_t a[64]) {
  // Hacker's Delight 7-3, LSB-first: swap the off-diagonal j x j blocks,
  // j = 32, 16, ..., 1.
  uint64_t m = 0x00000000FFFFFFFFULL;
  for (int j = 32; j != 0; j >>= 1, m ^= (m << j)) {
    for (int k = 0; k < 64; k = ((k | j) + 1) & ~j) {
      const uint64_t t = ((a[k] >> j) ^ a[k | j]) & m;
      a[k] ^= t << j;
      a[k | j] ^= t;
    }
  }
}

void Input(int party, const uint64_t* low, int64_t n, const uint64_t* own_seg0,
           int64_t blocks, uint64_t* state, uint64_t* msg, int64_t b0, int64_t b1,
           int64_t base) {
  const int ow = OwnWords(party, 0);
  for (int64_t b = b0; b < b1; ++b) {
    uint64_t* st = state + b * StateWords(0);
    uint64_t x[64];
    const int64_t first = b * kBlock;
    const int64_t count = n - first < kBlock ? n - first : kBlock;
    std::memcpy(x, low + first, count * sizeof(uint64_t));
    if (count < kBlock) std::memset(x + count, 0, (kBlock - count) * sizeof(uint64_t));
    Transpose64(x);  // x[pos]: bit pos of the block's 64 values (x[63]: the top bit)
    std::memcpy(st, x, sizeof(x));
    // S1 sends a ^ u, S2 sends b ^ v (u, v its level-0 correlation words)
    const uint64_t* mask = own_seg0 + (b - base) * ow;
    uint64_t* out = msg + b * kPositions;
    for (int pos = 0; pos < kPositions; ++pos) out[pos] = x[pos] ^ mask[pos];
  }
  (void)blocks;
}

void Step(int step, int party, const uint64_t* state_in, const uint64_t* recv,
          const uint64_t* own, int64_t own_start, const uint64_t* corr, int64_t blocks,
          uint64_t* state_out, uint64_t* msg, int64_t b0, int64_t b1) {
  StepSegments(step, party, state_in, recv,
               own + (OwnOffset(party, step - 1, blocks) - own_start),
               own + (OwnOffset(party, step, blocks) - own_start), 0, corr, blocks, state_out,
               msg, b0, b1);
}

void StepSegments(int step, int party, const uint64_t* state_in, const uint64_t* recv,
                  const uint64_t* seg_prev, const uint64_t* seg_cur, int64_t base,
                  const uint64_t* corr, int64_t blocks, uint64_t* state_out, uint64_t* msg,
                  int64_t b0, int64_t b1) {
  const int in_words = MessageWords(step - 1), out_words = MessageWords(step);
  const int w_in = Pairs(step - 1), w_out = Pairs(step);
  // the top bit word: word 63 of step 0's state, after G and P later
  const int top_in = step == 1 ? kPositions : 2 * w_in;
  for (int64_t b = b0; b < b1; ++b) {
    const uint64_t* st = state_in + b * StateWords(step - 1);
    uint64_t* so = state_out + b * StateWords(step);
    const uint64_t* other = recv + b * in_words;
    uint64_t* G = so;
    uint64_t* P = so + w_out;
    const uint64_t top = st[top_in];
    so[2 * w_out] = top;
    const int64_t rel = b - base;
    if (step == 1) {
      // Leaves from the level-0 exchange: g = a & b = (a & e) ^ (d & v) ^ (u & v)
      // with e = b ^ v (S1 receives), d = a ^ u (S2 receives), and the dealt
      // r1 ^ r2 = u & v; p = a ^ b is shared as (a, b) already.
      const uint64_t* w = seg_prev + rel * OwnWords(party, 0);
      if (party == 0) {
        for (int pos = 0; pos < kPositions; ++pos) {
          G[pos] = (st[pos] & other[pos]) ^ w[kPositions + pos];
          P[pos] = st[pos];
        }
      } else {
        const uint64_t* r2 = corr + CorrOffset(0, blocks) + b * CorrWords(0);
        for (int pos = 0; pos < kPositions; ++pos) {
          G[pos] = (other[pos] & w[pos]) ^ r2[pos];
          P[pos] = st[pos];
        }
      }
      // position 63: the identity (G, P) = (0, 1), shared as (0, 0), (1, 0)
      G[kPositions] = 0;
      P[kPositions] = party == 0 ? ~uint64_t{0} : 0;
    } else {
      const int level = step - 1, g = Groups(level);
      const Masks m = LevelMasks(party, level, seg_prev, rel, corr, blocks, b);
      uint64_t mine[3 * kBlock / 2];
      Open(g, st, st + w_in, m, mine);
      Combine(party, g, st, mine, other, m, G, P);
    }
    uint64_t* out = msg + b * out_words;
    if (step < kSteps - 1) {
      const Masks m = LevelMasks(party, step, seg_cur, rel, corr, blocks, b);
      Open(Groups(step), G, P, m, out);
    } else {
      // msb = a_63 ^ b_63 ^ carry; open msb ^ r
      const uint64_t rbit = seg_cur[rel * OwnWords(party, kSegments - 1)];
      out[0] = G[0] ^ top ^ rbit;
    }
  }
  (void)in_words;
}

void Deal(const uint64_t* s1, const uint64_t* s2, int64_t blocks, uint64_t* corr, int64_t b0,
          int64_t b1) {
  const uint64_t* seg1[kSegments];
  const uint64_t* seg2[kSegments];
  for (int s = 0; s < kSegments; ++s) {
    seg1[s] = s1 + OwnOffset(0, s, blocks);
    seg2[s] = s2 + OwnOffset(1, s, blocks);
  }
  DealSegments(seg1, seg2, 0, blocks, corr, b0, b1);
}

void DealSegments(const uint64_t* const seg1[kSegments], const uint64_t* const seg2[kSegments],
                  int64_t base, int64_t blocks, uint64_t* corr, int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t rel = b - base;
    {
      const uint64_t* u = seg1[0] + rel * OwnWords(0, 0);
      const uint64_t* r1 = u + kPositions;
      const uint64_t* v = seg2[0] + rel * OwnWords(1, 0);
      uint64_t* r2 = corr + CorrOffset(0, blocks) + b * CorrWords(0);
      for (int pos = 0; pos < kPositions; ++pos) r2[pos] = (u[pos] & v[pos]) ^ r1[pos];
    }
    for (int level = 1; level <= kLevels; ++level) {
      const int g = Groups(level);
      const uint64_t* w1 = seg1[level] + rel * OwnWords(0, level);
      const uint64_t* w2 = seg2[level] + rel * OwnWords(1, level);
      uint64_t* k = corr + CorrOffset(level, blocks) + b * CorrWords(level);
      // a = a1 ^ a2, b = b1 ^ b2, b' = b1' ^ b2'; S2's c2 = a·b ^ c1, c2' = a·b' ^ c1'
      for (int j = 0; j < g; ++j) {
        const uint64_t a = w1[j] ^ w2[j], bb = w1[g + j] ^ w2[g + j];
        k[j] = (a & bb) ^ w1[3 * g - 1 + j];
        if (j >= 1) {
          const uint64_t bp = w1[2 * g + j - 1] ^ w2[2 * g + j - 1];
          k[g + j - 1] = (a & bp) ^ w1[4 * g - 1 + j - 1];
        }
      }
    }
  }
}

}  // namespace bitwise
}  // namespace tf_privpy
