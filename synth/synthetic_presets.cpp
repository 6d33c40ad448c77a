// The specs of the synthetic models: one tiny model per architecture (tests, golden
// files, the demo) and the full-size shape presets of shared/MODEL-SHAPES.md.
#include <stdexcept>

#include "synth/synthetic_model.h"

namespace moe::synth {

namespace {

using gguf::TensorType;

// Common tiny base: 2 layers, 64 wide, 4 heads of 16. Every matrix's ne0 is a
// multiple of 32, so any block type (Q8_0, Q4_0) fits every row.
SyntheticSpec tinyBase(const std::string& arch) {
  SyntheticSpec s;
  s.arch = arch;
  s.name = "moechat tiny " + arch + " (random weights)";
  s.n_layer = 2;
  s.n_embd = 64;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 16;
  s.n_ctx = 512;
  return s;
}

// Mixtral style: 8 experts top-2, no shared expert, SentencePiece vocabulary, F16.
SyntheticSpec tinyLlama() {
  SyntheticSpec s = tinyBase("llama");
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 64;
  s.n_ff = 64;  // Mixtral files carry feed_forward_length = the expert width
  s.n_vocab_target = 320;
  s.vocab = VocabKind::SentencePiece;
  s.expert_type = TensorType::F16;
  s.weight_type = TensorType::F16;
  s.seed = 101;
  return s;
}

// Qwen1.5-MoE style: one sigmoid-gated shared expert, q/k/v biases, Q8_0 experts.
// 12 experts top-4: neither count a power of two, on purpose.
SyntheticSpec tinyQwen2Moe() {
  SyntheticSpec s = tinyBase("qwen2moe");
  s.n_expert = 12;
  s.n_expert_used = 4;
  s.n_ff_exp = 32;
  s.n_expert_shared = 1;
  s.n_ff_shexp = 64;
  s.n_ff = 64;  // Qwen1.5-MoE files carry intermediate_size (= the shared width) here
  s.rope_freq_base = 1000000.0f;
  s.n_vocab_target = 384;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "qwen2";
  s.expert_type = TensorType::Q8_0;
  s.weight_type = TensorType::F16;
  s.qkv_bias = true;
  s.seed = 202;
  return s;
}

// Qwen3-MoE style: per-head QK-norm, head_dim (32) != n_embd / n_head (16), so the
// attention width (128) differs from n_embd; 16 experts top-4; BF16; output tied to
// token_embd (exercises the absent-output.weight path).
SyntheticSpec tinyQwen3Moe() {
  SyntheticSpec s = tinyBase("qwen3moe");
  s.head_dim = 32;
  s.n_expert = 16;
  s.n_expert_used = 4;
  s.n_ff_exp = 32;
  s.n_ff = 96;
  s.rope_freq_base = 1000000.0f;
  s.n_vocab_target = 384;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "qwen2";
  s.expert_type = TensorType::BF16;
  s.weight_type = TensorType::BF16;
  s.tied_output = true;
  s.seed = 303;
  return s;
}

// DeepSeek-MoE v1 style: 3 layers, the first dense (n_ff 128), 2 ungated shared
// experts fused into one FFN of 2 x n_ff_exp, Q4_0 experts, Q8_0 other matrices, MHA.
SyntheticSpec tinyDeepseek() {
  SyntheticSpec s = tinyBase("deepseek");
  s.n_layer = 3;
  s.n_head_kv = 4;
  s.n_leading_dense = 1;
  s.n_ff = 128;
  s.n_expert = 10;
  s.n_expert_used = 3;
  s.n_ff_exp = 32;
  s.n_expert_shared = 2;
  s.n_ff_shexp = 64;  // = n_expert_shared x n_ff_exp (GGUF-NOTES)
  s.n_vocab_target = 320;
  s.vocab = VocabKind::SentencePiece;
  s.expert_type = TensorType::Q4_0;
  s.weight_type = TensorType::Q8_0;
  s.seed = 404;
  return s;
}

// OLMoE style: QK-norm over the whole q/k projections, 8 experts top-2, MHA,
// F32 experts beside F16 matrices.
SyntheticSpec tinyOlmoe() {
  SyntheticSpec s = tinyBase("olmoe");
  s.n_head_kv = 4;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 32;
  s.n_ff = 32;  // OLMoE files carry intermediate_size = the expert width
  s.n_vocab_target = 352;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "olmo";  // what OLMoE GGUF files carry (GGUF-NOTES "Likely pairings")
  s.expert_type = TensorType::F32;
  s.weight_type = TensorType::F16;
  s.seed = 505;
  return s;
}

// GLM-4.5 style: the first layer dense, a sigmoid router whose selection bias
// (exp_probs_b) changes which experts win, one ungated shared expert, q/k/v biases,
// partial rotary dimensions (8 of 16, as GLM's 64 of 128), routed weights scaled by
// 1.5, and one next-token-prediction layer at the end that the engine must skip.
// Q8_0 experts beside F16 matrices.
SyntheticSpec tinyGlm4Moe() {
  SyntheticSpec s = tinyBase("glm4moe");
  s.n_layer = 3;
  s.n_nextn = 1;
  s.n_rot = 8;
  s.n_leading_dense = 1;
  s.n_ff = 96;
  s.n_expert = 8;
  s.n_expert_used = 3;
  s.n_ff_exp = 32;
  s.n_expert_shared = 1;
  s.n_ff_shexp = 32;  // = n_expert_shared x n_ff_exp
  s.expert_weights_scale = 1.5f;
  s.qkv_bias = true;
  s.rope_freq_base = 1000000.0f;
  s.n_vocab_target = 352;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "qwen2";  // GLM's own pre-tokenizer ("glm4") is close to Qwen2's; ours is Qwen2's
  s.expert_type = TensorType::Q8_0;
  s.weight_type = TensorType::F16;
  s.seed = 606;
  return s;
}

// MiniMax-M2 style: heads wider than n_embd / n_head (4 x 32 = 128 against 64, as
// MiniMax-M2's 48 x 128 against 3072), half of each head rotary (16 of 32, as its 64
// of 128), QK-norm over the whole q and k projections, a sigmoid router whose
// selection bias (exp_probs_b) changes which experts win while the unbiased scores,
// renormalised, weight them; no shared expert. Q4_0 experts beside F16 matrices.
SyntheticSpec tinyMinimaxM2() {
  SyntheticSpec s = tinyBase("minimax-m2");
  s.head_dim = 32;
  s.n_rot = 16;
  s.n_expert = 10;
  s.n_expert_used = 3;
  s.n_ff_exp = 32;
  s.rope_freq_base = 5000000.0f;
  s.n_vocab_target = 352;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "minimax-m2";  // o200k's split
  s.expert_type = TensorType::Q4_0;
  s.weight_type = TensorType::F16;
  s.seed = 909;
  return s;
}

// gpt-oss style: MXFP4 experts with biases, Q8_0 other matrices, biased q/k/v/o
// and router, a sink logit per head, the even layers attending within a window of
// 4 (the goldens' 16-token sequences cross it), YaRN RoPE scaled 4x over an
// original 64 positions, the clamped SwiGLU; 3 layers so both attention kinds
// repeat.
SyntheticSpec tinyGptOss() {
  SyntheticSpec s = tinyBase("gpt-oss");
  s.n_layer = 3;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 64;
  s.n_ff = 64;
  s.qkv_bias = true;
  s.sliding_window = 4;
  s.yarn_factor = 4.0f;
  s.yarn_orig_ctx = 64;
  s.rope_freq_base = 150000.0f;
  s.n_vocab_target = 352;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "qwen2";  // gpt-oss files carry "gpt-4o" (o200k), not written here yet
  s.expert_type = TensorType::MXFP4;
  s.weight_type = TensorType::Q8_0;
  s.seed = 708;
  return s;
}

// DeepSeek-V2-Lite style (deepseek2): multi-head latent attention with the query
// through a normed q_lora stage, llama.cpp's MLA layout (attn_k_b / attn_v_b), YaRN
// 4x over 64 positions with a log multiplier (the scale of the softmax changes), the
// first layer dense, two shared experts, and GLM-4.7-Flash's / DeepSeek-V3's routing:
// sigmoid gates, a selection bias, group-limited to 2 of 4 groups, renormalised and
// scaled by 2. Q8_0 experts beside F16 matrices.
SyntheticSpec tinyDeepseek2() {
  SyntheticSpec s = tinyBase("deepseek2");
  s.n_layer = 3;
  s.n_head = 4;
  s.n_head_kv = 4;
  s.head_dim = 24;  // qk_nope 16 + rope 8
  s.n_rot = 8;
  s.q_lora = 32;
  s.kv_lora = 32;
  s.v_head_dim = 16;
  s.yarn_factor = 4.0f;
  s.yarn_orig_ctx = 64;
  s.yarn_log_mul = 0.0707f;
  s.n_leading_dense = 1;
  s.n_ff = 96;
  s.n_expert = 16;
  s.n_expert_used = 3;
  s.n_ff_exp = 32;
  s.n_expert_shared = 2;
  s.n_ff_shexp = 64;  // = n_expert_shared x n_ff_exp
  s.gating_func = 2;
  s.weights_norm = true;
  s.selection_bias = true;
  s.n_expert_groups = 4;
  s.n_group_used = 2;
  s.expert_weights_scale = 2.0f;
  s.n_vocab_target = 352;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "deepseek-llm";
  s.expert_type = TensorType::Q8_0;
  s.weight_type = TensorType::F16;
  s.seed = 809;
  return s;
}

// Qwen3.5 / Qwen3.6 MoE style (qwen35moe): every second layer full attention (Qwen3.5
// has every fourth; 2 here so both kinds follow each other twice), the others gated
// delta-net layers with 2 key heads and 4 value heads of 16 (more value heads than key
// heads, as Qwen3.5's 16 / 32), a conv of width 4; full attention with a joint query +
// gate projection, per-head QK-norm, 8 of 32 head dims rotated in IMROPE sections
// [2, 1, 1] (Qwen3.5: 64 of 256 in [11, 11, 10]); 8 experts top-3 + a gated shared
// expert; one next-token-prediction layer the engine must skip. Q8_0 experts, F16
// matrices, F32 small tensors.
SyntheticSpec tinyQwen35Moe() {
  SyntheticSpec s = tinyBase("qwen35moe");
  s.n_layer = 4;
  s.n_nextn = 1;
  s.head_dim = 32;
  s.n_rot = 8;
  s.rope_sections[0] = 2;
  s.rope_sections[1] = 1;
  s.rope_sections[2] = 1;
  s.full_attn_interval = 2;
  s.ssm_conv_kernel = 4;
  s.ssm_state = 16;
  s.ssm_k_heads = 2;
  s.ssm_v_heads = 4;
  s.n_expert = 8;
  s.n_expert_used = 3;
  s.n_ff_exp = 32;
  s.n_expert_shared = 1;
  s.n_ff_shexp = 64;
  s.n_ff = 64;
  s.rope_freq_base = 10000000.0f;
  s.n_vocab_target = 352;
  s.vocab = VocabKind::Gpt2Bpe;
  s.bpe_pre = "qwen35";  // what Qwen3.5 / Qwen3.6 files carry
  s.expert_type = TensorType::Q8_0;
  s.weight_type = TensorType::F16;
  s.seed = 911;
  return s;
}

// Gemma 4 MoE style (gemma4): 6 layers, every third global (Gemma 4 26B-A4B: every
// sixth), the last 3 reusing earlier layers' K/V (layer 3 and 4 that of layer 1, layer
// 5 that of layer 2: llama.cpp's rule); sliding layers of 4 x 16 query heads over 2 kv
// heads within 8 positions, global ones of 32 over 1 kv head with no attn_v (V = K) and
// a quarter of each head rotated; a dense MLP of 48 beside 8 experts top-2 of 32 (GELU);
// the logits soft-capped at 2 so the cap bends them. Q8_0 experts, F16 matrices, the
// output tied to the embedding (as Gemma's).
SyntheticSpec tinyGemma4() {
  SyntheticSpec s = tinyBase("gemma4");
  s.n_layer = 6;
  s.swa_period = 3;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 16;
  s.n_head_kv_full = 1;
  s.head_dim_full = 32;
  s.rope_partial_full = 0.25f;
  s.rope_freq_base = 1000000.0f;
  s.rope_freq_base_swa = 10000.0f;
  s.sliding_window = 8;
  s.n_kv_shared = 3;
  s.k_eq_v_full = true;
  s.n_ff = 48;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 32;
  s.logit_softcap = 2.0f;
  s.tied_output = true;
  s.n_vocab_target = 324;
  s.vocab = VocabKind::SentencePiece;
  s.expert_type = TensorType::Q8_0;
  s.weight_type = TensorType::F16;
  s.seed = 1014;
  return s;
}

SyntheticSpec tinyDeepseek2Legacy() {
  SyntheticSpec s = tinyDeepseek2();
  s.name = "moechat tiny deepseek2, older layout (random weights)";
  s.mla_split = false;
  s.q_lora = 0;
  s.yarn_log_mul = 0.0f;
  s.gating_func = 0;  // softmax, as DeepSeek-V2's files without the key
  s.weights_norm = false;
  s.selection_bias = false;
  s.n_expert_groups = 0;
  s.n_group_used = 0;
  s.expert_weights_scale = 1.0f;
  s.seed = 810;
  return s;
}

// Full-size presets. Layers, widths, experts, heads and vocabularies: MODEL-SHAPES.md.
// Not in that table, taken from the models' published configs (they do not change
// the work per token): n_ff of MoE-only models (feed_forward_length as the GGUF files
// carry it), context length, rope base. Experts default to F16 (BF16 for Qwen3,
// as MODEL-SHAPES' example); benchmarks pick other types by editing the spec.
SyntheticSpec preset(const std::string& short_name, const std::string& arch, int n_layer, int n_embd,
                     int n_ff_exp, int n_expert, int n_used, int n_head, int n_head_kv, int head_dim,
                     int n_vocab) {
  SyntheticSpec s;
  s.name = "moechat preset " + short_name + " (random weights)";
  s.arch = arch;
  s.n_layer = n_layer;
  s.n_embd = n_embd;
  s.n_ff_exp = n_ff_exp;
  s.n_ff = n_ff_exp;
  s.n_expert = n_expert;
  s.n_expert_used = n_used;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  s.head_dim = head_dim;
  s.n_vocab_target = n_vocab;
  s.vocab = VocabKind::Gpt2Bpe;
  s.expert_type = TensorType::F16;
  s.weight_type = TensorType::F16;
  s.rope_freq_base = 1000000.0f;
  s.n_ctx = 32768;
  return s;
}

// The deepseek2 presets, in llama.cpp's MLA layout.
// DS-2, DeepSeek-V2-Lite (deepseek-ai/DeepSeek-V2-Lite config.json): 27 layers (the
// first dense, 10944 wide), 2048 wide, 16 heads of 128 + 64 rope dims, no q
// compression, latent 512, values of 128, 64 experts of 1408 top-6 + 2 shared,
// softmax gates, YaRN x40 over 4096 positions (mscale_all_dim 0.707).
// GLM-Flash, GLM-4.7-Flash (zai-org/GLM-4.7-Flash config.json): 47 layers (the first
// dense, 10240 wide), 2048 wide, 20 heads of 192 + 64 rope dims, q through 768,
// latent 512, values of 256, 64 experts of 1536 top-4 + 1 shared, sigmoid gates with
// a selection bias, renormalised, scaled by 1.8.
void deepseek2Preset(const std::string& n, SyntheticSpec& s) {
  if (n == "DS-2") {
    s = preset(n, "deepseek2", 27, 2048, 1408, 64, 6, 16, 16, 128 + 64, 102400);
    s.n_expert_shared = 2;
    s.n_ff_shexp = 2 * 1408;
    s.n_ff = 10944;
    s.kv_lora = 512;
    s.v_head_dim = 128;
    s.n_ctx = 163840;
    s.rope_freq_base = 10000.0f;
    s.yarn_factor = 40.0f;
    s.yarn_orig_ctx = 4096;
    s.yarn_log_mul = 0.0707f;
    s.bpe_pre = "deepseek-llm";
  } else {
    s = preset(n, "deepseek2", 47, 2048, 1536, 64, 4, 20, 20, 192 + 64, 154880);
    s.n_expert_shared = 1;
    s.n_ff_shexp = 1536;
    s.n_ff = 10240;
    s.q_lora = 768;
    s.kv_lora = 512;
    s.v_head_dim = 256;
    s.n_ctx = 202752;
    s.gating_func = 2;
    s.weights_norm = true;
    s.selection_bias = true;
    s.expert_weights_scale = 1.8f;
    s.bpe_pre = "qwen2";
  }
  s.n_rot = 64;
  s.n_leading_dense = 1;
}

// The qwen35moe presets (Qwen3.5 / Qwen3.6 MoE): three of every four layers gated
// delta-net, every fourth full attention with 2 kv heads of 256 (a quarter of each
// head rotated: 64 dims in IMROPE sections [11, 11, 10], base 1e7); delta-net layers
// with 16 key heads and 32 or 64 value heads of 128, a conv of width 4; 256 experts
// top-8 + 1 sigmoid-gated shared expert of the same width; vocabulary 248320; context
// 262144; one next-token-prediction (MTP) layer, not run.
// Q3.6-35B, Qwen/Qwen3.6-35B-A3B (the text_config of its config.json, the same shape as
// Qwen3.5-35B-A3B's): 40 layers, 2048 wide, 16 query heads, 32 value heads, experts of
// 512. Q3.5-122B, Qwen/Qwen3.5-122B-A10B (config.json, as quoted by public code that
// runs it, not read here first-hand): 48 layers, 3072 wide, 32 query heads, 64 value
// heads, experts of 1024. The MTP layer count is mtp_num_hidden_layers, which llama.cpp's
// converter writes as nextn_predict_layers. feed_forward_length (no dense layer reads
// it) is written as the expert width.
void qwen35Preset(const std::string& n, SyntheticSpec& s) {
  const bool big = n == "Q3.5-122B";
  s = preset(n, "qwen35moe", big ? 48 : 40, big ? 3072 : 2048, big ? 1024 : 512, 256, 8, big ? 32 : 16, 2,
             256, 248320);
  s.n_nextn = 1;
  s.n_rot = 64;
  s.rope_sections[0] = 11;
  s.rope_sections[1] = 11;
  s.rope_sections[2] = 10;
  s.rope_freq_base = 10000000.0f;
  s.full_attn_interval = 4;
  s.ssm_conv_kernel = 4;
  s.ssm_state = 128;
  s.ssm_k_heads = 16;
  s.ssm_v_heads = big ? 64 : 32;
  s.n_expert_shared = 1;
  s.n_ff_shexp = s.n_ff_exp;
  s.n_ctx = 262144;
  s.bpe_pre = "qwen35";
  s.expert_type = s.weight_type = TensorType::BF16;
}

}  // namespace

std::vector<std::string> supportedArchs() {
  return {"llama",   "qwen2moe", "qwen3moe",  "deepseek",   "deepseek2", "olmoe",
          "glm4moe", "gpt-oss",  "qwen35moe", "minimax-m2", "gemma4"};
}

std::vector<std::string> tinyVariantNames() { return {"deepseek2-legacy"}; }

SyntheticSpec tinySpec(const std::string& arch) {
  if (arch == "llama") return tinyLlama();
  if (arch == "qwen2moe") return tinyQwen2Moe();
  if (arch == "qwen3moe") return tinyQwen3Moe();
  if (arch == "deepseek") return tinyDeepseek();
  if (arch == "deepseek2") return tinyDeepseek2();
  if (arch == "deepseek2-legacy") return tinyDeepseek2Legacy();
  if (arch == "olmoe") return tinyOlmoe();
  if (arch == "glm4moe") return tinyGlm4Moe();
  if (arch == "gpt-oss") return tinyGptOss();
  if (arch == "qwen35moe") return tinyQwen35Moe();
  if (arch == "minimax-m2") return tinyMinimaxM2();
  if (arch == "gemma4") return tinyGemma4();
  throw std::invalid_argument("tinySpec: unsupported architecture '" + arch + "'");
}

SyntheticSpec demoSpec() {
  SyntheticSpec s = tinyLlama();
  s.name = "moechat demo (random weights)";
  // Every learned piece of the built-in corpus and no unused placeholders, so the
  // demo's noise is mostly word pieces rather than raw bytes.
  s.n_vocab_target = 728;
  // Enough layers and experts that the cache map and the hit rates of the
  // offload policies have something to show, and a context a chat can use.
  s.n_layer = 4;
  s.n_expert = 16;
  s.n_ctx = 2048;
  return s;
}

std::vector<std::string> presetNames() {
  return {"DS-1",    "DS-2",      "QW-1",    "QW-2",     "Mixt",     "Q3-30B",    "Q3-235B",    "OLMoE",
          "GLM-Air", "GLM-Flash", "OSS-20B", "OSS-120B", "Q3.6-35B", "Q3.5-122B", "MiniMax-M2", "Gemma4-26B"};
}

SyntheticSpec presetSpec(const std::string& n) {
  SyntheticSpec s;
  if (n == "DS-1") {  // deepseek-moe-16b
    s = preset(n, "deepseek", 28, 2048, 1408, 64, 6, 16, 16, 128, 102400);
    s.n_expert_shared = 2;
    s.n_ff_shexp = 2816;
    s.n_leading_dense = 1;
    s.n_ff = 10944;
    s.n_ctx = 4096;
    s.rope_freq_base = 10000.0f;
    s.bpe_pre = "deepseek-llm";
  } else if (n == "DS-2" || n == "GLM-Flash") {
    deepseek2Preset(n, s);
  } else if (n == "Q3.6-35B" || n == "Q3.5-122B") {
    qwen35Preset(n, s);
  } else if (n == "Gemma4-26B") {
    // google/gemma-4-26B-A4B (the text_config of its config.json): 30 layers, 2816 wide,
    // 16 query heads; sliding layers (5 of every 6, window 1024) of 8 kv heads of 256,
    // rope base 10000; global layers of 2 kv heads of 512 with V = K
    // (attention_k_eq_v), a quarter rotated ("proportional", base 1e6); a dense MLP of
    // 2112 beside 128 experts of 704, top-8; no shared-KV layers; vocabulary 262144;
    // context 262144; final_logit_softcapping 30; tied output.
    s = preset(n, "gemma4", 30, 2816, 704, 128, 8, 16, 8, 256, 262144);
    s.swa_period = 6;
    s.n_head_kv_full = 2;
    s.head_dim_full = 512;
    s.rope_partial_full = 0.25f;
    s.rope_freq_base = 1000000.0f;
    s.rope_freq_base_swa = 10000.0f;
    s.sliding_window = 1024;
    s.k_eq_v_full = true;
    s.n_ff = 2112;
    s.logit_softcap = 30.0f;
    s.tied_output = true;
    s.n_ctx = 262144;
    s.vocab = VocabKind::SentencePiece;
    s.expert_type = s.weight_type = TensorType::BF16;
  } else if (n == "QW-1") {  // Qwen1.5-MoE-A2.7B
    s = preset(n, "qwen2moe", 24, 2048, 1408, 60, 4, 16, 16, 128, 151936);
    s.n_expert_shared = 1;
    s.n_ff_shexp = 5632;
    s.n_ff = 5632;
    s.n_ctx = 8192;
    s.qkv_bias = true;
    s.bpe_pre = "qwen2";
  } else if (n == "QW-2") {  // Qwen2-57B-A14B
    s = preset(n, "qwen2moe", 28, 3584, 2560, 64, 8, 28, 4, 128, 151936);
    s.n_expert_shared = 1;
    s.n_ff_shexp = 20480;
    s.n_ff = 18944;
    s.qkv_bias = true;
    s.bpe_pre = "qwen2";
  } else if (n == "Mixt") {  // Mixtral-8x7B
    s = preset(n, "llama", 32, 4096, 14336, 8, 2, 32, 8, 128, 32000);
    s.vocab = VocabKind::SentencePiece;
  } else if (n == "Q3-30B") {  // Qwen3-30B-A3B: attention 32 x 128 = 4096 wide, n_embd 2048
    s = preset(n, "qwen3moe", 48, 2048, 768, 128, 8, 32, 4, 128, 151936);
    s.n_ff = 6144;
    s.n_ctx = 40960;
    s.bpe_pre = "qwen2";
    s.expert_type = s.weight_type = TensorType::BF16;
  } else if (n == "Q3-235B") {  // Qwen3-235B-A22B: attention 64 x 128 = 8192 wide
    s = preset(n, "qwen3moe", 94, 4096, 1536, 128, 8, 64, 4, 128, 151936);
    s.n_ff = 12288;
    s.n_ctx = 40960;
    s.bpe_pre = "qwen2";
    s.expert_type = s.weight_type = TensorType::BF16;
  } else if (n == "OLMoE") {  // OLMoE-1B-7B
    s = preset(n, "olmoe", 16, 2048, 1024, 64, 8, 16, 16, 128, 50304);
    s.n_ctx = 4096;
    s.rope_freq_base = 10000.0f;
    s.bpe_pre = "olmo";
  } else if (n == "GLM-Air") {  // GLM-4.5-Air (zai-org/GLM-4.5-Air config.json)
    // 46 layers (the first dense, n_ff 10944) + 1 next-token-prediction layer; attention
    // 96 x 128 = 12288 wide, 8 kv heads; half of each head rotary; 1 shared expert.
    s = preset(n, "glm4moe", 46, 4096, 1408, 128, 8, 96, 8, 128, 151552);
    s.n_nextn = 1;
    s.n_rot = 64;
    s.n_leading_dense = 1;
    s.n_ff = 10944;
    s.n_expert_shared = 1;
    s.n_ff_shexp = 1408;
    s.qkv_bias = true;
    s.n_ctx = 131072;
    s.bpe_pre = "qwen2";
  } else if (n == "OSS-20B" || n == "OSS-120B") {  // openai/gpt-oss-20b and -120b config.json
    // 2880 wide, 64 query heads of 64 (attention 4096 wide), 8 kv heads; experts of
    // 2880; 24 layers x 32 experts or 36 x 128, top-4; window 128 on the even layers;
    // YaRN x32 over 4096 positions, base 150000.
    const bool big = n == "OSS-120B";
    s = preset(n, "gpt-oss", big ? 36 : 24, 2880, 2880, big ? 128 : 32, 4, 64, 8, 64, 201088);
    s.qkv_bias = true;
    s.sliding_window = 128;
    s.yarn_factor = 32.0f;
    s.yarn_orig_ctx = 4096;
    s.rope_freq_base = 150000.0f;
    s.n_ctx = 131072;
    s.bpe_pre = "qwen2";
    s.expert_type = TensorType::MXFP4;
    s.weight_type = TensorType::Q8_0;
  } else if (n == "MiniMax-M2") {  // MiniMaxAI/MiniMax-M2 (and M2.1, the same shape) config.json
    // 62 layers 3072 wide; 48 query heads of 128 (attention 6144 wide), 8 kv heads, 64
    // of each head's 128 dims rotary, base 5e6; 256 experts of 1536, top-8, sigmoid
    // routing with e_score_correction_bias; no shared expert; vocabulary 200064;
    // 196608 positions. Its 3 MTP modules are not converted by llama.cpp.
    s = preset(n, "minimax-m2", 62, 3072, 1536, 256, 8, 48, 8, 128, 200064);
    s.n_rot = 64;
    s.rope_freq_base = 5000000.0f;
    s.n_ctx = 196608;
    s.bpe_pre = "minimax-m2";
    s.expert_type = s.weight_type = TensorType::BF16;
  } else {
    throw std::invalid_argument("presetSpec: unknown preset '" + n + "'");
  }
  return s;
}

}  // namespace moe::synth
