// The decryption kernel of the Paillier family (the only kernel that reads
// the private key besides the CRT variants of encryption and noise).
// Registrations: paillier_ops.cc; shared helpers: paillier_kernel_util.h;
// math: paillier.h.
#include <memory>
#include <string>

#include "ops/paillier/paillier_kernel_util.h"

namespace tf_privpy {
namespace paillier_kernels {
namespace {

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

}  // namespace

TF_PRIVPY_PAILLIER_KERNEL_T("PaillierDecrypt", "out_type", int64_t, PaillierDecryptOp<int64_t>);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierDecrypt", "out_type", tstring, PaillierDecryptOp<tstring>);

}  // namespace paillier_kernels
}  // namespace tf_privpy
