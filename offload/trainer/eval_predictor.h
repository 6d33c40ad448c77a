// Evaluation of a predictor set on the trace's held-out test prompts, per layer
// and overall, side by side with the baselines (ProMoE's Accuracy: the share of
// the experts the gate really chose found among the k predicted):
//   learned         the set's MLPs
//   skip-gate       the target layer's router applied to layer L's input (needs the model)
//   token-based     the experts the target layer chose most often for this token id
//                   in the training prompts (popularity for unseen ids)
//   previous-token  what the target layer chose for the previous token (what LRU exploits)
//   popularity      the target layer's k most used experts in the training prompts
//   random          k / n_expert, the expectation of a random guess
#pragma once

#include <string>
#include <vector>

#include "offload/expert_predictor.h"
#include "offload/mlp_predictor.h"
#include "offload/trainer/trace_file.h"

namespace moe {

struct EvalScores {
  double learned = 0, skip_gate = -1, token_based = 0, previous_token = 0, popularity = 0, random = 0;
};

struct EvalLayer {
  int layer = 0, target_layer = 0;
  int64_t tokens = 0;
  EvalScores acc;
};

struct EvalReport {
  std::string model_name, model_sha256;
  int distance = 0, k = 0, n_expert = 0;
  int test_prompts = 0;
  std::vector<EvalLayer> layers;
  EvalLayer overall;  // token-weighted mean over the layers
  // Baselines the learned predictor does not beat overall (names as above).
  std::vector<std::string> notBeaten() const;
};

// skip_gate: optional (null: its column reads -1, "not measured"). Throws
// std::invalid_argument when the set belongs to another model than the trace
// or the test prompts are missing from it.
EvalReport evaluatePredictorSet(const TraceReader& trace, const PredictorSet& set,
                                ExpertPredictor* skip_gate);

std::string evalReportText(const EvalReport& r);
std::string evalReportJson(const EvalReport& r);

}  // namespace moe
