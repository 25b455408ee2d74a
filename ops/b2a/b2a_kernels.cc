// Kernels of the bit-to-arithmetic family (registrations in b2a_ops.cc).
#include <string>
#include <vector>

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
    pf(n, 3, [o, b, one](int64_t lo, int64_t hi) {
      // by value and branch-free: the bits are random (a branch mispredicts
      // half the time) and a captured reference to `one` was reloaded per
      // element, since o might alias it; 3-4x faster
      T* __restrict out = o;
      const uint8_t* __restrict bit = b;
      for (int64_t i = lo; i < hi; ++i) out[i] = ((T(0) - T(bit[i])) & one) - out[i];
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
    const T add = party_ == 0 ? T(1) << frac_ : T(0);
    // b = b' + m - 2mb' = m + (1 - 2m) b'  (b', m bits; DESIGN §6 step 5);
    // branch-free (random masks): s = -m is 0 or all ones, (a ^ s) - s = m ? -a : a
    TfParallelFor(ctx)(shape.num_elements(), 3, [a, mb, o, add](int64_t lo, int64_t hi) {
      const T* __restrict in = a;
      T* __restrict out = o;
      for (int64_t i = lo; i < hi; ++i) {
        const T s = T(0) - static_cast<T>(mb[i] & 1);
        out[i] = ((in[i] ^ s) - s) + (s & add);
      }
    });
  }

 private:
  int frac_, party_;
};

// The range reductions (protocols/mpc/range_reduction.py) turn the K
// thermometer bits of the leading-one circuit into a few (J) piecewise values
// at once: z = b·table[:K] + table[K], with b = m + (1 - 2m)·b' per bit.
// Doing it here, over the assistants' parts in place, skips materialising
// [n, K] ring shares (K = 44 at 128 bits: 70 MB per 10^5 elements), the
// concatenation of the parts and the ring matmul that read them again.
// Exact: integer bits times integer table entries, mod 2^l, no truncation.
class BitUnmaskTableOp : public RingKernel<BitUnmaskTableOp> {
 public:
  explicit BitUnmaskTableOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("party", &party_));
    OP_REQUIRES(ctx, party_ == 0 || party_ == 1,
                errors::InvalidArgument("party must be 0 (S1) or 1 (S2)"));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    const int parts = ctx->num_inputs() - 2;
    const Tensor& m = ctx->input(parts);
    const Tensor& table = ctx->input(parts + 1);
    OP_REQUIRES(ctx, m.dims() == 2,
                errors::InvalidArgument("mask must be [n, K], got ", m.shape().DebugString()));
    const int64_t n = m.dim_size(0), K = m.dim_size(1);
    OP_REQUIRES(ctx, table.dims() == 2 && table.dim_size(0) == K + 1,
                errors::InvalidArgument("table must be [K + 1, J] = [", K + 1,
                                        ", J] for K = ", K, " mask columns, got ",
                                        table.shape().DebugString()));
    const int64_t J = table.dim_size(1);
    std::vector<const T*> data(parts);
    std::vector<int64_t> start(parts + 1, 0);
    for (int p = 0; p < parts; ++p) {
      TensorShape shape;
      OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(p), "share", &shape));
      OP_REQUIRES(ctx, shape.dims() == 2 && shape.dim_size(1) == K,
                  errors::InvalidArgument("share part ", p, " must be [rows, ", K,
                                          "], got ", shape.DebugString()));
      data[p] = RingData<T>(ctx->input(p));
      start[p + 1] = start[p] + shape.dim_size(0);
    }
    OP_REQUIRES(ctx, start[parts] == n,
                errors::InvalidArgument("the share parts have ", start[parts],
                                        " rows, the mask ", n));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, StorageShape<T>(TensorShape({n, J})), &out));
    T* o = RingData<T>(out);
    const uint8_t* mb = m.flat<uint8_t>().data();
    // tabT[j][k] = table[k][j] mod 2^l (int64 -> ring sign-extends), so the
    // dot products below run over contiguous k; base = table[K] on party 0.
    const int64_t* tv = table.flat<int64_t>().data();
    std::vector<T> tabT(J * K), base(J, T(0));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < J; ++j) tabT[j * K + k] = static_cast<T>(tv[k * J + j]);
    if (party_ == 0)
      for (int64_t j = 0; j < J; ++j) base[j] = static_cast<T>(tv[K * J + j]);
    const T add = party_ == 0 ? T(1) : T(0);
    TfParallelFor(ctx)(n, 4 * K * J + 8, [&](int64_t lo, int64_t hi) {
      std::vector<T> bits(K);
      int p = 0;
      for (int64_t i = lo; i < hi; ++i) {
        while (i >= start[p + 1]) ++p;
        const T* a = data[p] + (i - start[p]) * K;
        const uint8_t* mi = mb + i * K;
        // b = m + (1 - 2m) b'  (DESIGN §6 step 5), m added by party 0 only;
        // branch-free: s = -m is 0 or all ones, (a ^ s) - s = m ? -a : a.
        for (int64_t k = 0; k < K; ++k) {
          const T s = T(0) - static_cast<T>(mi[k] & 1);
          bits[k] = ((a[k] ^ s) - s) + (s & add);
        }
        for (int64_t j = 0; j < J; ++j) {
          const T* t = tabT.data() + j * K;
          T acc = base[j];
          for (int64_t k = 0; k < K; ++k) acc += bits[k] * t[k];
          o[i * J + j] = acc;
        }
      }
    });
  }

 private:
  int party_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BitUnmaskTable").Device(DEVICE_CPU),
                        BitUnmaskTableOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BitShareAssist").Device(DEVICE_CPU),
                        BitShareAssistOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BitUnmask").Device(DEVICE_CPU), BitUnmaskOp);

}  // namespace tf_privpy
