// The six pages of PredictorWizard. Widgets carry object names so tests (and
// accessibility tools) can find them.
#pragma once

#include <QWizardPage>
#include <vector>

#include "app/qt/predictor_trainer.h"
#include "ui/trainer_run.h"

class QButtonGroup;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QRadioButton;
class QSpinBox;
class QTableWidget;
class QVBoxLayout;

namespace moe {

class PredictorWizard;
class TrainingChart;

// Installed models and the demo: Model | Predictor | Accuracy.
class PredictorModelPage : public QWizardPage {
  Q_OBJECT

 public:
  explicit PredictorModelPage(PredictorWizard& wizard);
  void initializePage() override;
  bool isComplete() const override;
  bool validatePage() override;

 private:
  PredictorWizard& wizard_;
  QTableWidget* table_;
};

// Built-in prompts | a text file | your conversations | traces recorded while
// chatting; how many prompts and greedy tokens; the measured estimate.
class PromptSourcePage : public QWizardPage {
  Q_OBJECT

 public:
  explicit PromptSourcePage(PredictorWizard& wizard);
  void initializePage() override;
  bool isComplete() const override;
  bool validatePage() override;

 private:
  void updateChoice();
  void updateEstimate();
  // The prompts of the chosen source, all of them (the count cuts them).
  std::vector<std::string> availablePrompts(QString* error);

  PredictorWizard& wizard_;
  QRadioButton *builtin_, *file_, *conversations_, *recorded_;
  QLineEdit* file_edit_;
  QPushButton* browse_;
  QSpinBox *count_, *tokens_;
  QLabel *available_, *estimate_, *error_;
  std::vector<std::string> cached_;  // availablePrompts of the last choice
  QString cached_key_;
};

// Tracing: progress, ETA, cancel / resume.
class TracePage : public QWizardPage {
  Q_OBJECT

 public:
  explicit TracePage(PredictorWizard& wizard);
  void initializePage() override;
  void cleanupPage() override;
  bool isComplete() const override { return done_; }

 private:
  void start();

  PredictorWizard& wizard_;
  QProgressBar* progress_;
  QLabel *status_, *eta_;
  QPushButton *cancel_, *resume_;
  TrainerRun run_;
  bool done_ = false;
};

// Training: the live chart, one progress bar per layer, cancel / train again.
// The set is evaluated as soon as it is trained.
class TrainPage : public QWizardPage {
  Q_OBJECT

 public:
  explicit TrainPage(PredictorWizard& wizard);
  void initializePage() override;
  void cleanupPage() override;
  bool isComplete() const override { return done_; }

 private:
  void start();
  void onProgress(const TrainProgress& p);

  PredictorWizard& wizard_;
  TrainingChart* chart_;
  QVBoxLayout* layer_box_;
  std::vector<std::pair<int, QProgressBar*>> layer_bars_;
  QLabel* status_;
  QPushButton *cancel_, *retry_;
  TrainerRun run_;
  bool done_ = false;
};

// The evaluation table (per layer and overall, learned and every baseline) and
// what the learned predictor does not beat. Its commit button saves.
class EvaluationPage : public QWizardPage {
  Q_OBJECT

 public:
  explicit EvaluationPage(PredictorWizard& wizard);
  void initializePage() override;

 private:
  PredictorWizard& wizard_;
  QTableWidget* table_;
  QLabel* verdict_;
};

class SavePage : public QWizardPage {
  Q_OBJECT

 public:
  explicit SavePage(PredictorWizard& wizard);
  void initializePage() override;

 private:
  PredictorWizard& wizard_;
  QLabel* result_;
};

}  // namespace moe
