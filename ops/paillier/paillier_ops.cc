// Op registrations of the Paillier family (DESIGN §9). Kernels:
// paillier_{encrypt,arith,decrypt}_kernels.cc (helpers in
// paillier_kernel_util.h); math, conventions and side-channel notes: paillier.h.
//
// Representation. A big integer is a tf.string element holding its
// big-endian unsigned bytes:
//   n, p, q        string scalars, minimal bytes (first byte non-zero);
//   ciphertexts    exactly 2 ceil(bits(n) / 8) bytes each, values in Z*_{n^2};
//   plaintexts     T = int64 (signed, |x| < n/2, x < 0 encoded as n + x like
//                  phe) or T = string (unsigned big integers in [0, n), 1 to
//                  ceil(bits(n) / 8) bytes in, exactly that many out).
// Every element-wise op works on same-shape inputs (the Python layer
// broadcasts) and runs over elements on the TF CPU thread pool. Ops that
// draw randomness (from the OS CSPRNG only) are stateful, so TF never folds
// or merges two calls.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

using ::tensorflow::Status;
using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

namespace {

// Inputs [0, count) are key scalars (n; or n, p, q).
Status KeyScalars(InferenceContext* c, int count) {
  ShapeHandle s;
  for (int i = 0; i < count; ++i) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &s));
  return ::tensorflow::OkStatus();
}

// Key scalars, then output 0 = input `data` (element-wise unary op).
Status KeyThenSame(InferenceContext* c, int keys, int data) {
  TF_RETURN_IF_ERROR(KeyScalars(c, keys));
  c->set_output(0, c->input(data));
  return ::tensorflow::OkStatus();
}

// Key scalars, then output 0 = merge of two same-shape inputs.
Status KeyThenMerge(InferenceContext* c, int keys, int a, int b) {
  TF_RETURN_IF_ERROR(KeyScalars(c, keys));
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->Merge(c->input(a), c->input(b), &out));
  c->set_output(0, out);
  return ::tensorflow::OkStatus();
}

// Key scalars, then a count scalar at input `count`; output 0 = [count].
Status KeyThenCount(InferenceContext* c, int keys) {
  TF_RETURN_IF_ERROR(KeyScalars(c, keys));
  ShapeHandle s;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(keys), 0, &s));
  DimensionHandle n;
  TF_RETURN_IF_ERROR(c->MakeDimForScalarInput(keys, &n));
  c->set_output(0, c->Vector(n));
  return ::tensorflow::OkStatus();
}

}  // namespace

REGISTER_OP("TfPrivpy>PaillierKeygen")
    .Output("n: string")
    .Output("p: string")
    .Output("q: string")
    .Attr("bits: int = 2048")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < 3; ++i) c->set_output(i, c->Scalar());
      return ::tensorflow::OkStatus();
    })
    .Doc("A fresh Paillier key of `bits` bits (even, 1024 to 16384): n = p q "
         "with p, q primes of bits/2 bits, n of exactly `bits` bits, "
         "gcd(n, (p-1)(q-1)) = 1; g = n + 1 is implied. Minimal big-endian "
         "bytes. Randomness from the OS CSPRNG; p and q are searched in "
         "parallel.");

REGISTER_OP("TfPrivpy>PaillierEncrypt")
    .Input("n: string")
    .Input("plaintext: T")
    .Output("ciphertext: string")
    .Attr("T: {int64, string}")
    .Attr("method: {'generic', 'djn'} = 'generic'")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return KeyThenSame(c, 1, 1); })
    .Doc("Public-key encryption (1 + m n) noise mod n^2. method 'generic': "
         "noise r^n, r uniform in Z*_n from the OS CSPRNG (one exponent of "
         "bits(n) bits mod n^2, as phe). method 'djn': DJN fixed-base noise "
         "hs^a, a of bits(n)/2 bits (several times faster; rests on DJN's "
         "extra assumption, see paillier.h).");

REGISTER_OP("TfPrivpy>PaillierEncryptCrt")
    .Input("n: string")
    .Input("p: string")
    .Input("q: string")
    .Input("plaintext: T")
    .Output("ciphertext: string")
    .Attr("T: {int64, string}")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return KeyThenSame(c, 3, 3); })
    .Doc("Encryption by the private-key holder: the noise is CRT(a_p, a_q) "
         "with a_p uniform in the order-(p-1) subgroup of Z*_{p^2}, exactly "
         "distributed as r^n mod n^2 (proof in paillier.cc). a_p = w_p^k from "
         "a per-key fixed-base table (w_p a generator, k uniform in [0, p-1)) "
         "when p - 1 factors, as for keys of PaillierKeygen; else s^p mod p^2 "
         "(s uniform in [1, p)). Ciphertexts are ordinary Paillier "
         "ciphertexts of n.");

REGISTER_OP("TfPrivpy>PaillierNoise")
    .Input("n: string")
    .Input("count: int64")
    .Output("noise: string")
    .Attr("method: {'generic', 'djn'} = 'generic'")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return KeyThenCount(c, 1); })
    .Doc("`count` fresh noise values (each an encryption of 0; r^n mod n^2, "
         "or DJN's hs^a with method 'djn') for a precomputed pool; each must "
         "be used once (PaillierEncryptWithNoise, or PaillierAdd to "
         "rerandomize).");

REGISTER_OP("TfPrivpy>PaillierNoiseCrt")
    .Input("n: string")
    .Input("p: string")
    .Input("q: string")
    .Input("count: int64")
    .Output("noise: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return KeyThenCount(c, 3); })
    .Doc("PaillierNoise for the private-key holder (the CRT noise of "
         "PaillierEncryptCrt).");

REGISTER_OP("TfPrivpy>PaillierEncryptWithNoise")
    .Input("n: string")
    .Input("plaintext: T")
    .Input("noise: string")
    .Output("ciphertext: string")
    .Attr("T: {int64, string}")
    .SetShapeFn([](InferenceContext* c) { return KeyThenMerge(c, 1, 1, 2); })
    .Doc("(1 + m n) noise mod n^2 with precomputed noise (same shape as the "
         "plaintext). Deterministic: the caller must never use a noise value "
         "twice. Noise values are checked to be in Z*_{n^2}; whether they are "
         "n-th residues cannot be checked without the private key.");

REGISTER_OP("TfPrivpy>PaillierDecrypt")
    .Input("n: string")
    .Input("p: string")
    .Input("q: string")
    .Input("ciphertext: string")
    .Output("plaintext: out_type")
    .Attr("out_type: {int64, string} = DT_INT64")
    .SetShapeFn([](InferenceContext* c) { return KeyThenSame(c, 3, 3); })
    .Doc("CRT decryption (per-key precomputation cached, keyed by the key). "
         "out_type int64: the signed value (m if m <= (n-1)/2, else m - n); an "
         "error if it does not fit in int64. out_type string: m in [0, n). "
         "Ciphertexts not in Z*_{n^2} are errors naming the element.");

REGISTER_OP("TfPrivpy>PaillierAdd")
    .Input("n: string")
    .Input("a: string")
    .Input("b: string")
    .Output("sum: string")
    .SetShapeFn([](InferenceContext* c) { return KeyThenMerge(c, 1, 1, 2); })
    .Doc("Homomorphic addition a b mod n^2, element-wise on same-shape inputs.");

REGISTER_OP("TfPrivpy>PaillierMulPlain")
    .Input("n: string")
    .Input("ciphertext: string")
    .Input("k: T")
    .Output("product: string")
    .Attr("T: {int64, string}")
    .SetShapeFn([](InferenceContext* c) { return KeyThenMerge(c, 1, 1, 2); })
    .Doc("Multiplication by a plaintext: c^k mod n^2 (k < 0 through c^-1), "
         "element-wise on same-shape inputs. k = 0 gives 1, the encryption of "
         "0 with noise 1 (rerandomize before sending it anywhere).");

REGISTER_OP("TfPrivpy>PaillierRerandomize")
    .Input("n: string")
    .Input("ciphertext: string")
    .Output("rerandomized: string")
    .Attr("method: {'generic', 'djn'} = 'generic'")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) { return KeyThenSame(c, 1, 1); })
    .Doc("c times fresh noise (method as in PaillierEncrypt): the same "
         "plaintext, unlinkable noise.");

REGISTER_OP("TfPrivpy>PaillierReduceSum")
    .Input("n: string")
    .Input("ciphertext: string")
    .Output("sum: string")
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(KeyScalars(c, 1));
      ShapeHandle s;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &s));
      c->set_output(0, c->Vector(c->Dim(s, 0)));
      return ::tensorflow::OkStatus();
    })
    .Doc("Homomorphic sum of each row of an [outer, inner] ciphertext matrix: "
         "[outer] products mod n^2, split over rows and row chunks on the "
         "thread pool. An empty row sums to 1 (the encryption of 0 with noise 1).");

REGISTER_OP("TfPrivpy>PaillierValidate")
    .Input("n: string")
    .Input("ciphertext: string")
    .Output("valid: bool")
    .SetShapeFn([](InferenceContext* c) { return KeyThenSame(c, 1, 1); })
    .Doc("True where an element is a well-formed ciphertext of n: exactly "
         "2 ceil(bits(n) / 8) bytes and in Z*_{n^2} (0 < c < n^2, gcd(c, n) = "
         "1). Whether c encrypts under this n (rather than another key of the "
         "same size) cannot be decided without the private key.");

}  // namespace tf_privpy
