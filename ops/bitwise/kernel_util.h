// Helpers shared by the bitwise family's kernels (bitwise_kernels.cc,
// leading_one_kernels.cc): attribute and input checks, scratch for stream
// words, and int64 tensors viewed as uint64 words.
#ifndef TF_PRIVPY_OPS_BITWISE_KERNEL_UTIL_H_
#define TF_PRIVPY_OPS_BITWISE_KERNEL_UTIL_H_

#include <cstdint>
#include <memory>

#include "ops/common/tf_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_privpy {
namespace bitwise {

// The `party` attribute: 0 (S1) or 1 (S2).
inline ::tensorflow::Status ReadParty(::tensorflow::OpKernelConstruction* ctx, int* party) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("party", party));
  if (*party != 0 && *party != 1)
    return ::tensorflow::errors::InvalidArgument("party must be 0 (S1) or 1 (S2), got ", *party);
  return ::tensorflow::OkStatus();
}

// A count given as an int64 scalar input (>= 0).
inline ::tensorflow::Status ReadCount(const ::tensorflow::Tensor& t, int64_t* n) {
  if (t.dtype() != ::tensorflow::DT_INT64 || t.NumElements() != 1)
    return ::tensorflow::errors::InvalidArgument("n must be an int64 scalar");
  *n = t.flat<int64_t>()(0);
  if (*n < 0) return ::tensorflow::errors::InvalidArgument("n must be >= 0, got ", *n);
  return ::tensorflow::OkStatus();
}

// A dealer's inputs: key_s1, nonce_s1, key_s2, nonce_s2 (inputs 0-3: its
// streams with S1 and S2) and the count n (input 4).
inline ::tensorflow::Status ReadDealerInputs(::tensorflow::OpKernelContext* ctx, int64_t* n,
                                             uint8_t key[2][16], uint64_t nonce[2]) {
  TF_RETURN_IF_ERROR(ReadCount(ctx->input(4), n));
  for (int p = 0; p < 2; ++p) {
    TF_RETURN_IF_ERROR(ReadKey(ctx->input(2 * p), "key", key[p]));
    TF_RETURN_IF_ERROR(ReadNonce(ctx->input(2 * p + 1), "nonce", &nonce[p]));
  }
  return ::tensorflow::OkStatus();
}

// t must be [rows, words].
inline ::tensorflow::Status CheckWords(const ::tensorflow::Tensor& t, const char* what,
                                       int64_t rows, int64_t words) {
  if (t.dims() != 2 || t.dim_size(0) != rows || t.dim_size(1) != words)
    return ::tensorflow::errors::InvalidArgument(what, " must be [", rows, ", ", words,
                                                 "], got ", t.shape().DebugString());
  return ::tensorflow::OkStatus();
}

// Scratch words every one of which the PRG overwrites: not zeroed first (a
// vector's value-initialisation was a pass over up to 100+ MB per call).
inline std::unique_ptr<uint64_t[]> Scratch(int64_t words) {
  return std::unique_ptr<uint64_t[]>(new uint64_t[words > 0 ? words : 1]);
}

inline const uint64_t* Words(const ::tensorflow::Tensor& t) {
  return reinterpret_cast<const uint64_t*>(t.tensor_data().data());
}
inline uint64_t* Words(::tensorflow::Tensor* t) {
  return reinterpret_cast<uint64_t*>(const_cast<char*>(t->tensor_data().data()));
}

}  // namespace bitwise
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_BITWISE_KERNEL_UTIL_H_
