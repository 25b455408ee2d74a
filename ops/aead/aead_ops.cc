// Op registrations of the aead family: authenticated encryption of the
// tensors that cross between servers (AES-128-GCM under a per-link key
// derived from the pair key; nonces from counters in TF state). Key
// derivation, nonce, AAD and wire format: aead.h. Kernels: aead_kernels.cc.
#include "ops/aead/aead.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfPrivpy>AeadSeal")
    .Input("key: int64")
    .Input("counter: resource")
    .Input("plaintext: N * int64")
    .Output("message: uint8")
    .Attr("N: int >= 1")
    .Attr("link: string")
    .Attr("stream: int = 0")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      // The plaintext is the inputs' concatenation: its size is their sum.
      int64_t n = 0;
      for (int i = 2; i < c->num_inputs(); ++i) {
        const int64_t k = c->Value(c->NumElements(c->input(i)));
        if (k == InferenceContext::kUnknownDim || n == InferenceContext::kUnknownDim) {
          n = InferenceContext::kUnknownDim;
        } else {
          n = static_cast<uint64_t>(n) + static_cast<uint64_t>(k) > aead::kMaxPlaintextBytes
                  ? InferenceContext::kUnknownDim
                  : n + k;
        }
      }
      // Unknown, too (the kernel refuses it), past the size limit.
      const bool known = n != InferenceContext::kUnknownDim &&
                         static_cast<uint64_t>(n) <= aead::kMaxPlaintextBytes / 8;
      c->set_output(0, c->Vector(known ? static_cast<int64_t>(aead::MessageBytes(
                                             8 * static_cast<uint64_t>(n)))
                                       : InferenceContext::kUnknownDim));
      return ::tensorflow::OkStatus();
    })
    .Doc("Encrypts and authenticates `plaintext` (the concatenation of the N "
         "int64 tensors, read in place: the message and its authenticated "
         "shape are those of one int64 vector holding them in order) for `link` (\"S1->T1\") "
         "with AES-128-GCM under the link key derived from the pair `key` "
         "(int64[2]). Takes the message counter from the sender's `counter` "
         "variable (int64 scalar, starts at 0), advancing it atomically, so "
         "every run gets a fresh nonce; fails once it would overflow. "
         "`stream` (0 <= stream < 2^32) tells apart several counters of one "
         "link. Output: uint8 [8 + 8 * size + 16] = big-endian counter || "
         "ciphertext || tag for plaintexts of up to 1 MiB (kChunkBytes); a "
         "larger one is sealed as K = ceil(8 * size / 1 MiB) chunks on the "
         "CPU thread pool, taking K counters at once: uint8 [8 + 8 * size + "
         "16 K] = first counter || chunk 0 || tag 0 || ... (aead.h).");

REGISTER_OP("TfPrivpy>AeadOpen")
    .Input("key: int64")
    .Input("state: resource")
    .Input("message: uint8")
    .Input("shape: int64")
    .Output("plaintext: int64")
    .Attr("link: string")
    .Attr("stream: int = 0")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle s;
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(3, &s));
      ShapeHandle m;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &m));
      c->set_output(0, s);
      return ::tensorflow::OkStatus();
    })
    .Doc("Verifies and decrypts a message of AeadSeal on the receiver of "
         "`link`, into an int64 tensor of `shape` (which the receiver knows; "
         "it is authenticated too). `state` (int64 scalar variable, starts "
         "at 0) holds the lowest counter still acceptable: a message is "
         "accepted only if its (first) counter is at least that, and then "
         "state becomes counter + K (K = its number of chunks, 1 up to 1 MiB), "
         "atomically, so replayed and reordered messages are rejected. Every "
         "chunk's tag is verified before any plaintext is output. Fails with "
         "InvalidArgument naming the link on any authentication failure or "
         "replay; nothing is output then.");

}  // namespace tf_privpy
