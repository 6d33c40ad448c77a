#include "app/qt/inference_worker.h"

#include "app/core/process_memory.h"

#include <QElapsedTimer>
#include <QMetaObject>
#include <limits>

namespace moe {

void registerEngineMetaTypes() {
  qRegisterMetaType<EngineLoadOptions>();
  qRegisterMetaType<LoadedModelInfo>();
  qRegisterMetaType<EngineReplyStats>();
  qRegisterMetaType<GenerationParams>();
  qRegisterMetaType<std::vector<ChatMessage>>();
}

InferenceWorker::InferenceWorker(std::unique_ptr<ChatEngine> engine) : engine_(std::move(engine)) {}

InferenceWorker::~InferenceWorker() {
  if (keep_engine_) (void)engine_.release();  // the process exits next: the OS frees it at once
}

void InferenceWorker::requestStop(qint64 reply_id) {
  qint64 seen = stop_up_to_.load();
  while (seen < reply_id && !stop_up_to_.compare_exchange_weak(seen, reply_id)) {
  }
  // Pairs with generate(): either it sees stop_up_to_, or we see current_reply_.
  const qint64 running = current_reply_.load();
  if (running != 0 && running <= reply_id) cancel_ = true;
}

void InferenceWorker::loadModel(const EngineLoadOptions& opts) {
  try {
    const auto info = engine_->load(opts, [this](double f, std::string_view stage) {
      emit loadProgress(f, QString::fromUtf8(stage.data(), static_cast<qsizetype>(stage.size())));
    });
    emit modelLoaded(info);
  } catch (const std::exception& e) {
    emit loadFailed(QString::fromUtf8(e.what()));
  }
}

void InferenceWorker::generate(qint64 reply_id, const std::vector<ChatMessage>& messages,
                               const GenerationParams& params, bool thinking, const QString& trace_path) {
  current_reply_ = reply_id;
  cancel_ = stop_up_to_.load() >= reply_id;
  QString pending;
  QElapsedTimer since_emit;
  since_emit.start();
  auto flush = [&] {
    if (pending.isEmpty()) return;
    emit textReady(reply_id, pending);
    pending.clear();
    since_emit.restart();
  };
  try {
    if (!engine_->loaded()) throw std::runtime_error("no model is loaded");
    engine_->setTraceRecording(trace_path.toStdString());
    ChatOptions options;
    options.thinking = thinking;
    engine_->setChatOptions(options);
    const auto stats = engine_->reply(
        messages, params,
        [&](std::string_view s) {
          pending += QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
          if (since_emit.elapsed() >= kCoalesceMs) flush();
        },
        cancel_);
    flush();
    current_reply_ = 0;
    emit replyFinished(reply_id, stats);
  } catch (const DeviceFallback& e) {
    flush();
    current_reply_ = 0;
    emit replyFailed(reply_id, QString::fromUtf8(e.what()));
    emit modelLoaded(e.info);  // the same model, now on the CPU
  } catch (const std::exception& e) {
    flush();
    current_reply_ = 0;
    emit replyFailed(reply_id, QString::fromUtf8(e.what()));
  }
}

EngineHost::EngineHost(std::unique_ptr<ChatEngine> engine, QObject* parent)
    : QObject(parent), worker_(new InferenceWorker(std::move(engine))) {
  registerEngineMetaTypes();
  thread_.setObjectName("moechat-engine");
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.start();
}

EngineHost::~EngineHost() {
  worker_->requestStop(std::numeric_limits<qint64>::max());
  thread_.quit();
  thread_.wait();
}

void EngineHost::loadModel(const EngineLoadOptions& opts) {
  QMetaObject::invokeMethod(worker_, "loadModel", Qt::QueuedConnection, Q_ARG(moe::EngineLoadOptions, opts));
}

void EngineHost::generate(qint64 reply_id, const std::vector<ChatMessage>& messages,
                          const GenerationParams& params, bool thinking, const QString& trace_path) {
  QMetaObject::invokeMethod(worker_, "generate", Qt::QueuedConnection, Q_ARG(qint64, reply_id),
                            Q_ARG(std::vector<moe::ChatMessage>, messages),
                            Q_ARG(moe::GenerationParams, params), Q_ARG(bool, thinking),
                            Q_ARG(QString, trace_path));
}

EngineCounters InferenceWorker::counters() const {
  EngineCounters c = engine_->counters();
  c.ram_resident_bytes = processResidentBytes();
  return c;
}

}  // namespace moe
