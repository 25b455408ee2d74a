// Shape function shared by every op whose output is a bilinear product of
// inputs `x_index` and `y_index` (RingBilinear, MulAssist, MulFinish).
#ifndef TF_PRIVPY_OPS_RING_BILINEAR_SHAPE_FN_H_
#define TF_PRIVPY_OPS_RING_BILINEAR_SHAPE_FN_H_

#include <string>
#include <vector>

#include "ops/ring/bilinear.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf_privpy {

// Reads kind/strides/padding attrs into a spec.
template <typename Ctx>
::tensorflow::Status ReadBilinearSpec(Ctx* c, BilinearSpec* spec) {
  std::string kind;
  std::vector<int32_t> strides, padding;
  TF_RETURN_IF_ERROR(c->GetAttr("kind", &kind));
  TF_RETURN_IF_ERROR(c->GetAttr("strides", &strides));
  TF_RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  if (!ParseBilinearKind(kind, &spec->kind))
    return ::tensorflow::errors::InvalidArgument("unknown kind ", kind);
  if (strides.size() != 2 || padding.size() != 4)
    return ::tensorflow::errors::InvalidArgument(
        "strides needs 2 values and padding 4 (top, bottom, left, right)");
  spec->stride_h = strides[0];
  spec->stride_w = strides[1];
  spec->pad_top = padding[0];
  spec->pad_bottom = padding[1];
  spec->pad_left = padding[2];
  spec->pad_right = padding[3];
  return ::tensorflow::OkStatus();
}

inline ::tensorflow::Status BilinearShapeFn(
    ::tensorflow::shape_inference::InferenceContext* c, int x_index,
    int y_index) {
  using ::tensorflow::shape_inference::ShapeHandle;
  int bits;
  TF_RETURN_IF_ERROR(c->GetAttr("ring_bits", &bits));
  BilinearSpec spec;
  TF_RETURN_IF_ERROR(ReadBilinearSpec(c, &spec));
  ShapeHandle xs = c->input(x_index), ys = c->input(y_index);
  if (!c->FullyDefined(xs) || !c->FullyDefined(ys)) {
    c->set_output(0, c->UnknownShape());
    return ::tensorflow::OkStatus();
  }
  const int limb = bits == 128 ? 1 : 0;
  std::vector<int64_t> x, y, out;
  for (int i = 0; i < c->Rank(xs) - limb; ++i)
    x.push_back(c->Value(c->Dim(xs, i)));
  for (int i = 0; i < c->Rank(ys) - limb; ++i)
    y.push_back(c->Value(c->Dim(ys, i)));
  std::string error;
  if (!BilinearOutputShape(spec, x, y, &out, &error))
    return ::tensorflow::errors::InvalidArgument(error);
  if (limb) out.push_back(2);
  std::vector<::tensorflow::shape_inference::DimensionHandle> dims;
  for (int64_t d : out) dims.push_back(c->MakeDim(d));
  c->set_output(0, c->MakeShape(dims));
  return ::tensorflow::OkStatus();
}

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_RING_BILINEAR_SHAPE_FN_H_
