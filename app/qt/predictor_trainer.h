// The predictor pipeline (app/core/predictor_training.h) on its own thread, for
// the wizard: each call queues a job and returns at once; the job answers with
// queued signals. cancel() is thread-safe and stops the running job at its next
// check (between traced prompts, between training batches). The destructor
// cancels and joins the thread.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "app/core/predictor_training.h"

Q_DECLARE_METATYPE(moe::TraceRates)
Q_DECLARE_METATYPE(moe::TraceProgress)
Q_DECLARE_METATYPE(moe::TraceRunResult)
Q_DECLARE_METATYPE(moe::TrainProgress)
Q_DECLARE_METATYPE(moe::EvalReport)
Q_DECLARE_METATYPE(std::shared_ptr<const moe::PredictorSet>)

namespace moe {

class PredictorTrainer : public QObject {
  Q_OBJECT

 public:
  explicit PredictorTrainer(QObject* parent = nullptr);
  ~PredictorTrainer() override;

  // Opens the model (path empty: the demo; sha256 empty: hashed on the worker)
  // and measures its trace rates -> opened, or failed. A model already open
  // with this path is not opened again.
  void open(const QString& model_path, const QString& sha256);
  // Traces (resuming the file) -> traceProgress..., traceFinished, or failed.
  void trace(const std::vector<std::string>& prompts, const TraceOptions& options, const QString& path);
  // Trains on a trace, then evaluates the set on its test prompts ->
  // trainProgress..., evaluated, or failed (also when cancelled).
  void train(const QString& trace_path, const TrainOptions& options);
  void cancel() { cancel_ = true; }
  bool busy() const { return pending_ > 0; }

 signals:
  void opened(const QString& sha256, const QString& model_name, const moe::TraceRates& rates);
  void traceProgress(const moe::TraceProgress& progress);
  void traceFinished(const moe::TraceRunResult& result);
  void trainProgress(const moe::TrainProgress& progress);
  void evaluated(const moe::EvalReport& report, std::shared_ptr<const moe::PredictorSet> set);
  void failed(const QString& reason);
  // After every job, however it ended.
  void finished();

 private:
  template <class F>
  void post(F job);

  QThread thread_;
  QObject* context_ = nullptr;                   // lives on thread_: jobs run in its event loop
  std::unique_ptr<PredictorTraining> pipeline_;  // touched only by jobs
  QString open_path_;                            // the pipeline's model (jobs only)
  std::atomic<bool> cancel_{false};
  std::atomic<int> pending_{0};  // jobs queued or running
};

}  // namespace moe
