// Kernels of the prg family (registrations in prg_ops.cc).
#include <limits>
#include <string>

#include "ops/common/ring_types.h"
#include "ops/common/tf_util.h"
#include "ops/prg/aes_ctr.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor_util.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

namespace {

class RandomKeyOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({2}), &out));
    std::string error;
    OP_REQUIRES(ctx,
                OsRandomBytes(reinterpret_cast<uint8_t*>(RingData<uint64_t>(out)),
                              16, &error),
                errors::Unavailable(error));
  }
};

// Copies pair key variable `key` into key_out [2] and takes the next nonce
// of its stream from `counter` into nonce_out [] (advancing it by one).
void NextOfStream(OpKernelContext* ctx, const ::tensorflow::ResourceHandle& key_handle,
                  const ::tensorflow::ResourceHandle& counter_handle, Tensor* key_out,
                  Tensor* nonce_out) {
  using ::tensorflow::Var;
  ::tensorflow::core::RefCountPtr<Var> key, counter;
  OP_REQUIRES_OK(ctx, LookupResource(ctx, key_handle, &key));
  OP_REQUIRES_OK(ctx, LookupResource(ctx, counter_handle, &counter));
  {
    ::tensorflow::tf_shared_lock l(*key->mu());
    const Tensor& k = *key->tensor();
    OP_REQUIRES(ctx, k.dtype() == ::tensorflow::DT_INT64 && k.NumElements() == 2,
                errors::InvalidArgument("key variable must hold int64[2]"));
    key_out->flat<int64_t>()(0) = k.flat<int64_t>()(0);
    key_out->flat<int64_t>()(1) = k.flat<int64_t>()(1);
  }
  ::tensorflow::mutex_lock l(*counter->mu());
  Tensor* c = counter->tensor();
  OP_REQUIRES(ctx, c->dtype() == ::tensorflow::DT_INT64 && c->NumElements() == 1,
              errors::InvalidArgument("counter variable must hold an int64 scalar"));
  const int64_t n = c->scalar<int64_t>()();
  OP_REQUIRES(ctx, n >= 0 && n < std::numeric_limits<int64_t>::max(),
              errors::ResourceExhausted("PRG stream nonces exhausted"));
  // Replace rather than update in place: a reader may alias the old buffer.
  Tensor next(::tensorflow::DT_INT64, TensorShape({}));
  next.scalar<int64_t>()() = n + 1;
  *c = next;
  nonce_out->scalar<int64_t>()() = n;
}

class StreamNextOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    Tensor *key_out, *nonce_out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({2}), &key_out));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({}), &nonce_out));
    NextOfStream(ctx, HandleFromInput(ctx, 0), HandleFromInput(ctx, 1), key_out, nonce_out);
  }
};

// StreamNext of N streams on one device in one kernel (inputs: N keys, then
// N counters; outputs: N keys, then N nonces); each counter advances once.
class StreamNextManyOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const int n = ctx->num_inputs() / 2;
    for (int i = 0; i < n; ++i) {
      Tensor *key_out, *nonce_out;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, TensorShape({2}), &key_out));
      OP_REQUIRES_OK(ctx, ctx->allocate_output(n + i, TensorShape({}), &nonce_out));
      NextOfStream(ctx, HandleFromInput(ctx, i), HandleFromInput(ctx, n + i), key_out,
                   nonce_out);
      if (!ctx->status().ok()) return;
    }
  }
};

// Takes a single-use nonce. Pregarbled comparators are garbled in a setup
// phase and are single-use (DESIGN §6): evaluating one batch of garbled tables
// on two inputs leaks both comparisons to T1/T2 and reuses the (key, nonce)
// stream of its masks (DESIGN §4). The check and the mark happen in one
// kernel under the `fresh` variable's exclusive lock, so of any number of
// concurrent runs (threads, or tf.functions sharing the variables) exactly
// one passes; a read -> Assert -> assign sequence of separate ops lets two
// runs read `true` before either writes `false`.
class TakeOnceOp : public OpKernel {
 public:
  explicit TakeOnceOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("message", &message_));
    OP_REQUIRES(ctx, !message_.empty(),
                errors::InvalidArgument("TakeOnce: message must not be empty"));
  }

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    using ::tensorflow::Var;
    ::tensorflow::core::RefCountPtr<Var> fresh, value;
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &fresh));
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 1), &value));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    // The value first: a malformed one fails the op without burning the batch.
    {
      ::tensorflow::tf_shared_lock l(*value->mu());
      const Tensor& v = *value->tensor();
      OP_REQUIRES(ctx,
                  value->is_initialized && v.dtype() == ::tensorflow::DT_INT64 &&
                      v.dims() == 0,
                  errors::InvalidArgument(
                      "TakeOnce: value variable must hold an int64 scalar, got ",
                      ::tensorflow::DataTypeString(v.dtype()), " ",
                      v.shape().DebugString()));
      out->scalar<int64_t>()() = v.scalar<int64_t>()();
    }
    ::tensorflow::mutex_lock l(*fresh->mu());
    Tensor* f = fresh->tensor();
    OP_REQUIRES(ctx,
                fresh->is_initialized && f->dtype() == ::tensorflow::DT_BOOL &&
                    f->dims() == 0,
                errors::InvalidArgument(
                    "TakeOnce: fresh variable must hold a bool scalar, got ",
                    ::tensorflow::DataTypeString(f->dtype()), " ",
                    f->shape().DebugString()));
    OP_REQUIRES(ctx, f->scalar<bool>()(), errors::InvalidArgument(message_));
    // Replace rather than update in place: a reader may alias the old buffer.
    Tensor used(::tensorflow::DT_BOOL, TensorShape({}));
    used.scalar<bool>()() = false;
    *f = used;
  }

 private:
  std::string message_;
};

class PrgRingOp : public RingKernel<PrgRingOp> {
 public:
  explicit PrgRingOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("offset", &offset_));
    OP_REQUIRES(ctx, offset_ >= 0,
                errors::InvalidArgument("offset must be >= 0"));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(1), "nonce", &nonce));
    TensorShape shape;
    OP_REQUIRES_OK(ctx, ::tensorflow::tensor::MakeShape(ctx->input(2), &shape));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, StorageShape<T>(shape), &out));
    std::string error;
    OP_REQUIRES(ctx,
                PrgFill(key, nonce, static_cast<uint64_t>(offset_) * sizeof(T),
                        reinterpret_cast<uint8_t*>(RingData<T>(out)),
                        shape.num_elements() * sizeof(T), TfParallelFor(ctx),
                        &error),
                errors::Internal(error));
  }

 private:
  int64_t offset_;
};

class ShareSplitOp : public RingKernel<ShareSplitOp> {
 public:
  using RingKernel::RingKernel;

  template <typename T>
  void Run(OpKernelContext* ctx) {
    const Tensor& x = ctx->input(0);
    TensorShape s;
    OP_REQUIRES_OK(ctx, RingShape<T>(x, "x", &s));
    Tensor *s0, *s1;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &s0));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, x.shape(), &s1));
    // A fresh seed per call: the (seed, nonce 0) stream is used only once.
    uint8_t seed[16];
    std::string error;
    OP_REQUIRES(ctx, OsRandomBytes(seed, sizeof(seed), &error),
                errors::Unavailable(error));
    const ParallelFor pf = TfParallelFor(ctx);
    T* r = RingData<T>(s0);
    const T* v = RingData<T>(x);
    T* o = RingData<T>(s1);
    // One pass: each chunk of share0 is generated and consumed while in cache.
    constexpr int64_t kChunk = 2048;
    const int64_t n = s.num_elements(), chunks = (n + kChunk - 1) / kChunk;
    std::atomic<bool> failed{false};
    pf(chunks, kChunk * 30, [&](int64_t cb, int64_t ce) {
      std::string err;
      for (int64_t c = cb; c < ce && !failed; ++c) {
        const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
        if (!PrgFill(seed, 0, static_cast<uint64_t>(b) * sizeof(T),
                     reinterpret_cast<uint8_t*>(r + b), (e - b) * sizeof(T), SerialFor,
                     &err)) {
          failed = true;
          return;
        }
        for (int64_t i = b; i < e; ++i) o[i] = v[i] - r[i];
      }
    });
    OP_REQUIRES(ctx, !failed, errors::Internal("AES-CTR keystream generation failed"));
  }

};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>RandomKey").Device(DEVICE_CPU),
                        RandomKeyOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>StreamNext").Device(DEVICE_CPU),
                        StreamNextOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>StreamNextMany").Device(DEVICE_CPU),
                        StreamNextManyOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>TakeOnce").Device(DEVICE_CPU),
                        TakeOnceOp);
REGISTER_KERNEL_BUILDER(
    Name("TfPrivpy>PrgRing").Device(DEVICE_CPU).HostMemory("shape"),
    PrgRingOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>ShareSplit").Device(DEVICE_CPU),
                        ShareSplitOp);

}  // namespace tf_privpy
