// deepseek2's multi-head latent attention (MlaShape in model_config.h), in the
// absorbed form: one KV head of rows [k_pe, c] is cached per position (K) with
// [0, c] beside it (V), so the backend's ordinary attention computes, per query head
// [q_pe, W_UK^T q_nope], the scores q_pe.k_pe + q_nope.(W_UK c) and the latent
// output sum p c, which W_UV then maps to the head's value. The heads' parts are
// gathered and scattered by strided row copies (one launch each on a device
// backend), and each head's W_UK / W_UV product is its own matmul.
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
  backend_.copyRows(s_->mla_latent, C, s_->mla_kv_a, C + R, C, n);
  backend_.rmsNorm(s_->mla_latent, L.kv_a_norm, s_->mla_latent, n, C, cfg_.rms_eps);

  // Cache rows: K = [k_pe, c], V = [0, c].
  backend_.zero(s_->v, size_t(n) * D);
  backend_.copyRows(s_->k, D, s_->mla_kv_a + C, C + R, R, n);
  backend_.copyRows(s_->k + R, D, s_->mla_latent, C, C, n);
  backend_.copyRows(s_->v + R, D, s_->mla_latent, C, C, n);
  // Query heads = [q_pe, W_UK^T q_nope].
  for (int h = 0; h < H; ++h) {
    const float* head = s_->mla_q + size_t(h) * QD;  // token t's at + t * H * QD
    float* q = s_->q + size_t(h) * D;
    backend_.copyRows(s_->mla_nope, N, head, size_t(H) * QD, N, n);
    backend_.copyRows(q, size_t(H) * D, head + N, size_t(H) * QD, R, n);
    backend_.matmul(L.mla_uk_t[size_t(h)], s_->mla_nope, s_->mla_head, n);
    backend_.copyRows(q + R, size_t(H) * D, s_->mla_head, C, C, n);
  }
  // The first R dims of each head rotate: q_pe and k_pe.
  rope(s_->q, n, H);
  rope(s_->k, n, 1);
  backend_.storeKvPair(k_cache_[il], v_cache_[il], size_t(n_past_) * D, s_->k, s_->v, size_t(n) * D);

  const AttentionShape shape{H, 1, D, cfg_.attentionScale()};
  backend_.attention(s_->q, k_cache_[il], v_cache_[il], n_past_, n, shape, s_->attn);
  // Each head's latent output (dims R.. of its row) through W_UV, then the output projection.
  for (int h = 0; h < H; ++h) {
    backend_.copyRows(s_->mla_head, C, s_->attn + size_t(h) * D + R, size_t(H) * D, C, n);
    backend_.matmul(L.mla_uv[size_t(h)], s_->mla_head, s_->mla_value, n);
    backend_.copyRows(s_->mla_values + size_t(h) * V, size_t(H) * V, s_->mla_value, V, V, n);
  }
  backend_.matmul(L.wo, s_->mla_values, s_->out, n);
  pending_residual_ = s_->out;
}

}  // namespace moe
