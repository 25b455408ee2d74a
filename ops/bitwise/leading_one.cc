// The bitwise leading one's per-element math (the protocol: leading_one.h).
#include "ops/bitwise/leading_one.h"

namespace tf_privpy {
namespace bitwise {
namespace lo {

namespace {

inline uint64_t Low(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

// Party p's share of x & y from a Beaver triple (A, B, C) and the opened
// E = x ^ A, F = y ^ B: C ^ E·B ^ A·F ^ [p = 0]·E·F.
inline uint64_t Beaver(int party, uint64_t e, uint64_t f, uint64_t a, uint64_t b, uint64_t c) {
  return c ^ (e & b) ^ (a & f) ^ (party == 0 ? (e & f) : 0);
}

}  // namespace

void Step(const Plan& plan, bool magnitude, int step, int party, const uint64_t* low,
          const uint64_t* state_in, const uint64_t* recv, const uint64_t* prev,
          const uint64_t* cur, const uint64_t* corr, uint64_t* state_out, uint64_t* msg,
          int64_t i0, int64_t i1) {
  const int W = plan.width, last = plan.Segments() - 1;
  const uint64_t mask_w = Low(W), mask_v = Low(W - 1);
  const int cw = plan.CorrTotal(), mw_in = step > 0 ? plan.MessageWords(step - 1) : 0;
  const int mw = plan.MessageWords(step);
  const int g_prev = step - 1, w_prev = step > 0 ? plan.OwnWords(party, g_prev) : 0;
  const int w_cur = plan.OwnWords(party, step);
  for (int64_t i = i0; i < i1; ++i) {
    const uint64_t* o = cur + (i - i0) * w_cur;
    uint64_t* st = state_out + i * kStateWords;
    uint64_t* m = msg + i * mw;
    if (step == 0) {   // the level-0 word, masked by u (S1) or v (S2)
      const uint64_t x = static_cast<uint64_t>(low[i]) & mask_w;
      st[0] = x;
      st[1] = st[2] = st[3] = st[4] = st[5] = 0;
      m[0] = x ^ o[0];
      continue;
    }
    const uint64_t* si = state_in + i * kStateWords;
    const uint64_t* q = prev + (i - i0) * w_prev;
    const uint64_t* r = recv + i * mw_in;
    const uint64_t* k = party == 1 ? corr + i * cw + plan.CorrOffset(g_prev) : nullptr;
    uint64_t x = si[0], G = si[1], P = si[2];
    // close the previous level
    if (g_prev == 0) {
      if (party == 0) {   // alpha = x ^ u (own), beta received: (a & b) share
        const uint64_t u = q[0], alpha = x ^ u, beta = r[0];
        G = (alpha & beta) ^ (u & beta) ^ q[1];
      } else {
        G = (r[0] & q[0]) ^ k[0];
      }
      P = x;
    } else if (plan.IsAdder(g_prev)) {
      const bool lst = plan.LastAdder(g_prev);
      const uint64_t E = si[3] ^ r[0], F = si[4] ^ r[1];
      const uint64_t A = q[0], B = q[1];
      const uint64_t C = party == 0 ? q[lst ? 2 : 3] : k[0];
      G ^= Beaver(party, E, F, A, B, C);
      if (!lst) {
        const uint64_t F2 = si[5] ^ r[2], C2 = party == 0 ? q[4] : k[1];
        P = Beaver(party, E, F2, A, q[2], C2);
      } else {   // the bits x = a ^ b ^ (G << 1), then y (module doc)
        const uint64_t xw = (x ^ (G << 1)) & mask_w;
        const uint64_t s = (xw >> (W - 1)) & 1;
        if (magnitude) {
          G = (((xw ^ (uint64_t{0} - s)) & mask_v) << 1) ^ s;
        } else {
          G = (xw & mask_v) << 1;
        }
        P = s;
      }
    } else {   // an OR level: Y = Y ^ (Y >> t) ^ (Y & (Y >> t))
      const uint64_t E = si[3] ^ r[0], F = si[4] ^ r[1];
      const uint64_t C = party == 0 ? q[2] : k[0];
      G = G ^ (G >> plan.Shift(g_prev)) ^ Beaver(party, E, F, q[0], q[1], C);
    }
    st[0] = x;
    st[1] = G;
    st[2] = P;
    st[3] = st[4] = st[5] = 0;
    // open this step's level
    if (plan.IsAdder(step)) {
      const uint64_t t = plan.Shift(step);
      st[3] = m[0] = P ^ o[0];
      st[4] = m[1] = (G << t) ^ o[1];
      if (!plan.LastAdder(step)) st[5] = m[2] = (P << t) ^ o[2];
    } else if (plan.IsOr(step)) {
      st[3] = m[0] = G ^ o[0];
      st[4] = m[1] = (G >> plan.Shift(step)) ^ o[1];
    } else if (step == last) {   // M's share: Y and the sign at bit 63, masked by R
      m[0] = (G ^ (P << 63)) ^ o[0];
    }
  }
}

void Deal(const Plan& plan, const uint64_t* const* seg1, const uint64_t* const* seg2,
          uint64_t* corr, int64_t i0, int64_t i1) {
  const int cw = plan.CorrTotal();
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t j = i - i0;
    uint64_t* k = corr + i * cw;
    for (int g = 0; g + 1 < plan.Segments(); ++g) {
      const uint64_t* a = seg1[g] + j * plan.OwnWords(0, g);
      const uint64_t* b = seg2[g] + j * plan.OwnWords(1, g);
      uint64_t* c = k + plan.CorrOffset(g);
      if (g == 0) {   // r2 = (u & v) ^ r1
        c[0] = (a[0] & b[0]) ^ a[1];
      } else if (plan.IsAdder(g)) {
        const bool lst = plan.LastAdder(g);
        const uint64_t A = a[0] ^ b[0];
        c[0] = (A & (a[1] ^ b[1])) ^ a[lst ? 2 : 3];
        if (!lst) c[1] = (A & (a[2] ^ b[2])) ^ a[4];
      } else {
        c[0] = ((a[0] ^ b[0]) & (a[1] ^ b[1])) ^ a[2];
      }
    }
  }
}

}  // namespace lo
}  // namespace bitwise
}  // namespace tf_privpy
