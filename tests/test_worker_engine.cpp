// InferenceWorker in its own thread: the real engine on the demo model, and a
// scripted engine for stop / failure paths. Checks signals and their payloads,
// never timings.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cstdio>
#include <memory>

#include "app/core/engine_session.h"
#include "app/core/local_chat_engine.h"
#include "app/qt/inference_worker.h"
#include "inference/backend_factory.h"
#include "models/gguf.h"
#include "support/demo_predictor.h"
#include "support/fake_chat_engine.h"
#include "support/greedy_params.h"
#include "synth/synthetic_model.h"

using namespace moe;

namespace {

using test::greedy;

EngineLoadOptions demo() {
  EngineLoadOptions o;
  o.demo = true;
  o.n_ctx = 512;
  o.threads = 2;
  return o;
}

QString joined(const QSignalSpy& spy, qint64 reply_id) {
  QString s;
  for (const auto& args : spy)
    if (args.at(0).toLongLong() == reply_id) s += args.at(1).toString();
  return s;
}

}  // namespace

class WorkerEngineTest : public QObject {
  Q_OBJECT

 private slots:
  void realEngineStreamsTheSameTextAsADirectRun() {
    const std::vector<ChatMessage> chat = {{"user", "Tell me about experts."}};
    // The reference: the same engine driven directly on this thread.
    LocalChatEngine direct;
    direct.load(demo(), nullptr);
    std::string expected;
    std::atomic<bool> no_cancel{false};
    const auto ref = direct.reply(
        chat, greedy(24), [&](std::string_view s) { expected += s; }, no_cancel);

    EngineHost host(std::make_unique<LocalChatEngine>());
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    QSignalSpy progress(host.worker(), &InferenceWorker::loadProgress);
    host.loadModel(demo());
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    const auto info = loaded.at(0).at(0).value<LoadedModelInfo>();
    QVERIFY(info.demo);
    QVERIFY(info.n_expert > 0);
    QVERIFY(progress.count() >= 1);

    QSignalSpy text(host.worker(), &InferenceWorker::textReady);
    QSignalSpy finished(host.worker(), &InferenceWorker::replyFinished);
    host.generate(7, chat, greedy(24));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QCOMPARE(finished.at(0).at(0).toLongLong(), qint64(7));
    const auto st = finished.at(0).at(1).value<EngineReplyStats>();
    QCOMPARE(st.completion_tokens, ref.completion_tokens);
    QCOMPARE(joined(text, 7), QString::fromStdString(expected));
    QVERIFY(st.decode_tps > 0);
    QVERIFY(host.worker()->counters().total_generated >= static_cast<uint64_t>(st.completion_tokens));
    QVERIFY(!host.worker()->counters().generating);
  }

  void offloadPolicyCountersAndResidencyReachThePoller() {
    EngineHost host(std::make_unique<LocalChatEngine>());
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    auto o = demo();
    o.policy = "reactive-lru";
    o.backend = "cpu";  // the simulated link checked below is the CPU path's
    host.loadModel(o);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    const auto info = loaded.at(0).at(0).value<LoadedModelInfo>();
    QCOMPARE(QString::fromStdString(info.policy), QString("reactive-lru"));
    QVERIFY(!info.offload_note.empty());
    QSignalSpy finished(host.worker(), &InferenceWorker::replyFinished);
    host.generate(1, {{"user", "route me"}}, greedy(16));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    const auto c = host.worker()->counters();
    QVERIFY(!c.experts_resident);
    // Every token of every MoE layer asked the cache for n_expert_used experts.
    QVERIFY(c.offload.expert_uses > 0);
    QCOMPARE(c.offload.ready_hits + c.offload.inflight_hits + c.offload.misses, c.offload.expert_uses);
    QVERIFY(c.offload.bytes_h2d > 0);
    QCOMPARE(c.link_bytes_per_second, LocalChatEngine::kSimulatedLinkBytesPerSecond);
    // The cache holds half the experts: the map shows some, never more than that.
    const auto r = host.worker()->residency();
    QCOMPARE(r.n_layer * r.n_expert, info.n_layer * info.n_expert);
    const auto shown = std::count_if(r.state.begin(), r.state.end(),
                                     [](ExpertPlace s) { return s != ExpertPlace::kAbsent; });
    QVERIFY(shown > 0);
    QVERIFY(shown <= static_cast<long>(r.state.size()) / 2 + 2);
  }

  void storedPredictorReplacesSkipGateUnderProactive() {
    // A predictor set trained for the demo model by the CLI (trace, then train).
    QTemporaryDir dir;
    const QString preds = dir.filePath("demo.preds");
    const QString failed = test::trainDemoPredictor(preds, QStringLiteral("--demo-random"));
    QVERIFY2(failed.isEmpty(), qPrintable(failed));
    auto set = std::make_shared<PredictorSet>(PredictorSet::load(preds.toStdString()));

    EngineHost host(std::make_unique<LocalChatEngine>());
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    auto o = demo();
    o.policy = "proactive";
    o.predictor_set = set;
    host.loadModel(o);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    const auto info = loaded.at(0).at(0).value<LoadedModelInfo>();
    QCOMPARE(QString::fromStdString(info.predictor), QString("learned"));
    QVERIFY(QString::fromStdString(info.offload_note).contains("learned predictor"));
    QSignalSpy finished(host.worker(), &InferenceWorker::replyFinished);
    host.generate(1, {{"user", "predict me"}}, greedy(16));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    QVERIFY(host.worker()->counters().offload.pred_truth > 0);

    // A set whose shapes do not match the model is left out, and the note says why.
    auto wrong = std::make_shared<PredictorSet>(*set);
    wrong->layers.front().n_out += 1;
    o.predictor_set = wrong;
    host.loadModel(o);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 2, 60000);
    const auto info2 = loaded.at(1).at(0).value<LoadedModelInfo>();
    QCOMPARE(QString::fromStdString(info2.predictor), QString("skip-gate"));
    QVERIFY(QString::fromStdString(info2.offload_note).contains("not used"));
  }

  void budgetThatHoldsEveryExpertRunsResident() {
    EngineHost host(std::make_unique<LocalChatEngine>());
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    auto o = demo();
    o.vram_budget_bytes = 8'000'000'000;  // the demo model is a few MB
    host.loadModel(o);
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    QCOMPARE(QString::fromStdString(loaded.at(0).at(0).value<LoadedModelInfo>().policy), QString("resident"));
    QVERIFY(host.worker()->counters().experts_resident);
  }

  void textIsCoalescedIntoFewerSignalsThanTokens() {
    auto fake = std::make_unique<test::FakeChatEngine>();
    fake->words.assign(400, "x");
    EngineHost host(std::move(fake));
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    host.loadModel(demo());
    QTRY_COMPARE(loaded.count(), 1);
    QSignalSpy text(host.worker(), &InferenceWorker::textReady);
    QSignalSpy finished(host.worker(), &InferenceWorker::replyFinished);
    host.generate(1, {{"user", "hi"}}, greedy(400));
    QTRY_COMPARE(finished.count(), 1);
    QCOMPARE(joined(text, 1), QString(400, 'x'));
    QVERIFY2(text.count() < 400, qPrintable(QString("%1 signals for 400 tokens").arg(text.count())));
  }

  void stopEndsARunningReply() {
    auto fake = std::make_unique<test::FakeChatEngine>();
    fake->words.assign(5000, "y");
    fake->per_token = std::chrono::milliseconds(2);
    fake->hold_at = 10;  // in progress until stopped
    EngineHost host(std::move(fake));
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    host.loadModel(demo());
    QTRY_COMPARE(loaded.count(), 1);
    QSignalSpy text(host.worker(), &InferenceWorker::textReady);
    QSignalSpy finished(host.worker(), &InferenceWorker::replyFinished);
    host.generate(3, {{"user", "hi"}}, greedy(5000));
    QTRY_VERIFY(text.count() >= 1);
    host.stop(3);
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 20000);
    const auto st = finished.at(0).at(1).value<EngineReplyStats>();
    QCOMPARE(QString::fromStdString(st.stop_reason), QString("cancelled"));
    QVERIFY(st.completion_tokens < 5000);
  }

  void stopBeforeTheReplyStartsCancelsIt() {
    auto fake = std::make_unique<test::FakeChatEngine>();
    EngineHost host(std::move(fake));
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    host.loadModel(demo());
    QTRY_COMPARE(loaded.count(), 1);
    QSignalSpy finished(host.worker(), &InferenceWorker::replyFinished);
    host.stop(5);
    host.generate(5, {{"user", "hi"}}, greedy(10));
    QTRY_COMPARE(finished.count(), 1);
    const auto st = finished.at(0).at(1).value<EngineReplyStats>();
    QCOMPARE(QString::fromStdString(st.stop_reason), QString("cancelled"));
    QCOMPARE(st.completion_tokens, 0);
    // A later reply is not affected by the old stop.
    host.generate(6, {{"user", "again"}}, greedy(10));
    QTRY_COMPARE(finished.count(), 2);
    QCOMPARE(QString::fromStdString(finished.at(1).at(1).value<EngineReplyStats>().stop_reason),
             QString("length"));
  }

  void loadFailureIsReportedWithTheReason() {
    EngineHost host(std::make_unique<LocalChatEngine>());
    QSignalSpy failed(host.worker(), &InferenceWorker::loadFailed);
    EngineLoadOptions o;
    o.model_path = "/nonexistent/model.gguf";
    host.loadModel(o);
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 20000);
    const QString why = failed.at(0).at(0).toString();
    QVERIFY2(why.contains("/nonexistent/model.gguf"), qPrintable(why));
    // Asking for a reply without a model fails cleanly too.
    QSignalSpy reply_failed(host.worker(), &InferenceWorker::replyFailed);
    host.generate(1, {{"user", "hi"}}, greedy(4));
    QTRY_COMPARE(reply_failed.count(), 1);
  }

  // The backend choice: auto falls back to the CPU where no GPU is usable (this
  // VM, CI); asking for cuda there fails with the reason; a bad name is refused.
  void backendChoice() {
    std::string why;
    const bool gpu = cudaDeviceAvailable(&why);
    EngineLoadOptions o;
    o.demo = true;
    std::string note;
    const SessionOptions so = LocalChatEngine::sessionOptionsFor(o, &note);
    QCOMPARE(QString(deviceChoiceName(so.device)), QString(gpu ? "cuda" : "cpu"));
    if (!gpu) {
      QCOMPARE(so.link.bytes_per_second, LocalChatEngine::kSimulatedLinkBytesPerSecond);
      o.backend = "cuda";
      try {
        LocalChatEngine::sessionOptionsFor(o, &note);
        QFAIL("cuda without a GPU was accepted");
      } catch (const std::runtime_error& e) {
        QCOMPARE(QString(e.what()), QString::fromStdString("no usable GPU: " + why));
      }
    }
    o.backend = "tpu";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, LocalChatEngine::sessionOptionsFor(o, &note));
  }

  // `cp other.gguf model.gguf` over a loaded model truncates the mapped file: the
  // next reply must say so and unload the model, not touch a lost page (SIGBUS).
  void modelFileChangedOnDiskIsReportedAndUnloaded() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("model.gguf").toStdString();
    synth::writeModel(synth::tinySpec("llama"), path);
    LocalChatEngine engine;
    EngineLoadOptions o;
    o.model_path = path;
    o.n_ctx = 256;
    o.threads = 1;
    o.backend = "cpu";
    engine.load(o, nullptr);
    std::atomic<bool> no_cancel{false};
    const std::vector<ChatMessage> chat = {{"user", "hi"}};
    const auto ignore = [](std::string_view) {};
    QVERIFY(engine.reply(chat, greedy(3), ignore, no_cancel).completion_tokens > 0);

    QFile f(QString::fromStdString(path));
    QVERIFY(f.resize(f.size() / 2));
    try {
      engine.reply(chat, greedy(3), ignore, no_cancel);
      QFAIL("a reply ran on a truncated model file");
    } catch (const ModelFileChanged& e) {
      const QString why = e.what();
      QVERIFY2(why.contains("changed size") && why.contains("unloaded"), qPrintable(why));
    }
    QVERIFY(!engine.loaded());
    QVERIFY_THROWS_EXCEPTION(std::logic_error, engine.reply(chat, greedy(3), ignore, no_cancel));

    // A file replaced by another one (a rename over it) is reported as such.
    synth::writeModel(synth::tinySpec("llama"), path);
    auto file = gguf::GgufFile::open(path);
    QVERIFY(!file.changedOnDisk());
    const std::string other = dir.filePath("other.gguf").toStdString();
    synth::writeModel(synth::tinySpec("olmoe"), other);
    QVERIFY(std::rename(other.c_str(), path.c_str()) == 0);
    QVERIFY(file.changedOnDisk().value_or("").find("replaced") != std::string::npos);
  }

  void engineExceptionDuringReplyBecomesReplyFailed() {
    auto fake = std::make_unique<test::FakeChatEngine>();
    fake->fail_reply_with = "out of memory while allocating the KV cache";
    EngineHost host(std::move(fake));
    QSignalSpy loaded(host.worker(), &InferenceWorker::modelLoaded);
    host.loadModel(demo());
    QTRY_COMPARE(loaded.count(), 1);
    QSignalSpy failed(host.worker(), &InferenceWorker::replyFailed);
    host.generate(9, {{"user", "hi"}}, greedy(4));
    QTRY_COMPARE(failed.count(), 1);
    QCOMPARE(failed.at(0).at(0).toLongLong(), qint64(9));
    QVERIFY(failed.at(0).at(1).toString().contains("out of memory"));
  }
};

QTEST_GUILESS_MAIN(WorkerEngineTest)
#include "test_worker_engine.moc"
