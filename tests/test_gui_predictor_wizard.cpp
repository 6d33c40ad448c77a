// The predictor wizard driven offscreen with QTest on the real demo model (no
// engine mocks): built-in prompts traced, trained with the live chart,
// evaluated against the baselines and saved into a real SQLite database, after
// which the model page shows the stored accuracy; tracing cancelled, resumed
// with the button and by going back and forth; your conversations as the prompt
// source; traces recorded while chatting skip the trace step; and from the
// main window (the app's real wiring): File > Train a predictor, after which
// the model menu shows the predictor and the loaded model uses it at once.
#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/conversation_prompts.h"
#include "app/core/conversation_store.h"
#include "app/core/demo_model.h"
#include "app/core/local_chat_engine.h"
#include "app/core/model_predictor.h"
#include "app/core/model_registry.h"
#include "app/core/predictor_store.h"
#include "app/core/predictor_training.h"
#include "desktop/app_wiring.h"
#include "support/gui_fixture.h"
#include "ui/predictor_wizard.h"
#include "ui/training_chart.h"

using namespace moe;

namespace {

// Generous: the sanitizer build on two shared cores runs these flows several times slower.
constexpr int kTimeout = 240000;

struct Env {
  AppDatabase db;
  ModelRegistry registry;
  PredictorWizard wizard;
  Env(const QString& dir, const QString& name)
      : db(AppDatabase::open((dir + "/" + name + ".db").toStdString())),
        registry(db),
        wizard(db, registry, dir + "/" + name + "-traces") {
    wizard.show();
  }
};

template <class T>
T* child(QWidget& w, const char* name) {
  auto* c = w.findChild<T*>(name);
  if (!c) qFatal("no %s", name);
  return c;
}

// A radio button or check box is clicked on its indicator (it takes clicks on its
// indicator and text, not on the empty rest of a wide row).
void click(QAbstractButton* b) {
  if (qobject_cast<QRadioButton*>(b) || qobject_cast<QCheckBox*>(b))
    QTest::mouseClick(b, Qt::LeftButton, {}, QPoint(8, b->height() / 2));
  else
    QTest::mouseClick(b, Qt::LeftButton);
}
void clickNext(QWizard& w) { click(w.button(QWizard::NextButton)); }

void setSpin(QSpinBox* spin, int value) {
  spin->setFocus();
  QTest::keyClick(spin, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(spin, QString::number(value));
  QTest::keyClick(spin, Qt::Key_Tab);
}

// Selects the demo model's row with the mouse and goes on to the source page,
// waiting for the model to be opened and measured.
void pickDemo(PredictorWizard& w) {
  auto* table = child<QTableWidget>(w, "modelTable");
  QCOMPARE(table->item(0, 0)->data(Qt::UserRole).toString(), QString());  // the demo comes first
  table->clearSelection();
  QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, table->visualItemRect(table->item(0, 0)).center());
  QVERIFY(w.button(QWizard::NextButton)->isEnabled());
  clickNext(w);
  QCOMPARE(w.currentId(), int(PredictorWizard::SourceStep));
  QTRY_VERIFY_WITH_TIMEOUT(w.modelReady(), kTimeout);
  QCOMPARE(w.model().sha256, QString::fromStdString(demoModelSha256()));
}

}  // namespace

class TestGuiPredictorWizard : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

 private slots:
  void builtinPromptsTrainEvaluateAndSave() {
    Env e(dir_.path(), "full");
    PredictorWizard& w = e.wizard;
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* models = child<QTableWidget>(w, "modelTable");
    QCOMPARE(models->columnCount(), 3);
    QCOMPARE(models->horizontalHeaderItem(2)->text(), QString("Accuracy"));
    QCOMPARE(models->item(0, 1)->text(), QString("none"));
    pickDemo(w);

    // The estimate is measured, and grows with the amount.
    auto* estimate = child<QLabel>(w, "estimateLabel");
    QTRY_VERIFY(estimate->text().startsWith("Estimated tracing time"));
    QVERIFY(estimate->text().contains("estimate"));
    QVERIFY(child<QRadioButton>(w, "builtinRadio")->isChecked());
    QVERIFY(!child<QRadioButton>(w, "recordedRadio")->isEnabled());  // no recorded traces wired in
    QVERIFY(!child<QRadioButton>(w, "recordedRadio")->toolTip().isEmpty());
    const double rate = w.rates().prefill_seconds_per_token;
    QVERIFY(rate > 0);
    setSpin(child<QSpinBox>(w, "promptCount"), 12);
    setSpin(child<QSpinBox>(w, "newTokens"), 4);
    QCOMPARE(child<QSpinBox>(w, "promptCount")->value(), 12);
    clickNext(w);

    QCOMPARE(w.currentId(), int(PredictorWizard::TraceStep));
    QCOMPARE(int(w.prompts.size()), 12);
    auto* progress = child<QProgressBar>(w, "traceProgress");
    QTRY_COMPARE_WITH_TIMEOUT(progress->value(), 12, kTimeout);
    QCOMPARE(progress->maximum(), 12);
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    QVERIFY(child<QLabel>(w, "etaLabel")->text().startsWith("Done: 12 prompts traced"));
    qInfo() << estimate->text() << "|" << child<QLabel>(w, "etaLabel")->text();
    clickNext(w);

    QCOMPARE(w.currentId(), int(PredictorWizard::TrainStep));
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    QVERIFY(w.trained);
    const int layers = int(w.trained->layers.size());
    QVERIFY(layers >= 1);
    auto* chart = child<TrainingChart>(w, "trainingChart");
    QVERIFY(!chart->grab().isNull());  // paints with every curve
    const auto& curves = chart->curves();
    QCOMPARE(int(curves.size()), layers);  // one curve per layer, with every reported epoch
    for (const auto& [layer, c] : curves) {
      QVERIFY(!c.points.empty());
      QCOMPARE(c.target_layer, layer + 2);
      QVERIFY(c.points.front().loss > 0);
    }
    QVERIFY(child<QProgressBar>(w, "layerProgress0")->format().contains("done"));
    qInfo() << child<QLabel>(w, "trainStatus")->text();
    clickNext(w);

    QCOMPARE(w.currentId(), int(PredictorWizard::EvaluationStep));
    auto* table = child<QTableWidget>(w, "evalTable");
    QCOMPARE(table->rowCount(), layers + 1);
    QCOMPARE(table->item(layers, 0)->text(), QString("overall"));
    const QStringList want{"learned", "skip-gate", "token-based", "previous-token", "popularity", "random"};
    for (int c = 0; c < want.size(); ++c) {
      QCOMPARE(table->horizontalHeaderItem(2 + c)->text(), want[c]);
      for (int r = 0; r < table->rowCount(); ++r) {
        QString cell = table->item(r, 2 + c)->text();
        QVERIFY2(cell.endsWith('%'), qPrintable(cell));
        cell.chop(1);
        bool ok = false;
        const double v = cell.toDouble(&ok);
        QVERIFY(ok && v >= 0 && v <= 100);
      }
    }
    // random is k / n_expert: 2 of the trained demo's 8 experts (of the random demo's 16).
    QCOMPARE(table->item(layers, 7)->text(),
             QString(appDemoModel() == DemoModel::kTrained ? "25.0%" : "12.5%"));
    const QString verdict = child<QLabel>(w, "verdictLabel")->text();
    qInfo().noquote() << QString::fromStdString(evalReportText(w.report)) << verdict;
    const auto missed = w.report.notBeaten();
    if (missed.empty()) {
      QVERIFY(verdict.contains("beats every baseline"));
    } else {
      QVERIFY(verdict.contains("does not beat"));
      for (const auto& m : missed) QVERIFY(verdict.contains(QString::fromStdString(m)));
    }

    QSignalSpy saved(&w, &PredictorWizard::predictorSaved);
    QVERIFY(PredictorStore(e.db).list(demoModelSha256()).empty());
    QCOMPARE(w.button(QWizard::CommitButton)->text(), QString("Save"));
    click(w.button(QWizard::CommitButton));
    QCOMPARE(w.currentId(), int(PredictorWizard::SaveStep));
    QCOMPARE(saved.count(), 1);
    QCOMPARE(saved.at(0).at(0).toString(), QString());  // the demo model
    QVERIFY(child<QLabel>(w, "saveResult")->text().contains("proactive policy"));
    const auto stored = PredictorStore(e.db).load(demoModelSha256());
    QVERIFY(stored);
    QCOMPARE(int(stored->layers.size()), layers);
    QCOMPARE(stored->trained_on, std::string("built-in prompts (12)"));
    QCOMPARE(stored->layers.front().toBlob(), w.trained->layers.front().toBlob());

    // The model page now shows the stored predictor and its accuracy.
    const auto info = storedPredictorInfo(e.db, demoModelSha256());
    QVERIFY(info && info->mean_accuracy >= 0);
    // The saved page names the figure the model menu shows (not only the test prompts' one).
    const QString save_text = child<QLabel>(w, "saveResult")->text();
    QVERIFY2(save_text.contains("Mean validation Accuracy " + percentText(info->mean_accuracy) +
                                " (the figure the model menu shows)"),
             qPrintable(save_text));
    QCOMPARE(QString::fromStdString(predictorNote(info)),
             QString("predictor %1%").arg(std::lround(info->mean_accuracy * 100)));
    w.restart();
    QCOMPARE(w.currentId(), int(PredictorWizard::ModelStep));
    QCOMPARE(models->item(0, 1)->text(), QString("distance 2, %1 layers").arg(layers));
    QCOMPARE(models->item(0, 2)->text(), percentText(info->mean_accuracy));
    QVERIFY(models->item(0, 2)->text() != QString::fromUtf8("—"));
  }

  void cancelledTracingResumes() {
    Env e(dir_.path(), "cancel");
    PredictorWizard& w = e.wizard;
    pickDemo(w);
    auto* count = child<QSpinBox>(w, "promptCount");
    setSpin(count, count->maximum());  // every built-in prompt, long enough to cancel part-way
    const int total = count->value();
    QVERIFY(total >= 60);
    setSpin(child<QSpinBox>(w, "newTokens"), 16);
    w.trainOptions.max_epochs = 4;  // the point here is the trace; keep training short (ASan builds)
    clickNext(w);

    auto* cancel = child<QPushButton>(w, "cancelTrace");
    auto* resume = child<QPushButton>(w, "resumeTrace");
    auto* eta = child<QLabel>(w, "etaLabel");
    // Cancel with the mouse as soon as a few prompts are done.
    int cancel_at = 3;
    auto conn = connect(&w.trainer(), &PredictorTrainer::traceProgress, this, [&](const TraceProgress& p) {
      if (cancel_at > 0 && p.prompts_done >= cancel_at && cancel->isEnabled()) {
        cancel_at = 0;
        click(cancel);
      }
    });
    QTRY_VERIFY_WITH_TIMEOUT(resume->isVisible(), kTimeout);
    QVERIFY(eta->text().startsWith("Stopped."));
    QVERIFY(!w.button(QWizard::NextButton)->isEnabled());
    const std::string path = w.tracePath.toStdString();
    const int kept = int(TraceReader(path).prompts().size());
    QVERIFY(kept >= 3 && kept < total);
    QVERIFY(eta->text().contains(QString("%1 of %2 prompts are on disk").arg(kept).arg(total)));

    // Resume with the button, cancel again, then go back and forward: it resumes again.
    cancel_at = kept + 5;
    click(resume);
    QTRY_VERIFY_WITH_TIMEOUT(resume->isVisible() || w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    QVERIFY2(resume->isVisible(), "the second cancel came too late");
    const int kept2 = int(TraceReader(path).prompts().size());
    QVERIFY(kept2 >= kept + 5 && kept2 < total);
    disconnect(conn);

    click(w.button(QWizard::BackButton));
    QCOMPARE(w.currentId(), int(PredictorWizard::SourceStep));
    QCOMPARE(count->value(), total);  // the choice is still there
    clickNext(w);
    QCOMPARE(w.currentId(), int(PredictorWizard::TraceStep));
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    QVERIFY2(eta->text().contains(QString("(%1 of them in an earlier run)").arg(kept2)),
             qPrintable(eta->text()));
    QCOMPARE(int(TraceReader(path).prompts().size()), total);
    QCOMPARE(child<QProgressBar>(w, "traceProgress")->value(), total);

    clickNext(w);  // and the resumed trace trains
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    QVERIFY(w.trained && !w.trained->layers.empty());
  }

  void yourConversationsAsPrompts() {
    Env e(dir_.path(), "conv");
    {
      ConversationStore store(e.db);
      const int64_t a = store.createConversation("maths");
      const int64_t b = store.createConversation("travel");
      const int64_t gone = store.createConversation("deleted");
      for (int i = 0; i < 5; ++i) {
        store.addMessage(a, Role::User, "What is " + std::to_string(i) + " times seven, and why?");
        store.addMessage(a, Role::Assistant, "An answer.");
        store.addMessage(b, Role::User, "Plan day " + std::to_string(i) + " of a walk along the Rhine.");
      }
      store.addMessage(gone, Role::User, "a deleted conversation's message");
      store.softDelete(gone);
    }
    PredictorWizard& w = e.wizard;
    pickDemo(w);
    auto* conversations = child<QRadioButton>(w, "conversationsRadio");
    QVERIFY(conversations->isEnabled());
    click(conversations);
    QVERIFY(conversations->isChecked());
    auto* count = child<QSpinBox>(w, "promptCount");
    QCOMPARE(count->maximum(), 10);  // the ten live user turns
    QCOMPARE(count->value(), 10);
    setSpin(count, 8);
    setSpin(child<QSpinBox>(w, "newTokens"), 2);
    QTRY_VERIFY(w.button(QWizard::NextButton)->isEnabled());
    clickNext(w);
    QCOMPARE(w.prompts, conversationPrompts(e.db, 8));
    QTRY_COMPARE_WITH_TIMEOUT(child<QProgressBar>(w, "traceProgress")->value(), 8, kTimeout);
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    clickNext(w);
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    clickNext(w);
    click(w.button(QWizard::CommitButton));
    const auto stored = PredictorStore(e.db).load(demoModelSha256());
    QVERIFY(stored);
    QCOMPARE(stored->trained_on, std::string("your conversations (8 prompts)"));
  }

  void conversationsNeedThreeMessages() {
    Env e(dir_.path(), "few");
    {
      ConversationStore store(e.db);
      store.addMessage(store.createConversation("one"), Role::User, "only one");
    }
    PredictorWizard& w = e.wizard;
    pickDemo(w);
    auto* conversations = child<QRadioButton>(w, "conversationsRadio");
    QVERIFY(!conversations->isEnabled());
    QVERIFY(conversations->toolTip().contains("at least 3"));
  }

  void aPromptFileIsReadOrItsErrorShown() {
    Env e(dir_.path(), "file");
    const QString good = dir_.filePath("mine.txt");
    {
      QFile f(good);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("one\n\ntwo\nthree\\nlines\nfour\nfive\n");
    }
    PredictorWizard& w = e.wizard;
    pickDemo(w);
    auto* edit = child<QLineEdit>(w, "promptFileEdit");
    QTest::keyClicks(edit, dir_.filePath("missing.txt"));  // typing there chooses the file
    QVERIFY(child<QRadioButton>(w, "fileRadio")->isChecked());
    QVERIFY(child<QLabel>(w, "errorLabel")->text().contains("cannot read"));
    QVERIFY(!w.button(QWizard::NextButton)->isEnabled());
    edit->selectAll();
    QTest::keyClicks(edit, good);
    QVERIFY(child<QLabel>(w, "errorLabel")->text().isEmpty());
    QCOMPARE(child<QSpinBox>(w, "promptCount")->maximum(), 5);
    QVERIFY(w.button(QWizard::NextButton)->isEnabled());
    clickNext(w);
    QCOMPARE(w.prompts, (std::vector<std::string>{"one", "two", "three\nlines", "four", "five"}));
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);  // traced
  }

  void aModelThatCannotBeOpenedSaysWhy() {
    Env e(dir_.path(), "broken");
    const QString path = dir_.filePath("broken.gguf");
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("not a gguf file at all");
    }
    ModelRecord rec;
    rec.path = path.toStdString();
    rec.name = "Broken";
    e.registry.upsert(rec);
    PredictorWizard& w = e.wizard;
    w.restart();
    auto* table = child<QTableWidget>(w, "modelTable");
    QCOMPARE(table->rowCount(), 2);
    QCOMPARE(table->item(1, 0)->text(), QString("Broken"));
    QCOMPARE(table->item(1, 1)->text(), QString("none"));
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {},
                      table->visualItemRect(table->item(1, 0)).center());
    clickNext(w);
    QTRY_VERIFY_WITH_TIMEOUT(
        child<QLabel>(w, "errorLabel")->text().startsWith("The model could not be opened"), kTimeout);
    QVERIFY(!w.button(QWizard::NextButton)->isEnabled());
    click(w.button(QWizard::BackButton));  // still usable: the demo works
    pickDemo(w);
    QVERIFY(w.button(QWizard::NextButton)->isEnabled());
  }

  void recordedTracesSkipTracing() {
    Env e(dir_.path(), "recorded");
    // A trace "recorded while chatting" (here: made by the pipeline directly).
    const QString recorded = dir_.filePath("recorded.moetrace");
    {
      PredictorTraining t({}, {});
      auto prompts = builtinPrompts();
      prompts.resize(10);
      t.trace(prompts, {}, recorded.toStdString(), {}, nullptr);
    }
    QString asked;
    e.wizard.setRecordedTraceSource([&](const QString& sha) {
      asked = sha;
      return recorded;
    });
    PredictorWizard& w = e.wizard;
    pickDemo(w);
    QCOMPARE(asked, QString::fromStdString(demoModelSha256()));
    auto* radio = child<QRadioButton>(w, "recordedRadio");
    QTRY_VERIFY(radio->isEnabled());
    click(radio);
    QVERIFY(!child<QSpinBox>(w, "promptCount")->isEnabled());
    QVERIFY(child<QLabel>(w, "estimateLabel")->text().startsWith("Nothing to trace"));
    clickNext(w);
    QCOMPARE(w.currentId(), int(PredictorWizard::TrainStep));  // no trace step
    QCOMPARE(w.tracePath, recorded);
    QTRY_VERIFY_WITH_TIMEOUT(w.button(QWizard::NextButton)->isEnabled(), kTimeout);
    QCOMPARE(w.trained->trained_on, std::string("traces recorded while chatting"));
  }

  void fromTheMainWindowTheNewPredictorIsUsedAtOnce() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    app.settings->setCachePolicy("proactive");
    app.settings->setDataFolder(app.dir.path());
    ModelRegistry registry(*app.db);
    AppWiring wiring(*app.window, *app.settings, registry, *app.db);
    auto* combo = app.window->findChild<QComboBox*>("modelCombo");
    QCOMPARE(combo->itemText(0), QString::fromStdString(demoModelName(appDemoModel())));  // no predictor yet
    QVERIFY(app.loadDemo());
    QCOMPARE(QString::fromStdString(app.chat->model()->predictor), QString("skip-gate"));

    auto* action = app.window->findChild<QAction*>("trainPredictorAction");
    QVERIFY(action && action->isEnabled());
    action->trigger();
    PredictorWizard* w = nullptr;
    QTRY_VERIFY((w = app.window->findChild<PredictorWizard*>()) && w->isVisible());
    w->trainOptions.max_epochs = 8;
    pickDemo(*w);
    setSpin(child<QSpinBox>(*w, "promptCount"), 12);
    clickNext(*w);
    QTRY_VERIFY_WITH_TIMEOUT(w->button(QWizard::NextButton)->isEnabled(), kTimeout);  // traced
    clickNext(*w);
    QTRY_VERIFY_WITH_TIMEOUT(w->button(QWizard::NextButton)->isEnabled(), kTimeout);  // trained
    clickNext(*w);
    click(w->button(QWizard::CommitButton));
    QVERIFY(QDir(app.dir.filePath("traces")).entryList({"*.moetrace"}).size() == 1);  // under the data folder
    click(w->button(QWizard::FinishButton));

    // The loaded model is reloaded with its new predictor, and the menu says so.
    QTRY_VERIFY_WITH_TIMEOUT(app.chat->modelReady() && app.chat->model()->predictor == "learned", kTimeout);
    const auto info = storedPredictorInfo(*app.db, demoModelSha256());
    QVERIFY(info);
    QTRY_COMPARE(combo->itemText(0), QString::fromStdString(demoModelName(appDemoModel())) + " · " +
                                         QString::fromStdString(predictorNote(info)));
    QVERIFY(combo->itemText(0).contains(QRegularExpression("predictor \\d+%")));
    QVERIFY(combo->itemData(0, Qt::ToolTipRole).toString().contains("proactive"));
  }

  // Learning from use, end to end through the app's wiring: replies recorded
  // while chatting, the status bar's retrain offer opens the wizard on the
  // loaded model with the recorded traces chosen, and it trains on them
  // without tracing anything.
  void theRetrainOfferTrainsOnWhatWasRecorded() {
    const test::StepLog stage;
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    app.settings->setCachePolicy("proactive");
    app.settings->setDataFolder(app.dir.path());
    app.settings->setLearnFromUse(true);
    ModelRegistry registry(*app.db);
    AppWiring wiring(*app.window, *app.settings, registry, *app.db);
    stage("loading the demo");
    QVERIFY(app.loadDemo());
    SamplingDefaults quick = app.settings->sampling();
    quick.max_tokens = 24;
    app.chat->setSampling(quick);
    for (const char* text : {"Plan a trip to Lisbon.", "Sort a list in C++.", "What is 17 times 23?",
                             "Translate 'good morning' into German.", "Write a haiku about rain."}) {
      stage(text);
      app.chat->newConversation();
      app.chat->send(text);
      QTRY_VERIFY_WITH_TIMEOUT(!app.chat->busy(), kTimeout);
    }
    const QString sha = QString::fromStdString(demoModelSha256());
    QVERIFY(!app.chat->recordedTracesFor(sha).isEmpty());

    // The offer itself (its threshold is tested in use_traces) and its button.
    stage("the retrain offer");
    emit app.chat->retrainSuggested(sha, 5000);
    auto* button = app.window->retrainBar()->findChild<QPushButton*>("retrainButton");
    QTRY_VERIFY(button && button->isVisible());
    click(button);
    PredictorWizard* w = nullptr;
    QTRY_VERIFY((w = app.window->findChild<PredictorWizard*>()) && w->isVisible());
    w->trainOptions.max_epochs = 4;
    stage("the wizard's model step");
    QCOMPARE(w->model().sha256, sha);
    QTRY_VERIFY_WITH_TIMEOUT(w->button(QWizard::NextButton)->isEnabled(), kTimeout);  // the demo is selected
    clickNext(*w);
    stage("the source step");
    QCOMPARE(w->currentId(), int(PredictorWizard::SourceStep));
    QTRY_VERIFY(child<QRadioButton>(*w, "recordedRadio")->isChecked());
    QTRY_VERIFY_WITH_TIMEOUT(w->button(QWizard::NextButton)->isEnabled(), kTimeout);
    clickNext(*w);
    stage("training");
    QCOMPARE(w->currentId(), int(PredictorWizard::TrainStep));  // nothing traced
    QTRY_VERIFY_WITH_TIMEOUT(w->button(QWizard::NextButton)->isEnabled(), kTimeout);
    QCOMPARE(w->trained->trained_on, std::string("traces recorded while chatting"));
    QVERIFY(w->trained->token_count > 0);
    QVERIFY(QDir(app.dir.filePath("traces")).entryList({"*.moetrace"}).isEmpty());
    stage("closing the wizard");
    w->reject();
    stage("closing the app");
  }
};

QTEST_MAIN(TestGuiPredictorWizard)
#include "test_gui_predictor_wizard.moc"
