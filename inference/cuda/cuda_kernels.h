// Launchers of the CUDA backend's own kernels (inference/cuda/*.cu). Every
// pointer is device memory unless named host_; every launch is queued on
// `stream` and checked (CudaError on a bad launch). Shapes as in backend.h.
// Kept free of project headers so the .cu files compile on their own.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace moe::cuda {

// The element types the kernels decode (the GGUF types the engine computes).
enum class ElemType { F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K };

// Largest head_dim the attention kernel holds in registers.
inline constexpr int kMaxHeadDim = 256;

// out[t][c] = decode(table row tokens[t])[c]; tokens: [n_tokens] device ints already range-checked.
void launchEmbed(ElemType type, const uint8_t* table, size_t row_bytes, int64_t cols, const int32_t* tokens,
                 int n_tokens, float* out, cudaStream_t stream);
// out[r][c] = decode(row r of w)[c] for r < n_rows; out: [n_rows][cols].
void launchDequantizeRows(ElemType type, const uint8_t* w, size_t row_bytes, int64_t cols, int64_t n_rows,
                          float* out, cudaStream_t stream);
// y[r] = decode(row r) . x for r < rows (one warp per row, float accumulation).
void launchMatvec(ElemType type, const uint8_t* w, size_t row_bytes, int64_t cols, int64_t rows,
                  const float* x, float* y, cudaStream_t stream);

// x, y: [n_rows][dim] (may alias); weight: [dim] or nullptr.
void launchRmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps,
                   cudaStream_t stream);
// x: [n_tokens][n_heads][head_dim]; cs: [n_tokens][n_rot] (cos, sin) pairs per
// rotated pair, computed on the host exactly as the CPU backend computes them.
void launchRope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const float* cs, bool neox,
                cudaStream_t stream);
// Causal GQA attention; see Backend::attention. head_dim <= kMaxHeadDim.
void launchAttention(const float* q, const float* k_cache, const float* v_cache, int pos0, int n_tokens,
                     int n_head, int n_head_kv, int head_dim, float scale, float* out, cudaStream_t stream);

void launchSwiglu(const float* gate, const float* up, float* out, size_t n, cudaStream_t stream);
void launchAdd(float* y, const float* x, size_t n, cudaStream_t stream);
void launchAxpy(float* y, const float* x, float a, size_t n, cudaStream_t stream);

// An empty kernel: launching it proves the binary holds code this device can run.
void launchProbe(cudaStream_t stream);

}  // namespace moe::cuda
