// The gated delta-net recurrence of qwen35moe's linear-attention layers
// (DeltaNetShape in model_config.h), one token at a time on host memory. The math
// (Yang et al., "Gated Delta Networks", 2024; as llama.cpp's qwen35moe graph and its
// delta-net builder compute it, src/models/qwen35moe.cpp and delta-net-base.cpp):
//   x      = causal depthwise conv of the attn_qkv output over the last conv_kernel
//            tokens (the earlier ones carried in the conv state), then SiLU
//   q, k   = x's first two key-width parts, each head L2-normalised (x / max(|x|, eps));
//            q scaled by 1 / sqrt(head_k)
//   v      = x's value part; value head h reads key head h mod n_k_heads
//   g      = softplus(alpha + dt_bias) * a   (a = -exp(A_log) < 0), per value head
//   beta   = sigmoid(beta logit), per value head
//   S      = exp(g) S;  S += beta (v - S k) k^T;  o = S q      (S: head_v x head_k)
//   out    = rmsNorm(o, ssm_norm) * silu(z), per value head
#pragma once

#include <cstddef>
#include <vector>

#include "inference/model_config.h"

namespace moe::deltanet {

// One layer's recurrent state of one sequence.
//   conv:  [conv_kernel - 1][conv_channels] the latest inputs of the conv, oldest first
//   delta: [n_v_heads][head_v][head_k] each value head's state S (row i: value dim i)
struct LayerState {
  std::vector<float> conv;
  std::vector<float> delta;
  void reset(const DeltaNetShape& d) {
    conv.assign(d.convStateFloats(), 0.0f);
    delta.assign(d.deltaStateFloats(), 0.0f);
  }
};

// The per-layer weights the recurrence reads (host F32, LayerWeights' dn_*).
struct LayerParams {
  const float* conv = nullptr;     // [conv_channels][conv_kernel]
  const float* dt_bias = nullptr;  // [n_v_heads]
  const float* a = nullptr;        // [n_v_heads]
  const float* norm = nullptr;     // [head_v]
};

// One token: qkv [conv_channels] (attn_qkv's output), z [value_width] (attn_gate's),
// alpha, beta [n_v_heads] (ssm_alpha's and ssm_beta's logits) -> out [value_width],
// the state advanced by the token. work: scratch of at least conv_channels floats.
void step(const DeltaNetShape& d, const LayerParams& p, float eps, LayerState& st, const float* qkv,
          const float* z, const float* alpha, const float* beta, float* out, float* work);

}  // namespace moe::deltanet
