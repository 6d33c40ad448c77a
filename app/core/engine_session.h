// Glue shared by the CLI and the GUI's InferenceWorker: opens a model file or the
// embedded demo model, loads it on the compute backend and builds its runtime
// (runtime/runtime.h: the offload policy's expert source and the transformer). Qt-free.
//
// Threads: build the session and call generator() on one worker thread;
// offloadSnapshot() may be called from any other thread at any time (e.g. a UI
// timer 4-10 times a second) while that thread generates.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/core/demo_model.h"
#include "app/core/load_plan.h"
#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/generator.h"
#include "inference/model.h"
#include "inference/tokenizer/chat_tokens.h"
#include "inference/transformer.h"
#include "offload/offload_engine.h"
#include "offload/trainer/trace_recorder.h"
#include "runtime/runtime.h"

namespace moe {

struct SessionOptions {
  std::string model_path;  // empty with demo
  bool demo = false;
  DemoModel demo_model = DemoModel::kRandom;  // with demo: the built-in random model, or the trained file
  int n_ctx = 2048;                           // clamped to the model's trained context
  int threads = 0;                            // 0: all hardware threads
  // On CUDA, resident uploads every expert once; the offload policies cache them in
  // device memory (a CPU backend of `threads` computes the experts the CPU rule
  // sends to the host). kAuto: CUDA where usable, else the CPU.
  DeviceChoice device = DeviceChoice::kCpu;
  // The CPU backend's KV cache in F16 (half the memory; values rounded to half, as
  // the CUDA backend's cache always is). F32 otherwise.
  bool kv_f16 = false;

  // Offloading (docs/offload.md). resident keeps every expert in place.
  OffloadPolicy policy = OffloadPolicy::kResident;
  std::optional<Eviction> eviction;  // the cache's eviction rule; none: the policy's own
  bool mapped_decode = false;        // OffloadConfig::mapped_decode
  // The expert cache's budget, resolved with the loaded model's shape and the device's
  // free memory by resolveLoadPlan (app/core/load_plan.h). The CLI's default: half
  // the routed experts; the app's: its VRAM setting (auto or N GB).
  BudgetSetting budget = BudgetSetting::cacheShare(0.5);
  LinkOptions link;            // simulated host->device link (CPU path); default: plain copies
  ProactiveSwitches switches;  // proactive's optimisations
  std::function<void(const CpuDecision&)> on_cpu_decision;  // cpu-experts log (worker thread)
  // Optional (proactive): a trained predictor replacing skip-gate, predicting
  // predictor_distance layers ahead.
  std::shared_ptr<ExpertPredictor> predictor;
  int predictor_distance = 2;
};

// The model file on disk is no longer the one loaded (replaced, truncated,
// rewritten): computing on its mapping could fault, so nothing runs.
class ModelFileChanged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class EngineSession {
 public:
  // Loads the model, resolves the budget into the plan (the one call of
  // resolveLoadPlan for a load) and builds the runtime from it. Throws
  // gguf::GgufError / ModelError / TokenizerError with a readable reason,
  // std::invalid_argument when the plan does not load (a budget below 2 experts, a
  // bad setting), HostMemoryError when the expert store does not fit in RAM.
  explicit EngineSession(const SessionOptions& opts);
  ~EngineSession();

  Model& model() { return *model_; }
  Transformer& transformer() { return *transformer_; }
  Generator& generator() { return *generator_; }
  // The conversation's tokenised text, kept from one reply to the next for this
  // model's tokenizer (a load makes a new session, so a new cache).
  ChatTokenCache& chatTokens() { return *chat_tokens_; }
  Backend& backend() { return compute_->backend(); }
  bool isDemo() const { return demo_; }
  // The built-in random-weight demo: it reaches the end token only by chance, so its
  // replies run to their length limit (the trained demo stops like any model).
  bool isRandomDemo() const { return random_demo_; }

  // Generates like generator().generate() and adds the run's prefill / decode
  // tokens and times to the offload counters.
  GenerationStats generate(std::span<const int32_t> prompt, const GenerationParams& params,
                           const std::function<void(std::string_view)>& on_text,
                           const std::atomic<bool>* cancel = nullptr);

  // Recording (docs/predictor.md, "Learning from use"). While a path is set,
  // each generate() appends one prompt to that trace file: the batches it
  // actually computes (only the new tokens when the conversation's prefix is
  // reused, at their real positions), each MoE layer's input and the gate's
  // choice. The file is opened for the call and closed after it. A reply whose
  // recording is cut inside a batch (cancel) leaves no partial prompt: the file
  // is cut back to its last complete prompt. Empty path: off (the default),
  // which costs a pass-through call per MoE layer and nothing else.
  // model_sha256 goes into the trace header (it identifies the model file).
  void setTraceFile(const std::string& path, const std::string& model_sha256);
  struct TraceOutcome {
    int64_t tokens = 0;  // written by the last generate() (0 when off or torn)
    std::string error;   // why the last recording failed; the reply itself went on
  };
  const TraceOutcome& lastTrace() const { return last_trace_; }

  OffloadPolicy policy() const { return offload().config().policy; }
  // Thread-safe; all zeros for the resident policy.
  OffloadSnapshot offloadSnapshot() const { return offload().snapshot(); }
  // Cache slots in use (0 for resident), counted in the cache itself.
  int cacheSlots() const { return offload().worker() ? offload().worker()->slotCount() : 0; }
  // The plan this session was built from, and the device it was resolved against
  // (on a GPU, its free memory before the model loaded).
  const LoadPlan& plan() const { return plan_; }
  const DeviceMemory& device() const { return device_; }
  OffloadEngine& offload() { return runtime_->offload(); }
  const OffloadEngine& offload() const { return runtime_->offload(); }

 private:
  bool demo_ = false;
  bool random_demo_ = false;
  std::unique_ptr<Compute> compute_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<TraceRecorder> recorder_;  // wraps the expert source the transformer uses
  std::string trace_path_, trace_sha256_, source_name_;
  TraceOutcome last_trace_;
  std::unique_ptr<Transformer> transformer_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<ChatTokenCache> chat_tokens_;
  DeviceMemory device_;
  LoadPlan plan_;
};

// The line every front end shows next to a model with random weights (the random demo,
// gen-model files).
inline constexpr const char* kDemoNotice =
    "demo model: random weights; it shows the machinery (routing, caching, speed), not language";

// Opens the GGUF named by opts (maps a file, or builds the demo model in memory).
gguf::GgufFile openModelFile(const SessionOptions& opts);

// The device a session of `opts` computes on, as the plan sees it (on a GPU, its
// memory now). Throws std::runtime_error when the GPU's memory cannot be read.
DeviceMemory sessionDevice(const SessionOptions& opts, const Compute& compute);

}  // namespace moe
