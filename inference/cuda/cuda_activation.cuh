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
  if (act.gelu) {  // gemma4: 0.5 g (1 + tanh(sqrt(2/pi) g (1 + 0.044715 g^2))) u, as the CPU backend's geglu
    const float inner =
        __fmul_rn(__fmul_rn(0.7978845608028654f, g), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, g), g)));
    return __fmul_rn(__fmul_rn(__fmul_rn(0.5f, g), __fadd_rn(1.0f, tanhf(inner))), u);
  }
  if (!act.clamped) return __fmul_rn(g / (1.0f + expf(-g)), u);
  g = fminf(g, act.limit);
  u = fminf(fmaxf(u, -act.limit), act.limit);
  return __fmul_rn(g / (1.0f + expf(__fmul_rn(-act.alpha, g))), __fadd_rn(u, 1.0f));
}

}  // namespace moe::cuda
