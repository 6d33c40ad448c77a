#include "inference/delta_net.h"

#include <algorithm>
#include <cmath>

#include "inference/delta_rule_rows.h"

namespace moe::deltanet {

void convSilu(const float* x, const float* weight, float* state, float* out, int n_tokens, int channels,
              int kernel, int c0, int c1) {
  const size_t C = size_t(channels);
  const int K = kernel;
  for (int c = c0; c < c1; ++c) {
    const float* w = weight + size_t(c) * K;
    for (int t = 0; t < n_tokens; ++t) {
      float acc = w[K - 1] * x[size_t(t) * C + c];
      // Tap j reads the input at position t - (K - 1 - j): a row of x, or before
      // the first token, conv state row t + j.
      for (int j = 0; j < K - 1; ++j) {
        const int p = t - (K - 1 - j);
        acc += w[j] * (p >= 0 ? x[size_t(p) * C + c] : state[size_t(t + j) * C + c]);
      }
      out[size_t(t) * C + c] = silu(acc);
    }
    // The state's row j becomes the input at position n_tokens - (K - 1) + j; rows
    // in ascending order read only rows above them (the older inputs kept).
    for (int j = 0; j < K - 1; ++j) {
      const int p = n_tokens - (K - 1) + j;
      state[size_t(j) * C + c] = p >= 0 ? x[size_t(p) * C + c] : state[size_t(p + K - 1) * C + c];
    }
  }
}

void l2NormHead(float* x, int n, float eps, float scale) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  const float inv = scale / std::max(float(std::sqrt(sum)), eps);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

void deltaRule(const DeltaNetShape& d, const float* x, const float* alpha, const float* beta,
               const float* dt_bias, const float* a, float* state, float* out, int n_tokens, int h0, int h1) {
  const int HK = d.head_k, HV = d.head_v, NV = d.n_v_heads;
  const size_t C = size_t(d.convChannels()), V = size_t(d.valueWidth()), key = size_t(d.keyWidth());
  for (int h = h0; h < h1; ++h) {
    const int kh = h % d.n_k_heads;  // tiled: value head h reads key head h mod n_k
    float* S = state + size_t(h) * HV * HK;
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = x + size_t(t) * C;
      const float* qh = xt + size_t(kh) * HK;
      const float* kk = xt + key + size_t(kh) * HK;
      const float* vh = xt + 2 * key + size_t(h) * HV;
      DeltaRowsStep step;
      step.state = S;
      step.n_rows = HV;
      step.hk = HK;
      step.k = kk;
      step.q = qh;
      step.v = vh;
      step.decay = std::exp(softplus(alpha[size_t(t) * NV + h] + dt_bias[h]) * a[h]);
      step.beta = sigmoid(beta[size_t(t) * NV + h]);
      step.out = out + size_t(t) * V + size_t(h) * HV;
      deltaRows(step);
    }
  }
}

void gatedRmsNormRow(const float* x, const float* weight, const float* gate, float* y, int dim, float eps) {
  double ss = 0;
  for (int i = 0; i < dim; ++i) ss += double(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(float(ss / dim) + eps);
  for (int i = 0; i < dim; ++i) y[i] = x[i] * inv * weight[i] * silu(gate[i]);
}

}  // namespace moe::deltanet
