#include "app/qt/predictor_trainer.h"

namespace moe {

PredictorTrainer::PredictorTrainer(QObject* parent) : QObject(parent) {
  qRegisterMetaType<TraceRates>();
  qRegisterMetaType<TraceProgress>();
  qRegisterMetaType<TraceRunResult>();
  qRegisterMetaType<TrainProgress>();
  qRegisterMetaType<EvalReport>();
  qRegisterMetaType<std::shared_ptr<const PredictorSet>>();
  context_ = new QObject;
  context_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, context_, &QObject::deleteLater);
  thread_.setObjectName("predictor-trainer");
  thread_.start();
}

PredictorTrainer::~PredictorTrainer() {
  cancel_ = true;
  post([this] { pipeline_.reset(); });  // the model goes on the thread that used it
  thread_.quit();
  thread_.wait();
}

template <class F>
void PredictorTrainer::post(F job) {
  ++pending_;
  QMetaObject::invokeMethod(
      context_,
      [this, job = std::move(job)] {
        try {
          job();
        } catch (const std::exception& e) {
          emit failed(QString::fromUtf8(e.what()));
        }
        --pending_;
        emit finished();
      },
      Qt::QueuedConnection);
}

void PredictorTrainer::open(const QString& model_path, const QString& sha256) {
  cancel_ = false;
  post([this, model_path, sha256] {
    if (!pipeline_ || open_path_ != model_path) {
      pipeline_.reset();
      pipeline_ = std::make_unique<PredictorTraining>(model_path.toStdString(), sha256.toStdString());
      open_path_ = model_path;
    }
    const TraceRates rates = pipeline_->measureRates();
    emit opened(QString::fromStdString(pipeline_->modelSha256()),
                QString::fromStdString(pipeline_->modelName()), rates);
  });
}

void PredictorTrainer::trace(const std::vector<std::string>& prompts, const TraceOptions& options,
                             const QString& path) {
  cancel_ = false;
  post([this, prompts, options, path] {
    if (!pipeline_) throw std::logic_error("no model is open");
    const TraceRunResult r = pipeline_->trace(
        prompts, options, path.toStdString(), [this](const TraceProgress& p) { emit traceProgress(p); },
        &cancel_);
    emit traceFinished(r);
  });
}

void PredictorTrainer::train(const QString& trace_path, const TrainOptions& options) {
  cancel_ = false;
  post([this, trace_path, options] {
    if (!pipeline_) throw std::logic_error("no model is open");
    const std::string path = trace_path.toStdString();
    TrainResult r = pipeline_->train(
        path, options, [this](const TrainProgress& p) { emit trainProgress(p); }, &cancel_);
    if (r.cancelled) throw std::runtime_error("training was cancelled");
    auto set = std::make_shared<const PredictorSet>(std::move(r.set));
    emit evaluated(pipeline_->evaluate(path, *set), set);
  });
}

}  // namespace moe
