// The whole app on the real engine: the demo model in the worker thread, the
// caching policy from the settings, the real window, a real database. A message
// typed into the window comes back as a stored reply with its figures, and the
// strip and the cache map show the engine's live counters.
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

#include "app/core/local_chat_engine.h"
#include "app/core/model_predictor.h"
#include "app/core/predictor_store.h"
#include "support/demo_predictor.h"
#include "support/gui_fixture.h"
#include "synth/synthetic_model.h"
#include "ui/chat_view.h"
#include "ui/composer.h"
#include "ui/expert_heat_map.h"
#include "ui/perf_strip.h"

using namespace moe;

class GuiEndToEndTest : public QObject {
  Q_OBJECT

 private slots:
  void demoChatOnTheRealEngine() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    app.settings->setCachePolicy("proactive");
    SamplingDefaults s = app.settings->sampling();
    s.max_tokens = 40;
    app.settings->setSampling(s);
    QVERIFY(app.loadDemo());
    QCOMPARE(QString::fromStdString(app.chat->model()->policy), QString("proactive"));

    // The strip's timer polls every 250 ms; a baseline poll now stands in for the
    // polls a user's session has long made before the first message.
    app.window->perfStrip()->pollNow();
    auto* edit = app.window->composer()->editor();
    QTest::keyClicks(edit, "Show me the experts at work");
    QTest::keyClick(edit, Qt::Key_Return);
    QTRY_VERIFY(app.chat->current() != 0);
    QTRY_VERIFY_WITH_TIMEOUT(!app.chat->busy(), 60000);

    const auto msgs = app.store->messages(app.chat->current());
    QCOMPARE(msgs.size(), size_t(2));
    QCOMPARE(msgs[1].state, MessageState::Complete);
    // 40 tokens, or fewer when the sampled noise happens to spell a stop string.
    QVERIFY(*msgs[1].stats.completion_tokens >= 1 && *msgs[1].stats.completion_tokens <= 40);
    QVERIFY(*msgs[1].stats.decode_tps > 0);
    QCOMPARE(app.window->chatView()->bubble(1)->item().text, QString::fromStdString(msgs[1].text));

    // The strip polls the counters: after the reply it shows the reply's expert figures.
    app.window->perfStrip()->pollNow();
    app.window->perfStrip()->pollNow();
    const auto& f = app.window->perfStrip()->figures();
    QVERIFY(f.expert_uses > 0);
    QVERIFY(f.cached_share + f.prefetched_share + f.inflight_share + f.missed_share > 0.999);
    QVERIFY(app.window->findChild<QLabel*>("perfDecode")->text().endsWith("tok/s"));
    QVERIFY(!app.window->findChild<QLabel*>("perfDecode")->text().startsWith("–"));
    // Memory: this process's resident set (at least the model's 15 MB read), no GPU here.
    QVERIFY2(f.ram_resident_bytes > 15'000'000, qPrintable(QString::number(f.ram_resident_bytes)));
    QCOMPARE(f.vram_total_bytes, uint64_t(0));
    QCOMPARE(app.window->findChild<QLabel*>("perfVram")->text(), QString("–"));
    app.window->heatMap()->refresh();
    QVERIFY(app.window->heatMap()->readyCount() > 0);
  }

  // Every architecture the engine runs, opened from a file by the window and chatted
  // with: the reply comes back stored and complete, in the model's chat template.
  void chatsWithAModelOfEveryArchitecture_data() {
    QTest::addColumn<QString>("arch");
    for (const auto& a : synth::supportedArchs()) QTest::newRow(a.c_str()) << QString::fromStdString(a);
  }
  void chatsWithAModelOfEveryArchitecture() {
    QFETCH(QString, arch);
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    const QString path = app.dir.filePath(arch + ".gguf");
    synth::writeModel(synth::tinySpec(arch.toStdString()), path.toStdString());
    SamplingDefaults s = app.settings->sampling();
    s.max_tokens = 8;
    app.settings->setSampling(s);
    app.window->loadModel({arch, path});
    QTRY_VERIFY_WITH_TIMEOUT(app.chat->modelReady(), 60000);
    QCOMPARE(QString::fromStdString(app.chat->model()->architecture), arch);
    auto* edit = app.window->composer()->editor();
    QTest::keyClicks(edit, "Hello");
    QTest::keyClick(edit, Qt::Key_Return);
    QTRY_VERIFY(app.chat->current() != 0);
    QTRY_VERIFY_WITH_TIMEOUT(!app.chat->busy(), 60000);
    const auto msgs = app.store->messages(app.chat->current());
    QCOMPARE(msgs.size(), size_t(2));
    QCOMPARE(msgs[1].state, MessageState::Complete);
    QVERIFY(*msgs[1].stats.completion_tokens >= 1 && *msgs[1].stats.completion_tokens <= 8);
  }

  void storedPredictorIsFoundAndUsedWhenTheModelOpens() {
    QTemporaryDir dir;
    const QString preds = dir.filePath("demo.preds");
    const QString failed = test::trainDemoPredictor(preds, QStringLiteral("--demo"));
    QVERIFY2(failed.isEmpty(), qPrintable(failed));

    test::GuiApp app(std::make_unique<LocalChatEngine>());
    app.settings->setCachePolicy("proactive");
    ModelRegistry registry(*app.db);
    QVERIFY(!storedPredictorFor(*app.db, registry, ""));  // nothing stored yet
    PredictorStore(*app.db).importSet(preds.toStdString());
    QVERIFY(storedPredictorFor(*app.db, registry, ""));
    QVERIFY(!storedPredictorFor(*app.db, registry, "/models/not-registered.gguf"));
    app.window->setPredictorSource(
        [&](const ModelChoice& c) { return storedPredictorFor(*app.db, registry, c.path.toStdString()); });
    QVERIFY(app.loadDemo());
    QCOMPARE(QString::fromStdString(app.chat->model()->predictor), QString("learned"));
  }
};

QTEST_MAIN(GuiEndToEndTest)
#include "test_gui_end_to_end.moc"
