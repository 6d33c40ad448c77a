// The engine's thread. InferenceWorker is a QObject living in its own QThread
// and owning a ChatEngine; the GUI talks to it only through queued calls and
// signals (text is coalesced to one signal every ~40 ms), and polls the
// engine's atomic counters from a timer. EngineHost owns the thread.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>
#include <memory>
#include <vector>

#include "app/core/chat_engine.h"

Q_DECLARE_METATYPE(moe::EngineLoadOptions)
Q_DECLARE_METATYPE(moe::LoadedModelInfo)
Q_DECLARE_METATYPE(moe::EngineReplyStats)
Q_DECLARE_METATYPE(moe::GenerationParams)
Q_DECLARE_METATYPE(std::vector<moe::ChatMessage>)

namespace moe {

class InferenceWorker : public QObject {
  Q_OBJECT

 public:
  static constexpr int kCoalesceMs = 40;

  explicit InferenceWorker(std::unique_ptr<ChatEngine> engine);
  ~InferenceWorker() override;

  // Thread-safe: stops reply `reply_id` (whether it is running or still queued).
  void requestStop(qint64 reply_id);
  // The engine's counters and this process's resident memory.
  EngineCounters counters() const;
  ExpertResidency residency() const { return engine_->residency(); }
  // Thread-safe: the engine is not destroyed with the worker (see EngineHost::leaveEngineToExit).
  void keepEngineAtDestruction() { keep_engine_ = true; }

 public slots:
  void loadModel(const moe::EngineLoadOptions& opts);
  // thinking: ChatOptions::thinking for this reply. trace_path: where to record it
  // (ChatEngine::setTraceRecording); empty: not recorded.
  void generate(qint64 reply_id, const std::vector<moe::ChatMessage>& messages,
                const moe::GenerationParams& params, bool thinking = true,
                const QString& trace_path = QString());

 signals:
  void loadProgress(double fraction, const QString& stage);
  void modelLoaded(const moe::LoadedModelInfo& info);
  void loadFailed(const QString& reason);
  void textReady(qint64 reply_id, const QString& text);
  void replyFinished(qint64 reply_id, const moe::EngineReplyStats& stats);
  void replyFailed(qint64 reply_id, const QString& reason);

 private:
  std::unique_ptr<ChatEngine> engine_;
  std::atomic<bool> cancel_{false};
  std::atomic<qint64> current_reply_{0};
  std::atomic<qint64> stop_up_to_{0};  // highest reply id asked to stop
  std::atomic<bool> keep_engine_{false};
};

// Starts the worker's thread on construction; stops any reply and joins the
// thread on destruction.
class EngineHost : public QObject {
  Q_OBJECT

 public:
  explicit EngineHost(std::unique_ptr<ChatEngine> engine, QObject* parent = nullptr);
  ~EngineHost() override;

  InferenceWorker* worker() const { return worker_; }
  // For a process about to exit: the destructor still stops the reply and joins
  // the thread (the reply's text is saved, its trace file closed), but leaves the
  // engine (the model's weights and expert store, gigabytes) for the operating
  // system to reclaim at exit; freeing them piece by piece kept the process alive
  // for seconds after the window closed, and a new moechat was refused meanwhile.
  void leaveEngineToExit() { worker_->keepEngineAtDestruction(); }
  // Queued calls into the worker's thread.
  void loadModel(const EngineLoadOptions& opts);
  void generate(qint64 reply_id, const std::vector<ChatMessage>& messages, const GenerationParams& params,
                bool thinking = true, const QString& trace_path = QString());
  void stop(qint64 reply_id) { worker_->requestStop(reply_id); }

 private:
  QThread thread_;
  InferenceWorker* worker_;  // deleted on the worker thread when it finishes
};

void registerEngineMetaTypes();

}  // namespace moe
