// Kernels of the garbled window-thresholds circuit (registrations in
// thresholds_ops.cc; circuit, outputs and stream layout in thresholds.h).
// The input labels come from GcLeadingOneEncode (the same layout).
#include <string>
#include <vector>

#include "ops/common/tf_util.h"
#include "ops/gc/gc_kernel_util.h"
#include "ops/gc/thresholds.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

namespace {

using gc_kernels::Blocks;
using gc_kernels::Bytes;

// The spec attributes (width, lo, window, points) every kernel reads.
class ThresholdsBase : public OpKernel {
 public:
  explicit ThresholdsBase(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::vector<int64_t> points;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("width", &spec_.width));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("lo", &spec_.lo));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("window", &spec_.window));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("points", &points));
    spec_.points.assign(points.begin(), points.end());
    const std::string err = gc::ThresholdsSpecError(spec_);
    OP_REQUIRES(ctx, err.empty(),
                errors::InvalidArgument("window-thresholds circuit: ", err,
                                        " (protocols/mpc/thresholds.py window() picks valid "
                                        "parameters)"));
    gates_ = gc::ThresholdsAndGates(spec_);
  }

 protected:
  int64_t outputs() const { return static_cast<int64_t>(spec_.points.size()); }
  gc::ThresholdsSpec spec_;
  int gates_ = 0;
};

class GarbleOp : public ThresholdsBase {
 public:
  using ThresholdsBase::ThresholdsBase;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    gc_kernels::ComputeGarble(
        ctx, gates_, outputs(), "GcThresholdsGarble",
        [this](const uint8_t* key, uint64_t nonce, const gc::BatchSlice& slice,
               gc::Block* tables, uint8_t* decode, const ParallelFor& pf, std::string* error) {
          return gc::ThresholdsGarble(key, nonce, slice, spec_, tables, decode, pf, error);
        });
  }
};

class EvaluateOp : public ThresholdsBase {
 public:
  using ThresholdsBase::ThresholdsBase;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    int64_t n = 0, first_index = 0;
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, gc_kernels::ReadEvaluateInputs(ctx, spec_.width, gates_, outputs(),
                                                       "these thresholds", &n, &nonce,
                                                       &first_index));
    const Tensor& tables = ctx->input(0);
    Tensor* bits;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, outputs()}), &bits));
    std::string error;
    OP_REQUIRES(ctx,
                gc::ThresholdsEvaluate(nonce, first_index, n, spec_, Blocks(tables),
                                       Bytes(ctx->input(1)), Blocks(ctx->input(2)),
                                       Blocks(ctx->input(3)), Bytes(bits), TfParallelFor(ctx),
                                       &error),
                errors::Internal("GcThresholdsEvaluate: ", error));
  }
};

class MaskOp : public ThresholdsBase {
 public:
  using ThresholdsBase::ThresholdsBase;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    gc_kernels::ComputeMask(ctx, outputs(), "GcThresholdsMask",
                            [this](const uint8_t* key, uint64_t nonce, int64_t n, uint8_t* m,
                                   const ParallelFor& pf, std::string* error) {
                              return gc::ThresholdsMask(key, nonce, n, spec_, m, pf, error);
                            });
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcThresholdsGarble").Device(DEVICE_CPU), GarbleOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcThresholdsEvaluate").Device(DEVICE_CPU), EvaluateOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcThresholdsMask").Device(DEVICE_CPU), MaskOp);

}  // namespace tf_privpy
