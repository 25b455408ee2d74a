// Op registrations of the bit-to-arithmetic family: the last steps of PrivPy's
// comparison (Protocol 2, DESIGN §6 steps 4-5). An assistant holds a bit
// b' = b XOR m; it shares b' arithmetically with the servers, who remove the
// mask m they both know. Kernels: b2a_kernels.cc.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfPrivpy>BitShareAssist")
    .Input("bits: uint8")
    .Input("key: int64")
    .Input("nonce: int64")
    .Output("message: int64")
    .Attr("ring_bits: int")
    .Attr("frac_bits: int")
    .SetShapeFn([](InferenceContext* c) {
      int bits;
      TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
      ShapeHandle s = c->input(0);
      if (bits == 128) TF_RETURN_IF_ERROR(c->Concatenate(s, c->Vector(2), &s));
      c->set_output(0, s);
      return ::tensorflow::OkStatus();
    })
    .Doc("On an assistant: b'·2^frac_bits - beta, beta from the stream it "
         "shares with one server (who takes beta as its share).");

REGISTER_OP("TfPrivpy>BitUnmask")
    .Input("share: int64")
    .Input("mask: uint8")
    .Output("z: int64")
    .Attr("ring_bits: int")
    .Attr("frac_bits: int")
    .Attr("party: int")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      return ::tensorflow::OkStatus();
    })
    .Doc("On server `party`: from a share s of b' = b XOR m, a share of b: "
         "(1 - 2m)·s, plus m·2^frac_bits on party 0.");

REGISTER_OP("TfPrivpy>BitUnmaskTable")
    .Input("shares: N * int64")
    .Input("mask: uint8")
    .Input("table: int64")
    .Output("z: int64")
    .Attr("N: int >= 1")
    .Attr("ring_bits: int")
    .Attr("party: int")
    .SetShapeFn([](InferenceContext* c) {
      int bits, parts;
      TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
      TF_RETURN_IF_ERROR(c->GetAttr("N", &parts));
      ShapeHandle mask, table;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(parts), 2, &mask));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(parts + 1), 2, &table));
      ShapeHandle s = c->Matrix(c->Dim(mask, 0), c->Dim(table, 1));
      if (bits == 128) TF_RETURN_IF_ERROR(c->Concatenate(s, c->Vector(2), &s));
      c->set_output(0, s);
      return ::tensorflow::OkStatus();
    })
    .Doc("On server `party`: BitUnmask of integer bits (frac_bits 0) whose "
         "shares come in N parts along axis 0 (T1's and T2's), fused with a "
         "public integer table: z[i, j] = sum_k b[i, k]·table[k, j] + "
         "table[K, j], without the [n, K] ring tensor of the bits.");

}  // namespace tf_privpy
