// Settings: VRAM budget (slider + number, or auto) and the model's context length,
// with the load plan of the current model (resolveLoadPlan, app/core/load_plan.h: the
// same plan the engine loads, its KV cache included) updating as they move, caching
// policy, sampling defaults,
// folders, theme, learning from use (recorded traces: the switch, what it
// stores, the disk it uses, delete all). Reads and writes through the injected AppSettings on OK.
#pragma once

#include <QDialog>
#include <optional>

#include "app/core/load_plan.h"
#include "app/core/model_shape.h"
#include "app/qt/app_settings.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSlider;
class QSpinBox;

namespace moe {

class SamplingForm;

struct SettingsContext {
  std::optional<ModelShape> model;  // the model the fit is shown for (none: no estimate)
  QString model_name;
  // The device the loaded model's plan was resolved against (LoadedModelInfo::device:
  // on a GPU, its free memory before the model loaded). gpu false: the CPU.
  DeviceMemory device;
  bool demo = false;                 // the model is the demo model
  quint64 host_available_bytes = 0;  // MemAvailable, 0 unknown
  int n_ctx = 4096;                  // the context the fit is shown for (the setting's, for the model)
  QString model_path;                // the model's file ("" for the demo): whose context length is set
  bool model_loaded = false;         // OK reloads it when the budget, the policy or its context changed
  bool reply_running = false;        // ... after the reply in progress
};

class SettingsDialog : public QDialog {
  Q_OBJECT

 public:
  SettingsDialog(AppSettings& settings, SettingsContext context, QWidget* parent = nullptr);

  // The budget the controls show now, in bytes (0 = auto).
  quint64 budgetBytes() const;
  QString fitText() const;
  // The plan the fit text shows (none without a model): what OK would load.
  const std::optional<LoadPlan>& shownPlan() const { return plan_; }
  QString applyNote() const;  // empty when hidden
  void accept() override;

 private:
  QWidget* buildOffloadTab();
  QWidget* buildSamplingTab();
  QWidget* buildGeneralTab();
  QWidget* buildLearningTab();
  void updateTraceUsage();
  void updateFit();
  // Under the buttons: what OK will do beyond saving (reload the model, a
  // data folder used from the next start); hidden when nothing.
  void updateApplyNote();

  AppSettings& settings_;
  SettingsContext ctx_;
  QCheckBox* auto_budget_ = nullptr;
  QSlider* budget_slider_ = nullptr;
  QDoubleSpinBox* budget_gb_ = nullptr;
  QLabel* fit_ = nullptr;
  std::optional<LoadPlan> plan_;
  QComboBox* policy_ = nullptr;
  QLabel* policy_help_ = nullptr;
  QSpinBox* context_ = nullptr;  // the model's context length, in tokens
  int initial_context_ = 0;      // what it showed at first (saved only when changed)
  SamplingForm* sampling_ = nullptr;
  QLineEdit* models_folder_ = nullptr;
  QLineEdit* data_folder_ = nullptr;
  QComboBox* theme_ = nullptr;
  QCheckBox* learn_from_use_ = nullptr;
  QLabel* trace_usage_ = nullptr;
  QPushButton* delete_traces_ = nullptr;
  QLabel* apply_note_ = nullptr;
};

}  // namespace moe
