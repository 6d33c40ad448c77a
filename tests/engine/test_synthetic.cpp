// Synthetic model generator: determinism, llama.cpp keys and tensor shapes for every
// tiny architecture (restated here from shared/GGUF-NOTES.md, independently of the
// generator), weight statistics, router variety, preset shapes (shared/MODEL-SHAPES.md),
// vocabulary padding, and streaming writes equal to in-memory bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "models/gguf.h"
#include "quant/quant.h"
#include "support/temp_dir.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

using namespace moe;
using gguf::GgufFile;
using gguf::TensorType;
using synth::SyntheticSpec;

namespace {

std::vector<uint8_t> bytesOf(const SyntheticSpec& s) { return synth::buildModel(s).toBytes(); }

// The expected tensors of a spec: name -> (dims, type), from GGUF-NOTES "MoE tensors".
struct Expected {
  std::vector<uint64_t> dims;
  TensorType type;
};
std::map<std::string, Expected> expectedTensors(const SyntheticSpec& s, uint64_t n_vocab) {
  std::map<std::string, Expected> m;
  const uint64_t d = s.n_embd, hd = s.head_dim, q = uint64_t(s.n_head) * hd, kv = uint64_t(s.n_head_kv) * hd,
                 ff = s.n_ff_exp, ne = s.n_expert;
  const TensorType F32 = TensorType::F32, wt = s.weight_type, et = s.expert_type;
  m["token_embd.weight"] = {{d, n_vocab}, wt};
  m["output_norm.weight"] = {{d}, F32};
  if (!s.tied_output) m["output.weight"] = {{d, n_vocab}, wt};
  if (s.arch == "gemma4") {  // llama.cpp's gemma4 loader (src/models/gemma4.cpp): per-layer shapes
    m["rope_freqs.weight"] = {{uint64_t(s.head_dim_full) / 2}, F32};
    for (int l = 0; l < s.n_layer; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      const bool global = l % s.swa_period == s.swa_period - 1, own_kv = l < s.n_layer - s.n_kv_shared;
      const uint64_t h = uint64_t(global ? s.head_dim_full : s.head_dim);
      const uint64_t lkv = uint64_t(global ? s.n_head_kv_full : s.n_head_kv) * h, lq = uint64_t(s.n_head) * h;
      for (const char* n : {"attn_norm.weight", "post_attention_norm.weight", "ffn_norm.weight",
                            "post_ffw_norm.weight", "post_ffw_norm_1.weight", "pre_ffw_norm_2.weight",
                            "post_ffw_norm_2.weight", "ffn_gate_inp.scale"})
        m[b + n] = {{d}, F32};
      m[b + "attn_q.weight"] = {{d, lq}, wt};
      m[b + "attn_q_norm.weight"] = {{h}, F32};
      if (own_kv) {
        m[b + "attn_k.weight"] = {{d, lkv}, wt};
        if (!(global && s.k_eq_v_full)) m[b + "attn_v.weight"] = {{d, lkv}, wt};
        m[b + "attn_k_norm.weight"] = {{h}, F32};
      }
      m[b + "attn_output.weight"] = {{lq, d}, wt};
      m[b + "layer_output_scale.weight"] = {{1}, F32};
      m[b + "ffn_gate.weight"] = {{d, uint64_t(s.n_ff)}, wt};
      m[b + "ffn_up.weight"] = {{d, uint64_t(s.n_ff)}, wt};
      m[b + "ffn_down.weight"] = {{uint64_t(s.n_ff), d}, wt};
      m[b + "ffn_gate_inp.weight"] = {{d, ne}, F32};
      m[b + "ffn_gate_up_exps.weight"] = {{d, 2 * ff, ne}, et};
      m[b + "ffn_down_exps.weight"] = {{ff, d, ne}, s.expertDownType()};
      m[b + "ffn_down_exps.scale"] = {{ne}, F32};
    }
    return m;
  }
  for (int l = 0; l < s.n_layer + s.n_nextn; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (l >= s.n_layer) {  // glm4moe's / qwen35moe's next-token-prediction layer adds its own four
      m[b + "nextn.eh_proj.weight"] = {{2 * d, d}, wt};
      for (const char* n : {"nextn.enorm.weight", "nextn.hnorm.weight", "nextn.shared_head_norm.weight"})
        m[b + n] = {{d}, F32};
    }
    m[b + "attn_norm.weight"] = {{d}, F32};
    if (s.arch == "deepseek2") {  // latent attention: W_UK / W_UV as F16, in either layout
      const uint64_t H = s.n_head, R = s.n_rot, C = s.kv_lora, V = s.v_head_dim, N = hd - R;
      if (s.q_lora > 0) {
        m[b + "attn_q_a.weight"] = {{d, uint64_t(s.q_lora)}, wt};
        m[b + "attn_q_a_norm.weight"] = {{uint64_t(s.q_lora)}, F32};
        m[b + "attn_q_b.weight"] = {{uint64_t(s.q_lora), q}, wt};
      } else {
        m[b + "attn_q.weight"] = {{d, q}, wt};
      }
      m[b + "attn_kv_a_mqa.weight"] = {{d, C + R}, wt};
      m[b + "attn_kv_a_norm.weight"] = {{C}, F32};
      if (s.mla_split) {
        m[b + "attn_k_b.weight"] = {{N, C, H}, TensorType::F16};
        m[b + "attn_v_b.weight"] = {{C, V, H}, TensorType::F16};
      } else {
        m[b + "attn_kv_b.weight"] = {{C, H * (N + V)}, TensorType::F16};
      }
      m[b + "attn_output.weight"] = {{H * V, d}, wt};
    } else if (s.arch == "qwen35moe" && l < s.n_layer && (l + 1) % s.full_attn_interval != 0) {
      // A gated delta-net layer (llama.cpp's qwen35moe loader; its MTP layer attends).
      const uint64_t hk = s.ssm_state, nv = s.ssm_v_heads, key = uint64_t(s.ssm_k_heads) * hk, val = nv * hk;
      m[b + "attn_qkv.weight"] = {{d, 2 * key + val}, wt};
      m[b + "attn_gate.weight"] = {{d, val}, wt};
      m[b + "ssm_conv1d.weight"] = {{uint64_t(s.ssm_conv_kernel), 2 * key + val}, F32};
      m[b + "ssm_dt.bias"] = {{nv}, F32};
      m[b + "ssm_a"] = {{nv}, F32};
      m[b + "ssm_alpha.weight"] = {{d, nv}, F32};
      m[b + "ssm_beta.weight"] = {{d, nv}, F32};
      m[b + "ssm_norm.weight"] = {{hk}, F32};
      m[b + "ssm_out.weight"] = {{val, d}, wt};
    } else {
      // qwen35moe's query projection gives per head [q; gate]; per-head QK-norm.
      m[b + "attn_q.weight"] = {{d, s.arch == "qwen35moe" ? 2 * q : q}, wt};
      if (s.arch == "qwen35moe") {
        m[b + "attn_q_norm.weight"] = {{hd}, F32};
        m[b + "attn_k_norm.weight"] = {{hd}, F32};
      }
      m[b + "attn_k.weight"] = {{d, kv}, wt};
      m[b + "attn_v.weight"] = {{d, kv}, wt};
      m[b + "attn_output.weight"] = {{q, d}, wt};
    }
    if (s.arch == "gpt-oss") {
      m[b + "attn_output.bias"] = {{d}, F32};
      m[b + "attn_sinks.weight"] = {{uint64_t(s.n_head)}, F32};
    }
    if (s.qkv_bias) {
      m[b + "attn_q.bias"] = {{q}, F32};
      m[b + "attn_k.bias"] = {{kv}, F32};
      m[b + "attn_v.bias"] = {{kv}, F32};
    }
    if (s.arch == "qwen3moe") {
      m[b + "attn_q_norm.weight"] = {{hd}, F32};
      m[b + "attn_k_norm.weight"] = {{hd}, F32};
    }
    if (s.arch == "olmoe" || s.arch == "minimax-m2") {
      m[b + "attn_q_norm.weight"] = {{q}, F32};
      m[b + "attn_k_norm.weight"] = {{kv}, F32};
    }
    const bool post_attention_name = s.arch == "glm4moe" || s.arch == "gpt-oss" || s.arch == "qwen35moe";
    m[b + (post_attention_name ? "post_attention_norm.weight" : "ffn_norm.weight")] = {{d}, F32};
    if (l < s.n_leading_dense) {
      m[b + "ffn_gate.weight"] = {{d, uint64_t(s.n_ff)}, wt};
      m[b + "ffn_up.weight"] = {{d, uint64_t(s.n_ff)}, wt};
      m[b + "ffn_down.weight"] = {{uint64_t(s.n_ff), d}, wt};
      continue;
    }
    m[b + "ffn_gate_inp.weight"] = {{d, ne}, F32};
    m[b + "ffn_gate_exps.weight"] = {{d, ff, ne}, et};
    m[b + "ffn_up_exps.weight"] = {{d, ff, ne}, et};
    m[b + "ffn_down_exps.weight"] = {{ff, d, ne}, et};
    if (s.arch == "glm4moe" || s.arch == "minimax-m2" || s.selection_bias)
      m[b + "exp_probs_b.bias"] = {{ne}, F32};
    if (s.arch == "gpt-oss") {
      m[b + "ffn_gate_inp.bias"] = {{ne}, F32};
      m[b + "ffn_gate_exps.bias"] = {{ff, ne}, F32};
      m[b + "ffn_up_exps.bias"] = {{ff, ne}, F32};
      m[b + "ffn_down_exps.bias"] = {{d, ne}, F32};
    }
    if (s.n_expert_shared > 0) {
      const uint64_t sh = s.n_ff_shexp;
      m[b + "ffn_gate_shexp.weight"] = {{d, sh}, wt};
      m[b + "ffn_up_shexp.weight"] = {{d, sh}, wt};
      m[b + "ffn_down_shexp.weight"] = {{sh, d}, wt};
      if (s.arch == "qwen2moe" || s.arch == "qwen35moe") m[b + "ffn_gate_inp_shexp.weight"] = {{d}, F32};
    }
  }
  return m;
}

std::vector<float> dequant(const GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.findTensor(name);
  if (!t) return {};
  std::vector<float> out(t->nElements());
  auto data = f.tensorData(*t);
  const uint64_t rows = t->nElements() / t->ne(0), rb = t->rowBytes();
  for (uint64_t r = 0; r < rows; ++r)
    quant::dequantizeRow(t->type, data.data() + r * rb, out.data() + r * t->ne(0), int64_t(t->ne(0)));
  return out;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s / double(v.size()));
}

uint64_t u(const GgufFile& f, const std::string& key) {
  auto v = f.getUint(key);
  if (!v) {
    ADD_FAILURE() << "missing key " << key;
    return 0;
  }
  return *v;
}

// Weight statistics and router variety on one architecture's file.
void checkWeights(const GgufFile& f, const SyntheticSpec& s) {
  // Matrices: RMS ~ gain / sqrt(fan_in) (Q4_0 adds quantisation noise: 15%).
  const char* q_name = s.q_lora > 0            ? "blk.0.attn_q_a.weight"
                       : s.arch == "qwen35moe" ? "blk.0.attn_qkv.weight"  // layer 0 is a delta-net layer
                                               : "blk.0.attn_q.weight";
  const auto q = dequant(f, q_name);
  ASSERT_TRUE(std::abs(rms(q) * std::sqrt(double(s.n_embd)) - 1.0) < 0.15);
  const auto emb = dequant(f, "token_embd.weight");
  // Tied output: the embedding doubles as output.weight and is scaled like it.
  const double emb_rms = s.tied_output ? 1.0 / std::sqrt(double(s.n_embd)) : 1.0;
  ASSERT_TRUE(std::abs(rms(emb) / emb_rms - 1.0) < 0.15);
  for (float x : dequant(f, "output_norm.weight")) ASSERT_TRUE(x >= 0.9f && x <= 1.1f);
  const int l = s.n_leading_dense;  // first MoE layer
  const auto gate =
      dequant(f, "blk." + std::to_string(l) +
                     (s.arch == "gemma4" ? ".ffn_gate_up_exps.weight" : ".ffn_gate_exps.weight"));
  ASSERT_TRUE(std::abs(rms(gate) * std::sqrt(double(s.n_embd)) - 1.0) < 0.15);
  // Router: the top-k sets of 64 random unit-RMS inputs are many, not one.
  const auto router = dequant(f, "blk." + std::to_string(l) + ".ffn_gate_inp.weight");
  std::set<std::vector<int>> choices;
  std::vector<int> hits(s.n_expert);
  uint64_t st = 12345;
  for (int t = 0; t < 64; ++t) {
    std::vector<float> x(s.n_embd);
    for (float& v : x) {
      st = st * 6364136223846793005ULL + 1442695040888963407ULL;
      v = float(double(st >> 11) * 0x1.0p-53 * 2 - 1) * 1.732f;
    }
    std::vector<std::pair<float, int>> logit(s.n_expert);
    for (int e = 0; e < s.n_expert; ++e) {
      float acc = 0;
      for (int i = 0; i < s.n_embd; ++i) acc += router[size_t(e) * s.n_embd + i] * x[i];
      logit[e] = {-acc, e};
    }
    std::sort(logit.begin(), logit.end());
    std::vector<int> top;
    for (int k = 0; k < s.n_expert_used; ++k) top.push_back(logit[k].second), ++hits[logit[k].second];
    std::sort(top.begin(), top.end());
    choices.insert(top);
  }
  ASSERT_TRUE(choices.size() >= 8);
  for (int h : hits) ASSERT_TRUE(h > 0);  // every expert gets used
}

// One row of tinySpecs (a fatal failure ends the row, not the case).
void checkTinySpec(const std::string& arch) {
  const SyntheticSpec s = synth::tinySpec(arch);
  const auto bytes = bytesOf(s);
  moe::test::info("%s: %zu bytes", s.arch.c_str(), bytes.size());
  ASSERT_TRUE(bytes.size() < 1'000'000);
  const GgufFile f = GgufFile::fromBytes(bytes);
  ASSERT_EQ(f.version(), 3u);
  ASSERT_EQ(f.alignment(), uint64_t(32));
  ASSERT_EQ(*f.getString("general.architecture"), s.arch);
  ASSERT_EQ(*f.getString("general.name"), s.name);
  const std::string a = s.arch + ".";
  ASSERT_EQ(u(f, a + "block_count"), uint64_t(s.n_layer + s.n_nextn));
  ASSERT_EQ(u(f, a + "embedding_length"), uint64_t(s.n_embd));
  ASSERT_EQ(u(f, a + "context_length"), uint64_t(s.n_ctx));
  ASSERT_TRUE(u(f, a + "feed_forward_length") > 0);
  ASSERT_EQ(u(f, a + "attention.head_count"), uint64_t(s.n_head));
  if (s.arch == "gemma4") {  // per layer kv heads; the global layers' head size and rotated dims
    const auto* kv = f.find(a + "attention.head_count_kv")->asArray();
    const auto* swa = f.find(a + "attention.sliding_window_pattern")->asArray();
    ASSERT_TRUE(kv && swa && kv->size() == size_t(s.n_layer) && swa->size() == size_t(s.n_layer));
    for (int l = 0; l < s.n_layer; ++l) {
      const bool global = l % s.swa_period == s.swa_period - 1;
      ASSERT_EQ(*(*swa)[size_t(l)].asBool(), !global);
      ASSERT_EQ(*(*kv)[size_t(l)].asUint(), uint64_t(global ? s.n_head_kv_full : s.n_head_kv));
    }
    ASSERT_EQ(u(f, a + "attention.key_length"), uint64_t(s.head_dim_full));
    ASSERT_EQ(u(f, a + "attention.key_length_swa"), uint64_t(s.head_dim));
    ASSERT_EQ(u(f, a + "rope.dimension_count"), uint64_t(s.head_dim_full));
    ASSERT_EQ(u(f, a + "attention.shared_kv_layers"), uint64_t(s.n_kv_shared));
    ASSERT_TRUE(f.findTensor("rope_freqs.weight") && f.findTensor("blk.0.ffn_gate_up_exps.weight") &&
                f.findTensor("blk.0.ffn_down_exps.scale") && f.findTensor("blk.0.ffn_gate_inp.scale"));
  } else {
    ASSERT_EQ(u(f, a + "attention.head_count_kv"), s.arch == "deepseek2" ? 1ull : uint64_t(s.n_head_kv));
    ASSERT_EQ(u(f, a + "rope.dimension_count"), uint64_t(s.n_rot > 0 ? s.n_rot : s.head_dim));
  }
  ASSERT_EQ(u(f, a + "expert_count"), uint64_t(s.n_expert));
  ASSERT_EQ(u(f, a + "expert_used_count"), uint64_t(s.n_expert_used));
  ASSERT_EQ(u(f, a + "expert_feed_forward_length"), uint64_t(s.n_ff_exp));
  const double eps = *f.getFloat(a + "attention.layer_norm_rms_epsilon");
  ASSERT_TRUE(eps == double(1e-5f) || eps == double(1e-6f));
  ASSERT_TRUE(f.getFloat(a + "rope.freq_base").value_or(0) > 0);
  if (s.arch == "qwen3moe") {
    ASSERT_EQ(u(f, a + "attention.key_length"), uint64_t(s.head_dim));
    ASSERT_EQ(u(f, a + "attention.value_length"), uint64_t(s.head_dim));
    ASSERT_TRUE(s.head_dim * s.n_head != s.n_embd);
  }
  if (s.arch == "qwen2moe") {
    ASSERT_EQ(u(f, a + "expert_shared_feed_forward_length"), uint64_t(s.n_ff_shexp));
    ASSERT_TRUE(s.qkv_bias);
  }
  if (s.arch == "deepseek") {
    ASSERT_EQ(u(f, a + "expert_shared_count"), 2ull);
    ASSERT_EQ(u(f, a + "leading_dense_block_count"), 1ull);
    ASSERT_DOUBLE_EQ(*f.getFloat(a + "expert_weights_scale"), 1.0);
    ASSERT_EQ(s.n_layer, 3);
    ASSERT_EQ(u(f, a + "feed_forward_length"), uint64_t(s.n_ff));
  }
  if (s.arch == "deepseek2") {  // llama.cpp's MLA keys: per-head widths as *_mla
    ASSERT_EQ(u(f, a + "attention.kv_lora_rank"), uint64_t(s.kv_lora));
    ASSERT_EQ(u(f, a + "attention.q_lora_rank"), uint64_t(s.q_lora));
    ASSERT_EQ(u(f, a + "attention.key_length"), uint64_t(s.kv_lora + s.n_rot));
    ASSERT_EQ(u(f, a + "attention.value_length"), uint64_t(s.kv_lora));
    ASSERT_EQ(u(f, a + "attention.key_length_mla"), uint64_t(s.head_dim));
    ASSERT_EQ(u(f, a + "attention.value_length_mla"), uint64_t(s.v_head_dim));
    ASSERT_EQ(u(f, a + "expert_group_count"), 4ull);
    ASSERT_EQ(u(f, a + "expert_group_used_count"), 2ull);
    ASSERT_EQ(u(f, a + "expert_gating_func"), 2ull);
    ASSERT_TRUE(f.getFloat(a + "rope.scaling.yarn_log_multiplier").value_or(0) > 0);
  }
  if (s.arch == "gpt-oss") {
    ASSERT_EQ(u(f, a + "attention.sliding_window"), 4ull);
    ASSERT_EQ(*f.getString(a + "rope.scaling.type"), std::string("yarn"));
    ASSERT_EQ(u(f, a + "rope.scaling.original_context_length"), 64ull);
  }
  if (s.arch == "qwen35moe") {  // the keys llama.cpp's qwen35moe loader reads
    ASSERT_EQ(u(f, a + "nextn_predict_layers"), 1ull);
    ASSERT_EQ(u(f, a + "ssm.conv_kernel"), 4ull);
    ASSERT_EQ(u(f, a + "ssm.state_size"), 16ull);
    ASSERT_EQ(u(f, a + "ssm.group_count"), 2ull);
    ASSERT_EQ(u(f, a + "ssm.time_step_rank"), 4ull);
    ASSERT_EQ(u(f, a + "ssm.inner_size"), 64ull);
    ASSERT_EQ(u(f, a + "full_attention_interval"), 2ull);
    ASSERT_TRUE(f.find(a + "rope.dimension_sections") != nullptr);
    for (float x : dequant(f, "blk.0.ssm_a")) ASSERT_TRUE(x < 0.0f);  // -exp(A_log)
  }
  if (s.arch == "minimax-m2") {  // the keys llama.cpp's converter writes for MiniMax-M2
    ASSERT_EQ(u(f, a + "expert_gating_func"), 2ull);
    ASSERT_EQ(u(f, a + "attention.key_length"), uint64_t(s.head_dim));
    ASSERT_TRUE(s.head_dim * s.n_head != s.n_embd && s.n_rot < s.head_dim);
    ASSERT_EQ(u(f, a + "rope.dimension_count"), uint64_t(s.n_rot));
    ASSERT_TRUE(!f.find(a + "expert_shared_count") && !f.findTensor("blk.0.ffn_gate_shexp.weight"));
  }
  if (s.arch == "glm4moe") {
    ASSERT_EQ(u(f, a + "nextn_predict_layers"), 1ull);
    ASSERT_EQ(u(f, a + "expert_gating_func"), 2ull);
    ASSERT_TRUE(s.n_rot < s.head_dim);  // partial rotary dimensions
    ASSERT_TRUE(f.findTensor("blk.3.nextn.eh_proj.weight") && f.findTensor("blk.1.exp_probs_b.bias"));
    ASSERT_TRUE(f.findTensor("blk.0.post_attention_norm.weight") && !f.findTensor("blk.0.ffn_norm.weight"));
  }

  // Vocabulary.
  const auto tokens = f.getStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens && tokens->size() >= 256 && tokens->size() <= 400);
  ASSERT_EQ(*f.getString("tokenizer.ggml.model"),
            std::string(s.arch == "gemma4"                           ? "gemma4"
                        : s.vocab == synth::VocabKind::SentencePiece ? "llama"
                                                                     : "gpt2"));
  if (s.arch == "gemma4")
    ASSERT_TRUE(f.getStringArray("tokenizer.ggml.merges").value_or(std::vector<std::string>{}).size() > 10);
  if (s.vocab == synth::VocabKind::Gpt2Bpe) {
    ASSERT_EQ(*f.getString("tokenizer.ggml.pre"), s.bpe_pre);
  }

  // Tensors: exactly the expected set, shapes and types.
  const auto expected = expectedTensors(s, tokens->size());
  ASSERT_EQ(f.tensors().size(), expected.size());
  for (const auto& t : f.tensors()) {
    auto it = expected.find(t.name);
    ASSERT_TRUE(it != expected.end()) << "unexpected tensor " + t.name;
    ASSERT_TRUE(t.dims == it->second.dims) << "dims of " + t.name;
    ASSERT_TRUE(t.type == it->second.type) << "type of " + t.name;
    ASSERT_EQ(t.offset % 32, 0ull);
  }
  checkWeights(f, s);
}

// One row of goldenFilesUpToDate.
void checkGoldenFile(const std::string& arch) {
  const std::string path = std::string(MOECHAT_TEST_DATA) + "/golden/" + arch + ".gguf";
  std::ifstream in(path, std::ios::binary);
  if (!in) GTEST_SKIP() << "golden file absent";
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(file == bytesOf(synth::tinySpec(arch)))
      << "regenerate " + path + " (moechat-cli gen-model --arch ...)";
}

}  // namespace

TEST(Synthetic, deterministic) {
  const SyntheticSpec s = synth::tinySpec("llama");
  const auto a = bytesOf(s), b = bytesOf(s);
  ASSERT_TRUE(a == b);
  SyntheticSpec s2 = s;
  s2.seed = s.seed + 1;
  const auto c = bytesOf(s2);
  ASSERT_EQ(c.size(), a.size());  // same structure
  ASSERT_TRUE(c != a);            // different weights
  ASSERT_TRUE(synth::demoModelBytes() == synth::demoModelBytes());
}

TEST(Synthetic, tinySpecs) {
  for (const auto& arch : synth::supportedArchs()) {
    SCOPED_TRACE(arch);
    checkTinySpec(arch);
  }
}

// The committed golden files (tests/data/golden, read by the Python reference)
// are exactly what the generator writes today: a change to the generator or the
// vocabulary builder that alters them must regenerate them on purpose.
TEST(Synthetic, goldenFilesUpToDate) {
  std::vector<std::string> rows = synth::supportedArchs();
  for (const auto& v : synth::tinyVariantNames()) rows.push_back(v);
  for (const auto& arch : rows) {
    SCOPED_TRACE(arch);
    checkGoldenFile(arch);
  }
}

TEST(Synthetic, demo) {
  const GgufFile f = GgufFile::fromBytes(synth::demoModelBytes());
  ASSERT_EQ(*f.getString("general.name"), std::string("moechat demo (random weights)"));
  ASSERT_EQ(*f.getString("general.architecture"), std::string("llama"));
  ASSERT_EQ(*f.getString("tokenizer.ggml.model"), std::string("llama"));
}

TEST(Synthetic, presets) {
  ASSERT_EQ(synth::presetNames().size(), size_t(16));
  // google/gemma-4-26B-A4B (config.json's text_config).
  const auto g4 = synth::presetSpec("Gemma4-26B");
  ASSERT_EQ(g4.arch, std::string("gemma4"));
  ASSERT_EQ(g4.n_layer, 30);
  ASSERT_EQ(g4.n_embd, 2816);
  ASSERT_EQ(g4.n_ff, 2112);
  ASSERT_EQ(g4.n_ff_exp, 704);
  ASSERT_EQ(g4.n_expert, 128);
  ASSERT_EQ(g4.n_expert_used, 8);
  ASSERT_EQ(g4.n_head, 16);
  ASSERT_EQ(g4.n_head_kv, 8);
  ASSERT_EQ(g4.head_dim, 256);
  ASSERT_EQ(g4.n_head_kv_full, 2);
  ASSERT_EQ(g4.head_dim_full, 512);
  ASSERT_EQ(g4.sliding_window, 1024);
  ASSERT_EQ(g4.n_vocab_target, 262144);
  ASSERT_THROW(synth::presetSpec("DS-3"), std::invalid_argument);
  ASSERT_THROW(synth::tinySpec("qwen3next"), std::invalid_argument);
  // DeepSeek-V2-Lite (config.json): MLA with a 512 latent and 64 rope dims.
  const auto ds2 = synth::presetSpec("DS-2");
  ASSERT_EQ(ds2.arch, std::string("deepseek2"));
  ASSERT_EQ(ds2.n_layer, 27);
  ASSERT_EQ(ds2.head_dim, 192);
  ASSERT_EQ(ds2.n_rot, 64);
  ASSERT_EQ(ds2.kv_lora, 512);
  ASSERT_EQ(ds2.v_head_dim, 128);
  ASSERT_EQ(ds2.q_lora, 0);
  // Rows of MODEL-SHAPES.md.
  const auto ds = synth::presetSpec("DS-1");
  ASSERT_EQ(ds.arch, std::string("deepseek"));
  ASSERT_EQ(ds.n_layer, 28);
  ASSERT_EQ(ds.n_embd, 2048);
  ASSERT_EQ(ds.n_ff_exp, 1408);
  ASSERT_EQ(ds.n_expert, 64);
  ASSERT_EQ(ds.n_expert_used, 6);
  ASSERT_EQ(ds.n_expert_shared, 2);
  ASSERT_EQ(ds.n_ff_shexp, 2816);
  ASSERT_EQ(ds.n_leading_dense, 1);
  ASSERT_EQ(ds.n_ff, 10944);
  ASSERT_EQ(ds.n_vocab_target, 102400);
  // DS-1 F16 expert = 3 x 2048 x 1408 x 2 bytes = 17.3 MB; 64 x 27 MoE layers = 29.9 GB.
  const uint64_t expert = 3 * gguf::rowBytes(ds.expert_type, ds.n_embd) * ds.n_ff_exp;
  ASSERT_EQ(expert, 3ull * 2048 * 1408 * 2);
  ASSERT_EQ(expert, 17301504ull);
  ASSERT_TRUE(std::abs(double(expert) * 64 * 27 / 1e9 - 29.9) < 0.05);

  const auto q3 = synth::presetSpec("Q3-30B");
  ASSERT_EQ(q3.arch, std::string("qwen3moe"));
  ASSERT_EQ(q3.n_layer, 48);
  ASSERT_EQ(q3.n_expert, 128);
  ASSERT_EQ(q3.n_expert_used, 8);
  ASSERT_EQ(q3.n_head, 32);
  ASSERT_EQ(q3.n_head_kv, 4);
  ASSERT_EQ(q3.head_dim, 128);
  ASSERT_EQ(q3.n_vocab_target, 151936);
  ASSERT_EQ(q3.expert_type, TensorType::BF16);
  // Q3-30B BF16 expert = 9.4 MB; all experts 58 GB.
  const uint64_t q3e = 3 * gguf::rowBytes(q3.expert_type, q3.n_embd) * q3.n_ff_exp;
  ASSERT_TRUE(std::abs(q3e / 1e6 - 9.4) < 0.05);
  ASSERT_TRUE(std::abs(q3e * 128.0 * 48 / 1e9 - 58) < 0.5);

  const auto qw2 = synth::presetSpec("QW-2");
  ASSERT_EQ(qw2.n_embd, 3584);
  ASSERT_EQ(qw2.n_ff_exp, 2560);
  ASSERT_EQ(qw2.n_ff_shexp, 20480);
  ASSERT_EQ(qw2.n_head_kv, 4);
  const auto mx = synth::presetSpec("Mixt");
  ASSERT_EQ(mx.arch, std::string("llama"));
  ASSERT_EQ(mx.n_ff_exp, 14336);
  ASSERT_EQ(mx.n_vocab_target, 32000);
  ASSERT_EQ(synth::presetSpec("Q3-235B").n_layer, 94);
  ASSERT_EQ(synth::presetSpec("OLMoE").n_vocab_target, 50304);
  ASSERT_EQ(synth::presetSpec("QW-1").n_expert, 60);
  // Qwen3.6-35B-A3B and Qwen3.5-122B-A10B (config.json): every fourth layer full
  // attention, the rest gated delta-net; 256 experts top-8 + 1 shared of the same width.
  const auto q36 = synth::presetSpec("Q3.6-35B");
  ASSERT_EQ(q36.arch, std::string("qwen35moe"));
  ASSERT_EQ(q36.n_layer, 40);
  ASSERT_EQ(q36.n_nextn, 1);
  ASSERT_EQ(q36.n_embd, 2048);
  ASSERT_EQ(q36.n_head, 16);
  ASSERT_EQ(q36.n_head_kv, 2);
  ASSERT_EQ(q36.head_dim, 256);
  ASSERT_EQ(q36.n_rot, 64);
  ASSERT_EQ(q36.full_attn_interval, 4);
  ASSERT_EQ(q36.ssm_k_heads, 16);
  ASSERT_EQ(q36.ssm_v_heads, 32);
  ASSERT_EQ(q36.ssm_state, 128);
  ASSERT_EQ(q36.n_expert, 256);
  ASSERT_EQ(q36.n_expert_used, 8);
  ASSERT_EQ(q36.n_ff_exp, 512);
  ASSERT_EQ(q36.n_ff_shexp, 512);
  ASSERT_EQ(q36.n_vocab_target, 248320);
  ASSERT_EQ(q36.bpe_pre, std::string("qwen35"));
  const auto q35 = synth::presetSpec("Q3.5-122B");
  ASSERT_EQ(q35.n_layer, 48);
  ASSERT_EQ(q35.n_embd, 3072);
  ASSERT_EQ(q35.n_head, 32);
  ASSERT_EQ(q35.ssm_v_heads, 64);
  ASSERT_EQ(q35.n_ff_exp, 1024);
  // MiniMax-M2 (config.json): 48 heads of 128 over a 3072 stream, 64 rotary dims,
  // 256 experts of 1536 top-8, no shared expert; 230B parameters, 10B active.
  const auto mm = synth::presetSpec("MiniMax-M2");
  ASSERT_EQ(mm.arch, std::string("minimax-m2"));
  ASSERT_EQ(mm.n_layer, 62);
  ASSERT_EQ(mm.n_embd, 3072);
  ASSERT_EQ(mm.n_head, 48);
  ASSERT_EQ(mm.n_head_kv, 8);
  ASSERT_EQ(mm.head_dim, 128);
  ASSERT_EQ(mm.n_rot, 64);
  ASSERT_EQ(mm.n_expert, 256);
  ASSERT_EQ(mm.n_expert_used, 8);
  ASSERT_EQ(mm.n_ff_exp, 1536);
  ASSERT_EQ(mm.n_expert_shared, 0);
  ASSERT_EQ(mm.n_vocab_target, 200064);
  {
    const double d = mm.n_embd, attn = d * (2.0 * 48 * 128 + 2.0 * 8 * 128), expert = 3.0 * d * mm.n_ff_exp;
    const double total = 62 * (attn + 256 * expert + 256 * d) + 2 * d * 200064;
    const double active = 62 * (attn + 8 * expert + 256 * d) + 2 * d * 200064;
    ASSERT_TRUE(std::abs(total / 1e9 - 228.7) < 0.1) << total;   // info --preset: 228.69B
    ASSERT_TRUE(std::abs(active / 1e9 - 11.0) < 0.1) << active;  // (info counts no embedding row: 10.42B)
  }
  // Every preset passes the generator's validation (writer built, nothing generated).
  for (const auto& n : synth::presetNames()) {
    SyntheticSpec s = synth::presetSpec(n);
    s.n_vocab_target = 1000;  // keep the vocabulary build cheap here
    synth::buildModel(s);
  }
}

TEST(Synthetic, vocabPadding) {
  SyntheticSpec s = synth::tinySpec("qwen3moe");
  s.n_vocab_target = 3000;
  const GgufFile f = GgufFile::fromBytes(bytesOf(s));
  const auto tokens = *f.getStringArray("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), size_t(3000));
  ASSERT_EQ(f.findTensor("token_embd.weight")->ne(1), 3000ull);
  const auto types = *f.getIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(std::count(types.begin(), types.end(), 5ll) > 1000);  // unused placeholders
  ASSERT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size());
}

TEST(Synthetic, invalidSpecs) {
  SyntheticSpec s = synth::tinySpec("llama");
  s.expert_type = TensorType::Q4_0;
  s.n_ff_exp = 48;  // not a whole number of 32-blocks
  ASSERT_THROW(synth::buildModel(s), std::invalid_argument);
  s = synth::tinySpec("llama");
  s.n_expert_used = 9;
  ASSERT_THROW(synth::buildModel(s), std::invalid_argument);
  s = synth::tinySpec("llama");
  s.arch = "deepseek2";
  ASSERT_THROW(synth::buildModel(s), std::invalid_argument);
}

TEST(Synthetic, kQuantSpecs) {
  // A tiny spec with K-quant experts needs rows of 256: buildModel refuses it as is,
  // fitToBlocks widens it, and the tiny specs themselves come back unchanged.
  SyntheticSpec s = synth::tinySpec("llama");
  s.expert_type = TensorType::Q4_K;
  ASSERT_THROW(synth::buildModel(s), std::invalid_argument);
  s = synth::fitToBlocks(s);
  ASSERT_EQ(s.n_embd, 256);
  ASSERT_EQ(s.n_ff_exp, 256);
  ASSERT_EQ(s.head_dim, 16);  // attention stays F16: any width fits
  const auto f = GgufFile::fromBytes(synth::buildModel(s).toBytes());
  ASSERT_EQ(f.findTensor("blk.1.ffn_down_exps.weight")->type, TensorType::Q4_K);
  s = synth::tinySpec("deepseek");
  s.expert_type = TensorType::Q5_K;
  s.weight_type = TensorType::Q6_K;
  s = synth::fitToBlocks(s);
  ASSERT_EQ(s.n_ff_shexp, s.n_expert_shared * s.n_ff_exp);
  ASSERT_EQ((s.n_head * s.head_dim) % 256, 0);
  ASSERT_EQ(s.n_ff % 256, 0);
  synth::buildModel(s);  // valid
  for (const auto& arch : synth::supportedArchs()) {
    const SyntheticSpec t = synth::tinySpec(arch);
    const SyntheticSpec u = synth::fitToBlocks(t);
    ASSERT_EQ(u.n_embd, t.n_embd);
    ASSERT_EQ(u.n_ff_exp, t.n_ff_exp);
    ASSERT_EQ(u.n_ff, t.n_ff);
    ASSERT_EQ(u.n_ff_shexp, t.n_ff_shexp);
    ASSERT_EQ(u.head_dim, t.head_dim);
  }
  ASSERT_EQ(synth::parseWeightType("q4_k"), TensorType::Q4_K);
  ASSERT_EQ(synth::parseWeightType("Q6_K"), TensorType::Q6_K);
  ASSERT_EQ(synth::parseWeightType("bf16"), TensorType::BF16);
  ASSERT_EQ(synth::parseWeightType("iq2_xxs"), TensorType::IQ2_XXS);
  ASSERT_THROW(synth::parseWeightType("tq1_0"), std::invalid_argument);
}

// A medium model (tens of MB, tensors big enough for the multi-threaded fill)
// written through the streaming path equals toBytes.
TEST(Synthetic, streamingWriteEqualsToBytes) {
  SyntheticSpec s = synth::tinySpec("qwen2moe");
  s.n_embd = 512;
  s.n_head = 8;
  s.n_head_kv = 2;
  s.head_dim = 64;
  s.n_ff_exp = 256;
  s.n_expert = 32;
  s.n_expert_used = 4;
  s.n_ff_shexp = 512;
  s.n_vocab_target = 1000;
  moe::test::TempDir dir;
  const std::string path = dir.file("medium.gguf");
  synth::writeModel(s, path);
  const auto mem = bytesOf(s);
  ASSERT_TRUE(mem.size() > 10'000'000);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(file.size(), mem.size());
  ASSERT_TRUE(file == mem);
  const GgufFile f = GgufFile::open(path);
  ASSERT_EQ(f.findTensor("blk.1.ffn_down_exps.weight")->dims, (std::vector<uint64_t>{256, 512, 32}));
}
