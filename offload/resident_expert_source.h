// The engine-core expert source: every expert stays where the model file put it
// (mapped host memory) and is handed out in the order the gate asked. The
// offload engine replaces it with the GPU cache + prefetching source.
#pragma once

#include <vector>

#include "inference/expert_source.h"

namespace moe {

class ResidentExpertSource final : public ExpertSource {
 public:
  // table: [n_layer][n_expert] (Model::hostExperts()); must outlive this object.
  explicit ResidentExpertSource(const std::vector<std::vector<ExpertWeights>>& table);
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override;
  void release(int layer) override;
  bool allReady() const override { return true; }
  bool wantsLayerInput() const override { return false; }
  std::span<const ExpertWeights> everyExpert(int layer) const override;

 private:
  const std::vector<std::vector<ExpertWeights>>& table_;
};

}  // namespace moe
