// Kernels of the Paillier family that compute on ciphertexts with the public
// key only: homomorphic addition, multiplication by a plaintext, row sums
// and validation. Registrations: paillier_ops.cc; shared helpers:
// paillier_kernel_util.h; math: paillier.h.
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/paillier/paillier_kernel_util.h"

namespace tf_privpy {
namespace paillier_kernels {
namespace {

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

TF_PRIVPY_PAILLIER_KERNEL("PaillierAdd", PaillierAddOp);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierMulPlain", "T", int64_t, PaillierMulPlainOp<int64_t>);
TF_PRIVPY_PAILLIER_KERNEL_T("PaillierMulPlain", "T", tstring, PaillierMulPlainOp<tstring>);
TF_PRIVPY_PAILLIER_KERNEL("PaillierReduceSum", PaillierReduceSumOp);
TF_PRIVPY_PAILLIER_KERNEL("PaillierValidate", PaillierValidateOp);

}  // namespace paillier_kernels
}  // namespace tf_privpy
