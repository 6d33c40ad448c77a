#include "inference/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moe {
namespace {

struct ArchInfo {
  const char* name;
  Arch arch;
  RopeStyle rope;          // GGUF-NOTES.md "Details real files carry": RoPE layout per arch
  bool norm_topk_default;  // GGUF-NOTES.md MoE table: renormalise top-k weights
};

constexpr ArchInfo kArchs[] = {
    {"llama", Arch::Llama, RopeStyle::Norm, true},
    {"qwen2moe", Arch::Qwen2Moe, RopeStyle::Neox, false},
    {"qwen3moe", Arch::Qwen3Moe, RopeStyle::Neox, true},
    {"deepseek", Arch::Deepseek, RopeStyle::Norm, false},
    {"deepseek2", Arch::Deepseek2, RopeStyle::Norm, false},
    {"olmoe", Arch::Olmoe, RopeStyle::Neox, false},
    {"glm4moe", Arch::Glm4Moe, RopeStyle::Neox, true},
    {"gpt-oss", Arch::GptOss, RopeStyle::Neox, true},
    {"qwen35moe", Arch::Qwen35Moe, RopeStyle::Neox, true},
    // llama.cpp lists minimax-m2 among the NEOX rope architectures (llama-model.cpp,
    // llama_model_rope_type) and its graph always renormalises the chosen experts'
    // weights (src/models/minimax-m2.cpp: build_moe_ffn with norm_w true).
    {"minimax-m2", Arch::MinimaxM2, RopeStyle::Neox, true},
    {"gemma4", Arch::Gemma4, RopeStyle::Neox, true},  // llama.cpp: LLAMA_ROPE_TYPE_NEOX for the gemma family
};

const ArchInfo* findArch(const std::string& name) {
  for (const auto& a : kArchs)
    if (name == a.name) return &a;
  return nullptr;
}

std::string supportedArchList() {
  std::string out;
  for (const auto& a : kArchs) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

// Reads `{arch}.suffix` as a positive int that fits; throws naming the key.
class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  int required(const std::string& suffix) const {
    auto v = optional(suffix);
    if (!v) throw ModelError("model file lacks required key '" + key(suffix) + "'");
    return *v;
  }
  std::optional<int> optional(const std::string& suffix) const {
    const std::string k = key(suffix);
    std::optional<uint64_t> v;
    try {
      v = f_.getUint(k);
    } catch (const gguf::GgufError& e) {
      throw ModelError("key '" + k + "': " + e.what());
    }
    if (!v) return std::nullopt;
    if (*v > (1u << 30))
      throw ModelError("key '" + k + "' = " + std::to_string(*v) + " is implausibly large");
    return static_cast<int>(*v);
  }
  std::optional<float> optionalFloat(const std::string& suffix) const {
    try {
      auto v = f_.getFloat(key(suffix));
      if (v && !std::isfinite(*v)) throw ModelError("key '" + key(suffix) + "' is not finite");
      return v ? std::optional<float>(static_cast<float>(*v)) : std::nullopt;
    } catch (const gguf::GgufError& e) {
      throw ModelError("key '" + key(suffix) + "': " + e.what());
    }
  }
  std::optional<bool> optionalBool(const std::string& suffix) const {
    try {
      return f_.getBool(key(suffix));
    } catch (const gguf::GgufError& e) {
      throw ModelError("key '" + key(suffix) + "': " + e.what());
    }
  }
  std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }

 private:
  const gguf::GgufFile& f_;
  std::string arch_;
};

void require(bool ok, const std::string& what) {
  if (!ok) throw ModelError("invalid model configuration: " + what);
}

// Bounds far above every published model (widths reach ~20k, counts a few hundred),
// so that every product of header values fits the engine's int arithmetic and
// nothing is sized from an absurd count before the tensors are checked.
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // embedding, attention and FFN widths
constexpr int64_t kMaxCount = int64_t{1} << 16;  // layers, heads, experts
constexpr int64_t kMaxVocab = int64_t{1} << 24;

void requireAtMost(int64_t value, int64_t bound, const std::string& what) {
  require(value <= bound,
          what + " = " + std::to_string(value) + " is above the supported maximum " + std::to_string(bound));
}

// deepseek2's attention sizes. Files converted for MLA (llama.cpp, 2025 on) give the
// per-head query/key and value widths as key_length_mla / value_length_mla, and
// key_length / value_length as the latent rows (kv_lora + n_rot, kv_lora); older
// files give the per-head widths as key_length / value_length. Either way the
// engine attends over [k_pe, c] rows with one KV head.
void readMla(const KeyReader& k, ModelConfig& c) {
  MlaShape& m = c.mla;
  m.q_lora = k.optional("attention.q_lora_rank").value_or(0);
  m.kv_lora = k.required("attention.kv_lora_rank");
  c.n_rot = k.required("rope.dimension_count");
  const auto key_mla = k.optional("attention.key_length_mla");
  m.qk_dim = key_mla ? *key_mla : k.required("attention.key_length");
  m.v_dim = key_mla ? k.required("attention.value_length_mla") : k.required("attention.value_length");
  requireAtMost(m.kv_lora, kMaxWidth, "attention.kv_lora_rank");
  requireAtMost(m.q_lora, kMaxWidth, "attention.q_lora_rank");
  requireAtMost(m.qk_dim, kMaxWidth, "the key length");
  requireAtMost(m.v_dim, kMaxWidth, "the value length");
  require(m.kv_lora > 0 && m.v_dim > 0, "kv_lora_rank and the value length must be > 0");
  require(c.n_rot > 0 && c.n_rot % 2 == 0 && c.n_rot < m.qk_dim,
          "rope.dimension_count must be even, > 0 and below the key length");
  m.qk_nope = m.qk_dim - c.n_rot;
  c.n_head_kv = 1;
  c.head_dim = c.n_rot + m.kv_lora;
}

// The softmax scale of deepseek2: 1/sqrt(qk_dim), times mscale^2 under YaRN, where
// mscale = 1 + L ln(factor) with L the file's yarn_log_multiplier (llama.cpp's
// converter stores 0.1 x mscale_all_dim there; HF DeepSeek-V2 scales the softmax by
// yarn_get_mscale(factor, mscale_all_dim)^2). With L given, the rotation itself is
// not scaled (mscale / mscale_all_dim = 1 in DeepSeek-V2's config): attn_factor
// cancels RopeYarn's 1 + 0.1 ln(factor). Without it both get 1 + 0.1 ln(factor),
// as llama.cpp computes.
float mlaAttentionScale(const KeyReader& k, ModelConfig& c) {
  const float base = 1.0f / std::sqrt(float(c.mla.qk_dim));
  if (!c.yarn.active()) return base;
  const float ln_factor = std::log(c.yarn.factor);
  const float log_mul = k.optionalFloat("rope.scaling.yarn_log_multiplier").value_or(0.0f);
  if (log_mul > 0) {
    c.yarn.attn_factor = 1.0f / (1.0f + 0.1f * ln_factor);
    const float mscale = 1.0f + log_mul * ln_factor;
    return base * mscale * mscale;
  }
  const float mscale = 1.0f + 0.1f * ln_factor;
  return base * mscale * mscale;
}

// Bounds of the linear-attention shape: far above Qwen3.5's (conv 4, heads of 128,
// 32 value heads), low enough that nothing is sized from an absurd header.
constexpr int64_t kMaxConvKernel = 64;
constexpr int64_t kMaxStateSize = 4096;                     // one head's key / value width
constexpr int64_t kMaxDeltaStateFloats = int64_t{1} << 26;  // one layer's delta states

// IMROPE (ggml's rope_multi, GGML_ROPE_TYPE_IMROPE): rotated pair i belongs to sector
// s = i mod (sum of the sections); s mod 3 == 1 and s < 3 x sections[1] takes the
// second position, s mod 3 == 2 and s < 3 x sections[2] the third, s mod 3 == 0 and
// s < 3 x sections[0] the first, anything else the fourth (llama.cpp gives text tokens
// the same position in the first three and 0 in the fourth). True when no pair of the
// n_rot rotated dims falls to the fourth: text positions then rotate as plain rope.
bool imropeUsesTextPositionsOnly(const int sections[4], int n_rot) {
  const int total = sections[0] + sections[1] + sections[2] + sections[3];
  if (total <= 0) return false;
  for (int i = 0; i < n_rot / 2; ++i) {
    const int s = i % total;
    const bool first = s % 3 == 0 && s < 3 * sections[0];
    const bool second = s % 3 == 1 && s < 3 * sections[1];
    const bool third = s % 3 == 2 && s < 3 * sections[2];
    if (!first && !second && !third) return false;
  }
  return true;
}

// qwen35moe's layer kinds and linear-attention shape (llama.cpp's qwen35moe loader:
// the per-layer attention.recurrent_layers array where present, else every
// full_attention_interval-th layer (default 4) is full attention, the others delta-net;
// head_k = ssm.state_size, n_k = ssm.group_count, n_v = ssm.time_step_rank,
// head_v = ssm.inner_size / n_v, which its delta-net requires to equal head_k).
void readDeltaNet(const gguf::GgufFile& file, const KeyReader& k, ModelConfig& c, int n_layer_all) {
  DeltaNetShape& d = c.delta;
  d.conv_kernel = k.required("ssm.conv_kernel");
  d.head_k = k.required("ssm.state_size");
  d.n_k_heads = k.required("ssm.group_count");
  d.n_v_heads = k.required("ssm.time_step_rank");
  const int inner = k.required("ssm.inner_size");
  require(d.conv_kernel > 0, k.key("ssm.conv_kernel") + " must be > 0");
  requireAtMost(d.conv_kernel, kMaxConvKernel, k.key("ssm.conv_kernel"));
  require(d.head_k > 0, k.key("ssm.state_size") + " must be > 0");
  requireAtMost(d.head_k, kMaxStateSize, k.key("ssm.state_size"));
  require(d.n_k_heads > 0 && d.n_v_heads > 0,
          k.key("ssm.group_count") + " and " + k.key("ssm.time_step_rank") + " must be > 0");
  requireAtMost(d.n_k_heads, kMaxCount, k.key("ssm.group_count"));
  requireAtMost(d.n_v_heads, kMaxCount, k.key("ssm.time_step_rank"));
  require(d.n_v_heads % d.n_k_heads == 0, k.key("ssm.time_step_rank") + " (" + std::to_string(d.n_v_heads) +
                                              ") must be a multiple of " + k.key("ssm.group_count") + " (" +
                                              std::to_string(d.n_k_heads) + ")");
  require(inner > 0 && inner % d.n_v_heads == 0,
          k.key("ssm.inner_size") + " (" + std::to_string(inner) + ") must be a positive multiple of " +
              k.key("ssm.time_step_rank") + " (" + std::to_string(d.n_v_heads) + ")");
  d.head_v = inner / d.n_v_heads;
  require(d.head_v == d.head_k, k.key("ssm.inner_size") + " / " + k.key("ssm.time_step_rank") + " = " +
                                    std::to_string(d.head_v) + " must equal " + k.key("ssm.state_size") +
                                    " = " + std::to_string(d.head_k));
  requireAtMost(int64_t{d.n_v_heads} * d.head_v, kMaxWidth, k.key("ssm.inner_size"));
  requireAtMost(int64_t{d.n_k_heads} * d.head_k, kMaxWidth, "ssm.group_count x ssm.state_size");
  requireAtMost(int64_t{d.n_v_heads} * d.head_v * d.head_v, kMaxDeltaStateFloats,
                "the delta state of one layer (time_step_rank x state_size^2)");

  c.recurrent.assign(size_t(c.n_layer), 0);
  if (const gguf::Value* v = file.find(k.key("attention.recurrent_layers"))) {
    const auto* arr = v->asArray();
    if (!arr || arr->size() != size_t(n_layer_all))
      throw ModelError("key '" + k.key("attention.recurrent_layers") + "' must be an array of block_count (" +
                       std::to_string(n_layer_all) + ") flags");
    for (int i = 0; i < c.n_layer; ++i) {
      const gguf::Value& e = (*arr)[size_t(i)];
      const auto b = e.asBool();
      const auto u = e.asUint();
      if (!b && !u)
        throw ModelError("key '" + k.key("attention.recurrent_layers") + "' holds a non-flag value");
      c.recurrent[size_t(i)] = (b ? *b : *u != 0) ? 1 : 0;
    }
  } else {
    const int interval = k.optional("full_attention_interval").value_or(4);
    require(interval > 0, k.key("full_attention_interval") + " must be > 0");
    for (int i = 0; i < c.n_layer; ++i) c.recurrent[size_t(i)] = (i + 1) % interval != 0 ? 1 : 0;
  }

  // Joint query + gate projection, per-head QK-norm, IMROPE sections.
  c.attn_output_gate = true;
  c.qk_norm = QkNorm::PerHead;
  const gguf::Value* sections = file.find(k.key("rope.dimension_sections"));
  if (!sections) throw ModelError("model file lacks required key '" + k.key("rope.dimension_sections") + "'");
  const auto* arr = sections->asArray();
  if (!arr || arr->empty() || arr->size() > 4)
    throw ModelError("key '" + k.key("rope.dimension_sections") + "' must be an array of up to 4 counts");
  for (size_t i = 0; i < arr->size(); ++i) {
    const auto n = (*arr)[i].asUint();
    if (!n || *n > uint64_t(kMaxWidth))
      throw ModelError("key '" + k.key("rope.dimension_sections") + "' holds an invalid count");
    c.rope_sections[i] = static_cast<int>(*n);
  }
}

// minimax-m2 (llama.cpp: src/models/minimax-m2.cpp, its converter's MiniMaxM2Model).
// The converter always writes the head width (head_dim 128, while embedding_length /
// head_count is 64), the rotated width (rotary_dim 64 of 128) and the experts' width,
// and the loader requires the experts' width: without them the file is not one the
// converter wrote, and guessing head_dim = n_embd / n_head would mis-size attention.
void readMinimaxM2Keys(const KeyReader& k) {
  for (const char* suffix : {"attention.key_length", "rope.dimension_count", "expert_feed_forward_length"})
    if (!k.optional(suffix))
      throw ModelError("model file lacks required key '" + k.key(suffix) + "' (minimax-m2)");
}

// An {arch}.suffix value given per layer: an array of block_count integers or flags,
// or one value for every layer. nullopt when the key is absent.
std::optional<std::vector<uint64_t>> layerValues(const gguf::GgufFile& file, const KeyReader& k,
                                                 const std::string& suffix, size_t n_layer) {
  const gguf::Value* v = file.find(k.key(suffix));
  if (!v) return std::nullopt;
  auto one = [&](const gguf::Value& e) -> uint64_t {
    if (const auto b = e.asBool()) return *b ? 1 : 0;
    if (const auto u = e.asUint()) return *u;
    throw ModelError("key '" + k.key(suffix) + "' holds a value that is not a count or a flag");
  };
  if (const auto* arr = v->asArray()) {
    if (arr->size() != n_layer)
      throw ModelError("key '" + k.key(suffix) + "' has " + std::to_string(arr->size()) +
                       " entries; block_count is " + std::to_string(n_layer));
    std::vector<uint64_t> out;
    out.reserve(n_layer);
    for (const gguf::Value& e : *arr) out.push_back(one(e));
    return out;
  }
  return std::vector<uint64_t>(n_layer, one(*v));
}

// gemma4 (Gemma 4 26B-A4B and its kind), as llama.cpp reads it (src/models/gemma4.cpp
// load_arch_hparams, conversion/gemma.py Gemma4Model.set_gguf_parameters):
// attention.sliding_window_pattern flags the sliding layers (one per layer);
// attention.key_length / key_length_swa and rope.dimension_count / _swa are the global
// and the sliding layers' head sizes and rotated dims; attention.head_count_kv may be
// per layer (num_global_key_value_heads on the global ones); rope.freq_base is the
// global layers' base, rope.freq_base_swa the sliding ones'; the last
// attention.shared_kv_layers layers reuse the cache of layer n_kv - 2 (sliding) or
// n_kv - 1 (global), n_kv = block_count - shared (llama.cpp's reuse rule); q.k is not
// scaled (f_attention_scale 1); routing is softmax over all experts, top-k
// renormalised; final_logit_softcapping caps the logits. Per-layer embeddings (the E2B /
// E4B models' embedding_length_per_layer_input) are not supported.
void readGemma4(const gguf::GgufFile& file, const KeyReader& k, ModelConfig& c) {
  requireAtMost(c.n_layer, kMaxCount, "block_count");  // before anything is sized from it
  const size_t L = size_t(c.n_layer);
  if (const int ple = k.optional("embedding_length_per_layer_input").value_or(0); ple > 0)
    throw ModelError("key '" + k.key("embedding_length_per_layer_input") + "' = " + std::to_string(ple) +
                     ": per-layer embeddings (Gemma 4 E2B / E4B) are not supported");
  const auto pattern = layerValues(file, k, "attention.sliding_window_pattern", L);
  if (!pattern)
    throw ModelError("model file lacks required key '" + k.key("attention.sliding_window_pattern") + "'");
  c.sliding_window = k.required("attention.sliding_window");
  require(c.sliding_window > 0, k.key("attention.sliding_window") + " must be > 0");

  const int hd_full = k.required("attention.key_length");
  const int hd_swa = k.required("attention.key_length_swa");
  if (auto v = k.optional("attention.value_length_swa"); v && *v != hd_swa)
    throw ModelError(k.key("attention.value_length_swa") + " " + std::to_string(*v) + " != key_length_swa " +
                     std::to_string(hd_swa) + " is not supported");
  requireAtMost(hd_full, kMaxWidth, k.key("attention.key_length"));
  requireAtMost(hd_swa, kMaxWidth, k.key("attention.key_length_swa"));
  require(hd_full > 0 && hd_full % 2 == 0 && hd_swa > 0 && hd_swa % 2 == 0,
          "the key lengths (global and sliding) must be even and > 0");
  const int rot_full = k.optional("rope.dimension_count").value_or(hd_full);
  const int rot_swa = k.optional("rope.dimension_count_swa").value_or(hd_swa);
  require(rot_full > 0 && rot_full % 2 == 0 && rot_full <= hd_full,
          k.key("rope.dimension_count") + " must be even and within key_length");
  require(rot_swa > 0 && rot_swa % 2 == 0 && rot_swa <= hd_swa,
          k.key("rope.dimension_count_swa") + " must be even and within key_length_swa");
  c.rope_freq_base_swa = k.optionalFloat("rope.freq_base_swa").value_or(c.rope_freq_base);
  require(c.rope_freq_base_swa > 0, k.key("rope.freq_base_swa") + " must be > 0");

  const auto kv_heads = layerValues(file, k, "attention.head_count_kv", L);
  const auto ff = layerValues(file, k, "feed_forward_length", L);
  if (!ff) throw ModelError("model file lacks required key '" + k.key("feed_forward_length") + "'");
  for (uint64_t w : *ff)
    if (w != ff->front())
      throw ModelError("key '" + k.key("feed_forward_length") +
                       "' differs from layer to layer (Gemma 4's double-wide MLP), which is not supported");
  requireAtMost(int64_t(std::min<uint64_t>(ff->front(), uint64_t(kMaxWidth) + 1)), kMaxWidth,
                k.key("feed_forward_length"));
  c.n_ff = static_cast<int>(ff->front());
  require(c.n_ff > 0, k.key("feed_forward_length") + " must be > 0 (every gemma4 layer has a dense MLP)");

  c.swa.assign(L, 0);
  c.layer_head_dim.assign(L, 0);
  c.layer_n_head_kv.assign(L, 0);
  c.layer_n_rot.assign(L, 0);
  c.kv_source.assign(L, 0);
  c.head_dim = 0;
  c.n_head_kv = 0;
  for (size_t i = 0; i < L; ++i) {
    const bool sliding = (*pattern)[i] != 0;
    const uint64_t kv = kv_heads ? (*kv_heads)[i] : uint64_t(c.n_head);
    require(kv > 0 && kv <= uint64_t(kMaxCount) && c.n_head % int(kv) == 0,
            "head_count (" + std::to_string(c.n_head) + ") must be a multiple of layer " + std::to_string(i) +
                "'s head_count_kv (" + std::to_string(kv) + ")");
    c.swa[i] = sliding ? 1 : 0;
    c.layer_head_dim[i] = sliding ? hd_swa : hd_full;
    c.layer_n_head_kv[i] = int(kv);
    c.layer_n_rot[i] = sliding ? rot_swa : rot_full;
    c.head_dim = std::max(c.head_dim, c.layer_head_dim[i]);
    c.n_head_kv = std::max(c.n_head_kv, int(kv));
  }
  c.n_rot = c.head_dim;

  const int shared = k.optional("attention.shared_kv_layers").value_or(0);
  require(shared < c.n_layer, k.key("attention.shared_kv_layers") + " must be below block_count");
  const int n_kv = c.n_layer - shared;
  for (int i = 0; i < c.n_layer; ++i) {
    int src = i;
    if (i >= n_kv) {
      src = n_kv - (c.swa[size_t(i)] ? 2 : 1);
      require(src >= 0 && c.swa[size_t(src)] == c.swa[size_t(i)] &&
                  c.layer_n_head_kv[size_t(src)] == c.layer_n_head_kv[size_t(i)],
              "layer " + std::to_string(i) + " would reuse the K/V of layer " + std::to_string(src) +
                  " (attention.shared_kv_layers = " + std::to_string(shared) +
                  "), which is not a layer of its kind and shape");
    }
    c.kv_source[size_t(i)] = src;
  }

  c.final_logit_softcap = k.optionalFloat("final_logit_softcapping").value_or(0.0f);
  require(c.final_logit_softcap >= 0, k.key("final_logit_softcapping") + " must be >= 0");
  c.attn_scale = 1.0f;  // q and k are RMS-normed; Gemma 4 does not scale q.k
  c.embedding_scaled = true;
  c.gelu_ffn = true;
  c.qk_norm = QkNorm::PerHead;
  c.gating = GatingFunc::Softmax;
  c.norm_topk_weights = true;
  c.expert_weights_scale = 1.0f;
}

}  // namespace

const char* archName(Arch a) {
  for (const auto& info : kArchs)
    if (info.arch == a) return info.name;
  return "?";
}

ModelConfig ModelConfig::fromGguf(const gguf::GgufFile& file) {
  ModelConfig c;
  // Files over ~50 GB ship as shards (gguf-split: split.no / split.count); each
  // shard holds only some tensors. Until the loader joins them, say so plainly.
  if (auto shards = file.getUint("split.count"); shards && *shards > 1)
    throw ModelError("this is shard " + std::to_string(file.getUint("split.no").value_or(0) + 1) + " of " +
                     std::to_string(*shards) +
                     " of a split model, which moechat cannot open yet; merge the shards into one file "
                     "first (llama.cpp: llama-gguf-split --merge FIRST-SHARD.gguf OUT.gguf)");
  auto arch = file.getString("general.architecture");
  if (!arch) throw ModelError("model file lacks 'general.architecture'");
  const ArchInfo* info = findArch(*arch);
  if (!info)
    throw ModelError("unsupported architecture '" + *arch + "' (supported: " + supportedArchList() + ")");
  c.arch = info->arch;
  c.arch_name = *arch;
  c.model_name = file.getString("general.name").value_or("");
  c.rope_style = info->rope;
  c.norm_topk_weights = info->norm_topk_default;

  const KeyReader k(file, *arch);
  c.n_layer = k.required("block_count");
  const int n_layer_all = c.n_layer;
  // glm4moe files end with next-token-prediction (MTP) layers that only speculative
  // decoding runs (llama.cpp's glm4_moe graph skips them too).
  c.n_nextn = k.optional("nextn_predict_layers").value_or(0);
  require(c.n_nextn < c.n_layer, "nextn_predict_layers must be below block_count");
  c.n_layer -= c.n_nextn;
  c.n_embd = k.required("embedding_length");
  c.n_head = k.required("attention.head_count");
  // gemma4 may give head_count_kv per layer (readGemma4 reads it).
  c.n_head_kv = c.arch == Arch::Gemma4 ? c.n_head : k.optional("attention.head_count_kv").value_or(c.n_head);
  c.n_ctx_train = k.optional("context_length").value_or(4096);
  require(c.n_head > 0, "attention.head_count must be > 0");
  if (c.arch == Arch::MinimaxM2) readMinimaxM2Keys(k);
  c.head_dim = k.optional("attention.key_length").value_or(c.n_embd / c.n_head);
  if (c.arch == Arch::Deepseek2) {
    readMla(k, c);
  } else {
    if (auto vlen = k.optional("attention.value_length"); vlen && *vlen != c.head_dim)
      throw ModelError("attention.value_length " + std::to_string(*vlen) + " != key_length " +
                       std::to_string(c.head_dim) + " is not supported");
    c.n_rot = k.optional("rope.dimension_count").value_or(c.head_dim);
  }
  c.rms_eps = k.optionalFloat("attention.layer_norm_rms_epsilon").value_or(1e-5f);
  c.rope_freq_base = k.optionalFloat("rope.freq_base").value_or(10000.0f);
  if (auto scaling = file.getString(k.key("rope.scaling.type")); scaling && *scaling == "yarn") {
    c.yarn.factor = k.optionalFloat("rope.scaling.factor").value_or(1.0f);
    c.yarn.orig_ctx = k.optional("rope.scaling.original_context_length").value_or(0);
    c.yarn.beta_fast = k.optionalFloat("rope.scaling.yarn_beta_fast").value_or(c.yarn.beta_fast);
    c.yarn.beta_slow = k.optionalFloat("rope.scaling.yarn_beta_slow").value_or(c.yarn.beta_slow);
    require(c.yarn.factor >= 1.0f && c.yarn.orig_ctx > 0,
            "YaRN scaling needs rope.scaling.factor >= 1 and rope.scaling.original_context_length");
  } else if (scaling && *scaling != "none") {
    throw ModelError("rope.scaling.type '" + *scaling + "' is not supported (none, yarn)");
  }
  if (c.arch == Arch::Deepseek2) c.attn_scale = mlaAttentionScale(k, c);

  // gemma4 may give feed_forward_length per layer (readGemma4 reads it).
  c.n_ff = c.arch == Arch::Gemma4 ? 0 : k.optional("feed_forward_length").value_or(0);
  c.n_expert = k.optional("expert_count").value_or(0);
  c.n_expert_used = k.optional("expert_used_count").value_or(0);
  c.n_ff_exp = k.optional("expert_feed_forward_length").value_or(c.n_ff);
  c.n_leading_dense = k.optional("leading_dense_block_count").value_or(0);
  c.expert_weights_scale = k.optionalFloat("expert_weights_scale").value_or(1.0f);
  if (auto norm = k.optionalBool("expert_weights_norm")) c.norm_topk_weights = *norm;
  // glm4moe: its default when the key is absent. minimax-m2: MiniMax-M2's config.json
  // says scoring_func "sigmoid", which llama.cpp's converter writes as the key.
  if (c.arch == Arch::Glm4Moe || c.arch == Arch::MinimaxM2) c.gating = GatingFunc::Sigmoid;
  if (auto g = k.optional("expert_gating_func")) {
    require(*g == 1 || *g == 2, "expert_gating_func must be 1 (softmax) or 2 (sigmoid)");
    c.gating = *g == 2 ? GatingFunc::Sigmoid : GatingFunc::Softmax;
  }

  switch (c.arch) {
    case Arch::Qwen2Moe:
      // One shared expert whose output is scaled by sigmoid(ffn_gate_inp_shexp . x).
      c.n_expert_shared = 1;
      c.n_ff_shexp = k.optional("expert_shared_feed_forward_length").value_or(c.n_ff);
      c.shared_expert_gated = true;
      break;
    case Arch::Deepseek:
    case Arch::Deepseek2:
    case Arch::Glm4Moe: {
      // n_shared experts of width n_ff_exp, stored fused as one FFN (GGUF-NOTES.md).
      c.n_expert_shared = k.optional("expert_shared_count").value_or(0);
      const int64_t fused = int64_t{c.n_expert_shared} * c.n_ff_exp;
      requireAtMost(fused, kMaxWidth, "expert_shared_count x expert_feed_forward_length");
      c.n_ff_shexp = static_cast<int>(fused);
      break;
    }
    case Arch::Qwen3Moe: c.qk_norm = QkNorm::PerHead; break;
    case Arch::GptOss:
      // Its router picks the k largest logits and softmaxes over them: softmax over
      // all experts, renormalised over the chosen k, is the same distribution.
      c.sliding_window = k.optional("attention.sliding_window").value_or(0);
      c.expert_biases = true;
      c.clamped_swiglu = true;
      break;
    case Arch::Olmoe: c.qk_norm = QkNorm::Whole; break;
    case Arch::Qwen35Moe:
      // One shared expert scaled by sigmoid(ffn_gate_inp_shexp . x), as qwen2moe.
      c.n_expert_shared = 1;
      c.n_ff_shexp = k.optional("expert_shared_feed_forward_length").value_or(c.n_ff);
      c.shared_expert_gated = true;
      requireAtMost(c.n_layer, kMaxCount, "block_count");
      readDeltaNet(file, k, c, n_layer_all);
      break;
    case Arch::MinimaxM2:
      // llama.cpp's minimax-m2 graph: attn_q_norm {n_head x head_dim} and attn_k_norm
      // {n_head_kv x head_dim}, each one RMS norm over the whole projection before it is
      // split into heads (MiniMax's qk_norm_type "per_layer"); no shared expert; the
      // routed weights renormalised whatever expert_weights_norm says, and not scaled.
      c.qk_norm = QkNorm::Whole;
      c.norm_topk_weights = true;
      c.expert_weights_scale = 1.0f;  // its loader reads no expert_weights_scale
      break;
    case Arch::Gemma4: readGemma4(file, k, c); break;
    case Arch::Llama: break;
  }

  c.n_expert_groups = k.optional("expert_group_count").value_or(0);
  c.n_group_used = k.optional("expert_group_used_count").value_or(0);
  if (c.n_expert_groups > 1)
    require(c.n_expert % c.n_expert_groups == 0 && c.n_group_used >= 0 && c.n_group_used <= c.n_expert_groups,
            "expert_group_count must divide expert_count, and expert_group_used_count be at most it");
  if (c.groupLimited())
    require(int64_t{c.n_group_used} * (c.n_expert / c.n_expert_groups) >= c.n_expert_used,
            "the groups expert_group_used_count allows hold fewer experts than expert_used_count");

  if (auto tokens = file.find("tokenizer.ggml.tokens"); tokens && tokens->asArray()) {
    requireAtMost(static_cast<int64_t>(tokens->asArray()->size()), kMaxVocab, "tokenizer.ggml.tokens count");
    c.n_vocab = static_cast<int>(tokens->asArray()->size());
  }

  requireAtMost(c.n_layer, kMaxCount, "block_count");
  requireAtMost(c.n_head, kMaxCount, "attention.head_count");
  requireAtMost(c.n_head_kv, kMaxCount, "attention.head_count_kv");
  requireAtMost(c.n_expert, kMaxCount, "expert_count");
  requireAtMost(c.n_embd, kMaxWidth, "embedding_length");
  requireAtMost(int64_t{c.n_head} * c.head_dim, kMaxWidth, "head_count x head dimension");
  requireAtMost(int64_t{c.n_head_kv} * c.head_dim, kMaxWidth, "head_count_kv x head dimension");
  requireAtMost(c.n_ff, kMaxWidth, "feed_forward_length");
  requireAtMost(c.n_ff_exp, kMaxWidth, "expert_feed_forward_length");
  requireAtMost(c.n_ff_shexp, kMaxWidth, "expert_shared_feed_forward_length");
  require(c.n_layer > 0, "block_count must be > 0");
  require(c.n_embd > 0, "embedding_length must be > 0");
  require(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0, "head_count (" + std::to_string(c.n_head) +
                                                              ") must be a multiple of head_count_kv (" +
                                                              std::to_string(c.n_head_kv) + ")");
  require(c.head_dim > 0 && c.head_dim % 2 == 0, "head dimension must be even and > 0");
  require(c.n_rot > 0 && c.n_rot <= c.head_dim && c.n_rot % 2 == 0,
          "rope.dimension_count must be even and within the head dimension");
  require(c.n_expert > 0, "not a Mixture-of-Experts model ({arch}.expert_count missing or 0)");
  require(c.n_expert_used > 0 && c.n_expert_used <= c.n_expert,
          "expert_used_count must be in 1..expert_count");
  require(c.n_ff_exp > 0, "expert_feed_forward_length must be > 0");
  require(c.n_leading_dense >= 0 && c.n_leading_dense < c.n_layer,
          "leading_dense_block_count must be below block_count");
  require(c.n_leading_dense == 0 || c.n_ff > 0, "dense layers need feed_forward_length");
  require(c.rms_eps > 0.0f, "layer_norm_rms_epsilon must be > 0");
  require(c.rope_freq_base > 0.0f, "rope.freq_base must be > 0");
  require(c.n_ctx_train > 0, "context_length must be > 0");
  if (c.arch == Arch::Qwen35Moe)
    require(imropeUsesTextPositionsOnly(c.rope_sections, c.n_rot),
            k.key("rope.dimension_sections") + " leaves rotated dimensions to the fourth (non-text) section");
  return c;
}

}  // namespace moe
