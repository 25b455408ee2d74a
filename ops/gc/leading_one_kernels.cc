// Kernels of the garbled leading-one circuit (registrations in
// leading_one_ops.cc; circuit, outputs and stream layout in leading_one.h).
#include <string>

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

// The width and magnitude attributes every kernel of the family reads.
class LeadingOneBase : public OpKernel {
 public:
  explicit LeadingOneBase(OpKernelConstruction* ctx, bool has_magnitude) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("width", &width_));
    OP_REQUIRES(ctx, width_ >= gc::kLeadingOneMinWidth && width_ <= gc::kLeadingOneMaxWidth,
                errors::InvalidArgument("width must be in [3, 64] (the circuit reads the "
                                        "low 64 bits of the shares), got ", width_));
    if (has_magnitude) OP_REQUIRES_OK(ctx, ctx->GetAttr("magnitude", &magnitude_));
  }

 protected:
  int gates() const { return gc::LeadingOneAndGates(width_, magnitude_); }
  int width_ = 0;
  bool magnitude_ = false;
};

class GarbleOp : public LeadingOneBase {
 public:
  explicit GarbleOp(OpKernelConstruction* ctx) : LeadingOneBase(ctx, true) {}
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    gc_kernels::ComputeGarble(
        ctx, gates(), width_, "GcLeadingOneGarble",
        [this](const uint8_t* key, uint64_t nonce, int64_t n, gc::Block* tables,
               uint8_t* decode, const ParallelFor& pf, std::string* error) {
          return gc::LeadingOneGarble(key, nonce, n, width_, magnitude_, tables, decode, pf,
                                      error);
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
    const int64_t n = values.dim_size(0);
    OP_REQUIRES(ctx, n <= gc::kMaxComparisons,
                errors::InvalidArgument("values: too many elements (", n, ")"));
    Tensor* labels;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, width_, 2}), &labels));
    std::string error;
    OP_REQUIRES(ctx,
                gc::LeadingOneEncode(key, nonce, role_, width_, values.flat<int64_t>().data(),
                                     n, Blocks(labels), TfParallelFor(ctx), &error),
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
    const std::string what = "width " + std::to_string(width_) + ", magnitude " +
                             std::to_string(magnitude_);
    OP_REQUIRES_OK(ctx, gc_kernels::ReadEvaluateInputs(ctx, width_, gates(), width_, what.c_str(),
                                                       &n, &nonce, &first_index));
    const Tensor& tables = ctx->input(0);
    const Tensor& decode = ctx->input(1);
    Tensor* bits;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, width_}), &bits));
    std::string error;
    OP_REQUIRES(ctx,
                gc::LeadingOneEvaluate(nonce, first_index, n, width_, magnitude_,
                                       Blocks(tables), Bytes(decode), Blocks(ctx->input(2)),
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
    gc_kernels::ComputeMask(ctx, width_, "GcLeadingOneMask",
                            [this](const uint8_t* key, uint64_t nonce, int64_t n, uint8_t* m,
                                   const ParallelFor& pf, std::string* error) {
                              return gc::LeadingOneMask(key, nonce, n, width_, m, pf, error);
                            });
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneGarble").Device(DEVICE_CPU), GarbleOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneEncode").Device(DEVICE_CPU), EncodeOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneEvaluate").Device(DEVICE_CPU), EvaluateOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcLeadingOneMask").Device(DEVICE_CPU), MaskOp);

}  // namespace tf_privpy
