// qwen35moe's two layer kinds (Qwen3.5 / Qwen3.6 MoE; llama.cpp's qwen35moe graph,
// src/models/qwen35moe.cpp, read for the facts):
// - full attention whose query projection gives per head [q; gate]: q and k are
//   RMS-normed per head, rotated (IMROPE, which for text positions is NEOX rope on the
//   first n_rot dims: ModelConfig checks the sections), attend as usual, and each
//   head's output is multiplied by sigmoid(gate) before attn_output;
// - gated delta-net linear attention (delta_net.h), whose state per sequence lives
//   here beside the KV cache and follows its lifecycle (truncate, failed steps).
// The projections run on the backend; the recurrence and the gate on the host (a copy
// each way per layer; on the CPU backend a memcpy). A device form is owed.
#include <cmath>

#include "inference/transformer.h"
#include "inference/transformer_scratch.h"

namespace moe {

void Transformer::gatedAttentionBlock(int il, int n) {
  const auto& L = model_.weights().layers[il];
  const int H = cfg_.n_head, hd = cfg_.head_dim, Q = cfg_.qWidth(), KV = cfg_.kvWidth();
  normInput(L.attn_norm, n);
  const Backend::MatmulJob qkv[] = {
      {L.wq, s_->xn, s_->q_full, n}, {L.wk, s_->xn, s_->k, n}, {L.wv, s_->xn, s_->v, n}};
  backend_.matmulMany(qkv);
  // Head h of token t: q_full row t * H + h holds [q (hd), gate (hd)].
  backend_.copyRows(s_->q, hd, s_->q_full, 2 * size_t(hd), hd, size_t(n) * H);
  backend_.copyRows(s_->gate, hd, s_->q_full + hd, 2 * size_t(hd), hd, size_t(n) * H);
  backend_.rmsNorm(s_->q, L.q_norm, s_->q, n * H, hd, cfg_.rms_eps);
  backend_.rmsNorm(s_->k, L.k_norm, s_->k, n * cfg_.n_head_kv, hd, cfg_.rms_eps);
  backend_.ropePair(s_->q, H, s_->k, cfg_.n_head_kv, n, hd, cfg_.n_rot, positions_.data(),
                    cfg_.rope_freq_base, cfg_.rope_style);
  backend_.storeKvPair(k_cache_[il], v_cache_[il], size_t(n_past_) * KV, s_->k, s_->v, size_t(n) * KV);
  const AttentionShape shape{H, cfg_.n_head_kv, hd, 1.0f / std::sqrt(float(hd))};
  backend_.attention(s_->q, k_cache_[il], v_cache_[il], n_past_, n, shape, s_->attn);

  // attn *= sigmoid(gate), on the host.
  const size_t count = size_t(n) * Q;
  std::vector<float>& host = s_->host_rows;
  host.resize(2 * count);
  backend_.toHost(host.data(), s_->attn, count);
  backend_.toHost(host.data() + count, s_->gate, count);
  for (size_t i = 0; i < count; ++i) host[i] *= 1.0f / (1.0f + std::exp(-host[count + i]));
  backend_.fromHost(s_->attn, host.data(), count);
  backend_.matmul(L.wo, s_->attn, s_->out, n);
  pending_residual_ = s_->out;
}

void Transformer::deltaNetBlock(int il, int n) {
  const auto& L = model_.weights().layers[il];
  const DeltaNetShape& d = cfg_.delta;
  const size_t C = d.convChannels(), V = d.valueWidth(), NV = d.n_v_heads;
  normInput(L.attn_norm, n);
  const Backend::MatmulJob jobs[] = {{L.dn_qkv, s_->xn, s_->dn_qkv, n},
                                     {L.dn_gate, s_->xn, s_->dn_z, n},
                                     {L.dn_alpha, s_->xn, s_->dn_alpha, n},
                                     {L.dn_beta, s_->xn, s_->dn_beta, n}};
  backend_.matmulMany(jobs);

  // Host rows: qkv [n][C], z [n][V], alpha [n][NV], beta [n][NV], out [n][V], work [C].
  std::vector<float>& host = s_->host_rows;
  host.resize(size_t(n) * (C + 2 * V + 2 * NV) + C);
  float* qkv = host.data();
  float* z = qkv + size_t(n) * C;
  float* alpha = z + size_t(n) * V;
  float* beta = alpha + size_t(n) * NV;
  float* out = beta + size_t(n) * NV;
  float* work = out + size_t(n) * V;
  backend_.toHost(qkv, s_->dn_qkv, size_t(n) * C);
  backend_.toHost(z, s_->dn_z, size_t(n) * V);
  backend_.toHost(alpha, s_->dn_alpha, size_t(n) * NV);
  backend_.toHost(beta, s_->dn_beta, size_t(n) * NV);

  // The recurrence, token after token (a chunked form for prefill is owed).
  const deltanet::LayerParams params{L.dn_conv, L.dn_dt_bias, L.dn_a, L.dn_norm};
  deltanet::LayerState& state = recurrent_[size_t(il)];
  for (int t = 0; t < n; ++t)
    deltanet::step(d, params, cfg_.rms_eps, state, qkv + size_t(t) * C, z + size_t(t) * V,
                   alpha + size_t(t) * NV, beta + size_t(t) * NV, out + size_t(t) * V, work);

  backend_.fromHost(s_->dn_out, out, size_t(n) * V);
  backend_.matmul(L.dn_out, s_->dn_out, s_->out, n);
  pending_residual_ = s_->out;
}

void Transformer::resetRecurrentState() {
  for (int il = 0; il < cfg_.n_layer; ++il)
    if (cfg_.isRecurrentLayer(il)) recurrent_[size_t(il)].reset(cfg_.delta);
  recurrent_stale_ = false;
}

void Transformer::recomputeRecurrentState() {
  // The KV rows of the kept positions are still valid; recomputing them with the state
  // costs one prefill of the kept tokens and gives the same values.
  std::vector<int32_t> kept(history_.begin(), history_.begin() + n_past_);
  resetRecurrentState();
  n_past_ = 0;
  history_.clear();
  if (kept.empty()) return;
  std::vector<float> unused;
  forward(kept, unused, false);
}

}  // namespace moe
