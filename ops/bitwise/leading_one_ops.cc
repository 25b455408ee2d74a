// Op registrations of the bitwise leading one (the protocol and its
// citations: leading_one.h; kernels: leading_one_kernels.cc). One element
// is one word: states [n, 6], messages [n, words of the step] (int64
// holding uint64 words), the outputs [n, K] ring integers (K columns).
#include <vector>

#include "ops/bitwise/leading_one.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;
namespace lo = ::tf_privpy::bitwise::lo;

namespace {

::tensorflow::Status ReadPlanWidth(InferenceContext* c, int* width) {
  TF_RETURN_IF_ERROR(c->GetAttr("width", width));
  if (*width < 3 || *width > lo::kMaxWidth)
    return ::tensorflow::errors::InvalidArgument("width must be in [3, ", lo::kMaxWidth,
                                                 "], got ", *width);
  return ::tensorflow::OkStatus();
}

// Output `out`: [n, K] ring integers ([n, K, 2] in the 128-bit ring), K the
// number of requested columns; `width` read and checked on the way.
::tensorflow::Status ColumnsOutput(InferenceContext* c, DimensionHandle n, int out,
                                   int* width) {
  int bits;
  std::vector<int> cols;
  TF_RETURN_IF_ERROR(ReadPlanWidth(c, width));
  TF_RETURN_IF_ERROR(c->GetAttr("columns", &cols));
  TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
  const int k = static_cast<int>(cols.size());
  c->set_output(out, bits == 128 ? c->MakeShape({n, c->MakeDim(k), c->MakeDim(2)})
                                 : c->Matrix(n, k));
  return ::tensorflow::OkStatus();
}

}  // namespace

REGISTER_OP("TfPrivpy>BwLeadingOneDeal")
    .Input("key_s1: int64")
    .Input("nonce_s1: int64")
    .Input("key_s2: int64")
    .Input("nonce_s2: int64")
    .Input("n: int64")
    .Output("corrections: int64")
    .Output("ring: int64")
    .Attr("width: int")
    .Attr("columns: list(int)")
    .Attr("magnitude: bool")
    .Attr("ring_bits: int")
    .SetShapeFn([](InferenceContext* c) {
      int width;
      DimensionHandle n;
      TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(4, &n));
      TF_RETURN_IF_ERROR(ColumnsOutput(c, n, 1, &width));
      c->set_output(0, c->Matrix(n, lo::Plan(width).CorrTotal()));
      return ::tensorflow::OkStatus();
    })
    .Doc("On the dealer T: regenerates S1's and S2's stream words for n "
         "elements from the streams it shares with each, and returns S2's "
         "corrections (its AND-product words) and S2's ring shares of the "
         "B2A mask's bits at the requested columns.");

REGISTER_OP("TfPrivpy>BwLeadingOneStep")
    .Input("state: int64")
    .Input("received: int64")
    .Input("key: int64")
    .Input("nonce: int64")
    .Input("corrections: int64")
    .Output("state_out: int64")
    .Output("message: int64")
    .Attr("width: int")
    .Attr("magnitude: bool")
    .Attr("step: int")
    .Attr("party: int")
    .SetShapeFn([](InferenceContext* c) {
      int width, step;
      TF_RETURN_IF_ERROR(ReadPlanWidth(c, &width));
      TF_RETURN_IF_ERROR(c->GetAttr("step", &step));
      const lo::Plan plan(width);
      if (step < 0 || step >= plan.Steps())
        return ::tensorflow::errors::InvalidArgument("step must be in [0, ", plan.Steps() - 1,
                                                     "], got ", step);
      ShapeHandle state;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), step == 0 ? 1 : 2, &state));
      DimensionHandle n = c->Dim(state, 0);
      c->set_output(0, c->Matrix(n, lo::kStateWords));
      c->set_output(1, c->Matrix(n, plan.MessageWords(step)));
      return ::tensorflow::OkStatus();
    })
    .Doc("Step `step` on server `party` (0: S1, 1: S2): step 0 takes the "
         "low words [n] of its shares as `state` (received: empty), later "
         "steps the state and the other server's previous message; returns "
         "the next state and this step's message (the last step: its share of "
         "the masked output word). `corrections` is the dealer's message on S2 "
         "(an empty tensor on S1 and at step 0).");

REGISTER_OP("TfPrivpy>BwLeadingOneFinish")
    .Input("own: int64")
    .Input("received: int64")
    .Input("key: int64")
    .Input("nonce: int64")
    .Input("ring: int64")
    .Output("z: int64")
    .Attr("width: int")
    .Attr("columns: list(int)")
    .Attr("magnitude: bool")
    .Attr("ring_bits: int")
    .Attr("party: int")
    .Attr("table: list(int) = []")
    .Attr("table_columns: int = 0")
    .SetShapeFn([](InferenceContext* c) {
      int width, j, bits;
      ShapeHandle own;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &own));
      TF_RETURN_IF_ERROR(ColumnsOutput(c, c->Dim(own, 0), 0, &width));
      TF_RETURN_IF_ERROR(c->GetAttr("table_columns", &j));
      if (j == 0) return ::tensorflow::OkStatus();
      TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
      const DimensionHandle n = c->Dim(own, 0);
      c->set_output(0, bits == 128 ? c->MakeShape({n, c->MakeDim(j), c->MakeDim(2)})
                                   : c->Matrix(n, j));
      return ::tensorflow::OkStatus();
    })
    .Doc("On server `party`: its integer shares [n, K] of the leading-one "
         "columns from both last-step messages and its ring shares of the "
         "mask's bits (S1: from its stream with T; S2: the dealer's `ring`, "
         "an empty tensor on S1). With `table_columns` J > 0, `table` is a "
         "public integer table [K + 1, J] (row-major) and the output is the "
         "shares [n, J] of bits @ table[:K] + table[K], the bits never "
         "stored (lo::FinishTable).");

}  // namespace tf_privpy
