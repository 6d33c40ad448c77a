// The forward pass's activation buffers (Transformer's private part, shared by
// transformer.cpp and the files of its layer kinds: transformer_moe.cpp, _mla, _delta, _gemma4).
#pragma once

#include <algorithm>
#include <vector>

#include "inference/backend.h"
#include "inference/model_config.h"
#include "inference/transformer.h"

namespace moe {

// Activation buffers in backend memory, sized for kMaxBatch tokens, plus the
// host-side routing arrays.
struct Transformer::Scratch {
  Backend& be;
  std::vector<float*> owned;
  float* x;                  // [batch][n_embd] residual stream
  float* xn;                 // [batch][n_embd] normalised input of a block
  float* q;                  // [batch][q_width]
  float* k;                  // [batch][kv_width]
  float* v;                  // [batch][kv_width]
  float* attn;               // [batch][q_width]
  float* out;                // [batch][n_embd] block output
  float* ff_a;               // [batch][max ffn width] gate / activation
  float* ff_b;               // [batch][max ffn width] up
  float* gathered;           // [batch][n_embd] rows routed to one expert
  float* expert_out;         // [batch][n_expert_used][n_embd] each chosen expert's output
  float* router;             // [batch][n_expert]
  float* routing = nullptr;  // [2][batch][n_expert_used] ids (int32 bits), weights: Backend::routeTopK
  float* h = nullptr;        // [batch][n_expert_used][n_ff_exp] experts' silu(gate) * up
  float* scalar;             // [batch] shared-expert gate logits
  float* logits;             // [batch][n_vocab]
  // deepseek2's latent attention (null elsewhere): the file's query, its q_lora
  // stage, the latent projection [c, k_pe], the normed latent, one head's query
  // without rope, one head's product with W_UK^T or latent output, one head's
  // value, and every head's value side by side.
  float* mla_q = nullptr;       // [batch][n_head * qk_dim]
  float* mla_q_a = nullptr;     // [batch][q_lora]
  float* mla_kv_a = nullptr;    // [batch][kv_lora + n_rot]
  float* mla_latent = nullptr;  // [batch][kv_lora]
  float* mla_nope = nullptr;    // [batch][qk_nope]
  float* mla_head = nullptr;    // [batch][kv_lora]
  float* mla_value = nullptr;   // [batch][v_dim]
  float* mla_values = nullptr;  // [batch][n_head * v_dim]
  // qwen35moe (null elsewhere): the joint query + gate projection and the gate; a
  // delta-net layer's projections and its output before ssm_out.
  float* q_full = nullptr;    // [batch][n_head][2][head_dim]
  float* gate = nullptr;      // [batch][q_width]
  float* dn_qkv = nullptr;    // [batch][conv_channels]
  float* dn_conv = nullptr;   // [batch][conv_channels] the conv's output: q | k | v
  float* dn_z = nullptr;      // [batch][value_width]
  float* dn_alpha = nullptr;  // [batch][n_v_heads]
  float* dn_beta = nullptr;   // [batch][n_v_heads]
  float* dn_out = nullptr;    // [batch][value_width]
  // gemma4 (null elsewhere): the dense MLP's output beside the experts', the router's input.
  float* mlp = nullptr;            // [batch][n_embd]
  float* router_in = nullptr;      // [batch][n_embd]
  std::vector<float> host_router;  // [batch][n_expert]
  std::vector<float> host_hidden;  // [batch][n_embd] layer input for the expert source
  std::vector<int> chosen;         // [batch][n_expert_used]
  std::vector<float> chosen_w;     // [batch][n_expert_used]

  Scratch(Backend& b, const ModelConfig& c, int batch) : be(b) {
    const size_t B = batch;
    const size_t ffn = std::max({c.n_ff, c.n_ff_exp, c.n_ff_shexp, 1});
    x = alloc(B * c.n_embd);
    xn = alloc(B * c.n_embd);
    q = alloc(B * c.qWidth());
    k = alloc(B * c.kvWidth());
    v = alloc(B * c.kvWidth());
    attn = alloc(B * c.qWidth());
    out = alloc(B * c.n_embd);
    ff_a = alloc(B * ffn);
    ff_b = alloc(B * ffn);
    gathered = alloc(B * c.n_embd);
    expert_out = alloc(B * c.n_expert_used * c.n_embd);
    router = alloc(B * c.n_expert);
    if (b.computesMoe() && c.n_expert > 0) {
      routing = alloc(2 * B * c.n_expert_used);
      h = alloc(B * c.n_expert_used * c.n_ff_exp);
    }
    scalar = alloc(B);
    logits = alloc(B * c.n_vocab);
    if (c.isMla()) {
      const MlaShape& m = c.mla;
      mla_q = alloc(B * c.n_head * m.qk_dim);
      if (m.q_lora > 0) mla_q_a = alloc(B * m.q_lora);
      mla_kv_a = alloc(B * (m.kv_lora + c.n_rot));
      mla_latent = alloc(B * m.kv_lora);
      mla_nope = alloc(B * m.qk_nope);
      mla_head = alloc(B * m.kv_lora);
      mla_value = alloc(B * m.v_dim);
      mla_values = alloc(B * c.n_head * m.v_dim);
    }
    if (c.attn_output_gate) {
      q_full = alloc(B * 2 * c.qWidth());
      gate = alloc(B * c.qWidth());
    }
    if (c.hasRecurrentLayers()) {
      const DeltaNetShape& d = c.delta;
      dn_qkv = alloc(B * d.convChannels());
      dn_conv = alloc(B * d.convChannels());
      dn_z = alloc(B * d.valueWidth());
      dn_alpha = alloc(B * d.n_v_heads);
      dn_beta = alloc(B * d.n_v_heads);
      dn_out = alloc(B * d.valueWidth());
    }
    if (c.isGemma4()) {
      mlp = alloc(B * c.n_embd);
      router_in = alloc(B * c.n_embd);
    }
    host_router.resize(B * c.n_expert);
    host_hidden.resize(B * c.n_embd);
    chosen.resize(B * c.n_expert_used);
    chosen_w.resize(B * c.n_expert_used);
  }
  ~Scratch() {
    for (float* p : owned) be.freeFloats(p);
  }
  float* alloc(size_t n) {
    owned.push_back(be.allocFloats(n));
    return owned.back();
  }
};

// Host buffers for experts computed on the host backend, and the device rows
// their outputs cross into.
struct Transformer::HostScratch {
  Backend& be;
  std::vector<float> gathered;    // [batch][n_embd]
  std::vector<float> ff_a, ff_b;  // [batch][n_ff_exp]
  std::vector<float> rows;        // [batch * n_expert_used][n_embd] outputs, expert after expert
  float* device_rows;             // the same, on the device

  HostScratch(Backend& b, const ModelConfig& c, int batch) : be(b) {
    const size_t B = batch;
    gathered.resize(B * c.n_embd);
    ff_a.resize(B * c.n_ff_exp);
    ff_b.resize(B * c.n_ff_exp);
    rows.resize(B * c.n_expert_used * c.n_embd);
    device_rows = be.allocFloats(rows.size());
  }
  ~HostScratch() { be.freeFloats(device_rows); }
};

}  // namespace moe
