// qwen35moe's attention tensors and keys for the synthetic generator: names, shapes
// and keys as llama.cpp's converter writes Qwen3.5 / Qwen3.6 MoE files (tensor names
// from src/llama-arch.cpp, shapes from the qwen35moe loader in src/models/qwen35moe.cpp,
// keys from convert_hf_to_gguf.py's Qwen3NextModel / _Qwen35MRopeMixin).
#include <cmath>
#include <string>
#include <vector>

#include "synth/synthetic_fill.h"

namespace moe::synth::detail {
namespace {

using gguf::TensorType;

struct Qwen35Writer : TensorWriter {
  double residualGain() const { return 1.0 / std::sqrt(2.0 * s.n_layer); }

  // A gated delta-net layer: attn_qkv {n_embd, 2 key + value}, attn_gate (z) {n_embd,
  // value}, ssm_conv1d {conv_kernel, channels}, ssm_dt.bias and ssm_a {n_v_heads},
  // ssm_alpha / ssm_beta {n_embd, n_v_heads}, ssm_norm {head_v}, ssm_out {value, n_embd}.
  void deltaNet(int l) {
    const uint64_t d = uint64_t(s.n_embd), hk = uint64_t(s.ssm_state);
    const uint64_t nk = uint64_t(s.ssm_k_heads), nv = uint64_t(s.ssm_v_heads);
    const uint64_t key = nk * hk, value = nv * hk, channels = 2 * key + value;
    const uint64_t kernel = uint64_t(s.ssm_conv_kernel);
    const TensorType wt = s.weight_type;
    matrix(blk(l, "attn_qkv.weight"), {d, channels}, wt);                     // [channels][n_embd]
    matrix(blk(l, "attn_gate.weight"), {d, value}, wt);                       // [value][n_embd]
    tensor(blk(l, "ssm_conv1d.weight"), {kernel, channels}, TensorType::F32,  // [channels][kernel]
           {Init::Normal, 1.0 / std::sqrt(double(kernel))});
    tensor(blk(l, "ssm_dt.bias"), {nv}, TensorType::F32, {Init::Normal, 0.5});
    tensor(blk(l, "ssm_a"), {nv}, TensorType::F32, {Init::Decay, 0.0});  // -exp(A_log) < 0
    matrix(blk(l, "ssm_alpha.weight"), {d, nv}, TensorType::F32);        // [n_v][n_embd]
    matrix(blk(l, "ssm_beta.weight"), {d, nv}, TensorType::F32);         // [n_v][n_embd]
    norm(blk(l, "ssm_norm.weight"), hk);
    matrix(blk(l, "ssm_out.weight"), {value, d}, wt, residualGain());  // [n_embd][value]
  }

  // Full attention: attn_q gives per head [q; gate] (2 x head_dim rows), QK-norm per head.
  void gatedAttention(int l) {
    const uint64_t d = uint64_t(s.n_embd), hd = uint64_t(s.head_dim);
    const uint64_t q_w = uint64_t(s.n_head) * hd, kv_w = uint64_t(s.n_head_kv) * hd;
    const TensorType wt = s.weight_type;
    matrix(blk(l, "attn_q.weight"), {d, 2 * q_w}, wt);                   // [n_head][2][head_dim][n_embd]
    matrix(blk(l, "attn_k.weight"), {d, kv_w}, wt);                      // [n_head_kv*head_dim][n_embd]
    matrix(blk(l, "attn_v.weight"), {d, kv_w}, wt);                      // [n_head_kv*head_dim][n_embd]
    matrix(blk(l, "attn_output.weight"), {q_w, d}, wt, residualGain());  // [n_embd][n_head*head_dim]
    norm(blk(l, "attn_q_norm.weight"), hd);
    norm(blk(l, "attn_k_norm.weight"), hd);
  }
};

}  // namespace

bool qwen35Recurrent(const SyntheticSpec& s, int l) {
  return l < s.n_layer && (l + 1) % s.full_attn_interval != 0;
}

void addQwen35Attention(const SyntheticSpec& s, gguf::GgufWriter& w, int l) {
  Qwen35Writer wr{{s, w}};
  wr.norm(wr.blk(l, "attn_norm.weight"), uint64_t(s.n_embd));
  if (qwen35Recurrent(s, l))
    wr.deltaNet(l);
  else
    wr.gatedAttention(l);
}

void writeQwen35Keys(const SyntheticSpec& s, gguf::GgufWriter& w) {
  const std::string a = s.arch + ".";
  auto u32 = [&](const std::string& k, int v) { w.setUint32(a + k, uint32_t(v)); };
  u32("ssm.conv_kernel", s.ssm_conv_kernel);
  u32("ssm.state_size", s.ssm_state);
  u32("ssm.group_count", s.ssm_k_heads);
  u32("ssm.time_step_rank", s.ssm_v_heads);
  u32("ssm.inner_size", s.ssm_v_heads * s.ssm_state);
  u32("full_attention_interval", s.full_attn_interval);
  w.setInt32Array(a + "rope.dimension_sections",
                  {s.rope_sections[0], s.rope_sections[1], s.rope_sections[2], s.rope_sections[3]});
  u32("nextn_predict_layers", s.n_nextn);
}

}  // namespace moe::synth::detail
