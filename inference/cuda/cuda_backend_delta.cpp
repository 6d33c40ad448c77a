// CudaBackend: qwen35moe's delta-net ops and the gated attention's output gate
// (cuda_delta_net.cu). The recurrent state stays where the caller allocated it, in
// device memory: nothing here waits or copies, so a decode step records as a graph.
#include <stdexcept>
#include <string>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_kernels.h"

namespace moe {

void CudaBackend::convSilu(const float* x, const float* weight, float* state, float* out, int n_tokens,
                           int channels, int kernel) {
  if (kernel < 1)
    throw std::invalid_argument("cuda backend: convSilu: kernel width " + std::to_string(kernel));
  cuda::launchConvSilu(x, weight, state, out, n_tokens, channels, kernel, stream_);
}

void CudaBackend::l2NormHeads(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim, float eps,
                              float scale) {
  cuda::launchL2NormHeads(x, n_rows, row_stride, n_heads, head_dim, eps, scale, stream_);
}

void CudaBackend::deltaRule(const DeltaRuleCall& c) {
  const DeltaNetShape& d = c.shape;
  if (d.n_k_heads <= 0 || d.n_v_heads % d.n_k_heads != 0 || d.head_k <= 0 || d.head_v <= 0)
    throw std::invalid_argument("cuda backend: deltaRule: a bad delta-net shape");
  if (d.head_k > cuda::kMaxDeltaHeadK)
    throw std::invalid_argument("cuda backend: deltaRule: key heads of " + std::to_string(d.head_k) +
                                " (at most " + std::to_string(cuda::kMaxDeltaHeadK) + ")");
  cuda::DeltaRuleLaunch p;
  p.x = c.x;
  p.alpha = c.alpha;
  p.beta = c.beta;
  p.dt_bias = c.dt_bias;
  p.a = c.a;
  p.state = c.state;
  p.out = c.out;
  p.n_tokens = c.n_tokens;
  p.head_k = d.head_k;
  p.head_v = d.head_v;
  p.n_k_heads = d.n_k_heads;
  p.n_v_heads = d.n_v_heads;
  cuda::launchDeltaRule(p, stream_);
}

void CudaBackend::gatedRmsNorm(const float* x, const float* weight, const float* gate, float* y, int n_rows,
                               int dim, float eps) {
  cuda::launchGatedRmsNorm(x, weight, gate, y, n_rows, dim, eps, stream_);
}

void CudaBackend::sigmoidGate(float* x, const float* gate, size_t n) {
  cuda::launchSigmoidGate(x, gate, n, stream_);
}

}  // namespace moe
