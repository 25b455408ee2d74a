// Glue between kernels and TensorFlow: thread pool, ring views of tensors,
// dispatch on the ring_bits attribute.
#ifndef TF_PRIVPY_OPS_COMMON_TF_UTIL_H_
#define TF_PRIVPY_OPS_COMMON_TF_UTIL_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/common/ring_types.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/threadpool.h"
#include "tensorflow/core/profiler/lib/traceme.h"

namespace tf_privpy {

// Forwards to the device's CPU worker pool (TF's intra-op pool).
inline ParallelFor TfParallelFor(tensorflow::OpKernelContext* ctx) {
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  return [workers](int64_t total, int64_t cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn) {
    if (total <= 0) return;
    workers->ParallelFor(total, cost_per_unit,
                         [&fn](int64_t b, int64_t e) { fn(b, e); });
  };
}

// Reads and validates the ring_bits attribute.
inline tensorflow::Status GetRingBits(tensorflow::OpKernelConstruction* ctx,
                                      int* bits) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("ring_bits", bits));
  if (*bits != 64 && *bits != 128) {
    return tensorflow::errors::InvalidArgument(
        "ring_bits must be 64 or 128, got ", *bits);
  }
  return tensorflow::OkStatus();
}

// Logical shape of a share tensor (drops the limb dimension in Z_2^128).
template <typename T>
inline tensorflow::Status RingShape(const tensorflow::Tensor& t,
                                    const char* what,
                                    tensorflow::TensorShape* shape) {
  *shape = t.shape();
  if (RingTraits<T>::kLimbs == 1) return tensorflow::OkStatus();
  if (shape->dims() < 1 || shape->dim_size(shape->dims() - 1) != 2) {
    return tensorflow::errors::InvalidArgument(
        what, ": a share in the 128-bit ring must have a trailing dimension "
              "of 2 limbs, got shape ",
        t.shape().DebugString());
  }
  shape->RemoveLastDims(1);
  return tensorflow::OkStatus();
}

template <typename T>
inline tensorflow::TensorShape StorageShape(tensorflow::TensorShape shape) {
  if (RingTraits<T>::kLimbs == 2) shape.AddDim(2);
  return shape;
}

inline std::vector<int64_t> ShapeDims(const tensorflow::TensorShape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.dims(); ++i) d.push_back(s.dim_size(i));
  return d;
}

template <typename T>
inline const T* RingData(const tensorflow::Tensor& t) {
  return reinterpret_cast<const T*>(t.tensor_data().data());
}

template <typename T>
inline T* RingData(tensorflow::Tensor* t) {
  return reinterpret_cast<T*>(const_cast<char*>(t->tensor_data().data()));
}

template <typename T>
inline int64_t RingSize(const tensorflow::Tensor& t) {
  return t.NumElements() / RingTraits<T>::kLimbs;
}

// Reads a 128-bit PRG key stored as int64[2].
inline tensorflow::Status ReadKey(const tensorflow::Tensor& t,
                                  const char* what, uint8_t key[16]) {
  if (t.dtype() != tensorflow::DT_INT64 || t.NumElements() != 2) {
    return tensorflow::errors::InvalidArgument(
        what, " must be an int64 tensor of 2 elements (a 128-bit key)");
  }
  memcpy(key, t.tensor_data().data(), 16);
  return tensorflow::OkStatus();
}

inline tensorflow::Status ReadNonce(const tensorflow::Tensor& t,
                                    const char* what, uint64_t* nonce) {
  if (t.dtype() != tensorflow::DT_INT64 || t.NumElements() != 1) {
    return tensorflow::errors::InvalidArgument(what,
                                               " must be an int64 scalar");
  }
  *nonce = static_cast<uint64_t>(t.flat<int64_t>()(0));
  return tensorflow::OkStatus();
}

// Base of the kernels whose math is templated on the ring element type: reads
// ring_bits and dispatches Compute to Derived::Run<uint64_t or uint128_t>.
template <typename Derived>
class RingKernel : public tensorflow::OpKernel {
 public:
  explicit RingKernel(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, GetRingBits(ctx, &bits_));
  }
  void Compute(tensorflow::OpKernelContext* ctx) override;

 protected:
  int bits_ = 64;
};

}  // namespace tf_privpy

// Names the running kernel and its TF device in a profile (tp.profile):
// TF's CPU profiler records which thread ran a kernel, not which logical
// device (party) it ran for, and eager kernels get no event of their own.
// tf_privpy/profiling.py sorts events into one row per party by the
// tp_device stat. Costs one atomic load when no profile is being taken.
#define TF_PRIVPY_TRACE_KERNEL(ctx)                                   \
  ::tsl::profiler::TraceMe tf_privpy_trace_kernel_(                   \
      [&] {                                                           \
        return ::tsl::profiler::TraceMeEncode(                        \
            (ctx)->op_kernel().type_string(),                         \
            {{"tp_device", (ctx)->device()->name()}});                \
      },                                                              \
      1)

// Calls BODY with `RingT` bound to the ring element type for `bits`.
#define TF_PRIVPY_DISPATCH_RING(bits, BODY)       \
  do {                                            \
    if ((bits) == 64) {                           \
      using RingT = uint64_t;                     \
      BODY;                                       \
    } else {                                      \
      using RingT = ::tf_privpy::uint128_t;       \
      BODY;                                       \
    }                                             \
  } while (0)

template <typename Derived>
void tf_privpy::RingKernel<Derived>::Compute(tensorflow::OpKernelContext* ctx) {
  TF_PRIVPY_TRACE_KERNEL(ctx);
  auto* self = static_cast<Derived*>(this);
  TF_PRIVPY_DISPATCH_RING(bits_, self->template Run<RingT>(ctx));
}

#endif  // TF_PRIVPY_OPS_COMMON_TF_UTIL_H_
