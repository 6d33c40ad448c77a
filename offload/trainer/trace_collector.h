// Runs a model over prompts and streams what a predictor learns from into a
// TraceWriter: per token and MoE layer the FFN input and the gate's choice.
// Prefill of each prompt plus optionally a few greedy tokens. Qt-free.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/expert_source.h"
#include "inference/model.h"
#include "offload/trainer/trace_file.h"

namespace moe {

struct TraceOptions {
  int max_new_tokens = 0;       // greedy tokens generated after each prompt's prefill
  int max_prompt_tokens = 512;  // longer prompts are cut
};

struct TraceProgress {
  int prompts_done = 0;  // including prompts a resumed run skipped
  int prompts_total = 0;
  int64_t tokens_done = 0;  // traced by this run
  double seconds = 0;
  double eta_seconds = -1;  // -1 until one prompt has been traced
};

struct TraceRunResult {
  int prompts_traced = 0, prompts_skipped = 0;
  int64_t tokens = 0;
  double seconds = 0;
  bool cancelled = false;
};

// The header for a trace of `model`; sha256 identifies its GGUF file.
TraceHeader traceHeaderFor(const Model& model, const std::string& sha256, const std::string& source);

// Prompt i of `prompts` is stored as prompt index i; prompts the writer already
// holds are skipped (resume). experts: where the model's experts live (resident
// or an offload source), wrapped here to observe each layer's input. Stops
// between prompts when *cancel turns true (what is on disk stays usable).
TraceRunResult collectTraces(const Model& model, Backend& backend, ExpertSource& experts,
                             const std::vector<std::string>& prompts, TraceWriter& writer,
                             const TraceOptions& options,
                             const std::function<void(const TraceProgress&)>& on_progress = {},
                             const std::atomic<bool>* cancel = nullptr);

// The built-in prompt set (resources/prompts/builtin.txt, compiled in).
std::vector<std::string> builtinPrompts();
// One prompt per non-empty line; "\n" in a line stands for a line break.
// Throws std::runtime_error when unreadable or empty.
std::vector<std::string> promptsFromFile(const std::string& path);
std::vector<std::string> parsePromptLines(const std::string& text);

}  // namespace moe
