// Op registrations of the garbled window-thresholds circuit ([x < c_k·2^lo]
// for K public points in one circuit on the low `width` bits of x = x1 + x2;
// issue 14). Circuit, outputs and stream layout: thresholds.h; kernels:
// thresholds_kernels.cc. The protocol (protocols/mpc/thresholds.py) runs
// them as the leading-one protocol runs its circuit: garble on S1, encode
// (GcLeadingOneEncode, the same labels) on S1 and S2, evaluate on T1/T2,
// masks on S1/S2, then the b2a family re-shares the output bits.
// A 128-bit label or ciphertext is an int64 pair (lo, hi), little-endian.
#include <string>
#include <vector>

#include "ops/gc/gc_shape_util.h"
#include "ops/gc/thresholds.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;

namespace {

// The spec attributes; an invalid spec is an error of the shape function.
Status ReadSpec(InferenceContext* c, gc::ThresholdsSpec* spec) {
  std::vector<int64_t> points;
  TF_RETURN_IF_ERROR(c->GetAttr("width", &spec->width));
  TF_RETURN_IF_ERROR(c->GetAttr("lo", &spec->lo));
  TF_RETURN_IF_ERROR(c->GetAttr("window", &spec->window));
  TF_RETURN_IF_ERROR(c->GetAttr("points", &points));
  spec->points.assign(points.begin(), points.end());
  const std::string err = gc::ThresholdsSpecError(*spec);
  if (!err.empty())
    return ::tensorflow::errors::InvalidArgument("window-thresholds circuit: ", err);
  return ::tensorflow::OkStatus();
}

// Garbling and mask ops: inputs (key12, nonce, n) (and first_index, count
// if `slice`: the garbling op), the spec, and output `bits_output` = [n, K]
// ([count, K]: decode bits or output masks, one per point).
Status KeyNonceNBits(InferenceContext* c, DimensionHandle* n, gc::ThresholdsSpec* spec,
                     int bits_output, bool slice) {
  TF_RETURN_IF_ERROR(slice ? gc_shapes::CheckKeyNonceSlice(c, n)
                           : gc_shapes::CheckKeyNonceN(c, n));
  TF_RETURN_IF_ERROR(ReadSpec(c, spec));
  c->set_output(bits_output, c->MakeShape({*n, static_cast<int64_t>(spec->points.size())}));
  return ::tensorflow::OkStatus();
}

}  // namespace

#define TF_PRIVPY_THRESHOLDS_ATTRS   \
  Attr("width: int >= 3")            \
      .Attr("lo: int >= 0")          \
      .Attr("window: int >= 1")      \
      .Attr("points: list(int) >= 1")

REGISTER_OP("TfPrivpy>GcThresholdsGarble")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("n: int64")
    .Input("first_index: int64")
    .Input("count: int64")
    .Output("tables: int64")
    .Output("decode: uint8")
    .TF_PRIVPY_THRESHOLDS_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle n;
      gc::ThresholdsSpec spec;
      TF_RETURN_IF_ERROR(KeyNonceNBits(c, &n, &spec, 1, true));
      c->set_output(0, c->MakeShape({n, gc::ThresholdsAndGates(spec), 4}));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1: garbles elements [first_index, first_index + count) of a batch "
         "of n window-thresholds circuits (thresholds.h) with the secrets of "
         "the (key12, nonce) S1-S2 stream. tables[i, g] = (TG.lo, TG.hi, TE.lo, "
         "TE.hi) of AND gate g of element first_index + i; decode[i, k] = "
         "lsb(zero label of output k) XOR m[first_index + i, k].");

REGISTER_OP("TfPrivpy>GcThresholdsEvaluate")
    .Input("tables: int64")
    .Input("decode: uint8")
    .Input("labels_a: int64")
    .Input("labels_b: int64")
    .Input("nonce: int64")
    .Input("first_index: int64")
    .Output("bits: uint8")
    .TF_PRIVPY_THRESHOLDS_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      gc::ThresholdsSpec spec;
      TF_RETURN_IF_ERROR(ReadSpec(c, &spec));
      return gc_shapes::EvaluateShape(c, static_cast<int>(spec.points.size()));
    })
    .Doc("T1/T2: evaluates garbled window-thresholds circuits; bits[i, k] = "
         "[x < points[k]·2^lo] XOR m[i, k], x the signed sum of the low `width` "
         "bits of the shares. Row i is element first_index + i of the garbled "
         "batch (it fixes the tweaks).");

REGISTER_OP("TfPrivpy>GcThresholdsMask")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("n: int64")
    .Output("m: uint8")
    .TF_PRIVPY_THRESHOLDS_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle n;
      gc::ThresholdsSpec spec;
      return KeyNonceNBits(c, &n, &spec, 0, false);
    })
    .Doc("S1 and S2: the output masks m[i, k] in {0, 1} of the n "
         "window-thresholds circuits garbled with (key12, nonce).");

#undef TF_PRIVPY_THRESHOLDS_ATTRS

}  // namespace tf_privpy
