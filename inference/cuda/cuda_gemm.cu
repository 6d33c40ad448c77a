// The quantised matmul of many tokens (prefill) on the int8 tensor cores: the
// building blocks of cuda_gemm.cuh over a grid of weight-row blocks x token blocks.
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_gemm.cuh"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

template <ElemType T>
__global__ void __launch_bounds__(kGemmThreads)
    gemmKernel(const uint8_t* w, size_t row_bytes, int64_t rows, ActRows a, int n_tokens, float* y) {
  __shared__ GemmTiles tiles;
  __shared__ int64_t act_rows[kGemmTokens];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kGemmRows;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kGemmTokens;
  if (threadIdx.x < kGemmTokens)
    act_rows[threadIdx.x] = tok0 + threadIdx.x < n_tokens ? tok0 + threadIdx.x : -1;
  __syncthreads();
  GemmAcc acc = {};
  gemmTile<T>(tiles, w, row_bytes, rows, row0, a, act_rows, acc);
#pragma unroll
  for (int j = 0; j < kGemmTokens / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = row0 + gemmAccRow(i), tok = tok0 + gemmAccToken(j, i);
      if (r < rows && tok < n_tokens) y[tok * rows + r] = acc[j][i];
    }
}

}  // namespace

void launchGemmQ(ElemType type, const uint8_t* w, size_t row_bytes, int64_t rows, const void* act,
                 int64_t cols, int n_tokens, float* y, cudaStream_t stream) {
  if (rows <= 0 || n_tokens <= 0) return;
  const ActRows a = actRows(type, act, cols, n_tokens);
  const dim3 grid(static_cast<unsigned>((rows + kGemmRows - 1) / kGemmRows),
                  static_cast<unsigned>((n_tokens + kGemmTokens - 1) / kGemmTokens));
  withType(type, [&](auto t) {
    constexpr ElemType kType = decltype(t)::value;
    if constexpr (isFloatType(kType))
      throw CudaError("the int8 GEMM takes quantised weights only");
    else
      launchKernel(gemmKernel<kType>, grid, kGemmThreads, 0, stream, w, row_bytes, rows, a, n_tokens, y);
  });
  checkLaunch("quantised GEMM kernel");
}

uint64_t gemmWeightPasses(int n_tokens) {
  return static_cast<uint64_t>((n_tokens + kGemmTokens - 1) / kGemmTokens);
}
uint64_t gemmActivationPasses(int64_t rows) {
  return static_cast<uint64_t>((rows + kGemmRows - 1) / kGemmRows);
}

}  // namespace moe::cuda
