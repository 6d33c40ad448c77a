// The skip-gate predictor, measured: on a synthetic qwen3moe-style model of 8
// layers (random weights, real structure: the residual stream changes slowly,
// the gate is a fixed function of it), how many of the experts layer L+d really
// chooses are among the top-k that L+d's router picks from layer L's input. A
// random guess finds k/N of them; the test states its margin over that.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "offload/skip_gate_predictor.h"
#include "support/engine_fixture.h"
#include "support/test_log.h"

using namespace moe;

namespace {

// Records each MoE layer's FFN input per token, and serves experts in place.
class RecordingSource : public ExpertSource {
 public:
  explicit RecordingSource(const std::vector<std::vector<ExpertWeights>>& t) : inner_(t) {}
  void onLayerInput(int layer, std::span<const float> hidden, int) override {
    auto& rows = inputs[layer];
    rows.insert(rows.end(), hidden.begin(), hidden.end());
  }
  std::vector<ExpertRef> acquire(int layer, std::span<const int> e) override {
    return inner_.acquire(layer, e);
  }
  void release(int layer) override { inner_.release(layer); }
  std::map<int, std::vector<float>> inputs;  // layer -> [token][n_embd]

 private:
  ResidentExpertSource inner_;
};

struct Trace {
  std::map<int, std::vector<float>> inputs;  // layer -> [token][n_embd]
  std::map<int, std::vector<int>> chosen;    // layer -> [token][k]
  int n_tokens = 0;
};

Trace traceOf(EngineFixture& f, int n_tokens) {
  RecordingSource source(f.model->hostExperts());
  auto t = f.transformer(512, &source);
  Trace tr;
  t->setRoutingObserver([&](const RoutingEvent& ev) {
    auto& c = tr.chosen[ev.layer];
    c.insert(c.end(), ev.experts.begin(), ev.experts.end());
  });
  std::vector<int32_t> tokens;
  for (int i = 0; i < n_tokens; ++i) tokens.push_back((11 + 37 * i + i * i) % f.model->config().n_vocab);
  std::vector<float> logits;
  t->forward(tokens, logits);
  tr.inputs = source.inputs;
  tr.n_tokens = n_tokens;
  return tr;
}

double skipGateAccuracy(EngineFixture& f, const Trace& tr, int distance) {
  const auto& c = f.model->config();
  SkipGatePredictor p(*f.model);
  double sum = 0;
  int count = 0;
  for (int layer = 0; layer + distance < c.n_layer; ++layer) {
    const int target = layer + distance;
    if (!tr.inputs.count(layer) || !tr.chosen.count(target)) continue;
    for (int t = 0; t < tr.n_tokens; ++t) {
      const auto hidden = std::span(tr.inputs.at(layer)).subspan(size_t(t) * c.n_embd, c.n_embd);
      const auto predicted = p.predict(layer, target, hidden, 1, c.n_expert_used);
      const auto truth =
          std::span(tr.chosen.at(target)).subspan(size_t(t) * c.n_expert_used, c.n_expert_used);
      sum += predictionAccuracy(predicted, truth);
      ++count;
    }
  }
  return sum / count;
}

synth::SyntheticSpec deepSpec() {
  auto spec = synth::tinySpec("qwen3moe");  // 16 experts, top-4: random guessing finds 25%
  spec.n_layer = 8;
  return spec;
}

}  // namespace

TEST(Predictor, accuracyMetric) {
  const int predicted[] = {3, 1, 7};
  const int truth[] = {1, 2, 3, 4};
  ASSERT_DOUBLE_EQ(predictionAccuracy(predicted, truth), 0.5);
  ASSERT_DOUBLE_EQ(predictionAccuracy({}, truth), 0.0);
}

TEST(Predictor, sameLayerIsExact) {
  // Distance 0 is the gate itself: a sanity check of the predictor's arithmetic.
  EngineFixture f(deepSpec());
  const auto tr = traceOf(f, 64);
  ASSERT_DOUBLE_EQ(skipGateAccuracy(f, tr, 0), 1.0);
}

TEST(Predictor, beatsRandomAtStrideTwo) {
  EngineFixture f(deepSpec());
  const auto tr = traceOf(f, 64);
  const auto& c = f.model->config();
  const double random = double(c.n_expert_used) / c.n_expert;
  const double d1 = skipGateAccuracy(f, tr, 1), d2 = skipGateAccuracy(f, tr, 2);
  moe::test::info(
      "skip-gate accuracy on an 8-layer synthetic qwen3moe (16 experts, top-4), 64 tokens: "
      "distance 1 %.3f, distance 2 %.3f; random %.3f",
      d1, d2, random);
  ASSERT_TRUE(d1 >= d2);
  ASSERT_TRUE(d2 > random + 0.15) << "distance-2 accuracy " << d2;
}

TEST(Predictor, batchPredictionIsTheUnionByVotes) {
  EngineFixture f(deepSpec());
  const auto tr = traceOf(f, 8);
  const auto& c = f.model->config();
  SkipGatePredictor p(*f.model);
  const auto all = p.predict(0, 2, tr.inputs.at(0), 8, c.n_expert);
  ASSERT_TRUE(!all.empty() && int(all.size()) <= c.n_expert);
  for (int t = 0; t < 8; ++t) {  // every token's own top-k is in the batch's union
    const auto one = p.predict(0, 2, std::span(tr.inputs.at(0)).subspan(size_t(t) * c.n_embd, c.n_embd), 1,
                               c.n_expert_used);
    for (int e : one) ASSERT_TRUE(std::find(all.begin(), all.end(), e) != all.end());
  }
  ASSERT_EQ(int(p.predict(0, 2, tr.inputs.at(0), 8, 3).size()), 3);     // the budget caps it
  ASSERT_TRUE(p.predict(0, c.n_layer, tr.inputs.at(0), 8, 3).empty());  // no such layer
}

// On a GPU, weights() are device pointers the host cannot read: the predictor's
// routers come from hostRouter(), which is the file's own bytes of the same tensor.
TEST(Predictor, routersAreReadFromTheFile) {
  EngineFixture f(deepSpec());
  const auto& c = f.model->config();
  const auto& file = f.model->file();
  for (int il = 0; il < c.n_layer; ++il) {
    const WeightView& host = f.model->hostRouter(il);
    const auto* t = file.findTensor("blk." + std::to_string(il) + ".ffn_gate_inp.weight");
    ASSERT_TRUE(t != nullptr);
    const auto bytes = file.tensorData(*t);
    ASSERT_EQ(static_cast<const void*>(host.data), static_cast<const void*>(bytes.data()));
    ASSERT_EQ(host.rows, int64_t(c.n_expert));
    ASSERT_EQ(host.cols, int64_t(c.n_embd));
    ASSERT_TRUE(host.type == f.model->weights().layers[size_t(il)].router.type);
  }
}
