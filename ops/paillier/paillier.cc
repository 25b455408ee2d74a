// Paillier math on GMP (see paillier.h for the scheme and its conventions).
#include "ops/paillier/paillier.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/paillier/paillier_internal.h"
#include "ops/prg/aes_ctr.h"  // OsRandomBytes: the OS CSPRNG, no fallback

namespace tf_privpy {
namespace paillier {

namespace {

using internal::kCheckReps;
using internal::kPrimeReps;
using internal::KeyCache;
using internal::LengthPrefixed;

constexpr size_t kPublicCacheSize = 32;
constexpr size_t kPrivateCacheSize = 8;
constexpr size_t kDjnCacheSize = 4;  // a 2048-bit key's table is 3.4 MB

void WipeBytes(std::vector<unsigned char>* b) {
  volatile unsigned char* p = b->data();
  for (size_t i = 0; i < b->size(); ++i) p[i] = 0;
}

// Reads minimal big-endian bytes (first byte non-zero) into x > 0.
bool ReadMinimal(const std::string& s, const char* what, mpz_ptr x, std::string* error) {
  if (s.empty() || static_cast<unsigned char>(s[0]) == 0) {
    *error = std::string(what) +
             " must be a positive integer in minimal big-endian bytes (non-empty, "
             "first byte non-zero)";
    return false;
  }
  mpz_import(x, s.size(), 1, 1, 1, 0, s.data());
  return true;
}

// A uniform odd candidate of exactly `bits` bits with its two top bits set.
bool PrimeCandidate(int bits, mpz_ptr x, std::string* error) {
  const size_t nbytes = (bits + 7) / 8;
  std::vector<unsigned char> buf(nbytes);
  if (!OsRandomBytes(buf.data(), nbytes, error)) return false;
  mpz_import(x, nbytes, 1, 1, 1, 0, buf.data());
  WipeBytes(&buf);
  mpz_fdiv_r_2exp(x, x, bits);
  mpz_setbit(x, bits - 1);
  mpz_setbit(x, bits - 2);
  mpz_setbit(x, 0);
  return true;
}

}  // namespace

bool internal::RandomPrime(int bits, mpz_ptr p, std::string* error) {
  for (;;) {
    if (!PrimeCandidate(bits, p, error)) return false;
    if (mpz_probab_prime_p(p, kPrimeReps) > 0) return true;
  }
}

Mpz::~Mpz() {
  if (secret_ && v_->_mp_d != nullptr) {
    volatile mp_limb_t* d = v_->_mp_d;
    for (int i = 0; i < v_->_mp_alloc; ++i) d[i] = 0;
  }
  mpz_clear(v_);
}

// ---- keys ------------------------------------------------------------------

bool MakePublicKey(const std::string& n, PublicKey* out, std::string* error) {
  if (!ReadMinimal(n, "n (the public modulus)", out->n, error)) return false;
  const size_t bits = mpz_sizeinbase(out->n, 2);
  if (bits < static_cast<size_t>(kMinModulusBits) ||
      bits > static_cast<size_t>(kMaxModulusBits)) {
    *error = "n has " + std::to_string(bits) + " bits; Paillier keys must have " +
             std::to_string(kMinModulusBits) + " to " + std::to_string(kMaxModulusBits) +
             " bits";
    return false;
  }
  if (mpz_even_p(out->n)) {
    *error = "n is even: not a Paillier modulus (n = p q with odd primes p, q)";
    return false;
  }
  out->bits = static_cast<int>(bits);
  out->n_bytes = (bits + 7) / 8;
  out->c_bytes = 2 * out->n_bytes;
  mpz_mul(out->n2, out->n, out->n);
  mpz_sub_ui(out->half, out->n, 1);
  mpz_fdiv_q_2exp(out->half, out->half, 1);
  out->mont_n2 = MontModulus::Make(out->n2, error);
  return out->mont_n2 != nullptr;
}

bool MakePrivateKey(const std::string& n, const std::string& p, const std::string& q,
                    PrivateKey* out, std::string* error) {
  if (!MakePublicKey(n, &out->pub, error)) return false;
  if (!ReadMinimal(p, "p (a private prime factor)", out->p, error) ||
      !ReadMinimal(q, "q (a private prime factor)", out->q, error))
    return false;
  Mpz t, u;
  mpz_mul(t, out->p, out->q);
  if (mpz_cmp(t, out->pub.n) != 0) {
    *error = "p q != n: the private key does not belong to this public key";
    return false;
  }
  if (mpz_cmp(out->p, out->q) == 0) {
    *error = "p = q: not a valid Paillier key";
    return false;
  }
  if (mpz_probab_prime_p(out->p, kCheckReps) == 0 ||
      mpz_probab_prime_p(out->q, kCheckReps) == 0) {
    *error = "p or q is not prime: not a valid Paillier key";
    return false;
  }
  mpz_sub_ui(out->pm1, out->p, 1);
  mpz_sub_ui(out->qm1, out->q, 1);
  mpz_mul(t, out->pm1, out->qm1);
  mpz_gcd(u, t, out->pub.n);
  if (mpz_cmp_ui(u, 1) != 0) {
    *error = "gcd(n, (p-1)(q-1)) != 1: not a valid Paillier key";
    return false;
  }
  mpz_mul(out->p2, out->p, out->p);
  mpz_mul(out->q2, out->q, out->q);
  out->mont_p2 = MontModulus::Make(out->p2, error);
  out->mont_q2 = MontModulus::Make(out->q2, error);
  if (!out->mont_p2 || !out->mont_q2) return false;
  // h_p = L_p(g^(p-1) mod p^2)^-1 mod p with g = n + 1 (phe computes the same).
  Mpz g;
  mpz_add_ui(g, out->pub.n, 1);
  struct Half {
    mpz_srcptr prime, square, minus1;
    mpz_ptr h;
  } halves[2] = {{out->p, out->p2, out->pm1, out->hp}, {out->q, out->q2, out->qm1, out->hq}};
  for (const Half& h : halves) {
    mpz_powm_sec(t, g, h.minus1, h.square);
    mpz_sub_ui(t, t, 1);
    mpz_divexact(t, t, h.prime);
    if (mpz_invert(h.h, t, h.prime) == 0) {
      *error = "h_p or h_q is not invertible: not a valid Paillier key";
      return false;
    }
  }
  if (mpz_invert(out->p_inv_q, out->p, out->q) == 0 ||
      mpz_invert(out->p2_inv_q2, out->p2, out->q2) == 0) {
    *error = "p is not invertible mod q: not a valid Paillier key";
    return false;
  }
  return true;
}

std::shared_ptr<const PublicKey> GetPublicKey(const std::string& n, std::string* error) {
  static KeyCache<PublicKey>* cache = new KeyCache<PublicKey>(kPublicCacheSize);
  return cache->Get(
      n, [&](PublicKey* k, std::string* e) { return MakePublicKey(n, k, e); }, error);
}

std::shared_ptr<const PrivateKey> GetPrivateKey(const std::string& n, const std::string& p,
                                                const std::string& q, std::string* error) {
  static KeyCache<PrivateKey>* cache = new KeyCache<PrivateKey>(kPrivateCacheSize);
  return cache->Get(
      LengthPrefixed(n) + LengthPrefixed(p) + LengthPrefixed(q),
      [&](PrivateKey* k, std::string* e) { return MakePrivateKey(n, p, q, k, e); }, error);
}

bool GenerateKey(int bits, const ParallelFor& parallel_for, std::string* n, std::string* p,
                 std::string* q, std::string* error) {
  if (bits % 2 != 0 || bits < kMinModulusBits || bits > kMaxModulusBits) {
    *error = "key size must be an even number of bits in [" +
             std::to_string(kMinModulusBits) + ", " + std::to_string(kMaxModulusBits) +
             "], got " + std::to_string(bits);
    return false;
  }
  const int half = bits / 2;
  Mpz primes[2] = {Mpz(true), Mpz(true)};
  std::string errors[2];
  bool ok[2] = {false, false};
  Mpz nn, t, u;
  for (;;) {
    // Both primes at once: two units of a few hundred million cycles each.
    // Structured primes (p - 1 factors) when the fixed-base noise applies.
    const bool structured = CombWindow(half) > 0;
    parallel_for(2, int64_t{1} << 30, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        ok[i] = structured ? StructuredPrime(half, primes[i], &errors[i])
                           : internal::RandomPrime(half, primes[i], &errors[i]);
      }
    });
    for (int i = 0; i < 2; ++i) {
      if (!ok[i]) {
        *error = errors[i];
        return false;
      }
    }
    mpz_mul(nn, primes[0], primes[1]);
    if (mpz_sizeinbase(nn, 2) != static_cast<size_t>(bits)) continue;  // cannot happen
    mpz_sub(t, primes[0], primes[1]);
    mpz_abs(t, t);
    if (mpz_sizeinbase(t, 2) <= static_cast<size_t>(std::max(1, half - 100))) continue;
    mpz_sub_ui(t, primes[0], 1);
    mpz_sub_ui(u, primes[1], 1);
    mpz_mul(t, t, u);
    mpz_gcd(u, t, nn);
    if (mpz_cmp_ui(u, 1) != 0) continue;
    break;
  }
  *n = MinimalBytes(nn);
  *p = MinimalBytes(primes[0]);
  *q = MinimalBytes(primes[1]);
  return true;
}

// ---- big integers <-> bytes ------------------------------------------------

void WriteFixed(mpz_srcptr x, size_t width, char* out) {
  memset(out, 0, width);
  if (mpz_sgn(x) == 0) return;
  const size_t len = (mpz_sizeinbase(x, 2) + 7) / 8;
  size_t written = 0;
  mpz_export(out + (width - len), &written, 1, 1, 1, 0, x);
}

std::string MinimalBytes(mpz_srcptr x) {
  std::string s((mpz_sizeinbase(x, 2) + 7) / 8, '\0');
  WriteFixed(x, s.size(), &s[0]);
  return s;
}

bool ReadCiphertext(const PublicKey& key, const char* data, size_t len, mpz_ptr c,
                    std::string* error) {
  if (len != key.c_bytes) {
    *error = "has " + std::to_string(len) + " bytes, but ciphertexts of this " +
             std::to_string(key.bits) + "-bit key have exactly " +
             std::to_string(key.c_bytes) + " (was it made with another key?)";
    return false;
  }
  mpz_import(c, len, 1, 1, 1, 0, data);
  if (mpz_sgn(c) == 0 || mpz_cmp(c, key.n2) >= 0) {
    *error = mpz_sgn(c) == 0
                 ? std::string("is 0, which is not a ciphertext (not in Z*_{n^2})")
                 : std::string("is >= n^2, so not a ciphertext of this key (not in Z*_{n^2})");
    return false;
  }
  return true;
}

bool ReadPlaintextBytes(const PublicKey& key, const char* data, size_t len, mpz_ptr m,
                        std::string* error) {
  if (len == 0 || len > key.n_bytes) {
    *error = "has " + std::to_string(len) + " bytes; a big-integer plaintext of this key "
             "is 1 to " + std::to_string(key.n_bytes) + " big-endian bytes";
    return false;
  }
  mpz_import(m, len, 1, 1, 1, 0, data);
  if (mpz_cmp(m, key.n) >= 0) {
    *error = "is >= n: plaintexts of this key are integers in [0, n)";
    return false;
  }
  return true;
}

void PlaintextFromInt64(const PublicKey& key, int64_t x, mpz_ptr m) {
  mpz_set_si(m, x);  // |x| < 2^63 < n/2
  if (x < 0) mpz_add(m, m, key.n);
}

bool PlaintextToInt64(const PublicKey& key, mpz_srcptr m, int64_t* x) {
  Mpz v;
  if (mpz_cmp(m, key.half) <= 0) {
    mpz_set(v, m);
  } else {
    mpz_sub(v, m, key.n);
  }
  if (!mpz_fits_slong_p(v)) return false;
  static_assert(sizeof(long) == 8, "long must be 64 bits");  // NOLINT
  *x = mpz_get_si(v);
  return true;
}

UnitChecker::UnitChecker(const PublicKey& key) : key_(key) { mpz_set_ui(acc_, 1); }

void UnitChecker::Add(mpz_srcptr c) {
  mpz_mod(tmp_, c, key_.n);
  mpz_mul(acc_, acc_, tmp_);
  mpz_mod(acc_, acc_, key_.n);
}

bool UnitChecker::AllUnits() {
  mpz_gcd(tmp_, acc_, key_.n);
  return mpz_cmp_ui(tmp_, 1) == 0;
}

bool IsUnit(const PublicKey& key, mpz_srcptr c) {
  Mpz g;
  mpz_gcd(g, c, key.n);
  return mpz_cmp_ui(g, 1) == 0;
}

// ---- operations ------------------------------------------------------------

namespace {

bool MakeDjnTable(const std::string& n, DjnTable* out, std::string* error) {
  out->pub = GetPublicKey(n, error);
  if (!out->pub) return false;
  const PublicKey& pk = *out->pub;
  constexpr int w = DjnTable::kWindow;
  const int rows = (pk.bits / 2 + w - 1) / w;
  out->exp_bits = rows * w;
  out->limbs = mpz_size(pk.n2);
  const size_t entries = size_t{1} << w;
  out->table.assign(static_cast<size_t>(rows) * entries * out->limbs, 0);
  // hs = (-x^2)^n mod n^2, x uniform in Z*_n.
  Mpz x(true), hs(true), base(true), e(true);
  do {
    if (!RandomBelow(pk.n, 1, x, error)) return false;
  } while (!IsUnit(pk, x));
  mpz_mul(x, x, x);
  mpz_mod(x, x, pk.n);
  mpz_sub(x, pk.n, x);
  mpz_powm(hs, x, pk.n, pk.n2);
  mpz_set(base, hs);  // hs^(2^(w i)) for row i
  for (int i = 0; i < rows; ++i) {
    mpz_set_ui(e, 1);
    for (size_t d = 0; d < entries; ++d) {  // entry d = base^d
      mp_limb_t* dst = &out->table[(i * entries + d) * out->limbs];
      mpz_export(dst, nullptr, -1, sizeof(mp_limb_t), 0, 0, e);
      mpz_mul(e, e, base);
      mpz_mod(e, e, pk.n2);
    }
    mpz_set(base, e);  // base^(2^w)
  }
  return true;
}

}  // namespace

std::shared_ptr<const DjnTable> GetDjnTable(const std::string& n, std::string* error) {
  static KeyCache<DjnTable>* cache = new KeyCache<DjnTable>(kDjnCacheSize);
  return cache->Get(
      n, [&](DjnTable* t, std::string* e) { return MakeDjnTable(n, t, e); }, error);
}

bool NoiseDjn(const DjnTable& djn, mpz_ptr out, std::string* error) {
  constexpr int w = DjnTable::kWindow;
  const size_t entries = size_t{1} << w;
  const int rows = djn.exp_bits / w;
  std::vector<unsigned char> a((djn.exp_bits + 7) / 8);
  if (!OsRandomBytes(a.data(), a.size(), error)) return false;
  std::vector<mp_limb_t> entry(djn.limbs);
  Mpz acc(true);
  mpz_set_ui(acc, 1);
  for (int i = 0; i < rows; ++i) {
    unsigned digit = 0;  // bits [w i, w i + w) of a (little-endian bit order)
    for (int b = 0; b < w; ++b) {
      const int bit = w * i + b;
      digit |= ((a[bit / 8] >> (bit % 8)) & 1u) << b;
    }
    // Constant-time in `digit`: reads every entry of the row.
    mpn_sec_tabselect(entry.data(), &djn.table[i * entries * djn.limbs], djn.limbs, entries,
                      digit);
    mpz_t view;
    mpz_mul(acc, acc, mpz_roinit_n(view, entry.data(), djn.limbs));
    mpz_mod(acc, acc, djn.pub->n2);
  }
  volatile mp_limb_t* e = entry.data();
  for (size_t i = 0; i < entry.size(); ++i) e[i] = 0;
  WipeBytes(&a);
  mpz_set(out, acc);
  return true;
}

bool RandomBelow(mpz_srcptr bound, unsigned long lo, mpz_ptr x, std::string* error) {
  const size_t bits = mpz_sizeinbase(bound, 2);
  const size_t nbytes = (bits + 7) / 8;
  std::vector<unsigned char> buf(nbytes);
  for (;;) {  // each try succeeds with probability > 1/2 - lo / bound
    if (!OsRandomBytes(buf.data(), nbytes, error)) return false;
    mpz_import(x, nbytes, 1, 1, 1, 0, buf.data());
    mpz_fdiv_r_2exp(x, x, bits);
    if (mpz_cmp_ui(x, lo) >= 0 && mpz_cmp(x, bound) < 0) break;
  }
  WipeBytes(&buf);
  return true;
}

bool NoiseGeneric(const PublicKey& key, mpz_ptr out, std::string* error) {
  Mpz r(true);
  do {  // gcd(r, n) != 1 would factor n: probability about 2^-(bits/2 - 1)
    if (!RandomBelow(key.n, 1, r, error)) return false;
  } while (!IsUnit(key, r));
  // Public exponent n; the secret r is safe in a constant-time exponentiation.
  return key.mont_n2->Pow(out, r, key.n, error);
}

// Why this is exactly the distribution of r^n mod n^2 for r uniform in Z*_n:
// Z*_{p^2} is cyclic of order p(p-1), the product of its subgroup G_p of order
// p - 1 and its subgroup of order p. By CRT, Z*_{n^2} = Z*_{p^2} x Z*_{q^2}.
//  * r^n mod n^2 depends only on r mod n ((r + kn)^n = r^n mod n^2), so r
//    uniform in Z*_n gives the same distribution as r uniform in Z*_{n^2},
//    whose CRT components r_p, r_q are uniform and independent.
//  * r_p^n = (r_p^p)^q mod p^2. x -> x^p kills the order-p part and maps
//    Z*_{p^2} onto G_p, p to 1, so r_p^p is uniform in G_p; x -> x^q is a
//    bijection of G_p because gcd(q, p - 1) = 1 (implied by gcd(n, (p-1)(q-1))
//    = 1, checked for every key). So r^n mod p^2 is uniform in G_p, and
//    likewise mod q^2 in G_q, independently.
//  * s^p mod p^2 for s uniform in [1, p) is uniform in G_p too: (s + kp)^p =
//    s^p mod p^2, so s mod p determines s^p, and s -> s^p mod p^2 is the
//    bijection Z*_p -> G_p (the Teichmueller lift) of the previous point.
// Hence CRT(s_p^p mod p^2, s_q^q mod q^2) is uniform in G_p x G_q, the n-th
// residues, exactly as r^n mod n^2 is. Cost: two exponents of bits/2 bits mod
// bit-sized moduli, against one bits-bit exponent mod a 2·bits-bit modulus.
namespace {

// One half of the CRT noise: a uniform element of T_p (the order-(p-1)
// subgroup of Z*_{p^2}), from the table if there is one, else s^p.
bool HalfNoise(mpz_srcptr prime, const MontModulus& square, const NoiseComb* comb,
               mpz_ptr out, std::string* error) {
  if (comb != nullptr) return NoiseCombSample(*comb, out, error);
  Mpz s(true);
  if (!RandomBelow(prime, 1, s, error)) return false;
  return square.Pow(out, s, prime, error);  // secret exponent p: constant time
}

}  // namespace

bool internal::CrtNoiseFrom(const PrivateKey& key, const NoiseComb* comb_p,
                            const NoiseComb* comb_q, mpz_ptr out, std::string* error) {
  Mpz a(true), b(true);
  if (!HalfNoise(key.p, *key.mont_p2, comb_p, a, error) ||
      !HalfNoise(key.q, *key.mont_q2, comb_q, b, error))
    return false;
  // out = a + p^2 ((b - a) (p^2)^-1 mod q^2), the CRT combination mod n^2.
  mpz_sub(b, b, a);
  mpz_mul(b, b, key.p2_inv_q2);
  mpz_mod(b, b, key.q2);
  mpz_mul(b, b, key.p2);
  mpz_add(out, a, b);
  return true;
}

bool NoiseCrt(const PrivateKey& key, mpz_ptr out, std::string* error) {
  return internal::CrtNoiseFrom(key, nullptr, nullptr, out, error);
}

void EncryptWithNoise(const PublicKey& key, mpz_srcptr m, mpz_srcptr noise, mpz_ptr out) {
  Mpz t(true);
  // g^m = (1 + n)^m = 1 + m n mod n^2, and 1 + m n < n^2 for m < n.
  mpz_mul(t, m, key.n);
  mpz_add_ui(t, t, 1);
  mpz_mul(out, t, noise);
  mpz_mod(out, out, key.n2);
}

bool Decrypt(const PrivateKey& key, mpz_srcptr c, mpz_ptr m, std::string* error) {
  Mpz x(true), mp(true), mq(true);
  struct Half {
    mpz_srcptr prime, square, minus1, h;
    const MontModulus* mont;
    mpz_ptr out;
  } halves[2] = {{key.p, key.p2, key.pm1, key.hp, key.mont_p2.get(), mp},
                 {key.q, key.q2, key.qm1, key.hq, key.mont_q2.get(), mq}};
  for (const Half& h : halves) {
    mpz_mod(x, c, h.square);
    if (mpz_divisible_p(x, h.prime)) {
      *error = "is not in Z*_{n^2} (it is a multiple of a prime factor of n): not a "
               "ciphertext of this key";
      return false;
    }
    if (!h.mont->Pow(x, x, h.minus1, error)) return false;  // secret exponent: constant time
    mpz_sub_ui(x, x, 1);
    mpz_divexact(x, x, h.prime);
    mpz_mul(x, x, h.h);
    mpz_mod(h.out, x, h.prime);
  }
  // m = m_p + p ((m_q - m_p) p^-1 mod q)
  mpz_sub(x, mq, mp);
  mpz_mul(x, x, key.p_inv_q);
  mpz_mod(x, x, key.q);
  mpz_mul(x, x, key.p);
  mpz_add(m, mp, x);
  return true;
}

void Add(const PublicKey& key, mpz_srcptr a, mpz_srcptr b, mpz_ptr out) {
  mpz_mul(out, a, b);
  mpz_mod(out, out, key.n2);
}

bool MulPlain(const PublicKey& key, mpz_srcptr c, mpz_srcptr k, mpz_ptr out,
              std::string* error) {
  const int sign = mpz_sgn(k);
  if (sign == 0) {  // c^0 = 1, the encryption of 0 with noise 1
    mpz_set_ui(out, 1);
    return true;
  }
  if (sign > 0) {
    mpz_powm_sec(out, c, k, key.n2);  // k may be a party's secret
    return true;
  }
  Mpz inv, e(true);
  if (mpz_invert(inv, c, key.n2) == 0) {
    *error = "is not invertible mod n^2 (not in Z*_{n^2}): not a ciphertext of this key";
    return false;
  }
  mpz_neg(e, k);
  mpz_powm_sec(out, inv, e, key.n2);
  return true;
}

}  // namespace paillier
}  // namespace tf_privpy
