// Kernels of the garbled-circuit family (registrations in gc_ops.cc; the
// circuit, hash and stream layout are documented in garble.h).
#include <string>

#include "ops/common/tf_util.h"
#include "ops/gc/garble.h"
#include "ops/gc/gc_kernel_util.h"
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
using gc_kernels::ReadKeyNonceBatch;

// t must be int64 [n, 64, width]; sets *n (or checks it against *n >= 0).
Status CheckBatchTensor(const Tensor& t, const char* what, int width, int64_t* n) {
  const TensorShape& s = t.shape();
  if (s.dims() != 3 || s.dim_size(1) != gc::kBits || s.dim_size(2) != width)
    return errors::InvalidArgument(what, " must have shape [n, 64, ", width, "], got ",
                                   s.DebugString());
  if (*n >= 0 && s.dim_size(0) != *n)
    return errors::InvalidArgument(what, " has ", s.dim_size(0),
                                   " comparisons but the other inputs have ", *n);
  if (s.dim_size(0) > gc::kMaxComparisons)
    return errors::InvalidArgument(what, ": too many comparisons (", s.dim_size(0), ")");
  *n = s.dim_size(0);
  return ::tensorflow::OkStatus();
}

class GcGarbleOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    uint8_t key[16];
    uint64_t nonce = 0;
    gc::BatchSlice slice;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key12", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(1), "nonce", &nonce));
    OP_REQUIRES_OK(ctx, gc_kernels::ReadSlice(ctx, 2, true, &slice));
    Tensor *tables, *decode;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(0, TensorShape({slice.count, gc::kBits, 4}), &tables));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({slice.count}), &decode));
    std::string error;
    OP_REQUIRES(ctx,
                gc::Garble(key, nonce, slice, Blocks(tables), Bytes(decode),
                           TfParallelFor(ctx), &error),
                errors::Internal("GcGarble: ", error));
  }
};

class GcEncodeInputOp : public OpKernel {
 public:
  explicit GcEncodeInputOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string role;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("role", &role));
    OP_REQUIRES(ctx, role == "x" || role == "y",
                errors::InvalidArgument("role must be 'x' (S2's -x2) or 'y' (S1's x1), got '",
                                        role, "'"));
    role_ = role == "x" ? gc::Role::kX : gc::Role::kY;
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
                   ctx->allocate_output(0, TensorShape({slice.count, gc::kBits, 2}), &labels));
    std::string error;
    OP_REQUIRES(ctx,
                gc::EncodeInput(key, nonce, role_, values.flat<int64_t>().data(), slice,
                                Blocks(labels), TfParallelFor(ctx), &error),
                errors::Internal("GcEncodeInput: ", error));
  }

 private:
  gc::Role role_;
};

class GcEvaluateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    int64_t n = -1;
    OP_REQUIRES_OK(ctx, CheckBatchTensor(ctx->input(0), "tables", 4, &n));
    const Tensor& decode = ctx->input(1);
    OP_REQUIRES(ctx, TensorShapeUtils::IsVector(decode.shape()) && decode.dim_size(0) == n,
                errors::InvalidArgument("decode must have shape [", n,
                                        "] (one bit per comparison of tables), got ",
                                        decode.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckBatchTensor(ctx->input(2), "labels_x", 2, &n));
    OP_REQUIRES_OK(ctx, CheckBatchTensor(ctx->input(3), "labels_y", 2, &n));
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(4), "nonce", &nonce));
    const Tensor& fi = ctx->input(5);
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(fi.shape()),
                errors::InvalidArgument("first_index must be an int64 scalar, got shape ",
                                        fi.shape().DebugString()));
    const int64_t first_index = fi.scalar<int64_t>()();
    OP_REQUIRES(ctx, first_index >= 0 && first_index <= gc::kMaxComparisons - n,
                errors::InvalidArgument("first_index must be in [0, ", gc::kMaxComparisons,
                                        " - n], got ", first_index));
    Tensor* bits;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &bits));
    std::string error;
    OP_REQUIRES(ctx,
                gc::Evaluate(nonce, first_index, n, Blocks(ctx->input(0)), Bytes(decode),
                             Blocks(ctx->input(2)), Blocks(ctx->input(3)), Bytes(bits),
                             TfParallelFor(ctx), &error),
                errors::Internal("GcEvaluate: ", error));
  }
};

class GcOutputMaskOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    uint8_t key[16];
    uint64_t nonce = 0;
    int64_t n = 0;
    OP_REQUIRES_OK(ctx, ReadKeyNonceBatch(ctx, "comparisons", key, &nonce, &n));
    Tensor* m;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n}), &m));
    std::string error;
    OP_REQUIRES(ctx, gc::OutputMask(key, nonce, n, Bytes(m), TfParallelFor(ctx), &error),
                errors::Internal("GcOutputMask: ", error));
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcGarble").Device(DEVICE_CPU), GcGarbleOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcEncodeInput").Device(DEVICE_CPU), GcEncodeInputOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcEvaluate").Device(DEVICE_CPU), GcEvaluateOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcOutputMask").Device(DEVICE_CPU), GcOutputMaskOp);

}  // namespace tf_privpy
