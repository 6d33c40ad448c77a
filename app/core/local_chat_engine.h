// The real engine behind ChatEngine: an EngineSession (model, backend, expert
// source, transformer, generator) driven with the model's chat template.
#pragma once

#include <memory>
#include <mutex>

#include "app/core/chat_engine.h"

namespace moe {

class EngineSession;
struct ModelShape;
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

  // Where no GPU computes, the cache is host memory and the link is simulated at
  // the bandwidth of PCIe 4.0 x16 as commonly measured for pinned copies (~25 GB/s;
  // the theoretical 31.5 GB/s is never reached). With the budget on auto, the demo
  // model caches half its experts (to show the machinery) and a real model runs
  // resident (on a CPU, copies into a host-memory cache would only cost time).
  static constexpr double kSimulatedLinkBytesPerSecond = 25e9;
  static constexpr double kAutoCacheShareWithoutGpu = 0.5;
  // On a GPU with the budget on auto: what cudaMemGetInfo reports free, less
  // this much (other programs, the driver, fragmentation).
  static constexpr uint64_t kAutoVramMarginBytes = uint64_t(1) << 30;
  // The session for opts: backend, policy, cache size from the VRAM budget (via
  // the fit estimate; resident when everything fits), link. note: a line for the UI.
  static SessionOptions sessionOptionsFor(const EngineLoadOptions& opts, std::string* note);

 private:
  // Under proactive, the stored predictor set replaces skip-gate; a set made for
  // another model is left out, and the note says why.
  static SessionOptions cpuSessionOptions(const EngineLoadOptions& opts, std::string* note);
  // A usable GPU: experts cached in VRAM from pinned host memory (docs/offload.md, "The CUDA path").
  static SessionOptions gpuSessionOptions(const EngineLoadOptions& opts, std::string* note);
  // The cache for a VRAM budget (via the fit estimate): resident when every expert
  // fits, else the cache slots it leaves; `where` says where the cache lives.
  static void fitToBudget(const EngineLoadOptions& opts, const ModelShape& shape, uint64_t budget,
                          const std::string& where, SessionOptions* so, std::string* note);
  static void attachPredictor(const EngineLoadOptions& opts, const ModelShape& shape, SessionOptions* so,
                              std::string* note);
  // The chat's tokens, its oldest messages after the system prompt left out (counted
  // in *dropped; never the system prompt or the last message) until the prompt and
  // max_tokens of reply fit the context.
  std::vector<int32_t> promptFitting(const std::vector<ChatMessage>& messages, int max_tokens,
                                     int* dropped) const;
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
};

}  // namespace moe
