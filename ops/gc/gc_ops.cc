// Op registrations of the garbled circuits: ONE op set for every circuit of
// the table (circuit_table.h), chosen by the `circuit` attribute:
// PrivPy's comparison (PrivPy §5.3, Protocol 2; DESIGN §6; garble.h), the
// leading-one encoder (leading_one.h) and the window-thresholds circuit
// (thresholds.h) of issue 14. The protocol (protocols/mpc/privpy/
// circuits.py) runs them alike:
//   GcGarble   on S1:      tables [count, G, 4] and decode bits of a slice
//                          of a batch of n (T1's or T2's part).
//   GcEncode   on S1, S2:  active labels [count, W, 2] of one's own input
//                          (role 'a': S1's x1; role 'b': S2's x2, negated by
//                          the caller for the comparator).
//   GcEvaluate on T1/T2:   the masked output bits.
//   GcMask     on S1, S2:  the output masks.
// Output bits (decode, evaluated bits, masks) are [n, K], or [n] for a
// one-bit circuit (the comparator). G, W and K come from the table's row.
// Kernels: gc_kernels.cc. A 128-bit label or ciphertext is an int64 pair
// (lo, hi), little-endian.
#include "ops/gc/circuit_table.h"
#include "ops/gc/gc_attrs.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// The circuit's row and parameters; invalid ones are shape-function errors.
struct Circuit {
  const gc::CircuitDescriptor* row = nullptr;
  gc::CircuitParams p;
  int gates() const { return row->gates(p); }
  ShapeHandle Bits(InferenceContext* c, DimensionHandle n) const {
    return row->one_bit ? c->Vector(n) : c->MakeShape({n, row->outputs(p)});
  }
};

Status ReadCircuit(InferenceContext* c, Circuit* circuit) {
  return gc_attrs::ReadCircuit(c, &circuit->row, &circuit->p);
}

// Inputs 0, 1: key12 (int64[2]) and a scalar nonce.
Status CheckKeyNonce(InferenceContext* c) {
  ShapeHandle s;
  DimensionHandle d;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &s));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 0), 2, &d));
  return c->WithRank(c->input(1), 0, &s);
}

// Scalar inputs [first, last].
Status CheckScalars(InferenceContext* c, int first, int last) {
  ShapeHandle s;
  for (int i = first; i <= last; ++i) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &s));
  return ::tensorflow::OkStatus();
}

// Checks input i is [n, d1, d2] and merges its n into *n.
Status MergeBatch(InferenceContext* c, int i, int64_t d1, int64_t d2, DimensionHandle* n) {
  ShapeHandle s;
  DimensionHandle d;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 3, &s));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 1), d1, &d));
  TF_RETURN_IF_ERROR(c->WithValue(c->Dim(s, 2), d2, &d));
  return c->Merge(*n, c->Dim(s, 0), n);
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
    .TF_PRIVPY_GC_CIRCUIT_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      Circuit circuit;
      TF_RETURN_IF_ERROR(ReadCircuit(c, &circuit));
      TF_RETURN_IF_ERROR(CheckKeyNonce(c));
      TF_RETURN_IF_ERROR(CheckScalars(c, 2, 4));
      DimensionHandle count;
      TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(4, &count));
      c->set_output(0, c->MakeShape({count, circuit.gates(), 4}));
      c->set_output(1, circuit.Bits(c, count));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 (DESIGN §6 step 1): garbles elements [first_index, first_index + "
         "count) of a batch of n circuits with the secrets of the (key12, "
         "nonce) S1-S2 stream. tables[i, g] = (TG.lo, TG.hi, TE.lo, TE.hi), "
         "the half-gates ciphertexts of AND gate g of element first_index + i; "
         "decode[i, k] (decode[i] for a one-bit circuit) = lsb(zero label of "
         "output k) XOR m[first_index + i, k].");

REGISTER_OP("TfPrivpy>GcEncode")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("values: int64")
    .Input("n: int64")
    .Input("first_index: int64")
    .Output("labels: int64")
    .Attr("role: {'a', 'b'}")
    .TF_PRIVPY_GC_CIRCUIT_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      Circuit circuit;
      TF_RETURN_IF_ERROR(ReadCircuit(c, &circuit));
      TF_RETURN_IF_ERROR(CheckKeyNonce(c));
      ShapeHandle v;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &v));
      TF_RETURN_IF_ERROR(CheckScalars(c, 3, 4));
      c->set_output(0, c->MakeShape({c->Dim(v, 0), circuit.p.width, 2}));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 (role 'a', values = the low 64 bits of its share x1) or S2 "
         "(role 'b', values = those of x2; of -x2 for the comparator): "
         "labels[i, k] = (lo, hi) of the active label of input bit k of "
         "values[i] (the low `width` bits; the comparator flips the sign bit "
         "to compare as signed integers), element first_index + i of a "
         "garbled batch of n (GcGarble's n).");

REGISTER_OP("TfPrivpy>GcEvaluate")
    .Input("tables: int64")
    .Input("decode: uint8")
    .Input("labels_a: int64")
    .Input("labels_b: int64")
    .Input("nonce: int64")
    .Input("first_index: int64")
    .Output("bits: uint8")
    .TF_PRIVPY_GC_CIRCUIT_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      Circuit circuit;
      TF_RETURN_IF_ERROR(ReadCircuit(c, &circuit));
      DimensionHandle n = c->UnknownDim();
      TF_RETURN_IF_ERROR(MergeBatch(c, 0, circuit.gates(), 4, &n));
      TF_RETURN_IF_ERROR(MergeBatch(c, 2, circuit.p.width, 2, &n));
      TF_RETURN_IF_ERROR(MergeBatch(c, 3, circuit.p.width, 2, &n));
      ShapeHandle d;
      TF_RETURN_IF_ERROR(c->Merge(c->input(1), circuit.Bits(c, n), &d));
      TF_RETURN_IF_ERROR(c->Merge(n, c->Dim(d, 0), &n));
      TF_RETURN_IF_ERROR(CheckScalars(c, 4, 5));
      c->set_output(0, circuit.Bits(c, n));
      return ::tensorflow::OkStatus();
    })
    .Doc("T1/T2 (DESIGN §6 step 3): evaluates garbled circuits; bits[i, k] "
         "(bits[i] for a one-bit circuit) = out_k XOR m[i, k] in {0, 1}: the "
         "comparator's out = [x1 < -x2] (signed int64), the leading-one and "
         "thresholds outputs of leading_one.h and thresholds.h. nonce (public) "
         "only feeds the hash tweaks. The inputs may be a slice of GcGarble's "
         "batch (T1 and T2 each evaluate part of it): row i is element "
         "first_index + i of that batch, which fixes the tweaks of its gates.");

REGISTER_OP("TfPrivpy>GcMask")
    .Input("key12: int64")
    .Input("nonce: int64")
    .Input("n: int64")
    .Output("m: uint8")
    .TF_PRIVPY_GC_CIRCUIT_ATTRS
    .SetShapeFn([](InferenceContext* c) {
      Circuit circuit;
      TF_RETURN_IF_ERROR(ReadCircuit(c, &circuit));
      TF_RETURN_IF_ERROR(CheckKeyNonce(c));
      TF_RETURN_IF_ERROR(CheckScalars(c, 2, 2));
      DimensionHandle n;
      TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(2, &n));
      c->set_output(0, circuit.Bits(c, n));
      return ::tensorflow::OkStatus();
    })
    .Doc("S1 and S2 (DESIGN §6 step 5): the output masks m[i, k] (m[i] for a "
         "one-bit circuit) in {0, 1} of the n circuits garbled with (key12, "
         "nonce) and these parameters.");

}  // namespace tf_privpy
