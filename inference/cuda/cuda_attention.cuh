// What the attention kernels share (cuda_attention.cu: decode and the entry point;
// cuda_attention_prefill.cu: prefill): the block shape, the half K/V conversion, a
// head's sink logit in the softmax, and a launch's arguments.
#pragma once

#include <math.h>

#include <cstdint>

#include "inference/cuda/cuda_kernels.h"

namespace moe::cuda::attn {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
inline constexpr unsigned kFull = 0xffffffffu;

inline constexpr int kNarrowHeadDim = 256;  // up to here a decode lane holds at most 8 dims of a key

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// The half in the low (first in memory) or high 16 bits of a 32-bit word, as float (exact).
__device__ __forceinline__ float lowHalf(uint32_t word) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(word & 0xffffu)));
}
__device__ __forceinline__ float highHalf(uint32_t word) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(word >> 16)));
}

// A head's sink logit (gpt-oss) joins a softmax of running max m, sum l and weighted
// sum o: with m' = max(m, sink), o and l are rescaled by e^(m - m') and l gains
// e^(sink - m'), a term with no value.
__device__ __forceinline__ void withSink(float sink, float m, float& l, float& o) {
  const float m2 = fmaxf(m, sink);
  const float c = expf(m - m2);
  l = l * c + expf(sink - m2);
  o *= c;
}

// The arguments of a decode or prefill launch past the template parameters.
struct AttentionArgs {
  const float* q;
  const __half *k, *v;
  int pos0;
  const int32_t* pos0_dev;  // decode: pos0 read from device memory instead (null: pos0)
  int n_tokens, n_head, n_head_kv, head_dim;
  float scale;
  const float* sinks;  // [n_head] or null
  int window;          // > 0: sliding window
  float *out, *partial;
};

// The prefill kernel (more than kDecodeMaxTokens tokens) for a's shape; pairs: K and V
// loaded two halves at a time (head_dim even, the cache 4-byte aligned).
void launchPrefill(const AttentionArgs& a, bool pairs, cudaStream_t stream);

}  // namespace moe::cuda::attn
