// One budget, one story, where no GPU computes: the settings dialog, the models view
// and the status bar after a load all show the plan resolveLoadPlan gives, and the
// engine loads it: the slots the dialog showed are the slots the reloaded engine counts
// in its cache, for auto and for three budgets. Here a cache is host memory standing
// in for VRAM, and every view says it is a simulation; a real model under auto runs
// on the CPU with no cache, and every view says that too.
#include <QApplication>
#include <QtTest>

#include "app/core/local_chat_engine.h"
#include "support/budget_views.h"

using namespace moe;

class GuiBudgetTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    if (probeDevice(DeviceChoice::kAuto).gpu) QSKIP("a GPU computes here: test_cuda_gui_budget covers it");
  }

  // The demo model under auto: half its experts in the simulated cache, shown so.
  void demoUnderAutoLoadsTheSimulatedCacheTheDialogShows() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    app.settings->setCachePolicy("proactive");
    QVERIFY(app.loadDemo());
    const test::ShownAndLoaded r = test::applyBudget(app, std::nullopt);
    QVERIFY2(r.failure.empty(), r.failure.c_str());
    QVERIFY(r.shown && r.shown->loads() && r.shown->simulated);
    QCOMPARE(uint64_t(r.shown->cache_slots), r.shown->fit.total_experts / 2);
    QCOMPARE(r.loaded_slots, r.shown->cache_slots);
    QVERIFY2(r.fit_text.contains("simulation in host memory, not VRAM"), qPrintable(r.fit_text));
    QVERIFY2(r.note.contains(QString("cache of %1 of").arg(r.loaded_slots)) && r.note.contains("simulated"),
             qPrintable(r.note));
  }

  // A model file under auto and three budgets: the dialog's slots, the engine's, the
  // models view's cell and the status bar's note agree each time.
  void autoAndThreeBudgetsLoadWhatTheDialogShows() {
    test::BudgetApp budget;
    QVERIFY(budget.open());
    test::GuiApp& app = budget.app;
    AppWiring& wiring = *budget.wiring;

    // Auto: the CPU computes every expert; nothing is cached, in any view.
    test::ShownAndLoaded r = test::applyBudget(app, std::nullopt);
    QVERIFY2(r.failure.empty(), r.failure.c_str());
    QVERIFY(r.shown && r.shown->onCpuOnly());
    QCOMPARE(r.loaded_slots, 0);
    QCOMPARE(r.shown->cache_slots, 0);
    QVERIFY2(r.fit_text.contains("the model runs on the CPU"), qPrintable(r.fit_text));
    QVERIFY2(r.note.contains("no GPU in use"), qPrintable(r.note));
    QCOMPARE(test::modelsViewFit(app, wiring, "budget.gguf"), QString("runs on the CPU (no GPU)"));

    const LoadPlan loaded = app.chat->model()->plan;
    for (double gb : test::threeBudgetsGb(loaded)) {
      r = test::applyBudget(app, gb);
      QVERIFY2(r.failure.empty(), r.failure.c_str());
      QVERIFY(r.shown && r.shown->loads());
      QVERIFY2(r.shown->cache_slots > 2 && uint64_t(r.shown->cache_slots) < r.shown->fit.total_experts,
               qPrintable(r.fit_text));
      QCOMPARE(r.loaded_slots, r.shown->cache_slots);
      QVERIFY(r.shown->simulated);
      QVERIFY2(r.fit_text.contains(QString("Expert cache: %1 of 64 experts").arg(r.loaded_slots)),
               qPrintable(r.fit_text));
      QVERIFY2(r.note.contains(QString("cache of %1 of 64 experts (simulated").arg(r.loaded_slots)),
               qPrintable(r.note));
      QCOMPARE(test::modelsViewFit(app, wiring, "budget.gguf"), QString::fromStdString(planShort(*r.shown)));
    }
  }
};

QTEST_MAIN(GuiBudgetTest)
#include "test_gui_budget.moc"
