#include "ui/screenshots.h"

#include <QAbstractButton>
#include <QApplication>
#include <QDeadlineTimer>
#include <QDialog>
#include <QDir>
#include <QTabWidget>
#include <cstdio>

#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"
#include "ui/composer.h"
#include "ui/main_window.h"
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

}  // namespace

int renderScreenshots(MainWindow& window, AppSettings& settings, const QString& dir,
                      const std::function<std::unique_ptr<QWidget>()>& make_wizard,
                      const std::function<std::unique_ptr<PredictorWizard>()>& make_predictor_wizard) {
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
  short_replies.max_tokens = 96;  // random weights: a screenful of noise says enough
  chat.setSampling(short_replies);
  chat.send("Which experts did you use for this answer? Show it as a table.");
  if (!pumpUntil([&] { return !chat.busy(); }, 120'000)) return 1;
  chat.send("And in code?");
  // Catch it mid-reply too, so the strip shows live figures.
  pumpUntil([&] { return !chat.busy(); }, 120'000);
  pumpUntil([] { return false; }, 600);  // let the strip poll once more
  bool ok = save(window, QDir(dir).filePath("main-light.png"));

  const QString theme = settings.theme();
  applyTheme(*qobject_cast<QApplication*>(QApplication::instance()), "dark");
  pumpUntil([] { return false; }, 300);
  ok &= save(window, QDir(dir).filePath("main-dark.png"));
  applyTheme(*qobject_cast<QApplication*>(QApplication::instance()), theme == "dark" ? "light" : theme);

  auto settings_dialog = window.makeSettingsDialog();
  settings_dialog->show();
  pumpUntil([] { return false; }, 200);
  ok &= save(*settings_dialog, QDir(dir).filePath("settings.png"));
  settings_dialog->close();
  if (make_wizard) {
    auto wizard = make_wizard();
    wizard->resize(900, 620);
    wizard->show();
    pumpUntil([] { return false; }, 300);
    ok &= save(*wizard, QDir(dir).filePath("model-wizard.png"));
    wizard->close();
  }
  if (make_predictor_wizard) {
    auto wizard = make_predictor_wizard();
    ok &= renderPredictorWizard(*wizard, dir);
  }
  return ok ? 0 : 1;
}

}  // namespace moe
