// The CPU backend's position-dependent operations: RoPE (plain and YaRN-scaled),
// attention over the KV cache (causal, optionally within a sliding window and with
// per-head sink logits), and the activations that sit beside them.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "inference/cpu/cpu_backend.h"
#include "inference/cpu/cpu_scratch.h"
#include "inference/cpu/vector_ops.h"
#include "inference/rope_angles.h"
#include "quant/quant.h"

namespace moe {
namespace {

using cpu::scratch;
using gguf::TensorType;

// Rotates the first n_rot dims of one head. Norm: pairs (x[2i], x[2i+1]);
// Neox: pairs (x[i], x[i + n_rot/2]).
void rotateHead(float* x, int n_rot, const float* cs, RopeStyle style) {  // x: [head_dim]
  const int half = n_rot / 2;
  const int stride = style == RopeStyle::Norm ? 2 : 1;     // step between pair starts
  const int offset = style == RopeStyle::Norm ? 1 : half;  // distance to the partner
  for (int i = 0; i < half; ++i) {
    float* a = x + i * stride;
    float* b = a + offset;
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
  }
}

// One query head over keys first_key..n_keys-1 of its kv head. The caches hold F32
// or F16 elements (kv_type), kv_stride elements between positions; an F16 row is
// read as the floats it holds (quant::dotRow and dequantizeRow decode halves
// exactly), so the result is that of F32 caches holding the rounded values. A sink
// logit, when given, joins the softmax's denominator and contributes no value.
// scores: [n_keys] and v_row: [head_dim] scratch.
void attendOneHead(const float* q, const uint8_t* k_cache, const uint8_t* v_cache, TensorType kv_type,
                   int first_key, int n_keys, int kv_stride, int head_dim, float scale, const float* sink,
                   float* scores, float* v_row,
                   float* out) {  // q, out: [head_dim]; caches: [n_ctx][n_head_kv][head_dim]
  const size_t row_step = static_cast<size_t>(kv_stride) * (kv_type == TensorType::F16 ? 2 : 4);
  float max_score = sink ? *sink : -INFINITY;
  for (int j = first_key; j < n_keys; ++j) {
    scores[j] = quant::dotRow(kv_type, k_cache + j * row_step, q, head_dim) * scale;
    max_score = std::max(max_score, scores[j]);
  }
  // Softmax with the max subtracted: every exp is <= 1, the sum >= 1.
  float sum = 0.0f;
  for (int j = first_key; j < n_keys; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  if (sink) sum += std::exp(*sink - max_score);
  std::fill(out, out + head_dim, 0.0f);
  for (int j = first_key; j < n_keys; ++j) {
    const uint8_t* row = v_cache + j * row_step;
    const float* v = reinterpret_cast<const float*>(row);
    if (kv_type == TensorType::F16) {
      quant::dequantizeRow(TensorType::F16, row, v_row, head_dim);
      v = v_row;
    }
    vec::addScaled(out, v, scores[j], head_dim);
  }
  const float inv = 1.0f / sum;
  for (int d = 0; d < head_dim; ++d) out[d] *= inv;
}

void checkRot(int n_rot, int head_dim) {
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    throw std::invalid_argument("cpu backend: rope: n_rot " + std::to_string(n_rot) +
                                " must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
}

}  // namespace

void CpuBackend::rope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                      float freq_base,
                      RopeStyle style) {  // x: [n_tokens][n_heads][head_dim]; positions: [n_tokens]
  checkRot(n_rot, head_dim);
  forEach(n_tokens, static_cast<int64_t>(n_heads) * n_rot * 4, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf;
    float* cs = scratch(buf, n_rot);  // [n_rot/2] (cos, sin) pairs
    for (int64_t t = begin; t < end; ++t) {
      ropeAngles(positions[t], n_rot, freq_base, nullptr, cs);
      for (int h = 0; h < n_heads; ++h)
        rotateHead(x + (t * n_heads + h) * static_cast<int64_t>(head_dim), n_rot, cs, style);
    }
  });
}

void CpuBackend::ropeYarn(float* x, int n_tokens, int n_heads, int head_dim, int n_rot,
                          const int32_t* positions, float freq_base, RopeStyle style, const RopeYarn& yarn) {
  checkRot(n_rot, head_dim);
  if (!yarnValid(yarn))
    throw std::invalid_argument(
        "cpu backend: rope: YaRN needs factor >= 1, an original context and betas > 0");
  forEach(n_tokens, static_cast<int64_t>(n_heads) * n_rot * 4, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf;
    float* cs = scratch(buf, n_rot);
    for (int64_t t = begin; t < end; ++t) {
      ropeAngles(positions[t], n_rot, freq_base, &yarn, cs);
      for (int h = 0; h < n_heads; ++h)
        rotateHead(x + (t * n_heads + h) * static_cast<int64_t>(head_dim), n_rot, cs, style);
    }
  });
}

void CpuBackend::ropeFactors(float* x, int n_tokens, int n_heads, int head_dim, int n_rot,
                             const int32_t* positions, float freq_base, RopeStyle style,
                             const float* factors) {
  checkRot(n_rot, head_dim);
  forEach(n_tokens, static_cast<int64_t>(n_heads) * n_rot * 4, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf;
    float* cs = scratch(buf, n_rot);
    for (int64_t t = begin; t < end; ++t) {
      ropeAnglesWithFactors(positions[t], n_rot, freq_base, factors, cs);
      for (int h = 0; h < n_heads; ++h)
        rotateHead(x + (t * n_heads + h) * static_cast<int64_t>(head_dim), n_rot, cs, style);
    }
  });
}

void CpuBackend::attention(const float* q, const KvCache& k, const KvCache& v, int pos0, int n_tokens,
                           const AttentionShape& shape,
                           float* out) {  // q, out: [n_tokens][n_head][head_dim];
                                          // k, v: [n_ctx][n_head_kv][head_dim] F32
  const int n_head = shape.n_head, n_head_kv = shape.n_head_kv, hd = shape.head_dim;
  if (n_head <= 0 || n_head_kv <= 0 || hd <= 0 || n_head % n_head_kv != 0 || pos0 < 0 || shape.window < 0)
    throw std::invalid_argument("cpu backend: attention: bad shape n_head " + std::to_string(n_head) +
                                ", n_head_kv " + std::to_string(n_head_kv) + ", head_dim " +
                                std::to_string(hd) + ", window " + std::to_string(shape.window));
  if (k.type != v.type || (k.type != KvType::F32 && k.type != KvType::F16))
    throw std::invalid_argument("cpu backend: attention: the KV caches must both be F32 or both F16");
  if (!kvHoldsRows(k, pos0, n_tokens, shape) || !kvHoldsRows(v, pos0, n_tokens, shape))
    throw std::out_of_range("cpu backend: attention: rows up to " + std::to_string(pos0 + n_tokens) +
                            " past the KV cache");
  const TensorType kv_type = k.type == KvType::F16 ? TensorType::F16 : TensorType::F32;
  const size_t elem = kv_type == TensorType::F16 ? 2 : 4;
  const auto* k_cache = static_cast<const uint8_t*>(k.data);
  const auto* v_cache = static_cast<const uint8_t*>(v.data);
  const int group = n_head / n_head_kv;  // query heads per kv head
  const int kv_stride = n_head_kv * hd;  // elements between consecutive positions
  const int64_t items = static_cast<int64_t>(n_tokens) * n_head;
  const int64_t keys = shape.window > 0 ? std::min(shape.window, pos0 + n_tokens) : pos0 + n_tokens;
  forEach(items, 2 * keys * hd, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf, row_buf;
    float* scores = scratch(buf, static_cast<size_t>(pos0 + n_tokens));
    float* v_row = scratch(row_buf, static_cast<size_t>(hd));
    for (int64_t item = begin; item < end; ++item) {
      const int t = static_cast<int>(item / n_head);
      const int h = static_cast<int>(item % n_head);
      const int n_keys = pos0 + t + 1;
      const int first_key = shape.window > 0 ? std::max(0, n_keys - shape.window) : 0;
      const size_t kv_offset = static_cast<size_t>(h / group) * hd * elem;
      attendOneHead(q + item * hd, k_cache + kv_offset, v_cache + kv_offset, kv_type, first_key, n_keys,
                    kv_stride, hd, shape.scale, shape.sinks ? shape.sinks + h : nullptr, scores, v_row,
                    out + item * hd);
    }
  });
}

void CpuBackend::swigluClamped(const float* gate, const float* up, float* out, size_t n, float alpha,
                               float limit) {  // [n]
  forEach(static_cast<int64_t>(n), 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = std::min(gate[i], limit);
      const float u = std::clamp(up[i], -limit, limit);
      out[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
    }
  });
}

}  // namespace moe
