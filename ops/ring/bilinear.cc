#include "ops/ring/bilinear.h"

#include <memory>

#include "ops/common/ring_types.h"

namespace tf_privpy {
namespace {

int64_t Product(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

std::string ShapeStr(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

template <typename T>
void Elementwise(const T* x, const T* y, T* out, int64_t n, GemmMode mode,
                 const ParallelFor& pf) {
  pf(n, 8, [&](int64_t b, int64_t e) {
    switch (mode) {
      case GemmMode::kSet:
        for (int64_t i = b; i < e; ++i) out[i] = x[i] * y[i];
        break;
      case GemmMode::kAdd:
        for (int64_t i = b; i < e; ++i) out[i] += x[i] * y[i];
        break;
      case GemmMode::kSub:
        for (int64_t i = b; i < e; ++i) out[i] -= x[i] * y[i];
        break;
    }
  });
}

// Gathers conv2d patches of one image into rows [OH*OW, KH*KW*C] (im2col);
// out-of-range taps are the ring's zero, which is also a valid share of 0.
template <typename T>
void Im2Col(const BilinearSpec& s, const T* img, int64_t H, int64_t W,
            int64_t C, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
            T* cols, int64_t row_begin, int64_t row_end) {
  const int64_t K = KH * KW * C;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t oh = r / OW, ow = r % OW;
    T* dst = cols + r * K;
    for (int64_t kh = 0; kh < KH; ++kh) {
      const int64_t ih = oh * s.stride_h + kh - s.pad_top;
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t iw = ow * s.stride_w + kw - s.pad_left;
        T* d = dst + (kh * KW + kw) * C;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
          for (int64_t c = 0; c < C; ++c) d[c] = 0;
        } else {
          const T* src = img + (ih * W + iw) * C;
          for (int64_t c = 0; c < C; ++c) d[c] = src[c];
        }
      }
    }
  }
}

}  // namespace

bool ParseBilinearKind(const std::string& s, BilinearKind* kind) {
  if (s == "mul") *kind = BilinearKind::kMul;
  else if (s == "matmul") *kind = BilinearKind::kMatMul;
  else if (s == "conv2d") *kind = BilinearKind::kConv2D;
  else return false;
  return true;
}

bool BilinearOutputShape(const BilinearSpec& spec,
                         const std::vector<int64_t>& x,
                         const std::vector<int64_t>& y,
                         std::vector<int64_t>* out, std::string* error) {
  switch (spec.kind) {
    case BilinearKind::kMul:
      if (x != y) {
        *error = "elementwise product needs equal shapes (broadcast first), "
                 "got " + ShapeStr(x) + " and " + ShapeStr(y);
        return false;
      }
      *out = x;
      return true;
    case BilinearKind::kMatMul: {
      if (x.size() < 2 || x.size() != y.size()) {
        *error = "matmul needs operands of equal rank >= 2, got " +
                 ShapeStr(x) + " and " + ShapeStr(y);
        return false;
      }
      const size_t r = x.size();
      for (size_t i = 0; i + 2 < r; ++i) {
        if (x[i] != y[i]) {
          *error = "matmul batch dimensions differ: " + ShapeStr(x) +
                   " and " + ShapeStr(y);
          return false;
        }
      }
      if (x[r - 1] != y[r - 2]) {
        *error = "matmul inner dimensions differ: " + ShapeStr(x) + " @ " +
                 ShapeStr(y);
        return false;
      }
      *out = x;
      (*out)[r - 1] = y[r - 1];
      return true;
    }
    case BilinearKind::kConv2D: {
      if (x.size() != 4 || y.size() != 4) {
        *error = "conv2d needs an NHWC input and an HWIO filter, got " +
                 ShapeStr(x) + " and " + ShapeStr(y);
        return false;
      }
      if (x[3] != y[2]) {
        *error = "conv2d input channels " + std::to_string(x[3]) +
                 " differ from the filter's " + std::to_string(y[2]);
        return false;
      }
      if (spec.stride_h < 1 || spec.stride_w < 1 || spec.pad_top < 0 ||
          spec.pad_bottom < 0 || spec.pad_left < 0 || spec.pad_right < 0) {
        *error = "conv2d strides must be >= 1 and paddings >= 0";
        return false;
      }
      const int64_t hp = x[1] + spec.pad_top + spec.pad_bottom;
      const int64_t wp = x[2] + spec.pad_left + spec.pad_right;
      if (hp < y[0] || wp < y[1]) {
        *error = "conv2d filter " + ShapeStr(y) +
                 " is larger than the padded input " + ShapeStr(x);
        return false;
      }
      *out = {x[0], (hp - y[0]) / spec.stride_h + 1,
              (wp - y[1]) / spec.stride_w + 1, y[3]};
      return true;
    }
  }
  *error = "unknown bilinear kind";
  return false;
}

template <typename T>
void Bilinear(const BilinearSpec& spec, const std::vector<int64_t>& xs,
              const T* x, const std::vector<int64_t>& ys, const T* y, T* out,
              GemmMode mode, const ParallelFor& pf) {
  switch (spec.kind) {
    case BilinearKind::kMul:
      Elementwise(x, y, out, Product(xs, 0, xs.size()), mode, pf);
      return;
    case BilinearKind::kMatMul: {
      const size_t r = xs.size();
      const int64_t batch = Product(xs, 0, r - 2);
      const int64_t M = xs[r - 2], K = xs[r - 1], N = ys[r - 1];
      for (int64_t b = 0; b < batch; ++b) {
        RingGemm<T>(x + b * M * K, K, y + b * K * N, N, out + b * M * N, N, M,
                    K, N, mode, pf);
      }
      return;
    }
    case BilinearKind::kConv2D: {
      std::vector<int64_t> os;
      std::string err;
      BilinearOutputShape(spec, xs, ys, &os, &err);
      const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
      const int64_t KH = ys[0], KW = ys[1], O = ys[3];
      const int64_t OH = os[1], OW = os[2];
      const int64_t K = KH * KW * C, rows = OH * OW;
      if (KH == 1 && KW == 1 && spec.stride_h == 1 && spec.stride_w == 1 &&
          spec.pad_top == 0 && spec.pad_bottom == 0 && spec.pad_left == 0 &&
          spec.pad_right == 0) {
        // a pointwise convolution's columns are the image itself (ResNet's
        // 1x1 convolutions): one matrix product, no copy
        RingGemm<T>(x, C, y, O, out, O, N * rows, C, O, mode, pf);
        return;
      }
      std::unique_ptr<T[]> cols(new T[rows * K > 0 ? rows * K : 1]);
      for (int64_t n = 0; n < N; ++n) {
        const T* img = x + n * H * W * C;
        pf(rows, K * 2, [&](int64_t b, int64_t e) {
          Im2Col(spec, img, H, W, C, KH, KW, OH, OW, cols.get(), b, e);
        });
        RingGemm<T>(cols.get(), K, y, O, out + n * rows * O, O, rows, K, O,
                    mode, pf);
      }
      return;
    }
  }
}

template void Bilinear<uint64_t>(const BilinearSpec&,
                                 const std::vector<int64_t>&, const uint64_t*,
                                 const std::vector<int64_t>&, const uint64_t*,
                                 uint64_t*, GemmMode, const ParallelFor&);
template void Bilinear<uint128_t>(const BilinearSpec&,
                                  const std::vector<int64_t>&,
                                  const uint128_t*,
                                  const std::vector<int64_t>&,
                                  const uint128_t*, uint128_t*, GemmMode,
                                  const ParallelFor&);

}  // namespace tf_privpy
