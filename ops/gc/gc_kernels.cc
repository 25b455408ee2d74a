// Kernels of the garbled-circuit op set (registrations in gc_ops.cc): each
// reads its circuit's row of the table (circuit_table.h) and parameters once,
// at construction, checks the tensors against the row's shapes and calls the
// row's core, parallelised with TF's thread pool (TfParallelFor). Circuits,
// hash and stream layouts: garble.h, gc_circuit.h, leading_one.h,
// thresholds.h.
#include <string>

#include "ops/common/tf_util.h"
#include "ops/gc/circuit_table.h"
#include "ops/gc/garble.h"
#include "ops/gc/gc_attrs.h"
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

gc::Block* Blocks(Tensor* t) {
  return reinterpret_cast<gc::Block*>(const_cast<char*>(t->tensor_data().data()));
}
const gc::Block* Blocks(const Tensor& t) {
  return reinterpret_cast<const gc::Block*>(t.tensor_data().data());
}
uint8_t* Bytes(Tensor* t) {
  return reinterpret_cast<uint8_t*>(const_cast<char*>(t->tensor_data().data()));
}
const uint8_t* Bytes(const Tensor& t) {
  return reinterpret_cast<const uint8_t*>(t.tensor_data().data());
}

// An int64 scalar input.
Status ReadScalar(const Tensor& t, const char* what, int64_t* v) {
  if (t.dtype() != ::tensorflow::DT_INT64 || !TensorShapeUtils::IsScalar(t.shape()))
    return errors::InvalidArgument(what, " must be an int64 scalar, got shape ",
                                   t.shape().DebugString());
  *v = t.scalar<int64_t>()();
  return ::tensorflow::OkStatus();
}

// The base of the four kernels: the circuit's row and parameters (checked,
// width resolved), and the shapes they fix.
class GcKernel : public OpKernel {
 public:
  explicit GcKernel(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, gc_attrs::ReadCircuit(ctx, &row_, &p_));
    gates_ = row_->gates(p_);
    outputs_ = row_->outputs(p_);
  }

 protected:
  // Output bits of n elements: [n, K], or [n] for a one-bit circuit.
  TensorShape BitsShape(int64_t n) const {
    return row_->one_bit ? TensorShape({n}) : TensorShape({n, outputs_});
  }
  std::string BitsShapeString(int64_t n) const {
    return row_->one_bit ? "[" + std::to_string(n) + "]"
                         : "[" + std::to_string(n) + ", " + std::to_string(outputs_) + "]";
  }
  // The batch size input: in [0, gc::kMaxComparisons].
  Status ReadBatchSize(const Tensor& t, int64_t* n) const {
    if (t.dtype() != ::tensorflow::DT_INT64 || !TensorShapeUtils::IsScalar(t.shape()))
      return errors::InvalidArgument("n must be an int64 scalar, got shape ",
                                     t.shape().DebugString());
    *n = t.scalar<int64_t>()();
    if (*n < 0 || *n > gc::kMaxComparisons)
      return errors::InvalidArgument("n (the number of ", row_->elements, ") must be in [0, ",
                                     gc::kMaxComparisons, "], got ", *n);
    return ::tensorflow::OkStatus();
  }
  // A slice [first, first + count) of a batch of n from the int64 scalar
  // inputs n_input, n_input + 1 (first_index) and, if count_input, n_input + 2
  // (count; else s->count as given).
  Status ReadSlice(OpKernelContext* ctx, int n_input, bool count_input,
                   gc::BatchSlice* s) const {
    TF_RETURN_IF_ERROR(ReadBatchSize(ctx->input(n_input), &s->n));
    TF_RETURN_IF_ERROR(ReadScalar(ctx->input(n_input + 1), "first_index", &s->first));
    if (count_input) TF_RETURN_IF_ERROR(ReadScalar(ctx->input(n_input + 2), "count", &s->count));
    if (s->first < 0 || s->count < 0 || s->first > s->n - s->count)
      return errors::InvalidArgument("the slice [first_index, first_index + ", s->count,
                                     ") must lie in the batch [0, ", s->n,
                                     "), got first_index ", s->first);
    return ::tensorflow::OkStatus();
  }
  Status Failed(const std::string& error) const {
    return errors::Internal(type_string(), " (circuit ", row_->name, "): ", error);
  }

  const gc::CircuitDescriptor* row_ = nullptr;
  gc::CircuitParams p_;
  int gates_ = 0;
  int64_t outputs_ = 0;
};

class GcGarbleOp : public GcKernel {
 public:
  using GcKernel::GcKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    uint8_t key[16];
    uint64_t nonce = 0;
    gc::BatchSlice slice;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key12", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(1), "nonce", &nonce));
    OP_REQUIRES_OK(ctx, ReadSlice(ctx, 2, true, &slice));
    Tensor *tables, *decode;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({slice.count, gates_, 4}), &tables));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, BitsShape(slice.count), &decode));
    std::string error;
    OP_REQUIRES(ctx,
                row_->garble(key, nonce, slice, p_, Blocks(tables), Bytes(decode),
                             TfParallelFor(ctx), &error),
                Failed(error));
  }
};

class GcEncodeOp : public GcKernel {
 public:
  explicit GcEncodeOp(OpKernelConstruction* ctx) : GcKernel(ctx) {
    std::string role;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("role", &role));
    OP_REQUIRES(ctx, role == "a" || role == "b",
                errors::InvalidArgument("role must be 'a' (S1's x1) or 'b' (S2's x2), got '",
                                        role, "'"));
    party_ = role == "a" ? gc::Party::kA : gc::Party::kB;
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
    OP_REQUIRES_OK(ctx, ReadSlice(ctx, 3, false, &slice));
    Tensor* labels;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(0, TensorShape({slice.count, p_.width, 2}), &labels));
    std::string error;
    OP_REQUIRES(ctx,
                row_->encode(key, nonce, party_, p_, values.flat<int64_t>().data(), slice,
                             Blocks(labels), TfParallelFor(ctx), &error),
                Failed(error));
  }

 private:
  gc::Party party_ = gc::Party::kA;
};

class GcEvaluateOp : public GcKernel {
 public:
  using GcKernel::GcKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    int64_t n = 0, first_index = 0;
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadInputs(ctx, &n, &nonce, &first_index));
    Tensor* bits;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, BitsShape(n), &bits));
    std::string error;
    OP_REQUIRES(ctx,
                row_->evaluate(nonce, first_index, n, p_, Blocks(ctx->input(0)),
                               Bytes(ctx->input(1)), Blocks(ctx->input(2)),
                               Blocks(ctx->input(3)), Bytes(bits), TfParallelFor(ctx), &error),
                Failed(error));
  }

 private:
  // tables [n, G, 4], decode [n, K] ([n]), labels_a and labels_b [n, W, 2],
  // the nonce and first_index (row 0's index in the garbled batch).
  Status ReadInputs(OpKernelContext* ctx, int64_t* n, uint64_t* nonce,
                    int64_t* first_index) const {
    const Tensor& tables = ctx->input(0);
    *n = tables.dims() == 3 ? tables.dim_size(0) : -1;
    if (tables.dims() != 3 || tables.dim_size(1) != gates_ || tables.dim_size(2) != 4)
      return errors::InvalidArgument("tables must have shape [n, ", gates_, ", 4] (circuit ",
                                     row_->name, " with these parameters), got ",
                                     tables.shape().DebugString());
    if (*n > gc::kMaxComparisons)
      return errors::InvalidArgument("tables: too many ", row_->elements, " (", *n, ")");
    if (ctx->input(1).shape() != BitsShape(*n))
      return errors::InvalidArgument("decode must have shape ", BitsShapeString(*n),
                                     " (one bit per output of each element of tables), got ",
                                     ctx->input(1).shape().DebugString());
    for (int i : {2, 3})
      if (ctx->input(i).shape() != TensorShape({*n, p_.width, 2}))
        return errors::InvalidArgument(i == 2 ? "labels_a" : "labels_b", " must have shape [",
                                       *n, ", ", p_.width, ", 2], got ",
                                       ctx->input(i).shape().DebugString());
    TF_RETURN_IF_ERROR(ReadNonce(ctx->input(4), "nonce", nonce));
    TF_RETURN_IF_ERROR(ReadScalar(ctx->input(5), "first_index", first_index));
    if (*first_index < 0 || *first_index > gc::kMaxComparisons - *n)
      return errors::InvalidArgument("first_index must be in [0, ", gc::kMaxComparisons,
                                     " - n], got ", *first_index);
    return ::tensorflow::OkStatus();
  }
};

class GcMaskOp : public GcKernel {
 public:
  using GcKernel::GcKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    uint8_t key[16];
    uint64_t nonce = 0;
    int64_t n = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key12", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(1), "nonce", &nonce));
    OP_REQUIRES_OK(ctx, ReadBatchSize(ctx->input(2), &n));
    Tensor* m;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, BitsShape(n), &m));
    std::string error;
    OP_REQUIRES(ctx, row_->mask(key, nonce, n, p_, Bytes(m), TfParallelFor(ctx), &error),
                Failed(error));
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcGarble").Device(DEVICE_CPU), GcGarbleOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcEncode").Device(DEVICE_CPU), GcEncodeOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcEvaluate").Device(DEVICE_CPU), GcEvaluateOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>GcMask").Device(DEVICE_CPU), GcMaskOp);

}  // namespace tf_privpy
