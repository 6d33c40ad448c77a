// Synthetic GGUF MoE models: llama.cpp's metadata keys and tensor names/shapes
// (shared/GGUF-NOTES.md "MoE metadata", "MoE tensors"), random weights from a seeded
// generator, vocabularies from synth/synthetic_vocab.h.
//
// Determinism: every value comes from integer arithmetic on splitmix64 output plus
// one correctly rounded float operation (IEEE), never from <random> distributions or
// libm functions (both may differ between platforms), so a spec gives the same bytes
// everywhere. Each row of each tensor has its own stream, keyed by (seed, tensor name,
// row): tensors can be generated in any order, rows in parallel, and full-size
// presets stream through GgufWriter::addTensorGenerated one tensor at a time.
//
// Scales keep activations O(1) through any depth: matrices ~ N(0, 1/fan_in) (so
// W x has unit variance for a unit-RMS x); the projections that write into the
// residual stream (attn_output, ffn_down*) are further scaled by 1/sqrt(2 n_layer) so
// the stream stays O(1) and the token embedding (~N(0, 1)) keeps its say; norm weights
// lie in [0.9, 1.1]; routers get 2/sqrt(n_embd) so router logits have std ~2 and
// top-k routing differs from token to token instead of being near uniform.
#include "synth/synthetic_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "models/vocab.h"
#include "quant/quant.h"
#include "synth/synthetic_fill.h"
#include "synth/synthetic_vocab.h"

namespace moe::synth {

namespace {

using detail::Init;
using detail::InitSpec;
using detail::makeFill;
using gguf::TensorType;

// ---- deterministic random values -------------------------------------------------

// splitmix64 (Steele, Lea, Flood 2014): a 64-bit counter through a bijective mixer.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct SplitMix {
  uint64_t state;
  uint64_t next() { return mix64(state += 0x9E3779B97F4A7C15ULL); }
};

// FNV-1a over the tensor name: gives each tensor its own stream.
uint64_t nameHash(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ULL;
  return h;
}

// Normal-like: the sum of four uniform 16-bit integers (Irwin-Hall, variance
// 4 x 65536^2 / 12), centred: an exact integer, then one float multiply.
// NearOne: 1 + k / 10240 for k uniform in [-1024, 1024], one float division.
void fillRow(float* dst, int64_t n, uint64_t row_key, const InitSpec& init) {
  SplitMix rng{row_key};
  if (init.kind == Init::NearOne || init.kind == Init::NearScaled) {
    const float scale = init.kind == Init::NearScaled ? float(init.sigma) : 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      const int k = int(rng.next() % 2049) - 1024;
      dst[i] = float(10240 + k) / 10240.0f * scale;
    }
    return;
  }
  if (init.kind == Init::Decay) {
    for (int64_t i = 0; i < n; ++i) dst[i] = -float(128 + int(rng.next() % 2049)) / 1024.0f;
    return;
  }
  const float scale = float(init.sigma * std::sqrt(3.0) / 65536.0);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = rng.next();
    const int32_t sum = int32_t(r & 0xFFFF) + int32_t((r >> 16) & 0xFFFF) + int32_t((r >> 32) & 0xFFFF) +
                        int32_t(r >> 48) - 131070;
    dst[i] = float(sum) * scale;
  }
}

}  // namespace

// The fill function of one tensor: row r (of ne0 elements) from key (seed, name, r),
// encoded with quantizeRow. Large tensors are generated on several threads; the
// result does not depend on the thread count.
std::function<void(std::span<uint8_t>)> detail::makeFill(uint64_t seed, const std::string& name,
                                                         TensorType type, uint64_t ne0, uint64_t n_rows,
                                                         InitSpec init) {
  const uint64_t key = mix64(seed) ^ nameHash(name);
  return [=](std::span<uint8_t> dst) {
    const uint64_t row_bytes = gguf::rowBytes(type, ne0);
    auto work = [&](uint64_t begin, uint64_t end) {
      std::vector<float> row(ne0);
      for (uint64_t r = begin; r < end; ++r) {
        fillRow(row.data(), int64_t(ne0), mix64(key + r), init);
        quant::quantizeRow(type, row.data(), dst.data() + r * row_bytes, int64_t(ne0));
      }
    };
    const uint64_t elems = ne0 * n_rows;
    const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    const uint64_t n_threads = elems < (uint64_t(1) << 22) ? 1 : std::min<uint64_t>(hw, n_rows);
    if (n_threads <= 1) return work(0, n_rows);
    std::vector<std::thread> threads;
    const uint64_t per = (n_rows + n_threads - 1) / n_threads;
    for (uint64_t t = 0; t < n_threads; ++t)
      threads.emplace_back(work, std::min(n_rows, t * per), std::min(n_rows, (t + 1) * per));
    for (auto& th : threads) th.join();
  };
}

// dims ne0 first; every row has ne0 elements.
void detail::TensorWriter::tensor(const std::string& name, std::vector<uint64_t> dims, TensorType type,
                                  InitSpec init) {
  uint64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= dims[i];
  auto fill = makeFill(s.seed, name, type, dims[0], rows, init);
  w.addTensorGenerated(name, std::move(dims), type, std::move(fill));
}

void detail::TensorWriter::matrix(const std::string& name, std::vector<uint64_t> dims, TensorType type,
                                  double gain) {
  const double sigma = gain / std::sqrt(double(dims[0]));
  tensor(name, std::move(dims), type, {Init::Normal, sigma});
}

// Norm weights are 1-D and F32 in llama.cpp files.
void detail::TensorWriter::norm(const std::string& name, uint64_t n) {
  tensor(name, {n}, TensorType::F32, {Init::NearOne, 0.0});
}

namespace {

// deepseek2's per-head W_UK (qk_nope x kv_lora) and W_UV (v x kv_lora) come from one
// stream, that of the older files' attn_kv_b (rows: per head qk_nope rows of W_UK,
// then v rows of W_UV), so a file in either layout holds the same matrices:
// attn_kv_b is that matrix; attn_k_b is W_UK transposed per head ({qk_nope, kv_lora,
// n_head}) and attn_v_b W_UV per head ({kv_lora, v, n_head}).
enum class MlaPart { KvB, KB, VB };

std::function<void(std::span<uint8_t>)> makeMlaFill(uint64_t seed, int layer, MlaPart part, TensorType type,
                                                    uint64_t heads, uint64_t nope, uint64_t v,
                                                    uint64_t lora) {
  const uint64_t key = mix64(seed) ^ nameHash("blk." + std::to_string(layer) + ".attn_kv_b.weight");
  const InitSpec init{Init::Normal, 1.0 / std::sqrt(double(lora))};
  return [=](std::span<uint8_t> dst) {
    std::vector<float> kv_b(heads * (nope + v) * lora);
    for (uint64_t r = 0; r < heads * (nope + v); ++r)
      fillRow(kv_b.data() + r * lora, int64_t(lora), mix64(key + r), init);
    std::vector<float> out;
    uint64_t ne0 = lora;
    if (part == MlaPart::KvB) {
      out = std::move(kv_b);
    } else if (part == MlaPart::KB) {
      ne0 = nope;
      out.resize(heads * lora * nope);
      for (uint64_t h = 0; h < heads; ++h)
        for (uint64_t r = 0; r < lora; ++r)
          for (uint64_t d = 0; d < nope; ++d)
            out[(h * lora + r) * nope + d] = kv_b[(h * (nope + v) + d) * lora + r];
    } else {
      out.resize(heads * v * lora);
      for (uint64_t h = 0; h < heads; ++h)
        std::copy_n(kv_b.data() + (h * (nope + v) + nope) * lora, v * lora, out.data() + h * v * lora);
    }
    const uint64_t row_bytes = gguf::rowBytes(type, ne0);
    for (uint64_t r = 0; r < out.size() / ne0; ++r)
      quant::quantizeRow(type, out.data() + r * ne0, dst.data() + r * row_bytes, int64_t(ne0));
  };
}

// ---- tensors ---------------------------------------------------------------------

class ModelBuilder : detail::TensorWriter {
 public:
  ModelBuilder(const SyntheticSpec& spec, gguf::GgufWriter& writer) : TensorWriter{spec, writer} {}

  void build(uint64_t n_vocab) {
    const uint64_t d = uint64_t(s.n_embd);
    // Embeddings ~N(0, 1). Tied output: ~N(0, 1/n_embd) instead, as output.weight would
    // be; with unit-size embeddings the logit of the input token itself (|e|^2 = n_embd)
    // would dominate and every model would just echo its input. The first RMS norm
    // makes the layers blind to that scale.
    const double embd_sigma = s.tied_output ? 1.0 / std::sqrt(double(d)) : 1.0;
    tensor("token_embd.weight", {d, n_vocab}, s.weight_type,
           {Init::Normal, embd_sigma});  // [n_vocab][n_embd]
    if (s.arch == "gemma4") detail::addGemma4Globals(s, w);
    for (int l = 0; l < s.n_layer + s.n_nextn; ++l) {
      if (s.arch == "gemma4")
        detail::addGemma4Layer(s, w, l);
      else
        layer(l);
    }
    norm("output_norm.weight", d);
    if (!s.tied_output) matrix("output.weight", {d, n_vocab}, s.weight_type);  // [n_vocab][n_embd]
  }

 private:
  // Projections into the residual stream: 1/sqrt(2 n_layer) keeps its sum O(1).
  double residualGain() const { return 1.0 / std::sqrt(2.0 * s.n_layer); }

  void layer(int l) {
    attention(l);
    // glm4moe and gpt-oss name the FFN's input norm after its place (HF post_attention_layernorm).
    const bool post_attention_name = s.arch == "glm4moe" || s.arch == "gpt-oss" || s.arch == "qwen35moe";
    norm(blk(l, post_attention_name ? "post_attention_norm.weight" : "ffn_norm.weight"), uint64_t(s.n_embd));
    if (l < s.n_leading_dense)
      denseFfn(l);
    else
      moeFfn(l);
    if (l >= s.n_layer) nextn(l);
  }

  // A glm4moe next-token-prediction layer's own tensors (GLM-4.5's layout; engines
  // that do not speculate load them and skip the layer).
  void nextn(int l) {
    const uint64_t d = uint64_t(s.n_embd);
    matrix(blk(l, "nextn.eh_proj.weight"), {2 * d, d}, s.weight_type);
    norm(blk(l, "nextn.enorm.weight"), d);
    norm(blk(l, "nextn.hnorm.weight"), d);
    norm(blk(l, "nextn.shared_head_norm.weight"), d);
  }

  // deepseek2: the query (direct or through q_lora), the latent projection [c, k_pe]
  // and its norm, W_UK / W_UV in the layout the spec asks for (F16: per element, so
  // both layouts hold the same values), the output projection.
  void latentAttention(int l) {
    const uint64_t d = uint64_t(s.n_embd), H = uint64_t(s.n_head), R = uint64_t(s.n_rot);
    const uint64_t C = uint64_t(s.kv_lora), V = uint64_t(s.v_head_dim), N = uint64_t(s.head_dim) - R;
    const TensorType wt = s.weight_type;
    norm(blk(l, "attn_norm.weight"), d);
    if (s.q_lora > 0) {
      const uint64_t ql = uint64_t(s.q_lora);
      matrix(blk(l, "attn_q_a.weight"), {d, ql}, wt);
      norm(blk(l, "attn_q_a_norm.weight"), ql);
      matrix(blk(l, "attn_q_b.weight"), {ql, H * (N + R)}, wt);
    } else {
      matrix(blk(l, "attn_q.weight"), {d, H * (N + R)}, wt);
    }
    matrix(blk(l, "attn_kv_a_mqa.weight"), {d, C + R}, wt);
    norm(blk(l, "attn_kv_a_norm.weight"), C);
    const TensorType f16 = TensorType::F16;
    if (s.mla_split) {
      w.addTensorGenerated(blk(l, "attn_k_b.weight"), {N, C, H}, f16,
                           makeMlaFill(s.seed, l, MlaPart::KB, f16, H, N, V, C));
      w.addTensorGenerated(blk(l, "attn_v_b.weight"), {C, V, H}, f16,
                           makeMlaFill(s.seed, l, MlaPart::VB, f16, H, N, V, C));
    } else {
      w.addTensorGenerated(blk(l, "attn_kv_b.weight"), {C, H * (N + V)}, f16,
                           makeMlaFill(s.seed, l, MlaPart::KvB, f16, H, N, V, C));
    }
    matrix(blk(l, "attn_output.weight"), {H * V, d}, wt, residualGain());
  }

  void attention(int l) {
    if (s.arch == "deepseek2") return latentAttention(l);
    if (s.arch == "qwen35moe") return detail::addQwen35Attention(s, w, l);
    const uint64_t d = uint64_t(s.n_embd), hd = uint64_t(s.head_dim);
    const uint64_t q_w = uint64_t(s.n_head) * hd, kv_w = uint64_t(s.n_head_kv) * hd;
    const TensorType wt = s.weight_type;
    norm(blk(l, "attn_norm.weight"), d);
    matrix(blk(l, "attn_q.weight"), {d, q_w}, wt);                       // [n_head*head_dim][n_embd]
    matrix(blk(l, "attn_k.weight"), {d, kv_w}, wt);                      // [n_head_kv*head_dim][n_embd]
    matrix(blk(l, "attn_v.weight"), {d, kv_w}, wt);                      // [n_head_kv*head_dim][n_embd]
    matrix(blk(l, "attn_output.weight"), {q_w, d}, wt, residualGain());  // [n_embd][n_head*head_dim]
    if (s.arch == "gpt-oss") {  // biases on every projection, a sink logit per head
      const InitSpec small{Init::Normal, 0.1};
      tensor(blk(l, "attn_output.bias"), {d}, TensorType::F32, small);
      tensor(blk(l, "attn_sinks.weight"), {uint64_t(s.n_head)}, TensorType::F32, {Init::Normal, 1.0});
    }
    if (s.qkv_bias) {  // Qwen2 family; 1-D, F32
      const InitSpec small{Init::Normal, 0.1};
      tensor(blk(l, "attn_q.bias"), {q_w}, TensorType::F32, small);
      tensor(blk(l, "attn_k.bias"), {kv_w}, TensorType::F32, small);
      tensor(blk(l, "attn_v.bias"), {kv_w}, TensorType::F32, small);
    }
    if (s.arch == "qwen3moe") {  // per head: one {head_dim} weight shared by all heads
      norm(blk(l, "attn_q_norm.weight"), hd);
      norm(blk(l, "attn_k_norm.weight"), hd);
    } else if (s.arch == "olmoe" || s.arch == "minimax-m2") {  // over the whole q / k projection
      norm(blk(l, "attn_q_norm.weight"), q_w);
      norm(blk(l, "attn_k_norm.weight"), kv_w);
    }
  }

  // deepseek leading dense layers: one SwiGLU of width n_ff.
  void denseFfn(int l) {
    const uint64_t d = uint64_t(s.n_embd), ff = uint64_t(s.n_ff);
    matrix(blk(l, "ffn_gate.weight"), {d, ff}, s.weight_type);                  // [n_ff][n_embd]
    matrix(blk(l, "ffn_up.weight"), {d, ff}, s.weight_type);                    // [n_ff][n_embd]
    matrix(blk(l, "ffn_down.weight"), {ff, d}, s.weight_type, residualGain());  // [n_embd][n_ff]
  }

  void moeFfn(int l) {
    const uint64_t d = uint64_t(s.n_embd), ff = uint64_t(s.n_ff_exp), ne = uint64_t(s.n_expert);
    const TensorType et = s.expert_type;
    // Router F32: llama.cpp's converter writes ffn_gate_inp as F32 and its quantizer
    // leaves it alone (it is tiny, and routing is sensitive to its precision).
    matrix(blk(l, "ffn_gate_inp.weight"), {d, ne}, TensorType::F32, 2.0);  // [n_expert][n_embd]
    matrix(blk(l, "ffn_gate_exps.weight"), {d, ff, ne}, et);               // [n_expert][n_ff_exp][n_embd]
    matrix(blk(l, "ffn_up_exps.weight"), {d, ff, ne}, et);                 // [n_expert][n_ff_exp][n_embd]
    matrix(blk(l, "ffn_down_exps.weight"), {ff, d, ne}, s.expertDownType(),
           residualGain());     // [n_expert][n_embd][n_ff_exp]
    if (s.arch == "gpt-oss") {  // biases of the router and of every expert's projections, F32
      const InitSpec small{Init::Normal, 0.1};
      tensor(blk(l, "ffn_gate_inp.bias"), {ne}, TensorType::F32, {Init::Normal, 0.5});
      tensor(blk(l, "ffn_gate_exps.bias"), {ff, ne}, TensorType::F32, small);
      tensor(blk(l, "ffn_up_exps.bias"), {ff, ne}, TensorType::F32, small);
      tensor(blk(l, "ffn_down_exps.bias"), {d, ne}, TensorType::F32, small);
    }
    if (s.arch == "glm4moe" || s.arch == "minimax-m2" ||
        s.selection_bias)  // the selection bias of the router, {n_expert}, F32
      tensor(blk(l, "exp_probs_b.bias"), {ne}, TensorType::F32, {Init::Normal, 0.5});
    if (s.n_expert_shared <= 0) return;
    const uint64_t sh = uint64_t(s.n_ff_shexp);
    if (s.arch == "qwen2moe" || s.arch == "qwen35moe")  // the shared expert's sigmoid gate, {n_embd}, F32
      tensor(blk(l, "ffn_gate_inp_shexp.weight"), {d}, TensorType::F32,
             {Init::Normal, 1.0 / std::sqrt(double(d))});
    matrix(blk(l, "ffn_gate_shexp.weight"), {d, sh}, s.weight_type);                  // [n_ff_shexp][n_embd]
    matrix(blk(l, "ffn_up_shexp.weight"), {d, sh}, s.weight_type);                    // [n_ff_shexp][n_embd]
    matrix(blk(l, "ffn_down_shexp.weight"), {sh, d}, s.weight_type, residualGain());  // [n_embd][n_ff_shexp]
  }
};

// ---- metadata --------------------------------------------------------------------

// Layer-norm epsilon of each family's published configs (Mixtral, OLMoE 1e-5;
// Qwen, DeepSeek 1e-6).
float rmsEps(const std::string& arch) { return (arch == "llama" || arch == "olmoe") ? 1e-5f : 1e-6f; }

// deepseek2's attention keys as llama.cpp's MLA converter writes them (the
// per-head widths as *_mla, one latent "KV head" as key/value_length), or as older
// files carry them (per-head widths as key/value_length, n_head KV heads).
void writeLatentAttentionKeys(const SyntheticSpec& s, gguf::GgufWriter& w) {
  const std::string a = s.arch + ".";
  auto u32 = [&](const std::string& k, int v) { w.setUint32(a + k, uint32_t(v)); };
  if (s.q_lora > 0) u32("attention.q_lora_rank", s.q_lora);
  u32("attention.kv_lora_rank", s.kv_lora);
  if (s.mla_split) {
    u32("attention.key_length", s.kv_lora + s.n_rot);
    u32("attention.value_length", s.kv_lora);
    u32("attention.key_length_mla", s.head_dim);
    u32("attention.value_length_mla", s.v_head_dim);
  } else {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.v_head_dim);
  }
}

// gemma4's keys: the common ones, then its per-layer and sliding-layer keys.
void writeGemma4Hyperparameters(const SyntheticSpec& s, gguf::GgufWriter& w) {
  const std::string a = s.arch + ".";
  auto u32 = [&](const std::string& k, int v) { w.setUint32(a + k, uint32_t(v)); };
  u32("block_count", s.n_layer);
  u32("context_length", s.n_ctx);
  u32("embedding_length", s.n_embd);
  u32("feed_forward_length", s.n_ff);
  u32("attention.head_count", s.n_head);
  w.setFloat32(a + "attention.layer_norm_rms_epsilon", 1e-6f);  // Gemma 4's rms_norm_eps
  w.setFloat32(a + "rope.freq_base", s.rope_freq_base);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_expert_used);
  u32("expert_feed_forward_length", s.n_ff_exp);
  detail::writeGemma4Keys(s, w);
}

void writeHyperparameters(const SyntheticSpec& s, gguf::GgufWriter& w) {
  if (s.arch == "gemma4") return writeGemma4Hyperparameters(s, w);
  const std::string a = s.arch + ".";
  auto u32 = [&](const std::string& k, int v) { w.setUint32(a + k, uint32_t(v)); };
  u32("block_count", s.n_layer + s.n_nextn);
  u32("context_length", s.n_ctx);
  u32("embedding_length", s.n_embd);
  // Dense FFN width; MoE-only models carry their configs' intermediate_size here.
  u32("feed_forward_length", s.n_ff > 0 ? s.n_ff : s.n_ff_exp);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.arch == "deepseek2" && s.mla_split ? 1 : s.n_head_kv);
  // llama.cpp writes key/value_length for qwen3moe; elsewhere head_dim = n_embd / n_head
  // and real files omit them, so readers must derive it.
  if (s.arch == "deepseek2") {
    writeLatentAttentionKeys(s, w);
  } else if (s.arch == "qwen3moe" || s.arch == "qwen35moe" || s.arch == "minimax-m2" ||
             s.head_dim * s.n_head != s.n_embd) {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.head_dim);
  }
  w.setFloat32(a + "attention.layer_norm_rms_epsilon", rmsEps(s.arch));
  w.setFloat32(a + "rope.freq_base", s.rope_freq_base);
  u32("rope.dimension_count", s.n_rot > 0 ? s.n_rot : s.head_dim);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_expert_used);
  u32("expert_feed_forward_length", s.n_ff_exp);
  if (s.arch == "qwen2moe" || s.arch == "qwen35moe") u32("expert_shared_feed_forward_length", s.n_ff_shexp);
  if (s.arch == "qwen35moe") detail::writeQwen35Keys(s, w);
  if (s.arch == "deepseek" || s.arch == "deepseek2" || s.arch == "glm4moe") {
    u32("expert_shared_count", s.n_expert_shared);
    u32("leading_dense_block_count", s.n_leading_dense);
    w.setFloat32(a + "expert_weights_scale", s.expert_weights_scale);
  }
  if (s.arch == "gpt-oss") u32("attention.sliding_window", s.sliding_window);
  if (s.yarn_factor > 1.0f) {
    w.setString(a + "rope.scaling.type", "yarn");
    w.setFloat32(a + "rope.scaling.factor", s.yarn_factor);
    u32("rope.scaling.original_context_length", s.yarn_orig_ctx);
    if (s.yarn_log_mul > 0) w.setFloat32(a + "rope.scaling.yarn_log_multiplier", s.yarn_log_mul);
  }
  if (s.gating_func > 0) u32("expert_gating_func", s.gating_func);
  if (s.arch == "deepseek2") w.setBool(a + "expert_weights_norm", s.weights_norm);
  if (s.n_expert_groups > 0) {
    u32("expert_group_count", s.n_expert_groups);
    u32("expert_group_used_count", s.n_group_used);
  }
  // As llama.cpp's converter writes MiniMax-M2 (its base class turns scoring_func
  // "sigmoid" into the gating key; no weights norm or scale keys).
  if (s.arch == "minimax-m2") u32("expert_gating_func", 2);
  if (s.arch == "glm4moe") {  // as GLM-4.5's files: sigmoid gating, renormalised top-k
    u32("expert_gating_func", 2);
    w.setBool(a + "expert_weights_norm", true);
    u32("nextn_predict_layers", s.n_nextn);
  }
}

// The builders return exactly the target size: past the tokens learned from their
// small corpus they fill with UNUSED (type 5) placeholders, which no tokenizer ever
// produces. So presets get the published n_vocab (embedding and output sizes, up to
// 151936) without pretending to be a real vocabulary.
VocabData makeVocab(const SyntheticSpec& s) {
  // gemma4: Gemma 4's own vocabulary kind (tokenizer.ggml.model "gemma4"), as real files.
  if (s.arch == "gemma4") return buildGemma4Vocab(s.n_vocab_target);
  return s.vocab == VocabKind::SentencePiece ? buildSpmVocab(s.n_vocab_target)
                                             : buildGpt2Vocab(s.n_vocab_target, s.bpe_pre);
}

// ---- validation ------------------------------------------------------------------

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("synthetic spec: " + what);
}

void checkRows(TensorType t, int ne0, const char* what) {
  try {
    gguf::rowBytes(t, uint64_t(ne0));
  } catch (const gguf::GgufError&) {
    throw std::invalid_argument(std::string("synthetic spec: ") + what + " width " + std::to_string(ne0) +
                                " is not a whole number of " + gguf::tensorTypeName(t) + " blocks");
  }
}

void validate(const SyntheticSpec& s) {
  const auto archs = supportedArchs();
  require(std::find(archs.begin(), archs.end(), s.arch) != archs.end(),
          "unsupported architecture '" + s.arch + "'");
  require(s.n_layer > 0 && s.n_embd > 0 && s.n_head > 0 && s.n_head_kv > 0 && s.head_dim > 0,
          "sizes must be positive");
  require(s.n_head % s.n_head_kv == 0, "n_head must be a multiple of n_head_kv");
  require(s.n_expert > 0 && s.n_expert_used > 0 && s.n_expert_used <= s.n_expert,
          "need 0 < n_expert_used <= n_expert");
  require(s.n_ff_exp > 0, "n_ff_exp must be positive");
  const bool deepseek_like = s.arch == "deepseek" || s.arch == "deepseek2" || s.arch == "glm4moe";
  require(s.n_leading_dense == 0 || deepseek_like,
          "leading dense layers are deepseek/deepseek2/glm4moe only");
  if (s.arch == "deepseek2")
    require(s.kv_lora > 0 && s.v_head_dim > 0 && s.n_rot > 0 && s.n_rot < s.head_dim,
            "deepseek2 needs kv_lora, v_head_dim and 0 < n_rot < head_dim");
  require(s.n_nextn == 0 || s.arch == "glm4moe" || s.arch == "qwen35moe",
          "next-token-prediction layers are glm4moe / qwen35moe only");
  if (s.arch == "qwen35moe") {
    require(
        s.ssm_conv_kernel > 0 && s.ssm_state > 0 && s.ssm_k_heads > 0 && s.ssm_v_heads > 0 &&
            s.ssm_v_heads % s.ssm_k_heads == 0 && s.full_attn_interval > 0,
        "qwen35moe needs ssm_conv_kernel, ssm_state, ssm_k_heads dividing ssm_v_heads, full_attn_interval");
    require(s.n_expert_shared == 1 && s.n_ff_shexp > 0, "qwen35moe has one gated shared expert");
    checkRows(s.weight_type, s.ssm_v_heads * s.ssm_state, "delta-net value");
  }
  if (s.arch == "gemma4") {
    require(s.swa_period > 0 && s.head_dim_full > 0 && s.head_dim_full % 2 == 0 && s.n_head_kv_full > 0 &&
                s.n_head % s.n_head_kv_full == 0 && s.n_ff > 0 && s.sliding_window > 0,
            "gemma4 needs swa_period, an even head_dim_full, n_head_kv_full dividing n_head, n_ff, "
            "sliding_window");
    require(s.n_kv_shared >= 0 && s.n_kv_shared < s.n_layer, "gemma4: n_kv_shared must be below n_layer");
    require(s.rope_partial_full > 0 && s.rope_partial_full <= 1, "gemma4: rope_partial_full in (0, 1]");
    checkRows(s.weight_type, s.n_head * s.head_dim_full, "global attention");
    checkRows(s.weight_type, s.n_ff, "n_ff");
  }
  require(s.n_rot >= 0 && s.n_rot <= s.head_dim && s.n_rot % 2 == 0, "n_rot must be even and <= head_dim");
  require(s.n_leading_dense < s.n_layer, "at least one MoE layer");
  require(s.n_leading_dense == 0 || s.n_ff > 0, "dense layers need n_ff");
  require(s.n_vocab_target > 0, "n_vocab_target must be positive");
  if (s.n_expert_shared > 0) {
    require(deepseek_like || s.arch == "qwen2moe" || s.arch == "qwen35moe",
            "shared experts: deepseek/deepseek2/qwen2moe/qwen35moe/glm4moe only");
    require(s.n_ff_shexp > 0, "shared experts need n_ff_shexp");
    if (deepseek_like)  // one SwiGLU of n_ff_exp x expert_shared_count
      require(s.n_ff_shexp == s.n_ff_exp * s.n_expert_shared, "deepseek n_ff_shexp != n_shared x n_ff_exp");
  }
  const TensorType wt = s.weight_type, et = s.expert_type;
  checkRows(wt, s.n_embd, "n_embd");
  checkRows(et, s.n_embd, "n_embd");
  if (s.arch == "deepseek2") {
    checkRows(wt, s.n_head * s.v_head_dim, "attention output");
    if (s.q_lora > 0) checkRows(wt, s.q_lora, "q_lora");
  } else {
    checkRows(wt, s.n_head * s.head_dim, "attention");
  }
  checkRows(s.expertDownType(), s.n_ff_exp, "n_ff_exp");
  if (s.n_leading_dense > 0) checkRows(wt, s.n_ff, "n_ff");
  if (s.n_expert_shared > 0) checkRows(wt, s.n_ff_shexp, "n_ff_shexp");
}

}  // namespace

gguf::TensorType parseWeightType(const std::string& name) {
  std::string up = name;
  for (char& c : up) c = char(std::toupper(static_cast<unsigned char>(c)));
  std::string known;
  for (TensorType t : quant::kComputeTypes) {
    if (up == gguf::tensorTypeName(t)) return t;
    known += std::string(known.empty() ? "" : ", ") + gguf::tensorTypeName(t);
  }
  throw std::invalid_argument("unknown weight type '" + name + "' (" + known + ")");
}

SyntheticSpec fitToBlocks(SyntheticSpec s) {
  auto block = [](TensorType t) {
    const auto traits = gguf::typeTraits(uint32_t(t));
    return traits ? int(traits->block_elems) : 1;
  };
  const int wb = block(s.weight_type), eb = std::lcm(block(s.expert_type), block(s.expertDownType()));
  const int both = std::lcm(wb, eb);
  auto up = [](int v, int b) { return v <= 0 ? v : (v + b - 1) / b * b; };
  s.n_embd = up(s.n_embd, both);  // ne0 of token_embd, attn_q/k/v, gate/up (experts and shared)
  s.n_ff_exp = up(s.n_ff_exp, eb);
  s.n_ff = up(s.n_ff, wb);
  if ((s.arch == "deepseek" || s.arch == "deepseek2" || s.arch == "glm4moe") && s.n_expert_shared > 0)
    s.n_ff_shexp = s.n_ff_exp * s.n_expert_shared;
  else
    s.n_ff_shexp = up(s.n_ff_shexp, wb);
  if (s.arch == "deepseek2") {  // attn_output's ne0 is n_head x v_head_dim; attn_q_b's is q_lora
    while ((s.n_head * s.v_head_dim) % wb != 0) ++s.v_head_dim;
    s.q_lora = up(s.q_lora, wb);
  } else {
    while ((s.n_head * s.head_dim) % wb != 0 || s.head_dim % 2 != 0) ++s.head_dim;  // attn_output's ne0
  }
  // qwen35moe: ssm_out's ne0 is n_v_heads x state (k heads divide v heads).
  if (s.arch == "qwen35moe" && s.ssm_k_heads > 0)
    while ((s.ssm_v_heads * s.ssm_state) % wb != 0) s.ssm_v_heads += s.ssm_k_heads;
  // gemma4: the global layers' attn_output ne0 is n_head x head_dim_full.
  if (s.arch == "gemma4" && s.head_dim_full > 0)
    while ((s.n_head * s.head_dim_full) % wb != 0 || s.head_dim_full % 2 != 0) ++s.head_dim_full;
  return s;
}

gguf::GgufWriter buildModel(const SyntheticSpec& spec) {
  validate(spec);
  gguf::GgufWriter w;
  w.setString("general.architecture", spec.arch);
  w.setString("general.name", spec.name);
  // Lets every front end say "random weights" whatever the file is called.
  w.setBool("moechat.synthetic", true);
  if (spec.realistic_routing) w.setString(kRoutingKey, kRealisticRouting);
  w.setAlignment(uint32_t(gguf::kDefaultAlignment));
  writeHyperparameters(spec, w);
  const VocabData vocab = makeVocab(spec);
  vocab.writeTo(w);
  ModelBuilder(spec, w).build(vocab.tokens.size());
  return w;
}

void writeModel(const SyntheticSpec& spec, const std::string& path) { buildModel(spec).writeFile(path); }

void writeModelLayout(const SyntheticSpec& spec, const std::string& path) {
  buildModel(spec).writeLayoutOnly(path);
}

std::vector<uint8_t> demoModelBytes() { return buildModel(demoSpec()).toBytes(); }

}  // namespace moe::synth
