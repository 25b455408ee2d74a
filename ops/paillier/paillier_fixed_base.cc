// The key holder's fixed-base noise (see paillier.h, "the key holder's
// fixed-base noise") and the primes it needs: keygen's structured primes, the
// factorization of p - 1, generators, the comb tables, their cache.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/paillier/paillier.h"
#include "ops/paillier/paillier_internal.h"

namespace tf_privpy {
namespace paillier {

using internal::kCheckReps;
using internal::kPrimeReps;

namespace {

constexpr size_t kCrtNoiseCacheSize = 4;  // 2048-bit key: 3.4 MB of tables (at most 8 MiB)
// p = 2 k p' + 1 with k < 2^kCofactorBits (GenerateKey): since kCofactorBits
// <= 2 log2(kSmoothBound), a k free of prime factors below kSmoothBound is 1
// or prime.
constexpr int kCofactorBits = 40;
static_assert((uint64_t{1} << kCofactorBits) <= uint64_t{kSmoothBound} * kSmoothBound,
              "k must stay below kSmoothBound^2");

// The primes below kSmoothBound (82,025 of them), sieved once.
const std::vector<uint32_t>& SmallPrimes() {
  static const std::vector<uint32_t>* primes = [] {
    std::vector<bool> composite(kSmoothBound, false);
    auto* out = new std::vector<uint32_t>;
    for (unsigned long i = 2; i < kSmoothBound; ++i) {
      if (composite[i]) continue;
      out->push_back(static_cast<uint32_t>(i));
      for (unsigned long j = i * i; j < kSmoothBound; j += i) composite[j] = true;
    }
    return out;
  }();
  return *primes;
}

// Whether k < 2^40 has no prime factor >= kSmoothBound.
bool IsSmooth(uint64_t k) {
  for (uint32_t r : SmallPrimes()) {
    if (uint64_t{r} * r > k) break;  // what is left is 1 or a prime
    while (k % r == 0) k /= r;
  }
  // Left: 1, a prime, or (all small primes tried) a product of primes
  // >= kSmoothBound, hence a single prime since k < kSmoothBound^2.
  return k < kSmoothBound;
}

}  // namespace

// A prime p of exactly `bits` bits, two top bits set, of the form
// p = 2 k p' + 1: p' a random prime of bits - kCofactorBits bits (two top bits
// set), k uniform in the range that puts p in [3 2^(bits-2), 2^bits), kept
// only if 2^20-smooth (about a third of them, Dickman's rho(1.95)) and if p is
// prime. FactorPMinus1 then finds p - 1 = 2 k p' from p alone (trial division
// by the primes below 2^20 strips 2 k, and p' is prime), which is what the
// key holder's fixed-base noise needs; nothing else about the key changes.
//
// Why this structure costs nothing against factoring n:
//  * The only factoring method that exploits the factorization of p - 1 is
//    Pollard's p - 1, which needs p - 1 to be smooth. Here p - 1 has the prime
//    factor p' of bits - 40 bits: as far from smooth as a p - 1 can be. This
//    is the "strong prime" property (a large prime factor of p - 1) that ANSI
//    X9.31 once required of RSA primes precisely against p - 1; it does not
//    help any other method. Williams' p + 1 depends on p + 1 = 2 (k p' + 1),
//    on which nothing is imposed; ECM works in the groups of random elliptic
//    curves mod p, whose orders are unrelated to p - 1; the number field
//    sieve does not depend on the form of the factors at all.
//  * Safe primes (k = 1) are the extreme case of this form, and standard
//    where Paillier keys need a known p - 1 (threshold Paillier of
//    Damgaard-Jurik and of Fouque-Poupard-Stern uses n = p q with safe primes).
//  * What the form reveals about p: p = 1 mod 2k for some k < 2^40 the
//    attacker does not know. Even guessing k, that is at most 40 bits of p,
//    while Coppersmith's lattice method needs about half of p's bits (512 for
//    a 2048-bit key).
//  * p is otherwise random: p' uniform among the primes of its size, k
//    uniform in its range given smoothness and the primality of p, and the
//    search runs on the OS CSPRNG only.
bool StructuredPrime(int bits, mpz_ptr p, std::string* error) {
  if (bits < 64) {
    *error = "structured primes have at least 64 bits";
    return false;
  }
  Mpz pp(true), lo(true), span(true), k(true), t(true);
  for (;;) {
    if (!internal::RandomPrime(bits - kCofactorBits, pp, error)) return false;
    // k in [lo, lo + span): 2 k p' + 1 in [3 2^(bits-2), 2^bits - 1].
    mpz_set_ui(t, 3);
    mpz_mul_2exp(t, t, bits - 2);
    mpz_sub_ui(t, t, 1);
    mpz_mul_2exp(span, pp, 1);  // 2 p'
    mpz_cdiv_q(lo, t, span);
    mpz_set_ui(t, 0);
    mpz_setbit(t, bits);
    mpz_sub_ui(t, t, 2);
    mpz_fdiv_q(t, t, span);     // largest k
    mpz_sub(span, t, lo);
    mpz_add_ui(span, span, 1);
    // About bits * ln(2) / 2 candidates per prime p, three primes per smooth
    // k: a fresh p' after far more tries than that only guards against a
    // pathological p'.
    for (int tries = 0; tries < 64 * bits; ++tries) {
      if (!RandomBelow(span, 0, k, error)) return false;
      mpz_add(k, k, lo);
      mpz_mul(p, k, pp);
      mpz_mul_2exp(p, p, 1);
      mpz_add_ui(p, p, 1);
      // Cheap tests first (trial division, then BPSW), then the smoothness of
      // k, then the full test: the order of the tests does not change which
      // p is returned, only how fast.
      if (mpz_probab_prime_p(p, 1) == 0) continue;
      if (!IsSmooth(mpz_get_ui(k))) continue;
      if (mpz_probab_prime_p(p, kPrimeReps) == 0) continue;
      return true;
    }
  }
}

// ---- the key holder's fixed-base noise -------------------------------------
//
// Why w^k mod p^2, k uniform in [0, p-1), has exactly the distribution of
// s^p mod p^2, s uniform in [1, p) (so NoiseCrt(CrtNoise) and
// NoiseCrt(PrivateKey) have the same distribution, that of r^n mod n^2):
//  * omega(x) = x^p mod p^2 is a group isomorphism Z*_p -> T_p (shown above
//    NoiseCrt: it depends only on x mod p, it is multiplicative, and omega(x)
//    = x mod p by Fermat, so it is injective; T_p has p - 1 elements).
//  * g generates Z*_p (IsGenerator, with the complete factorization of p - 1
//    checked by MakeNoiseComb), so k -> g^k mod p is a bijection
//    [0, p-1) -> Z*_p, and k uniform gives g^k uniform on Z*_p.
//  * w^k = omega(g)^k = omega(g^k mod p): uniform on T_p, as omega(s) is.
// k comes from RandomBelow (exact rejection sampling on the OS CSPRNG), fresh
// for every value; g is fixed per process and key but never leaves it, and the
// output is uniform whichever generator it is. Both halves are independent and
// combined by the same CRT as before.

bool FactorPMinus1(mpz_srcptr p, PMinus1Factors* out) {
  out->small.clear();
  mpz_set_ui(out->large, 1);
  if (mpz_cmp_ui(p, 3) < 0 || mpz_even_p(p)) return false;
  Mpz m(true);
  mpz_sub_ui(m, p, 1);
  const std::vector<uint32_t>& primes = SmallPrimes();
  bool proven = false;  // m is known to be 1 or prime
  size_t i = 0;
  while (i < primes.size()) {
    const unsigned long r0 = primes[i];
    if (mpz_cmp_ui(m, r0 * r0) < 0) {  // no factor below r0 left: 1 or prime
      proven = true;
      break;
    }
    // Three primes below 2^20 per remainder: one pass over m for three.
    const size_t end = std::min(i + 3, primes.size());
    unsigned long prod = 1;
    for (size_t x = i; x < end; ++x) prod *= primes[x];
    const unsigned long rem = mpz_fdiv_ui(m, prod);
    for (size_t x = i; x < end; ++x) {
      if (rem % primes[x] != 0) continue;
      out->small.push_back(primes[x]);
      do {
        mpz_divexact_ui(m, m, primes[x]);
      } while (mpz_divisible_ui_p(m, primes[x]));
    }
    i = end;
  }
  if (mpz_cmp_ui(m, 1) == 0) return true;
  if (!proven && mpz_probab_prime_p(m, kCheckReps) == 0) return false;  // composite
  if (mpz_cmp_ui(m, kSmoothBound) < 0) {
    out->small.push_back(mpz_get_ui(m));  // larger than every prime found so far
  } else {
    mpz_set(out->large, m);
  }
  return true;
}

namespace {

// p - 1 is exactly a product of powers of the primes in f (and they are
// primes): a wrong factorization would pass non-generators as generators.
bool FactorsMatch(mpz_srcptr p, const PMinus1Factors& f) {
  const std::vector<uint32_t>& primes = SmallPrimes();
  Mpz m(true);
  mpz_sub_ui(m, p, 1);
  for (unsigned long r : f.small) {
    if (r >= kSmoothBound || !std::binary_search(primes.begin(), primes.end(), r) ||
        !mpz_divisible_ui_p(m, r))
      return false;
    do {
      mpz_divexact_ui(m, m, r);
    } while (mpz_divisible_ui_p(m, r));
  }
  if (mpz_cmp_ui(f.large, 1) > 0) {
    if (!mpz_divisible_p(m, f.large) || mpz_probab_prime_p(f.large, kCheckReps) == 0)
      return false;
    do {
      mpz_divexact(m, m, f.large);
    } while (mpz_divisible_p(m, f.large));
  }
  return mpz_cmp_ui(m, 1) == 0;
}

void WipeLimbs(std::vector<mp_limb_t>* v) {
  volatile mp_limb_t* d = v->data();
  for (size_t i = 0; i < v->size(); ++i) d[i] = 0;
}

// x (0 <= x < 2^(64 limbs)) as exactly `limbs` little-endian limbs.
void ToLimbs(mpz_srcptr x, size_t limbs, mp_limb_t* dst) {
  std::fill(dst, dst + limbs, 0);
  mpz_export(dst, nullptr, -1, sizeof(mp_limb_t), 0, 0, x);
}

// Montgomery arithmetic mod m (L limbs, odd, R = 2^(64 L)), from GMP's
// documented, side-channel-silent mpn functions only (mpn_sec_mul is the
// schoolbook product, with no data-dependent branch; mpn_addmul_1, add, sub
// and cnd_swap neither): time and memory accesses depend on L only.
struct Mont {
  const mp_limb_t* m;
  size_t L;
  mp_limb_t minv;  // -m^-1 mod 2^64
  size_t ScratchLimbs() const { return 3 * L + mpn_sec_mul_itch(L, L); }
  // r = t R^-1 mod m, fully reduced, for t < m R in 2L limbs (t is consumed;
  // r must not overlap t). tmp: L limbs.
  void Redc(mp_limb_t* r, mp_limb_t* t, mp_limb_t* tmp) const {
    // Step i clears limb i and leaves its carry (due at limb i + L) in it;
    // the carries are added once at the end (as GMP's redc_1 does).
    for (size_t i = 0; i < L; ++i) t[i] = mpn_addmul_1(t + i, m, L, t[i] * minv);
    const mp_limb_t cy = mpn_add_n(r, t + L, t, L);  // (t + u m) / R < 2m
    const mp_limb_t borrow = mpn_sub_n(tmp, r, m, L);
    mpn_cnd_swap(cy | (borrow ^ 1), r, tmp, L);  // subtract m iff the value >= m
  }
  // r = a b R^-1 mod m for a, b < m (r may alias a or b).
  void Mul(mp_limb_t* r, const mp_limb_t* a, const mp_limb_t* b, mp_limb_t* scratch) const {
    mp_limb_t* prod = scratch;
    mpn_sec_mul(prod, a, L, b, L, scratch + 3 * L);
    Redc(r, prod, scratch + 2 * L);
  }
};

Mont MontOf(const NoiseComb& t) { return Mont{t.mod.data(), t.limbs, t.minv}; }

// Bits [bit, bit + w) of the little-endian limbs e (e has a limb to spare).
// The positions are public: no branch depends on the digit.
unsigned Digit(const mp_limb_t* e, int bit, int w) {
  const int li = bit / 64, sh = bit % 64;
  mp_limb_t v = e[li] >> sh;
  if (sh + w > 64) v |= e[li + 1] << (64 - sh);
  return static_cast<unsigned>(v & ((mp_limb_t{1} << w) - 1));
}

}  // namespace

bool IsGenerator(mpz_srcptr g, mpz_srcptr p, const PMinus1Factors& f) {
  if (mpz_sgn(g) <= 0 || mpz_cmp(g, p) >= 0) return false;
  Mpz pm1(true), e(true), t(true), r(true);
  mpz_sub_ui(pm1, p, 1);
  bool generator = true;
  // Every factor is tested (no early exit): one-time setup, but no need to
  // show which factor a rejected candidate failed on.
  const size_t count = f.small.size() + (mpz_cmp_ui(f.large, 1) > 0 ? 1 : 0);
  for (size_t i = 0; i < count; ++i) {
    if (i < f.small.size()) {
      mpz_set_ui(r, f.small[i]);
    } else {
      mpz_set(r, f.large);
    }
    mpz_divexact(e, pm1, r);           // >= 1
    mpz_powm_sec(t, g, e, p);          // secret p: constant time
    if (mpz_cmp_ui(t, 1) == 0) generator = false;
  }
  return generator;
}

int CombWindow(int prime_bits) {
  if (prime_bits < 2) return 0;
  const size_t limbs = (2 * static_cast<size_t>(prime_bits) + 63) / 64;
  for (int w = 5; w >= 4; --w) {
    const size_t rows = (prime_bits + w - 1) / w;
    if ((rows << w) * limbs * sizeof(mp_limb_t) <= kMaxCombBytes) return w;
  }
  return 0;
}

NoiseComb::~NoiseComb() {
  WipeLimbs(&table);
  WipeLimbs(&mod);
}

bool MakeNoiseComb(mpz_srcptr p, const PMinus1Factors& f, int window, NoiseComb* out,
                   std::string* error) {
  if (mpz_cmp_ui(p, 3) < 0 || mpz_even_p(p) || !FactorsMatch(p, f)) {
    *error = "fixed-base noise: p must be an odd prime given with every prime factor of p - 1";
    return false;
  }
  mpz_set(out->p, p);
  mpz_mul(out->p2, p, p);
  mpz_sub_ui(out->pm1, p, 1);
  const int bits = static_cast<int>(mpz_sizeinbase(out->pm1, 2));
  const int w = window > 0 ? window : CombWindow(static_cast<int>(mpz_sizeinbase(p, 2)));
  out->limbs = mpz_size(out->p2);
  if (w < 1 || w > 8) {
    *error = "fixed-base noise: no table window fits for a prime of " +
             std::to_string(mpz_sizeinbase(p, 2)) + " bits";
    return false;
  }
  out->window = w;
  out->rows = (bits + w - 1) / w;
  const size_t entries = size_t{1} << w;
  const size_t L = out->limbs;
  if (static_cast<size_t>(out->rows) * entries * L * sizeof(mp_limb_t) > kMaxCombBytes) {
    *error = "fixed-base noise: the table would exceed " + std::to_string(kMaxCombBytes) +
             " bytes";
    return false;
  }
  out->mod.assign(L, 0);
  ToLimbs(out->p2, L, out->mod.data());
  mp_limb_t inv = out->mod[0];  // right to 3 bits (odd x: x x = 1 mod 8)
  for (int i = 0; i < 5; ++i) inv *= 2 - out->mod[0] * inv;  // 3 -> 96 bits
  out->minv = ~inv + 1;  // -m^-1 mod 2^64

  // g uniform among the generators of Z*_p: a uniform unit, kept if it is one
  // (a fraction phi(p-1)/(p-1) of them: over 1/20 for any p of up to 2048 bits).
  for (int tries = 0;; ++tries) {
    if (tries == 10000) {
      *error = "fixed-base noise: no generator found (is p prime?)";
      return false;
    }
    if (!RandomBelow(p, 1, out->g, error)) return false;
    if (IsGenerator(out->g, p, f)) break;
  }
  mpz_powm_sec(out->w, out->g, p, out->p2);  // omega(g) generates T_p

  // Row i: w^(d 2^(W i)) R mod p^2 for d < 2^W, by products in Montgomery form.
  const Mont mont = MontOf(*out);
  Mpz x(true);
  std::vector<mp_limb_t> one(L), base(L), scratch(mont.ScratchLimbs());
  mpz_set_ui(x, 0);
  mpz_setbit(x, 64 * L);
  mpz_mod(x, x, out->p2);  // R mod p^2 (1 in Montgomery form)
  ToLimbs(x, L, one.data());
  mpz_mul_2exp(x, out->w, 64 * L);
  mpz_mod(x, x, out->p2);  // w R mod p^2
  ToLimbs(x, L, base.data());
  out->table.assign(static_cast<size_t>(out->rows) * entries * L, 0);
  for (int i = 0; i < out->rows; ++i) {
    mp_limb_t* row = &out->table[static_cast<size_t>(i) * entries * L];
    std::copy(one.begin(), one.end(), row);
    for (size_t d = 1; d < entries; ++d) mont.Mul(row + d * L, row + (d - 1) * L, base.data(),
                                                  scratch.data());
    mont.Mul(base.data(), row + (entries - 1) * L, base.data(), scratch.data());  // base^(2^W)
  }
  WipeLimbs(&base);
  WipeLimbs(&scratch);
  return true;
}

bool NoiseCombPow(const NoiseComb& t, mpz_srcptr k, mpz_ptr out) {
  const int w = t.window;
  const int exp_bits = t.rows * w;
  if (mpz_sgn(k) < 0 || (mpz_sgn(k) > 0 && mpz_sizeinbase(k, 2) > static_cast<size_t>(exp_bits)))
    return false;
  const size_t L = t.limbs, entries = size_t{1} << w;
  const Mont mont = MontOf(t);
  std::vector<mp_limb_t> e(exp_bits / 64 + 2, 0), acc(L), sel(L),
      scratch(mont.ScratchLimbs());
  mpz_export(e.data(), nullptr, -1, sizeof(mp_limb_t), 0, 0, k);
  // Every row: one whole-row read (constant time in the digit) and one product,
  // whatever the digit is (digit 0 selects R, the Montgomery 1). Row 0 starts
  // the product.
  mpn_sec_tabselect(acc.data(), t.table.data(), L, entries, Digit(e.data(), 0, w));
  for (int i = 1; i < t.rows; ++i) {
    mpn_sec_tabselect(sel.data(), &t.table[static_cast<size_t>(i) * entries * L], L, entries,
                      Digit(e.data(), i * w, w));
    mont.Mul(acc.data(), acc.data(), sel.data(), scratch.data());
  }
  // Out of Montgomery form: acc R^-1 = Redc(acc).
  mp_limb_t* wide = scratch.data();  // 2L limbs
  std::copy(acc.begin(), acc.end(), wide);
  std::fill(wide + L, wide + 2 * L, 0);
  mont.Redc(sel.data(), wide, scratch.data() + 2 * L);
  mpz_import(out, L, -1, sizeof(mp_limb_t), 0, 0, sel.data());
  WipeLimbs(&e);
  WipeLimbs(&acc);
  WipeLimbs(&sel);
  WipeLimbs(&scratch);
  return true;
}

bool NoiseCombSample(const NoiseComb& t, mpz_ptr out, std::string* error) {
  Mpz k(true);
  if (!RandomBelow(t.pm1, 0, k, error)) return false;  // uniform in [0, p - 1)
  if (!NoiseCombPow(t, k, out)) {
    *error = "fixed-base noise: exponent out of the table's range";  // cannot happen
    return false;
  }
  return true;
}

bool MakeCrtNoise(std::shared_ptr<const PrivateKey> key, CrtNoise* out, std::string* error) {
  out->key = std::move(key);
  const PrivateKey& sk = *out->key;
  struct Half {
    mpz_srcptr prime;
    std::unique_ptr<const NoiseComb>* comb;
  } halves[2] = {{sk.p, &out->comb_p}, {sk.q, &out->comb_q}};
  for (const Half& h : halves) {
    if (CombWindow(static_cast<int>(mpz_sizeinbase(h.prime, 2))) == 0) continue;
    PMinus1Factors f;
    if (!FactorPMinus1(h.prime, &f)) continue;  // p - 1 does not factor: s^p
    auto comb = std::make_unique<NoiseComb>();
    if (!MakeNoiseComb(h.prime, f, 0, comb.get(), error)) return false;
    *h.comb = std::move(comb);
  }
  return true;
}

std::shared_ptr<const CrtNoise> GetCrtNoise(const std::string& n, const std::string& p,
                                            const std::string& q, std::string* error) {
  static auto* cache = new internal::KeyCache<CrtNoise>(kCrtNoiseCacheSize);
  return cache->Get(
      internal::LengthPrefixed(n) + internal::LengthPrefixed(p) +
          internal::LengthPrefixed(q),
      [&](CrtNoise* c, std::string* e) {
        std::shared_ptr<const PrivateKey> key = GetPrivateKey(n, p, q, e);
        return key != nullptr && MakeCrtNoise(std::move(key), c, e);
      },
      error);
}

bool NoiseCrt(const CrtNoise& noise, mpz_ptr out, std::string* error) {
  return internal::CrtNoiseFrom(*noise.key, noise.comb_p.get(), noise.comb_q.get(), out, error);
}

}  // namespace paillier
}  // namespace tf_privpy
