// Op registrations of the bitwise comparison family (issue 26; the protocol
// and its citations: bitwise.h). Kernels: bitwise_kernels.cc. A batch of n
// comparisons is ceil(n / 64) blocks of 64; states [blocks, words of the
// step] (bitwise.h: StateWords), messages [blocks, words of the step]
// (int64 holding uint64 words).
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// bitwise.h's StateWords(step) and MessageWords(step)
constexpr int kStateWords[8] = {64, 129, 65, 33, 17, 9, 5, 3};
constexpr int kMessageWords[8] = {63, 95, 47, 23, 11, 5, 2, 1};

// [n] elements (or [n, 2] in the 128-bit ring) for an n given as a scalar input.
::tensorflow::Status RingOfScalar(InferenceContext* c, int n_input) {
  int bits;
  TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
  DimensionHandle n;
  TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(n_input, &n));
  ShapeHandle s = c->Vector(n);
  if (bits == 128) TF_RETURN_IF_ERROR(c->Concatenate(s, c->Vector(2), &s));
  c->set_output(0, s);
  return ::tensorflow::OkStatus();
}

}  // namespace

REGISTER_OP("TfPrivpy>BwDeal")
    .Input("key_s1: int64")
    .Input("nonce_s1: int64")
    .Input("key_s2: int64")
    .Input("nonce_s2: int64")
    .Input("n: int64")
    .Output("corrections: int64")
    .Output("ring: int64")
    .Attr("ring_bits: int")
    .Attr("frac_bits: int")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(RingOfScalar(c, 4));
      c->set_output(1, c->output(0));
      c->set_output(0, c->Vector(InferenceContext::kUnknownDim));
      return ::tensorflow::OkStatus();
    })
    .Doc("On the dealer T: regenerates S1's and S2's stream words of a batch of "
         "n comparisons from the streams it shares with each, and returns S2's "
         "corrections (its AND-product shares and r2 of level 0) and S2's ring "
         "share of r·2^frac_bits for each comparison's B2A bit r.");

REGISTER_OP("TfPrivpy>BwInput")
    .Input("low: int64")
    .Input("key: int64")
    .Input("nonce: int64")
    .Output("state: int64")
    .Output("message: int64")
    .Attr("party: int")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle low;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &low));
      DimensionHandle n = c->Dim(low, 0), blocks;
      TF_RETURN_IF_ERROR(c->Add(n, 63, &blocks));
      TF_RETURN_IF_ERROR(c->Divide(blocks, 64, /*evenly_divisible=*/false, &blocks));
      c->set_output(0, c->Matrix(blocks, kStateWords[0]));
      c->set_output(1, c->Matrix(blocks, kMessageWords[0]));
      return ::tensorflow::OkStatus();
    })
    .Doc("Step 0 on server `party`: the bit-sliced low halves of its shares "
         "(the state) and its level-0 message, masked by its stream with T.");

REGISTER_OP("TfPrivpy>BwStep")
    .Input("state: int64")
    .Input("received: int64")
    .Input("key: int64")
    .Input("nonce: int64")
    .Input("corrections: int64")
    .Output("state_out: int64")
    .Output("message: int64")
    .Attr("step: int")
    .Attr("party: int")
    .SetShapeFn([](InferenceContext* c) {
      int step;
      TF_RETURN_IF_ERROR(c->GetAttr("step", &step));
      if (step < 1 || step > 7)
        return ::tensorflow::errors::InvalidArgument("step must be in [1, 7], got ", step);
      ShapeHandle state;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &state));
      DimensionHandle blocks = c->Dim(state, 0);
      c->set_output(0, c->Matrix(blocks, kStateWords[step]));
      c->set_output(1, c->Matrix(blocks, kMessageWords[step]));
      return ::tensorflow::OkStatus();
    })
    .Doc("Step `step` (1-7) on server `party`: combines the other server's "
         "last message into its shares of the next tree level and returns its "
         "next message (step 7: its share of msb ^ r). `corrections` is the "
         "dealer's message on S2 (an empty tensor on S1).");

REGISTER_OP("TfPrivpy>BwFinish")
    .Input("own: int64")
    .Input("received: int64")
    .Input("key: int64")
    .Input("nonce: int64")
    .Input("ring: int64")
    .Input("n: int64")
    .Output("z: int64")
    .Attr("ring_bits: int")
    .Attr("frac_bits: int")
    .Attr("party: int")
    .SetShapeFn([](InferenceContext* c) { return RingOfScalar(c, 5); })
    .Doc("On server `party`: its arithmetic share of [x < 0]·2^frac_bits from "
         "both step-7 messages m and its share of r·2^frac_bits (S1: from its "
         "stream with T; S2: the dealer's `ring`, an empty tensor on S1).");

REGISTER_OP("TfPrivpy>BwSelect")
    .Input("own: int64")
    .Input("received: int64")
    .Input("v: int64")
    .Input("w: int64")
    .Output("y: int64")
    .Attr("ring_bits: int")
    .SetShapeFn([](InferenceContext* c) {
      int bits;
      TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
      ShapeHandle own, recv, v, w;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &own));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &recv));
      TF_RETURN_IF_ERROR(c->Merge(own, recv, &own));
      // [k, n] or [n] (k = 1), and the limbs
      const int limb = bits == 128 ? 1 : 0;
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(2), 1 + limb, &v));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(v, 2 + limb, &v));
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(3), 1 + limb, &w));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(w, 2 + limb, &w));
      TF_RETURN_IF_ERROR(c->Merge(v, w, &v));
      c->set_output(0, v);
      return ::tensorflow::OkStatus();
    })
    .Doc("On a server after a comparison's opening: its share of "
         "[x < 0]·v for k operands v [k, n] (or one, [n]) from both step-7 messages m "
         "(one word per block of 64 comparisons) and its share w of [r·v]: "
         "v - w where m = 1, w where m = 0.");

}  // namespace tf_privpy
