// ModelConfig and the model loader: each architecture's flags come from GGUF
// metadata, and every way a file can be wrong gets a message naming the problem.
#include <QtTest>

#include "engine_fixture.h"
#include "inference/routing.h"
#include "models/quant.h"

using namespace moe;

namespace {

gguf::GgufFile rebuilt(const synth::SyntheticSpec& spec, const std::function<void(gguf::GgufWriter&)>& edit) {
  auto w = synth::buildModel(spec);
  edit(w);
  return gguf::GgufFile::fromBytes(w.toBytes());
}

template <typename F>
QString errorOf(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  return "(no error)";
}

}  // namespace

class ModelConfigTest : public QObject {
  Q_OBJECT
 private slots:
  void flagsPerArchitecture() {
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
    };
    for (const auto& w : wants) {
      const auto spec = synth::tinySpec(w.arch);
      const auto c = ModelConfig::fromGguf(gguf::GgufFile::fromBytes(synth::buildModel(spec).toBytes()));
      QCOMPARE(c.arch_name, std::string(w.arch));
      QCOMPARE(c.rope_style, w.rope);
      QCOMPARE(c.qk_norm, w.qk);
      QCOMPARE(c.norm_topk_weights, w.norm_topk);
      QCOMPARE(c.shared_expert_gated, w.shexp_gated);
      QCOMPARE(c.isMoeLayer(0), !w.dense_first);
      QCOMPARE(c.n_expert, spec.n_expert);
      QCOMPARE(c.n_expert_used, spec.n_expert_used);
      QCOMPARE(c.head_dim, spec.head_dim);
      QCOMPARE(c.n_layer, spec.n_layer);
    }
  }

  void deepseekSharedExpertsAreFused() {
    const auto spec = synth::tinySpec("deepseek");
    const auto c = ModelConfig::fromGguf(gguf::GgufFile::fromBytes(synth::buildModel(spec).toBytes()));
    QCOMPARE(c.n_expert_shared, spec.n_expert_shared);
    QCOMPARE(c.n_ff_shexp, spec.n_expert_shared * spec.n_ff_exp);
    QCOMPARE(c.n_leading_dense, spec.n_leading_dense);
  }

  void glm4moeSkipsItsPredictionLayerAndBiasesTheRouter() {
    auto backend = makeCpuBackend(1);
    const auto model = Model::load(
        gguf::GgufFile::fromBytes(synth::buildModel(synth::tinySpec("glm4moe")).toBytes()), *backend);
    const ModelConfig& c = model->config();
    QCOMPARE(c.n_layer, 3);  // block_count 4 = 3 run + 1 next-token-prediction layer
    QCOMPARE(c.n_nextn, 1);
    QCOMPARE(int(c.gating), int(GatingFunc::Sigmoid));
    QVERIFY(c.norm_topk_weights);
    QCOMPARE(c.expert_weights_scale, 1.5f);
    QCOMPARE(c.n_leading_dense, 1);
    QCOMPARE(c.n_ff_shexp, 32);
    QCOMPARE(c.n_rot, 8);
    QCOMPARE(int(c.rope_style), int(RopeStyle::Neox));
    QCOMPARE(int(model->weights().layers.size()), 3);
    QVERIFY(model->weights().layers[0].expert_bias.empty());  // the dense layer
    QCOMPARE(int(model->weights().layers[1].expert_bias.size()), 8);
    QCOMPARE(int(model->hostExperts().size()), 3);
  }

  void gptOssAlternatesWindowsAndScalesRope() {
    auto backend = makeCpuBackend(1);
    const auto model = Model::load(
        gguf::GgufFile::fromBytes(synth::buildModel(synth::tinySpec("gpt-oss")).toBytes()), *backend);
    const ModelConfig& c = model->config();
    QCOMPARE(c.sliding_window, 4);
    QCOMPARE(c.windowOf(0), 4);  // even layers in the window, odd ones see everything
    QCOMPARE(c.windowOf(1), 0);
    QCOMPARE(c.windowOf(2), 4);
    QVERIFY(c.yarn.active());
    QCOMPARE(c.yarn.factor, 4.0f);
    QCOMPARE(c.yarn.orig_ctx, 64);
    QVERIFY(c.expert_biases && c.clamped_swiglu);
    QVERIFY(c.norm_topk_weights);  // softmax over the chosen k
    const auto& L = model->weights().layers[1];
    QVERIFY(L.attn_sinks && L.bo && L.router_bias && L.exp_gate_bias && L.exp_up_bias && L.exp_down_bias);
    QCOMPARE(QString(chatFamilyName(model->chatFamily())), QString("harmony"));
  }

  void unknownRopeScalingIsNamed() {
    auto w = synth::buildModel(synth::tinySpec("llama"));
    w.setString("llama.rope.scaling.type", "longrope");
    auto backend = makeCpuBackend(1);
    const auto msg = errorOf([&] { Model::load(gguf::GgufFile::fromBytes(w.toBytes()), *backend); });
    QVERIFY2(msg.contains("longrope") && msg.contains("not supported"), qPrintable(msg));
  }

  void selectionBiasChoosesButDoesNotWeigh() {
    // Sigmoid scores of logits {2, 1, 0, -1}: expert 0 and 1 lead; a bias of +1 on
    // expert 3 makes it chosen, with its unbiased score as weight.
    const float logits[4] = {2.0f, 1.0f, 0.0f, -1.0f};
    const float bias[4] = {0.0f, 0.0f, 0.0f, 1.0f};
    RoutingRule rule{4, 2, GatingFunc::Sigmoid, false, 2.0f};
    int ids[2];
    float w[2];
    routeToken(logits, rule, ids, w);
    QCOMPARE(ids[0], 0);
    QCOMPARE(ids[1], 1);
    rule.selection_bias = bias;
    routeToken(logits, rule, ids, w);
    QCOMPARE(ids[0], 3);  // 1/(1+e) + 1 = 1.269 > sigmoid(2) = 0.881
    QCOMPARE(ids[1], 0);
    QCOMPARE(w[0], float(2.0 / (1.0 + std::exp(1.0))));
    QCOMPARE(w[1], float(2.0 / (1.0 + std::exp(-2.0))));
  }

  void unsupportedArchitectureIsNamed() {
    gguf::GgufWriter w;
    w.setString("general.architecture", "qwen35moe");
    const auto msg = errorOf([&] { ModelConfig::fromGguf(gguf::GgufFile::fromBytes(w.toBytes())); });
    QVERIFY2(msg.contains("unsupported architecture 'qwen35moe'") && msg.contains("deepseek2"),
             qPrintable(msg));
  }

  void missingKeyIsNamed() {
    gguf::GgufWriter w;
    w.setString("general.architecture", "olmoe");
    w.setUint32("olmoe.block_count", 2);
    const auto msg = errorOf([&] { ModelConfig::fromGguf(gguf::GgufFile::fromBytes(w.toBytes())); });
    QVERIFY2(msg.contains("olmoe.embedding_length"), qPrintable(msg));
  }

  void splitModelGetsAPlainMessage() {
    auto f = rebuilt(synth::tinySpec("qwen3moe"), [](gguf::GgufWriter& w) {
      w.setValue("split.no", gguf::Value::ofUint(gguf::ValueType::U16, 0));
      w.setValue("split.count", gguf::Value::ofUint(gguf::ValueType::U16, 3));
    });
    const auto msg = errorOf([&] { ModelConfig::fromGguf(f); });
    QVERIFY2(msg.contains("shard 1 of 3") && msg.contains("--merge"), qPrintable(msg));
  }

  void denseModelIsRejected() {
    auto f =
        rebuilt(synth::tinySpec("llama"), [](gguf::GgufWriter& w) { w.setUint32("llama.expert_count", 0); });
    QVERIFY(errorOf([&] { ModelConfig::fromGguf(f); }).contains("not a Mixture-of-Experts"));
  }

  void wrongKeyTypeIsNamed() {
    auto f = rebuilt(synth::tinySpec("llama"),
                     [](gguf::GgufWriter& w) { w.setString("llama.block_count", "two"); });
    QVERIFY(errorOf([&] { ModelConfig::fromGguf(f); }).contains("llama.block_count"));
  }

  void missingTensorIsNamed() {
    auto spec = synth::tinySpec("qwen2moe");
    // A file whose architecture says qwen3moe lacks the QK-norm tensors.
    auto f = rebuilt(spec, [](gguf::GgufWriter& w) { w.setString("general.architecture", "qwen3moe"); });
    auto backend = makeCpuBackend(1);
    const auto msg = errorOf([&] { Model::load(std::move(f), *backend); });
    QVERIFY2(msg.contains("lacks required key") || msg.contains("lacks tensor"), qPrintable(msg));
  }

  void headerProductsAreBoundedIn64Bits() {
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
      QVERIFY2(msg.contains(c.expected) && msg.contains("supported maximum"), qPrintable(msg));
    }
  }

  void uncomputableTypeIsNamed() {
    // An IQ2_XXS expert tensor opens (the reader knows its block size) but cannot be
    // computed (the grid-coded IQ2/IQ3 types are not).
    auto backend = makeCpuBackend(1);
    const auto msg =
        errorOf([&] { Model::load(gguf::GgufFile::fromBytes(tinyModelWithUncomputedExperts()), *backend); });
    QVERIFY2(msg.contains("blk.0.ffn_gate_exps.weight") && msg.contains("IQ2_XXS") &&
                 msg.contains("cannot compute"),
             qPrintable(msg));
    // Described, not run: `info` loads it with Purpose::Describe.
    auto described = Model::load(gguf::GgufFile::fromBytes(tinyModelWithUncomputedExperts()), *backend,
                                 Model::Purpose::Describe);
    QCOMPARE(described->hostExperts()[0][0].gate.type, gguf::TensorType::IQ2_XXS);
  }
};

QTEST_APPLESS_MAIN(ModelConfigTest)
#include "test_model_config.moc"
