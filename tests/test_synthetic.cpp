// Synthetic model generator: determinism, llama.cpp keys and tensor shapes for every
// tiny architecture (restated here from shared/GGUF-NOTES.md, independently of the
// generator), weight statistics, router variety, preset shapes (shared/MODEL-SHAPES.md),
// vocabulary padding, and streaming writes equal to in-memory bytes.
#include <QtTest>

#include <QTemporaryDir>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "models/gguf.h"
#include "models/quant.h"
#include "models/synthetic_model.h"

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
  for (int l = 0; l < s.n_layer + s.n_nextn; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (l >= s.n_layer) {  // glm4moe's next-token-prediction layer adds its own four
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
    } else {
      m[b + "attn_q.weight"] = {{d, q}, wt};
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
    if (s.arch == "olmoe") {
      m[b + "attn_q_norm.weight"] = {{q}, F32};
      m[b + "attn_k_norm.weight"] = {{kv}, F32};
    }
    m[b + (s.arch == "glm4moe" || s.arch == "gpt-oss" ? "post_attention_norm.weight" : "ffn_norm.weight")] = {
        {d}, F32};
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
    if (s.arch == "glm4moe" || s.selection_bias) m[b + "exp_probs_b.bias"] = {{ne}, F32};
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
      if (s.arch == "qwen2moe") m[b + "ffn_gate_inp_shexp.weight"] = {{d}, F32};
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
  if (!v) qFatal("missing key %s", key.c_str());
  return *v;
}

// Weight statistics and router variety on one architecture's file.
void checkWeights(const GgufFile& f, const SyntheticSpec& s) {
  // Matrices: RMS ~ gain / sqrt(fan_in) (Q4_0 adds quantisation noise: 15%).
  const auto q = dequant(f, s.q_lora > 0 ? "blk.0.attn_q_a.weight" : "blk.0.attn_q.weight");
  QVERIFY(std::abs(rms(q) * std::sqrt(double(s.n_embd)) - 1.0) < 0.15);
  const auto emb = dequant(f, "token_embd.weight");
  // Tied output: the embedding doubles as output.weight and is scaled like it.
  const double emb_rms = s.tied_output ? 1.0 / std::sqrt(double(s.n_embd)) : 1.0;
  QVERIFY(std::abs(rms(emb) / emb_rms - 1.0) < 0.15);
  for (float x : dequant(f, "output_norm.weight")) QVERIFY(x >= 0.9f && x <= 1.1f);
  const int l = s.n_leading_dense;  // first MoE layer
  const auto gate = dequant(f, "blk." + std::to_string(l) + ".ffn_gate_exps.weight");
  QVERIFY(std::abs(rms(gate) * std::sqrt(double(s.n_embd)) - 1.0) < 0.15);
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
  QVERIFY(choices.size() >= 8);
  for (int h : hits) QVERIFY(h > 0);  // every expert gets used
}

}  // namespace

class TestSynthetic : public QObject {
  Q_OBJECT

 private slots:
  void deterministic() {
    const SyntheticSpec s = synth::tinySpec("llama");
    const auto a = bytesOf(s), b = bytesOf(s);
    QVERIFY(a == b);
    SyntheticSpec s2 = s;
    s2.seed = s.seed + 1;
    const auto c = bytesOf(s2);
    QCOMPARE(c.size(), a.size());  // same structure
    QVERIFY(c != a);               // different weights
    QVERIFY(synth::demoModelBytes() == synth::demoModelBytes());
  }

  void tinySpecs_data() {
    QTest::addColumn<QString>("arch");
    for (const auto& a : synth::supportedArchs()) QTest::newRow(a.c_str()) << QString::fromStdString(a);
  }
  void tinySpecs() {
    QFETCH(QString, arch);
    const SyntheticSpec s = synth::tinySpec(arch.toStdString());
    const auto bytes = bytesOf(s);
    qInfo("%s: %zu bytes", s.arch.c_str(), bytes.size());
    QVERIFY(bytes.size() < 1'000'000);
    const GgufFile f = GgufFile::fromBytes(bytes);
    QCOMPARE(f.version(), 3u);
    QCOMPARE(f.alignment(), uint64_t(32));
    QCOMPARE(*f.getString("general.architecture"), s.arch);
    QCOMPARE(*f.getString("general.name"), s.name);
    const std::string a = s.arch + ".";
    QCOMPARE(u(f, a + "block_count"), uint64_t(s.n_layer + s.n_nextn));
    QCOMPARE(u(f, a + "embedding_length"), uint64_t(s.n_embd));
    QCOMPARE(u(f, a + "context_length"), uint64_t(s.n_ctx));
    QVERIFY(u(f, a + "feed_forward_length") > 0);
    QCOMPARE(u(f, a + "attention.head_count"), uint64_t(s.n_head));
    QCOMPARE(u(f, a + "attention.head_count_kv"), s.arch == "deepseek2" ? 1ull : uint64_t(s.n_head_kv));
    QCOMPARE(u(f, a + "rope.dimension_count"), uint64_t(s.n_rot > 0 ? s.n_rot : s.head_dim));
    QCOMPARE(u(f, a + "expert_count"), uint64_t(s.n_expert));
    QCOMPARE(u(f, a + "expert_used_count"), uint64_t(s.n_expert_used));
    QCOMPARE(u(f, a + "expert_feed_forward_length"), uint64_t(s.n_ff_exp));
    const double eps = *f.getFloat(a + "attention.layer_norm_rms_epsilon");
    QVERIFY(eps == double(1e-5f) || eps == double(1e-6f));
    QVERIFY(f.getFloat(a + "rope.freq_base").value_or(0) > 0);
    if (s.arch == "qwen3moe") {
      QCOMPARE(u(f, a + "attention.key_length"), uint64_t(s.head_dim));
      QCOMPARE(u(f, a + "attention.value_length"), uint64_t(s.head_dim));
      QVERIFY(s.head_dim * s.n_head != s.n_embd);
    }
    if (s.arch == "qwen2moe") {
      QCOMPARE(u(f, a + "expert_shared_feed_forward_length"), uint64_t(s.n_ff_shexp));
      QVERIFY(s.qkv_bias);
    }
    if (s.arch == "deepseek") {
      QCOMPARE(u(f, a + "expert_shared_count"), 2ull);
      QCOMPARE(u(f, a + "leading_dense_block_count"), 1ull);
      QCOMPARE(*f.getFloat(a + "expert_weights_scale"), 1.0);
      QCOMPARE(s.n_layer, 3);
      QCOMPARE(u(f, a + "feed_forward_length"), uint64_t(s.n_ff));
    }
    if (s.arch == "deepseek2") {  // llama.cpp's MLA keys: per-head widths as *_mla
      QCOMPARE(u(f, a + "attention.kv_lora_rank"), uint64_t(s.kv_lora));
      QCOMPARE(u(f, a + "attention.q_lora_rank"), uint64_t(s.q_lora));
      QCOMPARE(u(f, a + "attention.key_length"), uint64_t(s.kv_lora + s.n_rot));
      QCOMPARE(u(f, a + "attention.value_length"), uint64_t(s.kv_lora));
      QCOMPARE(u(f, a + "attention.key_length_mla"), uint64_t(s.head_dim));
      QCOMPARE(u(f, a + "attention.value_length_mla"), uint64_t(s.v_head_dim));
      QCOMPARE(u(f, a + "expert_group_count"), 4ull);
      QCOMPARE(u(f, a + "expert_group_used_count"), 2ull);
      QCOMPARE(u(f, a + "expert_gating_func"), 2ull);
      QVERIFY(f.getFloat(a + "rope.scaling.yarn_log_multiplier").value_or(0) > 0);
    }
    if (s.arch == "gpt-oss") {
      QCOMPARE(u(f, a + "attention.sliding_window"), 4ull);
      QCOMPARE(*f.getString(a + "rope.scaling.type"), std::string("yarn"));
      QCOMPARE(u(f, a + "rope.scaling.original_context_length"), 64ull);
    }
    if (s.arch == "glm4moe") {
      QCOMPARE(u(f, a + "nextn_predict_layers"), 1ull);
      QCOMPARE(u(f, a + "expert_gating_func"), 2ull);
      QVERIFY(s.n_rot < s.head_dim);  // partial rotary dimensions
      QVERIFY(f.findTensor("blk.3.nextn.eh_proj.weight") && f.findTensor("blk.1.exp_probs_b.bias"));
      QVERIFY(f.findTensor("blk.0.post_attention_norm.weight") && !f.findTensor("blk.0.ffn_norm.weight"));
    }

    // Vocabulary.
    const auto tokens = f.getStringArray("tokenizer.ggml.tokens");
    QVERIFY(tokens && tokens->size() >= 256 && tokens->size() <= 400);
    QCOMPARE(*f.getString("tokenizer.ggml.model"),
             std::string(s.vocab == synth::VocabKind::SentencePiece ? "llama" : "gpt2"));
    if (s.vocab == synth::VocabKind::Gpt2Bpe) QCOMPARE(*f.getString("tokenizer.ggml.pre"), s.bpe_pre);

    // Tensors: exactly the expected set, shapes and types.
    const auto expected = expectedTensors(s, tokens->size());
    QCOMPARE(f.tensors().size(), expected.size());
    for (const auto& t : f.tensors()) {
      auto it = expected.find(t.name);
      QVERIFY2(it != expected.end(), ("unexpected tensor " + t.name).c_str());
      QVERIFY2(t.dims == it->second.dims, ("dims of " + t.name).c_str());
      QVERIFY2(t.type == it->second.type, ("type of " + t.name).c_str());
      QCOMPARE(t.offset % 32, 0ull);
    }
    checkWeights(f, s);
  }

  // The committed golden files (tests/data/golden, read by the Python reference)
  // are exactly what the generator writes today: a change to the generator or the
  // vocabulary builder that alters them must regenerate them on purpose.
  void goldenFilesUpToDate_data() {
    tinySpecs_data();
    for (const auto& v : synth::tinyVariantNames()) QTest::newRow(v.c_str()) << QString::fromStdString(v);
  }
  void goldenFilesUpToDate() {
    QFETCH(QString, arch);
    const std::string path = std::string(MOECHAT_TEST_DATA) + "/golden/" + arch.toStdString() + ".gguf";
    std::ifstream in(path, std::ios::binary);
    if (!in) QSKIP("golden file absent");
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    QVERIFY2(file == bytesOf(synth::tinySpec(arch.toStdString())),
             ("regenerate " + path + " (moechat-cli gen-model --arch ...)").c_str());
  }

  void demo() {
    const GgufFile f = GgufFile::fromBytes(synth::demoModelBytes());
    QCOMPARE(*f.getString("general.name"), std::string("moechat demo (random weights)"));
    QCOMPARE(*f.getString("general.architecture"), std::string("llama"));
    QCOMPARE(*f.getString("tokenizer.ggml.model"), std::string("llama"));
  }

  void presets() {
    QCOMPARE(synth::presetNames().size(), size_t(12));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, synth::presetSpec("DS-3"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, synth::tinySpec("qwen35moe"));
    // DeepSeek-V2-Lite (config.json): MLA with a 512 latent and 64 rope dims.
    const auto ds2 = synth::presetSpec("DS-2");
    QCOMPARE(ds2.arch, std::string("deepseek2"));
    QCOMPARE(ds2.n_layer, 27);
    QCOMPARE(ds2.head_dim, 192);
    QCOMPARE(ds2.n_rot, 64);
    QCOMPARE(ds2.kv_lora, 512);
    QCOMPARE(ds2.v_head_dim, 128);
    QCOMPARE(ds2.q_lora, 0);
    // Rows of MODEL-SHAPES.md.
    const auto ds = synth::presetSpec("DS-1");
    QCOMPARE(ds.arch, std::string("deepseek"));
    QCOMPARE(ds.n_layer, 28);
    QCOMPARE(ds.n_embd, 2048);
    QCOMPARE(ds.n_ff_exp, 1408);
    QCOMPARE(ds.n_expert, 64);
    QCOMPARE(ds.n_expert_used, 6);
    QCOMPARE(ds.n_expert_shared, 2);
    QCOMPARE(ds.n_ff_shexp, 2816);
    QCOMPARE(ds.n_leading_dense, 1);
    QCOMPARE(ds.n_ff, 10944);
    QCOMPARE(ds.n_vocab_target, 102400);
    // DS-1 F16 expert = 3 x 2048 x 1408 x 2 bytes = 17.3 MB; 64 x 27 MoE layers = 29.9 GB.
    const uint64_t expert = 3 * gguf::rowBytes(ds.expert_type, ds.n_embd) * ds.n_ff_exp;
    QCOMPARE(expert, 3ull * 2048 * 1408 * 2);
    QCOMPARE(expert, 17301504ull);
    QVERIFY(std::abs(double(expert) * 64 * 27 / 1e9 - 29.9) < 0.05);

    const auto q3 = synth::presetSpec("Q3-30B");
    QCOMPARE(q3.arch, std::string("qwen3moe"));
    QCOMPARE(q3.n_layer, 48);
    QCOMPARE(q3.n_expert, 128);
    QCOMPARE(q3.n_expert_used, 8);
    QCOMPARE(q3.n_head, 32);
    QCOMPARE(q3.n_head_kv, 4);
    QCOMPARE(q3.head_dim, 128);
    QCOMPARE(q3.n_vocab_target, 151936);
    QCOMPARE(q3.expert_type, TensorType::BF16);
    // Q3-30B BF16 expert = 9.4 MB; all experts 58 GB.
    const uint64_t q3e = 3 * gguf::rowBytes(q3.expert_type, q3.n_embd) * q3.n_ff_exp;
    QVERIFY(std::abs(q3e / 1e6 - 9.4) < 0.05);
    QVERIFY(std::abs(q3e * 128.0 * 48 / 1e9 - 58) < 0.5);

    const auto qw2 = synth::presetSpec("QW-2");
    QCOMPARE(qw2.n_embd, 3584);
    QCOMPARE(qw2.n_ff_exp, 2560);
    QCOMPARE(qw2.n_ff_shexp, 20480);
    QCOMPARE(qw2.n_head_kv, 4);
    const auto mx = synth::presetSpec("Mixt");
    QCOMPARE(mx.arch, std::string("llama"));
    QCOMPARE(mx.n_ff_exp, 14336);
    QCOMPARE(mx.n_vocab_target, 32000);
    QCOMPARE(synth::presetSpec("Q3-235B").n_layer, 94);
    QCOMPARE(synth::presetSpec("OLMoE").n_vocab_target, 50304);
    QCOMPARE(synth::presetSpec("QW-1").n_expert, 60);
    // Every preset passes the generator's validation (writer built, nothing generated).
    for (const auto& n : synth::presetNames()) {
      SyntheticSpec s = synth::presetSpec(n);
      s.n_vocab_target = 1000;  // keep the vocabulary build cheap here
      synth::buildModel(s);
    }
  }

  void vocabPadding() {
    SyntheticSpec s = synth::tinySpec("qwen3moe");
    s.n_vocab_target = 3000;
    const GgufFile f = GgufFile::fromBytes(bytesOf(s));
    const auto tokens = *f.getStringArray("tokenizer.ggml.tokens");
    QCOMPARE(tokens.size(), size_t(3000));
    QCOMPARE(f.findTensor("token_embd.weight")->ne(1), 3000ull);
    const auto types = *f.getIntArray("tokenizer.ggml.token_type");
    QVERIFY(std::count(types.begin(), types.end(), 5ll) > 1000);  // unused placeholders
    QCOMPARE(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size());
  }

  void invalidSpecs() {
    SyntheticSpec s = synth::tinySpec("llama");
    s.expert_type = TensorType::Q4_0;
    s.n_ff_exp = 48;  // not a whole number of 32-blocks
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, synth::buildModel(s));
    s = synth::tinySpec("llama");
    s.n_expert_used = 9;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, synth::buildModel(s));
    s = synth::tinySpec("llama");
    s.arch = "deepseek2";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, synth::buildModel(s));
  }

  void kQuantSpecs() {
    // A tiny spec with K-quant experts needs rows of 256: buildModel refuses it as is,
    // fitToBlocks widens it, and the tiny specs themselves come back unchanged.
    SyntheticSpec s = synth::tinySpec("llama");
    s.expert_type = TensorType::Q4_K;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, synth::buildModel(s));
    s = synth::fitToBlocks(s);
    QCOMPARE(s.n_embd, 256);
    QCOMPARE(s.n_ff_exp, 256);
    QCOMPARE(s.head_dim, 16);  // attention stays F16: any width fits
    const auto f = GgufFile::fromBytes(synth::buildModel(s).toBytes());
    QCOMPARE(f.findTensor("blk.1.ffn_down_exps.weight")->type, TensorType::Q4_K);
    s = synth::tinySpec("deepseek");
    s.expert_type = TensorType::Q5_K;
    s.weight_type = TensorType::Q6_K;
    s = synth::fitToBlocks(s);
    QCOMPARE(s.n_ff_shexp, s.n_expert_shared * s.n_ff_exp);
    QCOMPARE((s.n_head * s.head_dim) % 256, 0);
    QCOMPARE(s.n_ff % 256, 0);
    synth::buildModel(s);  // valid
    for (const auto& arch : synth::supportedArchs()) {
      const SyntheticSpec t = synth::tinySpec(arch);
      const SyntheticSpec u = synth::fitToBlocks(t);
      QCOMPARE(u.n_embd, t.n_embd);
      QCOMPARE(u.n_ff_exp, t.n_ff_exp);
      QCOMPARE(u.n_ff, t.n_ff);
      QCOMPARE(u.n_ff_shexp, t.n_ff_shexp);
      QCOMPARE(u.head_dim, t.head_dim);
    }
    QCOMPARE(synth::parseWeightType("q4_k"), TensorType::Q4_K);
    QCOMPARE(synth::parseWeightType("Q6_K"), TensorType::Q6_K);
    QCOMPARE(synth::parseWeightType("bf16"), TensorType::BF16);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, synth::parseWeightType("iq2_xxs"));
  }

  // A medium model (tens of MB, tensors big enough for the multi-threaded fill)
  // written through the streaming path equals toBytes.
  void streamingWriteEqualsToBytes() {
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
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("medium.gguf").toStdString();
    synth::writeModel(s, path);
    const auto mem = bytesOf(s);
    QVERIFY(mem.size() > 10'000'000);
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    QCOMPARE(file.size(), mem.size());
    QVERIFY(file == mem);
    const GgufFile f = GgufFile::open(path);
    QCOMPARE(f.findTensor("blk.1.ffn_down_exps.weight")->dims, (std::vector<uint64_t>{256, 512, 32}));
  }
};

QTEST_APPLESS_MAIN(TestSynthetic)
#include "test_synthetic.moc"
