// Kernels of the ring family (registrations in ring_ops.cc).
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "ops/common/ring_types.h"
#include "ops/common/tf_util.h"
#include "ops/ring/bilinear.h"
#include "ops/ring/bilinear_kernel_util.h"
#include "ops/ring/bilinear_shape_fn.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

namespace {

// std::llround (ties away from zero) without the libm call that dominated
// encoding: |y| < 2^62, so the truncating conversion is exact and y - q is
// exact too (|y| < 2^52 leaves a fraction; above that y is an integer).
inline int64_t RoundHalfAway(double y) {
  int64_t q = static_cast<int64_t>(y);
  const double frac = y - static_cast<double>(q);
  if (frac >= 0.5) ++q;
  if (frac <= -0.5) --q;
  return q;
}

template <typename In>
class RingEncodeOp : public RingKernel<RingEncodeOp<In>> {
  using Base = RingKernel<RingEncodeOp<In>>;
  using Base::bits_;

 public:
  explicit RingEncodeOp(OpKernelConstruction* ctx) : Base(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("frac_bits", &frac_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("bound", &bound_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("tensor_name", &name_));
    OP_REQUIRES(ctx, frac_ >= 0 && frac_ < 60,
                errors::InvalidArgument("frac_bits must be in [0, 60)"));
    // Every in-range value must fit a signed 64-bit integer after scaling.
    OP_REQUIRES(ctx, bound_ > 0 && std::ldexp(bound_, frac_) <= 0x1p62,
                errors::InvalidArgument("bound * 2^frac_bits must be in "
                                        "(0, 2^62]"));
  }

  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& x = ctx->input(0);
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, StorageShape<T>(x.shape()),
                                             &out));
    const int64_t n = x.NumElements();
    const In* in = x.flat<In>().data();
    T* o = RingData<T>(out);
    const double scale = std::ldexp(1.0, frac_);
    const double bound = bound_;
    std::mutex mu;
    int64_t bad = std::numeric_limits<int64_t>::max();
    TfParallelFor(ctx)(n, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const double v = static_cast<double>(in[i]);
        // !(|v| < bound) is also true for NaN.
        if (!(std::fabs(v) < bound)) {
          std::lock_guard<std::mutex> l(mu);
          bad = std::min(bad, i);
          return;
        }
        const int64_t q = RoundHalfAway(v * scale);
        o[i] = static_cast<T>(static_cast<typename RingTraits<T>::Signed>(q));
      }
    });
    if (bad != std::numeric_limits<int64_t>::max()) {
      const double v = static_cast<double>(in[bad]);
      const std::string what =
          std::isnan(v) ? "NaN" : (std::isinf(v) ? "an infinite value"
                                                 : "the value " +
                                                       std::to_string(v));
      ctx->CtxFailure(errors::InvalidArgument(
          "tf_privpy: cannot share tensor '",
          name_.empty() ? std::string("<unnamed>") : name_, "': flat index ", bad,
          " holds ", what, "; values must be finite with |x| < ", bound_,
          " (the fixed-point range of the 2^", bits_, " ring with ", frac_,
          " fractional bits). Clean or rescale the data, or raise the bound "
          "with tp.init(tp.Config(bound=...)) at the cost of precision."));
    }
  }

 private:
  int frac_;
  float bound_;
  std::string name_;
};

class RingDecodeOp : public RingKernel<RingDecodeOp> {
 public:
  explicit RingDecodeOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("frac_bits", &frac_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& x = ctx->input(0);
    TensorShape shape;
    OP_REQUIRES_OK(ctx, RingShape<T>(x, "encoded", &shape));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, shape, &out));
    const T* in = RingData<T>(x);
    double* o = out->flat<double>().data();
    const double scale = std::ldexp(1.0, -frac_);
    TfParallelFor(ctx)(shape.num_elements(), 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        o[i] = static_cast<double>(
                   static_cast<typename RingTraits<T>::Signed>(in[i])) *
               scale;
    });
  }

 private:
  int frac_;
};

// Share-wise elementwise ops: z = x + y, x - y, -x, or the local truncation
// of x (PrivPy §5.2) as share `party`.
enum class Elem { kAdd, kSub, kNeg, kTruncate };

template <Elem K>
class RingElementwiseOp : public RingKernel<RingElementwiseOp<K>> {
  static constexpr bool kBinary = K == Elem::kAdd || K == Elem::kSub;

 public:
  explicit RingElementwiseOp(OpKernelConstruction* ctx)
      : RingKernel<RingElementwiseOp<K>>(ctx) {
    if (K == Elem::kTruncate) {
      OP_REQUIRES_OK(ctx, ctx->GetAttr("party", &party_));
      OP_REQUIRES_OK(ctx, ctx->GetAttr("frac_bits", &frac_));
      OP_REQUIRES(ctx, party_ == 0 || party_ == 1,
                  errors::InvalidArgument("party must be 0 or 1"));
      OP_REQUIRES(ctx, frac_ >= 0 && frac_ < 64,
                  errors::InvalidArgument("frac_bits must be in [0, 64)"));
    }
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& x = ctx->input(0);
    if (kBinary) {
      OP_REQUIRES(ctx, x.shape() == ctx->input(1).shape(),
                  errors::InvalidArgument(
                      "ring operands must have equal shapes (broadcast first), got ",
                      x.shape().DebugString(), " and ",
                      ctx->input(1).shape().DebugString()));
    }
    TensorShape s;
    OP_REQUIRES_OK(ctx, RingShape<T>(x, "x", &s));
    Tensor* out;
    OP_REQUIRES_OK(ctx, kBinary ? ctx->forward_input_or_allocate_output({0, 1}, 0, x.shape(), &out)
                                : ctx->forward_input_or_allocate_output({0}, 0, x.shape(), &out));
    const T* a = RingData<T>(x);
    const T* b = kBinary ? RingData<T>(ctx->input(1)) : nullptr;
    T* o = RingData<T>(out);
    const int p = party_, f = frac_;
    TfParallelFor(ctx)(s.num_elements(), 3, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        if constexpr (K == Elem::kAdd) o[i] = a[i] + b[i];
        if constexpr (K == Elem::kSub) o[i] = a[i] - b[i];
        if constexpr (K == Elem::kNeg) o[i] = T(0) - a[i];
        if constexpr (K == Elem::kTruncate) o[i] = TruncateShare<T>(a[i], p, f);
      }
    });
  }

 private:
  int party_ = 0, frac_ = 0;
};

class RingReduceSumOp : public RingKernel<RingReduceSumOp> {
 public:
  using RingKernel::RingKernel;

  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& x = ctx->input(0);
    TensorShape s;
    OP_REQUIRES_OK(ctx, RingShape<T>(x, "x", &s));
    OP_REQUIRES(ctx, s.dims() == 2,
                errors::InvalidArgument("RingReduceSum takes a logical "
                                        "[outer, inner] matrix, got ",
                                        s.DebugString()));
    const int64_t outer = s.dim_size(0), inner = s.dim_size(1);
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, StorageShape<T>(TensorShape({outer})), &out));
    const T* a = RingData<T>(x);
    T* o = RingData<T>(out);
    TfParallelFor(ctx)(outer, inner + 1, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        T acc = 0;
        const T* row = a + r * inner;
        for (int64_t i = 0; i < inner; ++i) acc += row[i];
        o[r] = acc;
      }
    });
  }

};

class RingBilinearOp : public RingKernel<RingBilinearOp> {
 public:
  explicit RingBilinearOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadBilinearSpec(ctx, &spec_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("truncate_party", &party_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("frac_bits", &frac_));
    OP_REQUIRES(ctx, party_ >= -1 && party_ <= 1,
                errors::InvalidArgument("truncate_party must be -1, 0 or 1"));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    TensorShape xs, ys;
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(0), "x", &xs));
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(1), "y", &ys));
    TensorShape out_shape;
    Tensor* out;
    OP_REQUIRES_OK(ctx, AllocateBilinearOutput<T>(ctx, spec_, xs, ys, &out_shape, &out));
    const ParallelFor pf = TfParallelFor(ctx);
    T* o = RingData<T>(out);
    Bilinear<T>(spec_, ShapeDims(xs), RingData<T>(ctx->input(0)), ShapeDims(ys),
                RingData<T>(ctx->input(1)), o, GemmMode::kSet, pf);
    if (party_ >= 0) {
      const int p = party_, f = frac_;
      pf(out_shape.num_elements(), 3, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) o[i] = TruncateShare<T>(o[i], p, f);
      });
    }
  }

 private:
  int party_, frac_;
  BilinearSpec spec_;
};

}  // namespace

#define REGISTER_ENCODE(T)                                           \
  REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingEncode")                \
                              .Device(DEVICE_CPU)                    \
                              .TypeConstraint<T>("T"),               \
                          RingEncodeOp<T>)
REGISTER_ENCODE(float);
REGISTER_ENCODE(double);
REGISTER_ENCODE(int32_t);
REGISTER_ENCODE(int64_t);
#undef REGISTER_ENCODE

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingDecode").Device(DEVICE_CPU),
                        RingDecodeOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingAdd").Device(DEVICE_CPU),
                        RingElementwiseOp<Elem::kAdd>);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingSub").Device(DEVICE_CPU),
                        RingElementwiseOp<Elem::kSub>);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingNeg").Device(DEVICE_CPU),
                        RingElementwiseOp<Elem::kNeg>);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingTruncate").Device(DEVICE_CPU),
                        RingElementwiseOp<Elem::kTruncate>);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingReduceSum").Device(DEVICE_CPU),
                        RingReduceSumOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RingBilinear").Device(DEVICE_CPU),
                        RingBilinearOp);

}  // namespace tf_privpy
