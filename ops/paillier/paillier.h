// Paillier encryption (Paillier, EUROCRYPT 1999) with g = n + 1, on GMP. No
// TensorFlow here: the kernels (paillier_*_kernels.cc) call these functions on
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
// residues of Z*_{n^2}. Four ways to make it (all exact, see NoiseCrt and
// CrtNoise):
//   generic (public key only)   r^n mod n^2: a 2048-bit exponent mod a 4096-bit
//                               modulus for a 2048-bit key;
//   CRT (the private-key holder) s_p^p mod p^2 and s_q^q mod q^2 combined by
//                               CRT: two half-size exponents on half-size moduli;
//   CRT, fixed base (key holder, keys whose p - 1 and q - 1 factor: those of
//                               GenerateKey) w_p^k mod p^2 for a generator w_p
//                               of the order-(p-1) subgroup and k uniform in
//                               [0, p-1), from a per-key table: multiplications
//                               only, no squarings (several times cheaper);
//   precomputed                 any of the above made ahead (a pool) and used
//                               once by EncryptWithNoise.
//
// Big integers cross the API as big-endian unsigned bytes: n in its minimal
// form (first byte non-zero), ciphertexts in exactly CiphertextBytes() bytes,
// plaintexts in at most ModulusBytes() bytes, results in exactly that width.
//
// Side channels. Exponentiations modulo p^2, q^2 and n^2 by p-1, q-1 (Decrypt),
// p, q (NoiseCrt without tables) and n (NoiseGeneric) run through OpenSSL's
// constant-time Montgomery exponentiation (paillier_modexp.h: faster here than
// GMP's; inside TensorFlow the same BN API binds to TF's bundled BoringSSL,
// constant-time too); the plaintext factor k in MulPlain uses mpz_powm_sec (GMP's
// constant-time exponentiation: run time and memory accesses independent of
// the exponent's bits and of the base; its sign and whether it is 0 still
// show). The fixed-base noise reads its table with mpn_sec_tabselect and
// multiplies with mpn_sec_mul and a Montgomery reduction made of mpn_addmul_1
// and a conditional swap, one product per window whatever the digit: its time
// and memory accesses do not depend on the secret exponent. The generic noise
// r^n has a public exponent n (constant-time anyway). One-time key setup
// (primality tests, trial division of p - 1, the generator search) is not
// constant-time.
// GMP's own temporaries are not wiped after use (as in phe/gmpy2); the key
// material held here (keys, fixed-base tables) is wiped when its object is
// destroyed.
#ifndef TF_PRIVPY_OPS_PAILLIER_PAILLIER_H_
#define TF_PRIVPY_OPS_PAILLIER_PAILLIER_H_

#include <gmp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/paillier/paillier_modexp.h"

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
  std::shared_ptr<const MontModulus> mont_n2;  // n^2 for OpenSSL's exponentiation
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
  std::shared_ptr<const MontModulus> mont_p2, mont_q2;  // p^2, q^2 (wiped when freed)
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
// When the fixed-base noise applies (CombWindow(bits / 2) > 0: keys of up to
// 4096 bits), each prime has the form p = 2 k p' + 1 with p' a random prime of
// bits/2 - 40 bits and k < 2^40 a random 2^20-smooth integer, so that
// FactorPMinus1 recovers the factorization of p - 1 from p alone (see
// StructuredPrime in paillier.cc for why this costs no security). Larger keys
// get primes with no imposed structure.
bool GenerateKey(int bits, const ParallelFor& parallel_for, std::string* n, std::string* p,
                 std::string* q, std::string* error);
// One prime of GenerateKey's structured form: exactly `bits` bits, two top
// bits set, p = 2 k p' + 1 (p' a random prime of bits - 40 bits, k < 2^40
// 2^20-smooth). bits >= 64.
bool StructuredPrime(int bits, mpz_ptr p, std::string* error);

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
// out = a uniform element of the n-th residues of Z*_{n^2}, by CRT from
// s_p^p mod p^2 and s_q^q mod q^2 (any key; see CrtNoise for the faster way).
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

// ---- the key holder's fixed-base noise (exact) -----------------------------
// Mod p^2 the n-th residues are T_p, the subgroup of order p - 1 of Z*_{p^2}
// (cyclic). If w generates T_p, then w^k mod p^2 for k uniform in [0, p-1) is
// exactly uniform on T_p: the same distribution as s^p mod p^2 for s uniform
// in [1, p) (NoiseCrt; proof in paillier.cc). w = g^p mod p^2 for a generator
// g of Z*_p (x -> x^p mod p^2 is an isomorphism Z*_p -> T_p), and g is a
// generator iff g^((p-1)/f) != 1 mod p for every prime f | p - 1: this needs
// the factorization of p - 1, which keys made by GenerateKey give up cheaply
// (FactorPMinus1). Other keys (python-paillier's, older ones) keep s^p.
//
// w^k uses a comb: one table per window position i of w^(d 2^(W i)) for
// every digit d < 2^W (Montgomery form), so w^k is ceil(bits(p-1) / W)
// table reads and products mod p^2, no squarings.

// Primes found by trial division are those below this bound.
constexpr unsigned long kSmoothBound = 1ul << 20;
// Largest table per prime; larger primes (keys over 4096 bits) keep s^p.
constexpr size_t kMaxCombBytes = size_t{4} << 20;

// The distinct prime factors of p - 1 (p an odd prime): every prime below
// kSmoothBound that divides it, and the cofactor left by those if it is a
// probable prime. Fails (false) when that cofactor is composite, as for almost
// every random prime. About 1-2 ms for a 1024-bit p.
struct PMinus1Factors {
  std::vector<unsigned long> small;  // distinct primes < kSmoothBound, ascending
  Mpz large{true};                   // the prime cofactor (> every small one), or 1
};
bool FactorPMinus1(mpz_srcptr p, PMinus1Factors* out);

// Whether g (0 < g < p) generates Z*_p, given every prime factor of p - 1.
bool IsGenerator(mpz_srcptr g, mpz_srcptr p, const PMinus1Factors& f);

// The window used for a prime of `prime_bits` bits: the largest W <= 5 whose
// table fits kMaxCombBytes, or 0 if not even W = 4 fits (then no table).
int CombWindow(int prime_bits);

// The fixed-base table of T_p for one prime. Holds secret-derived values:
// wiped on destruction.
struct NoiseComb {
  Mpz p{true}, p2{true}, pm1{true};  // p, p^2, p - 1
  Mpz g{true};                       // a generator of Z*_p
  Mpz w{true};                       // g^p mod p^2, a generator of T_p
  int window = 0;                    // W
  int rows = 0;                      // ceil(bits(p - 1) / W): exponents < 2^(rows W)
  size_t limbs = 0;                  // limbs of p^2 (and of every entry)
  mp_limb_t minv = 0;                // -(p^2)^-1 mod 2^64 (Montgomery)
  std::vector<mp_limb_t> mod;        // p^2 in limbs
  std::vector<mp_limb_t> table;      // [rows][2^W][limbs]: w^(d 2^(W i)) 2^(64 limbs) mod p^2
  NoiseComb() = default;
  NoiseComb(const NoiseComb&) = delete;
  NoiseComb& operator=(const NoiseComb&) = delete;
  ~NoiseComb();
};
// Builds the table of prime p, given the factorization of p - 1: draws g
// uniformly among the generators of Z*_p (OS CSPRNG). window 0: CombWindow.
// False (with *error) if the CSPRNG fails or the table would not fit.
bool MakeNoiseComb(mpz_srcptr p, const PMinus1Factors& f, int window, NoiseComb* out,
                   std::string* error);
// out = w^k mod p^2 for 0 <= k < 2^(rows W) (false for other k). Constant
// time in k: rows reads of whole table rows and rows - 1 products, whatever
// the digits.
bool NoiseCombPow(const NoiseComb& t, mpz_srcptr k, mpz_ptr out);
// out = w^k mod p^2 for k uniform in [0, p - 1): uniform on T_p.
bool NoiseCombSample(const NoiseComb& t, mpz_ptr out, std::string* error);

// The key holder's noise for one key: a table for each prime whose p - 1
// factors (both, for keys of GenerateKey), s^p for the others.
struct CrtNoise {
  std::shared_ptr<const PrivateKey> key;
  std::unique_ptr<const NoiseComb> comb_p, comb_q;  // null: that half uses s^p
  int tables() const { return (comb_p ? 1 : 0) + (comb_q ? 1 : 0); }
};
// Cached per key (bounded, thread-safe); built on first use: a few ms to find
// out that p - 1 does not factor, tens of ms to build the tables when it does.
std::shared_ptr<const CrtNoise> GetCrtNoise(const std::string& n, const std::string& p,
                                            const std::string& q, std::string* error);
// Builds one (uncached): the tables where p - 1 / q - 1 factor.
bool MakeCrtNoise(std::shared_ptr<const PrivateKey> key, CrtNoise* out, std::string* error);
// The same distribution as NoiseCrt(*noise.key, ...), from the tables.
bool NoiseCrt(const CrtNoise& noise, mpz_ptr out, std::string* error);

}  // namespace paillier
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_PAILLIER_PAILLIER_H_
