// Op registrations of the garbled-circuit family: PrivPy's comparison
// (PrivPy §5.3, Protocol 2; DESIGN §6) as a half-gates garbled comparator
// with no oblivious transfer. Kernels: gc_kernels.cc; math, circuit, hash
// and the S1-S2 stream layout: garble.h.
//   GcGarble      on S1:     garbled tables of n comparators + decode bits.
//   GcEncodeInput on S1, S2: active labels of one's own input (S1: role y,
//                            values x1; S2: role x, values -x2).
//   GcEvaluate    on T1/T2:  b' = [y < x] XOR m (signed 64-bit compare).
//   GcOutputMask  on S1, S2: the mask m.
// A 128-bit label or ciphertext is an int64 pair (lo, hi), little-endian.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// key12 (int64[2]) at input `key`, a scalar nonce at input `nonce`.
Status CheckKeyNonce(InferenceContext* c, int key, int nonce) {
  ShapeHandle s;
  DimensionHandle d;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(key), 1, &s));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 0), 2, &d));
  return c->WithRank(c->input(nonce), 0, &s);
}

// Checks input i is [n, 64, width] and merges its n into *n.
Status MergeBatch(InferenceContext* c, int i, int width, DimensionHandle* n) {
  ShapeHandle s;
  DimensionHandle d;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 3, &s));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 1), 64, &d));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 2), width, &d));
  return c->Merge(*n, c->Dim(s, 0), n);
}

// Inputs (key12, nonce, n scalar) of GcGarble and GcOutputMask; *n = n.
Status KeyNonceBatch(InferenceContext* c, DimensionHandle* n) {
  TF_RETURN_IF_ERROR(CheckKeyNonce(c, 0, 1));
  ShapeHandle s;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &s));
  return c->MakeDimForScalarInput(2, n);
}

}  // namespace

REGISTER_OP("TfPrivpy>GcGarble")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("n: int64")
    .Input("first_index: int64")
    .Input("count: int64")
    .Output("tables: int64")
    .Output("decode: uint8")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle n, count;
      TF_RETURN_IF_ERROR(KeyNonceBatch(c, &n));
      ShapeHandle s;
      for (int i : {3, 4}) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &s));
      TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(4, &count));
      c->set_output(0, c->MakeShape({count, 64, 4}));
      c->set_output(1, c->Vector(count));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 (DESIGN §6 step 1): garbles comparisons [first_index, "
         "first_index + count) of a batch of n 64-bit comparators with the "
         "secrets of the (key12, nonce) S1-S2 stream. tables[i, g] = "
         "(TG.lo, TG.hi, TE.lo, TE.hi), the half-gates ciphertexts of AND "
         "gate g of comparison first_index + i; decode[i] = lsb(zero label of "
         "the output wire) XOR m[first_index + i].");

REGISTER_OP("TfPrivpy>GcEncodeInput")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("values: int64")
    .Input("n: int64")
    .Input("first_index: int64")
    .Output("labels: int64")
    .Attr("role: {'x', 'y'}")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(CheckKeyNonce(c, 0, 1));
      ShapeHandle v, s;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &v));
      for (int i : {3, 4}) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &s));
      c->set_output(0, c->MakeShape({c->Dim(v, 0), 64, 2}));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 (role 'y', values = its share x1) or S2 (role 'x', values = "
         "-x2, negated by the caller): labels[i, g] = (lo, hi) of the active "
         "label of bit g (LSB first) of values[i] XOR 2^63 (the sign flip "
         "makes the circuit's unsigned compare a signed one), comparison "
         "first_index + i of a garbled batch of n (GcGarble's n).");

REGISTER_OP("TfPrivpy>GcEvaluate")
    .Input("tables: int64")
    .Input("decode: uint8")
    .Input("labels_x: int64")
    .Input("labels_y: int64")
    .Input("nonce: int64")
    .Input("first_index: int64")
    .Output("bits: uint8")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle n = c->UnknownDim();
      TF_RETURN_IF_ERROR(MergeBatch(c, 0, 4, &n));
      ShapeHandle d;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &d));
      TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(d, 0), &n));
      TF_RETURN_IF_ERROR(MergeBatch(c, 2, 2, &n));
      TF_RETURN_IF_ERROR(MergeBatch(c, 3, 2, &n));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 0, &d));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 0, &d));
      c->set_output(0, c->Vector(n));
      return ::tensorflow::OkStatus();
    })
    .Doc("T1/T2 (DESIGN §6 step 3): evaluates the garbled comparators; "
         "bits[i] = [values_y[i] < values_x[i]] (signed int64) XOR m[i], in "
         "{0, 1}. nonce (public) only feeds the hash tweaks. The inputs may "
         "be a slice of GcGarble's batch (T1 and T2 each evaluate part of "
         "it): row k is comparison first_index + k of that batch (an int64 "
         "scalar: 0 for a whole batch or its first part), which fixes the "
         "tweaks of its gates.");

REGISTER_OP("TfPrivpy>GcOutputMask")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("n: int64")
    .Output("m: uint8")
    .SetShapeFn([](InferenceContext* c) {
      DimensionHandle n;
      TF_RETURN_IF_ERROR(KeyNonceBatch(c, &n));
      c->set_output(0, c->Vector(n));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 and S2 (DESIGN §6 step 5): the output masks m[i] in {0, 1} of "
         "the n comparisons garbled with (key12, nonce).");

}  // namespace tf_privpy
