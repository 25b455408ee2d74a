// Op registrations of the BatchCrypt codec family (DESIGN §9): packing of
// quantized gradients into Paillier plaintexts and exact decoding of their
// sums. Kernels: batchcrypt_kernels.cc; layout and decoding: batchcrypt.h.
// A plaintext is a tf.string element holding a non-negative integer as
// fixed-width big-endian unsigned bytes (plaintext_bytes = ceil(key_bits/8)),
// the format of the Paillier kernels' plaintexts.
//   BatchcryptPack    on a client:  slot values -> plaintexts
//   BatchcryptUnpack  after decryption of a sum: plaintext sums -> slot sums
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfPrivpy>BatchcryptPack")
    .Input("slots: T")
    .Output("plaintexts: string")
    .Attr("T: {int32, int64}")
    .Attr("slot_bits: int")
    .Attr("slots_per_plaintext: int")
    .Attr("plaintext_bytes: int")
    .SetShapeFn([](InferenceContext* c) {
      int64_t k;
      TF_RETURN_IF_ERROR(c->GetAttr("slots_per_plaintext", &k));
      if (k < 1) return ::tensorflow::errors::InvalidArgument("slots_per_plaintext must be >= 1");
      ShapeHandle s = c->input(0);
      if (!c->FullyDefined(s)) {
        c->set_output(0, c->Vector(c->UnknownDim()));
        return ::tensorflow::OkStatus();
      }
      int64_t n = 1;
      for (int i = 0; i < c->Rank(s); ++i) n *= c->Value(c->Dim(s, i));
      c->set_output(0, c->Vector((n + k - 1) / k));
      return ::tensorflow::OkStatus();
    })
    .Doc("Packs the slot values (any shape, read flat in row-major order) "
         "into ceil(N/k) plaintexts of k = slots_per_plaintext slots of "
         "w = slot_bits bits: plaintext j is (sum_i q[j k + i] 2^(w i)) mod "
         "2^(k w), i.e. the concatenated w-bit two's complements with slot 0 "
         "least significant, as plaintext_bytes big-endian bytes. The last "
         "plaintext's missing slots are 0. Every value must lie in "
         "[-2^(w-1), 2^(w-1)).");

REGISTER_OP("TfPrivpy>BatchcryptUnpack")
    .Input("plaintexts: string")
    .Output("values: int64")
    .Output("positive_overflows: int64")
    .Output("negative_overflows: int64")
    .Output("overflow_mask: bool")
    .Attr("slot_bits: int")
    .Attr("slots_per_plaintext: int")
    .Attr("count: int")
    .Attr("bound: int")
    .SetShapeFn([](InferenceContext* c) {
      int64_t k, count;
      TF_RETURN_IF_ERROR(c->GetAttr("slots_per_plaintext", &k));
      TF_RETURN_IF_ERROR(c->GetAttr("count", &count));
      if (k < 1) return ::tensorflow::errors::InvalidArgument("slots_per_plaintext must be >= 1");
      if (count < 0) return ::tensorflow::errors::InvalidArgument("count must be >= 0");
      ShapeHandle s;
      DimensionHandle d;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &s));
      TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 0), (count + k - 1) / k, &d));
      c->set_output(0, c->Vector(count));
      c->set_output(1, c->Scalar());
      c->set_output(2, c->Scalar());
      c->set_output(3, c->Vector(count));
      return ::tensorflow::OkStatus();
    })
    .Doc("Decodes sums of plaintexts (big-endian unsigned integers, any "
         "length) into slot sums, exactly: from the lowest slot up, d = the "
         "low w bits read as signed, then T = (T - d) / 2^w (the borrow "
         "propagation), over the k w low bits. Returns the first `count` "
         "slot sums in order (ceil(count/k) plaintexts); a slot with "
         "|d| > bound is an overflow: flagged in overflow_mask, counted by "
         "sign, value 0. Padding slots past `count` must decode to 0; a "
         "nonzero one is counted (no mask entry).");

}  // namespace tf_privpy
