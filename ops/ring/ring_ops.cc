// Op registrations of the ring family: fixed-point encoding and local
// (share-wise) arithmetic in Z_2^64 / Z_2^128. Kernels: ring_kernels.cc.
#include "ops/ring/bilinear_shape_fn.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// Appends the limb dimension for 128-bit rings.
Status WithLimbs(InferenceContext* c, ShapeHandle in, ShapeHandle* out) {
  int bits;
  TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
  if (bits == 128) return c->Concatenate(in, c->Vector(2), out);
  *out = in;
  return ::tensorflow::OkStatus();
}

Status SameShapeBinary(InferenceContext* c) {
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->Merge(c->input(0), c->input(1), &out));
  c->set_output(0, out);
  return ::tensorflow::OkStatus();
}

}  // namespace

REGISTER_OP("TfPrivpy>RingEncode")
    .Input("x: T")
    .Output("encoded: int64")
    .Attr("T: {float, double, int32, int64}")
    .Attr("ring_bits: int")
    .Attr("frac_bits: int")
    .Attr("bound: float")
    .Attr("tensor_name: string = ''")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle out;
      TF_RETURN_IF_ERROR(WithLimbs(c, c->input(0), &out));
      c->set_output(0, out);
      return ::tensorflow::OkStatus();
    })
    .Doc("Fixed-point encoding round(x * 2^frac_bits) into the ring. Fails "
         "on NaN, Inf and |x| >= bound, naming tensor_name.");

REGISTER_OP("TfPrivpy>RingDecode")
    .Input("encoded: int64")
    .Output("x: double")
    .Attr("ring_bits: int")
    .Attr("frac_bits: int")
    .SetShapeFn([](InferenceContext* c) {
      int bits;
      TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
      ShapeHandle out = c->input(0);
      if (bits == 128) TF_RETURN_IF_ERROR(c->Subshape(out, 0, -1, &out));
      c->set_output(0, out);
      return ::tensorflow::OkStatus();
    })
    .Doc("Signed ring value / 2^frac_bits as float64.");

#define TF_PRIVPY_BINARY_RING_OP(NAME, DOC)   \
  REGISTER_OP("TfPrivpy>" NAME)                 \
      .Input("x: int64")                        \
      .Input("y: int64")                        \
      .Output("z: int64")                       \
      .Attr("ring_bits: int")                   \
      .SetShapeFn(SameShapeBinary)              \
      .Doc(DOC)

TF_PRIVPY_BINARY_RING_OP("RingAdd", "z = x + y mod 2^ring_bits.");
TF_PRIVPY_BINARY_RING_OP("RingSub", "z = x - y mod 2^ring_bits.");

REGISTER_OP("TfPrivpy>RingNeg")
    .Input("x: int64")
    .Output("z: int64")
    .Attr("ring_bits: int")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("z = -x mod 2^ring_bits.");

REGISTER_OP("TfPrivpy>RingTruncate")
    .Input("x: int64")
    .Output("z: int64")
    .Attr("ring_bits: int")
    .Attr("party: int")
    .Attr("frac_bits: int")
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape)
    .Doc("Local share truncation by frac_bits (PrivPy §5.2): party 0 "
         "shifts arithmetically, party 1 computes -((-x) >> f).");

REGISTER_OP("TfPrivpy>RingReduceSum")
    .Input("x: int64")
    .Output("z: int64")
    .Attr("ring_bits: int")
    .SetShapeFn([](InferenceContext* c) {
      int bits;
      TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
      // Logical shape [outer, inner] -> [outer].
      ShapeHandle x = c->input(0);
      TF_RETURN_IF_ERROR(c->WithRank(x, bits == 128 ? 3 : 2, &x));
      ShapeHandle out = c->Vector(c->Dim(x, 0));
      TF_RETURN_IF_ERROR(WithLimbs(c, out, &out));
      c->set_output(0, out);
      return ::tensorflow::OkStatus();
    })
    .Doc("Sums a logical [outer, inner] ring matrix over its last axis.");

REGISTER_OP("TfPrivpy>RingBilinear")
    .Input("x: int64")
    .Input("y: int64")
    .Output("z: int64")
    .Attr("ring_bits: int")
    .Attr("kind: {'mul', 'matmul', 'conv2d'}")
    .Attr("strides: list(int) = [1, 1]")
    .Attr("padding: list(int) = [0, 0, 0, 0]")
    .Attr("truncate_party: int = -1")
    .Attr("frac_bits: int = 0")
    .SetShapeFn([](InferenceContext* c) { return BilinearShapeFn(c, 0, 1); })
    .Doc("Local bilinear product of ring tensors (elementwise, batched "
         "matmul, or NHWC x HWIO conv2d with explicit padding "
         "[top, bottom, left, right]); optionally truncates the result as "
         "share `truncate_party` (0 or 1; -1: no truncation).");

}  // namespace tf_privpy
