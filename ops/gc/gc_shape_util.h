// Shape-function helpers shared by the op registrations of the garbled
// circuits with W input bits and K outputs per element (leading_one_ops.cc,
// thresholds_ops.cc).
#ifndef TF_PRIVPY_OPS_GC_GC_SHAPE_UTIL_H_
#define TF_PRIVPY_OPS_GC_GC_SHAPE_UTIL_H_

#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {
namespace gc_shapes {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Inputs 0, 1: key12 (int64[2]) and a scalar nonce.
inline Status CheckKeyNonce(InferenceContext* c) {
  ShapeHandle s;
  DimensionHandle d;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &s));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 0), 2, &d));
  return c->WithRank(c->input(1), 0, &s);
}

// Inputs (key12, nonce, n) of the garbling and mask ops; *n from n's value.
inline Status CheckKeyNonceN(InferenceContext* c, DimensionHandle* n) {
  TF_RETURN_IF_ERROR(CheckKeyNonce(c));
  ShapeHandle s;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &s));
  return c->MakeDimForScalarInput(2, n);
}

// Inputs (key12, nonce, n, first_index, count) of the garbling ops, which
// make a slice of a batch (gc::BatchSlice); *count from count's value.
inline Status CheckKeyNonceSlice(InferenceContext* c, DimensionHandle* count) {
  DimensionHandle n;
  TF_RETURN_IF_ERROR(CheckKeyNonceN(c, &n));
  ShapeHandle s;
  for (int i : {3, 4}) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &s));
  return c->MakeDimForScalarInput(4, count);
}

// Evaluation ops (tables [n, G, 4], decode [n, K], labels_a, labels_b
// [n, W, 2], ...): output 0 is [n, K].
inline Status EvaluateShape(InferenceContext* c, int outputs) {
  ShapeHandle s;
  DimensionHandle n = c->UnknownDim(), d;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &s));
  TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(s, 0), &n));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &s));
  TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(s, 0), &n));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 1), outputs, &d));
  for (int i : {2, 3}) {
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 3, &s));
    TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(s, 0), &n));
  }
  c->set_output(0, c->MakeShape({n, outputs}));
  return ::tensorflow::OkStatus();
}

}  // namespace gc_shapes
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_GC_SHAPE_UTIL_H_
