// A loaded model: its config, the non-expert weights (prepared for a backend),
// the table of every routed expert's matrices in the file, and the tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/expert_source.h"
#include "inference/model_config.h"
#include "inference/tokenizer/chat_template.h"
#include "inference/tokenizer/tokenizer.h"
#include "models/gguf.h"

namespace moe {

// Weights of one transformer block. Views are prepared for the backend; vectors
// (norms, biases) are F32 in backend memory. Optional parts are empty / nullptr.
struct LayerWeights {
  const float* attn_norm = nullptr;   // [n_embd]
  WeightView wq;                      // rows q_width, cols n_embd
  WeightView wk, wv;                  // rows kv_width, cols n_embd
  WeightView wo;                      // rows n_embd, cols q_width
  const float* bo = nullptr;          // [n_embd] (gpt-oss)
  const float* attn_sinks = nullptr;  // [n_head] (gpt-oss)
  const float* bq = nullptr;          // [q_width] (Qwen2-family files)
  const float* bk = nullptr;          // [kv_width]
  const float* bv = nullptr;          // [kv_width]
  const float* q_norm = nullptr;      // [head_dim] (PerHead) or [q_width] (Whole)
  const float* k_norm = nullptr;      // [head_dim] (PerHead) or [kv_width] (Whole)
  const float* ffn_norm = nullptr;    // [n_embd]

  // deepseek2 (multi-head latent attention, MlaShape): wq holds the whole query
  // projection unless wq_a / wq_b split it through a normed low-rank q_lora space.
  WeightView wq_a;                   // rows q_lora, cols n_embd
  const float* q_a_norm = nullptr;   // [q_lora]
  WeightView wq_b;                   // rows n_head * qk_dim, cols q_lora
  WeightView wkv_a;                  // rows kv_lora + n_rot, cols n_embd: [c, k_pe]
  const float* kv_a_norm = nullptr;  // [kv_lora]
  std::vector<WeightView> mla_uk_t;  // per head, F32: rows kv_lora, cols qk_nope (W_UK_h transposed)
  std::vector<WeightView> mla_uv;    // per head, F32: rows v_dim, cols kv_lora (W_UV_h)

  // qwen35moe's gated delta-net layers (DeltaNetShape): the projections stay with the
  // backend, and so do the small per-head tensors the recurrence reads (F32).
  WeightView dn_qkv;                  // rows conv_channels ([q | k | v]), cols n_embd
  WeightView dn_gate;                 // rows value_width (z, the output gate), cols n_embd
  WeightView dn_alpha;                // rows n_v_heads, cols n_embd
  WeightView dn_beta;                 // rows n_v_heads, cols n_embd
  WeightView dn_out;                  // rows n_embd, cols value_width
  const float* dn_conv = nullptr;     // [conv_channels][conv_kernel]
  const float* dn_dt_bias = nullptr;  // [n_v_heads]
  const float* dn_a = nullptr;        // [n_v_heads]: -exp(A_log)
  const float* dn_norm = nullptr;     // [head_v]

  // Dense FFN (deepseek's leading layers).
  WeightView ffn_gate, ffn_up;  // rows n_ff, cols n_embd
  WeightView ffn_down;          // rows n_embd, cols n_ff

  // MoE: the router; routed experts are reached through an ExpertSource.
  WeightView router;                   // rows n_expert, cols n_embd
  const float* router_bias = nullptr;  // [n_expert] (gpt-oss)
  // gpt-oss: every routed expert's biases, [n_expert][n_ff_exp] and [n_expert][n_embd].
  const float* exp_gate_bias = nullptr;
  const float* exp_up_bias = nullptr;
  const float* exp_down_bias = nullptr;
  WeightView shexp_gate, shexp_up;  // rows n_ff_shexp, cols n_embd
  WeightView shexp_down;            // rows n_embd, cols n_ff_shexp
  WeightView shexp_router;          // rows 1, cols n_embd (qwen2moe's sigmoid gate)
  std::vector<float>
      expert_bias;  // [n_expert] host: exp_probs_b (glm4moe, minimax-m2, deepseek2 where present)

  // gemma4 (null / empty elsewhere). wv may be empty: the layer's V is its K projection
  // (attention_k_eq_v). Norms around both blocks, the MoE layer's second branch and
  // the router's input norm: rms(x) x ffn_gate_inp.scale / sqrt(n_embd), as one weight.
  const float* attn_post_norm = nullptr;        // [n_embd] post_attention_norm
  const float* ffn_post_norm = nullptr;         // [n_embd] post_ffw_norm (the whole FFN's output)
  const float* ffn_post_norm_1 = nullptr;       // [n_embd] post_ffw_norm_1 (the dense MLP's output)
  const float* ffn_pre_norm_2 = nullptr;        // [n_embd] pre_ffw_norm_2 (the experts' input)
  const float* ffn_post_norm_2 = nullptr;       // [n_embd] post_ffw_norm_2 (the experts' output)
  const float* router_in_norm = nullptr;        // [n_embd] ffn_gate_inp.scale / sqrt(n_embd)
  std::vector<float> expert_out_scale;          // [n_expert] host: ffn_down_exps.scale
  const float* expert_out_scale_dev = nullptr;  // the same in backend memory
  float out_scale = 1.0f;                       // layer_output_scale (1 when absent)
};

struct ModelWeights {
  WeightView token_embd;               // rows n_vocab, cols n_embd
  const float* output_norm = nullptr;  // [n_embd]
  WeightView output;                   // rows n_vocab, cols n_embd (token_embd when tied)
  bool output_tied = false;
  std::vector<LayerWeights> layers;
  // gemma4: rope_freqs.weight, the global layers' frequency factors, [n_rot / 2] host
  // (1 for the rotated pairs, 1e30 for the still ones); empty: plain rope.
  std::vector<float> rope_freqs;
};

// Sizes that the CLI, the fit estimate and the offload engine report.
struct ModelSizes {
  uint64_t expert_bytes = 0;         // one routed expert: gate + up + down
  uint64_t routed_expert_bytes = 0;  // all routed experts of all layers
  uint64_t other_bytes = 0;          // everything else (stays resident)
  int moe_layers = 0;
};

class Model {
 public:
  // Validates every tensor the config implies (names, shapes, types) and builds
  // the tokenizer. Throws ModelError / TokenizerError with the reason.
  // With `purpose` Describe, tensors of types the backend cannot compute (K-quants)
  // are accepted, so `info` can report on any file; such a model must not run.
  enum class Purpose { Run, Describe };
  static std::unique_ptr<Model> load(gguf::GgufFile file, Backend& backend, Purpose purpose = Purpose::Run);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  ChatFamily chatFamily() const { return chat_family_; }
  const gguf::GgufFile& file() const { return file_; }
  const ModelSizes& sizes() const { return sizes_; }
  // Host views of every routed expert in the file: [n_layer][n_expert]
  // (empty rows for dense layers). The resident expert source serves these.
  const std::vector<std::vector<ExpertWeights>>& hostExperts() const { return host_experts_; }
  // Host view of layer il's router (empty for dense layers): weights() may be in
  // device memory, and a host-side predictor reads the router.
  const WeightView& hostRouter(int il) const { return host_routers_[size_t(il)]; }
  // Host copies of layer il's expert biases (gpt-oss; all null otherwise): the
  // CPU computes some experts of a device backend's model.
  struct ExpertBiases {
    const float* gate = nullptr;  // [n_expert][n_ff_exp]
    const float* up = nullptr;    // [n_expert][n_ff_exp]
    const float* down = nullptr;  // [n_expert][n_embd]
  };
  const ExpertBiases& hostExpertBiases(int il) const { return host_expert_biases_[size_t(il)]; }
  // True for the demo/synthetic models whose weights are random.
  bool isSynthetic() const;

 private:
  Model(gguf::GgufFile file, Backend& backend);
  class Loader;

  gguf::GgufFile file_;
  Backend& backend_;
  ModelConfig config_;
  ModelWeights weights_;
  ModelSizes sizes_;
  std::vector<std::vector<ExpertWeights>> host_experts_;
  std::vector<WeightView> host_routers_;
  std::vector<ExpertBiases> host_expert_biases_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatFamily chat_family_ = ChatFamily::ChatML;
  std::vector<float*> owned_vectors_;  // backend allocations for norms and biases
  std::vector<std::vector<float>>
      owned_host_;  // host F32 arrays the model made (deepseek2's W_UK, W_UV; expert biases)
};

}  // namespace moe
