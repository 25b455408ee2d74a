// Kernel of TfPrivpy>Check (registration and rationale: check_ops.cc).
#include <string>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "ops/common/tf_util.h"

namespace tf_privpy {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;

// Elements of each data tensor shown in the error: nonces, lengths and
// shapes are short.
constexpr int kSummarize = 16;

class CheckOp : public OpKernel {
 public:
  explicit CheckOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("message", &message_));
  }

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const ::tensorflow::Tensor& cond = ctx->input(0);
    OP_REQUIRES(ctx, cond.NumElements() == 1,
                ::tensorflow::errors::InvalidArgument(
                    "TfPrivpy>Check: condition must be a scalar, got shape ",
                    cond.shape().DebugString()));
    if (!cond.flat<bool>()(0)) {
      std::string msg = message_;
      for (int i = 2; i < ctx->num_inputs(); ++i) {
        msg += " ";
        msg += ctx->input(i).SummarizeValue(kSummarize);
      }
      ctx->CtxFailure(::tensorflow::errors::InvalidArgument(msg));
      return;
    }
    ctx->set_output(0, ctx->input(1));  // a reference to the input's buffer
  }

 private:
  std::string message_;
};

class CheckEqualOp : public OpKernel {
 public:
  explicit CheckEqualOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("message", &message_));
  }

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const ::tensorflow::Tensor& own = ctx->input(0);
    const ::tensorflow::Tensor& received = ctx->input(1);
    bool equal = own.shape() == received.shape();
    if (equal) {
      const auto a = own.flat<int64_t>();
      const auto b = received.flat<int64_t>();
      for (int64_t i = 0; i < a.size() && equal; ++i) equal = a(i) == b(i);
    }
    if (!equal) {
      ctx->CtxFailure(::tensorflow::errors::InvalidArgument(
          message_, " ", own.SummarizeValue(kSummarize), " ",
          received.SummarizeValue(kSummarize)));
      return;
    }
    ctx->set_output(0, ctx->input(2));  // a reference to the input's buffer
  }

 private:
  std::string message_;
};

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>CheckEqual").Device(::tensorflow::DEVICE_CPU),
                        CheckEqualOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>Check").Device(::tensorflow::DEVICE_CPU), CheckOp);

}  // namespace
}  // namespace tf_privpy
