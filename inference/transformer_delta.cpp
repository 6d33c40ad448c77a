// qwen35moe's two layer kinds (Qwen3.5 / Qwen3.6 MoE; llama.cpp's qwen35moe graph,
// src/models/qwen35moe.cpp, read for the facts):
// - full attention whose query projection gives per head [q; gate]: q and k are
//   RMS-normed per head, rotated (IMROPE, which for text positions is NEOX rope on the
//   first n_rot dims: ModelConfig checks the sections), attend as usual, and each
//   head's output is multiplied by sigmoid(gate) before attn_output;
// - gated delta-net linear attention (delta_net.h), whose state per sequence lives
//   here beside the KV cache, in backend memory, and follows its lifecycle (truncate,
//   failed steps).
// Every op runs on the backend: nothing crosses to the host, so a decode step can be
// recorded as a graph like any other architecture's.
#include <algorithm>
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
  backend_.sigmoidGate(s_->attn, s_->gate, size_t(n) * Q);
  backend_.matmul(L.wo, s_->attn, s_->out, n);
  pending_residual_ = s_->out;
}

void Transformer::deltaNetBlock(int il, int n) {
  const auto& L = model_.weights().layers[il];
  const DeltaNetShape& d = cfg_.delta;
  const int C = d.convChannels(), key = d.keyWidth();
  normInput(L.attn_norm, n);
  const Backend::MatmulJob jobs[] = {{L.dn_qkv, s_->xn, s_->dn_qkv, n},
                                     {L.dn_gate, s_->xn, s_->dn_z, n},
                                     {L.dn_alpha, s_->xn, s_->dn_alpha, n},
                                     {L.dn_beta, s_->xn, s_->dn_beta, n}};
  backend_.matmulMany(jobs);
  const RecurrentState& state = recurrent_[size_t(il)];
  // The conv's output in dn_conv: [n][C] = q | k | v per token.
  backend_.convSilu(s_->dn_qkv, L.dn_conv, state.conv, s_->dn_conv, n, C, d.conv_kernel);
  backend_.l2NormHeads(s_->dn_conv, n, size_t(C), d.n_k_heads, d.head_k, cfg_.rms_eps,
                       1.0f / std::sqrt(float(d.head_k)));
  backend_.l2NormHeads(s_->dn_conv + key, n, size_t(C), d.n_k_heads, d.head_k, cfg_.rms_eps, 1.0f);
  // The recurrence, token after token (a chunked form for prefill is owed).
  Backend::DeltaRuleCall call;
  call.x = s_->dn_conv;
  call.alpha = s_->dn_alpha;
  call.beta = s_->dn_beta;
  call.dt_bias = L.dn_dt_bias;
  call.a = L.dn_a;
  call.state = state.delta;
  call.out = s_->dn_out;
  call.n_tokens = n;
  call.shape = d;
  backend_.deltaRule(call);
  backend_.gatedRmsNorm(s_->dn_out, L.dn_norm, s_->dn_z, s_->dn_out, n * d.n_v_heads, d.head_v, cfg_.rms_eps);
  backend_.matmul(L.dn_out, s_->dn_out, s_->out, n);
  pending_residual_ = s_->out;
}

void Transformer::resetRecurrentState() {
  for (const RecurrentState& r : recurrent_) {
    if (r.conv) backend_.zero(r.conv, std::max<size_t>(cfg_.delta.convStateFloats(), 1));
    if (r.delta) backend_.zero(r.delta, cfg_.delta.deltaStateFloats());
  }
  recurrent_stale_ = false;
}

void Transformer::copyState(const std::vector<RecurrentState>& from, const std::vector<RecurrentState>& to) {
  for (size_t il = 0; il < from.size(); ++il) {
    if (!from[il].delta) continue;
    backend_.copy(to[il].conv, from[il].conv, std::max<size_t>(cfg_.delta.convStateFloats(), 1));
    backend_.copy(to[il].delta, from[il].delta, cfg_.delta.deltaStateFloats());
  }
}

// The state at n_past_, in the slot already at that position, else an unused one or
// the one nearest the start.
void Transformer::takeSnapshot() {
  RecurrentSnapshot* slot = nullptr;
  for (RecurrentSnapshot& snap : snapshots_)
    if (snap.position == n_past_) slot = &snap;
  if (!slot)  // an unused slot (position -1) or the one nearest the start
    for (RecurrentSnapshot& snap : snapshots_)
      if (!slot || snap.position < slot->position) slot = &snap;
  if (!slot) return;
  copyState(recurrent_, slot->layers);
  slot->position = n_past_;
}

void Transformer::dropSnapshotsAbove(int position) {
  for (RecurrentSnapshot& snap : snapshots_)
    if (snap.position > position) snap.position = -1;
}

void Transformer::recomputeRecurrentState() {
  // From the newest snapshot at or below the kept length (else from an empty state):
  // the KV rows of the kept positions are still valid, and recomputing the ones after
  // the snapshot with the state gives the same values.
  const int keep = n_past_;
  const RecurrentSnapshot* from = nullptr;
  for (const RecurrentSnapshot& snap : snapshots_)
    if (snap.position >= 0 && snap.position <= keep && (!from || snap.position > from->position))
      from = &snap;
  const int base = from ? from->position : 0;
  std::vector<int32_t> rest(history_.begin() + base, history_.begin() + keep);
  if (from)
    copyState(from->layers, recurrent_);
  else
    resetRecurrentState();
  recurrent_stale_ = false;
  n_past_ = base;
  history_.resize(size_t(base));
  if (rest.empty()) return;
  recomputed_tokens_ += int64_t(rest.size());
  std::vector<float> unused;
  forward(rest, unused, false);
}

}  // namespace moe
