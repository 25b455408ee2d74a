// The attributes of the garbled-circuit op set (gc_ops.cc), read the same
// way by the shape functions (InferenceContext) and the kernels
// (OpKernelConstruction): `circuit` picks a row of the circuit table
// (circuit_table.h), the others are its parameters.
#ifndef TF_PRIVPY_OPS_GC_GC_ATTRS_H_
#define TF_PRIVPY_OPS_GC_GC_ATTRS_H_

#include <string>
#include <vector>

#include "ops/gc/circuit_table.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/platform/status.h"

namespace tf_privpy {
namespace gc_attrs {

// The attribute declarations every op of the set carries (appended to a
// REGISTER_OP chain; the defaults are CircuitParams's).
#define TF_PRIVPY_GC_CIRCUIT_ATTRS                  \
  Attr("circuit: string")                           \
      .Attr("width: int = 0")                       \
      .Attr("magnitude: bool = false")              \
      .Attr("columns: list(int) = []")              \
      .Attr("lo: int = 0")                          \
      .Attr("window: int = 0")                      \
      .Attr("points: list(int) = []")

// The row and its checked parameters (width resolved) from the attributes
// of an op (Ctx: InferenceContext or OpKernelConstruction); an unknown
// circuit or invalid parameters are InvalidArgument.
template <class Ctx>
::tensorflow::Status ReadCircuit(Ctx* c, const gc::CircuitDescriptor** row,
                                 gc::CircuitParams* p) {
  std::string name;
  TF_RETURN_IF_ERROR(c->GetAttr("circuit", &name));
  *row = gc::FindCircuit(name);
  if (*row == nullptr)
    return ::tensorflow::errors::InvalidArgument("unknown garbled circuit '", name,
                                                 "': the circuit attribute must be one of ",
                                                 gc::CircuitNames());
  std::vector<int64_t> points;
  TF_RETURN_IF_ERROR(c->GetAttr("width", &p->width));
  TF_RETURN_IF_ERROR(c->GetAttr("magnitude", &p->magnitude));
  TF_RETURN_IF_ERROR(c->GetAttr("columns", &p->columns));
  TF_RETURN_IF_ERROR(c->GetAttr("lo", &p->lo));
  TF_RETURN_IF_ERROR(c->GetAttr("window", &p->window));
  TF_RETURN_IF_ERROR(c->GetAttr("points", &points));
  p->points.assign(points.begin(), points.end());
  const std::string err = gc::ResolveCircuitParams(**row, p);
  if (!err.empty()) return ::tensorflow::errors::InvalidArgument(err);
  return ::tensorflow::OkStatus();
}

}  // namespace gc_attrs
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_GC_ATTRS_H_
