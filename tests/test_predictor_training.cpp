// The app's predictor pipeline on the real demo model: measured trace rates
// and the estimate built on them, a trace cancelled part-way that keeps its
// complete prompts and resumes, training and the evaluation against the
// baselines, the trace file naming, and a trace of another model refused.
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/model_predictor.h"
#include "app/core/predictor_training.h"

using namespace moe;

class TestPredictorTraining : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

 private slots:
  void ratesAreMeasuredAndTheEstimateScales() {
    PredictorTraining t({}, {});
    QCOMPARE(t.modelSha256(), demoModelSha256());
    const TraceRates r = t.measureRates();
    QVERIFY(r.prefill_seconds_per_token > 0);
    QVERIFY(r.decode_seconds_per_token >= r.prefill_seconds_per_token);
    QVERIFY(r.measured_tokens > 0);
    QVERIFY(r.bytes_per_token > 0.5 && r.bytes_per_token < 16);
    const auto prompts = builtinPrompts();
    TraceOptions o;
    o.max_new_tokens = 4;
    const double ten = estimateTraceSeconds(r, prompts, 10, o);
    const double forty = estimateTraceSeconds(r, prompts, 40, o);
    QVERIFY(ten > 0);
    QVERIFY(forty > 2 * ten);
    o.max_new_tokens = 40;
    QVERIFY(estimateTraceSeconds(r, prompts, 10, o) > ten);
    QCOMPARE(estimateTraceSeconds(r, prompts, 0, o), 0.0);
  }

  void durationsReadAsEstimates() {
    QCOMPARE(durationText(0.2), std::string("under a second"));
    QCOMPARE(durationText(41.2), std::string("about 42 s"));
    QCOMPARE(durationText(180), std::string("about 3 min"));
    QCOMPARE(durationText(4800), std::string("about 1 h 20 min"));
  }

  void traceFilesAreKeyedByModelAndPrompts() {
    const std::string dir = dir_.path().toStdString();
    TraceOptions o;
    const auto a = traceFileFor(dir, demoModelSha256(), {"a", "b"}, o);
    QCOMPARE(traceFileFor(dir, demoModelSha256(), {"a", "b"}, o), a);
    QVERIFY(traceFileFor(dir, demoModelSha256(), {"a", "b", "c"}, o) != a);
    QVERIFY(traceFileFor(dir, demoModelSha256(), {"ab"}, o) != a);
    QVERIFY(traceFileFor(dir, std::string(64, '0'), {"a", "b"}, o) != a);
    o.max_new_tokens = 3;
    QVERIFY(traceFileFor(dir, demoModelSha256(), {"a", "b"}, o) != a);
  }

  void cancelledTraceResumesThenTrainsAndEvaluates() {
    PredictorTraining t({}, {});
    auto prompts = builtinPrompts();
    prompts.resize(12);
    TraceOptions o;
    o.max_new_tokens = 2;
    const std::string path = traceFileFor(dir_.path().toStdString() + "/traces", t.modelSha256(), prompts, o);
    QCOMPARE(t.tracedPrompts(path), 0);

    std::atomic<bool> cancel{false};
    std::vector<int> seen;
    const auto first = t.trace(
        prompts, o, path,
        [&](const TraceProgress& p) {
          seen.push_back(p.prompts_done);
          if (p.prompts_done == 3) cancel = true;
        },
        &cancel);
    QVERIFY(first.cancelled);
    QCOMPARE(seen.front(), 0);  // the first call comes before any prompt
    QCOMPARE(t.tracedPrompts(path), 3);

    cancel = false;
    seen.clear();
    const auto second = t.trace(
        prompts, o, path, [&](const TraceProgress& p) { seen.push_back(p.prompts_done); }, &cancel);
    QVERIFY(!second.cancelled);
    QCOMPARE(second.prompts_skipped, 3);
    QCOMPARE(second.prompts_traced, 9);
    QCOMPARE(seen.front(), 3);
    QCOMPARE(seen.back(), 12);
    QCOMPARE(t.tracedPrompts(path), 12);

    TrainOptions to;
    to.hidden = 32;
    to.max_epochs = 5;
    int layer_done = 0;
    const auto trained = t.train(
        path, to, [&](const TrainProgress& p) { layer_done += p.layer_done ? 1 : 0; }, nullptr);
    QVERIFY(!trained.cancelled);
    QVERIFY(!trained.set.layers.empty());
    QCOMPARE(layer_done, int(trained.set.layers.size()));
    QCOMPARE(trained.set.model_sha256, demoModelSha256());

    const EvalReport r = t.evaluate(path, trained.set);
    QCOMPARE(r.layers.size(), trained.set.layers.size());
    QVERIFY(r.overall.tokens > 0);
    QVERIFY(r.overall.acc.skip_gate >= 0);  // measured: the model is at hand
    QVERIFY(r.overall.acc.learned > r.overall.acc.random);
    // overall is the token-weighted mean of the layers, for every column
    for (auto col : {&EvalScores::learned, &EvalScores::skip_gate, &EvalScores::token_based,
                     &EvalScores::previous_token, &EvalScores::popularity, &EvalScores::random}) {
      double sum = 0;
      for (const auto& l : r.layers) sum += l.acc.*col * double(l.tokens);
      QVERIFY(std::abs(sum / double(r.overall.tokens) - r.overall.acc.*col) < 1e-12);
    }
  }

  void aTraceOfAnotherModelIsRefused() {
    PredictorTraining t({}, std::string(64, 'a'));  // pretends to be another model
    PredictorTraining demo({}, {});
    const std::string path = dir_.filePath("other.moetrace").toStdString();
    auto prompts = builtinPrompts();
    prompts.resize(3);
    demo.trace(prompts, {}, path, {}, nullptr);
    QVERIFY_THROWS_EXCEPTION(TraceFormatError, t.tracedPrompts(path));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, t.train(path, {}, {}, nullptr));
    QVERIFY_THROWS_EXCEPTION(TraceFormatError, t.trace(prompts, {}, path, {}, nullptr));
  }
};

QTEST_GUILESS_MAIN(TestPredictorTraining)
#include "test_predictor_training.moc"
