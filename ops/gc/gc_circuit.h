// Batch-major garbling and evaluation of a small fixed circuit per element,
// shared by the leading-one encoder (leading_one.cc) and the window
// thresholds circuit (thresholds.cc). Internal to ops/gc.
//
// A circuit is written once, as a template over an "engine" with slot
// operations (Zero, InA, InB, Copy, Xor, Not, And on wire slots); three
// engines run it: the garbler and the evaluator process one gate for a whole
// chunk of elements at a time (each AND gate is one EVP_EncryptUpdate over
// 4 (2) blocks per element, as in the comparator), and the plaintext engine
// is the reference the tests compare both with. Garbling, hash and no-OT
// input scheme are the comparator's (garble.h; PrivPy §5.3, DESIGN §6):
// free XOR, NOT by flipping the garbler's zero label (Delta), half-gates ANDs.
//
// Stream of (key12, nonce) (ops/prg/aes_ctr.h) for n elements of a circuit
// with W input bits per share and K outputs:
//     [0, 16)                       Delta (lsb forced to 1)
//     [16, 16 + 16 W n)             zero labels of a: block 16 + 16 (W i + k)
//                                   is a_{i,k}^0
//     [16 + 16 W n, 16 + 32 W n)    zero labels of b, same order
//     [16 + 32 W n, 16 + 32 W n + K n)  output masks: m[i, j] = lsb of byte
//                                   16 + 32 W n + K i + j
// Tables of a slice: see TableIndex (chunk-major, gate-major within a chunk).
// Hash tweak j.hi = nonce, j.lo = i << tweak_shift | g << 1 | half: the
// circuit has fewer than 2^(tweak_shift - 1) AND gates, and i < 2^40.
// K counts the outputs a caller asked for (CircuitShape::out_slots), so the
// garbler, the evaluator and the mask kernel of one batch must agree on them.
//
// Garbling and input encoding work on a slice (BatchSlice, garble.h) of the
// batch: S1 garbles T1's half and T2's half as two tensors and each server
// encodes its halves apart, instead of slicing [n, G, 4] tables and [n, W, 2]
// labels (copies of 1-3 KB per element) before sending them.
#ifndef TF_PRIVPY_OPS_GC_GC_CIRCUIT_H_
#define TF_PRIVPY_OPS_GC_GC_CIRCUIT_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/gc/gc_internal.h"

namespace tf_privpy {
namespace gc {
namespace internal {

constexpr int64_t kCircuitChunk = 64;   // elements per batch-major chunk
constexpr int64_t kGarbleCyclesPerGate = 80;
constexpr int64_t kEvalCyclesPerGate = 40;

// The public shape of a circuit: W input bits per share, `slots` wire slots,
// `gates` AND gates, outputs read from out_slots (K = out_slots.size()).
struct CircuitShape {
  int width;
  int slots;
  int gates;
  int tweak_shift;
  std::vector<int> out_slots;
  int outputs() const { return static_cast<int>(out_slots.size()); }
};

enum class InputRole { kA, kB };  // kA: S1's x1; kB: S2's x2.

inline uint64_t CircuitLabelsOffset(InputRole role, int64_t n, int width) {
  return 16 + (role == InputRole::kA ? 0 : static_cast<uint64_t>(n) * width * 16);
}
inline uint64_t CircuitMaskOffset(int64_t n, int width) {
  return 16 + 2 * static_cast<uint64_t>(n) * width * 16;
}

// Counts AND gates (shape functions, checks).
struct CountEngine {
  int gates = 0;
  void Zero(int) {}
  void InA(int, int) {}
  void InB(int, int) {}
  void Copy(int, int) {}
  void Xor(int, int, int) {}
  void Not(int, int) {}
  void And(int, int, int) { ++gates; }
};

struct PlainEngine {
  uint64_t a, b;
  std::vector<uint8_t> v;
  void Zero(int d) { v[d] = 0; }
  void InA(int d, int i) { v[d] = (a >> i) & 1; }
  void InB(int d, int i) { v[d] = (b >> i) & 1; }
  void Copy(int d, int x) { v[d] = v[x]; }
  void Xor(int d, int x, int y) { v[d] = v[x] ^ v[y]; }
  void Not(int d, int x) { v[d] = v[x] ^ 1; }
  void And(int d, int x, int y) { v[d] = v[x] & v[y]; }
};

// Label engines: slot s holds the labels of one wire for the chunk's m
// elements (zero labels when garbling, active labels when evaluating).
struct LabelSlots {
  Block* slots;
  int64_t m;
  int64_t i0;     // first element of the chunk in the slice
  int64_t first;  // index of the slice's first element in the batch
  int W;
  const Block* in_a;  // [m, W]
  const Block* in_b;
  Block* S(int s) const { return slots + s * kCircuitChunk; }
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

// Where the tables of AND gate g of element i of a slice of `count`
// elements (G gates each) start, in tables: chunk-major, then gate-major
// within a chunk of kCircuitChunk elements (the slice's last chunk may be
// shorter). The engines run one gate over a whole chunk, so they write and
// read 2 KB runs; with element-major tables ((i * G + g)) each gate touched
// 64 lines G * 32 bytes apart, and the evaluator spent about half its time
// on those cache misses. Chunks start at the slice's first element, so the
// garbler and the evaluator of one slice must agree on it (they do: both get
// T1's or T2's part, backend.halves).
inline int64_t TableIndex(int64_t i, int g, int64_t count, int G) {
  const int64_t i0 = i - i % kCircuitChunk;
  const int64_t m = std::min(kCircuitChunk, count - i0);
  return i0 * G + static_cast<int64_t>(g) * m + (i - i0);
}

inline uint64_t CircuitTweakLo(int64_t i, int g, int half, int shift) {
  return (static_cast<uint64_t>(i) << shift) | (static_cast<uint64_t>(g) << 1) |
         static_cast<uint64_t>(half);
}

struct GarbleEngine : LabelSlots {
  FixedKeyAes* aes;
  Block delta, sdelta;
  uint64_t nonce;
  int G;           // gates per element
  int shift;       // tweak shift
  Block* tables;   // the slice's tables
  Block *hin, *hout, *tmp;
  int g = 0;
  bool ok = true;
  // NOT x: the zero label of ~x is the one label of x (free, no table).
  void Not(int d, int x) {
    const Block* px = S(x);
    Block* pd = S(d);
    for (int64_t k = 0; k < m; ++k) pd[k] = internal::Xor(px[k], delta);
  }
  void And(int d, int x, int y) {
    if (!ok) return;
    const Block *px = S(x), *py = S(y);
    for (int64_t k = 0; k < m; ++k) {
      const uint64_t t = CircuitTweakLo(first + i0 + k, g, 0, shift);
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
      Block* out = tables + (i0 * G + g * m + k) * 2;   // TableIndex
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
  int G;
  int shift;
  const Block* tables;  // the slice's tables
  Block *hin, *hout, *tmp;
  int g = 0;
  bool ok = true;
  void Not(int d, int x) { Copy(d, x); }  // the garbler flipped the meaning
  void And(int d, int x, int y) {
    if (!ok) return;
    const Block *px = S(x), *py = S(y);
    for (int64_t k = 0; k < m; ++k) {
      const uint64_t t = CircuitTweakLo(first + i0 + k, g, 0, shift);
      hin[2 * k] = internal::Xor(Sigma(px[k]), Block{t, nonce});
      hin[2 * k + 1] = internal::Xor(Sigma(py[k]), Block{t | 1, nonce});
    }
    if (!aes->Permute(hin, hout, 2 * m)) {
      ok = false;
      return;
    }
    for (int64_t k = 0; k < m; ++k) {
      const Block* tt = tables + (i0 * G + g * m + k) * 2;   // TableIndex
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

// Ripple-carry adder x = a + b mod 2^W into slots 0..W-1 (W - 1 AND gates):
// c_0 = 0, x_i = a_i ^ b_i ^ c_i, c_{i+1} = c_i ^ ((a_i ^ c_i) & (b_i ^ c_i)).
// Slots c, t1, t2, t3 are scratch.
template <class E>
void AddShares(E& e, int W, int c, int t1, int t2, int t3) {
  e.Zero(c);
  for (int i = 0; i < W; ++i) {
    e.InA(t1, i);
    e.InB(t2, i);
    e.Xor(i, t1, t2);
    e.Xor(i, i, c);
    if (i < W - 1) {  // carry = maj(a, b, c)
      e.Xor(t1, t1, c);
      e.Xor(t2, t2, c);
      e.And(t3, t1, t2);
      e.Xor(c, c, t3);
    }
  }
}

// The fields the garbling and evaluation engines share, for one chunk.
template <class E>
void SetUpEngine(E& e, Block* slots, int64_t m, int W, const Block* in_a, const Block* in_b,
                 FixedKeyAes* aes, uint64_t nonce, int64_t i0, int64_t first,
                 const CircuitShape& sh, Block* hin, Block* hout, Block* tmp) {
  e.slots = slots;
  e.m = m;
  e.W = W;
  e.in_a = in_a;
  e.in_b = in_b;
  e.aes = aes;
  e.nonce = nonce;
  e.i0 = i0;
  e.first = first;
  e.G = sh.gates;
  e.shift = sh.tweak_shift;
  e.hin = hin;
  e.hout = hout;
  e.tmp = tmp;
}

inline bool CheckBatch(int64_t n, std::string* error) {
  if (n < 0 || n > kMaxComparisons) {
    *error = "number of elements out of range";
    return false;
  }
  return true;
}

inline bool CheckSlice(const BatchSlice& s, std::string* error) {
  if (!CheckBatch(s.n, error)) return false;
  if (s.first < 0 || s.count < 0 || s.first > s.n - s.count) {
    *error = "slice [first, first + count) out of the batch [0, n)";
    return false;
  }
  return true;
}

// Runs the circuit on plaintext bits: out[j] = value of out_slots[j].
template <class Circuit>
void PlainCircuit(uint64_t a, uint64_t b, const CircuitShape& shape, const Circuit& circuit,
                  uint8_t* out) {
  PlainEngine e;
  e.a = a;
  e.b = b;
  e.v.assign(shape.slots, 0);
  circuit(e);
  for (int j = 0; j < shape.outputs(); ++j) out[j] = e.v[shape.out_slots[j]];
}

template <class Circuit>
int CountGates(const Circuit& circuit) {
  CountEngine e;
  circuit(e);
  return e.gates;
}

// S1: tables[TableIndex(i, g, s.count, G) * 2 + {0, 1}] = (TG, TE) of AND
// gate g of element s.first + i of the batch; decode[i * K + j] = lsb(zero
// label of output j) ^ m[s.first + i, j] (i < s.count).
template <class Circuit>
bool GarbleCircuit(const uint8_t key12[16], uint64_t nonce, const BatchSlice& s,
                   const CircuitShape& sh, const Circuit& circuit, Block* tables,
                   uint8_t* decode, const ParallelFor& parallel_for, std::string* error) {
  if (!CheckSlice(s, error)) return false;
  if (s.count == 0) return true;
  const int64_t n = s.n;
  Block delta;
  if (!DeriveDelta(key12, nonce, &delta, error)) return false;
  const int W = sh.width, G = sh.gates, K = sh.outputs();
  const uint64_t label_bytes = static_cast<uint64_t>(W) * sizeof(Block);
  constexpr int64_t C = kCircuitChunk;
  return ForChunks(
      s.count, C, G * kGarbleCyclesPerGate, parallel_for, error,
      [&](int64_t begin, int64_t end, std::string* err) {
        FixedKeyAes aes;
        if (!aes.Init()) {
          *err = "fixed-key AES-128-ECB setup failed (OpenSSL EVP error)";
          return false;
        }
        Arena arena(C * (sh.slots + 2 * W + 9) + C * K / 16 + 1, /*wipe=*/true);
        Block* slots = arena.Take(C * sh.slots);
        Block* a0 = arena.Take(C * W);
        Block* b0 = arena.Take(C * W);
        Block* hin = arena.Take(4 * C);
        Block* hout = arena.Take(4 * C);
        Block* tmp = arena.Take(C);
        uint8_t* mask = reinterpret_cast<uint8_t*>(arena.Take(C * K / 16 + 1));
        for (int64_t i0 = begin; i0 < end; i0 += C) {
          const int64_t m = std::min(C, end - i0);
          const int64_t gi = s.first + i0;  // in the batch: fixes the stream offsets
          if (!Fill(key12, nonce, CircuitLabelsOffset(InputRole::kA, n, W) + gi * label_bytes,
                    a0, m * label_bytes, err) ||
              !Fill(key12, nonce, CircuitLabelsOffset(InputRole::kB, n, W) + gi * label_bytes,
                    b0, m * label_bytes, err) ||
              !Fill(key12, nonce, CircuitMaskOffset(n, W) + gi * K, mask, m * K, err))
            return false;
          GarbleEngine e;
          SetUpEngine(e, slots, m, W, a0, b0, &aes, nonce, i0, s.first, sh, hin, hout, tmp);
          e.delta = delta;
          e.sdelta = Sigma(delta);  // sigma is linear
          e.tables = tables;
          circuit(e);
          if (!e.ok || e.g != G) {
            *err = e.ok ? "internal error: gate count mismatch"
                        : "fixed-key AES failed (OpenSSL EVP error)";
            return false;
          }
          for (int64_t k = 0; k < m; ++k)
            for (int j = 0; j < K; ++j)
              decode[(i0 + k) * K + j] = static_cast<uint8_t>(
                  (e.S(sh.out_slots[j])[k].lo ^ mask[k * K + j]) & 1);
        }
        return true;
      });
}

// S1 (kA, values = x1) or S2 (kB, values = x2): labels[i * W + k] = active
// label of bit k of values[i], element s.first + i of the batch (only the
// low W bits are used; i < s.count).
inline bool EncodeCircuitInput(const uint8_t key12[16], uint64_t nonce, InputRole role,
                               int width, const int64_t* values, const BatchSlice& s,
                               Block* labels, const ParallelFor& parallel_for,
                               std::string* error) {
  if (!CheckSlice(s, error)) return false;
  if (s.count == 0) return true;
  Block delta;
  if (!DeriveDelta(key12, nonce, &delta, error)) return false;
  const int W = width;
  const uint64_t label_bytes = static_cast<uint64_t>(W) * sizeof(Block);
  const uint64_t base = CircuitLabelsOffset(role, s.n, W) + s.first * label_bytes;
  return ForChunks(s.count, kCircuitChunk, 10 * W, parallel_for, error,
                   [&](int64_t begin, int64_t end, std::string* err) {
                     for (int64_t i0 = begin; i0 < end; i0 += kCircuitChunk) {
                       const int64_t m = std::min(kCircuitChunk, end - i0);
                       Block* out = labels + i0 * W;
                       if (!Fill(key12, nonce, base + i0 * label_bytes, out, m * label_bytes,
                                 err))
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

// T1/T2: bits[i * K + j] = out[j] ^ m[i, j] of elements first_index + i of
// the garbled batch (a slice of it, as for the comparator).
template <class Circuit>
bool EvaluateCircuit(uint64_t nonce, int64_t first_index, int64_t n, const CircuitShape& sh,
                     const Circuit& circuit, const Block* tables, const uint8_t* decode,
                     const Block* labels_a, const Block* labels_b, uint8_t* bits,
                     const ParallelFor& parallel_for, std::string* error) {
  if (!CheckBatch(n, error)) return false;
  if (first_index < 0 || first_index > kMaxComparisons - n) {
    *error = "element indices out of range";
    return false;
  }
  const int W = sh.width, K = sh.outputs();
  constexpr int64_t C = kCircuitChunk;
  return ForChunks(
      n, C, sh.gates * kEvalCyclesPerGate, parallel_for, error,
      [&](int64_t begin, int64_t end, std::string* err) {
        FixedKeyAes aes;
        if (!aes.Init()) {
          *err = "fixed-key AES-128-ECB setup failed (OpenSSL EVP error)";
          return false;
        }
        Arena arena(C * (sh.slots + 5), /*wipe=*/false);
        Block* slots = arena.Take(C * sh.slots);
        Block* hin = arena.Take(2 * C);
        Block* hout = arena.Take(2 * C);
        Block* tmp = arena.Take(C);
        for (int64_t i0 = begin; i0 < end; i0 += C) {
          const int64_t m = std::min(C, end - i0);
          EvalEngine e;
          SetUpEngine(e, slots, m, W, labels_a + i0 * W, labels_b + i0 * W, &aes, nonce, i0,
                      first_index, sh, hin, hout, tmp);
          e.tables = tables;
          circuit(e);
          if (!e.ok) {
            *err = "fixed-key AES failed (OpenSSL EVP error)";
            return false;
          }
          for (int64_t k = 0; k < m; ++k)
            for (int j = 0; j < K; ++j)
              bits[(i0 + k) * K + j] = static_cast<uint8_t>(
                  (e.S(sh.out_slots[j])[k].lo ^ decode[(i0 + k) * K + j]) & 1);
        }
        return true;
      });
}

// S1 and S2: m[i * K + j] in {0, 1}.
inline bool CircuitMask(const uint8_t key12[16], uint64_t nonce, int64_t n, int width,
                        int outputs, uint8_t* m, const ParallelFor& parallel_for,
                        std::string* error) {
  if (!CheckBatch(n, error)) return false;
  if (n == 0) return true;
  const int64_t total = n * outputs;
  if (!PrgFill(key12, nonce, CircuitMaskOffset(n, width), m, static_cast<size_t>(total),
               parallel_for, error))
    return false;
  parallel_for(total, 1, [m](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) m[i] &= 1;
  });
  return true;
}

}  // namespace internal
}  // namespace gc
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_GC_CIRCUIT_H_
