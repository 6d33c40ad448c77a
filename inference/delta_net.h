// The gated delta-net recurrence of qwen35moe's linear-attention layers
// (DeltaNetShape in model_config.h) on host memory: the CPU backend's ops
// (Backend::convSilu, l2NormHeads, deltaRule, gatedRmsNorm, sigmoidGate) and the
// reference the CUDA kernels (inference/cuda/cuda_delta_net.cu) are tested against.
// The math (Yang et al., "Gated Delta Networks", 2024; as llama.cpp's qwen35moe graph
// and its delta-net builder compute it, src/models/qwen35moe.cpp and delta-net-base.cpp):
//   x      = causal depthwise conv of the attn_qkv output over the last conv_kernel
//            tokens (the earlier ones carried in the conv state), then SiLU
//   q, k   = x's first two key-width parts, each head L2-normalised (x / max(|x|, eps));
//            q scaled by 1 / sqrt(head_k)
//   v      = x's value part; value head h reads key head h mod n_k_heads
//   g      = softplus(alpha + dt_bias) * a   (a = -exp(A_log) < 0), per value head
//   beta   = sigmoid(beta logit), per value head
//   S      = exp(g) S;  S += beta (v - S k) k^T;  o = S q      (S: head_v x head_k)
//   out    = rmsNorm(o, ssm_norm) * silu(z), per value head
// A layer's state per sequence: conv [conv_kernel - 1][conv_channels] (the latest
// inputs of the conv, oldest first), delta [n_v_heads][head_v][head_k] (row i: value
// dim i), both in backend memory and owned by the Transformer.
#pragma once

#include <cmath>
#include <cstddef>

#include "inference/model_config.h"

namespace moe::deltanet {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// ggml's softplus: x itself above 20 (where log(1 + e^x) == x in float).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Channels [c0, c1) of the conv: x [n_tokens][channels] -> out [n_tokens][channels]
// = silu(sum over taps), weight [channels][kernel] (tap kernel - 1 is the token itself,
// tap j the input kernel - 1 - j tokens back); state advanced by the tokens.
void convSilu(const float* x, const float* weight, float* state, float* out, int n_tokens, int channels,
              int kernel, int c0, int c1);
// One head x [n]: x / max(|x|, eps) * scale.
void l2NormHead(float* x, int n, float eps, float scale);
// Value heads [h0, h1) over n_tokens tokens: x [n_tokens][conv_channels] (q normalised
// and scaled, k normalised, v), alpha / beta logits [n_tokens][n_v_heads], dt_bias and
// a [n_v_heads], state [n_v_heads][head_v][head_k] advanced, out [n_tokens][value_width].
void deltaRule(const DeltaNetShape& d, const float* x, const float* alpha, const float* beta,
               const float* dt_bias, const float* a, float* state, float* out, int n_tokens, int h0, int h1);
// One row: y = x / sqrt(mean(x^2) + eps) * weight * silu(gate)  (x may be y).
void gatedRmsNormRow(const float* x, const float* weight, const float* gate, float* y, int dim, float eps);

}  // namespace moe::deltanet
