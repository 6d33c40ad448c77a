// CpuBackend: qwen35moe's delta-net ops and the gated attention's output gate, on
// deltanet::'s host functions. Channels, heads and rows are independent, so the
// parallel split changes no bit.
#include <cmath>
#include <stdexcept>
#include <string>

#include "inference/cpu/cpu_backend.h"
#include "inference/delta_net.h"

namespace moe {

void CpuBackend::convSilu(const float* x, const float* weight, float* state, float* out, int n_tokens,
                          int channels, int kernel) {
  if (kernel < 1) throw std::invalid_argument(name() + ": convSilu: kernel width " + std::to_string(kernel));
  if (n_tokens <= 0 || channels <= 0) return;
  forEach(channels, int64_t(n_tokens) * kernel, [&](int64_t begin, int64_t end) {
    deltanet::convSilu(x, weight, state, out, n_tokens, channels, kernel, int(begin), int(end));
  });
}

void CpuBackend::l2NormHeads(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim, float eps,
                             float scale) {
  if (n_rows <= 0 || n_heads <= 0 || head_dim <= 0) return;
  forEach(int64_t(n_rows) * n_heads, head_dim, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      deltanet::l2NormHead(x + size_t(i / n_heads) * row_stride + size_t(i % n_heads) * head_dim, head_dim,
                           eps, scale);
  });
}

void CpuBackend::deltaRule(const DeltaRuleCall& c) {
  const DeltaNetShape& d = c.shape;
  if (d.n_k_heads <= 0 || d.n_v_heads % d.n_k_heads != 0 || d.head_k <= 0 || d.head_v <= 0)
    throw std::invalid_argument(name() + ": deltaRule: a bad delta-net shape");
  if (c.n_tokens <= 0) return;
  forEach(d.n_v_heads, int64_t(c.n_tokens) * d.head_v * d.head_k * 4, [&](int64_t begin, int64_t end) {
    deltanet::deltaRule(d, c.x, c.alpha, c.beta, c.dt_bias, c.a, c.state, c.out, c.n_tokens, int(begin),
                        int(end));
  });
}

void CpuBackend::gatedRmsNorm(const float* x, const float* weight, const float* gate, float* y, int n_rows,
                              int dim, float eps) {
  if (n_rows <= 0 || dim <= 0) return;
  forEach(n_rows, dim, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      deltanet::gatedRmsNormRow(x + size_t(r) * dim, weight, gate + size_t(r) * dim, y + size_t(r) * dim, dim,
                                eps);
  });
}

void CpuBackend::sigmoidGate(float* x, const float* gate, size_t n) {
  forEach(int64_t(n), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] *= deltanet::sigmoid(gate[i]);
  });
}

}  // namespace moe
