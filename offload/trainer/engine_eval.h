// The learned predictor in the engine, with the real transfer queue: the trace's
// held-out test prompts run through OffloadEngine at one cache size under
// reactive LRU, proactive with skip-gate and proactive with the learned set,
// and the engine's own counters are compared: hit rate, Accuracy, FetchRate,
// GoodPred (ProMoE section 4.1) and bytes copied.
#pragma once

#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/model.h"
#include "offload/mlp_predictor.h"
#include "offload/trainer/trace_file.h"

namespace moe {

struct EngineEvalRow {
  std::string name;  // reactive-lru | proactive (skip-gate) | proactive (learned)
  double hit_rate = 0, accuracy = 0, fetch_rate = 0, good_pred = 0;
  uint64_t misses = 0, bytes_h2d = 0, expert_uses = 0;
};

struct EngineEvalOptions {
  int cache_slots = 0;               // all slots, staging included
  double link_bytes_per_second = 0;  // > 0: a simulated link, paced (copies take that long)
};

// Each test prompt: its first half as the prefill, the rest as decode steps.
// Throws std::invalid_argument when the set belongs to another model.
std::vector<EngineEvalRow> compareInEngine(const Model& model, Backend& backend, const TraceReader& trace,
                                           const PredictorSet& set, const EngineEvalOptions& options);

std::string engineEvalText(const std::vector<EngineEvalRow>& rows);
std::string engineEvalJson(const std::vector<EngineEvalRow>& rows);

}  // namespace moe
