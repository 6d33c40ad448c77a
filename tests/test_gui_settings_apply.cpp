// Settings that apply while a model is loaded: OK with a
// new VRAM budget or caching policy reloads the model with it, says so in the
// status bar, and waits for a reply in progress to end (or be stopped), which
// is stored whole; the dialog says beforehand that OK reloads the model. A new
// models folder refreshes the model menu with the GGUF files it holds.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>

#include "app/core/local_chat_engine.h"
#include "app/core/model_registry.h"
#include "desktop/app_wiring.h"
#include "support/fake_chat_engine.h"
#include "support/gui_fixture.h"
#include "ui/composer.h"
#include "ui/settings_dialog.h"

using namespace moe;

namespace {

// Sends text through the composer as a user does and waits for the reply to end
// (its replyFinished, however fast or slow the reply).
bool sendAndWait(test::GuiApp& app, const QString& text, int timeout_ms = 120000) {
  QSignalSpy finished(app.chat, &ChatController::replyFinished);
  auto* edit = app.window->composer()->editor();
  QTest::keyClicks(edit, text);
  QTest::keyClick(edit, Qt::Key_Return);
  if (finished.count() == 0 && !finished.wait(timeout_ms)) return false;
  return QTest::qWaitFor([&] { return !app.chat->busy(); }, timeout_ms);
}

QString statusText(test::GuiApp& app) { return app.window->findChild<QLabel*>("modelStatus")->text(); }

}  // namespace

class GuiSettingsApplyTest : public QObject {
  Q_OBJECT

 private slots:
  // The real engine on the demo model: half its experts cached under Auto; a
  // budget every expert fits reloads it resident, and the next reply misses none.
  void budgetThatHoldsEveryExpertReloadsTheModel() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    app.settings->setCachePolicy("proactive");
    SamplingDefaults s = app.settings->sampling();
    s.max_tokens = 24;
    app.settings->setSampling(s);
    QVERIFY(app.loadDemo());
    QCOMPARE(QString::fromStdString(app.chat->model()->policy), QString("proactive"));
    QVERIFY(sendAndWait(app, "Which experts run?"));
    const EngineCounters before = app.engine->worker()->counters();
    QVERIFY(!before.experts_resident);
    QVERIFY2(before.offload.misses > 0, "half the experts cached: the first reply misses some");

    QStringList reloading;  // what the status bar said when the reload began: the model's place, the message
    connect(app.chat, &ChatController::modelReloading, app.window.get(), [&](const QString&) {
      reloading << statusText(app) << app.window->statusBar()->currentMessage();
    });
    QSignalSpy loaded(app.chat, &ChatController::modelLoaded);
    {
      auto dlg = app.window->makeSettingsDialog();
      auto* settings = qobject_cast<SettingsDialog*>(dlg.get());
      QVERIFY(settings);
      QVERIFY(settings->applyNote().isEmpty());  // nothing changed yet
      dlg->findChild<QCheckBox*>("autoBudget")->setChecked(false);
      dlg->findChild<QDoubleSpinBox*>("budgetGb")->setValue(12.0);
      QVERIFY2(settings->applyNote().contains("OK reloads Demo model"), qPrintable(settings->applyNote()));
      settings->accept();
    }
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    QCOMPARE(reloading.size(), 2);
    QVERIFY2(reloading[0].contains("Reloading Demo model with a 12.0 GB budget"), qPrintable(reloading[0]));
    QVERIFY2(!reloading[1].contains("Reloading"),
             qPrintable(reloading[1]));  // said once: not also as a message

    QVERIFY(app.chat->modelReady());
    QCOMPARE(QString::fromStdString(app.chat->model()->policy), QString("resident"));
    const QString note = QString::fromStdString(app.chat->model()->offload_note);
    QVERIFY2(note.contains("every expert fits the budget"), qPrintable(note));
    QVERIFY2(app.window->statusBar()->currentMessage() == note,
             qPrintable(app.window->statusBar()->currentMessage()));
    QVERIFY2(statusText(app).contains("resident"), qPrintable(statusText(app)));
    QVERIFY(app.window->composer()->isEnabled());

    QVERIFY(sendAndWait(app, "And now?"));
    const auto msgs = app.store->messages(app.chat->current());
    QCOMPARE(msgs.size(), size_t(4));
    QCOMPARE(msgs[3].state, MessageState::Complete);
    const EngineCounters after = app.engine->worker()->counters();
    QVERIFY(after.experts_resident);
    QCOMPARE(after.offload.misses, uint64_t(0));
  }

  // The context length is a setting per model: the dialog shows the loaded model's,
  // the fit follows it (the KV cache), OK reloads the model with it, and a message
  // too long for it is refused naming that setting.
  void contextLengthIsASettingOfTheModel() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    QVERIFY(app.loadDemo());
    const int before = app.chat->model()->n_ctx;
    QSignalSpy loaded(app.chat, &ChatController::modelLoaded);
    {
      auto dlg = app.window->makeSettingsDialog();
      auto* settings = qobject_cast<SettingsDialog*>(dlg.get());
      auto* context = dlg->findChild<QSpinBox*>("contextLength");
      QVERIFY(context);
      QCOMPARE(context->value(),
               before);  // what loaded: the setting, capped at what the model was trained for
      QVERIFY(settings->applyNote().isEmpty());  // shown as it loaded: nothing to reload yet
      dlg->findChild<QCheckBox*>("autoBudget")->setChecked(false);  // a figure for the fit to show
      const QString fit_at_default = settings->fitText();
      context->setValue(AppSettings::kMinContextLength);
      QVERIFY2(settings->fitText() != fit_at_default, qPrintable(settings->fitText()));
      QVERIFY2(settings->applyNote().contains("OK reloads Demo model"), qPrintable(settings->applyNote()));
      dlg->findChild<QCheckBox*>("autoBudget")->setChecked(true);  // only the context changes
      settings->accept();
    }
    QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, 60000);
    QCOMPARE(app.settings->contextLength(QString()), AppSettings::kMinContextLength);
    QCOMPARE(app.chat->model()->n_ctx, AppSettings::kMinContextLength);
    QVERIFY(before > AppSettings::kMinContextLength);

    QSignalSpy errors(app.chat, &ChatController::error);
    QString longer;
    for (int i = 0; i < 200; ++i) longer += "many more words ";
    QVERIFY(sendAndWait(app, longer));
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 20000);
    const QString why = errors.at(0).at(0).toString();
    QVERIFY2(why.contains(QString("the context holds %1").arg(AppSettings::kMinContextLength)) &&
                 why.contains("Settings (GPU & offload, Context length)"),
             qPrintable(why));
  }

  // A change of policy while a reply streams waits for it: the reply ends
  // complete and stored whole, then the model reloads with the new policy.
  void changeDuringAReplyWaitsForItsEnd() {
    auto engine = std::make_unique<test::FakeChatEngine>();
    test::FakeChatEngine* fake = engine.get();
    engine->hold_after_first = true;  // the reply streams until the test lets it end
    engine->words.clear();
    for (int i = 0; i < 40; ++i) engine->words.push_back(" w" + std::to_string(i));
    std::string whole;
    for (const auto& w : engine->words) whole += w;
    whole.erase(0, 1);  // a reply is stored from its first visible character
    test::GuiApp app(std::move(engine));
    app.settings->setCachePolicy("proactive");
    QVERIFY(app.loadDemo());

    QStringList events;
    connect(app.chat, &ChatController::replyFinished, app.window.get(),
            [&](const Message& m) { events << "finished:" + QString::fromStdString(toString(m.state)); });
    connect(app.chat, &ChatController::reloadScheduled, app.window.get(),
            [&](const QString& what) { events << "scheduled:" + what; });
    connect(app.chat, &ChatController::modelReloading, app.window.get(),
            [&](const QString& what) { events << "reloading:" + what; });
    connect(app.chat, &ChatController::modelLoaded, app.window.get(),
            [&](const LoadedModelInfo& info) { events << "loaded:" + QString::fromStdString(info.policy); });

    auto* edit = app.window->composer()->editor();
    QTest::keyClicks(edit, "A long answer, please");
    QTest::keyClick(edit, Qt::Key_Return);
    QTRY_VERIFY(app.chat->busy());
    const qint64 reply = app.chat->streamingReply();
    {
      auto dlg = app.window->makeSettingsDialog();
      auto* settings = qobject_cast<SettingsDialog*>(dlg.get());
      dlg->findChild<QComboBox*>("policy")->setCurrentText("reactive-lru");
      QVERIFY2(settings->applyNote().contains("once the reply in progress ends"),
               qPrintable(settings->applyNote()));
      settings->accept();
    }
    QTRY_VERIFY(app.chat->reloadPending());
    QVERIFY(app.chat->busy());  // the reply goes on
    QVERIFY2(statusText(app).contains("reloads with the reactive-lru policy when this reply ends"),
             qPrintable(statusText(app)));
    QVERIFY2(!app.window->statusBar()->currentMessage().contains("reloads with"),  // said once, not twice
             qPrintable(app.window->statusBar()->currentMessage()));
    fake->hold_after_first = false;

    QTRY_VERIFY_WITH_TIMEOUT(events.size() >= 4 && events.last().startsWith("loaded:"), 30000);
    QCOMPARE(events.size(), 4);
    QVERIFY2(events[0].startsWith("scheduled:Demo model reloads with the reactive-lru policy"),
             qPrintable(events[0]));
    QCOMPARE(events[1], QString("finished:complete"));
    QCOMPARE(events[2], QString("reloading:Reloading Demo model with the reactive-lru policy…"));
    QCOMPARE(events[3], QString("loaded:reactive-lru"));
    const auto m = app.store->message(reply);
    QVERIFY(m);
    QCOMPARE(m->state, MessageState::Complete);
    QCOMPARE(m->text, whole);
    QVERIFY(!app.chat->reloadPending());
    QCOMPARE(QString::fromStdString(app.chat->model()->policy), QString("reactive-lru"));
  }

  // Stopped instead: the text so far is stored (stopped), then the reload runs.
  void stoppingAReplyLetsThePendingReloadRun() {
    auto engine = std::make_unique<test::FakeChatEngine>();
    engine->hold_after_first = true;  // streams until stopped
    engine->words.assign(200, " word");
    test::GuiApp app(std::move(engine));
    QVERIFY(app.loadDemo());
    auto* edit = app.window->composer()->editor();
    QTest::keyClicks(edit, "Go on and on");
    QTest::keyClick(edit, Qt::Key_Return);
    QTRY_VERIFY(app.chat->busy());
    const qint64 reply = app.chat->streamingReply();
    QSignalSpy loaded(app.chat, &ChatController::modelLoaded);
    app.settings->setVramBudgetBytes(8'000'000'000);
    QTRY_VERIFY(app.chat->reloadPending());
    QTRY_VERIFY(app.store->message(reply) && !app.store->message(reply)->text.empty());  // some text streamed
    QCOMPARE(loaded.count(), 0);
    QTest::keyClick(edit, Qt::Key_Escape);
    QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, 30000);
    const auto m = app.store->message(reply);
    QCOMPARE(m->state, MessageState::Stopped);
    QVERIFY(!m->text.empty());
    QVERIFY(!app.chat->reloadPending());
  }

  // Budget and policy changed together (as the dialog's OK does): one reload.
  // Set back before the reply ends: none.
  void oneReloadPerChangeAndNoneWhenSetBack() {
    auto engine = std::make_unique<test::FakeChatEngine>();
    test::FakeChatEngine* fake = engine.get();
    engine->words.assign(100, " word");
    test::GuiApp app(std::move(engine));
    app.settings->setCachePolicy("proactive");
    QVERIFY(app.loadDemo());
    QSignalSpy reloading(app.chat, &ChatController::modelReloading);
    app.settings->setVramBudgetBytes(10'500'000'000);
    app.settings->setCachePolicy("static");
    QTRY_COMPARE(reloading.count(), 1);
    QCOMPARE(reloading[0][0].toString(),
             QString("Reloading Demo model with a 10.5 GB budget and the static policy…"));
    QTRY_VERIFY(app.chat->modelReady());
    QCOMPARE(QString::fromStdString(app.chat->model()->policy), QString("static"));

    fake->hold_after_first = true;  // the reply streams until the test lets it end
    auto* edit = app.window->composer()->editor();
    QTest::keyClicks(edit, "Hello");
    QTest::keyClick(edit, Qt::Key_Return);
    QTRY_VERIFY(app.chat->busy());
    app.settings->setVramBudgetBytes(0);
    QTRY_VERIFY(app.chat->reloadPending());
    QVERIFY2(statusText(app).contains("the automatic budget"), qPrintable(statusText(app)));
    app.settings->setVramBudgetBytes(10'500'000'000);
    QTRY_VERIFY(!app.chat->reloadPending());
    QVERIFY2(statusText(app).startsWith("Demo model"), qPrintable(statusText(app)));
    QVERIFY(app.chat->busy());
    fake->hold_after_first = false;
    QTRY_VERIFY_WITH_TIMEOUT(!app.chat->busy(), 30000);
    test::settle();  // a reload the reply's end would start has been asked for by now
    QCOMPARE(reloading.count(), 1);
  }

  // A new predictor (imported, or saved by the predictor wizard) reloads the
  // model the same way: after the reply in progress, with the settings as they
  // are then.
  void predictorReloadWaitsForTheReplyToo() {
    auto engine = std::make_unique<test::FakeChatEngine>();
    test::FakeChatEngine* fake = engine.get();
    engine->hold_after_first = true;  // the reply streams until the test lets it end
    engine->words.assign(40, " word");
    test::GuiApp app(std::move(engine));
    app.settings->setCachePolicy("proactive");
    QVERIFY(app.loadDemo());
    auto* edit = app.window->composer()->editor();
    QTest::keyClicks(edit, "Hello");
    QTest::keyClick(edit, Qt::Key_Return);
    QTRY_VERIFY(app.chat->busy());
    const qint64 reply = app.chat->streamingReply();
    QSignalSpy reloading(app.chat, &ChatController::modelReloading);
    app.window->reloadModel("its new predictor");
    QVERIFY(app.chat->reloadPending());
    QVERIFY2(statusText(app).contains("Demo model reloads with its new predictor when this reply ends"),
             qPrintable(statusText(app)));
    app.settings->setCachePolicy("static");  // meanwhile
    fake->hold_after_first = false;
    QTRY_VERIFY_WITH_TIMEOUT(!app.chat->busy(), 30000);
    QCOMPARE(app.store->message(reply)->state, MessageState::Complete);
    QCOMPARE(app.store->message(reply)->text.size(),
             size_t(40 * 5 - 1));  // " w10".."w39", the first space dropped
    QTRY_VERIFY(app.chat->modelReady());
    QCOMPARE(reloading.count(), 1);
    QCOMPARE(reloading[0][0].toString(), QString("Reloading Demo model with its new predictor…"));
    QCOMPARE(QString::fromStdString(app.chat->model()->policy), QString("static"));
    test::settle();
    QCOMPARE(reloading.count(), 1);  // the policy change rode along: no second reload
  }

  void noModelNoReload() {
    test::GuiApp app(std::make_unique<test::FakeChatEngine>());
    QSignalSpy reloading(app.chat, &ChatController::modelReloading);
    app.settings->setVramBudgetBytes(8'000'000'000);
    test::settle();
    QCOMPARE(reloading.count(), 0);
    QVERIFY(!app.chat->modelReady());
    auto dlg = app.window->makeSettingsDialog();
    dlg->findChild<QComboBox*>("policy")->setCurrentText("static");
    QVERIFY(qobject_cast<SettingsDialog*>(dlg.get())->applyNote().isEmpty());
  }

  // A new models folder: the model menu lists the GGUF files in it.
  void newModelsFolderRefreshesTheModelMenu() {
    test::GuiApp app(std::make_unique<test::FakeChatEngine>());
    ModelRegistry registry(*app.db);
    AppWiring wiring(*app.window, *app.settings, registry, *app.db);
    auto* combo = app.window->findChild<QComboBox*>("modelCombo");
    QVERIFY(combo);
    const int before = combo->count();
    QTemporaryDir folder;
    QVERIFY(QDir(folder.path()).mkpath("sub"));
    for (const char* name : {"mine.gguf", "sub/other.gguf", "half.gguf.part", "notes.txt"}) {
      QFile f(folder.filePath(name));
      QVERIFY(f.open(QIODevice::WriteOnly));
    }
    QCOMPARE(combo->findText("mine.gguf"), -1);
    auto dlg = app.window->makeSettingsDialog();
    dlg->findChild<QLineEdit*>("modelsFolder")->setText(folder.path());
    qobject_cast<SettingsDialog*>(dlg.get())->accept();
    QCOMPARE(combo->count(), before + 2);
    const int mine = combo->findText("mine.gguf");
    QVERIFY(mine >= 0);
    QCOMPARE(combo->itemData(mine).toString(), QFileInfo(folder.filePath("mine.gguf")).absoluteFilePath());
    QVERIFY(combo->findText("other.gguf") >= 0);
  }

  void newDataFolderIsSaidToApplyAtTheNextStart() {
    test::GuiApp app(std::make_unique<test::FakeChatEngine>());
    auto dlg = app.window->makeSettingsDialog();
    auto* settings = qobject_cast<SettingsDialog*>(dlg.get());
    QVERIFY(settings->applyNote().isEmpty());
    dlg->findChild<QLineEdit*>("dataFolder")->setText(app.dir.filePath("elsewhere"));
    QVERIFY2(settings->applyNote().contains("next start"), qPrintable(settings->applyNote()));
  }
};

QTEST_MAIN(GuiSettingsApplyTest)
#include "test_gui_settings_apply.moc"
