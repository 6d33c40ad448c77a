// Learning from use (docs/predictor.md): the real demo-model engine behind the
// chat controller and a real SQLite database in a temporary folder. Off, a
// reply records nothing; on, each reply appends what the engine computed (only
// the new tokens when a prefix is reused, at their positions) to its
// conversation's trace; deleting a conversation removes its trace at once; the
// merged traces train a predictor; a cancelled reply leaves a readable trace.
#include <QCheckBox>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include "app/core/app_database.h"
#include "app/core/conversation_store.h"
#include "app/core/engine_session.h"
#include "app/core/local_chat_engine.h"
#include "app/core/model_predictor.h"
#include "app/core/use_traces.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"
#include "app/qt/inference_worker.h"
#include "offload/trainer/trace_file.h"
#include "offload/trainer/train_predictor.h"
#include "support/gui_fixture.h"
#include "ui/main_window.h"
#include "ui/settings_dialog.h"

using namespace moe;
namespace fs = std::filesystem;

namespace {

constexpr int kTimeoutMs = 120000;

// The app without its window, on the real demo-model engine.
struct App : test::HeadlessApp {
  std::unique_ptr<QSignalSpy> finished;  // InferenceWorker::replyFinished

  App() : HeadlessApp(std::make_unique<LocalChatEngine>()) {
    finished = std::make_unique<QSignalSpy>(engine->worker(), &InferenceWorker::replyFinished);
    SamplingDefaults s;
    s.max_tokens = 12;
    s.temperature = 0;
    settings->setSampling(s);
  }
  bool loadDemo() {
    EngineLoadOptions o;
    o.demo = true;
    o.n_ctx = 512;
    o.threads = 2;
    chat->loadModel(o);
    QDeadlineTimer deadline(kTimeoutMs);
    while (!chat->modelReady() && !deadline.hasExpired()) QTest::qWait(10);
    return chat->modelReady();
  }
  // Sends text in the current conversation and returns the engine's figures.
  std::optional<EngineReplyStats> reply(const QString& text) {
    const int before = int(finished->count());
    if (!chat->send(text)) return std::nullopt;
    QDeadlineTimer deadline(kTimeoutMs);
    while ((finished->count() == before || chat->busy()) && !deadline.hasExpired()) QTest::qWait(10);
    if (finished->count() == before) return std::nullopt;
    return finished->last().at(1).value<EngineReplyStats>();
  }
  UseTraceStore traces() const { return UseTraceStore(settings->useTracesFolder().toStdString()); }
};

// Tokens the engine ran for a reply: the prompt's new tokens, then every
// sampled token but the last (sampled, never fed back).
int64_t computedTokens(const EngineReplyStats& st) {
  return st.prompt_tokens - st.reused_tokens + std::max(0, st.completion_tokens - 1);
}

// The batches of a prompt cover consecutive positions from `first`.
bool contiguousFrom(const TraceReader& r, int prompt, int first) {
  int next = first;
  for (const auto& [pos, n] : r.batchSpans(prompt)) {
    if (pos != next || n <= 0 || n > Transformer::kMaxBatch) return false;
    next += n;
  }
  return true;
}

std::vector<int> sortedRow(const std::vector<int>& experts, int row, int k) {
  std::vector<int> v(experts.begin() + size_t(row) * k, experts.begin() + size_t(row + 1) * k);
  std::sort(v.begin(), v.end());
  return v;
}

// Keeps the input of one MoE layer, passing everything through.
class InputTap final : public ExpertSource {
 public:
  InputTap(ExpertSource& inner, int layer) : inner_(inner), layer_(layer) {}
  void onLayerInput(int layer, std::span<const float> h, int n) override {
    if (layer == layer_) hidden.insert(hidden.end(), h.begin(), h.end());
    inner_.onLayerInput(layer, h, n);
  }
  void onRouting(const RoutingEvent& ev) override { inner_.onRouting(ev); }
  std::vector<ExpertRef> acquire(int layer, std::span<const int> e) override {
    return inner_.acquire(layer, e);
  }
  void waitFor(int layer, const ExpertRef& ref) override { inner_.waitFor(layer, ref); }
  void release(int layer) override { inner_.release(layer); }
  std::vector<float> hidden;  // [tokens run][n_embd]

 private:
  ExpertSource& inner_;
  int layer_;
};

}  // namespace

class UseTracesTest : public QObject {
  Q_OBJECT

 private slots:
  void offRecordsNothing() {
    App app;
    QVERIFY(!app.settings->learnFromUse());  // off by default
    QVERIFY(app.loadDemo());
    QCOMPARE(app.chat->model()->model_sha256, demoModelSha256(DemoModel::kRandom));
    const auto st = app.reply("Hello there");
    QVERIFY(st);
    QCOMPARE(st->traced_tokens, int64_t(0));
    QVERIFY(!fs::exists(app.settings->useTracesFolder().toStdString()));
    QVERIFY(app.traces().summaries().empty());
  }

  void repliesAreRecordedAsComputedAndDeletingAConversationRemovesItsTrace() {
    App app;
    app.settings->setLearnFromUse(true);
    QVERIFY(app.loadDemo());
    const std::string sha = app.chat->model()->model_sha256;

    const qint64 a = app.chat->newConversation();
    const auto a1 = app.reply("Tell me about mixtures of experts.");
    QVERIFY(a1);
    const auto a2 = app.reply("And how are they cached?");  // reuses conversation A's prefix
    QVERIFY(a2);
    const qint64 b = app.chat->newConversation();
    const auto b1 = app.reply("Translate hello into French.");
    QVERIFY(b1);
    QVERIFY(a2->reused_tokens > 0);
    QVERIFY(b1->reused_tokens > 0);  // the template's start, cached from A

    const std::string path_a = app.traces().pathFor(sha, a);
    const std::string path_b = app.traces().pathFor(sha, b);
    QVERIFY(fs::exists(path_a));
    QVERIFY(fs::exists(path_b));

    const TraceReader ra(path_a);
    QCOMPARE(ra.header().model_sha256, sha);
    QCOMPARE(ra.prompts(), (std::vector<int>{0, 1}));
    QCOMPARE(int64_t(ra.tokenCount(0)), computedTokens(*a1));
    QCOMPARE(int64_t(ra.tokenCount(1)), computedTokens(*a2));
    QCOMPARE(int64_t(ra.tokenCount(0)), a1->traced_tokens);
    QCOMPARE(int64_t(ra.tokenCount(1)), a2->traced_tokens);
    QVERIFY(contiguousFrom(ra, 0, 0));
    QVERIFY(contiguousFrom(ra, 1, a2->reused_tokens));  // only the new tokens, at their positions
    QVERIFY(a2->reused_tokens <= ra.tokenCount(0));
    const TraceReader rb(path_b);
    QCOMPARE(rb.prompts(), (std::vector<int>{0}));
    QCOMPARE(int64_t(rb.tokenCount(0)), computedTokens(*b1));
    QVERIFY(contiguousFrom(rb, 0, b1->reused_tokens));

    // What was recorded for A's second reply is what the model computes for
    // those tokens at those positions: rerun the whole sequence from scratch.
    {
      const int moe = ra.header().moe_layers.front(), k = ra.header().k;
      const auto first = ra.read(0, moe), second = ra.read(1, moe);
      std::vector<int32_t> sequence(first.tokens.begin(), first.tokens.begin() + a2->reused_tokens);
      sequence.insert(sequence.end(), second.tokens.begin(), second.tokens.end());
      SessionOptions so;
      so.demo = true;
      so.n_ctx = 512;
      so.threads = 2;
      EngineSession fresh(so);  // resident: every policy computes the same bits
      InputTap tap(fresh.offload().source(), moe);
      Transformer tf(fresh.model(), fresh.backend(), tap, 512);
      std::vector<int> chosen;  // [tokens run][k] of that layer
      tf.setRoutingObserver([&](const RoutingEvent& ev) {
        if (ev.layer == moe) chosen.insert(chosen.end(), ev.experts.begin(), ev.experts.end());
      });
      std::vector<float> logits;
      tf.forward(sequence, logits);
      const int E = ra.header().n_embd, skip = a2->reused_tokens;
      QCOMPARE(tap.hidden.size(), sequence.size() * size_t(E));
      double err = 0, ref = 0;
      for (size_t i = 0; i < second.hidden.size(); ++i) {
        const double want = tap.hidden[size_t(skip) * E + i], got = second.hidden[i];
        err += (got - want) * (got - want);
        ref += want * want;
      }
      int same = 0;
      for (int i = 0; i < second.n; ++i)
        same += sortedRow(chosen, skip + i, k) == sortedRow(second.experts, i, k);
      // f16 storage gives ~4e-8 here; the same tokens one position off give ~9e-5.
      QVERIFY2(err / ref < 1e-6, qPrintable(QString("normalised error %1").arg(err / ref)));
      QVERIFY2(same >= second.n - 1,
               qPrintable(QString("%1 of %2 rows chose the same experts").arg(same).arg(second.n)));
    }

    // The merged traces train a predictor.
    const QString merged = app.chat->recordedTracesFor(QString::fromStdString(sha));
    QVERIFY(!merged.isEmpty());
    {
      const TraceReader rm(merged.toStdString());
      QCOMPARE(rm.prompts(), (std::vector<int>{0, 1, 2}));
      QCOMPARE(rm.totalTokens(), ra.totalTokens() + rb.totalTokens());
      TrainOptions opt;
      opt.max_epochs = 2;
      opt.hidden = 16;
      opt.threads = 1;
      const TrainResult tr = trainPredictors(rm, opt);
      QVERIFY(!tr.cancelled);
      QVERIFY(!tr.set.layers.empty());
      QCOMPARE(tr.set.model_sha256, sha);
    }
    const UseTraceSummary sum = app.traces().summary(sha);
    QCOMPARE(sum.conversations, 2);
    QCOMPARE(sum.tokens, int64_t(ra.totalTokens() + rb.totalTokens()));

    // Deleting A removes its trace (and the merged copy) at once, even though
    // undo is still possible; B's stays. Undo does not bring the trace back.
    QVERIFY(app.chat->deleteConversation(a));
    QVERIFY(!fs::exists(path_a));
    QVERIFY(!fs::exists(merged.toStdString()));
    QVERIFY(fs::exists(path_b));
    QVERIFY(app.chat->undoDelete(a));
    QVERIFY(!fs::exists(path_a));
    QCOMPARE(app.traces().summary(sha).conversations, 1);

    // Purging removes what a soft delete left behind.
    app.chat->openConversation(b);
    QVERIFY(app.chat->deleteConversation(b));
    QVERIFY(!fs::exists(path_b));
    QCOMPARE(app.chat->purgeDeleted(), int64_t(1));
    QVERIFY(app.traces().summaries().empty());
  }

  void enoughRecordedTokensOfferRetrainingOnce() {
    App app;
    app.settings->setLearnFromUse(true);
    QVERIFY(app.loadDemo());
    MainWindow window(*app.settings, *app.store, *app.chat, *app.engine);
    QString launched;
    window.setRetrainLauncher([&](const QString& sha) { launched = sha; });
    QSignalSpy offered(app.chat, &ChatController::retrainSuggested);
    const std::string sha = app.chat->model()->model_sha256;
    app.chat->newConversation();
    QVERIFY(app.reply("First"));
    QCOMPARE(offered.count(), 0);  // a few dozen tokens: not yet
    QVERIFY(!window.retrainBar()->isVisibleTo(&window));

    // Another conversation's recording brings the model past the threshold.
    const TraceHeader h = TraceReader(app.traces().pathFor(sha, app.chat->current())).header();
    {
      TraceWriter w(app.traces().pathFor(sha, 999), h);
      const int n = int(UseTraceStore::kRetrainSuggestTokens);
      std::vector<int32_t> tokens(size_t(n), 1);
      std::vector<float> hidden(size_t(n) * h.n_embd, 0.5f), weights(size_t(n) * h.k, 0.5f);
      std::vector<int> experts(size_t(n) * h.k);
      for (size_t i = 0; i < experts.size(); ++i) experts[i] = int(i % size_t(h.k));
      w.beginBatch(0, 0, tokens);
      for (int l : h.moe_layers) w.addLayer(l, hidden, experts, weights);
      w.endPrompt(0);
    }
    QVERIFY(app.reply("Second"));
    QTRY_COMPARE(offered.count(), 1);
    QCOMPARE(offered.at(0).at(0).toString(), QString::fromStdString(sha));
    QVERIFY(offered.at(0).at(1).toLongLong() >= UseTraceStore::kRetrainSuggestTokens);
    QVERIFY(window.retrainBar()->isVisibleTo(&window));
    auto* button = window.retrainBar()->findChild<QPushButton*>("retrainButton");
    QVERIFY(button && button->isVisibleTo(&window));
    QTest::mouseClick(button, Qt::LeftButton);
    QCOMPARE(launched, QString::fromStdString(sha));
    QVERIFY(!window.retrainBar()->isVisibleTo(&window));
    QVERIFY(app.reply("Third"));
    QCOMPARE(offered.count(), 1);  // said once
  }

  void mergeRefusesATraceOfAnotherModel() {
    QTemporaryDir dir;
    TraceHeader h;
    h.n_layer = 2;
    h.n_embd = 4;
    h.n_expert = 4;
    h.k = 2;
    h.moe_layers = {0, 1};
    h.model_sha256 = std::string(64, 'a');
    h.model_name = "one";
    auto write = [&](const std::string& path, const TraceHeader& header) {
      TraceWriter w(path, header);
      const int32_t tok[1] = {3};
      const float hidden[4] = {1, 2, 3, 4};
      const int experts[2] = {0, 1};
      const float weights[2] = {0.5f, 0.5f};
      w.beginBatch(0, 0, tok);
      for (int l : header.moe_layers) w.addLayer(l, hidden, experts, weights);
      w.endPrompt(0);
    };
    const std::string one = dir.filePath("one.moetrace").toStdString();
    const std::string two = dir.filePath("two.moetrace").toStdString();
    const std::string other = dir.filePath("other.moetrace").toStdString();
    write(one, h);
    write(two, h);
    TraceHeader h2 = h;
    h2.model_sha256 = std::string(64, 'b');
    write(other, h2);
    const std::string out = dir.filePath("merged.moetrace").toStdString();
    const TraceMergeResult ok = mergeTraces({one, two}, out);
    QCOMPARE(ok.prompts, 2);
    QCOMPARE(TraceReader(out).prompts(), (std::vector<int>{0, 1}));
    fs::remove(out);
    QVERIFY_THROWS_EXCEPTION(TraceFormatError, mergeTraces({one, other}, out));
    QVERIFY(!fs::exists(out));
    QVERIFY(!fs::exists(out + ".part"));
  }

  void aCancelledReplyLeavesAReadableTrace() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("chat.moetrace").toStdString();
    LocalChatEngine engine;
    EngineLoadOptions o;
    o.demo = true;
    o.n_ctx = 512;
    o.threads = 2;
    engine.load(o, nullptr);
    GenerationParams p;
    p.max_tokens = 6;
    p.sampler.temperature = 0;
    std::atomic<bool> go{false}, stop{true};
    std::vector<ChatMessage> chat = {{"user", "First question"}};
    // A first reply cancelled at once leaves no file (a header alone records nothing).
    const std::string none = dir.filePath("none.moetrace").toStdString();
    engine.setTraceRecording(none);
    QCOMPARE(QString::fromStdString(engine.reply(chat, p, {}, stop).stop_reason), QString("cancelled"));
    QVERIFY(!fs::exists(none));

    engine.setTraceRecording(path);
    const auto first = engine.reply(chat, p, {}, go);
    QVERIFY(first.traced_tokens > 0);
    const auto size_after_first = fs::file_size(path);

    // Cancelled inside its first batch: the batch was begun on disk, never finished.
    chat.push_back({"assistant", "an answer"});
    chat.push_back({"user", "Second question"});
    const auto cancelled = engine.reply(chat, p, {}, stop);
    QCOMPARE(QString::fromStdString(cancelled.stop_reason), QString("cancelled"));
    QCOMPARE(cancelled.traced_tokens, int64_t(0));
    QCOMPARE(fs::file_size(path), size_after_first);  // the torn prompt was cut
    QCOMPARE(TraceReader(path).prompts(), (std::vector<int>{0}));

    // The next reply appends after it.
    const auto third = engine.reply(chat, p, {}, go);
    const TraceReader r(path);
    QCOMPARE(r.prompts(), (std::vector<int>{0, 1}));
    QCOMPARE(int64_t(r.tokenCount(1)), third.traced_tokens);
    QCOMPARE(int64_t(r.tokenCount(1)), computedTokens(third));

    // Off again: nothing more is written.
    engine.setTraceRecording({});
    engine.reply(chat, p, {}, go);
    QCOMPARE(TraceReader(path).prompts(), (std::vector<int>{0, 1}));
  }

  void settingsDialogSwitchesRecordingAndDeletesAll() {
    QTemporaryDir dir;
    QSettings ini(dir.filePath("moechat.ini"), QSettings::IniFormat);
    AppSettings settings(ini);
    settings.setDataFolder(dir.path());
    QSignalSpy changed(&settings, &AppSettings::learnFromUseChanged);
    // A recorded trace on disk, as a reply would leave it.
    const UseTraceStore store(settings.useTracesFolder().toStdString());
    const std::string path = store.pathFor(std::string(64, 'c'), 7);
    fs::create_directories(fs::path(path).parent_path());
    {
      TraceHeader h;
      h.n_layer = 1;
      h.n_embd = 2;
      h.n_expert = 2;
      h.k = 1;
      h.moe_layers = {0};
      h.model_sha256 = std::string(64, 'c');
      TraceWriter w(path, h);
      const int32_t tok[1] = {1};
      const float hidden[2] = {1, 2};
      const int experts[1] = {1};
      const float weights[1] = {1};
      w.beginBatch(0, 0, tok);
      w.addLayer(0, hidden, experts, weights);
      w.endPrompt(0);
    }
    SettingsDialog dlg(settings, SettingsContext{});
    auto* box = dlg.findChild<QCheckBox*>("learnFromUse");
    auto* usage = dlg.findChild<QLabel*>("useTraceUsage");
    auto* del = dlg.findChild<QPushButton*>("deleteUseTraces");
    QVERIFY(box && usage && del);
    QVERIFY(!box->isChecked());
    QVERIFY2(usage->text().contains("1 conversation"), qPrintable(usage->text()));
    QVERIFY(del->isEnabled());
    QTest::mouseClick(del, Qt::LeftButton);
    QVERIFY(!fs::exists(path));
    QVERIFY(usage->text().contains("Nothing recorded"));
    box->setChecked(true);
    dlg.accept();
    QVERIFY(settings.learnFromUse());
    QCOMPARE(changed.count(), 1);
  }
};

QTEST_MAIN(UseTracesTest)
#include "test_use_traces.moc"
