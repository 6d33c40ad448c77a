// The predictor wizard (docs/predictor.md, "Predictor wizard"): choose an
// installed model (the list shows which have a predictor and its accuracy) ->
// choose the prompts (built-in, a text file, your conversations, or traces
// recorded while chatting) and how many, with an estimate measured on this
// machine -> trace them (progress, ETA, cancel and resume) -> train (live
// loss and Accuracy per layer) -> the evaluation against the baselines -> save
// into the app database. The pipeline runs on PredictorTrainer's thread; the
// database is only touched here, on the GUI thread.
#pragma once

#include <QString>
#include <QWizard>
#include <functional>
#include <memory>
#include <vector>

#include "app/qt/predictor_trainer.h"

namespace moe {

class AppDatabase;
class ModelRegistry;

// A model the wizard can train for: an installed file, or the demo (empty path).
struct TrainableModel {
  QString name, path, sha256;  // sha256 empty: not hashed yet (the wizard hashes it)
  QString predictor{};         // "distance 2, 2 layers" or empty
  double accuracy = -1;        // mean validation Accuracy of its stored set, -1 when none
};

class PredictorWizard : public QWizard {
  Q_OBJECT

 public:
  enum PageId { ModelStep, SourceStep, TraceStep, TrainStep, EvaluationStep, SaveStep };
  enum class Source { Builtin, File, Conversations, Recorded };

  // traces_dir: where traces are written (created when missing).
  PredictorWizard(AppDatabase& db, ModelRegistry& registry, const QString& traces_dir,
                  QWidget* parent = nullptr);
  ~PredictorWizard() override;

  // Traces recorded while the user chatted with a model (by its SHA-256): a
  // trace file path, or empty when there is none. Unset or empty: that choice
  // is disabled, with a tooltip saying why. When chosen, tracing is skipped.
  void setRecordedTraceSource(std::function<QString(const QString& model_sha256)> source);
  QString recordedTraceFor(const QString& sha256) const;

  // The models to choose from: the demo model, then the registry's files that exist.
  std::vector<TrainableModel> models();
  void chooseModel(const TrainableModel& m);
  const TrainableModel& model() const { return model_; }
  // Set once the trainer has opened the model and measured it.
  bool modelReady() const { return ready_; }
  const TraceRates& rates() const { return rates_; }

  // What the source page chose; prompts() is filled by the source page.
  Source source = Source::Builtin;
  std::vector<std::string> prompts;
  QString sourceLabel;  // e.g. "built-in prompts (12)"
  TraceOptions traceOptions;
  TrainOptions trainOptions;  // defaults; tests may shorten them
  QString tracePath;          // this run's trace, or the recorded one

  // Set by the training page when the set is evaluated.
  std::shared_ptr<const PredictorSet> trained;
  EvalReport report;
  // Stores `trained`; returns an error, empty on success (then predictorSaved).
  QString saveTrained();

  AppDatabase& db() { return db_; }
  PredictorTrainer& trainer() { return trainer_; }
  const QString& tracesDir() const { return traces_dir_; }

  int nextId() const override;

 signals:
  // After the model is opened and measured (or failed: modelFailed).
  void modelReadyChanged();
  void modelFailed(const QString& reason);
  // A set was stored for this model (path empty: the demo model).
  void predictorSaved(const QString& model_path, const QString& sha256);

 private:
  AppDatabase& db_;
  ModelRegistry& registry_;
  QString traces_dir_;
  std::function<QString(const QString&)> recorded_;
  PredictorTrainer trainer_;
  TrainableModel model_;
  bool ready_ = false;
  bool opening_ = false;
  TraceRates rates_;
};

// "87.8%" for 0.878; "—" for a negative (unknown) value.
QString percentText(double share);

}  // namespace moe
