// The VRAM budget as the user meets it, for the GUI tests of one plan in every view
// (test_gui_budget on the CPU, test_cuda_gui_budget on the CUDA stand-in): a model
// whose experts are big enough that budgets a few tens of MB apart hold different
// caches, the settings dialog driven like a user (auto, or a figure in GB, then OK),
// and the slots it showed against the slots the reloaded engine counts in its cache.
#pragma once

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTableWidget>
#include <QTest>
#include <cmath>
#include <optional>
#include <string>

#include "app/core/fit_words.h"
#include "app/core/local_chat_engine.h"
#include "app/core/model_registry.h"
#include "desktop/app_wiring.h"
#include "support/gui_fixture.h"
#include "synth/synthetic_model.h"
#include "ui/models_view.h"
#include "ui/settings_dialog.h"

namespace moe::test {

// The demo's shape (4 layers x 16 experts) with experts of 3 x 64 x 2048 F16 values
// (786 KB): a 10 MB step of the dialog's number is about 13 experts.
inline void writeBudgetModel(const std::string& path) {
  synth::SyntheticSpec spec = synth::demoSpec();
  spec.name = "budget test model";
  spec.n_ff_exp = 2048;
  synth::writeModel(spec, path);
}

// What the settings dialog showed for a budget, and what the engine loaded after OK.
struct ShownAndLoaded {
  std::optional<LoadPlan> shown;  // the dialog's plan
  QString fit_text;               // the dialog's words for it
  int loaded_slots = -1;          // counted in the reloaded engine's cache
  QString note;                   // the status bar's note after the load
  std::string failure;            // not empty: the steps did not complete
};

inline ShownAndLoaded failed(std::string why) {
  ShownAndLoaded r;
  r.failure = std::move(why);
  return r;
}

// Opens the settings dialog, sets the budget (nullopt: auto; else GB, as typed in
// the number box), reads the plan it shows, presses OK and, when that changes the
// budget, waits for the model to reload.
inline ShownAndLoaded applyBudget(GuiApp& app, std::optional<double> gb) {
  ShownAndLoaded r;
  auto dlg = app.window->makeSettingsDialog();
  auto* settings = qobject_cast<SettingsDialog*>(dlg.get());
  auto* auto_box = dlg->findChild<QCheckBox*>("autoBudget");
  auto* number = dlg->findChild<QDoubleSpinBox*>("budgetGb");
  if (!settings || !auto_box || !number) return failed("the settings dialog has no budget controls");
  auto_box->setChecked(!gb);
  if (gb) number->setValue(*gb);
  r.shown = settings->shownPlan();
  r.fit_text = settings->fitText();
  const bool reloads = settings->budgetBytes() != app.settings->vramBudgetBytes();
  QSignalSpy loaded(app.chat, &ChatController::modelLoaded);
  settings->accept();
  if (reloads) {
    QDeadlineTimer deadline(120000);
    while (loaded.count() == 0 && !deadline.hasExpired()) QTest::qWait(20);
    if (loaded.count() == 0) return failed("the model did not reload");
  }
  if (!app.chat->model()) return failed("no model loaded");
  r.loaded_slots = app.chat->model()->cache_slots;
  r.note = QString::fromStdString(app.chat->model()->offload_note);
  return r;
}

// Loads the model at `path` and waits for it.
inline bool loadModelFile(GuiApp& app, const QString& path) {
  QSignalSpy loaded(app.chat, &ChatController::modelLoaded);
  app.window->loadModel({QFileInfo(path).fileName(), path, QString()});
  QDeadlineTimer deadline(120000);
  while (loaded.count() == 0 && !deadline.hasExpired()) QTest::qWait(20);
  return app.chat->modelReady() && app.chat->model()->path == path.toStdString();
}

// The models view's fit cell for the file named `name`, built as the app builds it
// (the wiring lives as long as the app: it serves the chat's model-hash lookup).
inline QString modelsViewFit(GuiApp& app, AppWiring& wiring, const QString& name) {
  auto view = wiring.makeModelsView(app.window.get());
  QTableWidget* t = view->table();
  for (int row = 0; row < t->rowCount(); ++row)
    if (t->item(row, ModelsView::ColName)->text() == name) return t->item(row, ModelsView::ColFit)->text();
  return QStringLiteral("(no row named %1)").arg(name);
}

// Three budgets in the dialog's GB (2 decimals), each the first above the fixed parts
// plus k experts for k = 6, 24, 42: caches of 6-19, 24-37 and 42-55 of 64 slots.
inline std::vector<double> threeBudgetsGb(const LoadPlan& loaded) {
  std::vector<double> out;
  for (int k : {6, 24, 42})
    out.push_back(std::ceil(double(loaded.fit.fixedBytes() + uint64_t(k) * loaded.fit.expert_bytes) / 1e7) /
                  100);
  return out;
}

// The app on the real engine, wired as the desktop program wires it, under the
// proactive policy, with the budget model in its models folder, loaded.
struct BudgetApp {
  GuiApp app{std::make_unique<LocalChatEngine>()};
  ModelRegistry registry{*app.db};
  std::unique_ptr<AppWiring> wiring;
  QString path = app.dir.filePath("budget.gguf");

  // False when the model did not load.
  bool open() {
    app.settings->setCachePolicy("proactive");
    app.settings->setModelsFolder(app.dir.path());
    wiring = std::make_unique<AppWiring>(*app.window, *app.settings, registry, *app.db);
    writeBudgetModel(path.toStdString());
    return loadModelFile(app, path);
  }
};

}  // namespace moe::test
