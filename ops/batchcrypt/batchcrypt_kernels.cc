// Kernels of the BatchCrypt codec family (registrations in
// batchcrypt_ops.cc, math in batchcrypt.h). Both run over plaintexts on TF's
// CPU thread pool.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "ops/batchcrypt/batchcrypt.h"
#include "ops/common/tf_util.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::tstring;
namespace errors = ::tensorflow::errors;

namespace {

template <typename T>
class BatchcryptPackOp : public OpKernel {
 public:
  explicit BatchcryptPackOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("slot_bits", &w_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("slots_per_plaintext", &k_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("plaintext_bytes", &bytes_));
    const std::string bad = batchcrypt::CheckLayout(w_, k_, bytes_);
    OP_REQUIRES(ctx, bad.empty(), errors::InvalidArgument(bad));
  }

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const Tensor& in = ctx->input(0);
    const int64_t n = in.NumElements();
    const int64_t nct = (n + k_ - 1) / k_;
    const T* q = in.flat<T>().data();
    const ParallelFor pf = TfParallelFor(ctx);

    std::atomic<int64_t> first_bad{n};
    pf(nct, 4 * k_, [&](int64_t lo, int64_t hi) {
      const int64_t b = lo * k_, e = std::min(n, hi * k_);
      const int64_t i = batchcrypt::FirstOutOfRange(q + b, e - b, w_);
      if (i >= 0) {
        int64_t cur = first_bad.load();
        while (b + i < cur && !first_bad.compare_exchange_weak(cur, b + i)) {
        }
      }
    });
    const int64_t bad = first_bad.load();
    OP_REQUIRES(ctx, bad == n,
                errors::InvalidArgument(
                    "slot value ", static_cast<int64_t>(q[bad]), " at flat index ", bad,
                    " does not fit a signed ", w_, "-bit slot [-2^", w_ - 1, ", 2^", w_ - 1, ")"));

    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({nct}), &out));
    auto pts = out->flat<tstring>();
    pf(nct, 16 * k_ + 4 * bytes_, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) {
        pts(j).resize_uninitialized(bytes_);
        batchcrypt::PackPlaintext(q + j * k_, std::min(k_, n - j * k_), w_, k_, bytes_,
                                  reinterpret_cast<uint8_t*>(pts(j).mdata()));
      }
    });
  }

 private:
  int w_;
  int64_t k_, bytes_;
};

class BatchcryptUnpackOp : public OpKernel {
 public:
  explicit BatchcryptUnpackOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("slot_bits", &w_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("slots_per_plaintext", &k_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("count", &count_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("bound", &bound_));
    const std::string bad = batchcrypt::CheckUnpackLayout(w_, k_, bound_);
    OP_REQUIRES(ctx, bad.empty(), errors::InvalidArgument(bad));
    OP_REQUIRES(ctx, count_ >= 0, errors::InvalidArgument("count must be >= 0"));
  }

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const Tensor& in = ctx->input(0);
    OP_REQUIRES(ctx, in.dims() == 1,
                errors::InvalidArgument("plaintexts must be a vector, got shape ",
                                        in.shape().DebugString()));
    const int64_t nct = in.dim_size(0);
    OP_REQUIRES(ctx, nct == (count_ + k_ - 1) / k_,
                errors::InvalidArgument(count_, " values in plaintexts of ", k_,
                                        " slots need ", (count_ + k_ - 1) / k_,
                                        " plaintexts, got ", nct));
    Tensor *values, *pos, *neg, *mask;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({count_}), &values));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({}), &pos));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({}), &neg));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({count_}), &mask));
    auto pts = in.flat<tstring>();
    int64_t* v = values->flat<int64_t>().data();
    bool* m = mask->flat<bool>().data();
    std::atomic<int64_t> total_pos{0}, total_neg{0};
    TfParallelFor(ctx)(nct, 24 * k_, [&](int64_t lo, int64_t hi) {
      batchcrypt::OverflowCounts counts;
      for (int64_t j = lo; j < hi; ++j) {
        const int64_t b = j * k_;
        batchcrypt::UnpackPlaintext(reinterpret_cast<const uint8_t*>(pts(j).data()),
                                    pts(j).size(), w_, k_, std::min(k_, count_ - b), bound_,
                                    v + b, m + b, &counts);
      }
      total_pos += counts.positive;
      total_neg += counts.negative;
    });
    pos->scalar<int64_t>()() = total_pos.load();
    neg->scalar<int64_t>()() = total_neg.load();
  }

 private:
  int w_;
  int64_t k_, count_, bound_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(
    Name("TfPrivpy>BatchcryptPack").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
    BatchcryptPackOp<int32_t>);
REGISTER_KERNEL_BUILDER(
    Name("TfPrivpy>BatchcryptPack").Device(DEVICE_CPU).TypeConstraint<int64_t>("T"),
    BatchcryptPackOp<int64_t>);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BatchcryptUnpack").Device(DEVICE_CPU),
                        BatchcryptUnpackOp);

}  // namespace tf_privpy
