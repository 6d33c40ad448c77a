#include "ui/screenshots.h"

#include "ui/perf_strip.h"

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QDeadlineTimer>
#include <QDialog>
#include <QDir>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QTabWidget>
#include <QTreeWidget>
#include <cstdio>

#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/composer.h"
#include "ui/main_window.h"
#include "ui/model_wizard.h"
#include "ui/predictor_wizard.h"
#include "ui/theme.h"

namespace moe {
namespace {

// Runs the event loop until done() or the deadline; false on timeout.
template <class Done>
bool pumpUntil(Done done, int ms) {
  QDeadlineTimer deadline(ms);
  while (!done()) {
    if (deadline.hasExpired()) return false;
    QApplication::processEvents(QEventLoop::AllEvents, 50);
  }
  return true;
}

bool save(QWidget& w, const QString& path) {
  const bool ok = w.grab().save(path);
  std::fprintf(stderr, "%s %s\n", ok ? "wrote" : "FAILED to write", qPrintable(path));
  return ok;
}

// The predictor wizard on the demo model: the default prompts traced and
// trained for real, then the training and evaluation pages rendered.
bool renderPredictorWizard(PredictorWizard& w, const QString& dir) {
  w.resize(900, 680);
  w.show();
  auto next_ready = [&] { return w.button(QWizard::NextButton)->isEnabled(); };
  auto step = [&](int want) {
    if (!pumpUntil(next_ready, 300'000)) return false;
    w.next();
    return w.currentId() == want;
  };
  bool ok = step(PredictorWizard::SourceStep) && pumpUntil([&] { return w.modelReady(); }, 120'000) &&
            step(PredictorWizard::TraceStep) && step(PredictorWizard::TrainStep) &&
            pumpUntil(next_ready, 600'000);
  if (!ok) {
    std::fprintf(stderr, "screenshots: the predictor wizard did not get through training\n");
    return false;
  }
  pumpUntil([] { return false; }, 300);
  ok &= save(w, QDir(dir).filePath("predictor-training.png"));
  w.next();
  pumpUntil([] { return false; }, 300);
  ok &= w.currentId() == PredictorWizard::EvaluationStep &&
        save(w, QDir(dir).filePath("predictor-evaluation.png"));
  w.reject();  // nothing is saved
  return ok;
}

// The chat following a long reply, the dark theme, the settings at 80 GB, the
// models view and the hub search, on a screen of `screen` pixels.
bool renderAtSize(MainWindow& window, AppSettings& settings, const QString& dir, QSize screen,
                  const ScreenshotSources& sources) {
  const QString suffix = QStringLiteral("-%1x%2.png").arg(screen.width()).arg(screen.height());
  auto path = [&](const char* name) { return QDir(dir).filePath(QString::fromLatin1(name) + suffix); };
  auto fit = [&](QWidget& w, QSize want) {  // a dialog as big as it asks, within the screen
    w.resize(want.boundedTo(screen - QSize(40, 60)));
    w.show();
    pumpUntil([] { return false; }, 300);
  };
  auto& chat = window.chat();
  window.resize(screen);
  pumpUntil([] { return false; }, 200);
  bool ok = true;

  // A long reply, caught while it streams: the view follows its end.
  chat.newConversation();
  SamplingDefaults long_reply = settings.sampling();
  long_reply.max_tokens = 600;
  chat.setSampling(long_reply);
  chat.send("Tell me a long story about the experts of every layer.");
  pumpUntil([&] { return !chat.busy() || chat.streamingConversation() == 0; }, 2000);
  pumpUntil([] { return false; }, 2500);  // several hundred tokens in, the strip polled
  ok &= save(window, path("chat-following"));
  pumpUntil([&] { return !chat.busy(); }, 120'000);
  // Another chat while a reply streams: its composer names the chat answering (a link
  // to it) and waits; the list marks the chat answering. Taken at once: the demo's
  // replies are short.
  chat.send("Tell me more about the experts.");
  const qint64 answering = chat.current();
  chat.newConversation();
  pumpUntil([] { return false; }, 30);
  if (chat.busy()) ok &= save(window, path("answering-elsewhere"));
  chat.openConversation(answering);
  pumpUntil([&] { return !chat.busy(); }, 120'000);
  // Editing the question: the banner, Resend, the message framed.
  if (window.chatView()->bubbleCount() > 0)
    for (auto* b : window.chatView()->bubble(0)->findChildren<QAbstractButton*>())
      if (b->text() == "Edit") {
        b->click();
        pumpUntil([] { return false; }, 300);
        ok &= save(window, path("editing"));
        for (auto* a : window.findChildren<QAction*>())
          if (a->text() == "Stop the reply") a->trigger();  // Esc: the edit is dropped
        break;
      }

  const QString theme = settings.theme();
  auto* app = qobject_cast<QApplication*>(QApplication::instance());
  applyTheme(*app, "dark");
  pumpUntil([] { return false; }, 300);
  ok &= save(window, path("dark"));
  applyTheme(*app, theme == "dark" ? "light" : theme);
  pumpUntil([] { return false; }, 100);

  auto settings_dialog = window.makeSettingsDialog();
  if (auto* auto_budget = settings_dialog->findChild<QAbstractButton*>("autoBudget"))
    auto_budget->setChecked(false);
  if (auto* gb = settings_dialog->findChild<QDoubleSpinBox*>("budgetGb")) gb->setValue(80.0);
  fit(*settings_dialog, settings_dialog->sizeHint().expandedTo(QSize(760, 640)));
  ok &= save(*settings_dialog, path("settings-80gb"));
  settings_dialog->close();

  if (sources.models_view) {
    auto view = sources.models_view();
    fit(*view, QSize(1000, 420));
    ok &= save(*view, path("models"));
    view->close();
  }
  if (sources.model_wizard) {
    auto wizard = sources.model_wizard();
    fit(*wizard, QSize(980, 680));
    if (auto* hub = wizard->findChild<QAbstractButton*>("hubRadio")) hub->setChecked(true);
    wizard->next();
    auto* query = wizard->findChild<QLineEdit*>("hubQuery");
    auto* results = wizard->findChild<QTreeWidget*>("hubResults");
    if (wizard->currentId() == ModelWizard::HubPage && query && results) {
      query->setText(sources.hub_query);
      emit query->returnPressed();
      if (pumpUntil([&] { return results->topLevelItemCount() > 0; }, 20'000)) {
        QTreeWidgetItem* repo = results->topLevelItem(0);
        for (int i = 0; i < results->topLevelItemCount(); ++i)
          if (results->topLevelItem(i)->text(0).contains("30B-A3B")) repo = results->topLevelItem(i);
        results->setCurrentItem(repo);
        if (pumpUntil([&] { return repo->childCount() > 0; }, 20'000)) {
          for (int i = 0; i < repo->childCount(); ++i)
            if (repo->child(i)->flags() & Qt::ItemIsSelectable) {
              results->setCurrentItem(repo->child(i));
              break;
            }
          pumpUntil([] { return false; }, 300);
          ok &= save(*wizard, path("hub-search"));
        }
      } else {
        std::fprintf(stderr, "screenshots: the hub did not answer; no hub-search picture\n");
      }
    }
    wizard->reject();
  }
  return ok;
}

}  // namespace

int renderScreenshots(MainWindow& window, AppSettings& settings, const QString& dir,
                      const ScreenshotSources& sources) {
  QDir().mkpath(dir);
  auto& chat = window.chat();
  window.resize(1280, 800);
  window.show();
  if (!pumpUntil([&] { return chat.modelReady(); }, 120'000)) {
    std::fprintf(stderr, "screenshots: the model did not load\n");
    return 1;
  }
  chat.newConversation();
  SamplingDefaults short_replies = settings.sampling();
  short_replies.max_tokens = 96;  // a small model: a screenful says enough
  chat.setSampling(short_replies);
  // The trained demo learned from the Brown corpus (stories, news, letters): asked
  // for a story it answers in simple English.
  chat.send("Tell me a story about an old farmer and his dog.");
  if (!pumpUntil([&] { return !chat.busy(); }, 120'000)) return 1;
  chat.send("What happened to them the next morning?");
  // Catch it mid-reply too, so the strip shows live figures.
  pumpUntil([&] { return !chat.busy(); }, 120'000);
  pumpUntil([] { return false; }, 600);  // let the strip poll once more
  bool ok = save(window, QDir(dir).filePath("main-light.png"));

  const QString theme = settings.theme();
  applyTheme(*qobject_cast<QApplication*>(QApplication::instance()), "dark");
  window.perfStrip()->setDetailsShown(true);  // the dark picture shows the expert-cache figures too
  pumpUntil([] { return false; }, 300);
  ok &= save(window, QDir(dir).filePath("main-dark.png"));
  window.perfStrip()->setDetailsShown(settings.perfDetails());
  applyTheme(*qobject_cast<QApplication*>(QApplication::instance()), theme == "dark" ? "light" : theme);

  auto settings_dialog = window.makeSettingsDialog();
  settings_dialog->show();
  pumpUntil([] { return false; }, 200);
  ok &= save(*settings_dialog, QDir(dir).filePath("settings.png"));
  settings_dialog->close();
  if (sources.model_wizard) {
    auto wizard = sources.model_wizard();
    wizard->resize(900, 620);
    wizard->show();
    pumpUntil([] { return false; }, 300);
    ok &= save(*wizard, QDir(dir).filePath("model-wizard.png"));
    wizard->close();
  }
  for (QSize screen : {QSize(1280, 800), QSize(1024, 700)})
    ok &= renderAtSize(window, settings, dir, screen, sources);
  window.resize(1280, 800);
  if (sources.predictor_wizard) {
    auto wizard = sources.predictor_wizard();
    ok &= renderPredictorWizard(*wizard, dir);
  }
  return ok ? 0 : 1;
}

}  // namespace moe
