// Kernels of the bitwise comparison family (registrations in bitwise_ops.cc,
// the protocol's math and citations in bitwise.h). Each generates only the
// words of its party's stream that its step reads (AES-CTR by word offset),
// a few blocks at a time into cache-resident scratch that the per-block math
// consumes at once, over TF's CPU thread pool: the whole-batch streams were
// buffers of tens of MB written by the PRG and read back.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "ops/bitwise/bitwise.h"
#include "ops/bitwise/kernel_util.h"
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

using bitwise::CheckWords;
using bitwise::ReadCount;
using bitwise::ReadParty;
using bitwise::Scratch;
using bitwise::Words;

namespace {

// cycles per block, for TF's sharding (a transpose or a level of word ops)
constexpr int64_t kBlockCost = 4000;

Status ReadFracBits(OpKernelConstruction* ctx, int ring_bits, int* frac) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("frac_bits", frac));
  if (*frac < 0 || *frac > ring_bits - 2)
    return errors::InvalidArgument("frac_bits must be in [0, ", ring_bits - 2, "], got ", *frac);
  return ::tensorflow::OkStatus();
}

class BwDealOp : public RingKernel<BwDealOp> {
 public:
  explicit BwDealOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadFracBits(ctx, bits_, &frac_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    int64_t n = 0;
    uint8_t key[2][16];
    uint64_t nonce[2];
    OP_REQUIRES_OK(ctx, bitwise::ReadDealerInputs(ctx, &n, key, nonce));
    const int64_t blocks = bitwise::Blocks(n);
    constexpr int kLimbs = RingTraits<T>::kLimbs;
    Tensor *corr, *ring;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({bitwise::CorrTotal(blocks)}), &corr));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, StorageShape<T>(TensorShape({n})), &ring));
    uint64_t* k = Words(corr);
    T* ring2 = RingData<T>(ring);
    const T scale = T(1) << frac_;
    const int64_t ring_start = bitwise::OwnTotal(0, blocks);   // S1's ring words follow its stream
    int64_t per_block[2] = {0, 0};
    for (int p = 0; p < 2; ++p)
      for (int s = 0; s < bitwise::kSegments; ++s) per_block[p] += bitwise::OwnWords(p, s);
    // A few blocks of every segment of both streams at a time, in cache:
    // the whole streams were two buffers of ~130 bytes per comparison,
    // written by the PRG and read back once.
    constexpr int64_t kChunk = 16;
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string error;
    TfParallelFor(ctx)(blocks, kBlockCost * 2, [&](int64_t b0, int64_t b1) {
      const auto buf1 = Scratch(kChunk * (per_block[0] + bitwise::kBlock * kLimbs));
      const auto buf2 = Scratch(kChunk * per_block[1]);
      uint64_t* const bufs[2] = {buf1.get(), buf2.get()};
      std::string err;
      for (int64_t c0 = b0; c0 < b1 && !failed; c0 += kChunk) {
        const int64_t c1 = std::min(b1, c0 + kChunk), m = c1 - c0;
        const uint64_t* seg[2][bitwise::kSegments];
        bool ok = true;
        for (int p = 0; p < 2 && ok; ++p) {
          uint64_t* at = bufs[p];
          for (int s = 0; s < bitwise::kSegments && ok; ++s) {
            const int64_t w = bitwise::OwnWords(p, s);
            const int64_t first = bitwise::OwnOffset(p, s, blocks) + c0 * w;
            ok = PrgFill(key[p], nonce[p], first * 8, reinterpret_cast<uint8_t*>(at), m * w * 8,
                         SerialFor, &err);
            seg[p][s] = at;
            at += m * w;
          }
        }
        // S1's ring shares of r·2^f for this chunk's comparisons
        const int64_t i0 = c0 * bitwise::kBlock, i1 = std::min(n, c1 * bitwise::kBlock);
        uint64_t* r1 = bufs[0] + m * per_block[0];
        if (ok && i1 > i0)
          ok = PrgFill(key[0], nonce[0], (ring_start + i0 * kLimbs) * 8,
                       reinterpret_cast<uint8_t*>(r1), (i1 - i0) * kLimbs * 8, SerialFor, &err);
        if (!ok) {
          failed = true;
          std::lock_guard<std::mutex> l(mu);
          error = err;
          return;
        }
        bitwise::DealSegments(seg[0], seg[1], c0, blocks, k, c0, c1);
        bitwise::DealRingSegments<T>(seg[0][bitwise::kSegments - 1],
                                     seg[1][bitwise::kSegments - 1],
                                     reinterpret_cast<const T*>(r1), scale, ring2, i0, i1, c0);
      }
    });
    OP_REQUIRES(ctx, !failed, errors::Internal("AES-CTR keystream generation failed: ", error));
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
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(1), "key", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(2), "nonce", &nonce));
    Tensor *state, *msg;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({blocks, bitwise::StateWords(0)}), &state));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            1, TensorShape({blocks, bitwise::MessageWords(0)}), &msg));
    const uint64_t* x = Words(low);
    uint64_t *st = Words(state), *m = Words(msg);
    // segment 0 of the stream a few blocks at a time, in cache
    const int party = party_, w = bitwise::OwnWords(party, 0);
    constexpr int64_t kChunk = 32;
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string error;
    TfParallelFor(ctx)(blocks, kBlockCost, [&](int64_t b0, int64_t b1) {
      const auto buf = Scratch(kChunk * w);
      std::string err;
      for (int64_t c0 = b0; c0 < b1 && !failed; c0 += kChunk) {
        const int64_t c1 = std::min(b1, c0 + kChunk);
        if (!PrgFill(key, nonce, c0 * w * 8, reinterpret_cast<uint8_t*>(buf.get()),
                     (c1 - c0) * w * 8, SerialFor, &err)) {
          failed = true;
          std::lock_guard<std::mutex> l(mu);
          error = err;
          return;
        }
        bitwise::Input(party, x, n, buf.get(), blocks, st, m, c0, c1, c0);
      }
    });
    OP_REQUIRES(ctx, !failed, errors::Internal("AES-CTR keystream generation failed: ", error));
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
                errors::InvalidArgument("state must be [blocks, ", bitwise::StateWords(step_ - 1),
                                        "], got ", state.shape().DebugString()));
    const int64_t blocks = state.dim_size(0);
    OP_REQUIRES_OK(ctx, CheckWords(state, "state", blocks, bitwise::StateWords(step_ - 1)));
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(1), "the received message", blocks,
                                   bitwise::MessageWords(step_ - 1)));
    const Tensor& corr = ctx->input(4);
    if (party_ == 1)
      OP_REQUIRES(ctx, corr.dims() == 1 && corr.dim_size(0) == bitwise::CorrTotal(blocks),
                  errors::InvalidArgument("the dealer's corrections must be [",
                                          bitwise::CorrTotal(blocks), "] for ", blocks,
                                          " blocks, got ", corr.shape().DebugString()));
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(2), "key", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(3), "nonce", &nonce));
    Tensor *out, *msg;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({blocks, bitwise::StateWords(step_)}), &out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            1, TensorShape({blocks, bitwise::MessageWords(step_)}), &msg));
    const uint64_t *st = Words(state), *recv = Words(ctx->input(1));
    const uint64_t* k = party_ == 1 ? Words(corr) : nullptr;
    uint64_t *so = Words(out), *m = Words(msg);
    // the step's two stream segments a few blocks at a time, in cache
    const int step = step_, party = party_;
    const int w_prev = bitwise::OwnWords(party, step - 1), w_cur = bitwise::OwnWords(party, step);
    const int64_t o_prev = bitwise::OwnOffset(party, step - 1, blocks);
    const int64_t o_cur = bitwise::OwnOffset(party, step, blocks);
    constexpr int64_t kChunk = 32;
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string error;
    TfParallelFor(ctx)(blocks, kBlockCost / 4, [&](int64_t b0, int64_t b1) {
      const auto buf = Scratch(kChunk * (w_prev + w_cur));
      std::string err;
      for (int64_t c0 = b0; c0 < b1 && !failed; c0 += kChunk) {
        const int64_t c1 = std::min(b1, c0 + kChunk), n = c1 - c0;
        uint64_t *prev = buf.get(), *cur = buf.get() + n * w_prev;
        if (!PrgFill(key, nonce, (o_prev + c0 * w_prev) * 8, reinterpret_cast<uint8_t*>(prev),
                     n * w_prev * 8, SerialFor, &err) ||
            !PrgFill(key, nonce, (o_cur + c0 * w_cur) * 8, reinterpret_cast<uint8_t*>(cur),
                     n * w_cur * 8, SerialFor, &err)) {
          failed = true;
          std::lock_guard<std::mutex> l(mu);
          error = err;
          return;
        }
        bitwise::StepSegments(step, party, st, recv, prev, cur, c0, k, blocks, so, m, c0, c1);
      }
    });
    OP_REQUIRES(ctx, !failed, errors::Internal("AES-CTR keystream generation failed: ", error));
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
    int64_t n = 0;
    OP_REQUIRES_OK(ctx, ReadCount(ctx->input(5), &n));
    const int64_t blocks = bitwise::Blocks(n);
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(0), "own", blocks, 1));
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(1), "the received message", blocks, 1));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, StorageShape<T>(TensorShape({n})), &out));
    const T* R = nullptr;
    uint8_t key[16] = {};
    uint64_t nonce = 0;
    if (party_ == 0) {  // S1's ring shares follow its stream words: made below, in chunks
      OP_REQUIRES_OK(ctx, ReadKey(ctx->input(2), "key", key));
      OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(3), "nonce", &nonce));
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
    if (party == 1) {
      TfParallelFor(ctx)(n, 4, [&](int64_t i0, int64_t i1) {
        bitwise::Finish<T>(party, own, recv, R, scale, z, i0, i1);
      });
      return;
    }
    constexpr int64_t kChunk = 2048;
    constexpr int kLimbs = RingTraits<T>::kLimbs;
    const int64_t w1 = bitwise::OwnTotal(0, blocks);
    std::atomic<bool> failed{false};
    std::mutex mu;
    std::string error;
    TfParallelFor(ctx)(n, 4 + 2 * kLimbs, [&](int64_t i0, int64_t i1) {
      const auto buf = Scratch(kChunk * kLimbs);
      std::string err;
      for (int64_t c0 = i0; c0 < i1 && !failed; c0 += kChunk) {
        const int64_t c1 = std::min(i1, c0 + kChunk);
        if (!PrgFill(key, nonce, (w1 + c0 * kLimbs) * 8, reinterpret_cast<uint8_t*>(buf.get()),
                     (c1 - c0) * kLimbs * 8, SerialFor, &err)) {
          failed = true;
          std::lock_guard<std::mutex> l(mu);
          error = err;
          return;
        }
        bitwise::Finish<T>(party, own, recv, reinterpret_cast<const T*>(buf.get()), scale, z, c0,
                           c1, c0);
      }
    });
    OP_REQUIRES(ctx, !failed, errors::Internal("AES-CTR keystream generation failed: ", error));
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
