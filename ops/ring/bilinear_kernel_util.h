// Kernel-side helper shared by every op whose output is a bilinear product.
#ifndef TF_PRIVPY_OPS_RING_BILINEAR_KERNEL_UTIL_H_
#define TF_PRIVPY_OPS_RING_BILINEAR_KERNEL_UTIL_H_

#include <string>
#include <vector>

#include "ops/common/tf_util.h"
#include "ops/ring/bilinear.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_privpy {

// Validates the logical operand shapes xs (*) ys and allocates output 0 for
// the product; *out_shape receives its logical shape.
template <typename T>
tensorflow::Status AllocateBilinearOutput(tensorflow::OpKernelContext* ctx,
                                          const BilinearSpec& spec,
                                          const tensorflow::TensorShape& xs,
                                          const tensorflow::TensorShape& ys,
                                          tensorflow::TensorShape* out_shape,
                                          tensorflow::Tensor** out) {
  std::vector<int64_t> os;
  std::string error;
  if (!BilinearOutputShape(spec, ShapeDims(xs), ShapeDims(ys), &os, &error))
    return tensorflow::errors::InvalidArgument(error);
  *out_shape = tensorflow::TensorShape();
  for (int64_t d : os) out_shape->AddDim(d);
  return ctx->allocate_output(0, StorageShape<T>(*out_shape), out);
}

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_RING_BILINEAR_KERNEL_UTIL_H_
