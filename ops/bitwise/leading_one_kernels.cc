// Kernels of the bitwise leading one (registrations in leading_one_ops.cc,
// the protocol and its citations in leading_one.h). Each generates only the
// stream words its step reads (AES-CTR by word offset), a chunk of elements
// at a time into scratch that the per-element math consumes at once, over
// TF's CPU thread pool.
#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/bitwise/kernel_util.h"
#include "ops/bitwise/leading_one.h"
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
namespace lo = ::tf_privpy::bitwise::lo;
using bitwise::CheckWords;
using bitwise::ReadCount;
using bitwise::ReadParty;
using bitwise::Scratch;
using bitwise::Words;

namespace {

constexpr int64_t kChunk = 1024;       // elements per scratch fill
constexpr int64_t kElementCost = 200;  // cycles per element and step, for TF's sharding

Status ReadWidth(OpKernelConstruction* ctx, int* width) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("width", width));
  if (*width < 3 || *width > lo::kMaxWidth)
    return errors::InvalidArgument("width must be in [3, ", lo::kMaxWidth, "], got ", *width);
  return ::tensorflow::OkStatus();
}

// The opened word's bit positions of the requested columns (Plan::Position).
Status ReadPositions(OpKernelConstruction* ctx, int width, std::vector<int>* pos) {
  std::vector<int> cols;
  bool magnitude;
  TF_RETURN_IF_ERROR(ctx->GetAttr("columns", &cols));
  TF_RETURN_IF_ERROR(ctx->GetAttr("magnitude", &magnitude));
  if (cols.empty()) return errors::InvalidArgument("columns must not be empty");
  const lo::Plan plan(width);
  for (int c : cols) {
    if (c < 0 || c >= width)
      return errors::InvalidArgument("columns must be in [0, ", width - 1, "], got ", c);
    pos->push_back(plan.Position(c, magnitude));
  }
  return ::tensorflow::OkStatus();
}

// Runs body(c0, c1, err) over chunks of [0, n) on TF's pool; the first
// keystream failure fails the kernel.
template <typename Body>
void Chunks(OpKernelContext* ctx, int64_t n, int64_t cost, Body body) {
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error;
  TfParallelFor(ctx)(n, cost, [&](int64_t i0, int64_t i1) {
    std::string err;
    for (int64_t c0 = i0; c0 < i1 && !failed; c0 += kChunk) {
      if (!body(c0, std::min(i1, c0 + kChunk), &err)) {
        failed = true;
        std::lock_guard<std::mutex> l(mu);
        error = err;
        return;
      }
    }
  });
  OP_REQUIRES(ctx, !failed, errors::Internal("AES-CTR keystream generation failed: ", error));
}

// Words [first, first + count) of a stream into `out`.
bool Fill(const uint8_t key[16], uint64_t nonce, int64_t first, int64_t count, uint64_t* out,
          std::string* err) {
  return count == 0 || PrgFill(key, nonce, first * 8, reinterpret_cast<uint8_t*>(out),
                               count * 8, SerialFor, err);
}

class BwLeadingOneDealOp : public RingKernel<BwLeadingOneDealOp> {
 public:
  explicit BwLeadingOneDealOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadWidth(ctx, &width_));
    OP_REQUIRES_OK(ctx, ReadPositions(ctx, width_, &pos_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    int64_t n = 0;
    uint8_t key[2][16];
    uint64_t nonce[2];
    OP_REQUIRES_OK(ctx, bitwise::ReadDealerInputs(ctx, &n, key, nonce));
    const lo::Plan plan(width_);
    const int K = static_cast<int>(pos_.size()), G = plan.Segments();
    constexpr int kLimbs = RingTraits<T>::kLimbs;
    Tensor *corr, *ring;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, plan.CorrTotal()}), &corr));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, StorageShape<T>(TensorShape({n, K})), &ring));
    uint64_t* k = Words(corr);
    T* ring2 = RingData<T>(ring);
    int64_t per[2] = {0, 0};
    for (int p = 0; p < 2; ++p)
      for (int g = 0; g < G; ++g) per[p] += plan.OwnWords(p, g);
    const int64_t ring_start = plan.OwnOffset(0, G, n);   // S1's ring words follow its segments
    Chunks(ctx, n, kElementCost * G, [&](int64_t c0, int64_t c1, std::string* err) {
      const int64_t m = c1 - c0;
      const auto b1 = Scratch(m * (per[0] + K * kLimbs)), b2 = Scratch(m * per[1]);
      uint64_t* const bufs[2] = {b1.get(), b2.get()};
      std::vector<const uint64_t*> seg[2];
      for (int p = 0; p < 2; ++p) {
        uint64_t* at = bufs[p];
        for (int g = 0; g < G; ++g) {
          const int w = plan.OwnWords(p, g);
          if (!Fill(key[p], nonce[p], plan.OwnOffset(p, g, n) + c0 * w, m * w, at, err))
            return false;
          seg[p].push_back(at);
          at += m * w;
        }
      }
      uint64_t* r1 = bufs[0] + m * per[0];
      if (!Fill(key[0], nonce[0], ring_start + c0 * K * kLimbs, m * K * kLimbs, r1, err))
        return false;
      lo::Deal(plan, seg[0].data(), seg[1].data(), k, c0, c1);
      lo::DealRing<T>(seg[0][G - 1], seg[1][G - 1], reinterpret_cast<const T*>(r1),
                      pos_.data(), K, ring2, c0, c1);
      return true;
    });
  }

 private:
  int width_;
  std::vector<int> pos_;
};

class BwLeadingOneStepOp : public OpKernel {
 public:
  explicit BwLeadingOneStepOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadWidth(ctx, &width_));
    OP_REQUIRES_OK(ctx, ReadParty(ctx, &party_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("magnitude", &magnitude_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("step", &step_));
    const lo::Plan plan(width_);
    OP_REQUIRES(ctx, step_ >= 0 && step_ < plan.Steps(),
                errors::InvalidArgument("step must be in [0, ", plan.Steps() - 1, "] for width ",
                                        width_, ", got ", step_));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const lo::Plan plan(width_);
    const int step = step_, party = party_;
    const Tensor& state = ctx->input(0);
    int64_t n = 0;
    if (step == 0) {
      OP_REQUIRES(ctx, state.dims() == 1,
                  errors::InvalidArgument("step 0 takes the low words [n], got ",
                                          state.shape().DebugString()));
      n = state.dim_size(0);
    } else {
      n = state.dims() == 2 ? state.dim_size(0) : -1;
      OP_REQUIRES_OK(ctx, CheckWords(state, "state", n, lo::kStateWords));
      OP_REQUIRES_OK(ctx, CheckWords(ctx->input(1), "the received message", n,
                                     plan.MessageWords(step - 1)));
    }
    const Tensor& corr = ctx->input(4);
    if (party == 1 && step > 0)
      OP_REQUIRES_OK(ctx, CheckWords(corr, "the dealer's corrections", n, plan.CorrTotal()));
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(2), "key", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(3), "nonce", &nonce));
    Tensor *out, *msg;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({n, lo::kStateWords}), &out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({n, plan.MessageWords(step)}), &msg));
    const uint64_t* low = step == 0 ? Words(state) : nullptr;
    const uint64_t* st = step == 0 ? nullptr : Words(state);
    const uint64_t* recv = step == 0 ? nullptr : Words(ctx->input(1));
    const uint64_t* k = party == 1 && step > 0 ? Words(corr) : nullptr;
    uint64_t *so = Words(out), *m = Words(msg);
    const int w_prev = step > 0 ? plan.OwnWords(party, step - 1) : 0;
    const int w_cur = plan.OwnWords(party, step);
    const int64_t o_prev = step > 0 ? plan.OwnOffset(party, step - 1, n) : 0;
    const int64_t o_cur = plan.OwnOffset(party, step, n);
    const bool magnitude = magnitude_;
    Chunks(ctx, n, kElementCost, [&](int64_t c0, int64_t c1, std::string* err) {
      const int64_t c = c1 - c0;
      const auto buf = Scratch(c * (w_prev + w_cur));
      uint64_t *prev = buf.get(), *cur = buf.get() + c * w_prev;
      if (!Fill(key, nonce, o_prev + c0 * w_prev, c * w_prev, prev, err) ||
          !Fill(key, nonce, o_cur + c0 * w_cur, c * w_cur, cur, err))
        return false;
      lo::Step(plan, magnitude, step, party, low, st, recv, prev, cur, k, so, m, c0, c1);
      return true;
    });
  }

 private:
  int width_, party_, step_;
  bool magnitude_;
};

class BwLeadingOneFinishOp : public RingKernel<BwLeadingOneFinishOp> {
 public:
  explicit BwLeadingOneFinishOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadWidth(ctx, &width_));
    OP_REQUIRES_OK(ctx, ReadPositions(ctx, width_, &pos_));
    OP_REQUIRES_OK(ctx, ReadParty(ctx, &party_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("table", &table_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("table_columns", &table_cols_));
    const size_t k = pos_.size();
    const size_t j = table_cols_ > 0 ? static_cast<size_t>(table_cols_) : 0;
    OP_REQUIRES(ctx, table_cols_ >= 0 && table_.size() == (j > 0 ? (k + 1) * j : 0),
                errors::InvalidArgument("table must be [K + 1, table_columns] = [", k + 1, ", ",
                                        table_cols_, "] row-major (or empty with "
                                        "table_columns 0), got ", table_.size(), " values"));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& own = ctx->input(0);
    OP_REQUIRES(ctx, own.dims() == 2,
                errors::InvalidArgument("own must be [n, 1], got ", own.shape().DebugString()));
    const int64_t n = own.dim_size(0);
    const int K = static_cast<int>(pos_.size());
    const int J = table_cols_ > 0 ? table_cols_ : K;
    OP_REQUIRES_OK(ctx, CheckWords(own, "own", n, 1));
    OP_REQUIRES_OK(ctx, CheckWords(ctx->input(1), "the received message", n, 1));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, StorageShape<T>(TensorShape({n, J})), &out));
    const uint64_t *mine = Words(own), *recv = Words(ctx->input(1));
    T* z = RingData<T>(out);
    const int party = party_;
    const int64_t* tab = table_.data();
    // the bits alone, or fused with the table (lo::FinishTable)
    auto finish = [&](const T* r, int64_t i0, int64_t i1) {
      if (table_cols_ > 0)
        lo::FinishTable<T>(party, mine, recv, r, pos_.data(), K, tab, J, z, i0, i1);
      else
        lo::Finish<T>(party, mine, recv, r, pos_.data(), K, z, i0, i1);
    };
    if (party == 1) {
      const Tensor& ring = ctx->input(4);
      TensorShape shape;
      OP_REQUIRES_OK(ctx, RingShape<T>(ring, "ring", &shape));
      OP_REQUIRES(ctx, shape == TensorShape({n, K}),
                  errors::InvalidArgument("the dealer's ring shares must be [", n, ", ", K,
                                          "], got ", shape.DebugString()));
      const T* R = RingData<T>(ring);
      TfParallelFor(ctx)(n, 4 * K * (1 + J * (table_cols_ > 0)), [&](int64_t i0, int64_t i1) {
        finish(R + i0 * K, i0, i1);
      });
      return;
    }
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(2), "key", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(3), "nonce", &nonce));
    constexpr int kLimbs = RingTraits<T>::kLimbs;
    const lo::Plan plan(width_);
    const int64_t ring_start = plan.OwnOffset(0, plan.Segments(), n);
    const int64_t cost = (4 + 2 * kLimbs) * K * (1 + J * (table_cols_ > 0));
    Chunks(ctx, n, cost, [&](int64_t c0, int64_t c1, std::string* err) {
      const auto buf = Scratch((c1 - c0) * K * kLimbs);
      if (!Fill(key, nonce, ring_start + c0 * K * kLimbs, (c1 - c0) * K * kLimbs, buf.get(),
                err))
        return false;
      finish(reinterpret_cast<const T*>(buf.get()), c0, c1);
      return true;
    });
  }

 private:
  int width_, party_, table_cols_ = 0;
  std::vector<int> pos_;
  std::vector<int64_t> table_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwLeadingOneDeal").Device(DEVICE_CPU), BwLeadingOneDealOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwLeadingOneStep").Device(DEVICE_CPU), BwLeadingOneStepOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>BwLeadingOneFinish").Device(DEVICE_CPU),
                        BwLeadingOneFinishOp);

}  // namespace tf_privpy
