// ModelConfig and the model loader: each architecture's flags come from GGUF
// metadata, and every way a file can be wrong gets a message naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "inference/routing.h"
#include "quant/quant.h"
#include "support/engine_fixture.h"

using namespace moe;

namespace {

gguf::GgufFile rebuilt(const synth::SyntheticSpec& spec, const std::function<void(gguf::GgufWriter&)>& edit) {
  auto w = synth::buildModel(spec);
  edit(w);
  return gguf::GgufFile::fromBytes(w.toBytes());
}

template <typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(ModelConfig, flagsPerArchitecture) {
  struct Want {
    const char* arch;
    RopeStyle rope;
    QkNorm qk;
    bool norm_topk;
    bool shexp_gated;
    bool dense_first;
  };
  const Want wants[] = {
      {"llama", RopeStyle::Norm, QkNorm::None, true, false, false},
      {"qwen2moe", RopeStyle::Neox, QkNorm::None, false, true, false},
      {"qwen3moe", RopeStyle::Neox, QkNorm::PerHead, true, false, false},
      {"deepseek", RopeStyle::Norm, QkNorm::None, false, false, true},
      {"olmoe", RopeStyle::Neox, QkNorm::Whole, false, false, false},
      {"minimax-m2", RopeStyle::Neox, QkNorm::Whole, true, false, false},
  };
  for (const auto& w : wants) {
    const auto spec = synth::tinySpec(w.arch);
    const auto c = ModelConfig::fromGguf(gguf::GgufFile::fromBytes(synth::buildModel(spec).toBytes()));
    ASSERT_EQ(c.arch_name, std::string(w.arch));
    ASSERT_EQ(c.rope_style, w.rope);
    ASSERT_EQ(c.qk_norm, w.qk);
    ASSERT_EQ(c.norm_topk_weights, w.norm_topk);
    ASSERT_EQ(c.shared_expert_gated, w.shexp_gated);
    ASSERT_EQ(c.isMoeLayer(0), !w.dense_first);
    ASSERT_EQ(c.n_expert, spec.n_expert);
    ASSERT_EQ(c.n_expert_used, spec.n_expert_used);
    ASSERT_EQ(c.head_dim, spec.head_dim);
    ASSERT_EQ(c.n_layer, spec.n_layer);
  }
}

TEST(ModelConfig, deepseekSharedExpertsAreFused) {
  const auto spec = synth::tinySpec("deepseek");
  const auto c = ModelConfig::fromGguf(gguf::GgufFile::fromBytes(synth::buildModel(spec).toBytes()));
  ASSERT_EQ(c.n_expert_shared, spec.n_expert_shared);
  ASSERT_EQ(c.n_ff_shexp, spec.n_expert_shared * spec.n_ff_exp);
  ASSERT_EQ(c.n_leading_dense, spec.n_leading_dense);
}

TEST(ModelConfig, glm4moeSkipsItsPredictionLayerAndBiasesTheRouter) {
  auto backend = makeCpuBackend(1);
  const auto model = Model::load(
      gguf::GgufFile::fromBytes(synth::buildModel(synth::tinySpec("glm4moe")).toBytes()), *backend);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.n_layer, 3);  // block_count 4 = 3 run + 1 next-token-prediction layer
  ASSERT_EQ(c.n_nextn, 1);
  ASSERT_EQ(int(c.gating), int(GatingFunc::Sigmoid));
  ASSERT_TRUE(c.norm_topk_weights);
  ASSERT_FLOAT_EQ(c.expert_weights_scale, 1.5f);
  ASSERT_EQ(c.n_leading_dense, 1);
  ASSERT_EQ(c.n_ff_shexp, 32);
  ASSERT_EQ(c.n_rot, 8);
  ASSERT_EQ(int(c.rope_style), int(RopeStyle::Neox));
  ASSERT_EQ(int(model->weights().layers.size()), 3);
  ASSERT_TRUE(model->weights().layers[0].expert_bias.empty());  // the dense layer
  ASSERT_EQ(int(model->weights().layers[1].expert_bias.size()), 8);
  ASSERT_EQ(int(model->hostExperts().size()), 3);
}

TEST(ModelConfig, minimaxM2ReadsWideHeadsPartialRopeAndBiasedSigmoidRouter) {
  auto backend = makeCpuBackend(1);
  const auto spec = synth::tinySpec("minimax-m2");
  const auto model = Model::load(gguf::GgufFile::fromBytes(synth::buildModel(spec).toBytes()), *backend);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.arch, Arch::MinimaxM2);
  ASSERT_EQ(c.head_dim, 32);  // attention.key_length, not embedding_length / head_count = 16
  ASSERT_EQ(c.qWidth(), 128);
  ASSERT_EQ(c.n_rot, 16);  // half of each head rotary
  ASSERT_EQ(int(c.qk_norm), int(QkNorm::Whole));
  ASSERT_EQ(int(c.gating), int(GatingFunc::Sigmoid));
  ASSERT_TRUE(c.norm_topk_weights);
  ASSERT_FLOAT_EQ(c.expert_weights_scale, 1.0f);
  ASSERT_EQ(c.n_expert_shared, 0);
  ASSERT_EQ(c.n_leading_dense, 0);
  for (const auto& L : model->weights().layers) {
    ASSERT_EQ(int(L.expert_bias.size()), spec.n_expert);
    ASSERT_TRUE(L.q_norm && L.k_norm);
  }
  // The file's expert_weights_norm does not switch llama.cpp's renormalisation off, nor
  // does an expert_weights_scale scale the weights (its minimax-m2 loader reads neither).
  auto f = rebuilt(spec, [](gguf::GgufWriter& w) {
    w.setBool("minimax-m2.expert_weights_norm", false);
    w.setFloat32("minimax-m2.expert_weights_scale", 2.5f);
  });
  ASSERT_TRUE(ModelConfig::fromGguf(f).norm_topk_weights);
  ASSERT_FLOAT_EQ(ModelConfig::fromGguf(f).expert_weights_scale, 1.0f);
}

TEST(ModelConfig, minimaxM2MissingOrInconsistentKeysAreNamed) {
  // The keys llama.cpp's converter always writes for minimax-m2: each one missing is named.
  const char* required[] = {"attention.key_length", "rope.dimension_count", "expert_feed_forward_length"};
  for (const char* missing : required) {
    gguf::GgufWriter w;
    w.setString("general.architecture", "minimax-m2");
    for (const char* k : {"block_count", "embedding_length", "attention.head_count",
                          "attention.head_count_kv", "expert_count", "expert_used_count",
                          "attention.key_length", "rope.dimension_count", "expert_feed_forward_length"})
      if (std::string(k) != missing) w.setUint32(std::string("minimax-m2.") + k, 8);
    const auto msg = errorOf([&] { ModelConfig::fromGguf(gguf::GgufFile::fromBytes(w.toBytes())); });
    ASSERT_TRUE(contains(msg, std::string("minimax-m2.") + missing)) << msg;
  }
  // More rotary dimensions than a head has.
  auto f = rebuilt(synth::tinySpec("minimax-m2"),
                   [](gguf::GgufWriter& w) { w.setUint32("minimax-m2.rope.dimension_count", 64); });
  ASSERT_TRUE(contains(errorOf([&] { ModelConfig::fromGguf(f); }), "rope.dimension_count"));
}

TEST(ModelConfig, gptOssAlternatesWindowsAndScalesRope) {
  auto backend = makeCpuBackend(1);
  const auto model = Model::load(
      gguf::GgufFile::fromBytes(synth::buildModel(synth::tinySpec("gpt-oss")).toBytes()), *backend);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.sliding_window, 4);
  ASSERT_EQ(c.windowOf(0), 4);  // even layers in the window, odd ones see everything
  ASSERT_EQ(c.windowOf(1), 0);
  ASSERT_EQ(c.windowOf(2), 4);
  ASSERT_TRUE(c.yarn.active());
  ASSERT_FLOAT_EQ(c.yarn.factor, 4.0f);
  ASSERT_EQ(c.yarn.orig_ctx, 64);
  ASSERT_TRUE(c.expert_biases && c.clamped_swiglu);
  ASSERT_TRUE(c.norm_topk_weights);  // softmax over the chosen k
  const auto& L = model->weights().layers[1];
  ASSERT_TRUE(L.attn_sinks && L.bo && L.router_bias && L.exp_gate_bias && L.exp_up_bias && L.exp_down_bias);
  ASSERT_EQ(std::string(chatFamilyName(model->chatFamily())), std::string("harmony"));
}

TEST(ModelConfig, unknownRopeScalingIsNamed) {
  auto w = synth::buildModel(synth::tinySpec("llama"));
  w.setString("llama.rope.scaling.type", "longrope");
  auto backend = makeCpuBackend(1);
  const auto msg = errorOf([&] { Model::load(gguf::GgufFile::fromBytes(w.toBytes()), *backend); });
  ASSERT_TRUE(contains(msg, "longrope") && contains(msg, "not supported")) << msg;
}

TEST(ModelConfig, selectionBiasChoosesButDoesNotWeigh) {
  // Sigmoid scores of logits {2, 1, 0, -1}: expert 0 and 1 lead; a bias of +1 on
  // expert 3 makes it chosen, with its unbiased score as weight.
  const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
  const float bias[4] = {0.0f, 0.0f, 0.0f, 1.0f};
  RoutingRule rule{4, 2, GatingFunc::Sigmoid, false, 2.0f};
  int ids[2];
  float w[2];
  routeToken(logits, rule, ids, w);
  ASSERT_EQ(ids[0], 0);
  ASSERT_EQ(ids[1], 1);
  rule.selection_bias = bias;
  routeToken(logits, rule, ids, w);
  ASSERT_EQ(ids[0], 3);  // 1/(1+e) + 1 = 1.269 > sigmoid(2) = 0.881
  ASSERT_EQ(ids[1], 0);
  ASSERT_FLOAT_EQ(w[0], float(2.0 / (1.0 + std::exp(1.0))));
  ASSERT_FLOAT_EQ(w[1], float(2.0 / (1.0 + std::exp(-2.0))));
}

// Router logits with NaN (a broken forward pass, a copy read before it landed): the
// choice stays k distinct experts in range, the NaN ones last (with NaN the sort's
// comparison was no ordering and could return an index past the experts).
TEST(ModelConfig, nanRouterLogitsStillChooseExpertsInRange) {
  const float nan = std::nanf("");
  for (const GatingFunc g : {GatingFunc::Softmax, GatingFunc::Sigmoid}) {
    const float logits[8] = {nan, 0.5f, nan, -1.0f, nan, 2.0f, nan, 0.0f};
    RoutingRule rule{8, 3, g, true, 1.0f};
    int ids[3];
    float w[3];
    routeToken(logits, rule, ids, w);
    for (const int id : ids) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 8);
    }
    ASSERT_TRUE(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
    if (g == GatingFunc::Sigmoid) {  // the finite logits win (softmax's max is NaN: every weight is)
      ASSERT_EQ(ids[0], 5);
      ASSERT_EQ(ids[1], 1);
      ASSERT_EQ(ids[2], 7);
    }
  }
  const float all_nan[4] = {nan, nan, nan, nan};
  RoutingRule rule{4, 2, GatingFunc::Softmax, true, 1.0f};
  int ids[2];
  float w[2];
  routeToken(all_nan, rule, ids, w);
  ASSERT_TRUE(ids[0] >= 0 && ids[0] < 4 && ids[1] >= 0 && ids[1] < 4 && ids[0] != ids[1]);
}

TEST(ModelConfig, unsupportedArchitectureIsNamed) {
  gguf::GgufWriter w;
  w.setString("general.architecture", "qwen3next");
  const auto msg = errorOf([&] { ModelConfig::fromGguf(gguf::GgufFile::fromBytes(w.toBytes())); });
  ASSERT_TRUE(contains(msg, "unsupported architecture 'qwen3next'") && contains(msg, "qwen35moe")) << msg;
}

TEST(ModelConfig, missingKeyIsNamed) {
  gguf::GgufWriter w;
  w.setString("general.architecture", "olmoe");
  w.setUint32("olmoe.block_count", 2);
  const auto msg = errorOf([&] { ModelConfig::fromGguf(gguf::GgufFile::fromBytes(w.toBytes())); });
  ASSERT_TRUE(contains(msg, "olmoe.embedding_length")) << msg;
}

TEST(ModelConfig, splitModelGetsAPlainMessage) {
  auto f = rebuilt(synth::tinySpec("qwen3moe"), [](gguf::GgufWriter& w) {
    w.setValue("split.no", gguf::Value::ofUint(gguf::ValueType::U16, 0));
    w.setValue("split.count", gguf::Value::ofUint(gguf::ValueType::U16, 3));
  });
  const auto msg = errorOf([&] { ModelConfig::fromGguf(f); });
  ASSERT_TRUE(contains(msg, "shard 1 of 3") && contains(msg, "--merge")) << msg;
}

TEST(ModelConfig, denseModelIsRejected) {
  auto f =
      rebuilt(synth::tinySpec("llama"), [](gguf::GgufWriter& w) { w.setUint32("llama.expert_count", 0); });
  ASSERT_TRUE(contains(errorOf([&] { ModelConfig::fromGguf(f); }), "not a Mixture-of-Experts"));
}

TEST(ModelConfig, wrongKeyTypeIsNamed) {
  auto f =
      rebuilt(synth::tinySpec("llama"), [](gguf::GgufWriter& w) { w.setString("llama.block_count", "two"); });
  ASSERT_TRUE(contains(errorOf([&] { ModelConfig::fromGguf(f); }), "llama.block_count"));
}

TEST(ModelConfig, missingTensorIsNamed) {
  auto spec = synth::tinySpec("qwen2moe");
  // A file whose architecture says qwen3moe lacks the QK-norm tensors.
  auto f = rebuilt(spec, [](gguf::GgufWriter& w) { w.setString("general.architecture", "qwen3moe"); });
  auto backend = makeCpuBackend(1);
  const auto msg = errorOf([&] { Model::load(std::move(f), *backend); });
  ASSERT_TRUE(contains(msg, "lacks required key") || contains(msg, "lacks tensor")) << msg;
}

TEST(ModelConfig, headerProductsAreBoundedIn64Bits) {
  // Each value below is allowed alone; their products overflow a 32-bit int (32769 x
  // 131072 wraps to 131072, 65536 x 65536 to 0) or size memory from a bare count.
  struct Case {
    const char* arch;
    std::function<void(gguf::GgufWriter&)> edit;
    const char* expected;
  };
  const Case cases[] = {
      {"olmoe",
       [](gguf::GgufWriter& w) {
         w.setUint32("olmoe.attention.head_count", 32769);
         w.setUint32("olmoe.attention.head_count_kv", 32769);
         w.setUint32("olmoe.attention.key_length", 131072);
         w.setUint32("olmoe.attention.value_length", 131072);
       },
       "head_count x head dimension"},
      {"olmoe",
       [](gguf::GgufWriter& w) {
         w.setUint32("olmoe.attention.head_count", 65536);
         w.setUint32("olmoe.attention.head_count_kv", 65536);
         w.setUint32("olmoe.attention.key_length", 65536);
         w.setUint32("olmoe.attention.value_length", 65536);
       },
       "head_count x head dimension"},
      {"deepseek", [](gguf::GgufWriter& w) { w.setUint32("deepseek.expert_shared_count", 1u << 29); },
       "expert_shared_count x expert_feed_forward_length"},
      {"qwen3moe", [](gguf::GgufWriter& w) { w.setUint32("qwen3moe.block_count", 200000000); },
       "block_count"},
      {"llama", [](gguf::GgufWriter& w) { w.setUint32("llama.expert_count", 20000000); }, "expert_count"},
  };
  auto backend = makeCpuBackend(1);
  for (const Case& c : cases) {
    auto f = rebuilt(synth::tinySpec(c.arch), c.edit);
    const auto msg = errorOf([&] { Model::load(std::move(f), *backend); });
    ASSERT_TRUE(contains(msg, c.expected) && contains(msg, "supported maximum")) << msg;
  }
}

TEST(ModelConfig, uncomputableTypeIsNamed) {
  // An I16 expert tensor opens (the reader knows its element size) but cannot be
  // computed (the integer types are not).
  auto backend = makeCpuBackend(1);
  const auto msg =
      errorOf([&] { Model::load(gguf::GgufFile::fromBytes(tinyModelWithUncomputedExperts()), *backend); });
  ASSERT_TRUE(contains(msg, "blk.0.ffn_gate_exps.weight") && contains(msg, "I16") &&
              contains(msg, "cannot compute"))
      << msg;
  // Described, not run: `info` loads it with Purpose::Describe.
  auto described = Model::load(gguf::GgufFile::fromBytes(tinyModelWithUncomputedExperts()), *backend,
                               Model::Purpose::Describe);
  ASSERT_EQ(described->hostExperts()[0][0].gate.type, gguf::TensorType::I16);
}

TEST(ModelConfig, qwen35moeLayerKindsAndDeltaShape) {
  const auto spec = synth::tinySpec("qwen35moe");
  const auto c = ModelConfig::fromGguf(gguf::GgufFile::fromBytes(synth::buildModel(spec).toBytes()));
  ASSERT_EQ(c.arch, Arch::Qwen35Moe);
  ASSERT_EQ(c.n_layer, 4);  // the next-token-prediction layer is not run
  ASSERT_EQ(c.n_nextn, 1);
  // full_attention_interval 2: layers 1 and 3 attend, 0 and 2 are delta-net layers.
  ASSERT_TRUE(c.isRecurrentLayer(0) && !c.isRecurrentLayer(1) && c.isRecurrentLayer(2) &&
              !c.isRecurrentLayer(3));
  ASSERT_TRUE(c.attn_output_gate && c.shared_expert_gated && c.norm_topk_weights);
  ASSERT_EQ(c.qk_norm, QkNorm::PerHead);
  ASSERT_EQ(c.rope_style, RopeStyle::Neox);
  ASSERT_EQ(c.n_rot, 8);
  ASSERT_EQ(c.delta.conv_kernel, 4);
  ASSERT_EQ(c.delta.head_k, 16);
  ASSERT_EQ(c.delta.head_v, 16);
  ASSERT_EQ(c.delta.n_k_heads, 2);
  ASSERT_EQ(c.delta.n_v_heads, 4);
  ASSERT_EQ(c.delta.convChannels(), 2 * 32 + 64);
  ASSERT_EQ(c.n_ff_shexp, spec.n_ff_shexp);
}

TEST(ModelConfig, qwen35moeRecurrentLayerArrayWins) {
  // llama.cpp reads attention.recurrent_layers (one flag per block, MTP layers included)
  // before full_attention_interval.
  auto f = rebuilt(synth::tinySpec("qwen35moe"), [](gguf::GgufWriter& w) {
    std::vector<gguf::Value> flags;
    for (bool b : {true, true, true, false, false}) flags.push_back(gguf::Value::ofBool(b));
    w.setValue("qwen35moe.attention.recurrent_layers", gguf::Value::ofArray(gguf::ValueType::Bool, flags));
  });
  const auto c = ModelConfig::fromGguf(f);
  ASSERT_TRUE(c.isRecurrentLayer(0) && c.isRecurrentLayer(1) && c.isRecurrentLayer(2) &&
              !c.isRecurrentLayer(3));
  auto short_array = rebuilt(synth::tinySpec("qwen35moe"), [](gguf::GgufWriter& w) {
    w.setValue("qwen35moe.attention.recurrent_layers",
               gguf::Value::ofArray(gguf::ValueType::Bool, {gguf::Value::ofBool(true)}));
  });
  const auto msg = errorOf([&] { ModelConfig::fromGguf(short_array); });
  ASSERT_TRUE(contains(msg, "qwen35moe.attention.recurrent_layers")) << msg;
}

TEST(ModelConfig, qwen35moeBadLinearAttentionKeysAreNamed) {
  // Each is refused by name before anything is sized from it.
  struct Case {
    std::function<void(gguf::GgufWriter&)> edit;
    const char* expected;
  };
  const Case cases[] = {
      {[](gguf::GgufWriter& w) { w.setUint32("qwen35moe.ssm.conv_kernel", 0); }, "qwen35moe.ssm.conv_kernel"},
      {[](gguf::GgufWriter& w) { w.setUint32("qwen35moe.ssm.inner_size", 66); }, "qwen35moe.ssm.inner_size"},
      {[](gguf::GgufWriter& w) { w.setUint32("qwen35moe.ssm.state_size", 1u << 20); },
       "qwen35moe.ssm.state_size"},
      {[](gguf::GgufWriter& w) { w.setUint32("qwen35moe.ssm.time_step_rank", 3); },
       "qwen35moe.ssm.time_step_rank"},
      {[](gguf::GgufWriter& w) { w.setUint32("qwen35moe.full_attention_interval", 0); },
       "qwen35moe.full_attention_interval"},
      {[](gguf::GgufWriter& w) {
         w.setInt32Array("qwen35moe.rope.dimension_sections", {0, 0, 0, 4});
       },
       "qwen35moe.rope.dimension_sections"},
  };
  for (const Case& c : cases) {
    auto f = rebuilt(synth::tinySpec("qwen35moe"), c.edit);
    const auto msg = errorOf([&] { ModelConfig::fromGguf(f); });
    ASSERT_TRUE(contains(msg, c.expected)) << msg;
  }
  gguf::GgufWriter w;  // the keys of a file that lacks one of them
  w.setString("general.architecture", "qwen35moe");
  for (const char* k :
       {"block_count", "embedding_length", "attention.head_count", "expert_count", "expert_used_count",
        "ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank"})
    w.setUint32(std::string("qwen35moe.") + k, 4);
  const auto msg = errorOf([&] { ModelConfig::fromGguf(gguf::GgufFile::fromBytes(w.toBytes())); });
  ASSERT_TRUE(contains(msg, "qwen35moe.ssm.inner_size")) << msg;
}

// gemma4 (llama.cpp's gemma4 loader): per-layer kinds, head sizes and kv heads from
// the sliding-window pattern, the shared-KV layers' sources, the fixed flags.
TEST(ModelConfig, gemma4LayerShapesAndSharedKv) {
  const auto spec = synth::tinySpec("gemma4");
  const auto c = ModelConfig::fromGguf(gguf::GgufFile::fromBytes(synth::buildModel(spec).toBytes()));
  ASSERT_TRUE(c.isGemma4());
  ASSERT_EQ(c.n_layer, 6);
  const int want_window[] = {8, 8, 0, 8, 8, 0};
  const int want_head[] = {16, 16, 32, 16, 16, 32};
  const int want_kv[] = {2, 2, 1, 2, 2, 1};
  const int want_source[] = {0, 1, 2, 1, 1, 2};  // the last 3 share: n_kv 3, sliding 3 - 2, global 3 - 1
  for (int l = 0; l < 6; ++l) {
    EXPECT_EQ(c.windowOf(l), want_window[l]) << l;
    EXPECT_EQ(c.headDimOf(l), want_head[l]) << l;
    EXPECT_EQ(c.nHeadKvOf(l), want_kv[l]) << l;
    EXPECT_EQ(c.kvSourceOf(l), want_source[l]) << l;
    EXPECT_TRUE(c.isMoeLayer(l));
  }
  EXPECT_EQ(c.head_dim, 32);  // the largest, for the scratch
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.nRotOf(2), 32);
  EXPECT_EQ(c.ropeBaseOf(0), 10000.0f);
  EXPECT_EQ(c.ropeBaseOf(2), 1000000.0f);
  EXPECT_EQ(c.attentionScale(), 1.0f);
  EXPECT_EQ(c.final_logit_softcap, 2.0f);
  EXPECT_EQ(c.n_ff, 48);
  EXPECT_TRUE(c.embedding_scaled && c.gelu_ffn && c.norm_topk_weights);
  EXPECT_EQ(c.rope_style, RopeStyle::Neox);
  EXPECT_EQ(c.qk_norm, QkNorm::PerHead);
}

TEST(ModelConfig, gemma4BadKeysAreNamed) {
  // Each is refused by name before anything is sized from it.
  struct Case {
    std::function<void(gguf::GgufWriter&)> edit;
    const char* expected;
  };
  auto flags = [](int n) {
    std::vector<gguf::Value> v;
    for (int i = 0; i < n; ++i) v.push_back(gguf::Value::ofBool(i % 3 != 2));
    return gguf::Value::ofArray(gguf::ValueType::Bool, v);
  };
  const Case cases[] = {
      {[&](gguf::GgufWriter& w) { w.setValue("gemma4.attention.sliding_window_pattern", flags(5)); },
       "gemma4.attention.sliding_window_pattern"},
      {[](gguf::GgufWriter& w) {
         w.setValue(
             "gemma4.attention.head_count_kv",
             gguf::Value::ofArray(gguf::ValueType::U32, {gguf::Value::ofUint(gguf::ValueType::U32, 2)}));
       },
       "gemma4.attention.head_count_kv"},
      {[](gguf::GgufWriter& w) { w.setUint32("gemma4.attention.head_count_kv", 3); }, "head_count_kv (3)"},
      {[](gguf::GgufWriter& w) { w.setUint32("gemma4.attention.key_length_swa", 1u << 21); },
       "key_length_swa"},
      {[](gguf::GgufWriter& w) { w.setUint32("gemma4.rope.dimension_count_swa", 18); },
       "gemma4.rope.dimension_count_swa"},
      {[](gguf::GgufWriter& w) { w.setUint32("gemma4.attention.shared_kv_layers", 6); },
       "gemma4.attention.shared_kv_layers"},
      {[](gguf::GgufWriter& w) { w.setUint32("gemma4.attention.shared_kv_layers", 2); },
       "attention.shared_kv_layers = 2"},  // layer 4 would read layer 2, a global layer
      {[](gguf::GgufWriter& w) { w.setUint32("gemma4.embedding_length_per_layer_input", 16); },
       "gemma4.embedding_length_per_layer_input"},
      {[](gguf::GgufWriter& w) { w.setUint32("gemma4.attention.sliding_window", 0); },
       "gemma4.attention.sliding_window"},
      {[](gguf::GgufWriter& w) {
         std::vector<gguf::Value> ff;
         for (int i = 0; i < 6; ++i) ff.push_back(gguf::Value::ofUint(gguf::ValueType::U32, i < 3 ? 48 : 96));
         w.setValue("gemma4.feed_forward_length", gguf::Value::ofArray(gguf::ValueType::U32, ff));
       },
       "gemma4.feed_forward_length"},
  };
  for (const Case& c : cases) {
    auto f = rebuilt(synth::tinySpec("gemma4"), c.edit);
    const auto msg = errorOf([&] { ModelConfig::fromGguf(f); });
    EXPECT_TRUE(contains(msg, c.expected)) << msg;
  }
  gguf::GgufWriter w;  // a file without the sliding-window pattern
  w.setString("general.architecture", "gemma4");
  for (const char* k : {"block_count", "embedding_length", "attention.head_count", "expert_count",
                        "expert_used_count", "feed_forward_length", "attention.key_length"})
    w.setUint32(std::string("gemma4.") + k, 4);
  const auto msg = errorOf([&] { ModelConfig::fromGguf(gguf::GgufFile::fromBytes(w.toBytes())); });
  EXPECT_TRUE(contains(msg, "gemma4.attention.sliding_window_pattern")) << msg;
}
