// Causal grouped-query attention over the device KV cache, for prefill (many
// queries) and decode (one query) alike: one block per (token, query head).
// The block's kWarps warps take every kWarps-th key; each warp keeps a running
// (max, sum, weighted V) online softmax, lane l holding dims l, l+32, ... of q
// and of its accumulator; at the end the warps' partial results are merged with
// the usual rescaling by exp(m_warp - m_all). Mathematically the softmax of the
// CPU backend; only the float rounding order differs.
#include <math.h>

#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kPerLane = kMaxHeadDim / 32;  // head dims per lane

__global__ void attentionKernel(const float* q, const float* k_cache, const float* v_cache, int pos0,
                                int n_head, int n_head_kv, int head_dim, float scale, float* out) {
  __shared__ float part_m[kWarps], part_l[kWarps];
  __shared__ float part_acc[kWarps][kMaxHeadDim];

  const int item = blockIdx.x;  // t * n_head + h
  const int t = item / n_head, h = item % n_head;
  const int kvh = h / (n_head / n_head_kv);
  const int n_keys = pos0 + t + 1;  // causal: positions 0 .. pos0 + t
  const int kv_stride = n_head_kv * head_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  float qr[kPerLane], acc[kPerLane];
  const float* qh = q + static_cast<size_t>(item) * head_dim;
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    qr[k] = d < head_dim ? qh[d] : 0.0f;
    acc[k] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int j = warp; j < n_keys; j += kWarps) {
    const float* kr = k_cache + static_cast<size_t>(j) * kv_stride + static_cast<size_t>(kvh) * head_dim;
    const float* vr = v_cache + static_cast<size_t>(j) * kv_stride + static_cast<size_t>(kvh) * head_dim;
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < head_dim) dot += qr[k] * kr[d];
    }
    for (int off = 16; off > 0; off /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, off);  // every lane: the sum
    const float s = dot * scale;
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int d = lane + 32 * k;
      if (d < head_dim) acc[k] = acc[k] * correction + p * vr[d];
    }
    m = m_new;
  }

#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < head_dim) part_acc[warp][d] = acc[k];
  }
  if (lane == 0) {
    part_m[warp] = m;  // -inf and l = 0 for a warp that saw no key (n_keys < kWarps)
    part_l[warp] = l;
  }
  __syncthreads();

  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, part_m[w]);  // finite: n_keys >= 1
  float weight[kWarps];
  float l_all = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = expf(part_m[w] - m_all);  // 0 for an empty warp
    l_all += part_l[w] * weight[w];
  }
  float* oh = out + static_cast<size_t>(item) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += kWarps * 32) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (weight[w] > 0.0f) o += part_acc[w][d] * weight[w];
    oh[d] = o / l_all;
  }
}

}  // namespace

void launchAttention(const float* q, const float* k_cache, const float* v_cache, int pos0, int n_tokens,
                     int n_head, int n_head_kv, int head_dim, float scale, float* out, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(n_tokens) * n_head;
  if (items <= 0) return;
  launchKernel(attentionKernel, static_cast<unsigned>(items), kWarps * 32, 0, stream, q, k_cache, v_cache,
               pos0, n_head, n_head_kv, head_dim, scale, out);
  checkLaunch("attention kernel");
}

}  // namespace moe::cuda
