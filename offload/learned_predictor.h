// The learned predictor: per layer a small MLP trained on traces of this model
// (offload/trainer/, docs/predictor.md) scores layer L + distance's experts from
// layer L's FFN input. A CPU forward pass per call; for a batch the experts are
// the union of every token's top-k, ranked by rank-weighted votes.
#pragma once

#include <vector>

#include "offload/expert_predictor.h"
#include "offload/mlp_predictor.h"

namespace moe {

class LearnedPredictor final : public ExpertPredictor {
 public:
  // Throws std::invalid_argument when the set does not fit a model of n_embd /
  // n_expert (a predictor trained for another model).
  LearnedPredictor(PredictorSet set, int n_embd, int n_expert);
  std::string name() const override { return "learned"; }
  // Returns none when no predictor of this set maps `layer` to `target_layer`
  // (another distance, a dense layer): the caller may fall back to skip-gate.
  std::vector<int> predict(int layer, int target_layer, std::span<const float> hidden, int n_tokens,
                           int budget) override;
  int distance() const { return set_.distance; }
  const PredictorSet& set() const { return set_; }

 private:
  PredictorSet set_;
  std::vector<const MlpPredictor*> by_layer_;  // [layer] or null
  std::vector<float> scratch_, logits_, score_;
};

}  // namespace moe
