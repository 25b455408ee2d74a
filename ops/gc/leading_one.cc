// Batch-major half-gates garbling and evaluation of the leading-one circuit
// (see leading_one.h for the function, the circuit, the tweaks and the
// stream layout; garble.h for the hash and the garbling scheme).
//
// The circuit is written once (Circuit below) against a small "engine"
// interface on wire slots; three engines run it: the garbler and the
// evaluator process one gate for a whole chunk of elements at a time, so
// each AND gate is one EVP_EncryptUpdate over 4 (2) blocks per element, as
// in the comparator, and the plaintext engine is the reference the tests
// compare both with. Slots are reused (the sum bits are overwritten by |x|
// and then by the prefix OR), so a chunk's labels stay in L2.
#include "ops/gc/leading_one.h"

#include <algorithm>
#include <string>

#include "ops/gc/gc_internal.h"

namespace tf_privpy {
namespace gc {

namespace {

using internal::Arena;
using internal::Fill;
using internal::FixedKeyAes;
using internal::Select;
using internal::Sigma;
using internal::Xor;

constexpr int64_t kChunk = 64;          // elements per batch-major chunk
constexpr int kExtraSlots = 5;          // carry, three temporaries, d
constexpr int64_t kGarbleCyclesPerGate = 80;
constexpr int64_t kEvalCyclesPerGate = 40;

inline uint64_t TweakLo(int64_t i, int g, int half) {
  return (static_cast<uint64_t>(i) << 9) | (static_cast<uint64_t>(g) << 1) |
         static_cast<uint64_t>(half);
}

// The circuit of leading_one.h on slots 0..W-1 (bit i of x, then of v, then
// o_i; slot W-1 keeps the sign) and W..W+4 (carry, temporaries, d).
template <class E>
void Circuit(E& e, int W, bool magnitude) {
  const int C = W, T1 = W + 1, T2 = W + 2, T3 = W + 3, D = W + 4;
  const int S = W - 1;
  e.Zero(C);
  for (int i = 0; i < W; ++i) {  // ripple-carry adder x = a + b mod 2^W
    e.InA(T1, i);
    e.InB(T2, i);
    e.Xor(i, T1, T2);
    e.Xor(i, i, C);
    if (i < W - 1) {  // carry = maj(a, b, c) = c ^ ((a ^ c) & (b ^ c))
      e.Xor(T1, T1, C);
      e.Xor(T2, T2, C);
      e.And(T3, T1, T2);
      e.Xor(C, C, T3);
    }
  }
  if (magnitude) {  // |x| = (x ^ s) + s on bits 0..W-2: an incrementer
    e.Copy(D, S);
    for (int i = 0; i < W - 1; ++i) {
      e.Xor(T1, i, S);
      e.Xor(i, T1, D);
      if (i < W - 2) e.And(D, D, T1);
    }
  }
  for (int i = W - 3; i >= 0; --i) {  // o_i = o_{i+1} OR v_i
    e.And(T1, i + 1, i);
    e.Xor(i, i, i + 1);
    e.Xor(i, i, T1);
  }
}

struct PlainEngine {
  uint64_t a, b;
  uint8_t v[kLeadingOneMaxWidth + kExtraSlots];
  void Zero(int d) { v[d] = 0; }
  void InA(int d, int i) { v[d] = (a >> i) & 1; }
  void InB(int d, int i) { v[d] = (b >> i) & 1; }
  void Copy(int d, int x) { v[d] = v[x]; }
  void Xor(int d, int x, int y) { v[d] = v[x] ^ v[y]; }
  void And(int d, int x, int y) { v[d] = v[x] & v[y]; }
};

// Label engines: slot s holds the labels of one wire for the chunk's m
// elements (zero labels when garbling, active labels when evaluating).
struct LabelSlots {
  Block* slots;
  int64_t m;
  int W;
  const Block* in_a;  // [m, W]
  const Block* in_b;
  Block* S(int s) const { return slots + s * kChunk; }
  void Zero(int d) { std::fill(S(d), S(d) + m, Block{0, 0}); }  // public 0
  void InA(int d, int i) {
    for (int64_t k = 0; k < m; ++k) S(d)[k] = in_a[k * W + i];
  }
  void InB(int d, int i) {
    for (int64_t k = 0; k < m; ++k) S(d)[k] = in_b[k * W + i];
  }
  void Copy(int d, int x) { std::copy(S(x), S(x) + m, S(d)); }
  void Xor(int d, int x, int y) {
    const Block *px = S(x), *py = S(y);
    Block* pd = S(d);
    for (int64_t k = 0; k < m; ++k) pd[k] = internal::Xor(px[k], py[k]);
  }
};

struct GarbleEngine : LabelSlots {
  FixedKeyAes* aes;
  Block delta, sdelta;
  uint64_t nonce;
  int64_t i0;      // first element of the chunk in the batch
  int G;           // gates per element
  Block* tables;   // the whole batch's tables
  Block *hin, *hout, *tmp;
  int g = 0;
  bool ok = true;
  void And(int d, int x, int y) {
    if (!ok) return;
    const Block *px = S(x), *py = S(y);
    for (int64_t k = 0; k < m; ++k) {
      const uint64_t t = TweakLo(i0 + k, g, 0);
      const Block sa = internal::Xor(Sigma(px[k]), Block{t, nonce});
      const Block sb = internal::Xor(Sigma(py[k]), Block{t | 1, nonce});
      hin[4 * k] = sa;
      hin[4 * k + 1] = internal::Xor(sa, sdelta);
      hin[4 * k + 2] = sb;
      hin[4 * k + 3] = internal::Xor(sb, sdelta);
    }
    if (!aes->Permute(hin, hout, 4 * m)) {
      ok = false;
      return;
    }
    for (int64_t k = 0; k < m; ++k) {
      // H(X, j) = pi(sigma(X) ^ j) ^ sigma(X) ^ j; half-gates (ZRE15, Fig. 2).
      const Block ha0 = internal::Xor(hout[4 * k], hin[4 * k]);
      const Block ha1 = internal::Xor(hout[4 * k + 1], hin[4 * k + 1]);
      const Block hb0 = internal::Xor(hout[4 * k + 2], hin[4 * k + 2]);
      const Block hb1 = internal::Xor(hout[4 * k + 3], hin[4 * k + 3]);
      const Block a = px[k], b = py[k];
      const Block tg = internal::Xor(internal::Xor(ha0, ha1), Select(b.lo, delta));
      const Block wg0 = internal::Xor(ha0, Select(a.lo, tg));
      const Block hb01 = internal::Xor(hb0, hb1);
      const Block te = internal::Xor(hb01, a);
      const Block we0 = internal::Xor(hb0, Select(b.lo, hb01));
      tmp[k] = internal::Xor(wg0, we0);
      Block* out = tables + ((i0 + k) * G + g) * 2;
      out[0] = tg;
      out[1] = te;
    }
    std::copy(tmp, tmp + m, S(d));
    ++g;
  }
};

struct EvalEngine : LabelSlots {
  FixedKeyAes* aes;
  uint64_t nonce;
  int64_t i0;          // first element of the chunk in the slice
  int64_t first;       // index of the slice's first element in the batch
  int G;
  const Block* tables;  // the slice's tables
  Block *hin, *hout, *tmp;
  int g = 0;
  bool ok = true;
  void And(int d, int x, int y) {
    if (!ok) return;
    const Block *px = S(x), *py = S(y);
    for (int64_t k = 0; k < m; ++k) {
      const uint64_t t = TweakLo(first + i0 + k, g, 0);
      hin[2 * k] = internal::Xor(Sigma(px[k]), Block{t, nonce});
      hin[2 * k + 1] = internal::Xor(Sigma(py[k]), Block{t | 1, nonce});
    }
    if (!aes->Permute(hin, hout, 2 * m)) {
      ok = false;
      return;
    }
    for (int64_t k = 0; k < m; ++k) {
      const Block* tt = tables + ((i0 + k) * G + g) * 2;
      const Block a = px[k], b = py[k];
      // WG = H(A) ^ sA TG;  WE = H(B) ^ sB (TE ^ A)   (ZRE15, Fig. 2).
      const Block wg = internal::Xor(internal::Xor(hout[2 * k], hin[2 * k]),
                                     Select(a.lo, tt[0]));
      const Block we = internal::Xor(internal::Xor(hout[2 * k + 1], hin[2 * k + 1]),
                                     Select(b.lo, internal::Xor(tt[1], a)));
      tmp[k] = internal::Xor(wg, we);
    }
    std::copy(tmp, tmp + m, S(d));
    ++g;
  }
};

bool CheckArgs(int64_t n, int width, std::string* error) {
  if (n < 0 || n > kMaxComparisons) {
    *error = "number of elements out of range";
    return false;
  }
  if (width < kLeadingOneMinWidth || width > kLeadingOneMaxWidth) {
    *error = "width must be in [3, 64]";
    return false;
  }
  return true;
}

}  // namespace

void LeadingOnePlain(uint64_t a, uint64_t b, int width, bool magnitude,
                     uint8_t* out) {
  PlainEngine e;
  e.a = a;
  e.b = b;
  Circuit(e, width, magnitude);
  std::copy(e.v, e.v + width, out);
}

bool LeadingOneGarble(const uint8_t key12[16], uint64_t nonce, int64_t n,
                      int width, bool magnitude, Block* tables,
                      uint8_t* decode, const ParallelFor& parallel_for,
                      std::string* error) {
  if (!CheckArgs(n, width, error)) return false;
  if (n == 0) return true;
  Block delta;
  if (!DeriveDelta(key12, nonce, &delta, error)) return false;
  const int W = width, G = LeadingOneAndGates(width, magnitude);
  const uint64_t label_bytes = static_cast<uint64_t>(W) * sizeof(Block);
  return internal::ForChunks(
      n, kChunk, G * kGarbleCyclesPerGate, parallel_for, error,
      [&](int64_t begin, int64_t end, std::string* err) {
        FixedKeyAes aes;
        if (!aes.Init()) {
          *err = "fixed-key AES-128-ECB setup failed (OpenSSL EVP error)";
          return false;
        }
        Arena arena(kChunk * (W + kExtraSlots + 2 * W + 9) + kChunk * W / 16 + 1,
                    /*wipe=*/true);
        Block* slots = arena.Take(kChunk * (W + kExtraSlots));
        Block* a0 = arena.Take(kChunk * W);
        Block* b0 = arena.Take(kChunk * W);
        Block* hin = arena.Take(4 * kChunk);
        Block* hout = arena.Take(4 * kChunk);
        Block* tmp = arena.Take(kChunk);
        uint8_t* mask = reinterpret_cast<uint8_t*>(arena.Take(kChunk * W / 16 + 1));
        for (int64_t i0 = begin; i0 < end; i0 += kChunk) {
          const int64_t m = std::min(kChunk, end - i0);
          if (!Fill(key12, nonce, LoLabelsOffset(LoRole::kA, n, W) + i0 * label_bytes, a0,
                    m * label_bytes, err) ||
              !Fill(key12, nonce, LoLabelsOffset(LoRole::kB, n, W) + i0 * label_bytes, b0,
                    m * label_bytes, err) ||
              !Fill(key12, nonce, LoMaskOffset(n, W) + i0 * W, mask, m * W, err))
            return false;
          GarbleEngine e;
          e.slots = slots;
          e.m = m;
          e.W = W;
          e.in_a = a0;
          e.in_b = b0;
          e.aes = &aes;
          e.delta = delta;
          e.sdelta = Sigma(delta);  // sigma is linear
          e.nonce = nonce;
          e.i0 = i0;
          e.G = G;
          e.tables = tables;
          e.hin = hin;
          e.hout = hout;
          e.tmp = tmp;
          Circuit(e, W, magnitude);
          if (!e.ok || e.g != G) {
            *err = e.ok ? "internal error: gate count mismatch"
                        : "fixed-key AES failed (OpenSSL EVP error)";
            return false;
          }
          for (int64_t k = 0; k < m; ++k)
            for (int j = 0; j < W; ++j)
              decode[(i0 + k) * W + j] =
                  static_cast<uint8_t>((e.S(j)[k].lo ^ mask[k * W + j]) & 1);
        }
        return true;
      });
}

bool LeadingOneEncode(const uint8_t key12[16], uint64_t nonce, LoRole role,
                      int width, const int64_t* values, int64_t n,
                      Block* labels, const ParallelFor& parallel_for,
                      std::string* error) {
  if (!CheckArgs(n, width, error)) return false;
  if (n == 0) return true;
  Block delta;
  if (!DeriveDelta(key12, nonce, &delta, error)) return false;
  const int W = width;
  const uint64_t label_bytes = static_cast<uint64_t>(W) * sizeof(Block);
  const uint64_t base = LoLabelsOffset(role, n, W);
  return internal::ForChunks(
      n, kChunk, 10 * W, parallel_for, error,
      [&](int64_t begin, int64_t end, std::string* err) {
        for (int64_t i0 = begin; i0 < end; i0 += kChunk) {
          const int64_t m = std::min(kChunk, end - i0);
          Block* out = labels + i0 * W;
          if (!Fill(key12, nonce, base + i0 * label_bytes, out, m * label_bytes, err))
            return false;
          for (int64_t k = 0; k < m; ++k) {
            const uint64_t v = static_cast<uint64_t>(values[i0 + k]);
            Block* l = out + k * W;
            for (int j = 0; j < W; ++j) l[j] = Xor(l[j], Select(v >> j, delta));
          }
        }
        return true;
      });
}

bool LeadingOneEvaluate(uint64_t nonce, int64_t first_index, int64_t n,
                        int width, bool magnitude, const Block* tables,
                        const uint8_t* decode, const Block* labels_a,
                        const Block* labels_b, uint8_t* bits,
                        const ParallelFor& parallel_for, std::string* error) {
  if (!CheckArgs(n, width, error)) return false;
  if (first_index < 0 || first_index > kMaxComparisons - n) {
    *error = "element indices out of range";
    return false;
  }
  const int W = width, G = LeadingOneAndGates(width, magnitude);
  return internal::ForChunks(
      n, kChunk, G * kEvalCyclesPerGate, parallel_for, error,
      [&](int64_t begin, int64_t end, std::string* err) {
        FixedKeyAes aes;
        if (!aes.Init()) {
          *err = "fixed-key AES-128-ECB setup failed (OpenSSL EVP error)";
          return false;
        }
        Arena arena(kChunk * (W + kExtraSlots + 5), /*wipe=*/false);
        Block* slots = arena.Take(kChunk * (W + kExtraSlots));
        Block* hin = arena.Take(2 * kChunk);
        Block* hout = arena.Take(2 * kChunk);
        Block* tmp = arena.Take(kChunk);
        for (int64_t i0 = begin; i0 < end; i0 += kChunk) {
          const int64_t m = std::min(kChunk, end - i0);
          EvalEngine e;
          e.slots = slots;
          e.m = m;
          e.W = W;
          e.in_a = labels_a + i0 * W;
          e.in_b = labels_b + i0 * W;
          e.aes = &aes;
          e.nonce = nonce;
          e.i0 = i0;
          e.first = first_index;
          e.G = G;
          e.tables = tables;
          e.hin = hin;
          e.hout = hout;
          e.tmp = tmp;
          Circuit(e, W, magnitude);
          if (!e.ok) {
            *err = "fixed-key AES failed (OpenSSL EVP error)";
            return false;
          }
          for (int64_t k = 0; k < m; ++k)
            for (int j = 0; j < W; ++j)
              bits[(i0 + k) * W + j] =
                  static_cast<uint8_t>((e.S(j)[k].lo ^ decode[(i0 + k) * W + j]) & 1);
        }
        return true;
      });
}

bool LeadingOneMask(const uint8_t key12[16], uint64_t nonce, int64_t n,
                    int width, uint8_t* m, const ParallelFor& parallel_for,
                    std::string* error) {
  if (!CheckArgs(n, width, error)) return false;
  if (n == 0) return true;
  const int64_t total = n * width;
  if (!PrgFill(key12, nonce, LoMaskOffset(n, width), m, static_cast<size_t>(total),
               parallel_for, error))
    return false;
  parallel_for(total, 1, [m](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) m[i] &= 1;
  });
  return true;
}

}  // namespace gc
}  // namespace tf_privpy
