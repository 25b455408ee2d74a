// Kernels of the bitwise comparison family (registrations in bitwise_ops.cc,
// the protocol's math and citations in bitwise.h). Each fills only the words
// of its party's stream that its step reads (AES-CTR by word offset) and
// runs the per-block math over TF's CPU thread pool.
#include <string>
#include <vector>

#include "ops/bitwise/bitwise.h"
#include "ops/common/ring_types.h"
#include "ops/common/tf_util.h"
#include "ops/prg/aes_ctr.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

namespace {

// cycles per block, for TF's sharding (a transpose or a level of word ops)
constexpr int64_t kBlockCost = 4000;

Status ReadParty(OpKernelConstruction* ctx, int* party) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("party", party));
  if (*party != 0 && *party != 1)
    return errors::InvalidArgument("party must be 0 (S1) or 1 (S2), got ", *party);
  return ::tensorflow::OkStatus();
}

Status ReadFracBits(OpKernelConstruction* ctx, int ring_bits, int* frac) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("frac_bits", frac));
  if (*frac < 0 || *frac > ring_bits - 2)
    return errors::InvalidArgument("frac_bits must be in [0, ", ring_bits - 2, "], got ", *frac);
  return ::tensorflow::OkStatus();
}

Status ReadCount(const Tensor& t, int64_t* n) {
  if (t.dtype() != ::tensorflow::DT_INT64 || t.NumElements() != 1)
    return errors::InvalidArgument("n must be an int64 scalar");
  *n = t.flat<int64_t>()(0);
  if (*n < 0) return errors::InvalidArgument("n must be >= 0, got ", *n);
  return ::tensorflow::OkStatus();
}

// Words [first, last) of the (key, nonce) stream.
Status Fill(OpKernelContext* ctx, const Tensor& key_t, const Tensor& nonce_t, int64_t first,
            int64_t last, uint64_t* out) {
  uint8_t key[16];
  uint64_t nonce = 0;
  TF_RETURN_IF_ERROR(ReadKey(key_t, "key", key));
  TF_RETURN_IF_ERROR(ReadNonce(nonce_t, "nonce", &nonce));
  std::string error;
  if (!PrgFill(key, nonce, first * 8, reinterpret_cast<uint8_t*>(out), (last - first) * 8,
               TfParallelFor(ctx), &error))
    return errors::Internal(error);
  return ::tensorflow::OkStatus();
}

Status CheckWords(const Tensor& t, const char* what, int64_t blocks, int64_t words) {
  if (t.dims() != 2 || t.dim_size(0) != blocks || t.dim_size(1) != words)
    return errors::InvalidArgument(what, " must be [", blocks, ", ", words, "], got ",
                                   t.shape().DebugString());
  return ::tensorflow::OkStatus();
}

const uint64_t* Words(const Tensor& t) {
  return reinterpret_cast<const uint64_t*>(t.tensor_data().data());
}
uint64_t* Words(Tensor* t) {
  return reinterpret_cast<uint64_t*>(const_cast<char*>(t->tensor_data().data()));
}

class BwDealOp : public RingKernel<BwDealOp> {
 public:
  explicit BwDealOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadFracBits(ctx, bits_, &frac_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    int64_t n;
    OP_REQUIRES_OK(ctx, ReadCount(ctx->input(4), &n));
    const int64_t blocks = bitwise::Blocks(n);
    const int64_t w1 = bitwise::OwnTotal(0, blocks), w2 = bitwise::OwnTotal(1, blocks);
    const int64_t ring_words = n * RingTraits<T>::kLimbs;
    // S1's stream: its words, then its ring shares of r·2^f; S2's words
    std::vector<uint64_t> s1(w1 + ring_words), s2(w2);
    OP_REQUIRES_OK(ctx, Fill(ctx, ctx->input(0), ctx->input(1), 0, w1 + ring_words, s1.data()));
    OP_REQUIRES_OK(ctx, Fill(ctx, ctx->input(2), ctx->input(3), 0, w2, s2.data()));
    Tensor *corr, *ring;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({bitwise::CorrTotal(blocks)}), &corr));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, StorageShape<T>(TensorShape({n})), &ring));
    uint64_t* k = Words(corr);
    const ParallelFor pf = TfParallelFor(ctx);
    pf(blocks, kBlockCost, [&](int64_t b0, int64_t b1) {
      bitwise::Deal(s1.data(), s2.data(), blocks, k, b0, b1);
    });
    const T* ring1 = reinterpret_cast<const T*>(s1.data() + w1);
    T* ring2 = RingData<T>(ring);
    const T scale = T(1) << frac_;
    pf(n, 10, [&](int64_t i0, int64_t i1) {
      bitwise::DealRing<T>(s1.data(), s2.data(), blocks, ring1, scale, ring2, i0, i1);
    });
  }

 private:
  int frac_;
};

class BwInputOp : public OpKernel {
 public:
  explicit BwInputOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadParty(ctx, &party_));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const Tensor& low = ctx->input(0);
    OP_REQUIRES(ctx, low.dims() == 1,
                errors::InvalidArgument("low must be a vector, got ", low.shape().DebugString()));
    const int64_t n = low.dim_size(0), blocks = bitwise::Blocks(n);
    std::vector<uint64_t> own(bitwise::OwnOffset(party_, 1, blocks));
    OP_REQUIRES_OK(ctx, Fill(ctx, ctx->input(1), ctx->input(2), 0, own.size(), own.data()));
    Tensor *state, *msg;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({blocks, bitwise::kStateWords}), &state));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            1, TensorShape({blocks, bitwise::MessageWords(0)}), &msg));
    const uint64_t* x = Words(low);
    uint64_t *st = Words(state), *m = Words(msg);
    TfParallelFor(ctx)(blocks, kBlockCost, [&](int64_t b0, int64_t b1) {
      bitwise::Input(party_, x, n, own.data(), blocks, st, m, b0, b1);
    });
  }

 private:
  int party_;
};

class BwStepOp : public OpKernel {
 public:
  explicit BwStepOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadParty(ctx, &party_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("step", &step_));
    OP_REQUIRES(ctx, step_ >= 1 && step_ < bitwise::kSteps,
                errors::InvalidArgument("step must be in [1, 7], got ", step_));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const Tensor& state = ctx->input(0);
    OP_REQUIRES(ctx, state.dims() == 2,
                errors::InvalidArgument("state must be [blocks, 129], got ",
                                        state.shape().DebugString()));
    const int64_t blocks = state.dim_size(0);
    OP_REQUIRES_OK(ctx, CheckWords(state, "state", blocks, bitwise::kStateWords));
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(1), "the received message", blocks,
                                   bitwise::MessageWords(step_ - 1)));
    const Tensor& corr = ctx->input(4);
    if (party_ == 1)
      OP_REQUIRES(ctx, corr.dims() == 1 && corr.dim_size(0) == bitwise::CorrTotal(blocks),
                  errors::InvalidArgument("the dealer's corrections must be [",
                                          bitwise::CorrTotal(blocks), "] for ", blocks,
                                          " blocks, got ", corr.shape().DebugString()));
    int64_t first, last;
    bitwise::StepRange(step_, party_, blocks, &first, &last);
    std::vector<uint64_t> own(last - first);
    OP_REQUIRES_OK(ctx, Fill(ctx, ctx->input(2), ctx->input(3), first, last, own.data()));
    Tensor *out, *msg;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({blocks, bitwise::kStateWords}), &out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            1, TensorShape({blocks, bitwise::MessageWords(step_)}), &msg));
    const uint64_t *st = Words(state), *recv = Words(ctx->input(1));
    const uint64_t* k = party_ == 1 ? Words(corr) : nullptr;
    uint64_t *so = Words(out), *m = Words(msg);
    TfParallelFor(ctx)(blocks, kBlockCost / 4, [&](int64_t b0, int64_t b1) {
      bitwise::Step(step_, party_, st, recv, own.data(), first, k, blocks, so, m, b0, b1);
    });
  }

 private:
  int party_, step_;
};

class BwFinishOp : public RingKernel<BwFinishOp> {
 public:
  explicit BwFinishOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadFracBits(ctx, bits_, &frac_));
    OP_REQUIRES_OK(ctx, ReadParty(ctx, &party_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    int64_t n;
    OP_REQUIRES_OK(ctx, ReadCount(ctx->input(5), &n));
    const int64_t blocks = bitwise::Blocks(n);
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(0), "own", blocks, 1));
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(1), "the received message", blocks, 1));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, StorageShape<T>(TensorShape({n})), &out));
    std::vector<uint64_t> stream;
    const T* R;
    if (party_ == 0) {  // S1's ring shares follow its stream words
      const int64_t w1 = bitwise::OwnTotal(0, blocks);
      stream.resize(n * RingTraits<T>::kLimbs);
      OP_REQUIRES_OK(ctx, Fill(ctx, ctx->input(2), ctx->input(3), w1, w1 + stream.size(),
                               stream.data()));
      R = reinterpret_cast<const T*>(stream.data());
    } else {
      const Tensor& ring = ctx->input(4);
      TensorShape shape;
      OP_REQUIRES_OK(ctx, RingShape<T>(ring, "ring", &shape));
      OP_REQUIRES(ctx, shape == TensorShape({n}),
                  errors::InvalidArgument("the dealer's ring shares must be [", n, "], got ",
                                          shape.DebugString()));
      R = RingData<T>(ring);
    }
    const uint64_t *own = Words(ctx->input(0)), *recv = Words(ctx->input(1));
    T* z = RingData<T>(out);
    const T scale = T(1) << frac_;
    const int party = party_;
    TfParallelFor(ctx)(n, 4, [&](int64_t i0, int64_t i1) {
      bitwise::Finish<T>(party, own, recv, R, scale, z, i0, i1);
    });
  }

 private:
  int frac_, party_;
};

class BwSelectOp : public RingKernel<BwSelectOp> {
 public:
  explicit BwSelectOp(OpKernelConstruction* ctx) : RingKernel(ctx) {}
  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor &v = ctx->input(2), &w = ctx->input(3);
    TensorShape shape, w_shape;
    OP_REQUIRES_OK(ctx, RingShape<T>(v, "v", &shape));
    OP_REQUIRES_OK(ctx, RingShape<T>(w, "w", &w_shape));
    OP_REQUIRES(ctx, (shape.dims() == 1 || shape.dims() == 2) && shape == w_shape,
                errors::InvalidArgument("v and w must be [k, n] or [n] alike, got ",
                                        v.shape().DebugString(), " and ",
                                        w.shape().DebugString()));
    const int64_t n = shape.dim_size(shape.dims() - 1), blocks = bitwise::Blocks(n);
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(0), "own", blocks, 1));
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(1), "the received message", blocks, 1));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, v.shape(), &out));
    if (n == 0) return;
    const uint64_t *own = Words(ctx->input(0)), *recv = Words(ctx->input(1));
    const T *pv = RingData<T>(v), *pw = RingData<T>(w);
    T* y = RingData<T>(out);
    TfParallelFor(ctx)(shape.num_elements(), 4, [&](int64_t f0, int64_t f1) {
      bitwise::Select<T>(own, recv, pv, pw, n, y, f0, f1);
    });
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwDeal").Device(DEVICE_CPU), BwDealOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwInput").Device(DEVICE_CPU), BwInputOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwStep").Device(DEVICE_CPU), BwStepOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwFinish").Device(DEVICE_CPU), BwFinishOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwSelect").Device(DEVICE_CPU), BwSelectOp);

}  // namespace tf_privpy
