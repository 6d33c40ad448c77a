// Row and element kernels: RMS norm, rotary embedding, SwiGLU, add, axpy.
// Where the CPU backend's float arithmetic can be reproduced exactly it is: rope
// and axpy use explicit round-to-nearest multiplies/adds (__fmul_rn, __fadd_rn)
// so nvcc cannot fuse them into an FMA the CPU does not do; rmsNorm sums squares
// in double like the CPU. Only expf (the SwiGLUs) differs by an ulp or two.
#include "inference/cuda/cuda_activation.cuh"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

constexpr int kThreads = 256;

unsigned gridFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < (size_t{1} << 20) ? (blocks > 0 ? blocks : 1) : (size_t{1} << 20));
}

// One block of kThreads per row.
// With delta (addRmsNorm): x += delta first, each thread on the elements it then sums
// and scales, so the row needs no barrier for it.
__global__ void rmsNormKernel(float* x, const float* delta, const float* weight, float* y, int dim,
                              float eps) {
  __shared__ double warp_sums[kThreads / 32];
  __shared__ float row_scale;
  float* xr = x + static_cast<size_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<size_t>(blockIdx.x) * dim;
  if (delta) {
    const float* dr = delta + static_cast<size_t>(blockIdx.x) * dim;
    for (int i = threadIdx.x; i < dim; i += kThreads) xr[i] += dr[i];
  }
  double s = 0.0;
  for (int i = threadIdx.x; i < dim; i += kThreads) s += static_cast<double>(xr[i]) * xr[i];
  for (int off = 16; off > 0; off /= 2) s += __shfl_down_sync(0xffffffffu, s, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();  // every read of xr for the sum is done before any write of yr (x may be y)
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (double w : warp_sums) total += w;
    row_scale = static_cast<float>(1.0 / sqrt(total / dim + static_cast<double>(eps)));
  }
  __syncthreads();
  const float scale = row_scale;
  for (int i = threadIdx.x; i < dim; i += kThreads) {
    const float v = __fmul_rn(xr[i], scale);
    yr[i] = weight ? __fmul_rn(v, weight[i]) : v;
  }
}

// One thread per rotated pair (t, h, i). Norm pairs (2i, 2i+1); Neox pairs (i, i + n_rot/2).
// The first `pairs` are x's ([n_tokens][n_heads]); the next `pairs2` those of x2
// ([n_tokens][n_heads2], e.g. k after q), at the same positions. cs: [n_tokens][n_rot]
// cos/sin; with first_row (device memory), token t's are row *first_row + t of cs.
__global__ void ropeKernel(float* x, int64_t pairs, int n_heads, float* x2, int64_t pairs2, int n_heads2,
                           int head_dim, int n_rot, const float* cs, const int32_t* first_row, bool neox) {
  const int half = n_rot / 2;
  if (first_row) cs += static_cast<int64_t>(*first_row) * n_rot;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < pairs + pairs2;
       idx += step) {
    const bool second = idx >= pairs;
    const int64_t p = second ? idx - pairs : idx;
    const int i = static_cast<int>(p % half);
    const int64_t head = p / half;  // t * heads + h
    const int64_t t = head / (second ? n_heads2 : n_heads);
    float* a = (second ? x2 : x) + head * head_dim + (neox ? i : 2 * i);
    float* b = a + (neox ? half : 1);
    const float c = cs[t * n_rot + 2 * i], s = cs[t * n_rot + 2 * i + 1];
    const float x0 = *a, x1 = *b;
    *a = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    *b = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

__global__ void swigluKernel(const float* gate, const float* up, float* out, size_t n, Activation act) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = gatedActivation(gate[i], up[i], act);
}

__global__ void copyRowsKernel(float* dst, size_t dst_stride, const float* src, size_t src_stride,
                               size_t width, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i / width * dst_stride + i % width] = src[i / width * src_stride + i % width];
}

__global__ void addKernel(float* y, const float* x, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) y[i] += x[i];
}

__global__ void axpyKernel(float* y, const float* x, float a, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

__global__ void scaleKernel(float* x, float s, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    x[i] = __fmul_rn(x[i], s);
}

__global__ void softcapKernel(float* x, float cap, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    x[i] = __fmul_rn(cap, tanhf(x[i] / cap));
}

__global__ void scaleRoutingKernel(float* routing, size_t n, const float* scales) {
  const int* ids = reinterpret_cast<const int*>(routing);
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    routing[n + i] = __fmul_rn(routing[n + i], scales[ids[i]]);
}

__global__ void probeKernel() {}

}  // namespace

void launchRmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps,
                   cudaStream_t stream) {
  if (n_rows <= 0 || dim <= 0) return;
  launchKernel(rmsNormKernel, static_cast<unsigned>(n_rows), kThreads, 0, stream, const_cast<float*>(x),
               static_cast<const float*>(nullptr), weight, y, dim, eps);
  checkLaunch("rmsNorm kernel");
}

void launchAddRmsNorm(float* x, const float* delta, const float* weight, float* y, int n_rows, int dim,
                      float eps, cudaStream_t stream) {
  if (n_rows <= 0 || dim <= 0) return;
  launchKernel(rmsNormKernel, static_cast<unsigned>(n_rows), kThreads, 0, stream, x, delta, weight, y, dim,
               eps);
  checkLaunch("add + rmsNorm kernel");
}

void launchRope(float* x, int n_heads, float* x2, int n_heads2, int n_tokens, int head_dim, int n_rot,
                const float* cs, bool neox, cudaStream_t stream, const int32_t* first_row) {
  const int64_t per_head = static_cast<int64_t>(n_tokens) * (n_rot / 2);
  const int64_t pairs = per_head * n_heads, pairs2 = x2 ? per_head * n_heads2 : 0;
  if (pairs + pairs2 <= 0) return;
  launchKernel(ropeKernel, gridFor(static_cast<size_t>(pairs + pairs2)), kThreads, 0, stream, x, pairs,
               n_heads, x2, pairs2, n_heads2 > 0 ? n_heads2 : 1, head_dim, n_rot, cs, first_row, neox);
  checkLaunch("rope kernel");
}

void launchSwiglu(const float* gate, const float* up, float* out, size_t n, const Activation& act,
                  cudaStream_t stream) {
  if (n == 0) return;
  launchKernel(swigluKernel, gridFor(n), kThreads, 0, stream, gate, up, out, n, act);
  checkLaunch("swiglu kernel");
}

void launchCopyRows(float* dst, size_t dst_stride, const float* src, size_t src_stride, size_t width,
                    size_t n_rows, cudaStream_t stream) {
  const size_t n = width * n_rows;
  if (n == 0) return;
  launchKernel(copyRowsKernel, gridFor(n), kThreads, 0, stream, dst, dst_stride, src, src_stride, width, n);
  checkLaunch("copy rows kernel");
}

void launchAdd(float* y, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  launchKernel(addKernel, gridFor(n), kThreads, 0, stream, y, x, n);
  checkLaunch("add kernel");
}

void launchAxpy(float* y, const float* x, float a, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  launchKernel(axpyKernel, gridFor(n), kThreads, 0, stream, y, x, a, n);
  checkLaunch("axpy kernel");
}

void launchScale(float* x, float s, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  launchKernel(scaleKernel, gridFor(n), kThreads, 0, stream, x, s, n);
  checkLaunch("scale kernel");
}

void launchSoftcap(float* x, float cap, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  launchKernel(softcapKernel, gridFor(n), kThreads, 0, stream, x, cap, n);
  checkLaunch("softcap kernel");
}

void launchScaleRouting(float* routing, size_t n, const float* scales, cudaStream_t stream) {
  if (n == 0) return;
  launchKernel(scaleRoutingKernel, gridFor(n), kThreads, 0, stream, routing, n, scales);
  checkLaunch("scale routing kernel");
}

void launchProbe(cudaStream_t stream) {
  launchKernel(probeKernel, 1, 1, 0, stream);
  checkLaunch("probe kernel");
}

}  // namespace moe::cuda
