// Op registrations of the garbled leading-one circuit (a priority encoder
// on the low `width` bits of x = x1 + x2; issue 14). Circuit, outputs and
// stream layout: leading_one.h; kernels: leading_one_kernels.cc. The
// protocol (protocols/mpc/leading_one.py) runs them as the comparison runs
// the comparator (DESIGN §6): garble on S1, encode on S1 and S2, evaluate on
// T1/T2, masks on S1/S2, then the b2a family re-shares the output bits.
// `columns` names the outputs computed (all `width` if empty); the garbling
// and encoding ops make the slice of the batch one assistant evaluates.
// A 128-bit label or ciphertext is an int64 pair (lo, hi), little-endian.
#include <string>
#include <vector>

#include "ops/gc/gc_shape_util.h"
#include "ops/gc/leading_one.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

using gc_shapes::CheckKeyNonce;
using gc_shapes::CheckKeyNonceN;
using gc_shapes::CheckKeyNonceSlice;

namespace {

// The spec attributes (magnitude false where the op has none); an invalid
// spec is an error of the shape function.
Status ReadSpec(InferenceContext* c, bool has_magnitude, gc::LeadingOneSpec* spec) {
  std::vector<int> columns;
  spec->magnitude = false;
  TF_RETURN_IF_ERROR(c->GetAttr("width", &spec->width));
  if (has_magnitude) TF_RETURN_IF_ERROR(c->GetAttr("magnitude", &spec->magnitude));
  TF_RETURN_IF_ERROR(c->GetAttr("columns", &columns));
  spec->columns = columns;
  const std::string err = gc::LeadingOneSpecError(*spec);
  if (!err.empty()) return ::tensorflow::errors::InvalidArgument("leading-one circuit: ", err);
  return ::tensorflow::OkStatus();
}

}  // namespace

REGISTER_OP("TfPrivpy>GcLeadingOneGarble")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("n: int64")
    .Input("first_index: int64")
    .Input("count: int64")
    .Output("tables: int64")
    .Output("decode: uint8")
    .Attr("width: int >= 3")
    .Attr("magnitude: bool")
    .Attr("columns: list(int) = []")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle count;
      TF_RETURN_IF_ERROR(CheckKeyNonceSlice(c, &count));
      gc::LeadingOneSpec spec;
      TF_RETURN_IF_ERROR(ReadSpec(c, true, &spec));
      c->set_output(0, c->MakeShape({count, gc::LeadingOneAndGates(spec.width, spec.magnitude),
                                     4}));
      c->set_output(1, c->MakeShape({count, gc::LeadingOneOutputs(spec)}));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1: garbles elements [first_index, first_index + count) of a batch "
         "of n leading-one circuits (leading_one.h) with the secrets of the "
         "(key12, nonce) S1-S2 stream. tables[i, g] = (TG.lo, TG.hi, TE.lo, "
         "TE.hi) of AND gate g of element first_index + i; decode[i, k] = "
         "lsb(zero label of output columns[k]) XOR m[first_index + i, k].");

REGISTER_OP("TfPrivpy>GcLeadingOneEncode")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("values: int64")
    .Input("n: int64")
    .Input("first_index: int64")
    .Output("labels: int64")
    .Attr("width: int >= 3")
    .Attr("role: {'a', 'b'}")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(CheckKeyNonce(c));
      ShapeHandle v, s;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &v));
      for (int i : {3, 4}) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &s));
      int width;
      TF_RETURN_IF_ERROR(c->GetAttr("width", &width));
      c->set_output(0, c->MakeShape({c->Dim(v, 0), width, 2}));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 (role 'a', values = the low 64 bits of its share x1) or S2 "
         "(role 'b', values = those of x2): labels[i, k] = (lo, hi) of the "
         "active label of bit k of values[i], element first_index + i of a "
         "garbled batch of n, k < width.");

REGISTER_OP("TfPrivpy>GcLeadingOneEvaluate")
    .Input("tables: int64")
    .Input("decode: uint8")
    .Input("labels_a: int64")
    .Input("labels_b: int64")
    .Input("nonce: int64")
    .Input("first_index: int64")
    .Output("bits: uint8")
    .Attr("width: int >= 3")
    .Attr("magnitude: bool")
    .Attr("columns: list(int) = []")
    .SetShapeFn([](InferenceContext* c) {
      gc::LeadingOneSpec spec;
      TF_RETURN_IF_ERROR(ReadSpec(c, true, &spec));
      return gc_shapes::EvaluateShape(c, gc::LeadingOneOutputs(spec));
    })
    .Doc("T1/T2: evaluates garbled leading-one circuits; bits[i, k] = "
         "out_(columns[k]) XOR m[i, k]: out_j = [v >= 2^j] (j < width - 1) and "
         "out_(width-1) = [x < 0], v = x mod 2^(width-1), or (magnitude) the "
         "one's complement magnitude with out_0 = [x != 0] (leading_one.h). "
         "Row i is element first_index + i of the garbled batch (it fixes the "
         "tweaks).");

REGISTER_OP("TfPrivpy>GcLeadingOneMask")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("n: int64")
    .Output("m: uint8")
    .Attr("width: int >= 3")
    .Attr("columns: list(int) = []")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle n;
      TF_RETURN_IF_ERROR(CheckKeyNonceN(c, &n));
      gc::LeadingOneSpec spec;
      TF_RETURN_IF_ERROR(ReadSpec(c, false, &spec));
      c->set_output(0, c->MakeShape({n, gc::LeadingOneOutputs(spec)}));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 and S2: the output masks m[i, k] in {0, 1} of the n leading-one "
         "circuits garbled with (key12, nonce) and these columns.");

}  // namespace tf_privpy
