// gemma4's tensors and keys for the synthetic generator: names, shapes and keys as
// llama.cpp's converter writes Gemma 4 MoE files (tensor names from gguf-py's
// constants.py, shapes from src/models/gemma4.cpp load_arch_tensors, keys from
// conversion/gemma.py Gemma4Model.set_gguf_parameters / generate_extra_tensors).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "synth/synthetic_fill.h"

namespace moe::synth::detail {
namespace {

using gguf::TensorType;

// Gemma 4's norms are stored as the weights they multiply by (no +1 in the converter):
// TensorWriter::norm's weights near one.
struct Gemma4Writer : TensorWriter {
  // q and k norms of head size hd weighted ~hd^-1/4 each: Gemma 4 does not scale q.k, and
  // with unit weights q.k of RMS-normed heads would spread as sqrt(hd) (a softmax so
  // peaked that float rounding moves it); this gives the spread of a 1/sqrt(hd)-scaled
  // product, the part the trained norms play.
  void qkNorm(const std::string& name, uint64_t hd) {
    tensor(name, {hd}, TensorType::F32, {Init::NearScaled, std::pow(double(hd), -0.25)});
  }
  double residualGain() const { return 1.0 / std::sqrt(2.0 * s.n_layer); }
  int firstShared() const { return s.n_layer - s.n_kv_shared; }
};

}  // namespace

bool gemma4Global(const SyntheticSpec& s, int l) {
  return s.swa_period > 0 && l % s.swa_period == s.swa_period - 1;
}

void addGemma4Layer(const SyntheticSpec& s, gguf::GgufWriter& w, int l) {
  Gemma4Writer wr{{s, w}};
  const bool global = gemma4Global(s, l);
  const uint64_t d = uint64_t(s.n_embd), hd = uint64_t(global ? s.head_dim_full : s.head_dim);
  const uint64_t kv = uint64_t(global ? s.n_head_kv_full : s.n_head_kv);
  const uint64_t q_w = uint64_t(s.n_head) * hd, kv_w = kv * hd, ff = uint64_t(s.n_ff);
  const uint64_t fe = uint64_t(s.n_ff_exp), ne = uint64_t(s.n_expert);
  const TensorType wt = s.weight_type, et = s.expert_type;
  const bool own_kv = l < wr.firstShared();
  wr.norm(wr.blk(l, "attn_norm.weight"), d);
  wr.matrix(wr.blk(l, "attn_q.weight"), {d, q_w}, wt);  // [n_head*head_dim][n_embd]
  wr.qkNorm(wr.blk(l, "attn_q_norm.weight"), hd);
  if (own_kv) {
    wr.matrix(wr.blk(l, "attn_k.weight"), {d, kv_w}, wt);  // [n_head_kv*head_dim][n_embd]
    if (!(global && s.k_eq_v_full)) wr.matrix(wr.blk(l, "attn_v.weight"), {d, kv_w}, wt);
    wr.qkNorm(wr.blk(l, "attn_k_norm.weight"), hd);
  }
  wr.matrix(wr.blk(l, "attn_output.weight"), {q_w, d}, wt, wr.residualGain());  // [n_embd][n_head*head_dim]
  wr.norm(wr.blk(l, "post_attention_norm.weight"), d);
  wr.tensor(wr.blk(l, "layer_output_scale.weight"), {1}, TensorType::F32, {Init::NearOne, 0.0});
  // The dense MLP.
  wr.norm(wr.blk(l, "ffn_norm.weight"), d);
  wr.matrix(wr.blk(l, "ffn_gate.weight"), {d, ff}, wt);                     // [n_ff][n_embd]
  wr.matrix(wr.blk(l, "ffn_up.weight"), {d, ff}, wt);                       // [n_ff][n_embd]
  wr.matrix(wr.blk(l, "ffn_down.weight"), {ff, d}, wt, wr.residualGain());  // [n_embd][n_ff]
  wr.norm(wr.blk(l, "post_ffw_norm_1.weight"), d);
  wr.norm(wr.blk(l, "post_ffw_norm.weight"), d);
  // The experts. The router reads rms(x) x scale / sqrt(n_embd) (elements ~1/sqrt(n_embd)):
  // a gain of 2 sqrt(n_embd) gives logits of std ~2, as the other architectures' routers.
  wr.matrix(wr.blk(l, "ffn_gate_inp.weight"), {d, ne}, TensorType::F32, 2.0 * std::sqrt(double(d)));
  wr.tensor(wr.blk(l, "ffn_gate_inp.scale"), {d}, TensorType::F32, {Init::NearOne, 0.0});
  wr.norm(wr.blk(l, "pre_ffw_norm_2.weight"), d);
  wr.matrix(wr.blk(l, "ffn_gate_up_exps.weight"), {d, 2 * fe, ne}, et);  // [n_expert][gate; up][n_embd]
  wr.matrix(wr.blk(l, "ffn_down_exps.weight"), {fe, d, ne}, s.expertDownType(),
            wr.residualGain());  // [n_expert][n_embd][n_ff_exp]
  wr.tensor(wr.blk(l, "ffn_down_exps.scale"), {ne}, TensorType::F32, {Init::NearOne, 0.0});
  wr.norm(wr.blk(l, "post_ffw_norm_2.weight"), d);
}

// rope_freqs: 1 for the first rope_partial_full x head_dim_full / 2 pairs, 1e30 (still)
// for the rest (convert Gemma4Model.generate_extra_tensors).
void addGemma4Globals(const SyntheticSpec& s, gguf::GgufWriter& w) {
  const int pairs = s.head_dim_full / 2;
  const int rotated = int(float(s.head_dim_full) * s.rope_partial_full / 2.0f);
  w.addTensorGenerated("rope_freqs.weight", {uint64_t(pairs)}, TensorType::F32,
                       [pairs, rotated](std::span<uint8_t> dst) {
                         for (int i = 0; i < pairs; ++i) {
                           const float v = i < rotated ? 1.0f : 1e30f;
                           std::memcpy(dst.data() + size_t(i) * 4, &v, 4);
                         }
                       });
}

void writeGemma4Keys(const SyntheticSpec& s, gguf::GgufWriter& w) {
  const std::string a = s.arch + ".";
  auto u32 = [&](const std::string& k, int v) { w.setUint32(a + k, uint32_t(v)); };
  std::vector<gguf::Value> pattern, kv_heads;
  for (int l = 0; l < s.n_layer; ++l) {
    const bool global = gemma4Global(s, l);
    pattern.push_back(gguf::Value::ofBool(!global));
    kv_heads.push_back(
        gguf::Value::ofUint(gguf::ValueType::U32, uint64_t(global ? s.n_head_kv_full : s.n_head_kv)));
  }
  w.setValue(a + "attention.sliding_window_pattern", gguf::Value::ofArray(gguf::ValueType::Bool, pattern));
  w.setValue(a + "attention.head_count_kv", gguf::Value::ofArray(gguf::ValueType::U32, kv_heads));
  u32("attention.key_length", s.head_dim_full);
  u32("attention.value_length", s.head_dim_full);
  u32("attention.key_length_swa", s.head_dim);
  u32("attention.value_length_swa", s.head_dim);
  u32("rope.dimension_count", s.head_dim_full);  // "proportional": the factors still the rest
  u32("rope.dimension_count_swa", s.n_rot > 0 ? s.n_rot : s.head_dim);
  w.setFloat32(a + "rope.freq_base_swa", s.rope_freq_base_swa);
  u32("attention.sliding_window", s.sliding_window);
  u32("attention.shared_kv_layers", s.n_kv_shared);
  u32("embedding_length_per_layer_input", 0);
  if (s.logit_softcap > 0) w.setFloat32(a + "final_logit_softcapping", s.logit_softcap);
}

}  // namespace moe::synth::detail
