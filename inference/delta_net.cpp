#include "inference/delta_net.h"

#include <algorithm>
#include <cmath>

namespace moe::deltanet {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// ggml's softplus: x itself above 20 (where log(1 + e^x) == x in float).
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x[0..n) / max(|x|, eps), times `scale` (ggml_l2_norm's definition).
void l2Normalise(float* x, int n, float eps, float scale) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  const float inv = scale / std::max(float(std::sqrt(sum)), eps);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void step(const DeltaNetShape& d, const LayerParams& p, float eps, LayerState& st, const float* qkv,
          const float* z, const float* alpha, const float* beta, float* out, float* work) {
  const int C = d.convChannels(), K = d.conv_kernel, HK = d.head_k, HV = d.head_v;
  const int key = d.keyWidth();
  // Causal conv: tap K-1 is this token, tap j < K-1 the input K-1-j tokens back
  // (conv state row j). Then SiLU, and the state shifts by one row.
  for (int c = 0; c < C; ++c) {
    const float* w = p.conv + size_t(c) * K;
    float acc = w[K - 1] * qkv[c];
    for (int j = 0; j < K - 1; ++j) acc += w[j] * st.conv[size_t(j) * C + c];
    work[c] = silu(acc);
  }
  if (K > 1) {
    std::copy(st.conv.begin() + C, st.conv.end(), st.conv.begin());
    std::copy(qkv, qkv + C, st.conv.end() - C);
  }
  float* q = work;
  float* k = work + key;
  const float* v = work + 2 * key;
  const float q_scale = 1.0f / std::sqrt(float(HK));
  for (int h = 0; h < d.n_k_heads; ++h) {
    l2Normalise(q + size_t(h) * HK, HK, eps, q_scale);
    l2Normalise(k + size_t(h) * HK, HK, eps, 1.0f);
  }
  for (int h = 0; h < d.n_v_heads; ++h) {
    const int kh = h % d.n_k_heads;  // tiled: value head h reads key head h mod n_k
    const float* qh = q + size_t(kh) * HK;
    const float* kk = k + size_t(kh) * HK;
    const float* vh = v + size_t(h) * HV;
    float* S = st.delta.data() + size_t(h) * HV * HK;
    const float decay = std::exp(softplus(alpha[h] + p.dt_bias[h]) * p.a[h]);
    const float b = sigmoid(beta[h]);
    float* o = out + size_t(h) * HV;
    for (int i = 0; i < HV; ++i) {
      float* row = S + size_t(i) * HK;
      float sk = 0;
      for (int j = 0; j < HK; ++j) {
        row[j] *= decay;
        sk += row[j] * kk[j];
      }
      const float delta = (vh[i] - sk) * b;
      float oq = 0;
      for (int j = 0; j < HK; ++j) {
        row[j] += kk[j] * delta;
        oq += row[j] * qh[j];
      }
      o[i] = oq;
    }
    // Gated RMS norm of the head's output.
    double ss = 0;
    for (int i = 0; i < HV; ++i) ss += double(o[i]) * o[i];
    const float inv = 1.0f / std::sqrt(float(ss / HV) + eps);
    const float* zh = z + size_t(h) * HV;
    for (int i = 0; i < HV; ++i) o[i] = o[i] * inv * p.norm[i] * silu(zh[i]);
  }
}

}  // namespace moe::deltanet
