// gemma4's layer (Gemma 4 26B-A4B and its kind), as llama.cpp computes it
// (src/models/gemma4.cpp, the graph of llama_model_gemma4; facts read there, the code
// is ours):
//   h   = x + post_attention_norm(attention(attn_norm(x)))
//   mlp = post_ffw_norm_1(down(gelu(gate a) * up a)),  a = ffn_norm(h)
//   moe = post_ffw_norm_2(experts(pre_ffw_norm_2(h))), routed by
//         ffn_gate_inp . (rms(h) x ffn_gate_inp.scale / sqrt(n_embd)), softmax top-k
//         renormalised, expert e's output x ffn_down_exps.scale[e]
//   x'  = (h + post_ffw_norm(mlp + moe)) x layer_output_scale
// Attention: q = rope(q_norm(Wq a)) per head; a layer that owns its K/V stores
// k = rope(k_norm(Wk a)) and v = rms(Wv a) (no weight; Wk a where the layer has no
// Wv); a shared-KV layer attends over its source layer's cache; q.k is not scaled;
// sliding layers see the last sliding_window positions. The global layers' rope turns
// pair i by base^(-2i/head_dim) / rope_freqs[i] (the converter's "proportional" rope:
// 1e30 stills the pairs past partial_rotary_factor). Norms are plain RMS norms with
// the weights as stored (the gemma4 converter adds no 1, unlike Gemma 2 / 3's).
#include "inference/transformer.h"
#include "inference/transformer_scratch.h"

namespace moe {

void Transformer::gemma4Layer(int il, int n) {
  gemma4Attention(il, n);
  gemma4Ffn(il, n);
}

void Transformer::gemma4Attention(int il, int n) {
  const auto& w = model_.weights();
  const auto& L = w.layers[il];
  const int E = cfg_.n_embd, H = cfg_.n_head, hd = cfg_.headDimOf(il), nkv = cfg_.nHeadKvOf(il);
  const int KV = nkv * hd;
  const float eps = cfg_.rms_eps;
  const Backend::RopeParams r = gemma4Rope(il);
  auto rotate = [&](float* x, int heads) {
    if (!r.factors.empty())
      backend_.ropeFactors(x, n, heads, hd, r.n_rot, positions_.data(), r.base, cfg_.rope_style,
                           r.factors.data());
    else
      backend_.rope(x, n, heads, hd, r.n_rot, positions_.data(), r.base, cfg_.rope_style);
  };

  backend_.rmsNorm(s_->x, L.attn_norm, s_->xn, n, E, eps);
  const bool own = cfg_.ownsKv(il);
  if (own) {
    std::vector<Backend::MatmulJob> jobs = {{L.wq, s_->xn, s_->q, n}, {L.wk, s_->xn, s_->k, n}};
    if (!L.wv.empty()) jobs.push_back({L.wv, s_->xn, s_->v, n});
    backend_.matmulMany(jobs);
    if (L.wv.empty()) backend_.copy(s_->v, s_->k, size_t(n) * KV);  // V is the K projection
  } else {
    backend_.matmul(L.wq, s_->xn, s_->q, n);
  }
  backend_.rmsNorm(s_->q, L.q_norm, s_->q, n * H, hd, eps);  // [n][H][hd]
  rotate(s_->q, H);
  if (own) {
    backend_.rmsNorm(s_->k, L.k_norm, s_->k, n * nkv, hd, eps);
    backend_.rmsNorm(s_->v, nullptr, s_->v, n * nkv, hd, eps);
    rotate(s_->k, nkv);
    backend_.storeKvPair(k_cache_[il], v_cache_[il], size_t(n_past_) * KV, s_->k, s_->v, size_t(n) * KV);
  }
  const int src = cfg_.kvSourceOf(il);
  AttentionShape shape{H, nkv, hd, cfg_.attentionScale()};
  shape.window = cfg_.windowOf(il);
  backend_.attention(s_->q, k_cache_[src], v_cache_[src], n_past_, n, shape, s_->attn);
  backend_.matmul(L.wo, s_->attn, s_->out, n);
  backend_.rmsNorm(s_->out, L.attn_post_norm, s_->out, n, E, eps);
  backend_.add(s_->x, s_->out, size_t(n) * E);
}

// A sliding layer's rope, or a global layer's with the file's frequency factors.
Backend::RopeParams Transformer::gemma4Rope(int il) const {
  const auto& freqs = model_.weights().rope_freqs;
  Backend::RopeParams r{cfg_.nRotOf(il), cfg_.ropeBaseOf(il), {}, {}};
  if (cfg_.windowOf(il) == 0 && !freqs.empty()) r.factors = freqs;
  return r;
}

void Transformer::gemma4Ffn(int il, int n) {
  const auto& L = model_.weights().layers[il];
  const int E = cfg_.n_embd, F = cfg_.n_ff;
  const float eps = cfg_.rms_eps;
  // The dense MLP (the "shared expert" of llama.cpp's comments).
  backend_.rmsNorm(s_->x, L.ffn_norm, s_->xn, n, E, eps);
  const Backend::MatmulJob gate_up[] = {{L.ffn_gate, s_->xn, s_->ff_a, n}, {L.ffn_up, s_->xn, s_->ff_b, n}};
  backend_.matmulMany(gate_up);
  activate(backend_, s_->ff_a, s_->ff_b, s_->ff_a, size_t(n) * F);
  backend_.matmul(L.ffn_down, s_->ff_a, s_->mlp, n);
  backend_.rmsNorm(s_->mlp, L.ffn_post_norm_1, s_->mlp, n, E, eps);
  // The routed experts: moeBlock reads its inputs through moeInputs and leaves the
  // weighted sum in s_->out.
  moeBlock(il, n);
  pending_residual_ = nullptr;
  backend_.rmsNorm(s_->out, L.ffn_post_norm_2, s_->out, n, E, eps);
  backend_.add(s_->out, s_->mlp, size_t(n) * E);
  backend_.rmsNorm(s_->out, L.ffn_post_norm, s_->out, n, E, eps);
  backend_.add(s_->x, s_->out, size_t(n) * E);
  if (L.out_scale != 1.0f) backend_.scale(s_->x, L.out_scale, size_t(n) * E);
}

}  // namespace moe
