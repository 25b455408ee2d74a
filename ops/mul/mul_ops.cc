// Op registrations of PrivPy's four-server multiplication (PrivPy §5.1,
// Protocol 1; DESIGN §5). One op per protocol step and device role:
//   MulMask   on S1/S2: mask own shares with S1-S2 PRG masks (no message).
//   MulAssist on T1/T2: product of the two masked operands minus a mask
//                       shared with one server.
//   MulFinish on S1/S2: combine, add the assistant's message, truncate.
// `kind` selects the bilinear product (elementwise, matmul, conv2d), since
// the protocol works unchanged for any bilinear map.
#include "ops/ring/bilinear_shape_fn.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::shape_inference::InferenceContext;

#define TF_PRIVPY_BILINEAR_ATTRS                 \
  Attr("kind: {'mul', 'matmul', 'conv2d'}")      \
      .Attr("strides: list(int) = [1, 1]")       \
      .Attr("padding: list(int) = [0, 0, 0, 0]")

REGISTER_OP("TfPrivpy>MulMask")
    .Input("x: int64")
    .Input("y: int64")
    .Input("key12: int64")
    .Input("nonce12: int64")
    .Output("x_masked: int64")
    .Output("y_masked: int64")
    .Attr("ring_bits: int")
    .Attr("party: int")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(1));
      return ::tensorflow::OkStatus();
    })
    .Doc("Step 2 of DESIGN §5 on server `party` (0 = S1, 1 = S2): "
         "x + rx_party, y + ry_party with masks from the S1-S2 stream.");

REGISTER_OP("TfPrivpy>MulAssist")
    .Input("left: int64")
    .Input("right: int64")
    .Input("key: int64")
    .Input("nonce: int64")
    .Output("message: int64")
    .Attr("ring_bits: int")
    .TF_PRIVPY_BILINEAR_ATTRS
    .SetShapeFn([](InferenceContext* c) { return BilinearShapeFn(c, 0, 1); })
    .Doc("Step 3 of DESIGN §5 on an assistant: left (*) right - u, u from "
         "the stream the assistant shares with the receiving server's peer.");

REGISTER_OP("TfPrivpy>MulFinish")
    .Input("x: int64")
    .Input("y: int64")
    .Input("x_masked: int64")
    .Input("message: int64")
    .Input("key12: int64")
    .Input("nonce12: int64")
    .Input("key_t: int64")
    .Input("nonce_t: int64")
    .Output("z: int64")
    .Attr("ring_bits: int")
    .Attr("party: int")
    .Attr("frac_bits: int")
    .TF_PRIVPY_BILINEAR_ATTRS
    .SetShapeFn([](InferenceContext* c) { return BilinearShapeFn(c, 0, 1); })
    .Doc("Steps 4-5 of DESIGN §5 on server `party`: "
         "(x - rx_other) (*) y - x_masked (*) ry_other + u + message, then "
         "local truncation by frac_bits (0: none).");

}  // namespace tf_privpy
