// The real engine behind ChatEngine: an EngineSession (model, backend, expert
// source, transformer, generator) driven with the model's chat template.
#pragma once

#include <memory>
#include <mutex>

#include "app/core/chat_engine.h"

namespace moe {

class EngineSession;
struct SessionOptions;

class LocalChatEngine final : public ChatEngine {
 public:
  LocalChatEngine();
  ~LocalChatEngine() override;

  LoadedModelInfo load(const EngineLoadOptions& opts, const LoadProgress& progress) override;
  bool loaded() const override;
  EngineReplyStats reply(const std::vector<ChatMessage>& messages, const GenerationParams& params,
                         const TextSink& on_text, const std::atomic<bool>& cancel) override;
  EngineCounters counters() const override;
  ExpertResidency residency() const override;
  void setTraceRecording(const std::string& path) override;
  void setChatOptions(const ChatOptions& options) override { chat_options_ = options; }

  // Where no GPU computes, an expert cache is host memory (a simulation, see
  // app/core/load_plan.h) and the link is simulated at the bandwidth of PCIe 4.0 x16 as
  // commonly measured for pinned copies (~25 GB/s; the theoretical 31.5 GB/s is never
  // reached).
  static constexpr double kSimulatedLinkBytesPerSecond = 25e9;
  // The session for opts: the device (the GPU where one is usable and asked for), the
  // policy, the budget setting the session resolves into its plan, the simulated link
  // on the CPU, and under proactive the stored predictor set (one made for another
  // model is left out). *note: the predictor's words for the UI ("" without one).
  static SessionOptions sessionOptionsFor(const EngineLoadOptions& opts, std::string* note);

 private:
  static void attachPredictor(const EngineLoadOptions& opts, SessionOptions* so, std::string* note);
  // The chat's tokens, its oldest messages after the system prompt left out (counted
  // in *dropped; never the system prompt or the last message) until the prompt and
  // max_tokens of reply fit the context. Only text new since the last reply is
  // tokenised (the session's ChatTokenCache); *tokenized_bytes counts it.
  std::vector<int32_t> promptFitting(const std::vector<ChatMessage>& messages, int max_tokens, int* dropped,
                                     uint64_t* tokenized_bytes);
  // After a device error: the model again, on the CPU. Throws DeviceFallback
  // (or, when the CPU cannot load it either, a runtime_error saying both).
  [[noreturn]] void fallBackToCpu(const DeviceError& e);

  mutable std::mutex session_mu_;  // guards session_ against the GUI thread's polls during load()
  std::unique_ptr<EngineSession> session_;
  std::atomic<bool> loaded_{false};
  bool random_demo_ = false;  // the random-weight demo: its replies run to their limit
  std::string model_sha256_;  // for trace headers; empty: recording stays off
  std::string trace_path_;
  EngineLoadOptions load_opts_;  // what load() was last given
  GenerationProgress progress_;
  std::atomic<uint64_t> total_generated_{0};
  std::atomic<uint64_t> vram_used_{0}, vram_total_{0};  // sampled on the engine thread
  void sampleDeviceMemory();
  int n_layer_ = 0, n_expert_ = 0;
  ChatOptions chat_options_;
};

}  // namespace moe
