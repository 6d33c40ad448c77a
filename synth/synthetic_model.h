// Deterministic synthetic GGUF MoE models: random weights (seeded), real
// structure, a small vocabulary. They exercise every code path of the engine;
// they do not speak a language. The smallest is the embedded demo model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/gguf.h"

namespace moe::synth {

enum class VocabKind { SentencePiece, Gpt2Bpe };

// The key with which a synthetic file asks for its router's choices to be replaced
// by realistic routing (`gen-model --routing realistic`; runtime/runtime.cpp draws it
// from the shipped routing profile), and that one value.
inline constexpr const char* kRoutingKey = "moechat.routing";
inline constexpr const char* kRealisticRouting = "realistic";

struct SyntheticSpec {
  std::string name;  // general.name
  std::string arch;  // llama | qwen2moe | qwen3moe | deepseek | deepseek2 | olmoe | glm4moe | gpt-oss |
                     // qwen35moe | minimax-m2
  int n_layer = 2;   // layers the forward pass runs
  int n_nextn = 0;   // glm4moe, qwen35moe: next-token-prediction layers written after them
  int n_rot = 0;     // rotary dimensions per head; 0: all (head_dim)
  int n_embd = 64;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 16;  // qwen3moe may differ from n_embd / n_head
  int n_ff = 0;       // dense FFN width (deepseek leading dense layers)
  int n_expert = 8;
  int n_expert_used = 2;
  int n_ff_exp = 32;
  int n_expert_shared = 0;  // deepseek, glm4moe: shared experts; qwen2moe: 1 (gated)
  int n_ff_shexp = 0;       // total width of the shared-expert FFN
  int n_leading_dense = 0;
  int n_ctx = 512;
  int n_vocab_target = 320;  // vocabulary size the vocab builder aims for
  float rope_freq_base = 10000.0f;
  VocabKind vocab = VocabKind::SentencePiece;
  std::string bpe_pre = "qwen2";                         // tokenizer.ggml.pre for gpt2 vocabularies
  gguf::TensorType expert_type = gguf::TensorType::F16;  // routed experts
  // The routed experts' down projections, where they differ (low-bit mixes keep
  // ffn_down_exps a step above gate and up, e.g. IQ3_S under IQ2_XXS).
  std::optional<gguf::TensorType> expert_down_type;
  gguf::TensorType expertDownType() const { return expert_down_type.value_or(expert_type); }
  gguf::TensorType weight_type = gguf::TensorType::F16;  // other matrices
  bool tied_output = false;                              // omit output.weight (tied to token_embd)
  bool qkv_bias = false;                                 // Qwen2 family, glm4moe: attn_{q,k,v}.bias
  float expert_weights_scale = 1.0f;                     // deepseek, glm4moe: routed_scaling_factor
  int sliding_window = 0;                                // gpt-oss: the even layers' window
  float yarn_factor = 0.0f;                              // > 1: YaRN RoPE scaling (gpt-oss)
  int yarn_orig_ctx = 0;
  // deepseek2 (multi-head latent attention): head_dim is one head's query width
  // (qk_nope + n_rot, n_rot > 0), kv_lora the latent, v_head_dim one head's value.
  int q_lora = 0;  // > 0: the query goes through a normed q_lora projection
  int kv_lora = 0;
  int v_head_dim = 0;
  bool mla_split = true;        // attn_k_b + attn_v_b (llama.cpp's MLA files); false: one attn_kv_b
  float yarn_log_mul = 0.0f;    // rope.scaling.yarn_log_multiplier (0: not written)
  int gating_func = 0;          // expert_gating_func to write (1 softmax, 2 sigmoid); 0: none
  bool weights_norm = false;    // deepseek2: expert_weights_norm
  bool selection_bias = false;  // deepseek2: exp_probs_b
  int n_expert_groups = 0;      // expert_group_count (0: not written)
  int n_group_used = 0;
  // qwen35moe: gated delta-net layers beside full attention (every full_attn_interval-th
  // layer), heads of ssm_state for keys and values, IMROPE sections of the rotated pairs.
  int full_attn_interval = 0;
  int ssm_conv_kernel = 0;
  int ssm_state = 0;
  int ssm_k_heads = 0;
  int ssm_v_heads = 0;
  int rope_sections[4] = {0, 0, 0, 0};
  // gemma4: every swa_period-th layer global (the others slide within sliding_window),
  // global layers of head_dim_full with n_head_kv_full kv heads (head_dim, n_head_kv:
  // the sliding layers'), a rope_partial_full fraction of a global head rotated
  // ("proportional" rope, written as rope_freqs), rope_freq_base for the global layers
  // and rope_freq_base_swa for the sliding ones; the last n_kv_shared layers reuse
  // earlier layers' K/V; the global layers without attn_v (V = K) when k_eq_v_full; the
  // logits soft-capped at logit_softcap; n_ff the dense MLP beside the experts.
  int swa_period = 0;
  int head_dim_full = 0;
  int n_head_kv_full = 0;
  float rope_partial_full = 1.0f;
  float rope_freq_base_swa = 10000.0f;
  int n_kv_shared = 0;
  bool k_eq_v_full = false;
  float logit_softcap = 0.0f;
  uint64_t seed = 1;
  bool realistic_routing = false;  // write kRoutingKey: the file routes as a real model does
};

// A small model of each supported architecture, varied in quant types and vocab kinds.
SyntheticSpec tinySpec(const std::string& arch);
std::vector<std::string> supportedArchs();
// Tiny models of another form of an architecture, also named to tinySpec:
// "deepseek2-legacy" is deepseek2 in the older file layout (one attn_kv_b, per-head
// key/value lengths), without q compression, softmax gates and no groups, YaRN without a
// log multiplier.
std::vector<std::string> tinyVariantNames();
// The embedded demo model: the smallest spec (llama/Mixtral style, SentencePiece vocab).
SyntheticSpec demoSpec();

// Shape presets of real models (shared/MODEL-SHAPES.md) at full size, for
// benchmarks on a machine with room. short names: DS-1, DS-2, QW-1, QW-2, Mixt, Q3-30B, Q3-235B, OLMoE,
// GLM-Air, GLM-Flash, OSS-20B, OSS-120B, Q3.6-35B, Q3.5-122B, MiniMax-M2, Gemma4-26B.
std::vector<std::string> presetNames();
SyntheticSpec presetSpec(const std::string& short_name);  // throws std::invalid_argument

// The weight types a synthetic model can be written in, by name, case-insensitive:
// the types of quant::kComputeTypes. Throws std::invalid_argument naming them.
gguf::TensorType parseWeightType(const std::string& name);

// `spec` widened so every matrix row is a whole number of blocks of its type: for
// K-quants (blocks of 256) n_embd, n_ff_exp, n_ff, n_ff_shexp and the attention
// width n_head x head_dim are rounded up to multiples of 256 (deepseek keeps
// n_ff_shexp = n_expert_shared x n_ff_exp). A spec whose rows already fit comes back
// unchanged, so the tiny specs' files do not change.
SyntheticSpec fitToBlocks(SyntheticSpec spec);

// Builds the writer for a spec (tensors filled lazily while writing).
gguf::GgufWriter buildModel(const SyntheticSpec& spec);
void writeModel(const SyntheticSpec& spec, const std::string& path);
// The model's GGUF layout with its tensor data left as a sparse run of zeros
// (GgufWriter::writeLayoutOnly): for describing full-size presets.
void writeModelLayout(const SyntheticSpec& spec, const std::string& path);
// Tensor bytes of the file writeModel would write (metadata adds a few MB at most).
uint64_t plannedFileBytes(const SyntheticSpec& spec);
// The demo model's GGUF bytes, generated in memory (deterministic).
std::vector<uint8_t> demoModelBytes();

}  // namespace moe::synth
