// Op registrations of the kex family: X25519 identity and ephemeral keys and
// the authenticated pairwise key exchange of issue 11 (formula: kex.h).
// Kernels: kex_kernels.cc. Keys are uint8[32] tensors (RFC 7748 encoding);
// the derived pair key is int64[2], the format of the PRG pair keys.
//
// Placement: every op that takes or returns a private key runs on the server
// that owns the key; only public keys and (for tests) RFC vectors cross to
// other devices. Ops that draw randomness or read files are stateful, so TF
// never constant-folds them (folding runs on the optimizing process, i.e. the
// driver) nor merges two calls.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

constexpr int kKey = 32;

// Inputs [0, n) are keys: uint8 vectors of 32 bytes.
Status KeyInputs(InferenceContext* c, int n) {
  for (int i = 0; i < n; ++i) {
    ShapeHandle s;
    DimensionHandle d;
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 1, &s));
    TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 0), kKey, &d));
  }
  return ::tensorflow::OkStatus();
}

}  // namespace

REGISTER_OP("TfPrivpy>X25519Keypair")
    .Output("private_key: uint8")
    .Output("public_key: uint8")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Vector(kKey));
      c->set_output(1, c->Vector(kKey));
      return ::tensorflow::OkStatus();
    })
    .Doc("A fresh X25519 key pair (RFC 7748): the private key is 32 bytes "
         "from the OS CSPRNG (getrandom; fails rather than use anything "
         "weaker), the public key X25519(private, 9). For identity keys and "
         "for the ephemeral keys of KexDerive; run it on the owning server.");

REGISTER_OP("TfPrivpy>X25519ReadPrivateKey")
    .Input("path: string")
    .Output("private_key: uint8")
    .Output("public_key: uint8")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle s;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &s));
      c->set_output(0, c->Vector(kKey));
      c->set_output(1, c->Vector(kKey));
      return ::tensorflow::OkStatus();
    })
    .Doc("Reads a server's identity key file on the device it runs on (so "
         "the private key never passes through the driver) and returns it "
         "with its public key. Refuses symbolic links and files with any "
         "group or other permission (chmod 600).");

REGISTER_OP("TfPrivpy>X25519PublicKey")
    .Input("private_key: uint8")
    .Output("public_key: uint8")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(KeyInputs(c, 1));
      c->set_output(0, c->Vector(kKey));
      return ::tensorflow::OkStatus();
    })
    .Doc("X25519(private_key, 9): the public key of a private key.");

REGISTER_OP("TfPrivpy>X25519")
    .Input("private_key: uint8")
    .Input("peer_public_key: uint8")
    .Output("shared_secret: uint8")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(KeyInputs(c, 2));
      c->set_output(0, c->Vector(kKey));
      return ::tensorflow::OkStatus();
    })
    .Doc("The raw X25519 function of RFC 7748 §5 (for known-answer tests; "
         "protocols use KexDerive). Fails with InvalidArgument when the "
         "result is all zeros (peer_public_key is a small-order point, "
         "RFC 7748 §6.1).");

REGISTER_OP("TfPrivpy>HkdfSha256")
    .Input("ikm: uint8")
    .Input("salt: uint8")
    .Input("info: uint8")
    .Output("okm: uint8")
    .Attr("length: int >= 1")
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < 3; ++i) {
        ShapeHandle s;
        TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 1, &s));
      }
      int length;
      TF_RETURN_IF_ERROR(c->GetAttr("length", &length));
      c->set_output(0, c->Vector(length));
      return ::tensorflow::OkStatus();
    })
    .Doc("HKDF-SHA256 (RFC 5869) of byte vectors: `length` (<= 8160) bytes "
         "of Expand(Extract(salt, ikm), info). The KDF of KexDerive, exposed "
         "for the RFC 5869 test vectors.");

REGISTER_OP("TfPrivpy>KexDerive")
    .Input("own_static_private: uint8")
    .Input("own_ephemeral_private: uint8")
    .Input("peer_static_public: uint8")
    .Input("peer_ephemeral_public: uint8")
    .Output("key: int64")
    .Attr("own_role: string")
    .Attr("peer_role: string")
    .Attr("context: string = ''")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(KeyInputs(c, 4));
      c->set_output(0, c->Vector(2));
      return ::tensorflow::OkStatus();
    })
    .Doc("The 128-bit pair key (int64[2]) of an authenticated X25519 "
         "exchange between servers own_role and peer_role (Noise KK-like): "
         "HKDF-SHA256(salt = protocol label, ikm = ee || se || es || ss in "
         "the initiator's (smaller role's) order, info = context, both roles "
         "and the four public keys), 16 bytes. Each side passes its own "
         "identity and ephemeral private keys and the peer's public keys "
         "(static: from the cluster file; ephemeral: as received); both get "
         "the same key only if each holds the private keys behind the public "
         "keys the other used. Rejects small-order public keys, equal roles, "
         "and our own public keys presented as the peer's.");

}  // namespace tf_privpy
