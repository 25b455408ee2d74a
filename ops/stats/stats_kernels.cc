// Kernel of TfPrivpy>CountMessage (registration and rationale: stats_ops.cc).
#include <cstdint>

#include "ops/common/tf_util.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/types.h"

namespace tf_privpy {
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
namespace errors = ::tensorflow::errors;

// The bytes a tensor takes on the wire: strings by their lengths.
int64_t WireBytes(const Tensor& t) {
  if (t.dtype() == ::tensorflow::DT_STRING) {
    int64_t n = 0;
    const auto flat = t.flat<::tensorflow::tstring>();
    for (int64_t i = 0; i < flat.size(); ++i) n += flat(i).size();
    return n;
  }
  return t.NumElements() * ::tensorflow::DataTypeSize(t.dtype());
}

class CountMessageOp : public OpKernel {
 public:
  explicit CountMessageOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("static_bytes", &static_bytes_));
  }

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    int64_t bytes = static_bytes_;
    for (int i = 1; i < ctx->num_inputs(); ++i) bytes += WireBytes(ctx->input(i));
    ::tensorflow::core::RefCountPtr<::tensorflow::Var> var;
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &var));
    ::tensorflow::mutex_lock l(*var->mu());
    const Tensor& old = *var->tensor();
    OP_REQUIRES(ctx,
                var->is_initialized && old.dtype() == ::tensorflow::DT_INT64 &&
                    old.NumElements() == 2,
                errors::InvalidArgument("CountMessage: counter must hold int64[2], got ",
                                        ::tensorflow::DataTypeString(old.dtype()), " ",
                                        old.shape().DebugString()));
    // Replace rather than update in place: a reader may alias the old buffer.
    Tensor next(::tensorflow::DT_INT64, old.shape());
    next.flat<int64_t>()(0) = old.flat<int64_t>()(0) + 1;
    next.flat<int64_t>()(1) = old.flat<int64_t>()(1) + bytes;
    *var->tensor() = next;
  }

 private:
  int64_t static_bytes_;
};

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>CountMessage").Device(::tensorflow::DEVICE_CPU),
                        CountMessageOp);

}  // namespace
}  // namespace tf_privpy
