// Kernels of the garbled leading-one circuit (registrations in
// leading_one_ops.cc; circuit, outputs and stream layout in leading_one.h).
#include <string>
#include <vector>

#include "ops/common/tf_util.h"
#include "ops/gc/gc_kernel_util.h"
#include "ops/gc/leading_one.h"
#include "tensorflow/core/framework/op_kernel.h"
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
namespace errors = ::tensorflow::errors;

namespace {

using gc_kernels::Blocks;
using gc_kernels::Bytes;

// The spec attributes (width, magnitude, columns) every kernel of the family
// reads (magnitude false where the op has none).
class LeadingOneBase : public OpKernel {
 public:
  explicit LeadingOneBase(OpKernelConstruction* ctx, bool has_magnitude) : OpKernel(ctx) {
    std::vector<int> columns;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("width", &spec_.width));
    if (has_magnitude) OP_REQUIRES_OK(ctx, ctx->GetAttr("magnitude", &spec_.magnitude));
    if (ctx->HasAttr("columns")) OP_REQUIRES_OK(ctx, ctx->GetAttr("columns", &columns));
    spec_.columns = columns;
    const std::string err = gc::LeadingOneSpecError(spec_);
    OP_REQUIRES(ctx, err.empty(),
                errors::InvalidArgument("leading-one circuit: ", err, " (the circuit reads the "
                                        "low 64 bits of the shares: width in [3, 64])"));
  }

 protected:
  int gates() const { return gc::LeadingOneAndGates(spec_.width, spec_.magnitude); }
  int64_t outputs() const { return gc::LeadingOneOutputs(spec_); }
  gc::LeadingOneSpec spec_{0, false, {}};
};

class GarbleOp : public LeadingOneBase {
 public:
  explicit GarbleOp(OpKernelConstruction* ctx) : LeadingOneBase(ctx, true) {}
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    gc_kernels::ComputeGarble(
        ctx, gates(), outputs(), "GcLeadingOneGarble",
        [this](const uint8_t* key, uint64_t nonce, const gc::BatchSlice& slice,
               gc::Block* tables, uint8_t* decode, const ParallelFor& pf, std::string* error) {
          return gc::LeadingOneGarble(key, nonce, slice, spec_, tables, decode, pf, error);
        });
  }
};

class EncodeOp : public LeadingOneBase {
 public:
  explicit EncodeOp(OpKernelConstruction* ctx) : LeadingOneBase(ctx, false) {
    std::string role;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("role", &role));
    role_ = role == "a" ? gc::LoRole::kA : gc::LoRole::kB;
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key12", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(1), "nonce", &nonce));
    const Tensor& values = ctx->input(2);
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(values.shape()),
                errors::InvalidArgument("values must be a vector [n] of int64, got shape ",
                                        values.shape().DebugString()));
    gc::BatchSlice slice;
    slice.count = values.dim_size(0);
    OP_REQUIRES_OK(ctx, gc_kernels::ReadSlice(ctx, 3, false, &slice));
    Tensor* labels;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(0, TensorShape({slice.count, spec_.width, 2}), &labels));
    std::string error;
    OP_REQUIRES(ctx,
                gc::LeadingOneEncode(key, nonce, role_, spec_.width,
                                     values.flat<int64_t>().data(), slice, Blocks(labels),
                                     TfParallelFor(ctx), &error),
                errors::Internal("GcLeadingOneEncode: ", error));
  }

 private:
  gc::LoRole role_;
};

class EvaluateOp : public LeadingOneBase {
 public:
  explicit EvaluateOp(OpKernelConstruction* ctx) : LeadingOneBase(ctx, true) {}
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    int64_t n = 0, first_index = 0;
    uint64_t nonce = 0;
    const std::string what = "width " + std::to_string(spec_.width) + ", magnitude " +
                             std::to_string(spec_.magnitude) + ", " +
                             std::to_string(outputs()) + " columns";
    OP_REQUIRES_OK(ctx, gc_kernels::ReadEvaluateInputs(ctx, spec_.width, gates(), outputs(),
                                                       what.c_str(), &n, &nonce, &first_index));
    const Tensor& tables = ctx->input(0);
    const Tensor& decode = ctx->input(1);
    Tensor* bits;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, outputs()}), &bits));
    std::string error;
    OP_REQUIRES(ctx,
                gc::LeadingOneEvaluate(nonce, first_index, n, spec_, Blocks(tables),
                                       Bytes(decode), Blocks(ctx->input(2)),
                                       Blocks(ctx->input(3)), Bytes(bits), TfParallelFor(ctx),
                                       &error),
                errors::Internal("GcLeadingOneEvaluate: ", error));
  }
};

class MaskOp : public LeadingOneBase {
 public:
  explicit MaskOp(OpKernelConstruction* ctx) : LeadingOneBase(ctx, false) {}
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    gc_kernels::ComputeMask(ctx, outputs(), "GcLeadingOneMask",
                            [this](const uint8_t* key, uint64_t nonce, int64_t n, uint8_t* m,
                                   const ParallelFor& pf, std::string* error) {
                              return gc::LeadingOneMask(key, nonce, n, spec_, m, pf, error);
                            });
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneGarble").Device(DEVICE_CPU), GarbleOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneEncode").Device(DEVICE_CPU), EncodeOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneEvaluate").Device(DEVICE_CPU), EvaluateOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneMask").Device(DEVICE_CPU), MaskOp);

}  // namespace tf_privpy
