// Kernels of the Paillier family (registrations and the tensor representation
// in paillier_ops.cc; math in paillier.h). Every kernel runs over elements on
// the TF CPU thread pool with a per-element cost estimate, so millisecond
// exponentiations spread over all threads and microsecond products are
// batched. Invalid elements are InvalidArgument errors naming the first bad
// element; a kernel never returns a number computed from an invalid input.
#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/common/tf_util.h"
#include "ops/paillier/paillier.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_privpy {

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

namespace {

using paillier::Mpz;
using paillier::PrivateKey;
using paillier::PublicKey;

// Per-element cost estimates (CPU cycles) for the thread pool's sharding: an
// exponentiation is milliseconds (one element per task), a product modulo n^2
// a few microseconds.
// (About bits^3 / 256 cycles for a generic encryption, bits^2 / 256 for a
// product; only their order of magnitude matters.)
int64_t ExpCost(const PublicKey& k) { return int64_t{k.bits} * k.bits * k.bits / 256; }
int64_t MulCost(const PublicKey& k) { return int64_t{k.bits} * k.bits / 256; }

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

Status ReadScalarString(const Tensor& t, const char* what, std::string* out) {
  if (t.dtype() != ::tensorflow::DT_STRING || !TensorShapeUtils::IsScalar(t.shape()))
    return errors::InvalidArgument(what, " must be a string scalar (big-endian bytes), got ",
                                   ::tensorflow::DataTypeString(t.dtype()), " of shape ",
                                   t.shape().DebugString());
  const tstring& s = t.scalar<tstring>()();
  out->assign(s.data(), s.size());
  return ::tensorflow::OkStatus();
}

Status GetPublic(OpKernelContext* ctx, std::shared_ptr<const PublicKey>* key) {
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
Status GetFromPrivate(OpKernelContext* ctx, Make make, std::shared_ptr<const T>* out) {
  std::string n, p, q, error;
  TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(0), "n", &n));
  TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(1), "p", &p));
  TF_RETURN_IF_ERROR(ReadScalarString(ctx->input(2), "q", &q));
  *out = make(n, p, q, &error);
  if (!*out) return errors::InvalidArgument("private key: ", error);
  return ::tensorflow::OkStatus();
}

Status GetPrivate(OpKernelContext* ctx, std::shared_ptr<const PrivateKey>* key) {
  return GetFromPrivate(ctx, paillier::GetPrivateKey, key);
}

Status GetCrtNoise(OpKernelContext* ctx, std::shared_ptr<const paillier::CrtNoise>* noise) {
  return GetFromPrivate(ctx, paillier::GetCrtNoise, noise);
}

// A half of the CRT noise: s^p is a half-size exponentiation (ExpCost / 8),
// the fixed-base table about a fifth of that.
int64_t CrtNoiseCost(const paillier::CrtNoise& noise) {
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
void ForEachElement(OpKernelContext* ctx, const char* op, const TensorShape& shape, int64_t n,
                    int64_t cost, Body body) {
  ErrorSink sink(op, shape);
  TfParallelFor(ctx)(n, cost, [&](int64_t b, int64_t e) { body(b, e, &sink); });
  OP_REQUIRES(ctx, !sink.failed(), sink.status());
}

Status SameShape(const Tensor& a, const char* an, const Tensor& b, const char* bn) {
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
bool ReadPlain(const PublicKey& key, int64_t x, mpz_ptr m, std::string*) {
  paillier::PlaintextFromInt64(key, x, m);
  return true;
}
bool ReadPlain(const PublicKey& key, const tstring& s, mpz_ptr m, std::string* error) {
  return paillier::ReadPlaintextBytes(key, s.data(), s.size(), m, error);
}
// A multiplier k: int64 as the signed integer itself; string as [0, n).
bool ReadFactor(const PublicKey&, int64_t x, mpz_ptr k, std::string*) {
  mpz_set_si(k, x);
  return true;
}
bool ReadFactor(const PublicKey& key, const tstring& s, mpz_ptr k, std::string* error) {
  return paillier::ReadPlaintextBytes(key, s.data(), s.size(), k, error);
}

bool ReadCipher(const PublicKey& key, const tstring& s, mpz_ptr c, std::string* error) {
  return paillier::ReadCiphertext(key, s.data(), s.size(), c, error);
}

void WriteBig(mpz_srcptr x, size_t width, tstring* out) {
  out->resize_uninitialized(width);
  paillier::WriteFixed(x, width, out->mdata());
}

// Checks with one gcd per shard that the ciphertexts in [b, e) of `flat` are
// units mod n (they already passed ReadCipher); reports the first that is not.
template <typename Flat>
void CheckUnits(const PublicKey& key, const Flat& flat, int64_t b, int64_t e,
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

class PaillierKeygenOp : public OpKernel {
 public:
  explicit PaillierKeygenOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("bits", &bits_));
    OP_REQUIRES(ctx,
                bits_ % 2 == 0 && bits_ >= paillier::kMinModulusBits &&
                    bits_ <= paillier::kMaxModulusBits,
                errors::InvalidArgument("bits must be even and in [",
                                        paillier::kMinModulusBits, ", ",
                                        paillier::kMaxModulusBits, "], got ", bits_));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    std::string n, p, q, error;
    OP_REQUIRES(ctx, paillier::GenerateKey(bits_, TfParallelFor(ctx), &n, &p, &q, &error),
                errors::Unavailable("PaillierKeygen: ", error));
    const std::string* parts[3] = {&n, &p, &q};
    for (int i = 0; i < 3; ++i) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, TensorShape({}), &out));
      out->scalar<tstring>()() = *parts[i];
    }
  }

 private:
  int bits_;
};

// PaillierEncrypt (kCrt = false: inputs n, plaintext) and PaillierEncryptCrt
// (kCrt = true: inputs n, p, q, plaintext).
template <typename T, bool kCrt>
class PaillierEncryptOp : public OpKernel {
 public:
  explicit PaillierEncryptOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, noise_.Init(ctx));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    NoiseSource<kCrt> noise_maker = noise_;
    OP_REQUIRES_OK(ctx, noise_maker.Prepare(ctx));
    const PublicKey* pk = &noise_maker.key();
    const Tensor& plain = ctx->input(noise_maker.first_data_input());
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, plain.shape(), &out));
    const auto in = plain.flat<T>();
    auto res = out->flat<tstring>();
    ForEachElement(ctx, kCrt ? "PaillierEncryptCrt" : "PaillierEncrypt", plain.shape(),
                   in.size(), noise_maker.Cost(), [&](int64_t b, int64_t e, ErrorSink* sink) {
      Mpz m(true), noise(true), c;
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        if (!ReadPlain(*pk, in(i), m, &error)) return sink->Report(i, "plaintext", error);
        if (!noise_maker.Make(noise, &error)) return sink->Report(i, "noise for", error);
        paillier::EncryptWithNoise(*pk, m, noise, c);
        WriteBig(c, pk->c_bytes, &res(i));
      }
    });
  }

 private:
  NoiseSource<kCrt> noise_;  // the public-key method comes from the attr
};

// PaillierNoise (n, count) and PaillierNoiseCrt (n, p, q, count).
template <bool kCrt>
class PaillierNoiseOp : public OpKernel {
 public:
  explicit PaillierNoiseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, noise_.Init(ctx));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    NoiseSource<kCrt> noise_maker = noise_;
    OP_REQUIRES_OK(ctx, noise_maker.Prepare(ctx));
    const PublicKey* pk = &noise_maker.key();
    const Tensor& count_t = ctx->input(noise_maker.first_data_input());
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(count_t.shape()),
                errors::InvalidArgument("count must be an int64 scalar, got shape ",
                                        count_t.shape().DebugString()));
    const int64_t count = count_t.scalar<int64_t>()();
    OP_REQUIRES(ctx, count >= 0 && count <= (int64_t{1} << 32),
                errors::InvalidArgument("count must be in [0, 2^32], got ", count));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({count}), &out));
    auto res = out->flat<tstring>();
    ForEachElement(ctx, kCrt ? "PaillierNoiseCrt" : "PaillierNoise", out->shape(), count,
                   noise_maker.Cost(), [&](int64_t b, int64_t e, ErrorSink* sink) {
      Mpz noise(true);
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        if (!noise_maker.Make(noise, &error)) return sink->Report(i, "noise", error);
        WriteBig(noise, pk->c_bytes, &res(i));
      }
    });
  }

 private:
  NoiseSource<kCrt> noise_;
};

template <typename T>
class PaillierEncryptWithNoiseOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    TwoOperands io;
    OP_REQUIRES_OK(ctx, io.Prepare(ctx, "plaintext", "noise"));
    const PublicKey* pk = io.pk.get();
    const auto in = io.a->flat<T>();
    const auto noise = io.b->flat<tstring>();
    auto res = io.out->flat<tstring>();
    ForEachElement(ctx, "PaillierEncryptWithNoise", io.a->shape(), in.size(), 2 * MulCost(*pk),
                   [&](int64_t b, int64_t e, ErrorSink* sink) {
      Mpz m(true), r(true), c;
      paillier::UnitChecker units(*pk);
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        if (!ReadPlain(*pk, in(i), m, &error)) return sink->Report(i, "plaintext", error);
        if (!ReadCipher(*pk, noise(i), r, &error)) return sink->Report(i, "noise", error);
        units.Add(r);
        paillier::EncryptWithNoise(*pk, m, r, c);
        WriteBig(c, pk->c_bytes, &res(i));
      }
      CheckUnits(*pk, noise, b, e, &units, "noise", sink);
    });
  }
};

template <typename T>
class PaillierDecryptOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    std::shared_ptr<const PrivateKey> sk;
    OP_REQUIRES_OK(ctx, GetPrivate(ctx, &sk));
    const PublicKey& pk = sk->pub;
    const Tensor& cipher = ctx->input(3);
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, cipher.shape(), &out));
    const auto in = cipher.flat<tstring>();
    auto res = out->flat<T>();
    ForEachElement(ctx, "PaillierDecrypt", cipher.shape(), in.size(), ExpCost(pk) / 2,
                   [&](int64_t b, int64_t e, ErrorSink* sink) {
      Mpz c, m(true);
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        if (!ReadCipher(pk, in(i), c, &error) || !paillier::Decrypt(*sk, c, m, &error))
          return sink->Report(i, "ciphertext", error);
        if (!Store(pk, m, &res(i)))
          return sink->Report(i, "decrypted",
                              "does not fit in int64 (|value| >= 2^63); decrypt with "
                              "out_type=tf.string to get the full integer in [0, n)");
      }
    });
  }

 private:
  static bool Store(const PublicKey& pk, mpz_srcptr m, int64_t* out) {
    return paillier::PlaintextToInt64(pk, m, out);
  }
  static bool Store(const PublicKey& pk, mpz_srcptr m, tstring* out) {
    WriteBig(m, pk.n_bytes, out);
    return true;
  }
};

class PaillierAddOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    TwoOperands io;
    OP_REQUIRES_OK(ctx, io.Prepare(ctx, "a", "b"));
    const PublicKey* pk = io.pk.get();
    const auto a = io.a->flat<tstring>();
    const auto bb = io.b->flat<tstring>();
    auto res = io.out->flat<tstring>();
    ForEachElement(ctx, "PaillierAdd", io.a->shape(), a.size(), 2 * MulCost(*pk),
                   [&](int64_t b, int64_t e, ErrorSink* sink) {
      Mpz x, y, z;
      // The product of a and b is a unit iff both are: checking the sums
      // checks the inputs at half the cost.
      paillier::UnitChecker units(*pk);
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        if (!ReadCipher(*pk, a(i), x, &error)) return sink->Report(i, "a", error);
        if (!ReadCipher(*pk, bb(i), y, &error)) return sink->Report(i, "b", error);
        paillier::Add(*pk, x, y, z);
        units.Add(z);
        WriteBig(z, pk->c_bytes, &res(i));
      }
      if (units.AllUnits()) return;
      CheckUnits(*pk, a, b, e, &units, "a", sink);  // units is known bad: scans
      CheckUnits(*pk, bb, b, e, &units, "b", sink);
    });
  }
};

template <typename T>
class PaillierMulPlainOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    TwoOperands io;
    OP_REQUIRES_OK(ctx, io.Prepare(ctx, "ciphertext", "k"));
    const PublicKey* pk = io.pk.get();
    const auto cin = io.a->flat<tstring>();
    const auto kin = io.b->flat<T>();
    auto res = io.out->flat<tstring>();
    // int64 factors cost ~64 squarings, big-integer ones a full exponentiation.
    const int64_t cost = std::is_same<T, int64_t>::value ? 64 * MulCost(*pk) : ExpCost(*pk);
    ForEachElement(ctx, "PaillierMulPlain", io.a->shape(), cin.size(), cost,
                   [&](int64_t b, int64_t e, ErrorSink* sink) {
      Mpz c, k(true), z;
      paillier::UnitChecker units(*pk);
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        if (!ReadCipher(*pk, cin(i), c, &error)) return sink->Report(i, "ciphertext", error);
        if (!ReadFactor(*pk, kin(i), k, &error)) return sink->Report(i, "k", error);
        units.Add(c);
        if (!paillier::MulPlain(*pk, c, k, z, &error))
          return sink->Report(i, "ciphertext", error);
        WriteBig(z, pk->c_bytes, &res(i));
      }
      CheckUnits(*pk, cin, b, e, &units, "ciphertext", sink);
    });
  }
};

class PaillierRerandomizeOp : public OpKernel {
 public:
  explicit PaillierRerandomizeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, noise_.Init(ctx));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    PublicNoise noise_maker = noise_;
    OP_REQUIRES_OK(ctx, noise_maker.Prepare(ctx));
    const PublicKey* pk = &noise_maker.key();
    const Tensor& c_t = ctx->input(1);
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, c_t.shape(), &out));
    const auto cin = c_t.flat<tstring>();
    auto res = out->flat<tstring>();
    ForEachElement(ctx, "PaillierRerandomize", c_t.shape(), cin.size(), noise_maker.Cost(),
                   [&](int64_t b, int64_t e, ErrorSink* sink) {
      Mpz c, noise(true), z;
      paillier::UnitChecker units(*pk);
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        if (!ReadCipher(*pk, cin(i), c, &error)) return sink->Report(i, "ciphertext", error);
        units.Add(c);
        if (!noise_maker.Make(noise, &error)) return sink->Report(i, "noise for", error);
        paillier::Add(*pk, c, noise, z);
        WriteBig(z, pk->c_bytes, &res(i));
      }
      CheckUnits(*pk, cin, b, e, &units, "ciphertext", sink);
    });
  }

 private:
  PublicNoise noise_;
};

class PaillierReduceSumOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    std::shared_ptr<const PublicKey> pk;
    OP_REQUIRES_OK(ctx, GetPublic(ctx, &pk));
    const Tensor& c_t = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsMatrix(c_t.shape()),
                errors::InvalidArgument("ciphertext must be a matrix [outer, inner], got ",
                                        c_t.shape().DebugString()));
    const int64_t outer = c_t.dim_size(0), inner = c_t.dim_size(1);
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({outer}), &out));
    const auto cin = c_t.flat<tstring>();
    auto res = out->flat<tstring>();
    // Rows are cut into chunks so that a few long rows still use every
    // thread: about 64 units in all, chunks of at least 8 elements.
    const int64_t chunks =
        std::max<int64_t>(1, std::min<int64_t>((64 + outer - 1) / std::max<int64_t>(outer, 1),
                                               inner / 8));
    const int64_t chunk_len = (inner + chunks - 1) / chunks;
    std::vector<Mpz> partial(outer * chunks);
    ErrorSink sink("PaillierReduceSum", c_t.shape());
    TfParallelFor(ctx)(outer * chunks, chunk_len * MulCost(*pk), [&](int64_t b, int64_t e) {
      Mpz c;
      std::string error;
      for (int64_t u = b; u < e; ++u) {
        const int64_t row = u / chunks;
        const int64_t lo = row * inner + (u % chunks) * chunk_len;
        const int64_t hi = row * inner + std::min(inner, (u % chunks + 1) * chunk_len);
        mpz_ptr acc = partial[u];
        mpz_set_ui(acc, 1);
        for (int64_t i = lo; i < hi; ++i) {
          if (!ReadCipher(*pk, cin(i), c, &error)) return sink.Report(i, "ciphertext", error);
          paillier::Add(*pk, acc, c, acc);
        }
        if (lo < hi && !paillier::IsUnit(*pk, acc)) {  // some factor is not a unit
          paillier::UnitChecker bad(*pk);
          bad.Add(pk->n);  // never a unit: makes CheckUnits scan
          CheckUnits(*pk, cin, lo, hi, &bad, "ciphertext", &sink);
        }
      }
    });
    OP_REQUIRES(ctx, !sink.failed(), sink.status());
    for (int64_t row = 0; row < outer; ++row) {
      mpz_ptr acc = partial[row * chunks];
      for (int64_t k = 1; k < chunks; ++k) paillier::Add(*pk, acc, partial[row * chunks + k], acc);
      WriteBig(acc, pk->c_bytes, &res(row));
    }
  }
};

class PaillierValidateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    std::shared_ptr<const PublicKey> pk;
    OP_REQUIRES_OK(ctx, GetPublic(ctx, &pk));
    const Tensor& c_t = ctx->input(1);
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, c_t.shape(), &out));
    const auto cin = c_t.flat<tstring>();
    auto res = out->flat<bool>();
    TfParallelFor(ctx)(cin.size(), MulCost(*pk), [&](int64_t b, int64_t e) {
      Mpz c;
      paillier::UnitChecker units(*pk);
      std::string error;
      for (int64_t i = b; i < e; ++i) {
        res(i) = ReadCipher(*pk, cin(i), c, &error);
        if (res(i)) units.Add(c);
      }
      if (units.AllUnits()) return;
      for (int64_t i = b; i < e; ++i) {  // rare: find the non-units
        if (!res(i)) continue;
        mpz_import(c, cin(i).size(), 1, 1, 1, 0, cin(i).data());
        res(i) = paillier::IsUnit(*pk, c);
      }
    });
  }
};

}  // namespace

using PublicEncryptInt = PaillierEncryptOp<int64_t, false>;
using PublicEncryptBig = PaillierEncryptOp<tstring, false>;
using CrtEncryptInt = PaillierEncryptOp<int64_t, true>;
using CrtEncryptBig = PaillierEncryptOp<tstring, true>;

#define TF_PRIVPY_PAILLIER_KERNEL(NAME, OP) \
  REGISTER_KERNEL_BUILDER(Name("TfPrivpy>" NAME).Device(DEVICE_CPU), OP)
#define TF_PRIVPY_PAILLIER_KERNEL_T(NAME, ATTR, T, OP) \
  REGISTER_KERNEL_BUILDER(                             \
      Name("TfPrivpy>" NAME).Device(DEVICE_CPU).TypeConstraint<T>(ATTR), OP)

TF_PRIVPY_PAILLIER_KERNEL("PaillierKeygen", PaillierKeygenOp);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierEncrypt", "T", int64_t, PublicEncryptInt);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierEncrypt", "T", tstring, PublicEncryptBig);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierEncryptCrt", "T", int64_t, CrtEncryptInt);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierEncryptCrt", "T", tstring, CrtEncryptBig);
TF_PRIVPY_PAILLIER_KERNEL("PaillierNoise", PaillierNoiseOp<false>);
TF_PRIVPY_PAILLIER_KERNEL("PaillierNoiseCrt", PaillierNoiseOp<true>);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierEncryptWithNoise", "T", int64_t,
                            PaillierEncryptWithNoiseOp<int64_t>);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierEncryptWithNoise", "T", tstring,
                            PaillierEncryptWithNoiseOp<tstring>);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierDecrypt", "out_type", int64_t, PaillierDecryptOp<int64_t>);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierDecrypt", "out_type", tstring, PaillierDecryptOp<tstring>);
TF_PRIVPY_PAILLIER_KERNEL("PaillierAdd", PaillierAddOp);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierMulPlain", "T", int64_t, PaillierMulPlainOp<int64_t>);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierMulPlain", "T", tstring, PaillierMulPlainOp<tstring>);
TF_PRIVPY_PAILLIER_KERNEL("PaillierRerandomize", PaillierRerandomizeOp);
TF_PRIVPY_PAILLIER_KERNEL("PaillierReduceSum", PaillierReduceSumOp);
TF_PRIVPY_PAILLIER_KERNEL("PaillierValidate", PaillierValidateOp);

#undef TF_PRIVPY_PAILLIER_KERNEL_T
#undef TF_PRIVPY_PAILLIER_KERNEL

}  // namespace tf_privpy
