// The gated activations of an FFN, as device functions shared by the element
// kernel (cuda_elementwise.cu) and the fused MoE kernels (cuda_moe.cu). Explicit
// round-to-nearest products keep nvcc from fusing what the CPU computes apart.
#pragma once

#include <math.h>

#include "inference/cuda/cuda_kernels.h"

namespace moe::cuda {

// silu(g) * u; with act.clamped, gpt-oss's variant: g = min(g, limit),
// u = clamp(u, -limit, limit), g * sigmoid(alpha * g) * (u + 1).
__device__ __forceinline__ float gatedActivation(float g, float u, const Activation& act) {
  if (!act.clamped) return __fmul_rn(g / (1.0f + expf(-g)), u);
  g = fminf(g, act.limit);
  u = fminf(fmaxf(u, -act.limit), act.limit);
  return __fmul_rn(g / (1.0f + expf(__fmul_rn(-act.alpha, g))), __fadd_rn(u, 1.0f));
}

}  // namespace moe::cuda
