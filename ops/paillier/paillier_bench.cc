// Speed of the Paillier primitives (no TensorFlow), per element, on 1 and 2
// threads, with a correctness check of every timed result:
//   make -f ops/paillier/Makefile.standalone bench            # 2048-bit key
//   make -f ops/paillier/Makefile.standalone bench BITS=1024
// Each figure is the best of three runs.
// Also times mpz_powm against mpz_powm_sec on the CRT half-exponentiation,
// the cost of the constant-time choice documented in paillier.h, keygen,
// the key holder's fixed-base noise against s^p (and its table window), and
// the BatchCrypt client's cost per packed value.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/paillier/paillier.h"

using tf_privpy::MakeThreadedFor;
using tf_privpy::ParallelFor;
using tf_privpy::SerialFor;
namespace pl = tf_privpy::paillier;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s\n", what);
    exit(1);
  }
}

// Runs fn(i) for i in [0, count) with `pf`, three times; returns the best
// seconds per element (the machine is shared: the minimum is the least
// disturbed run).
double Time(const ParallelFor& pf, int64_t count, const std::function<void(int64_t)>& fn) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t = Now();
    pf(count, 1 << 20, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
    best = std::min(best, (Now() - t) / count);
  }
  return best;
}

struct Vec {  // count mpz values
  explicit Vec(int64_t n) : v(n) {}
  std::vector<pl::Mpz> v;
  pl::Mpz& operator[](int64_t i) { return v[i]; }
};

}  // namespace

int main(int argc, char** argv) {
  const int bits = argc > 1 ? atoi(argv[1]) : 2048;
  const int64_t count = argc > 2 ? atoll(argv[2]) : (bits <= 1024 ? 400 : 60);
  std::string n, p, q, error;
  printf("%d-bit key, %lld elements per measurement\n", bits, static_cast<long long>(count));
  // Keygen: its time varies a lot with the luck of the prime search.
  for (int threads : {1, 2}) {
    std::vector<double> ms;
    for (int rep = 0; rep < (bits <= 2048 ? 7 : 3); ++rep) {
      const double t0 = Now();
      Check(pl::GenerateKey(bits, threads == 1 ? ParallelFor(SerialFor) : MakeThreadedFor(1, 2),
                            &n, &p, &q, &error),
            error.c_str());
      ms.push_back((Now() - t0) * 1e3);
    }
    std::sort(ms.begin(), ms.end());
    printf("  keygen (%d thread%s min/median/max %7.1f / %.1f / %.1f ms\n", threads,
           threads == 1 ? "), " : "s),", ms.front(), ms[ms.size() / 2], ms.back());
  }
  auto sk = pl::GetPrivateKey(n, p, q, &error);
  Check(sk != nullptr, error.c_str());
  const pl::PublicKey& pk = sk->pub;
  double t = Now();
  auto djn = pl::GetDjnTable(n, &error);
  Check(djn != nullptr, error.c_str());
  printf("  DJN table (once per key)           %9.1f ms\n", (Now() - t) * 1e3);
  t = Now();
  pl::PMinus1Factors factors;
  Check(pl::FactorPMinus1(sk->p, &factors), "p - 1 factors");
  printf("  factor p - 1 (trial division)      %9.1f ms\n", (Now() - t) * 1e3);
  t = Now();
  auto crt = pl::GetCrtNoise(n, p, q, &error);
  Check(crt != nullptr && crt->tables() == 2, "fixed-base tables");
  printf("  CRT noise tables (once per key)    %9.1f ms, %.1f MB, window %d\n",
         (Now() - t) * 1e3,
         2.0 * crt->comb_p->table.size() * sizeof(mp_limb_t) / 1e6, crt->comb_p->window);

  Vec m(count), noise(count), c(count), d(count), s(count);
  for (int64_t i = 0; i < count; ++i) {
    Check(pl::RandomBelow(pk.n, 0, m[i], &error), "random plaintext");
  }
  struct Row {
    const char* name;
    std::function<void(int64_t)> fn;
  };
  std::vector<Row> rows = {
      {"noise r^n mod n^2 (generic)",
       [&](int64_t i) { Check(pl::NoiseGeneric(pk, noise[i], &error), "noise"); }},
      {"encrypt, generic (noise + product)",
       [&](int64_t i) {
         pl::Mpz r;
         Check(pl::NoiseGeneric(pk, r, &error), "noise");
         pl::EncryptWithNoise(pk, m[i], r, c[i]);
       }},
      {"noise DJN (fixed base, opt-in)",
       [&](int64_t i) { Check(pl::NoiseDjn(*djn, noise[i], &error), "noise"); }},
      {"encrypt with pool noise",
       [&](int64_t i) { pl::EncryptWithNoise(pk, m[i], noise[i], c[i]); }},
      {"noise CRT, s^p (other keys)",
       [&](int64_t i) { Check(pl::NoiseCrt(*sk, noise[i], &error), "noise"); }},
      {"encrypt, CRT s^p (other keys)",
       [&](int64_t i) {
         pl::Mpz r;
         Check(pl::NoiseCrt(*sk, r, &error), "noise");
         pl::EncryptWithNoise(pk, m[i], r, c[i]);
       }},
      {"decrypt, CRT (s^p encryptions)",
       [&](int64_t i) { Check(pl::Decrypt(*sk, c[i], d[i], &error), "decrypt"); }},
      {"noise CRT, fixed base (our keys)",
       [&](int64_t i) { Check(pl::NoiseCrt(*crt, noise[i], &error), "noise"); }},
      {"encrypt, CRT fixed base (our keys)",
       [&](int64_t i) {
         pl::Mpz r;
         Check(pl::NoiseCrt(*crt, r, &error), "noise");
         pl::EncryptWithNoise(pk, m[i], r, c[i]);
       }},
      {"decrypt, CRT",
       [&](int64_t i) { Check(pl::Decrypt(*sk, c[i], d[i], &error), "decrypt"); }},
      {"add",
       [&](int64_t i) { pl::Add(pk, c[i], c[(i + 1) % count], s[i]); }},
      {"mul_plain, 63-bit k",
       [&](int64_t i) {
         pl::Mpz k;
         mpz_set_si(k, -0x7123456789abcdefLL);
         Check(pl::MulPlain(pk, c[i], k, s[i], &error), "mul_plain");
       }},
  };
  const ParallelFor serial = SerialFor, threaded = MakeThreadedFor(1, 2);
  printf("  %-36s %12s %12s\n", "per element", "1 thread", "2 threads");
  double enc1 = 0, enc2 = 0, dec1 = 0, dec2 = 0;
  for (const Row& r : rows) {
    const double t1 = Time(serial, count, r.fn);
    const double t2 = Time(threaded, count, r.fn);
    if (std::string(r.name).rfind("encrypt, CRT fixed", 0) == 0) enc1 = t1, enc2 = t2;
    if (std::string(r.name).rfind("decrypt, CRT", 0) == 0) dec1 = t1, dec2 = t2;
    const bool ms = t1 > 1e-3;
    printf("  %-36s %9.3f %s %9.3f %s\n", r.name, ms ? t1 * 1e3 : t1 * 1e6, ms ? "ms" : "us",
           ms ? t2 * 1e3 : t2 * 1e6, ms ? "ms" : "us");
    if (std::string(r.name).rfind("encrypt with pool", 0) == 0) {  // DJN noise in use
      for (int64_t i = 0; i < count; ++i) {
        Check(pl::Decrypt(*sk, c[i], d[i], &error) && mpz_cmp(d[i], m[i]) == 0,
              "decrypt(encrypt with DJN noise)");
      }
    }
    if (std::string(r.name).rfind("decrypt", 0) == 0) {  // round trip of the CRT encryptions
      for (int64_t i = 0; i < count; ++i) Check(mpz_cmp(d[i], m[i]) == 0, "decrypt(encrypt(m))");
    }
  }
  printf("  BatchCrypt client, (CRT enc fixed base + dec) / 100 values: %.1f us (1 thread), "
         "%.1f us (2 threads)\n", (enc1 + dec1) / 100 * 1e6, (enc2 + dec2) / 100 * 1e6);
  // Homomorphic checks on the last ciphertexts: add and mul_plain.
  Check(pl::Decrypt(*sk, s[0], d[0], &error), "decrypt");
  pl::Mpz want;
  mpz_set_si(want, -0x7123456789abcdefLL);
  mpz_mul(want, want, m[0]);
  mpz_mod(want, want, pk.n);
  Check(mpz_cmp(want, d[0]) == 0, "mul_plain result");

  // The cost of constant time: one CRT half-exponentiation.
  pl::Mpz base, out;
  Check(pl::RandomBelow(sk->p, 1, base, &error), "random");
  const int reps = static_cast<int>(count);
  double plain = 1e30, sec = 1e30;
  for (int rep = 0; rep < 3; ++rep) {  // interleaved, best of three each
    t = Now();
    for (int i = 0; i < reps; ++i) mpz_powm(out, base, sk->p, sk->p2);
    plain = std::min(plain, (Now() - t) / reps);
    t = Now();
    for (int i = 0; i < reps; ++i) mpz_powm_sec(out, base, sk->p, sk->p2);
    sec = std::min(sec, (Now() - t) / reps);
  }
  printf("  s^p mod p^2: mpz_powm %.3f ms, mpz_powm_sec %.3f ms (+%.0f%%)\n", plain * 1e3,
         sec * 1e3, (sec / plain - 1) * 100);

  // The table's window: w^k mod p^2 for W = 4, 5, 6 (table size per prime).
  printf("  w^k mod p^2 from the table, by window:");
  for (int w : {4, 5, 6}) {
    pl::NoiseComb comb;
    Check(pl::MakeNoiseComb(sk->p, factors, w, &comb, &error), error.c_str());
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      t = Now();
      for (int i = 0; i < reps; ++i) Check(pl::NoiseCombSample(comb, out, &error), "sample");
      best = std::min(best, (Now() - t) / reps);
    }
    printf("  W=%d %.0f us (%.1f MB)", w, best * 1e6,
           comb.table.size() * sizeof(mp_limb_t) / 1e6);
  }
  printf("\n");
  printf("OK\n");
  return 0;
}
