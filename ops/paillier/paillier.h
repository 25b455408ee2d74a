// Paillier encryption (Paillier, EUROCRYPT 1999) with g = n + 1, on GMP. No
// TensorFlow here: the kernels (paillier_kernels.cc) call these functions on
// one element at a time from TF's thread pool; the standalone test and bench
// (paillier_test.cc, paillier_bench.cc) call them directly.
//
// Scheme (the same as python-paillier, `phe`, so keys and ciphertexts
// interoperate):
//   keys      n = p q, p and q primes of bits/2 bits each; g = n + 1.
//   encrypt   c = g^m r^n = (1 + m n) r^n  mod n^2,   m in [0, n), r in Z*_n.
//   decrypt   m_p = L_p(c^(p-1) mod p^2) h_p mod p,   L_p(x) = (x - 1) / p,
//             h_p = L_p(g^(p-1) mod p^2)^-1 mod p  (same for q);
//             m = CRT(m_p, m_q).
//   add       c1 c2 mod n^2;   multiply by k: c^k mod n^2 (k < 0: (c^-1)^|k|).
//   signed    a signed plaintext x, |x| < n/2, is m = x mod n (phe's convention).
//
// The noise r^n mod n^2 is a uniform element of the subgroup R of n-th
// residues of Z*_{n^2}. Three ways to make it (all exact, see NoiseCrt):
//   generic (public key only)   r^n mod n^2: a 2048-bit exponent mod a 4096-bit
//                               modulus for a 2048-bit key;
//   CRT (the private-key holder) s_p^p mod p^2 and s_q^q mod q^2 combined by
//                               CRT: two half-size exponents on half-size moduli;
//   precomputed                 any of the above made ahead (a pool) and used
//                               once by EncryptWithNoise.
//
// Big integers cross the API as big-endian unsigned bytes: n in its minimal
// form (first byte non-zero), ciphertexts in exactly CiphertextBytes() bytes,
// plaintexts in at most ModulusBytes() bytes, results in exactly that width.
//
// Side channels. Exponents that are secret use mpz_powm_sec (GMP's
// constant-time exponentiation: run time and memory accesses independent of
// the exponent's bits and of the base): p-1 and q-1 in Decrypt, p and q in
// NoiseCrt, the plaintext factor k in MulPlain (its sign and whether it is 0
// still show). The generic noise r^n has a public exponent n and uses
// mpz_powm. GMP's own temporaries are not wiped after use (as in phe/gmpy2);
// the key material held here is wiped when the key object is destroyed.
#ifndef TF_PRIVPY_OPS_PAILLIER_PAILLIER_H_
#define TF_PRIVPY_OPS_PAILLIER_PAILLIER_H_

#include <gmp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/common/parallel.h"

namespace tf_privpy {
namespace paillier {

// Modulus sizes any op accepts. Key generation also needs an even size.
constexpr int kMinModulusBits = 1024;
constexpr int kMaxModulusBits = 16384;

// An mpz_t with RAII. Secret values are wiped (limbs zeroed) on destruction.
class Mpz {
 public:
  explicit Mpz(bool secret = false) : secret_(secret) { mpz_init(v_); }
  ~Mpz();
  Mpz(const Mpz&) = delete;
  Mpz& operator=(const Mpz&) = delete;
  mpz_ptr get() { return v_; }
  mpz_srcptr get() const { return v_; }
  operator mpz_ptr() { return v_; }              // NOLINT: mirrors mpz_t use
  operator mpz_srcptr() const { return v_; }     // NOLINT
  mpz_ptr operator->() { return v_; }            // for GMP's macros (mpz_sgn, ...)
  mpz_srcptr operator->() const { return v_; }

 private:
  mpz_t v_;
  bool secret_;
};

// Public key: n and what every public operation derives from it.
struct PublicKey {
  Mpz n, n2, half;       // n, n^2, (n - 1) / 2 (largest positive signed value)
  int bits = 0;          // bit length of n
  size_t n_bytes = 0;    // ceil(bits / 8): width of plaintexts and of n
  size_t c_bytes = 0;    // 2 n_bytes: width of ciphertexts
  size_t CiphertextBytes() const { return c_bytes; }
  size_t ModulusBytes() const { return n_bytes; }
};

// Private key with the per-key precomputation of CRT decryption and CRT noise.
struct PrivateKey {
  PublicKey pub;
  Mpz p{true}, q{true}, p2{true}, q2{true};  // p, q, p^2, q^2
  Mpz pm1{true}, qm1{true};                  // p - 1, q - 1
  Mpz hp{true}, hq{true};                    // h_p, h_q (see the header comment)
  Mpz p_inv_q{true};                         // p^-1 mod q
  Mpz p2_inv_q2{true};                       // (p^2)^-1 mod q^2
};

// ---- keys ------------------------------------------------------------------
// Builds a public key from n's minimal big-endian bytes. Checks: minimal form,
// kMinModulusBits <= bits <= kMaxModulusBits, n odd.
bool MakePublicKey(const std::string& n, PublicKey* out, std::string* error);

// Builds a private key from n, p, q (minimal big-endian bytes). Checks, on top
// of MakePublicKey: p q = n, p != q, p and q (probable) primes,
// gcd(n, (p-1)(q-1)) = 1 (needed by CRT noise and by decryption).
bool MakePrivateKey(const std::string& n, const std::string& p, const std::string& q,
                    PrivateKey* out, std::string* error);

// Cached MakePublicKey / MakePrivateKey, keyed by the key bytes: repeated calls
// with the same key share one precomputation. Bounded (least recently used
// entries are dropped; a dropped key is wiped when its last user is done) and
// thread-safe. Returns nullptr and sets *error when the key is invalid.
std::shared_ptr<const PublicKey> GetPublicKey(const std::string& n, std::string* error);
std::shared_ptr<const PrivateKey> GetPrivateKey(const std::string& n, const std::string& p,
                                                const std::string& q, std::string* error);

// A fresh key: p, q random primes of bits/2 bits with their two top bits set
// (so n has exactly `bits` bits), p != q, |p - q| > 2^(bits/2 - 100),
// gcd(n, (p-1)(q-1)) = 1. bits must be even, in [kMinModulusBits,
// kMaxModulusBits]. p and q are searched in parallel (two units of
// parallel_for). Randomness from the OS CSPRNG only.
bool GenerateKey(int bits, const ParallelFor& parallel_for, std::string* n, std::string* p,
                 std::string* q, std::string* error);

// ---- big integers <-> bytes ------------------------------------------------
// Big-endian unsigned bytes of x (0 <= x < 256^width), zero-padded to width.
void WriteFixed(mpz_srcptr x, size_t width, char* out);
// Minimal big-endian bytes of x > 0 (the form keys take).
std::string MinimalBytes(mpz_srcptr x);

// Reads a ciphertext of exactly CiphertextBytes() bytes and checks
// 0 < c < n^2. Does NOT check gcd(c, n) = 1 (see UnitChecker).
bool ReadCiphertext(const PublicKey& key, const char* data, size_t len, mpz_ptr c,
                    std::string* error);
// Plaintext as big-endian unsigned bytes (1 to ModulusBytes() bytes), < n.
bool ReadPlaintextBytes(const PublicKey& key, const char* data, size_t len, mpz_ptr m,
                        std::string* error);
// Signed plaintext x: m = x mod n.
void PlaintextFromInt64(const PublicKey& key, int64_t x, mpz_ptr m);
// Signed value of m in [0, n): m if m <= (n-1)/2, else m - n. False if it
// does not fit in int64.
bool PlaintextToInt64(const PublicKey& key, mpz_srcptr m, int64_t* x);

// Checks that values are units mod n (gcd(c, n) = 1) in bulk: the product of
// units is a unit, so it keeps a running product mod n and takes ONE gcd at
// the end; callers then locate the culprit with IsUnit only when that fails.
class UnitChecker {
 public:
  explicit UnitChecker(const PublicKey& key);
  void Add(mpz_srcptr c);         // c may be any size (reduced mod n here)
  bool AllUnits();                 // true if every value added is a unit mod n
 private:
  const PublicKey& key_;
  Mpz acc_, tmp_;
};
bool IsUnit(const PublicKey& key, mpz_srcptr c);

// ---- operations (thread-safe for a const key) ------------------------------
// out = r^n mod n^2 for a uniform r in Z*_n.
bool NoiseGeneric(const PublicKey& key, mpz_ptr out, std::string* error);
// out = a uniform element of the n-th residues of Z*_{n^2}, by CRT.
bool NoiseCrt(const PrivateKey& key, mpz_ptr out, std::string* error);
// out = (1 + m n) noise mod n^2; m in [0, n), noise in Z*_{n^2}.
void EncryptWithNoise(const PublicKey& key, mpz_srcptr m, mpz_srcptr noise, mpz_ptr out);
// m in [0, n) from c in [1, n^2). False if c is not a unit (c = 0 mod p or q).
bool Decrypt(const PrivateKey& key, mpz_srcptr c, mpz_ptr m, std::string* error);
// out = a b mod n^2.
void Add(const PublicKey& key, mpz_srcptr a, mpz_srcptr b, mpz_ptr out);
// out = c^k mod n^2 for any integer k (k < 0 through c^-1). False if k < 0
// and c is not invertible.
bool MulPlain(const PublicKey& key, mpz_srcptr c, mpz_srcptr k, mpz_ptr out,
              std::string* error);

// DJN noise (Damgaard-Jurik-Nielsen, "A generalization of Paillier's
// public-key system...", IJIS 2010, the variant with a fixed base): hs = h^n
// mod n^2 for h = -x^2 mod n with x random, and noise = hs^a mod n^2 for a
// random exponent a of bits(n)/2 bits. The noise is an n-th residue, so the
// ciphertexts are ordinary Paillier ciphertexts (phe and Decrypt read them),
// but it is NOT uniform among the n-th residues: security rests on DCR plus
// DJN's assumption that hs^a with a short a is indistinguishable from a
// uniform element of <hs>. Opt-in only (method "djn"). Each process draws its
// own x per key. hs^a uses a fixed-base comb: a table of hs^(d 2^(w i)) for
// every window i and digit d, read with mpn_sec_tabselect (constant-time in
// the secret digit) and bits/(2w) products mod n^2, against ~bits squarings
// for r^n.
struct DjnTable {
  std::shared_ptr<const PublicKey> pub;
  int exp_bits = 0;               // bits of the exponent a (multiple of kWindow)
  size_t limbs = 0;               // limbs per table entry (those of n^2)
  std::vector<mp_limb_t> table;   // [exp_bits / kWindow][2^kWindow][limbs]
  static constexpr int kWindow = 5;
};
// Cached per n (bounded, thread-safe); built on first use (tens of ms).
std::shared_ptr<const DjnTable> GetDjnTable(const std::string& n, std::string* error);
bool NoiseDjn(const DjnTable& djn, mpz_ptr out, std::string* error);

// Uniform x in [lo, bound) from the OS CSPRNG (rejection sampling; exact).
bool RandomBelow(mpz_srcptr bound, unsigned long lo, mpz_ptr x, std::string* error);

}  // namespace paillier
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_PAILLIER_PAILLIER_H_
