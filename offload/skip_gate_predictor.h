// skip-gate: apply the target layer's real router to the current layer's input
// (ProMoE section 4.2, "skip-based predictor"; Eliseev and Mazur 2023). It needs
// no training and works because the residual stream changes slowly across layers.
#pragma once

#include "inference/model.h"
#include "offload/expert_predictor.h"

namespace moe {

class SkipGatePredictor final : public ExpertPredictor {
 public:
  // Reads the routers of `model` (host copies, converted to float once).
  explicit SkipGatePredictor(const Model& model);
  std::string name() const override { return "skip-gate"; }
  std::vector<int> predict(int layer, int target_layer, std::span<const float> hidden, int n_tokens,
                           int budget) override;

 private:
  int n_embd_ = 0, n_expert_ = 0, n_used_ = 0;
  std::vector<std::vector<float>> routers_;  // [n_layer][n_expert][n_embd], empty for dense layers
};

}  // namespace moe
