// Kernels of the aead family (registrations in aead_ops.cc; the crypto and
// formats in aead.h). CPU kernels: GCM runs straight from the plaintext
// tensor into the message tensor and back, with no intermediate copy, one GCM
// pass (gcm_fast.cc's VAES code, or EVP) per chunk of aead::kChunkBytes, the
// chunks of a message on TF's CPU worker pool (one GCM invocation is a GHASH
// chain, so a single-chunk message runs on one core); different messages run
// concurrently too.
#include <limits>
#include <string>
#include <vector>

#include "ops/aead/aead.h"
#include "ops/common/tf_util.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/tensor_util.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
using ::tensorflow::Var;
namespace errors = ::tensorflow::errors;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Wipes secrets on every path out of Compute.
class Secret {
 public:
  uint8_t* data() { return bytes_; }
  ~Secret() { aead::Wipe(bytes_, sizeof(bytes_)); }

 private:
  uint8_t bytes_[aead::kKeyBytes];
};

uint8_t* Bytes(Tensor* t) {
  return reinterpret_cast<uint8_t*>(const_cast<char*>(t->tensor_data().data()));
}

const uint8_t* Bytes(const Tensor& t) {
  return reinterpret_cast<const uint8_t*>(t.tensor_data().data());
}

// A counter variable must hold an initialized int64 scalar >= 0. The caller
// holds its lock.
Status CheckCounter(const Var& var, const Tensor& t, const char* what,
                    const std::string& link) {
  if (!var.is_initialized || t.dtype() != ::tensorflow::DT_INT64 || t.dims() != 0) {
    return errors::InvalidArgument(
        "tf_privpy: the ", what, " variable of link ", link,
        " must hold an int64 scalar, got ", ::tensorflow::DataTypeString(t.dtype()),
        " ", t.shape().DebugString());
  }
  if (t.scalar<int64_t>()() < 0) {
    return errors::InvalidArgument("tf_privpy: the ", what, " variable of link ",
                                   link, " is negative (", t.scalar<int64_t>()(),
                                   "); counters start at 0");
  }
  return ::tensorflow::OkStatus();
}

// Sets an int64 scalar variable. Replaces the buffer rather than writing in
// place: a reader may alias the old one (as StreamNext does).
void SetScalar(Var* var, int64_t value) {
  Tensor next(::tensorflow::DT_INT64, TensorShape({}));
  next.scalar<int64_t>()() = value;
  *var->tensor() = next;
}

// Reads the link and stream attributes shared by both kernels.
class AeadKernel : public OpKernel {
 public:
  explicit AeadKernel(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("link", &link_));
    std::string why;
    OP_REQUIRES(ctx, aead::ValidLink(link_, &why),
                errors::InvalidArgument("tf_privpy: ", why));
    int64_t stream = 0;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stream", &stream));
    OP_REQUIRES(ctx, stream >= 0 && stream <= 0xFFFFFFFFll,
                errors::InvalidArgument("tf_privpy: stream must be in [0, 2^32), got ",
                                        stream));
    stream_ = static_cast<uint32_t>(stream);
    where_ = link_ + " (stream " + std::to_string(stream_) + ")";
  }

 protected:
  std::string link_;
  uint32_t stream_ = 0;
  std::string where_;  // "S1->T1 (stream 0)", for messages
};

class AeadSealOp : public AeadKernel {
 public:
  using AeadKernel::AeadKernel;

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    Secret pair_key, link_key;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key", pair_key.data()));
    // The plaintext is the concatenation of the inputs, read in place (no
    // packing copy on the sender): the same bytes, AAD and wire format as
    // one int64 vector holding them.
    ::tensorflow::OpInputList plain;
    OP_REQUIRES_OK(ctx, ctx->input_list("plaintext", &plain));
    std::vector<aead::Segment> segments;
    uint64_t len = 0;
    for (const Tensor& t : plain) {
      segments.push_back(aead::Segment{Bytes(t), static_cast<size_t>(t.TotalBytes())});
      len += t.TotalBytes();
    }
    OP_REQUIRES(ctx, len <= aead::kMaxPlaintextBytes,
                errors::InvalidArgument("tf_privpy: a message on link ", where_,
                                        " holds at most 2^36 - 32 bytes "
                                        "(SP 800-38D), got ", len));
    const uint64_t chunks = aead::ChunkCount(len);
    Tensor* msg;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({static_cast<int64_t>(aead::MessageBytes(len))}),
                            &msg));
    // Take the counters last, once nothing but the cipher itself can fail: a
    // taken counter is never given back (SP 800-38D §8.2.1 wants each
    // invocation field used once), so failures must not burn them needlessly.
    // One counter per chunk, all in this one locked step.
    uint64_t counter = 0;
    {
      ::tensorflow::core::RefCountPtr<Var> var;
      OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 1), &var));
      ::tensorflow::mutex_lock l(*var->mu());
      const Tensor& t = *var->tensor();
      OP_REQUIRES_OK(ctx, CheckCounter(*var, t, "counter", link_));
      const int64_t n = t.scalar<int64_t>()();
      // The receiver stores counter + chunks, so the largest usable last
      // counter is INT64_MAX - 1; past it the link needs a fresh pair key.
      OP_REQUIRES(ctx, n <= kInt64Max - static_cast<int64_t>(chunks),
                  errors::ResourceExhausted("tf_privpy: the message counter of link ",
                                            where_, " is exhausted; re-key the pair "
                                            "(tp.init() draws fresh keys)"));
      SetScalar(var.get(), n + static_cast<int64_t>(chunks));
      counter = static_cast<uint64_t>(n);
    }
    aead::DeriveLinkKey(pair_key.data(), link_, link_key.data());
    // The shape authenticated: a single input's own (as the receiver passes
    // it to AeadOpen); several inputs are one int64 vector of their words.
    const std::vector<int64_t> dims =
        plain.size() == 1 ? ShapeDims(plain[0].shape())
                          : std::vector<int64_t>{static_cast<int64_t>(len / sizeof(int64_t))};
    const std::string aad = aead::MakeAad(link_, stream_, dims.data(),
                                          static_cast<int>(dims.size()));
    std::string error;
    OP_REQUIRES(ctx,
                aead::SealSegments(link_key.data(), stream_, counter, aad, segments,
                                   Bytes(msg), &error, TfParallelFor(ctx)),
                errors::Internal("tf_privpy: sealing a message on link ", where_,
                                 " failed: ", error));
  }
};

class AeadOpenOp : public AeadKernel {
 public:
  using AeadKernel::AeadKernel;

  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    Secret pair_key, link_key;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(0), "key", pair_key.data()));
    const Tensor& msg = ctx->input(2);
    OP_REQUIRES(ctx, msg.dims() == 1,
                errors::InvalidArgument("tf_privpy: a message on link ", where_,
                                        " must be a uint8 vector, got shape ",
                                        msg.shape().DebugString()));
    TensorShape shape;
    OP_REQUIRES_OK(ctx, ::tensorflow::tensor::MakeShape(ctx->input(3), &shape));
    const uint64_t len = static_cast<uint64_t>(shape.num_elements()) * sizeof(int64_t);
    OP_REQUIRES(ctx, len <= aead::kMaxPlaintextBytes,
                errors::InvalidArgument("tf_privpy: a message on link ", where_,
                                        " holds at most 2^36 - 32 bytes "
                                        "(SP 800-38D), but the shape ",
                                        shape.DebugString(), " has ", len));
    const uint64_t chunks = aead::ChunkCount(len);
    OP_REQUIRES(ctx, static_cast<uint64_t>(msg.NumElements()) == aead::MessageBytes(len),
                errors::InvalidArgument(
                    "tf_privpy: message on link ", where_, " has ", msg.NumElements(),
                    " bytes, but an int64 tensor of shape ", shape.DebugString(),
                    " travels in ", aead::MessageBytes(len),
                    " (truncated in flight, or the two ends disagree on the "
                    "shape); the run is aborted, no data was used"));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, shape, &out));
    aead::DeriveLinkKey(pair_key.data(), link_, link_key.data());
    const auto dims = ShapeDims(shape);
    const std::string aad = aead::MakeAad(link_, stream_, dims.data(),
                                          static_cast<int>(dims.size()));
    // Authenticate first (every chunk), then check the (now trusted) counter:
    // the errors then say what happened, and the receiver's state only ever
    // advances on an authentic message, so forged counters cannot block the
    // link.
    uint64_t counter = 0;
    std::string error;
    const aead::OpenStatus status =
        aead::Open(link_key.data(), stream_, aad, Bytes(msg), msg.NumElements(),
                   Bytes(out), &counter, &error, TfParallelFor(ctx));
    OP_REQUIRES(ctx, status != aead::OpenStatus::kError,
                errors::Internal("tf_privpy: opening a message on link ", where_,
                                 " failed: ", error));
    OP_REQUIRES(ctx, status == aead::OpenStatus::kOk,
                errors::InvalidArgument(
                    "tf_privpy: message on link ", where_,
                    " failed authentication (tampered in flight, or the servers "
                    "hold different keys, or the two ends disagree on the link, "
                    "stream or shape); the run is aborted, no data was used"));
    // Replay / reorder rejection (RFC 4303 §3.4.3 without a window): accept
    // counters above the last accepted one, gaps allowed. "== next expected"
    // would turn every run aborted between a seal and its open (the sender's
    // counter advanced, the receiver's did not) into a link dead for good;
    // TF state is not transactional across devices. A gap loses nothing:
    // the run whose message was dropped fails on its own. A message of K
    // chunks used the counters counter .. counter + K - 1: all are consumed.
    ::tensorflow::core::RefCountPtr<Var> var;
    Status s = LookupResource(ctx, HandleFromInput(ctx, 1), &var);
    if (s.ok()) {
      ::tensorflow::mutex_lock l(*var->mu());
      const Tensor& t = *var->tensor();
      s = CheckCounter(*var, t, "receiver state", link_);
      if (s.ok()) {
        const int64_t next = t.scalar<int64_t>()();
        if (counter > static_cast<uint64_t>(kInt64Max - static_cast<int64_t>(chunks)) ||
            counter < static_cast<uint64_t>(next)) {
          s = errors::InvalidArgument(
              "tf_privpy: message on link ", where_,
              " was replayed or reordered: its counter is ", counter,
              " but every counter below ", next,
              " was already accepted or skipped (a link accepts increasing "
              "counters only); the run is aborted, no data was used");
        } else {
          SetScalar(var.get(), static_cast<int64_t>(counter + chunks));
        }
      }
    }
    if (!s.ok()) aead::Wipe(Bytes(out), len);
    OP_REQUIRES_OK(ctx, s);
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>AeadSeal").Device(DEVICE_CPU), AeadSealOp);
REGISTER_KERNEL_BUILDER(
    Name("TfPrivpy>AeadOpen").Device(DEVICE_CPU).HostMemory("shape"), AeadOpenOp);

}  // namespace tf_privpy
