// Op registration of the check family: a run-time check that passes a tensor
// through. Kernel: check_kernels.cc.
//
// Why not tf.raw_ops.Assert: Assert is stateful, and inside a tf.function
// TensorFlow's automatic control dependencies chain every stateful op that
// has no resource input in program order, whatever its device. The protocol
// checks run on different servers one after another (T1 checks a nonce, then
// S2 checks a sealed message's length, ...), so Assert put a control edge
// between servers into every round: on a 20 ms WAN a one-way trip more per
// round (the sealed LR step took 2 RTTs a round instead of 1). This op is
// stateless and returns its input, so it orders nothing but what consumes its
// output, and it cannot be pruned while that output is used.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

REGISTER_OP("TfPrivpy>Check")
    .Input("condition: bool")
    .Input("input: T")
    .Input("data: data_types")
    .Output("output: T")
    .Attr("T: type")
    .Attr("data_types: list(type) >= 0")
    .Attr("message: string")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      ::tensorflow::shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      c->set_output(0, c->input(1));
      return ::tensorflow::OkStatus();
    })
    .Doc("Returns `input` unchanged (no copy) when the scalar `condition` "
         "holds; otherwise fails the run with InvalidArgument: `message` "
         "followed by the values of `data`. Stateless, unlike Assert: see "
         "check_ops.cc for why that matters between servers.");

// Check of an equality, the condition computed in the kernel: the channel's
// stream checks compare two nonces, and an Equal op beside every check was
// one op more per message to trace and run.
REGISTER_OP("TfPrivpy>CheckEqual")
    .Input("own: int64")
    .Input("received: int64")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("message: string")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      ::tensorflow::shape_inference::ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->Merge(c->input(0), c->input(1), &unused));
      c->set_output(0, c->input(2));
      return ::tensorflow::OkStatus();
    })
    .Doc("Returns `input` unchanged (no copy) when `own` and `received` have "
         "the same shape and values; otherwise fails the run with "
         "InvalidArgument: `message` followed by the values of `own` and "
         "`received`. Stateless, as Check.");

}  // namespace tf_privpy
