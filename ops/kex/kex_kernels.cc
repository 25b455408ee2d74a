// Kernels of the kex family (registrations in kex_ops.cc, math in kex.cc).
// Private keys are read in place from their input tensors and written in
// place into their outputs: no copies on the stack that would need wiping;
// the intermediate secrets (DH outputs, PRK) are wiped by kex.cc.
#include <cstring>
#include <string>

#include "ops/common/tf_util.h"
#include "ops/kex/kex.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

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

Status ToStatus(const kex::Error& e) {
  switch (e.code) {
    case kex::Error::kNone:
      return ::tensorflow::OkStatus();
    case kex::Error::kInvalidArgument:
      return errors::InvalidArgument(e.message);
    case kex::Error::kUnavailable:
      return errors::Unavailable(e.message);
    case kex::Error::kPermissionDenied:
      return errors::PermissionDenied(e.message);
    case kex::Error::kNotFound:
      return errors::NotFound(e.message);
    case kex::Error::kInternal:
      break;
  }
  return errors::Internal(e.message);
}

const uint8_t* Bytes(const Tensor& t) {
  return reinterpret_cast<const uint8_t*>(t.tensor_data().data());
}

uint8_t* Bytes(Tensor* t) {
  return reinterpret_cast<uint8_t*>(const_cast<char*>(t->tensor_data().data()));
}

// Input `index` as a 32-byte key.
Status KeyInput(OpKernelContext* ctx, int index, const char* what, const uint8_t** key) {
  const Tensor& t = ctx->input(index);
  if (t.dtype() != ::tensorflow::DT_UINT8 || t.dims() != 1 ||
      t.NumElements() != static_cast<int64_t>(kex::kKeyBytes))
    return errors::InvalidArgument(what, " must be a uint8 vector of 32 bytes (an X25519 "
                                         "key, RFC 7748), got shape ",
                                   t.shape().DebugString());
  *key = Bytes(t);
  return ::tensorflow::OkStatus();
}

Status KeyOutputs(OpKernelContext* ctx, uint8_t** private_key, uint8_t** public_key) {
  Tensor *priv, *pub;
  TF_RETURN_IF_ERROR(ctx->allocate_output(0, TensorShape({kex::kKeyBytes}), &priv));
  TF_RETURN_IF_ERROR(ctx->allocate_output(1, TensorShape({kex::kKeyBytes}), &pub));
  *private_key = Bytes(priv);
  *public_key = Bytes(pub);
  return ::tensorflow::OkStatus();
}

class X25519KeypairOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    uint8_t *priv, *pub;
    OP_REQUIRES_OK(ctx, KeyOutputs(ctx, &priv, &pub));
    kex::Error e;
    OP_REQUIRES(ctx, kex::GenerateKeypair(priv, pub, &e), ToStatus(e));
  }
};

class X25519ReadPrivateKeyOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const Tensor& path = ctx->input(0);
    OP_REQUIRES(ctx, path.dims() == 0,
                errors::InvalidArgument("path must be a string scalar"));
    uint8_t *priv, *pub;
    OP_REQUIRES_OK(ctx, KeyOutputs(ctx, &priv, &pub));
    kex::Error e;
    OP_REQUIRES(ctx,
                kex::ReadPrivateKeyFile(path.scalar<::tensorflow::tstring>()(), priv, &e) &&
                    kex::PublicFromPrivate(priv, pub, &e),
                ToStatus(e));
  }
};

class X25519PublicKeyOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const uint8_t* priv;
    OP_REQUIRES_OK(ctx, KeyInput(ctx, 0, "private_key", &priv));
    Tensor* pub;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({kex::kKeyBytes}), &pub));
    kex::Error e;
    OP_REQUIRES(ctx, kex::PublicFromPrivate(priv, Bytes(pub), &e), ToStatus(e));
  }
};

class X25519Op : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const uint8_t *priv, *peer;
    OP_REQUIRES_OK(ctx, KeyInput(ctx, 0, "private_key", &priv));
    OP_REQUIRES_OK(ctx, KeyInput(ctx, 1, "peer_public_key", &peer));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({kex::kKeyBytes}), &out));
    kex::Error e;
    OP_REQUIRES(ctx, kex::Agree(priv, peer, Bytes(out), "peer_public_key", &e),
                ToStatus(e));
  }
};

class HkdfSha256Op : public OpKernel {
 public:
  explicit HkdfSha256Op(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("length", &length_));
    OP_REQUIRES(ctx, length_ >= 1 && length_ <= static_cast<int>(kex::kMaxHkdfBytes),
                errors::InvalidArgument("HKDF-SHA256 length must be in [1, 8160] "
                                        "(RFC 5869 §2.3), got ", length_));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    for (int i = 0; i < 3; ++i)
      OP_REQUIRES(ctx,
                  ctx->input(i).dtype() == ::tensorflow::DT_UINT8 && ctx->input(i).dims() == 1,
                  errors::InvalidArgument("ikm, salt and info must be uint8 vectors"));
    const Tensor &ikm = ctx->input(0), &salt = ctx->input(1), &info = ctx->input(2);
    Tensor* okm;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({length_}), &okm));
    kex::Error e;
    OP_REQUIRES(ctx,
                kex::HkdfSha256(Bytes(salt), salt.NumElements(), Bytes(ikm),
                                ikm.NumElements(), Bytes(info), info.NumElements(),
                                Bytes(okm), length_, &e),
                ToStatus(e));
  }

 private:
  int length_;
};

class KexDeriveOp : public OpKernel {
 public:
  explicit KexDeriveOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("own_role", &own_role_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("peer_role", &peer_role_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("context", &context_));
  }
  void Compute(OpKernelContext* ctx) override {
    TF_PRIVPY_TRACE_KERNEL(ctx);
    const uint8_t *s, *e, *peer_s, *peer_e;
    OP_REQUIRES_OK(ctx, KeyInput(ctx, 0, "own_static_private", &s));
    OP_REQUIRES_OK(ctx, KeyInput(ctx, 1, "own_ephemeral_private", &e));
    OP_REQUIRES_OK(ctx, KeyInput(ctx, 2, "peer_static_public", &peer_s));
    OP_REQUIRES_OK(ctx, KeyInput(ctx, 3, "peer_ephemeral_public", &peer_e));
    Tensor* key;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({2}), &key));
    kex::Error err;
    const bool ok = kex::DerivePairKey(s, e, peer_s, peer_e, own_role_, peer_role_, context_,
                                       Bytes(key), &err);
    if (!ok) err.message = "KexDerive(" + own_role_ + " with " + peer_role_ + "): " + err.message;
    OP_REQUIRES(ctx, ok, ToStatus(err));
  }

 private:
  std::string own_role_, peer_role_, context_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>X25519Keypair").Device(DEVICE_CPU), X25519KeypairOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>X25519ReadPrivateKey").Device(DEVICE_CPU),
                        X25519ReadPrivateKeyOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>X25519PublicKey").Device(DEVICE_CPU),
                        X25519PublicKeyOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>X25519").Device(DEVICE_CPU), X25519Op);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>HkdfSha256").Device(DEVICE_CPU), HkdfSha256Op);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>KexDerive").Device(DEVICE_CPU), KexDeriveOp);

}  // namespace tf_privpy
