// Standalone test of the Paillier math (no TensorFlow), mainly the key
// holder's fixed-base noise:
//   make -f ops/paillier/Makefile.standalone test
// Toy primes are checked exhaustively: the factorization of p - 1, the
// generator test against brute-force orders, and the table path as a
// bijection from [0, p-1) onto T_p (the same set as s^p for s in [1, p)),
// plus a chi-square test of sampled values. Real keys: the primes' structure
// and invariants, the table against mpz_powm, noise in the right subgroups,
// round trips, and the fallback to s^p for keys whose p - 1 does not factor.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ops/common/test_check.h"
#include "ops/common/parallel.h"
#include "ops/paillier/paillier.h"

namespace pl = tf_privpy::paillier;
using pl::Mpz;

namespace {

using tf_privpy::testing::Check;

std::string Str(mpz_srcptr x) {
  char* s = mpz_get_str(nullptr, 10, x);
  std::string out(s);
  void (*free_fn)(void*, size_t);
  mp_get_memory_functions(nullptr, nullptr, &free_fn);
  free_fn(s, out.size() + 1);
  return out;
}

// Distinct prime factors of x by trial division (x small).
std::vector<unsigned long> BruteFactors(unsigned long x) {
  std::vector<unsigned long> f;
  for (unsigned long r = 2; r * r <= x; ++r) {
    if (x % r) continue;
    f.push_back(r);
    while (x % r == 0) x /= r;
  }
  if (x > 1) f.push_back(x);
  return f;
}

unsigned long MulMod(unsigned long a, unsigned long b, unsigned long m) {
  return static_cast<unsigned long>(static_cast<unsigned __int128>(a) * b % m);
}

// Multiplicative order of g mod p (p small prime), by brute force.
unsigned long Order(unsigned long g, unsigned long p) {
  unsigned long x = g % p, k = 1;
  while (x != 1) {
    x = MulMod(x, g, p);
    ++k;
  }
  return k;
}

gmp_randstate_t g_rand;

// ---- toy primes: everything exhaustively -----------------------------------

void TestToyPrime(unsigned long pv, bool exhaustive_generators) {
  const std::string tag = "p=" + std::to_string(pv);
  Mpz p, g, x, y, e;
  mpz_set_ui(p, pv);
  pl::PMinus1Factors f;
  Check(pl::FactorPMinus1(p, &f), tag + ": p-1 factors");
  std::vector<unsigned long> got = f.small;
  if (mpz_cmp_ui(f.large, 1) > 0) got.push_back(mpz_get_ui(f.large));
  Check(got == BruteFactors(pv - 1), tag + ": factors of p-1 are the brute-force ones");

  // The generator test against brute-force orders.
  if (exhaustive_generators) {
    unsigned long generators = 0, mismatches = 0;
    for (unsigned long gv = 1; gv < pv; ++gv) {
      mpz_set_ui(g, gv);
      const bool is_gen = Order(gv, pv) == pv - 1;
      generators += is_gen;
      mismatches += pl::IsGenerator(g, p, f) != is_gen;
    }
    Check(mismatches == 0, tag + ": IsGenerator == (order is p-1) for every g");
    unsigned long phi = pv - 1;
    for (unsigned long r : BruteFactors(pv - 1)) phi = phi / r * (r - 1);
    Check(generators == phi, tag + ": phi(p-1) generators");
  }
  mpz_set_ui(g, 0);
  Check(!pl::IsGenerator(g, p, f), tag + ": 0 is not a generator");
  mpz_set(g, p);
  Check(!pl::IsGenerator(g, p, f), tag + ": p is not a generator");

  // Tables of every window: g^k through the table == mpz_powm, a bijection
  // [0, p-1) -> T_p, and T_p == { s^p mod p^2 : s in [1, p) }.
  std::set<std::string> spow;
  Mpz p2;
  mpz_mul(p2, p, p);
  for (unsigned long s = 1; s < pv; ++s) {
    mpz_set_ui(x, s);
    mpz_powm(x, x, p, p2);
    spow.insert(Str(x));
  }
  Check(spow.size() == pv - 1, tag + ": s -> s^p mod p^2 is injective on [1, p)");
  for (int w = 1; w <= 6; ++w) {
    pl::NoiseComb t;
    std::string error;
    if (!pl::MakeNoiseComb(p, f, w, &t, &error)) {
      Check(false, tag + ": MakeNoiseComb: " + error);
      continue;
    }
    const std::string wt = tag + " W=" + std::to_string(w);
    Check(pl::IsGenerator(t.g, p, f), wt + ": g is a generator");
    mpz_powm(x, t.g, p, p2);
    Check(mpz_cmp(x, t.w) == 0, wt + ": w = g^p mod p^2");
    std::set<std::string> images;
    unsigned long bad = 0;
    const unsigned long top = 1ul << (t.rows * w);  // every exponent the table takes
    for (unsigned long k = 0; k < top; ++k) {
      mpz_set_ui(e, k);
      if (!pl::NoiseCombPow(t, e, x)) {
        ++bad;
        continue;
      }
      mpz_powm(y, t.w, e, p2);
      bad += mpz_cmp(x, y) != 0;
      if (k < pv - 1) images.insert(Str(x));
    }
    Check(bad == 0, wt + ": table == mpz_powm(w, k, p^2) for every k < 2^(rows W)");
    Check(images == spow, wt + ": k -> w^k is a bijection [0, p-1) -> {s^p mod p^2}");
    mpz_set_ui(e, top);
    Check(!pl::NoiseCombPow(t, e, x), wt + ": rejects k = 2^(rows W)");
    mpz_set_si(e, -1);
    Check(!pl::NoiseCombPow(t, e, x), wt + ": rejects k < 0");
  }
  // A wrong factorization is refused.
  pl::PMinus1Factors wrong;
  wrong.small = f.small;
  if (!wrong.small.empty()) wrong.small.pop_back();
  mpz_set(wrong.large, f.large);
  pl::NoiseComb t;
  std::string error;
  Check(!pl::MakeNoiseComb(p, wrong, 3, &t, &error),
        tag + ": an incomplete factorization of p-1 is refused");
}

// Sampled values of the table path: uniform on T_p (chi-square).
void TestToyUniform(unsigned long pv, int samples_per_value) {
  const std::string tag = "uniform p=" + std::to_string(pv);
  Mpz p, p2, x;
  mpz_set_ui(p, pv);
  mpz_mul(p2, p, p);
  pl::PMinus1Factors f;
  Check(pl::FactorPMinus1(p, &f), tag + ": factors");
  pl::NoiseComb t;
  std::string error;
  Check(pl::MakeNoiseComb(p, f, 0, &t, &error), tag + ": table " + error);
  std::map<unsigned long, long> counts;
  const long n = static_cast<long>(pv - 1) * samples_per_value;
  long outside = 0;
  for (long i = 0; i < n; ++i) {
    Check(pl::NoiseCombSample(t, x, &error), tag + ": sample");
    const unsigned long v = mpz_get_ui(x);
    Mpz c;
    mpz_powm_ui(c, x, pv - 1, p2);
    outside += mpz_cmp_ui(c, 1) != 0;
    ++counts[v];
  }
  Check(outside == 0, tag + ": every sample is in T_p (x^(p-1) = 1 mod p^2)");
  Check(counts.size() == pv - 1, tag + ": every element of T_p occurs");
  double chi2 = 0;
  for (const auto& kv : counts) {
    const double d = kv.second - samples_per_value;
    chi2 += d * d / samples_per_value;
  }
  chi2 += static_cast<double>(pv - 1 - counts.size()) * samples_per_value;
  // chi-square with df = p - 2: mean df, sd sqrt(2 df); 7 sd is a false
  // alarm probability far below 1e-9.
  const double df = static_cast<double>(pv - 2);
  Check(chi2 < df + 7 * std::sqrt(2 * df),
        tag + ": chi-square " + std::to_string(chi2) + " for df " + std::to_string(df));
  std::printf("  %s: %ld samples, chi-square %.0f (df %.0f)\n", tag.c_str(), n, chi2, df);
}

// p - 1 with a prime factor above the trial-division bound, or two of them.
void TestLargeFactors() {
  Mpz a, b, p, t;
  // p = 2 a + 1 with a prime > 2^20 (a safe prime): factors {2, a}.
  for (mpz_set_ui(a, (1ul << 21) + 12345);; ) {
    mpz_nextprime(a, a);
    mpz_mul_ui(p, a, 2);
    mpz_add_ui(p, p, 1);
    if (mpz_probab_prime_p(p, 30)) break;
  }
  pl::PMinus1Factors f;
  Check(pl::FactorPMinus1(p, &f) && f.small == std::vector<unsigned long>{2} &&
            mpz_cmp(f.large, a) == 0,
        "safe prime " + Str(p) + ": factors {2, a}");
  pl::NoiseComb comb;
  std::string error;
  Check(pl::MakeNoiseComb(p, f, 0, &comb, &error), "safe prime: table " + error);
  Mpz k, x, y, p2;
  mpz_mul(p2, p, p);
  for (int i = 0; i < 200; ++i) {
    mpz_urandomm(k, g_rand, comb.pm1);
    Check(pl::NoiseCombPow(comb, k, x), "safe prime: pow");
    mpz_powm(y, comb.w, k, p2);
    Check(mpz_cmp(x, y) == 0, "safe prime: table == mpz_powm");
  }
  // p = 2 a b + 1 with a, b primes > 2^20: the cofactor a b is composite.
  mpz_set_ui(a, (1ul << 20) + 777);
  mpz_nextprime(a, a);
  for (mpz_set(b, a);;) {
    mpz_nextprime(b, b);
    mpz_mul(p, a, b);
    mpz_mul_ui(p, p, 2);
    mpz_add_ui(p, p, 1);
    if (mpz_probab_prime_p(p, 30)) break;
  }
  Check(!pl::FactorPMinus1(p, &f), "p - 1 = 2 a b, a, b > 2^20: not factored " + Str(p));
  mpz_set_ui(p, 2);
  Check(!pl::FactorPMinus1(p, &f), "p = 2 refused");
  mpz_set_ui(p, 9);  // odd, and 8 = 2^3: factors fine, primality is the caller's
  Check(pl::FactorPMinus1(p, &f) && f.small == std::vector<unsigned long>{2},
        "p = 9: p - 1 = 2^3");
}

void TestCombWindow() {
  Check(pl::CombWindow(512) == 5, "CombWindow(512) = 5");
  Check(pl::CombWindow(1024) == 5, "CombWindow(1024) = 5");
  Check(pl::CombWindow(1536) == 5, "CombWindow(1536) = 5");
  Check(pl::CombWindow(2048) == 4, "CombWindow(2048) = 4");
  Check(pl::CombWindow(3072) == 0, "CombWindow(3072) = 0: s^p for keys over 4096 bits");
}

// ---- real keys ------------------------------------------------------------

// A random prime p = 2 a b + 1 of exactly `bits` bits (two top bits set) with
// a, b primes of about bits/2 bits: p - 1 certainly does not factor by trial
// division. Stands for the primes of python-paillier and older keys.
void UnfactorablePrime(int bits, mpz_ptr p) {
  Mpz a, b, lo, hi;
  for (;;) {
    mpz_urandomb(a, g_rand, bits / 2);
    mpz_setbit(a, bits / 2 - 1);
    mpz_nextprime(a, a);
    // b in [3 2^(bits-3) / a, 2^(bits-1) / a): 2 a b + 1 in [3 2^(bits-2), 2^bits).
    mpz_set_ui(lo, 3);
    mpz_mul_2exp(lo, lo, bits - 3);
    mpz_cdiv_q(lo, lo, a);
    mpz_set_ui(hi, 0);
    mpz_setbit(hi, bits - 1);
    mpz_fdiv_q(hi, hi, a);
    mpz_sub(hi, hi, lo);
    mpz_urandomm(b, g_rand, hi);
    mpz_add(b, b, lo);
    mpz_nextprime(b, b);
    mpz_mul(p, a, b);
    mpz_mul_2exp(p, p, 1);
    mpz_add_ui(p, p, 1);
    if (mpz_sizeinbase(p, 2) != static_cast<size_t>(bits) || !mpz_tstbit(p, bits - 2))
      continue;
    if (mpz_probab_prime_p(p, 30)) return;
  }
}

void CheckPrimeStructure(mpz_srcptr p, int half, const std::string& tag) {
  pl::PMinus1Factors f;
  Check(pl::FactorPMinus1(p, &f), tag + ": p - 1 factors");
  Check(mpz_sizeinbase(p, 2) == static_cast<size_t>(half) && mpz_tstbit(p, half - 2),
        tag + ": bits/2 bits, two top bits set");
  Check(mpz_probab_prime_p(f.large, 30) > 0 &&
            mpz_sizeinbase(f.large, 2) == static_cast<size_t>(half - 40),
        tag + ": the large factor p' is a prime of bits/2 - 40 bits");
  Mpz k;
  mpz_sub_ui(k, p, 1);
  mpz_divexact(k, k, f.large);
  Check(mpz_even_p(k) && mpz_sizeinbase(k, 2) <= 41 && !mpz_divisible_p(k, f.large),
        tag + ": p - 1 = 2 k p' with k < 2^40, p' once");
  bool smooth = !f.small.empty() && f.small[0] == 2;
  for (unsigned long r : f.small) smooth = smooth && r < pl::kSmoothBound;
  Check(smooth, tag + ": k is 2^20-smooth");
}

void TestKey(int bits) {
  const std::string tag = std::to_string(bits) + "-bit key";
  std::string n, p, q, error;
  Check(pl::GenerateKey(bits, tf_privpy::MakeThreadedFor(1, 2), &n, &p, &q, &error),
        tag + ": keygen " + error);
  auto sk = pl::GetPrivateKey(n, p, q, &error);
  Check(sk != nullptr, tag + ": key " + error);
  if (!sk) return;
  const pl::PublicKey& pk = sk->pub;
  // Invariants of every key, and the structure of ours.
  Mpz t, u;
  Check(pk.bits == bits, tag + ": n has exactly bits bits");
  Check(mpz_cmp(sk->p, sk->q) != 0, tag + ": p != q");
  mpz_mul(t, sk->pm1, sk->qm1);
  mpz_gcd(u, t, pk.n);
  Check(mpz_cmp_ui(u, 1) == 0, tag + ": gcd(n, (p-1)(q-1)) = 1");
  mpz_sub(t, sk->p, sk->q);
  mpz_abs(t, t);
  Check(mpz_sizeinbase(t, 2) > static_cast<size_t>(bits / 2 - 100), tag + ": |p - q| large");
  CheckPrimeStructure(sk->p, bits / 2, tag + " p");
  CheckPrimeStructure(sk->q, bits / 2, tag + " q");

  auto noise = pl::GetCrtNoise(n, p, q, &error);
  Check(noise != nullptr && noise->tables() == 2, tag + ": both primes get a table");
  if (!noise || noise->tables() != 2) return;
  Check(pl::GetCrtNoise(n, p, q, &error) == noise, tag + ": the tables are cached");
  // w generates T_p: w^(p-1) = 1 and w^((p-1)/f) != 1 mod p^2 for every prime f.
  for (const pl::NoiseComb* c : {noise->comb_p.get(), noise->comb_q.get()}) {
    pl::PMinus1Factors f;
    Check(pl::FactorPMinus1(c->p, &f), tag + ": factors");
    mpz_powm(t, c->w, c->pm1, c->p2);
    bool ok = mpz_cmp_ui(t, 1) == 0;
    std::vector<unsigned long> fs = f.small;
    for (size_t i = 0; i <= fs.size(); ++i) {
      if (i < fs.size()) {
        mpz_divexact_ui(u, c->pm1, fs[i]);
      } else {
        mpz_divexact(u, c->pm1, f.large);
      }
      mpz_powm(t, c->w, u, c->p2);
      ok = ok && mpz_cmp_ui(t, 1) != 0;
    }
    Check(ok, tag + ": w has order exactly p - 1 mod p^2");
    // The table against mpz_powm, random and edge exponents.
    Mpz k, x, y;
    std::vector<Mpz> edges(5);
    mpz_set_ui(edges[0], 0);
    mpz_set_ui(edges[1], 1);
    mpz_sub_ui(edges[2], c->pm1, 1);
    mpz_set_ui(edges[3], 0);
    mpz_setbit(edges[3], c->rows * c->window);
    mpz_sub_ui(edges[3], edges[3], 1);  // every digit 2^W - 1
    mpz_set(edges[4], c->pm1);
    for (int i = 0; i < 5 + 40; ++i) {
      if (i < 5) {
        mpz_set(k, edges[i]);
      } else {
        mpz_urandomb(k, g_rand, c->rows * c->window);
      }
      Check(pl::NoiseCombPow(*c, k, x), tag + ": pow");
      mpz_powm(y, c->w, k, c->p2);
      Check(mpz_cmp(x, y) == 0, tag + ": table == mpz_powm(w, k, p^2), k = " + Str(k));
    }
  }
  // Noise: in T_p x T_q (the n-th residues), distinct, and encryptions decrypt.
  const int count = 24;
  std::vector<Mpz> r(count), m(count), c(count), d(count);
  std::set<std::string> seen;
  for (int i = 0; i < count; ++i) {
    Check(pl::NoiseCrt(*noise, r[i], &error), tag + ": noise " + error);
    mpz_powm(t, r[i], sk->pm1, sk->p2);
    mpz_powm(u, r[i], sk->qm1, sk->q2);
    Check(mpz_cmp_ui(t, 1) == 0 && mpz_cmp_ui(u, 1) == 0,
          tag + ": noise^(p-1) = 1 mod p^2 and noise^(q-1) = 1 mod q^2");
    Check(mpz_sgn(r[i]) > 0 && mpz_cmp(r[i], pk.n2) < 0 && pl::IsUnit(pk, r[i]),
          tag + ": noise in Z*_{n^2}");
    seen.insert(Str(r[i]));
    Check(pl::RandomBelow(pk.n, 0, m[i], &error), "random");
    if (i == 0) mpz_set_ui(m[i], 0);
    if (i == 1) mpz_sub_ui(m[i], pk.n, 1);
    pl::EncryptWithNoise(pk, m[i], r[i], c[i]);
    Check(pl::Decrypt(*sk, c[i], d[i], &error) && mpz_cmp(d[i], m[i]) == 0,
          tag + ": decrypt(encrypt(m)) = m");
  }
  Check(seen.size() == static_cast<size_t>(count), tag + ": noise values distinct");
  // Many threads on one key.
  std::vector<Mpz> mt(64);
  std::vector<int> ok(64, 0);
  tf_privpy::MakeThreadedFor(1, 4)(64, 1, [&](int64_t b, int64_t e) {
    std::string err;
    for (int64_t i = b; i < e; ++i) {
      auto cn = pl::GetCrtNoise(n, p, q, &err);
      Mpz dd;
      ok[i] = cn && pl::NoiseCrt(*cn, mt[i], &err);
      pl::EncryptWithNoise(pk, m[i % count], mt[i], mt[i]);
      ok[i] = ok[i] && pl::Decrypt(*sk, mt[i], dd, &err) && mpz_cmp(dd, m[i % count]) == 0;
    }
  });
  Check(std::count(ok.begin(), ok.end(), 1) == 64, tag + ": concurrent noise decrypts");
}

// Keys whose p - 1 does not factor keep s^p; one structured prime is enough
// for one table.
void TestFallback(int bits) {
  const std::string tag = std::to_string(bits) + "-bit fallback";
  Mpz p1, q1, nn;
  UnfactorablePrime(bits / 2, p1);
  do {
    UnfactorablePrime(bits / 2, q1);
  } while (mpz_cmp(p1, q1) == 0);
  std::string gn, gp, gq, error;
  // A structured prime from a fresh key, paired with an unfactorable one.
  Check(pl::GenerateKey(bits, tf_privpy::SerialFor, &gn, &gp, &gq, &error), "keygen");
  Mpz s;
  mpz_import(s, gp.size(), 1, 1, 1, 0, gp.data());
  struct Case {
    mpz_srcptr a, b;
    int tables;
  } cases[] = {{p1, q1, 0}, {s, q1, 1}, {p1, s, 1}};
  for (const Case& cs : cases) {
    mpz_mul(nn, cs.a, cs.b);
    if (mpz_sizeinbase(nn, 2) != static_cast<size_t>(bits)) {
      Check(false, tag + ": test key size");
      continue;
    }
    const std::string n = pl::MinimalBytes(nn), p = pl::MinimalBytes(cs.a),
                      q = pl::MinimalBytes(cs.b);
    auto sk = pl::GetPrivateKey(n, p, q, &error);
    Check(sk != nullptr, tag + ": key " + error);
    if (!sk) continue;
    auto noise = pl::GetCrtNoise(n, p, q, &error);
    Check(noise != nullptr && noise->tables() == cs.tables,
          tag + ": " + std::to_string(cs.tables) + " table(s)");
    if (!noise) continue;
    for (int i = 0; i < 6; ++i) {
      Mpz r, m, c, d, t;
      Check(pl::NoiseCrt(*noise, r, &error), tag + ": noise");
      mpz_powm(t, r, sk->pm1, sk->p2);
      Check(mpz_cmp_ui(t, 1) == 0, tag + ": noise^(p-1) = 1 mod p^2");
      mpz_powm(t, r, sk->qm1, sk->q2);
      Check(mpz_cmp_ui(t, 1) == 0, tag + ": noise^(q-1) = 1 mod q^2");
      Check(pl::RandomBelow(sk->pub.n, 0, m, &error), "random");
      pl::EncryptWithNoise(sk->pub, m, r, c);
      Check(pl::Decrypt(*sk, c, d, &error) && mpz_cmp(d, m) == 0, tag + ": round trip");
    }
  }
}

}  // namespace

int main() {
  std::random_device rd;
  const unsigned long seed = (static_cast<unsigned long>(rd()) << 32) ^ rd();
  gmp_randinit_default(g_rand);
  gmp_randseed_ui(g_rand, seed);
  std::printf("seed %lu\n", seed);

  TestCombWindow();
  // 2311 - 1 = 2 3 5 7 11; 97 - 1 = 2^5 3; 65537 - 1 = 2^16; 1021 - 1 = 2^2 3 5 17;
  // 4099 - 1 = 2 3 683.
  for (unsigned long p : {3ul, 5ul, 7ul, 17ul, 97ul, 101ul, 257ul, 1021ul, 2311ul, 4099ul})
    TestToyPrime(p, true);
  TestToyPrime(65537, false);
  TestToyUniform(2311, 100);
  TestToyUniform(97, 2000);
  TestLargeFactors();
  TestKey(1024);
  TestKey(2048);
  TestFallback(1024);
  return tf_privpy::testing::Report();
}
