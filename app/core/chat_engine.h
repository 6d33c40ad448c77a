// What the desktop app needs from an engine: load a model, answer a chat, and
// live counters to poll. The GUI's worker thread owns one; tests put a scripted
// engine behind the same interface so GUI tests need no model. Qt-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "app/core/demo_model.h"
#include "app/core/load_plan.h"
#include "app/core/model_shape.h"

#include "inference/generator.h"
#include "inference/tokenizer/chat_template.h"
#include "offload/mlp_predictor.h"
#include "offload/offload_metrics.h"

namespace moe {

struct EngineLoadOptions {
  std::string model_path;  // ignored with demo
  bool demo = false;
  DemoModel demo_model = DemoModel::kRandom;  // the app loads appDemoModel()
  std::string policy = "proactive";           // a caching policy (see AppSettings::policies)
  uint64_t vram_budget_bytes = 0;             // 0: auto
  // "auto": the GPU when one is usable (experts cached in VRAM, copies over the
  // real link), else the CPU; "cpu" or "cuda" to force one.
  std::string backend = "auto";
  int n_ctx = 4096;
  int threads = 0;
  // A trained predictor set for this model (predictors table), used by proactive.
  std::shared_ptr<const PredictorSet> predictor_set;
  // SHA-256 of the model file (ModelRegistry), written into recorded traces;
  // empty: the demo model's, or none (a real model not hashed yet: replies are
  // then not recorded).
  std::string model_sha256;
};

struct LoadedModelInfo {
  std::string path;  // empty for the demo model
  std::string name;
  std::string architecture;
  std::string chat_template;     // family name
  bool thinking_switch = false;  // the template can turn the reasoning off (ChatOptions::thinking)
  std::string backend;           // "cpu" / "cuda"
  std::string policy;            // the caching policy in effect
  std::string offload_note;      // how the cache is set up, in words
  std::string predictor;         // "learned", "skip-gate" or "none"; empty when resident
  std::string model_sha256;      // as given (the demo's computed); empty when unknown
  bool demo = false;
  int n_layer = 0, n_expert = 0, n_expert_used = 0, n_ctx = 0;
  uint64_t file_bytes = 0;
  std::optional<ModelShape> shape;  // for the settings' fit estimate; described once, by the worker
  // The device the plan was resolved against (on a GPU, its free memory before the
  // model loaded) and the plan that loaded: the settings dialog and the models view
  // resolve their plans against this device, so they show what a load gives.
  DeviceMemory device;
  LoadPlan plan;
  int cache_slots = 0;  // the expert cache's slots, counted in the cache (0: resident)
};

struct EngineReplyStats {
  int prompt_tokens = 0;
  int reused_tokens = 0;
  int completion_tokens = 0;
  double ttft_ms = 0;
  double prefill_tps = 0;
  double decode_tps = 0;
  std::string stop_reason;   // stopReasonName()
  int dropped_messages = 0;  // the oldest messages left out so the prompt and the reply fit the context
  // Bytes of prompt text the tokenizer encoded for this reply: the text new since the
  // last reply (the rest is kept tokenised, inference/tokenizer/chat_tokens.h).
  int64_t tokenized_bytes = 0;
  int64_t traced_tokens = 0;  // written to the trace file (setTraceRecording); 0 when off or cut
  std::string trace_error;    // why recording failed (the reply went on); empty when fine
};

// Polled 4-10 times a second from the GUI thread while the engine runs on its
// worker thread: every field is read from atomics.
struct EngineCounters {
  bool generating = false;
  int prompt_tokens = 0;     // current (or last) reply
  int prefilled_tokens = 0;  // run, not reused; set once prefill is done
  int generated_tokens = 0;  // current (or last) reply
  double prefill_seconds = 0;
  double ttft_seconds = -1;  // -1: no token yet
  double decode_seconds = 0;
  uint64_t total_generated = 0;      // since load
  OffloadSnapshot offload;           // zeros where experts are resident
  bool experts_resident = true;      // no offloading (every expert in fast memory)
  double blocked_seconds = 0;        // compute time spent waiting for experts, since load
  double link_bytes_per_second = 0;  // host->device link: measured (GPU) or simulated; 0: none
  // The GPU's memory in use (every program's) and its size, as of the last load or
  // reply; 0 when computing on the CPU.
  uint64_t vram_used_bytes = 0, vram_total_bytes = 0;
  uint64_t ram_resident_bytes = 0;  // this process's resident memory (EngineHost fills it in)
};

// Where an expert is, for the heat map: not in fast memory, being copied there, ready.
enum class ExpertPlace : uint8_t { kAbsent, kLoading, kReady };

// Which experts sit in fast memory: state[layer * n_expert + e].
struct ExpertResidency {
  int n_layer = 0, n_expert = 0;
  std::vector<ExpertPlace> state;
};

// A reply stopped because the GPU failed, and the engine reloaded the model on
// the CPU (`info`); what() says so, for the user.
class DeviceFallback : public std::runtime_error {
 public:
  DeviceFallback(const std::string& what, LoadedModelInfo loaded)
      : std::runtime_error(what), info(std::move(loaded)) {}
  LoadedModelInfo info;
};

class ChatEngine {
 public:
  using LoadProgress = std::function<void(double fraction, std::string_view stage)>;
  using TextSink = std::function<void(std::string_view)>;

  virtual ~ChatEngine() = default;
  // Throws std::exception with a readable reason (bad file, out of memory...).
  virtual LoadedModelInfo load(const EngineLoadOptions& opts, const LoadProgress& progress) = 0;
  virtual bool loaded() const = 0;
  // messages: the conversation so far (system first if any), ending with the
  // user's turn; the oldest turns are left out when the whole does not fit the
  // context. Streams displayable text to on_text; stops when cancel is set.
  // Throws DeviceFallback when the GPU failed mid-reply and the model now runs on the CPU.
  virtual EngineReplyStats reply(const std::vector<ChatMessage>& messages, const GenerationParams& params,
                                 const TextSink& on_text, const std::atomic<bool>& cancel) = 0;
  // Where the following replies are recorded (docs/predictor.md, "Learning from
  // use"): each reply() appends one prompt to the trace file at path, computed
  // batches only. Empty: off. Call it on the thread that calls reply(). An
  // engine that cannot record ignores it.
  virtual void setTraceRecording(const std::string& path) { (void)path; }
  // The template's options for the following replies (whether a model with the
  // thinking switch reasons first). Call it on the thread that calls reply().
  virtual void setChatOptions(const ChatOptions& options) { (void)options; }
  // Thread-safe: called from the GUI thread while reply() runs.
  virtual EngineCounters counters() const = 0;
  virtual ExpertResidency residency() const = 0;
};

}  // namespace moe
