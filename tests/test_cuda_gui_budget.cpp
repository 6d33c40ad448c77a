// One budget, one story, on a GPU: the real engine on the CUDA stand-in
// (MOECHAT_CUDA_LIBRARY names it), the real window. Auto is the free memory the
// engine saw before the model loaded, less the safety margin, less what stays on the
// GPU; the settings dialog resolves the same plan against that device, so the slots it
// shows are the slots the reloaded engine counts in its cache, for auto and for three
// explicit budgets; the models view's cell and the status bar's note say the same.
#include <QApplication>
#include <QtTest>

#include "app/core/local_chat_engine.h"
#include "inference/backend_factory.h"
#include "support/budget_views.h"

// Last: the stand-in's runtime header defines the CUDA keywords as macros.
#include "cuda_standin.h"

using namespace moe;

class CudaGuiBudgetTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    std::string why;
    if (!cudaDeviceAvailable(&why)) QSKIP(("no CUDA device: " + why).c_str());
  }

  void cleanup() { cudastandin::recover(); }

  void autoAndThreeBudgetsLoadWhatTheDialogShows() {
    test::BudgetApp budget;
    QVERIFY(budget.open());
    test::GuiApp& app = budget.app;
    AppWiring& wiring = *budget.wiring;
    QVERIFY(QString::fromStdString(app.chat->model()->backend).startsWith("cuda"));
    const DeviceMemory first = app.chat->model()->device;
    const LoadPlan at_two_gib = app.chat->model()->plan;
    QVERIFY(first.gpu && first.free_bytes > 0 && first.free_bytes <= first.total_bytes);
    // The whole model fits the default 2 GiB device: resident, and the dialog says so.
    QVERIFY(at_two_gib.all_experts_fit);
    QCOMPARE(app.chat->model()->cache_slots, 0);

    // A device with room, after the margin and the fixed parts, for 30.5 experts: what
    // the backend holds before the model loads stays as it was.
    const uint64_t overhead = first.total_bytes - first.free_bytes;
    const uint64_t expert = at_two_gib.fit.expert_bytes;
    cudastandin::setDeviceBytes(
        size_t(overhead + kAutoVramMarginBytes + at_two_gib.fit.fixedBytes() + 30 * expert + expert / 2));
    QVERIFY(test::loadModelFile(app, budget.path));
    QCOMPARE(app.chat->model()->device.total_bytes - app.chat->model()->device.free_bytes, overhead);

    test::ShownAndLoaded r = test::applyBudget(app, std::nullopt);
    QVERIFY2(r.failure.empty(), r.failure.c_str());
    QVERIFY(r.shown && r.shown->loads() && r.shown->on_gpu && !r.shown->simulated);
    QCOMPARE(r.shown->cache_slots, 30);
    QCOMPARE(r.loaded_slots, r.shown->cache_slots);
    QVERIFY2(r.fit_text.contains("free less a 1.07 GB safety margin"), qPrintable(r.fit_text));
    QVERIFY2(r.note.contains("cache of 30 of 64 experts (in VRAM"), qPrintable(r.note));
    QCOMPARE(test::modelsViewFit(app, wiring, "budget.gguf"), QString::fromStdString(planShort(*r.shown)));

    const LoadPlan loaded = app.chat->model()->plan;
    for (double gb : test::threeBudgetsGb(loaded)) {
      r = test::applyBudget(app, gb);
      QVERIFY2(r.failure.empty(), r.failure.c_str());
      QVERIFY(r.shown && r.shown->loads() && !r.shown->simulated);
      QVERIFY2(r.shown->cache_slots > 2 && uint64_t(r.shown->cache_slots) < r.shown->fit.total_experts,
               qPrintable(r.fit_text));
      QCOMPARE(r.loaded_slots, r.shown->cache_slots);
      QVERIFY2(r.note.contains(QString("cache of %1 of 64 experts (in VRAM").arg(r.loaded_slots)),
               qPrintable(r.note));
      QCOMPARE(test::modelsViewFit(app, wiring, "budget.gguf"), QString::fromStdString(planShort(*r.shown)));
    }

    // Back to auto: the dialog resolves against the device the last load saw.
    r = test::applyBudget(app, std::nullopt);
    QVERIFY2(r.failure.empty(), r.failure.c_str());
    QCOMPARE(r.shown->cache_slots, 30);
    QCOMPARE(r.loaded_slots, 30);
  }
};

QTEST_MAIN(CudaGuiBudgetTest)
#include "test_cuda_gui_budget.moc"
