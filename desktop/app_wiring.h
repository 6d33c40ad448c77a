// Connects the main window to the app's stores: the installed models for the
// model menu (with their predictor notes; registered ones and the GGUF files in
// the models folder, refreshed when the folders change), the model wizard (catalog,
// downloads, registry) for adding one, and the predictor wizard for training a
// predictor. Downloads left unfinished by the last run resume when this is built.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "app/core/app_database.h"
#include "app/core/download_store.h"
#include "app/core/installed_models.h"
#include "app/core/model_registry.h"
#include "app/qt/app_settings.h"
#include "app/qt/device_probe.h"
#include "app/qt/download_manager.h"
#include "app/qt/model_catalog.h"
#include "ui/main_window.h"
#include "ui/model_wizard.h"
#include "ui/models_view.h"
#include "ui/predictor_wizard.h"

namespace moe {

// The GGUF files under folder (subfolders included), at most `limit`, sorted:
// models the user put there by hand, listed in the model menu.
std::vector<QString> ggufFilesIn(const QString& folder, int limit = 200);

class AppWiring {
 public:
  // probe: what asks the device while no model is loaded (by default CUDA's free
  // memory); it starts at once, on a thread of its own (DeviceProbe).
  AppWiring(MainWindow& window, AppSettings& settings, ModelRegistry& registry, AppDatabase& db,
            DeviceProbe::Probe probe = {});
  ~AppWiring();

  // What the views' plans (app/core/load_plan.h) are resolved with: the budget and
  // policy settings, and the device: the one the loaded model's plan saw (its free
  // memory before it loaded), else the device the probe found (the CPU's until it
  // has answered: deviceKnown()).
  PlanInputs planInputs() const;
  bool deviceKnown() const;
  DeviceProbe& deviceProbe() { return *probe_; }

  // The wizard at the current VRAM budget and models folder, not yet shown (it waits
  // for the device probe if that has not answered: File > Add a model opens it only
  // once the answer is in).
  std::unique_ptr<ModelWizard> makeWizard(QWidget* parent);
  // The models view at the current budget and models folder, not yet shown:
  // Load loads the model, Remove deletes it and its predictor. Before the device
  // probe has answered its fit column says it is checking, and fills in on probed().
  std::unique_ptr<ModelsView> makeModelsView(QWidget* parent);
  // The predictor wizard (traces under the data folder's "traces"), not yet shown.
  std::unique_ptr<PredictorWizard> makePredictorWizard(QWidget* parent);
  // Where the predictor wizard finds traces recorded while chatting (see
  // PredictorWizard::setRecordedTraceSource); by default the chat controller's
  // (learning from use, ChatController::recordedTracesFor).
  void setRecordedTraceSource(std::function<QString(const QString& model_sha256)> source);

 private:
  void openWizard();
  // After a save, the loaded model is reloaded when it is the one trained for,
  // so its new predictor is used. retrain_sha256: the status bar's retrain offer
  // for the loaded model: that model and its recorded traces come preselected.
  void openPredictorWizard(const QString& retrain_sha256 = {});

  MainWindow& window_;
  AppSettings& settings_;
  ModelRegistry& registry_;
  AppDatabase& db_;
  DownloadStore download_store_;
  std::unique_ptr<DownloadManager> downloads_;
  std::unique_ptr<DeviceProbe> probe_;
  ModelCatalog catalog_;
  std::function<QString(const QString&)> recorded_traces_;
  bool wizard_waits_for_device_ = false;  // "Add a model" asked before the probe answered
};

}  // namespace moe
