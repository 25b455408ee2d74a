// Kernels of PrivPy's multiplication (registrations and protocol summary in
// mul_ops.cc; the algebra is DESIGN §5).
//
// Masks. For one multiplication with stream nonce N of the S1-S2 key, the
// stream is cut into [rx_0 | ry_0 | rx_1 | ry_1] (element offsets, sizes
// |x|, |y|, |x|, |y|): server p masks with (rx_p, ry_p) and, when
// finishing, cancels the other server's (rx_q, ry_q). With x = x0 + x1:
//   T1 gets a  = x0 + rx_0, b  = y1 + ry_1 and returns ab - u0 to S2;
//   T2 gets a' = x1 + rx_1, b' = y0 + ry_0 and returns a'b' - u1 to S1;
//   S_p: z_p = (x_p - rx_q) y_p - (x_p + rx_p) ry_q + u_p + msg_p,
// and z_0 + z_1 = xy for any bilinear product.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/common/ring_types.h"
#include "ops/common/tf_util.h"
#include "ops/prg/aes_ctr.h"
#include "ops/ring/bilinear.h"
#include "ops/ring/bilinear_kernel_util.h"
#include "ops/ring/bilinear_shape_fn.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tf_privpy {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

namespace {

// Element offsets of server p's masks in the S1-S2 stream.
void MaskOffsets(int party, int64_t nx, int64_t ny, int64_t* rx,
                 int64_t* ry) {
  *rx = party * (nx + ny);
  *ry = *rx + nx;
}

template <typename T>
tensorflow::Status FillMask(const uint8_t key[16], uint64_t nonce,
                            int64_t offset, T* out, int64_t n,
                            const ParallelFor& pf) {
  std::string error;
  if (!PrgFill(key, nonce, static_cast<uint64_t>(offset) * sizeof(T),
               reinterpret_cast<uint8_t*>(out), n * sizeof(T), pf, &error))
    return errors::Internal(error);
  return ::tensorflow::OkStatus();
}

// Tests compare the fused skinny finish with the general path.
bool SkinnyFinishDisabled() {
  const char* v = std::getenv("TF_PRIVPY_DISABLE_SKINNY_FINISH");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

tensorflow::Status ReadParty(OpKernelConstruction* ctx, int* party) {
  TF_RETURN_IF_ERROR(ctx->GetAttr("party", party));
  if (*party != 0 && *party != 1)
    return errors::InvalidArgument("party must be 0 (S1) or 1 (S2)");
  return ::tensorflow::OkStatus();
}

// One PRG stream slice: elements [offset, offset + n) of (key, nonce).
struct Stream {
  const uint8_t* key;
  uint64_t nonce;
  int64_t offset;
};

// Elementwise kernels are bound by AES and memory traffic, so they generate
// their masks chunk by chunk into cache-resident scratch and consume them in
// the same pass: fn(begin, end, masks) sees masks[i][0, end - begin) =
// elements [offset_i + begin, offset_i + end) of stream i.
template <typename T, int kStreams, typename Fn>
tensorflow::Status ForChunksWithMasks(int64_t n, const Stream (&streams)[kStreams],
                                      const ParallelFor& pf, const Fn& fn) {
  constexpr int64_t kChunk = 2048;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::atomic<bool> failed{false};
  pf(chunks, kChunk * 30, [&](int64_t cb, int64_t ce) {
    std::unique_ptr<T[]> scratch(new T[kChunk * kStreams]);
    const T* masks[kStreams];
    std::string error;
    for (int64_t c = cb; c < ce && !failed; ++c) {
      const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
      for (int i = 0; i < kStreams; ++i) {
        T* buf = scratch.get() + i * kChunk;
        if (!PrgFill(streams[i].key, streams[i].nonce,
                     static_cast<uint64_t>(streams[i].offset + b) * sizeof(T),
                     reinterpret_cast<uint8_t*>(buf), (e - b) * sizeof(T), SerialFor,
                     &error)) {
          failed = true;
          return;
        }
        masks[i] = buf;
      }
      fn(b, e, masks);
    }
  });
  if (failed) return errors::Internal("AES-CTR keystream generation failed");
  return ::tensorflow::OkStatus();
}

// MulFinish of a skinny matrix product (rank 2, N <= 2 or M <= 2: logistic
// regression's x·w and its gradient g^T·x; a batch of one through a dense
// layer), z += (x - rx_q)·y - x_masked·ry_q in one pass over the large
// operand: its mask is generated block by block into cache-resident scratch
// and consumed at once, instead of a full-size mask buffer, a subtraction
// pass and two GEMMs each streaming it again.
constexpr int64_t kSkinnyFinish = 2;

template <typename T>
bool SkinnyMatMulFinish(int64_t M, int64_t K, int64_t N, const T* x, const T* y,
                        const T* xm, const uint8_t key12[16], uint64_t nonce12,
                        int64_t rx_off, int64_t ry_off, T* z, const ParallelFor& pf,
                        std::string* error) {
  std::atomic<bool> failed{false};
  std::mutex mu;
  if (N <= kSkinnyFinish) {
    // x is the large operand: rows of x with their mask rows, y's mask whole.
    std::unique_ptr<T[]> ry(new T[K * N]);
    if (!PrgFill(key12, nonce12, static_cast<uint64_t>(ry_off) * sizeof(T),
                 reinterpret_cast<uint8_t*>(ry.get()), K * N * sizeof(T), SerialFor, error))
      return false;
    pf(M, K * N * 8 + K * 30, [&](int64_t b, int64_t e) {
      std::unique_ptr<T[]> rx(new T[K]);
      std::string err;
      for (int64_t i = b; i < e && !failed; ++i) {
        if (!PrgFill(key12, nonce12, static_cast<uint64_t>(rx_off + i * K) * sizeof(T),
                     reinterpret_cast<uint8_t*>(rx.get()), K * sizeof(T), SerialFor, &err)) {
          failed = true;
          std::lock_guard<std::mutex> l(mu);
          *error = err;
          return;
        }
        const T* xi = x + i * K;
        const T* mi = xm + i * K;
        T acc[kSkinnyFinish] = {};
        for (int64_t k = 0; k < K; ++k) {
          const T d = xi[k] - rx[k];
          for (int64_t j = 0; j < N; ++j) acc[j] += d * y[k * N + j] - mi[k] * ry[k * N + j];
        }
        for (int64_t j = 0; j < N; ++j) z[i * N + j] += acc[j];
      }
    });
    return !failed;
  }
  // M <= 2: y is the large operand: blocks of its rows with their mask rows,
  // each shard summing into its own accumulator, added to z under a lock.
  std::unique_ptr<T[]> xr(new T[M * K]);
  if (!PrgFill(key12, nonce12, static_cast<uint64_t>(rx_off) * sizeof(T),
               reinterpret_cast<uint8_t*>(xr.get()), M * K * sizeof(T), SerialFor, error))
    return false;
  for (int64_t i = 0; i < M * K; ++i) xr[i] = x[i] - xr[i];
  constexpr int64_t kRows = 8;
  const int64_t blocks = (K + kRows - 1) / kRows;
  pf(blocks, kRows * N * (8 * M + 30), [&](int64_t bb, int64_t be) {
    std::unique_ptr<T[]> ry(new T[kRows * N]);
    std::unique_ptr<T[]> acc(new T[M * N]());
    std::string err;
    for (int64_t blk = bb; blk < be && !failed; ++blk) {
      const int64_t k0 = blk * kRows, k1 = std::min(K, k0 + kRows);
      if (!PrgFill(key12, nonce12, static_cast<uint64_t>(ry_off + k0 * N) * sizeof(T),
                   reinterpret_cast<uint8_t*>(ry.get()), (k1 - k0) * N * sizeof(T),
                   SerialFor, &err)) {
        failed = true;
        std::lock_guard<std::mutex> l(mu);
        *error = err;
        return;
      }
      for (int64_t k = k0; k < k1; ++k) {
        const T* yk = y + k * N;
        const T* rk = ry.get() + (k - k0) * N;
        for (int64_t i = 0; i < M; ++i) {
          const T a = xr[i * K + k], m = xm[i * K + k];
          T* ai = acc.get() + i * N;
          for (int64_t j = 0; j < N; ++j) ai[j] += a * yk[j] - m * rk[j];
        }
      }
    }
    std::lock_guard<std::mutex> l(mu);
    for (int64_t i = 0; i < M * N; ++i) z[i] += acc[i];
  });
  return !failed;
}

class MulMaskOp : public RingKernel<MulMaskOp> {
 public:
  explicit MulMaskOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadParty(ctx, &party_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    TensorShape xs, ys;
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(0), "x", &xs));
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(1), "y", &ys));
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(2), "key12", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(3), "nonce12", &nonce));
    const int64_t nx = xs.num_elements(), ny = ys.num_elements();
    int64_t rx, ry;
    MaskOffsets(party_, nx, ny, &rx, &ry);
    const ParallelFor pf = TfParallelFor(ctx);
    for (int i = 0; i < 2; ++i) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, ctx->input(i).shape(), &out));
      T* o = RingData<T>(out);
      const T* v = RingData<T>(ctx->input(i));
      const Stream streams[1] = {{key, nonce, i == 0 ? rx : ry}};
      OP_REQUIRES_OK(ctx, (ForChunksWithMasks<T, 1>(
                              i == 0 ? nx : ny, streams, pf,
                              [&](int64_t b, int64_t e, const T* const* m) {
                                for (int64_t j = b; j < e; ++j) o[j] = v[j] + m[0][j - b];
                              })));
    }
  }

 private:
  int party_;
};

class MulAssistOp : public RingKernel<MulAssistOp> {
 public:
  explicit MulAssistOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadBilinearSpec(ctx, &spec_));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    TensorShape ls, rs;
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(0), "left", &ls));
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(1), "right", &rs));
    uint8_t key[16];
    uint64_t nonce = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(2), "key", key));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(3), "nonce", &nonce));
    TensorShape out_shape;
    Tensor* out;
    OP_REQUIRES_OK(ctx, AllocateBilinearOutput<T>(ctx, spec_, ls, rs, &out_shape, &out));
    const ParallelFor pf = TfParallelFor(ctx);
    T* o = RingData<T>(out);
    const int64_t nz = out_shape.num_elements();
    if (spec_.kind == BilinearKind::kMul) {  // one fused pass
      const T* l = RingData<T>(ctx->input(0));
      const T* r = RingData<T>(ctx->input(1));
      const Stream streams[1] = {{key, nonce, 0}};
      OP_REQUIRES_OK(ctx, (ForChunksWithMasks<T, 1>(
                              nz, streams, pf, [&](int64_t b, int64_t e, const T* const* m) {
                                for (int64_t j = b; j < e; ++j) o[j] = l[j] * r[j] - m[0][j - b];
                              })));
      return;
    }
    // o = -u, then o += left (*) right.
    OP_REQUIRES_OK(ctx, FillMask<T>(key, nonce, 0, o, nz, pf));
    pf(nz, 2, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) o[j] = T(0) - o[j];
    });
    Bilinear<T>(spec_, ShapeDims(ls), RingData<T>(ctx->input(0)), ShapeDims(rs),
                RingData<T>(ctx->input(1)), o, GemmMode::kAdd, pf);
  }

 private:
  BilinearSpec spec_;
};

class MulFinishOp : public RingKernel<MulFinishOp> {
 public:
  explicit MulFinishOp(OpKernelConstruction* ctx) : RingKernel(ctx) {
    OP_REQUIRES_OK(ctx, ReadParty(ctx, &party_));
    OP_REQUIRES_OK(ctx, ReadBilinearSpec(ctx, &spec_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("frac_bits", &frac_));
    OP_REQUIRES(ctx, frac_ >= 0 && frac_ < 64,
                errors::InvalidArgument("frac_bits must be in [0, 64)"));
  }
  template <typename T>
  void Run(OpKernelContext* ctx) {
    TensorShape xs, ys, ms, cs;
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(0), "x", &xs));
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(1), "y", &ys));
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(2), "x_masked", &ms));
    OP_REQUIRES_OK(ctx, RingShape<T>(ctx->input(3), "message", &cs));
    OP_REQUIRES(ctx, ms == xs,
                errors::InvalidArgument("x_masked must have x's shape"));
    uint8_t key12[16], key_t[16];
    uint64_t nonce12 = 0, nonce_t = 0;
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(4), "key12", key12));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(5), "nonce12", &nonce12));
    OP_REQUIRES_OK(ctx, ReadKey(ctx->input(6), "key_t", key_t));
    OP_REQUIRES_OK(ctx, ReadNonce(ctx->input(7), "nonce_t", &nonce_t));
    TensorShape out_shape;
    Tensor* out;
    OP_REQUIRES_OK(ctx, AllocateBilinearOutput<T>(ctx, spec_, xs, ys, &out_shape, &out));
    OP_REQUIRES(ctx, cs == out_shape,
                errors::InvalidArgument("message shape ", cs.DebugString(),
                                        " differs from the product's ",
                                        out_shape.DebugString()));
    const int64_t nx = xs.num_elements(), ny = ys.num_elements();
    const int64_t nz = out_shape.num_elements();
    int64_t rx_other, ry_other;
    MaskOffsets(1 - party_, nx, ny, &rx_other, &ry_other);
    const ParallelFor pf = TfParallelFor(ctx);
    T* z = RingData<T>(out);
    const T* x = RingData<T>(ctx->input(0));
    const T* msg = RingData<T>(ctx->input(3));
    const int p = party_, f = frac_;

    if (spec_.kind == BilinearKind::kMul) {  // one fused pass, masks in cache
      const T* y = RingData<T>(ctx->input(1));
      const T* xm = RingData<T>(ctx->input(2));
      const Stream streams[3] = {{key12, nonce12, rx_other},
                                 {key12, nonce12, ry_other},
                                 {key_t, nonce_t, 0}};
      OP_REQUIRES_OK(ctx, (ForChunksWithMasks<T, 3>(
                              nz, streams, pf, [&](int64_t b, int64_t e, const T* const* m) {
                                for (int64_t j = b; j < e; ++j) {
                                  const int64_t k = j - b;
                                  const T v = m[2][k] + msg[j] + (x[j] - m[0][k]) * y[j] -
                                              xm[j] * m[1][k];
                                  z[j] = f > 0 ? TruncateShare<T>(v, p, f) : v;
                                }
                              })));
      return;
    }

    if (spec_.kind == BilinearKind::kMatMul && xs.dims() == 2 && nz > 0 &&
        xs.dim_size(1) > 0 &&
        (ys.dim_size(1) <= kSkinnyFinish || xs.dim_size(0) <= kSkinnyFinish) &&
        !SkinnyFinishDisabled()) {
      // z = u_p + message + the fused bilinear terms, then truncation
      OP_REQUIRES_OK(ctx, FillMask<T>(key_t, nonce_t, 0, z, nz, pf));
      for (int64_t j = 0; j < nz; ++j) z[j] += msg[j];
      std::string error;
      OP_REQUIRES(ctx,
                  SkinnyMatMulFinish<T>(xs.dim_size(0), xs.dim_size(1), ys.dim_size(1), x,
                                        RingData<T>(ctx->input(1)), RingData<T>(ctx->input(2)),
                                        key12, nonce12, rx_other, ry_other, z, pf, &error),
                  errors::Internal("AES-CTR keystream generation failed: ", error));
      if (frac_ > 0) {
        for (int64_t j = 0; j < nz; ++j) z[j] = TruncateShare<T>(z[j], p, f);
      }
      return;
    }

    // Masks of the other server: rx_q (|x|), ry_q (|y|).
    std::unique_ptr<T[]> rx(new T[nx > 0 ? nx : 1]);
    std::unique_ptr<T[]> ry(new T[ny > 0 ? ny : 1]);
    OP_REQUIRES_OK(ctx, FillMask<T>(key12, nonce12, rx_other, rx.get(), nx, pf));
    OP_REQUIRES_OK(ctx, FillMask<T>(key12, nonce12, ry_other, ry.get(), ny, pf));
    T* xr = rx.get();
    pf(nx, 2, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) xr[j] = x[j] - xr[j];
    });

    // z = u_p + message, then the two bilinear terms.
    OP_REQUIRES_OK(ctx, FillMask<T>(key_t, nonce_t, 0, z, nz, pf));
    pf(nz, 2, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) z[j] += msg[j];
    });
    Bilinear<T>(spec_, ShapeDims(xs), xr, ShapeDims(ys), RingData<T>(ctx->input(1)), z,
                GemmMode::kAdd, pf);
    Bilinear<T>(spec_, ShapeDims(xs), RingData<T>(ctx->input(2)), ShapeDims(ys), ry.get(),
                z, GemmMode::kSub, pf);
    if (frac_ > 0) {
      pf(nz, 3, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) z[j] = TruncateShare<T>(z[j], p, f);
      });
    }
  }

 private:
  int party_, frac_;
  BilinearSpec spec_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfPrivpy>MulMask").Device(DEVICE_CPU),
                        MulMaskOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>MulAssist").Device(DEVICE_CPU),
                        MulAssistOp);
REGISTER_KERNEL_BUILDER(Name("TfPrivpy>MulFinish").Device(DEVICE_CPU),
                        MulFinishOp);

}  // namespace tf_privpy
