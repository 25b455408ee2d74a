// Internals shared by the Paillier sources (paillier.cc, the general math;
// paillier_fixed_base.cc, the key holder's fixed-base noise). Not an API.
#ifndef TF_PRIVPY_OPS_PAILLIER_PAILLIER_INTERNAL_H_
#define TF_PRIVPY_OPS_PAILLIER_PAILLIER_INTERNAL_H_

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "ops/paillier/paillier.h"

namespace tf_privpy {
namespace paillier {
namespace internal {

// Rounds of mpz_probab_prime_p: GMP runs Baillie-PSW first, then reps - 24
// Miller-Rabin rounds with random bases.
constexpr int kPrimeReps = 40;     // fresh keys
constexpr int kCheckReps = 25;     // keys handed in (phe keys, ours)

// An LRU map from key bytes to shared, immutable precomputations.
template <typename T>
class KeyCache {
 public:
  explicit KeyCache(size_t capacity) : capacity_(capacity) {}

  template <typename Make>
  std::shared_ptr<const T> Get(const std::string& id, Make make, std::string* error) {
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->first == id) {
          entries_.splice(entries_.begin(), entries_, it);
          return entries_.front().second;
        }
      }
    }
    // Built outside the lock (a private key takes milliseconds to check);
    // two threads may build the same key, and the first insert wins.
    auto made = std::make_shared<T>();
    if (!make(made.get(), error)) return nullptr;
    std::lock_guard<std::mutex> l(mu_);
    for (auto& e : entries_)
      if (e.first == id) return e.second;
    entries_.emplace_front(id, std::move(made));
    if (entries_.size() > capacity_) entries_.pop_back();
    return entries_.front().second;
  }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const T>>> entries_;
};

inline std::string LengthPrefixed(const std::string& s) {
  return std::to_string(s.size()) + ":" + s;
}

// A uniform prime of exactly `bits` bits with its two top bits set.
bool RandomPrime(int bits, mpz_ptr p, std::string* error);

// The CRT noise from one half per prime: a table where there is one (non-null
// comb), s^p otherwise; the two halves combined mod n^2.
bool CrtNoiseFrom(const PrivateKey& key, const NoiseComb* comb_p, const NoiseComb* comb_q,
                  mpz_ptr out, std::string* error);

}  // namespace internal
}  // namespace paillier
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_PAILLIER_PAILLIER_INTERNAL_H_
