// One flat description of every supported SwiGLU MoE architecture, filled only
// from GGUF metadata; architecture differences are flags, not classes.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/gguf.h"

namespace moe {

class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Arch {
  Llama,
  Qwen2Moe,
  Qwen3Moe,
  Deepseek,
  Deepseek2,
  Olmoe,
  Glm4Moe,
  GptOss,
  Qwen35Moe,
  MinimaxM2,
  Gemma4
};
enum class RopeStyle { Norm, Neox };  // Norm: adjacent pairs (llama, deepseek); Neox: halves
enum class GatingFunc { Softmax, Sigmoid };
enum class QkNorm { None, PerHead, Whole };  // qwen3moe: per head; olmoe, minimax-m2: whole projection

const char* archName(Arch a);

// YaRN RoPE scaling (`rope.scaling.type` "yarn"; Peng et al. 2023, as ggml computes
// it): the rotation frequencies interpolated by `factor` outside the band of
// dimensions the original context resolved, and cos/sin scaled by
// attn_factor * (1 + 0.1 ln factor).
struct RopeYarn {
  float factor = 1.0f;                                            // rope.scaling.factor; 1: no scaling
  int orig_ctx = 0;                                               // rope.scaling.original_context_length
  float beta_fast = 32.0f, beta_slow = 1.0f, attn_factor = 1.0f;  // the llama.cpp defaults
  bool active() const { return factor > 1.0f; }
};

// deepseek2's multi-head latent attention (DeepSeek-V2 paper; llama.cpp's deepseek2
// graph). Keys and values of every head come from one cached latent c of kv_lora
// values (RMS-normed) and one rope key k_pe of n_rot values shared by all heads:
// k_h = [W_UK_h c, k_pe], v_h = W_UV_h c. The engine attends in the absorbed form,
// as one-KV-head attention over rows [k_pe, c] (head_dim = n_rot + kv_lora) with
// query heads [q_pe_h, W_UK_h^T q_nope_h], and maps each head's latent output back
// with W_UV_h (transformer_mla.cpp).
struct MlaShape {
  int q_lora = 0;   // attention.q_lora_rank; 0: q is projected from the input directly
  int kv_lora = 0;  // attention.kv_lora_rank
  int qk_nope = 0;  // per head: query/key dims without rope (key_length_mla - n_rot)
  int v_dim = 0;    // per head: value dims (value_length_mla)
  int qk_dim = 0;   // qk_nope + n_rot: the width of one head's query in the file
};

// qwen35moe's gated delta-net linear attention (Qwen3.5 / Qwen3.6 MoE; keys and shapes
// as llama.cpp's converter writes them: convert_hf_to_gguf.py Qwen3NextModel and
// _LinearAttentionVReorderBase, src/models/qwen35moe.cpp). Per token, attn_qkv gives
// conv_channels values [q | k | v] that go through a causal depthwise conv of width
// conv_kernel (the last conv_kernel - 1 inputs are carried) and SiLU; q and k are
// L2-normalised per head; each value head h keeps a head_v x head_v state S, updated
// by the delta rule with decay exp(g) and rate beta, and reads o = S q. Value head h
// uses key head h mod n_k_heads (the converter stores the value heads tiled).
struct DeltaNetShape {
  int conv_kernel = 0;  // ssm.conv_kernel
  int head_k = 0;       // ssm.state_size: one key head's width
  int n_k_heads = 0;    // ssm.group_count
  int n_v_heads = 0;    // ssm.time_step_rank
  int head_v = 0;       // ssm.inner_size / ssm.time_step_rank (== head_k)
  int keyWidth() const { return n_k_heads * head_k; }
  int valueWidth() const { return n_v_heads * head_v; }
  int convChannels() const { return 2 * keyWidth() + valueWidth(); }
  // Floats of one layer's recurrent state: the conv inputs kept, then the delta states.
  size_t convStateFloats() const { return size_t(conv_kernel - 1) * size_t(convChannels()); }
  size_t deltaStateFloats() const { return size_t(n_v_heads) * size_t(head_v) * size_t(head_v); }
};

// Copies of the recurrent state a sequence keeps besides the live one (Transformer's
// snapshots at the ends of its last prompts), so a regenerate or the next chat turn
// restores instead of recomputing the conversation.
inline constexpr int kRecurrentSnapshots = 2;

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;   // general.architecture
  std::string model_name;  // general.name (may be empty)

  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_layer = 0;  // layers the forward pass runs
  int n_nextn = 0;  // glm4moe, qwen35moe: next-token-prediction layers after them in the file, not run
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;  // attention.key_length, else n_embd / n_head
  int n_rot = 0;     // rope.dimension_count, else head_dim
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  RopeStyle rope_style = RopeStyle::Norm;
  RopeYarn yarn;  // rope.scaling.type "yarn" (gpt-oss)
  QkNorm qk_norm = QkNorm::None;
  // gpt-oss: attention.sliding_window; the even layers attend within it, the odd
  // ones to the whole context.
  int sliding_window = 0;
  MlaShape mla;          // deepseek2; kv_lora 0 elsewhere
  float attn_scale = 0;  // softmax scale of q.k; 0: 1 / sqrt(head_dim)
  // qwen35moe: attn_q gives per head [q; gate] (2 x head_dim rows) and the attention
  // output is multiplied by sigmoid(gate) before attn_output.
  bool attn_output_gate = false;
  // qwen35moe: rope.dimension_sections (IMROPE). For text every section gets the same
  // position, so with every rotated pair in one of the first three sections (checked)
  // this is NEOX rope on the first n_rot dims.
  int rope_sections[4] = {0, 0, 0, 0};
  DeltaNetShape delta;             // qwen35moe; conv_kernel 0 elsewhere
  std::vector<uint8_t> recurrent;  // [n_layer]: 1 = a delta-net layer (qwen35moe)

  // gemma4 (Gemma 4 MoE; keys as llama.cpp's converter writes them, read as its
  // gemma4 loader reads them: conversion/gemma.py Gemma4Model, src/models/gemma4.cpp).
  // Sliding-window and global layers differ in head size, kv heads, rotated dims and
  // rope base; the last attention.shared_kv_layers layers compute no K/V and read the
  // cache of the last earlier layer of their kind. head_dim / n_head_kv above are the
  // largest of any layer (the scratch is sized from them); the per-layer values are here.
  std::vector<uint8_t> swa;          // [n_layer] 1 = sliding-window layer (gemma4)
  std::vector<int> layer_head_dim;   // [n_layer] (gemma4; empty elsewhere)
  std::vector<int> layer_n_head_kv;  // [n_layer]
  std::vector<int> layer_n_rot;      // [n_layer]
  std::vector<int> kv_source;        // [n_layer] the layer whose K/V cache layer il attends over
  float rope_freq_base_swa = 0;      // gemma4: rope.freq_base_swa (the sliding layers' base)
  float final_logit_softcap = 0;     // gemma4: logits = cap tanh(logits / cap); 0: none
  bool embedding_scaled = false;     // gemma4: the token embedding times sqrt(n_embd)
  bool gelu_ffn = false;             // gemma4: gelu_tanh(gate) * up in place of silu(gate) * up

  int n_ff = 0;                      // dense FFN width (dense layers, deepseek leading layers)
  int n_expert = 0;                  // routed experts per MoE layer
  int n_expert_used = 0;             // experts chosen per token
  int n_ff_exp = 0;                  // one routed expert's FFN width
  int n_expert_shared = 0;           // deepseek: shared experts (fused into one FFN)
  int n_ff_shexp = 0;                // width of the shared-expert FFN (fused)
  int n_leading_dense = 0;           // deepseek, glm4moe: first layers are dense
  bool shared_expert_gated = false;  // qwen2moe: sigmoid(ffn_gate_inp_shexp . x)
  GatingFunc gating = GatingFunc::Softmax;
  bool norm_topk_weights = false;  // renormalise the chosen experts' weights to sum 1
  float expert_weights_scale = 1.0f;
  // Group-limited routing (expert_group_count / expert_group_used_count): the
  // experts form n_expert_groups equal groups and only the n_group_used groups
  // with the largest sum of their two best selection scores may be chosen.
  int n_expert_groups = 0;
  int n_group_used = 0;

  // gpt-oss: biases on the experts' gate, up and down projections, and the clamped
  // SwiGLU g * sigmoid(alpha g) * (u + 1) with g, u clamped at +-limit (the
  // swiglu_limit 7.0 and alpha 1.702 of its config and reference code).
  bool expert_biases = false;
  bool clamped_swiglu = false;
  static constexpr float kSwigluAlpha = 1.702f, kSwigluLimit = 7.0f;

  bool isMla() const { return mla.kv_lora > 0; }
  bool hasRecurrentLayers() const { return delta.conv_kernel > 0; }
  bool isRecurrentLayer(int layer) const { return !recurrent.empty() && recurrent[size_t(layer)] != 0; }
  float attentionScale() const { return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(float(head_dim)); }
  bool groupLimited() const {
    return n_expert_groups > 1 && n_group_used > 0 && n_group_used < n_expert_groups;
  }
  bool isMoeLayer(int layer) const { return n_expert > 0 && layer >= n_leading_dense; }
  int windowOf(int layer) const {
    if (!swa.empty()) return swa[size_t(layer)] ? sliding_window : 0;
    return sliding_window > 0 && layer % 2 == 0 ? sliding_window : 0;
  }
  bool isGemma4() const { return arch == Arch::Gemma4; }
  // Per-layer attention shapes (gemma4's differ from layer to layer; the uniform
  // values everywhere else).
  int headDimOf(int layer) const { return layer_head_dim.empty() ? head_dim : layer_head_dim[size_t(layer)]; }
  int nHeadKvOf(int layer) const {
    return layer_n_head_kv.empty() ? n_head_kv : layer_n_head_kv[size_t(layer)];
  }
  int nRotOf(int layer) const { return layer_n_rot.empty() ? n_rot : layer_n_rot[size_t(layer)]; }
  int kvWidthOf(int layer) const { return nHeadKvOf(layer) * headDimOf(layer); }
  int kvSourceOf(int layer) const { return kv_source.empty() ? layer : kv_source[size_t(layer)]; }
  bool ownsKv(int layer) const { return kvSourceOf(layer) == layer; }
  float ropeBaseOf(int layer) const {
    return !swa.empty() && swa[size_t(layer)] && rope_freq_base_swa > 0 ? rope_freq_base_swa : rope_freq_base;
  }
  int qWidth() const { return n_head * head_dim; }
  int kvWidth() const { return n_head_kv * head_dim; }

  // Throws ModelError naming the missing/invalid key or the unsupported architecture.
  static ModelConfig fromGguf(const gguf::GgufFile& file);
};

}  // namespace moe
