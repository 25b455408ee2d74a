// Op registration of the stats family: traffic counters kept in TF state.
// Kernel: stats_kernels.cc.
//
// Why a kernel: a channel counts every message it carries (messages and
// bytes per link, per run). Built from stock ops that took a Const and an
// AssignAddVariableOp per message, and for tensors of sizes unknown while
// tracing a Size, a Mul and a Const per tensor plus an AddN and a Pack: a
// graph's trace and first call cost per op, and a sort loop's body was a
// fifth counters. This op is the whole update in one.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

REGISTER_OP("TfPrivpy>CountMessage")
    .Input("counter: resource")
    .Input("tensors: types")
    .Attr("types: list(type) >= 0")
    .Attr("static_bytes: int >= 0")
    .SetIsStateful()
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext*) {
      return ::tensorflow::OkStatus();
    })
    .Doc("Adds [1, static_bytes + the bytes of `tensors`] to the int64[2] "
         "variable `counter` (one message of that many bytes), atomically. "
         "A tensor's bytes are its elements times its dtype's size, for "
         "strings the sum of their lengths. The values are not read.");

}  // namespace tf_privpy
