// Bilinear maps over Z_2^l used by multiplication protocols: the PrivPy
// multiplication (DESIGN §5) works for any bilinear product, so one set of
// kernels serves elementwise products, (batched) matmul and conv2d.
#ifndef TF_PRIVPY_OPS_RING_BILINEAR_H_
#define TF_PRIVPY_OPS_RING_BILINEAR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/ring/ring_gemm.h"

namespace tf_privpy {

enum class BilinearKind { kMul, kMatMul, kConv2D };

// Static description of a bilinear product and its operand shapes.
struct BilinearSpec {
  BilinearKind kind = BilinearKind::kMul;
  // kConv2D only: strides (h, w) and explicit zero padding
  // (top, bottom, left, right); NHWC input, HWIO filter.
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// Parses kind strings "mul", "matmul", "conv2d".
bool ParseBilinearKind(const std::string& s, BilinearKind* kind);

// Validates operand shapes (logical, without limbs) and computes the output
// shape. kMul: equal shapes. kMatMul: [..., M, K] @ [..., K, N] with equal
// batch dims. kConv2D: [N, H, W, C] * [KH, KW, C, O]. On mismatch returns
// false with a message in *error.
bool BilinearOutputShape(const BilinearSpec& spec,
                         const std::vector<int64_t>& x,
                         const std::vector<int64_t>& y,
                         std::vector<int64_t>* out, std::string* error);

// out (=, +=, -=) x (*) y, shapes as validated by BilinearOutputShape.
template <typename T>
void Bilinear(const BilinearSpec& spec, const std::vector<int64_t>& xshape,
              const T* x, const std::vector<int64_t>& yshape, const T* y,
              T* out, GemmMode mode, const ParallelFor& parallel_for);

}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_RING_BILINEAR_H_
