// deepseek2's multi-head latent attention (MlaShape in model_config.h), in the
// absorbed form: one KV head of rows [k_pe, c] is cached per position (K) with
// [0, c] beside it (V), so the backend's ordinary attention computes, per query head
// [q_pe, W_UK^T q_nope], the scores q_pe.k_pe + q_nope.(W_UK c) and the latent
// output sum p c, which W_UV then maps to the head's value. Per-row copies and
// per-head products: the CPU backend runs it (a device backend refuses deepseek2).
#include <cmath>

#include "inference/transformer.h"
#include "inference/transformer_scratch.h"

namespace moe {

void Transformer::latentAttentionBlock(int il, int n) {
  const auto& L = model_.weights().layers[il];
  const MlaShape& m = cfg_.mla;
  const int H = cfg_.n_head, R = cfg_.n_rot, C = m.kv_lora, D = cfg_.head_dim;  // D = R + C
  const int QD = m.qk_dim, N = m.qk_nope, V = m.v_dim;
  normInput(L.attn_norm, n);

  // The file's query, [n][H][N + R]: nope dims first, rope dims last.
  if (!L.wq_a.empty()) {
    backend_.matmul(L.wq_a, s_->xn, s_->mla_q_a, n);
    backend_.rmsNorm(s_->mla_q_a, L.q_a_norm, s_->mla_q_a, n, m.q_lora, cfg_.rms_eps);
    backend_.matmul(L.wq_b, s_->mla_q_a, s_->mla_q, n);
  } else {
    backend_.matmul(L.wq, s_->xn, s_->mla_q, n);
  }
  // The latent c (normed) and the shared rope key k_pe.
  backend_.matmul(L.wkv_a, s_->xn, s_->mla_kv_a, n);
  for (int t = 0; t < n; ++t)
    backend_.copy(s_->mla_latent + size_t(t) * C, s_->mla_kv_a + size_t(t) * (C + R), C);
  backend_.rmsNorm(s_->mla_latent, L.kv_a_norm, s_->mla_latent, n, C, cfg_.rms_eps);

  // Cache rows: K = [k_pe, c], V = [0, c].
  backend_.zero(s_->v, size_t(n) * D);
  for (int t = 0; t < n; ++t) {
    const float* c = s_->mla_latent + size_t(t) * C;
    backend_.copy(s_->k + size_t(t) * D, s_->mla_kv_a + size_t(t) * (C + R) + C, R);
    backend_.copy(s_->k + size_t(t) * D + R, c, C);
    backend_.copy(s_->v + size_t(t) * D + R, c, C);
  }
  // Query heads = [q_pe, W_UK^T q_nope].
  for (int h = 0; h < H; ++h) {
    for (int t = 0; t < n; ++t) {
      const float* head = s_->mla_q + (size_t(t) * H + h) * QD;
      backend_.copy(s_->mla_nope + size_t(t) * N, head, N);
      backend_.copy(s_->q + (size_t(t) * H + h) * D, head + N, R);
    }
    backend_.matmul(L.mla_uk_t[size_t(h)], s_->mla_nope, s_->mla_head, n);
    for (int t = 0; t < n; ++t)
      backend_.copy(s_->q + (size_t(t) * H + h) * D + R, s_->mla_head + size_t(t) * C, C);
  }
  // The first R dims of each head rotate: q_pe and k_pe.
  rope(s_->q, n, H);
  rope(s_->k, n, 1);
  backend_.storeKvPair(k_cache_[il], v_cache_[il], size_t(n_past_) * D, s_->k, s_->v, size_t(n) * D);

  const AttentionShape shape{H, 1, D, cfg_.attentionScale()};
  backend_.attention(s_->q, k_cache_[il], v_cache_[il], n_past_, n, shape, s_->attn);
  // Each head's latent output (dims R.. of its row) through W_UV, then the output projection.
  for (int h = 0; h < H; ++h) {
    for (int t = 0; t < n; ++t)
      backend_.copy(s_->mla_head + size_t(t) * C, s_->attn + (size_t(t) * H + h) * D + R, C);
    backend_.matmul(L.mla_uv[size_t(h)], s_->mla_head, s_->mla_value, n);
    for (int t = 0; t < n; ++t)
      backend_.copy(s_->mla_values + (size_t(t) * H + h) * V, s_->mla_value + size_t(t) * V, V);
  }
  backend_.matmul(L.wo, s_->mla_values, s_->out, n);
  pending_residual_ = s_->out;
}

}  // namespace moe
