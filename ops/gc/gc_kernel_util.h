// Helpers shared by the kernels of the garbled-circuit family (gc_kernels.cc,
// the comparator; leading_one_kernels.cc, the leading-one circuit): views of
// tensors as labels and bytes, and the batch-size input both read.
#ifndef TF_PRIVPY_OPS_GC_GC_KERNEL_UTIL_H_
#define TF_PRIVPY_OPS_GC_GC_KERNEL_UTIL_H_

#include <cstdint>
#include <string>

#include "ops/common/tf_util.h"
#include "ops/gc/garble.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tf_privpy {
namespace gc_kernels {

inline gc::Block* Blocks(::tensorflow::Tensor* t) {
  return reinterpret_cast<gc::Block*>(const_cast<char*>(t->tensor_data().data()));
}
inline const gc::Block* Blocks(const ::tensorflow::Tensor& t) {
  return reinterpret_cast<const gc::Block*>(t.tensor_data().data());
}
inline uint8_t* Bytes(::tensorflow::Tensor* t) {
  return reinterpret_cast<uint8_t*>(const_cast<char*>(t->tensor_data().data()));
}
inline const uint8_t* Bytes(const ::tensorflow::Tensor& t) {
  return reinterpret_cast<const uint8_t*>(t.tensor_data().data());
}

// The batch size input: an int64 scalar in [0, gc::kMaxComparisons];
// `what` names its elements in the error ("comparisons", "elements").
inline ::tensorflow::Status ReadBatchSize(const ::tensorflow::Tensor& t, const char* what,
                                          int64_t* n) {
  if (t.dtype() != ::tensorflow::DT_INT64 ||
      !::tensorflow::TensorShapeUtils::IsScalar(t.shape()))
    return ::tensorflow::errors::InvalidArgument("n must be an int64 scalar, got shape ",
                                                 t.shape().DebugString());
  *n = t.scalar<int64_t>()();
  if (*n < 0 || *n > gc::kMaxComparisons)
    return ::tensorflow::errors::InvalidArgument("n (the number of ", what,
                                                 ") must be in [0, ", gc::kMaxComparisons,
                                                 "], got ", *n);
  return ::tensorflow::OkStatus();
}

// Inputs 0-2 (key12, nonce, n) of the garbling and output-mask kernels.
inline ::tensorflow::Status ReadKeyNonceBatch(::tensorflow::OpKernelContext* ctx,
                                              const char* what, uint8_t key[16],
                                              uint64_t* nonce, int64_t* n) {
  TF_RETURN_IF_ERROR(ReadKey(ctx->input(0), "key12", key));
  TF_RETURN_IF_ERROR(ReadNonce(ctx->input(1), "nonce", nonce));
  return ReadBatchSize(ctx->input(2), what, n);
}

// A slice [first, first + count) of a batch of n (gc::BatchSlice) from the
// int64 scalar inputs n_input, n_input + 1 (first_index), n_input + 2
// (count; if count_input is false, count is `count` as given).
inline ::tensorflow::Status ReadSlice(::tensorflow::OpKernelContext* ctx, int n_input,
                                      bool count_input, gc::BatchSlice* s) {
  TF_RETURN_IF_ERROR(ReadBatchSize(ctx->input(n_input), "elements", &s->n));
  const int last = count_input ? n_input + 2 : n_input + 1;
  for (int i = n_input + 1; i <= last; ++i) {
    const ::tensorflow::Tensor& t = ctx->input(i);
    if (t.dtype() != ::tensorflow::DT_INT64 ||
        !::tensorflow::TensorShapeUtils::IsScalar(t.shape()))
      return ::tensorflow::errors::InvalidArgument(
          i == n_input + 1 ? "first_index" : "count", " must be an int64 scalar, got shape ",
          t.shape().DebugString());
    (i == n_input + 1 ? s->first : s->count) = t.scalar<int64_t>()();
  }
  if (s->first < 0 || s->count < 0 || s->first > s->n - s->count)
    return ::tensorflow::errors::InvalidArgument(
        "the slice [first_index, first_index + ", s->count, ") must lie in the batch [0, ",
        s->n, "), got first_index ", s->first);
  return ::tensorflow::OkStatus();
}

// Inputs of the evaluation kernel of a circuit with `width` input bits,
// `gates` AND gates and `outputs` output bits per element: tables [n, gates,
// 4], decode [n, outputs], labels_a and labels_b [n, width, 2], the nonce and
// first_index (row 0's index in the garbled batch). `what` names the
// circuit's parameters in the errors.
inline ::tensorflow::Status ReadEvaluateInputs(::tensorflow::OpKernelContext* ctx, int width,
                                               int gates, int64_t outputs, const char* what,
                                               int64_t* n, uint64_t* nonce,
                                               int64_t* first_index) {
  namespace errors = ::tensorflow::errors;
  using ::tensorflow::TensorShape;
  const ::tensorflow::Tensor& tables = ctx->input(0);
  *n = tables.dims() == 3 ? tables.dim_size(0) : -1;
  if (tables.dims() != 3 || tables.dim_size(1) != gates || tables.dim_size(2) != 4)
    return errors::InvalidArgument("tables must have shape [n, ", gates, ", 4] (", what,
                                   "), got ", tables.shape().DebugString());
  if (*n > gc::kMaxComparisons)
    return errors::InvalidArgument("tables: too many elements (", *n, ")");
  if (ctx->input(1).shape() != TensorShape({*n, outputs}))
    return errors::InvalidArgument("decode must have shape [", *n, ", ", outputs, "], got ",
                                   ctx->input(1).shape().DebugString());
  for (int i : {2, 3})
    if (ctx->input(i).shape() != TensorShape({*n, width, 2}))
      return errors::InvalidArgument(i == 2 ? "labels_a" : "labels_b", " must have shape [",
                                     *n, ", ", width, ", 2], got ",
                                     ctx->input(i).shape().DebugString());
  TF_RETURN_IF_ERROR(ReadNonce(ctx->input(4), "nonce", nonce));
  const ::tensorflow::Tensor& fi = ctx->input(5);
  if (!::tensorflow::TensorShapeUtils::IsScalar(fi.shape()))
    return errors::InvalidArgument("first_index must be an int64 scalar, got shape ",
                                   fi.shape().DebugString());
  *first_index = fi.scalar<int64_t>()();
  if (*first_index < 0 || *first_index > gc::kMaxComparisons - *n)
    return errors::InvalidArgument("first_index must be in [0, ", gc::kMaxComparisons,
                                   " - n], got ", *first_index);
  return ::tensorflow::OkStatus();
}

// Compute of a circuit's garbling kernel: reads (key12, nonce, n,
// first_index, count), allocates tables [count, gates, 4] and decode
// [count, outputs] and runs fn(key, nonce, slice, tables, decode,
// parallel_for, error); `name` in errors.
template <class Fn>
void ComputeGarble(::tensorflow::OpKernelContext* ctx, int gates, int64_t outputs,
                   const char* name, const Fn& fn) {
  uint8_t key[16];
  uint64_t nonce = 0;
  gc::BatchSlice slice;
  OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key12", key));
  OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(1), "nonce", &nonce));
  OP_REQUIRES_OK(ctx, ReadSlice(ctx, 2, true, &slice));
  const int64_t m = slice.count;
  ::tensorflow::Tensor *tables, *decode;
  OP_REQUIRES_OK(ctx, ctx->allocate_output(0, ::tensorflow::TensorShape({m, gates, 4}), &tables));
  OP_REQUIRES_OK(ctx, ctx->allocate_output(1, ::tensorflow::TensorShape({m, outputs}), &decode));
  std::string error;
  OP_REQUIRES(ctx,
              fn(key, nonce, slice, Blocks(tables), Bytes(decode), TfParallelFor(ctx), &error),
              ::tensorflow::errors::Internal(name, ": ", error));
}

// Compute of a circuit's output-mask kernel: m [n, outputs] from
// fn(key, nonce, n, m, parallel_for, error).
template <class Fn>
void ComputeMask(::tensorflow::OpKernelContext* ctx, int64_t outputs, const char* name,
                 const Fn& fn) {
  uint8_t key[16];
  uint64_t nonce = 0;
  int64_t n = 0;
  OP_REQUIRES_OK(ctx, ReadKeyNonceBatch(ctx, "elements", key, &nonce, &n));
  ::tensorflow::Tensor* m;
  OP_REQUIRES_OK(ctx, ctx->allocate_output(0, ::tensorflow::TensorShape({n, outputs}), &m));
  std::string error;
  OP_REQUIRES(ctx, fn(key, nonce, n, Bytes(m), TfParallelFor(ctx), &error),
              ::tensorflow::errors::Internal(name, ": ", error));
}

}  // namespace gc_kernels
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_GC_KERNEL_UTIL_H_
