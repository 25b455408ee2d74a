// Helpers shared by the Paillier kernels (paillier_encrypt_kernels.cc: key
// generation, encryption, noise; paillier_arith_kernels.cc: homomorphic
// arithmetic and validation; paillier_decrypt_kernels.cc: decryption):
// reading keys and big integers out of tensors, the noise sources, the
// per-element thread-pool loop and its error sink. Op registrations and the
// tensor representation: paillier_ops.cc; math: paillier.h.
//
// Every kernel runs over elements on the TF CPU thread pool with a
// per-element cost estimate, so millisecond exponentiations spread over all
// threads and microsecond products are batched. Invalid elements are
// InvalidArgument errors naming the first bad element; a kernel never returns
// a number computed from an invalid input.
#ifndef TF_PRIVPY_OPS_PAILLIER_PAILLIER_KERNEL_UTIL_H_
#define TF_PRIVPY_OPS_PAILLIER_PAILLIER_KERNEL_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/common/tf_util.h"
#include "ops/paillier/paillier.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_privpy {
// A named namespace (a header must not open an anonymous one): the kernel
// files share one definition of each helper.
namespace paillier_kernels {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::TensorShapeUtils;
using ::tensorflow::tstring;
namespace errors = ::tensorflow::errors;

using paillier::Mpz;
using paillier::PrivateKey;
using paillier::PublicKey;

// Per-element cost estimates (CPU cycles) for the thread pool's sharding: an
// exponentiation is milliseconds (one element per task), a product modulo n^2
// a few microseconds.
// (About bits^3 / 256 cycles for a generic encryption, bits^2 / 256 for a
// product; only their order of magnitude matters.)
inline int64_t ExpCost(const PublicKey& k) {
  return int64_t{k.bits} * k.bits * k.bits / 256;
}
inline int64_t MulCost(const PublicKey& k) { return int64_t{k.bits} * k.bits / 256; }

// Collects the first (lowest-index) invalid element over all shards.
class ErrorSink {
 public:
  ErrorSink(const char* op, const TensorShape& shape) : op_(op), shape_(shape) {}
  void Report(int64_t index, const char* what, const std::string& msg) {
    std::lock_guard<std::mutex> l(mu_);
    if (index >= first_) return;
    first_ = index;
    msg_ = std::string(what) + " element " + std::to_string(index) + Where(index) + " " + msg;
  }
  bool failed() {
    std::lock_guard<std::mutex> l(mu_);
    return first_ != kNone;
  }
  Status status() {
    std::lock_guard<std::mutex> l(mu_);
    return errors::InvalidArgument(op_, ": ", msg_);
  }

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::string Where(int64_t index) const {  // " (index [i, j])" for rank > 1
    if (shape_.dims() < 2) return "";
    std::vector<int64_t> idx(shape_.dims());
    for (int d = shape_.dims() - 1; d >= 0; --d) {
      const int64_t size = std::max<int64_t>(1, shape_.dim_size(d));
      idx[d] = index % size;
      index /= size;
    }
    std::string s = " (index [";
    for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
    return s + "])";
  }
  const char* op_;
  TensorShape shape_;
  std::mutex mu_;
  int64_t first_ = kNone;
  std::string msg_;
};

inline Status ReadScalarString(const Tensor& t, const char* what, std::string* out) {
  if (t.dtype() != ::tensorflow::DT_STRING || !TensorShapeUtils::IsScalar(t.shape()))
    return errors::InvalidArgument(what, " must be a string scalar (big-endian bytes), got ",
                                   ::tensorflow::DataTypeString(t.dtype()), " of shape ",
                                   t.shape().DebugString());
  const tstring& s = t.scalar<tstring>()();
  out->assign(s.data(), s.size());
  return ::tensorflow::OkStatus();
}

inline Status GetPublic(OpKernelContext* ctx, std::shared_ptr<const PublicKey>* key) {
  std::string n, error;
  TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(0), "n", &n));
  *key = paillier::GetPublicKey(n, &error);
  if (!*key) return errors::InvalidArgument("public key: ", error);
  return ::tensorflow::OkStatus();
}

// Reads inputs 0, 1, 2 = n, p, q and makes a per-key object of them with
// make(n, p, q, &error): the private key, or the key holder's noise
// (fixed-base tables where p - 1 and q - 1 factor, s^p otherwise).
template <typename T, typename Make>
inline Status GetFromPrivate(OpKernelContext* ctx, Make make,
                             std::shared_ptr<const T>* out) {
  std::string n, p, q, error;
  TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(0), "n", &n));
  TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(1), "p", &p));
  TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(2), "q", &q));
  *out = make(n, p, q, &error);
  if (!*out) return errors::InvalidArgument("private key: ", error);
  return ::tensorflow::OkStatus();
}

inline Status GetPrivate(OpKernelContext* ctx, std::shared_ptr<const PrivateKey>* key) {
  return GetFromPrivate(ctx, paillier::GetPrivateKey, key);
}

inline Status GetCrtNoise(OpKernelContext* ctx,
                          std::shared_ptr<const paillier::CrtNoise>* noise) {
  return GetFromPrivate(ctx, paillier::GetCrtNoise, noise);
}

// A half of the CRT noise: s^p is a half-size exponentiation (ExpCost / 8),
// the fixed-base table about a fifth of that.
inline int64_t CrtNoiseCost(const paillier::CrtNoise& noise) {
  const int64_t half = ExpCost(noise.key->pub) / 8;
  return (2 - noise.tables()) * half + noise.tables() * half / 5;
}

// The noise of the public-key ops: generic r^n, or DJN's fixed base.
class PublicNoise {
 public:
  Status Init(OpKernelConstruction* ctx) {
    std::string method;
    TF_RETURN_IF_ERROR(ctx->GetAttr("method", &method));
    djn_ = method == "djn";
    return ::tensorflow::OkStatus();
  }
  // Reads n (input 0) and, for DJN, the per-key table.
  Status Prepare(OpKernelContext* ctx) {
    TF_RETURN_IF_ERROR(GetPublic(ctx, &pk_));
    if (!djn_) return ::tensorflow::OkStatus();
    std::string n, error;
    TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(0), "n", &n));
    table_ = paillier::GetDjnTable(n, &error);
    if (!table_) return errors::InvalidArgument("public key: ", error);
    return ::tensorflow::OkStatus();
  }
  const PublicKey& key() const { return *pk_; }
  int64_t Cost() const { return djn_ ? ExpCost(*pk_) / 6 : ExpCost(*pk_); }
  bool Make(mpz_ptr out, std::string* error) const {
    return djn_ ? paillier::NoiseDjn(*table_, out, error)
                : paillier::NoiseGeneric(*pk_, out, error);
  }

 private:
  bool djn_ = false;
  std::shared_ptr<const PublicKey> pk_;
  std::shared_ptr<const paillier::DjnTable> table_;
};

// The noise of an encrypting op: the key holder's CRT noise (kCrt: inputs
// n, p, q) or the public-key noise of the method attr (input n).
template <bool kCrt>
class NoiseSource {
 public:
  Status Init(OpKernelConstruction* ctx) {
    return kCrt ? ::tensorflow::OkStatus() : public_.Init(ctx);
  }
  Status Prepare(OpKernelContext* ctx) {
    if (!kCrt) return public_.Prepare(ctx);
    TF_RETURN_IF_ERROR(GetCrtNoise(ctx, &crt_));
    return ::tensorflow::OkStatus();
  }
  const PublicKey& key() const { return kCrt ? crt_->key->pub : public_.key(); }
  int64_t Cost() const { return kCrt ? CrtNoiseCost(*crt_) : public_.Cost(); }
  bool Make(mpz_ptr out, std::string* error) const {
    return kCrt ? paillier::NoiseCrt(*crt_, out, error) : public_.Make(out, error);
  }
  int first_data_input() const { return kCrt ? 3 : 1; }

 private:
  PublicNoise public_;
  std::shared_ptr<const paillier::CrtNoise> crt_;
};

// Runs body(b, e, &sink) over [0, n) on TF's pool with a per-element cost,
// then fails the op with the first element the body reported.
template <typename Body>
inline void ForEachElement(OpKernelContext* ctx, const char* op, const TensorShape& shape,
                           int64_t n, int64_t cost, Body body) {
  ErrorSink sink(op, shape);
  TfParallelFor(ctx)(n, cost, [&](int64_t b, int64_t e) { body(b, e, &sink); });
  OP_REQUIRES(ctx, !sink.failed(), sink.status());
}

inline Status SameShape(const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  if (a.shape() == b.shape()) return ::tensorflow::OkStatus();
  return errors::InvalidArgument(an, " and ", bn, " must have the same shape, got ",
                                 a.shape().DebugString(), " and ", b.shape().DebugString(),
                                 " (broadcast them first)");
}

// The start of the elementwise public-key ops with two operands: the key
// (input 0), two tensors of the same shape (inputs 1, 2) and the ciphertext
// output of that shape.
struct TwoOperands {
  std::shared_ptr<const PublicKey> pk;
  const Tensor* a = nullptr;
  const Tensor* b = nullptr;
  Tensor* out = nullptr;
  Status Prepare(OpKernelContext* ctx, const char* a_name, const char* b_name) {
    TF_RETURN_IF_ERROR(GetPublic(ctx, &pk));
    a = &ctx->input(1);
    b = &ctx->input(2);
    TF_RETURN_IF_ERROR(SameShape(*a, a_name, *b, b_name));
    return ctx->allocate_output(0, a->shape(), &out);
  }
};

// Reads a plaintext element (T = int64: signed; T = string: unsigned < n).
inline bool ReadPlain(const PublicKey& key, int64_t x, mpz_ptr m, std::string*) {
  paillier::PlaintextFromInt64(key, x, m);
  return true;
}
inline bool ReadPlain(const PublicKey& key, const tstring& s, mpz_ptr m,
                      std::string* error) {
  return paillier::ReadPlaintextBytes(key, s.data(), s.size(), m, error);
}
// A multiplier k: int64 as the signed integer itself; string as [0, n).
inline bool ReadFactor(const PublicKey&, int64_t x, mpz_ptr k, std::string*) {
  mpz_set_si(k, x);
  return true;
}
inline bool ReadFactor(const PublicKey& key, const tstring& s, mpz_ptr k,
                       std::string* error) {
  return paillier::ReadPlaintextBytes(key, s.data(), s.size(), k, error);
}

inline bool ReadCipher(const PublicKey& key, const tstring& s, mpz_ptr c,
                       std::string* error) {
  return paillier::ReadCiphertext(key, s.data(), s.size(), c, error);
}

inline void WriteBig(mpz_srcptr x, size_t width, tstring* out) {
  out->resize_uninitialized(width);
  paillier::WriteFixed(x, width, out->mdata());
}

// Checks with one gcd per shard that the ciphertexts in [b, e) of `flat` are
// units mod n (they already passed ReadCipher); reports the first that is not.
template <typename Flat>
inline void CheckUnits(const PublicKey& key, const Flat& flat, int64_t b, int64_t e,
                       paillier::UnitChecker* checker, const char* what, ErrorSink* sink) {
  if (checker->AllUnits()) return;
  Mpz c;
  for (int64_t i = b; i < e; ++i) {
    mpz_import(c, flat(i).size(), 1, 1, 1, 0, flat(i).data());
    if (!paillier::IsUnit(key, c)) {
      sink->Report(i, what, "shares a factor with n (not in Z*_{n^2}): not a ciphertext "
                            "of this key");
      return;
    }
  }
}

}  // namespace paillier_kernels
}  // namespace tf_privpy

// Kernel registration on the CPU, untyped and with one type constraint.
#define TF_PRIVPY_PAILLIER_KERNEL(NAME, OP) \
  REGISTER_KERNEL_BUILDER(Name("TfPrivpy>" NAME).Device(DEVICE_CPU), OP)
#define TF_PRIVPY_PAILLIER_KERNEL_T(NAME, ATTR, T, OP) \
  REGISTER_KERNEL_BUILDER(                             \
      Name("TfPrivpy>" NAME).Device(DEVICE_CPU).TypeConstraint<T>(ATTR), OP)

#endif  // TF_PRIVPY_OPS_PAILLIER_PAILLIER_KERNEL_UTIL_H_
