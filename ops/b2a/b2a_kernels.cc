// Kernels of the bit-to-arithmetic family (registrations in b2a_ops.cc).
#include <string>

#include "ops/common/ring_types.h"
#include "ops/common/tf_util.h"
#include "ops/prg/aes_ctr.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

namespace {

tensorflow::Status ReadFrac(OpKernelConstruction* ctx, int* frac) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("frac_bits", frac));
  if (*frac < 0 || *frac > 60)
    return errors::InvalidArgument("frac_bits must be in [0, 60]");
  return ::tensorflow::OkStatus();
}

class BitShareAssistOp : public RingKernel<BitShareAssistOp> {
 public:
  explicit BitShareAssistOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadFrac(ctx, &frac_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& bits = ctx->input(0);
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(1), "key", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(2), "nonce", &nonce));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, StorageShape<T>(bits.shape()), &out));
    const int64_t n = bits.NumElements();
    T* o = RingData<T>(out);
    const ParallelFor pf = TfParallelFor(ctx);
    std::string error;
    OP_REQUIRES(ctx,
                PrgFill(key, nonce, 0, reinterpret_cast<uint8_t*>(o), n * sizeof(T), pf,
                        &error),
                errors::Internal(error));
    const uint8_t* b = bits.flat<uint8_t>().data();
    const T one = T(1) << frac_;
    bool bad = false;
    for (int64_t i = 0; i < n; ++i) bad |= b[i] > 1;
    OP_REQUIRES(ctx, !bad, errors::InvalidArgument("bits must be 0 or 1"));
    pf(n, 3, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = (b[i] ? one : T(0)) - o[i];
    });
  }

 private:
  int frac_;
};

class BitUnmaskOp : public RingKernel<BitUnmaskOp> {
 public:
  explicit BitUnmaskOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadFrac(ctx, &frac_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("party", &party_));
    OP_REQUIRES(ctx, party_ == 0 || party_ == 1,
                errors::InvalidArgument("party must be 0 (S1) or 1 (S2)"));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& s = ctx->input(0);
    const Tensor& m = ctx->input(1);
    TensorShape shape;
    OP_REQUIRES_OK(ctx, RingShape<T>(s, "share", &shape));
    OP_REQUIRES(ctx, shape == m.shape(),
                errors::InvalidArgument("mask shape ", m.shape().DebugString(),
                                        " differs from the share's ", shape.DebugString()));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, s.shape(), &out));
    const T* a = RingData<T>(s);
    const uint8_t* mb = m.flat<uint8_t>().data();
    T* o = RingData<T>(out);
    const T one = T(1) << frac_;
    const bool add = party_ == 0;
    // b = b' + m - 2mb' = m + (1 - 2m) b'  (b', m bits; DESIGN §6 step 5)
    TfParallelFor(ctx)(shape.num_elements(), 3, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const bool mi = mb[i] & 1;
        o[i] = (mi ? T(0) - a[i] : a[i]) + (add && mi ? one : T(0));
      }
    });
  }

 private:
  int frac_, party_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BitShareAssist").Device(DEVICE_CPU),
                        BitShareAssistOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BitUnmask").Device(DEVICE_CPU), BitUnmaskOp);

}  // namespace tf_privpy
