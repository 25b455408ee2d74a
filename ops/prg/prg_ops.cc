// Op registrations of the prg family: OS-CSPRNG keys, stream nonces (taken
// from counters, or once only), AES-CTR ring streams and client-side secret
// sharing. Kernels: prg_kernels.cc.
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("TfPrivpy>RandomKey")
    .Output("key: int64")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Vector(2));
      return ::tensorflow::OkStatus();
    })
    .Doc("A fresh 128-bit key from the OS CSPRNG (getrandom), as int64[2].");

REGISTER_OP("TfPrivpy>StreamNext")
    .Input("key: resource")
    .Input("counter: resource")
    .Output("key_value: int64")
    .Output("nonce: int64")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Vector(2));
      c->set_output(1, c->Scalar());
      return ::tensorflow::OkStatus();
    })
    .Doc("Reads a pair key variable and takes the next nonce of its stream: "
         "returns the counter's value and advances it by one, atomically. "
         "The counter lives in TF state, so every run of a traced function "
         "gets a fresh nonce (DESIGN §4).");

REGISTER_OP("TfPrivpy>StreamNextMany")
    .Input("keys: N * resource")
    .Input("counters: N * resource")
    .Output("key_values: N * int64")
    .Output("nonces: N * int64")
    .Attr("N: int >= 1")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      const int n = c->num_outputs() / 2;
      for (int i = 0; i < n; ++i) {
        c->set_output(i, c->Vector(2));
        c->set_output(n + i, c->Scalar());
      }
      return ::tensorflow::OkStatus();
    })
    .Doc("StreamNext of N streams held on one device, in one op (tracing "
         "and a graph's first run cost per op): each key read and each "
         "counter advanced by one, as N StreamNext ops would.");

REGISTER_OP("TfPrivpy>TakeOnce")
    .Input("fresh: resource")
    .Input("value: resource")
    .Output("taken: int64")
    .Attr("message: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return ::tensorflow::OkStatus();
    })
    .Doc("Takes a single-use int64 scalar: under the `fresh` bool variable's "
         "lock, checks that it is still true, sets it to false and returns "
         "`value`'s content; fails with InvalidArgument(`message`) if it was "
         "already false. One kernel, so two concurrent runs cannot both pass "
         "(a read, an assert and an assign can interleave). Guards the nonce "
         "of pregarbled comparators, which are single-use (DESIGN §6).");

REGISTER_OP("TfPrivpy>PrgRing")
    .Input("key: int64")
    .Input("nonce: int64")
    .Input("shape: int64")
    .Output("out: int64")
    .Attr("ring_bits: int")
    .Attr("offset: int = 0")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle s;
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(2, &s));
      int bits;
      TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
      if (bits == 128) TF_RETURN_IF_ERROR(c->Concatenate(s, c->Vector(2), &s));
      c->set_output(0, s);
      return ::tensorflow::OkStatus();
    })
    .Doc("Uniform ring elements from AES-128-CTR(key), stream `nonce`, "
         "starting at element `offset` of that stream.");

REGISTER_OP("TfPrivpy>ShareSplit")
    .Input("x: int64")
    .Output("share0: int64")
    .Output("share1: int64")
    .Attr("ring_bits: int")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(0));
      c->set_output(1, c->input(0));
      return ::tensorflow::OkStatus();
    })
    .Doc("Additive sharing x = share0 + share1: share0 is expanded by "
         "AES-CTR from a fresh 128-bit OS-CSPRNG seed per call.");

}  // namespace tf_privpy
