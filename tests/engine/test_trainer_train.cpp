// Training the learned predictor on traces of a synthetic qwen3moe model of 8
// layers (16 experts, top-4; random weights, real structure): deterministic for
// a seed, the prompt split is by prompt, the blobs round-trip, and on held-out
// prompts the learned MLPs are compared with skip-gate, token-based,
// previous-token and popularity: at distances 1 to 3 the learned set must beat every
// baseline overall and skip-gate at every layer, as docs/predictor.md reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "offload/learned_predictor.h"
#include "offload/offload_engine.h"
#include "offload/skip_gate_predictor.h"
#include "offload/trainer/engine_eval.h"
#include "offload/trainer/eval_predictor.h"
#include "offload/trainer/trace_collector.h"
#include "offload/trainer/train_predictor.h"
#include "support/engine_fixture.h"
#include "support/temp_dir.h"
#include "support/test_log.h"

using namespace moe;

namespace {

synth::SyntheticSpec deepSpec() {
  auto spec = synth::tinySpec("qwen3moe");
  spec.n_layer = 8;
  return spec;
}

// One trace of the built-in prompts per test run, shared by the test functions.
struct Fixture {
  moe::test::TempDir dir;
  EngineFixture engine{deepSpec()};
  std::string path = dir.file("q3.moetrace");
  Fixture() {
    TraceWriter w(path, traceHeaderFor(*engine.model, std::string(64, 'c'), "synthetic qwen3moe, 8 layers"));
    TraceOptions o;
    o.max_new_tokens = 4;
    collectTraces(*engine.model, *engine.backend, *engine.experts, builtinPrompts(), w, o);
  }
};

TrainOptions quick(uint64_t seed) {
  TrainOptions o;
  o.hidden = 64;
  o.max_epochs = 15;
  o.seed = seed;
  o.threads = 2;
  return o;
}

}  // namespace

class TrainerTrain : public ::testing::Test {
 protected:
  static inline std::unique_ptr<Fixture> fx_;
  static inline std::unique_ptr<TraceReader> trace_;
  static inline PredictorSet
      set_;  // quick(1) at distance 2, trained once (the tests also run under ASan, unoptimised)
  static inline bool ready_ = false;  // SetUpTestSuite ran to its end

  static void SetUpTestSuite() {
    fx_ = std::make_unique<Fixture>();
    trace_ = std::make_unique<TraceReader>(fx_->path);
    ASSERT_EQ(trace_->prompts().size(), builtinPrompts().size());
    set_ = trainPredictors(*trace_, quick(1)).set;
    ready_ = true;
  }
  static void TearDownTestSuite() {
    set_ = PredictorSet();
    trace_.reset();
    fx_.reset();
    ready_ = false;
  }
  // A failed suite set-up fails every case rather than running them on a half-made
  // fixture.
  void SetUp() override { ASSERT_TRUE(ready_) << "the suite's set-up (SetUpTestSuite) failed"; }
};

TEST_F(TrainerTrain, splitIsByPromptAndDeterministic) {
  const auto a = splitPrompts(trace_->prompts(), 7, 0.1, 0.1),
             b = splitPrompts(trace_->prompts(), 7, 0.1, 0.1);
  ASSERT_EQ(a.train, b.train);
  ASSERT_EQ(a.test, b.test);
  ASSERT_EQ(a.val.size(), size_t(9));  // 10% of 90 prompts each
  ASSERT_EQ(a.test.size(), size_t(9));
  std::vector<int> all = a.train;
  all.insert(all.end(), a.val.begin(), a.val.end());
  all.insert(all.end(), a.test.begin(), a.test.end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all, trace_->prompts());  // disjoint and complete
  ASSERT_TRUE(splitPrompts(trace_->prompts(), 8, 0.1, 0.1).test != a.test);
  ASSERT_THROW(splitPrompts({1, 2}, 1, 0.1, 0.1), std::invalid_argument);
}

TEST_F(TrainerTrain, deterministicForASeed) {
  auto o = quick(1);
  o.threads = 1;  // the thread count does not change the result
  ASSERT_TRUE(trainPredictors(*trace_, o).set.toBytes() == set_.toBytes());
  o = quick(2);
  o.max_epochs = 15;
  o.patience = 1;
  auto other = quick(1);
  other.max_epochs = 1;
  other.patience = 1;
  ASSERT_TRUE(trainPredictors(*trace_, o).set.toBytes() != trainPredictors(*trace_, other).set.toBytes());
}

TEST_F(TrainerTrain, setAndBlobRoundTrip) {
  const auto& set = set_;
  ASSERT_EQ(int(set.layers.size()), 6);  // layers 0..5 predict 2..7
  const auto back = PredictorSet::fromBytes(set.toBytes());
  ASSERT_TRUE(back.toBytes() == set.toBytes());
  ASSERT_EQ(back.test_prompts, set.test_prompts);
  auto blob = set.layers[0].toBlob();
  ASSERT_TRUE(MlpPredictor::fromBlob(blob).toBlob() == blob);
  blob.pop_back();
  ASSERT_THROW(MlpPredictor::fromBlob(blob), PredictorFormatError);
  blob = set.layers[0].toBlob();
  blob[4] = 9;  // another format version
  ASSERT_THROW(MlpPredictor::fromBlob(blob), PredictorFormatError);
  ASSERT_THROW(LearnedPredictor(set, 32, 16), std::invalid_argument);  // another model's shape
}

TEST_F(TrainerTrain, cancelAndBadOptions) {
  std::atomic<bool> cancel{true};
  const auto r = trainPredictors(*trace_, quick(1), {}, &cancel);
  ASSERT_TRUE(r.cancelled);
  ASSERT_TRUE(r.set.layers.empty());
  auto o = quick(1);
  o.distance = 4;
  ASSERT_THROW(trainPredictors(*trace_, o), std::invalid_argument);
  int epochs_seen = 0, layers_done = 0;
  std::atomic<bool> stop{false};
  const auto part = trainPredictors(
      *trace_, quick(1),
      [&](const TrainProgress& p) {
        if (p.layer_done)
          ++layers_done;
        else
          ++epochs_seen;
        if (layers_done == 2) stop = true;
      },
      &stop);
  ASSERT_TRUE(part.cancelled);
  ASSERT_TRUE(epochs_seen > 0);
  ASSERT_TRUE(part.set.layers.size() >= 2 && part.set.layers.size() < 6);
}

TEST_F(TrainerTrain, heldOutAccuracyAgainstBaselines) {
  for (int distance : {1, 2, 3}) {
    auto o = quick(1);
    o.distance = distance;
    const auto set = distance == 2 ? set_ : trainPredictors(*trace_, o).set;
    SkipGatePredictor skip(*fx_->engine.model);
    const EvalReport r = evaluatePredictorSet(*trace_, set, &skip);
    moe::test::info("distance %d on synthetic qwen3moe (8 layers, 16 experts, top-4), %d test prompts:\n%s",
                    distance, r.test_prompts, evalReportText(r).c_str());
    const EvalScores& s = r.overall.acc;
    ASSERT_DOUBLE_EQ(s.random, 0.25);
    ASSERT_TRUE(r.overall.tokens > 200);
    ASSERT_TRUE(s.learned > s.random + 0.25) << s.learned;
    // What docs/predictor.md says of this model: the learned predictor beats every
    // baseline overall and skip-gate at every layer, at every distance (training is
    // seeded: the same figures every run; the closest, layer 4 -> 5 at distance 1, by
    // 12 tokens of 433). Against previous-token one layer is within 3 tokens (0 -> 3 at
    // distance 3): reported in the table, not asserted.
    for (const auto& [name, baseline] : {std::pair{"skip-gate", s.skip_gate},
                                         {"token-based", s.token_based},
                                         {"previous-token", s.previous_token},
                                         {"popularity", s.popularity}})
      EXPECT_GT(s.learned, baseline) << "distance " << distance << ": learned against " << name;
    for (const auto& l : r.layers)
      EXPECT_GT(l.acc.learned, l.acc.skip_gate)
          << "distance " << distance << ", layer " << l.layer << " -> " << l.target_layer;
  }
}

// proactive with the learned set in the offload engine (threaded transfer worker,
// plain copies): the engine's own Accuracy counter sees the learned predictor's
// quality; hit rate and GoodPred depend on timing and are printed, not asserted.
TEST_F(TrainerTrain, inTheEngine) {
  const auto& set = set_;
  EngineEvalOptions o;
  o.cache_slots = OffloadEngine::routedExperts(*fx_->engine.model) / 4;  // a quarter of the experts
  const auto rows = compareInEngine(*fx_->engine.model, *fx_->engine.backend, *trace_, set, o);
  ASSERT_EQ(rows.size(), size_t(3));
  moe::test::info("%s", engineEvalText(rows).c_str());
  for (const auto& r : rows) ASSERT_EQ(r.expert_uses, rows[0].expert_uses);  // the same routing in every run
  ASSERT_DOUBLE_EQ(rows[0].accuracy, 0.0);                                   // LRU predicts nothing
  ASSERT_TRUE(rows[2].accuracy > 0.25 + 0.2) << rows[2].accuracy;
  ASSERT_TRUE(rows[2].good_pred <= rows[2].accuracy);
}

TEST_F(TrainerTrain, forwardTimePerCall) {  // a measurement to report, not a test of speed
  const auto& set = set_;
  const auto& c = fx_->engine.model->config();
  LearnedPredictor p(set, c.n_embd, c.n_expert);
  const auto rows = trace_->read(trace_->prompts().front(), 0);
  const int calls = 2000;
  size_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    sink +=
        p.predict(0, 2, std::span(rows.hidden).subspan(size_t(i % rows.n) * c.n_embd, c.n_embd), 1, 4).size();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(sink, size_t(calls) * 4);
  moe::test::info("learned predictor forward (n_embd %d -> %d -> %d experts, 1 token): %.2f us per call",
                  c.n_embd, set.layers[0].n_hidden, c.n_expert, us / calls);
  // The size a Qwen3-30B-A3B-shaped model gets (n_embd 2048, 128 experts, top-8).
  PredictorSet big;
  MlpPredictor m;
  m.layer = 0, m.target_layer = 2, m.n_in = 2048, m.n_out = 128, m.k = 8;
  m.n_hidden = defaultHiddenWidth(m.n_in, m.n_out);
  m.w1.assign(size_t(m.n_hidden) * m.n_in, 0.01f), m.b1.assign(m.n_hidden, 0.1f);
  m.w2.assign(size_t(m.n_out) * m.n_hidden, 0.02f), m.b2.assign(m.n_out, 0.0f);
  big.layers.push_back(m);
  LearnedPredictor q3(big, 2048, 128);
  std::vector<float> x(2048, 0.5f);
  const auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) sink += q3.predict(0, 2, x, 1, 8).size();
  const double us_big =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
  moe::test::info("at Qwen3-30B-A3B size (2048 -> %d -> 128, %lld parameters): %.1f us per call", m.n_hidden,
                  (long long)m.parameterCount(), us_big / 200);
  ASSERT_TRUE(p.predict(0, 3, rows.hidden, 1, 4).empty());  // another distance: none
  ASSERT_TRUE(p.predict(6, 8, rows.hidden, 1, 4).empty());  // no predictor there
  const auto batch = p.predict(0, 2, rows.hidden, rows.n, 16);
  ASSERT_TRUE(batch.size() >= 4 && batch.size() <= 16);  // the union of the tokens' top-4
  for (int t = 0; t < rows.n; ++t)
    for (int e : p.predict(0, 2, std::span(rows.hidden).subspan(size_t(t) * c.n_embd, c.n_embd), 1, 4))
      ASSERT_TRUE(std::find(batch.begin(), batch.end(), e) != batch.end());
}
