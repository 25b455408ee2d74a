// Kernels of the Paillier family that make keys and draw noise: key
// generation, encryption (public-key and the key holder's CRT variant),
// noise, encryption with given noise and re-randomization. Registrations:
// paillier_ops.cc; shared helpers: paillier_kernel_util.h; math: paillier.h.
#include <string>

#include "ops/paillier/paillier_kernel_util.h"

namespace tf_privpy {
namespace paillier_kernels {
namespace {

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

}  // namespace

using PublicEncryptInt = PaillierEncryptOp<int64_t, false>;
using PublicEncryptBig = PaillierEncryptOp<tstring, false>;
using CrtEncryptInt = PaillierEncryptOp<int64_t, true>;
using CrtEncryptBig = PaillierEncryptOp<tstring, true>;

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
TF_PRIVPY_PAILLIER_KERNEL("PaillierRerandomize", PaillierRerandomizeOp);

}  // namespace paillier_kernels
}  // namespace tf_privpy
