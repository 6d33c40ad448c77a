// Predicts which experts a later layer's gate will choose, from an earlier
// layer's FFN input (stride prefetching: at layer L predict L + distance). The
// learned per-layer MLP predictor (its own issue) implements the same interface.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "inference/expert_source.h"

namespace moe {

class ExpertPredictor {
 public:
  virtual ~ExpertPredictor() = default;
  virtual std::string name() const = 0;
  // hidden: [n_tokens][n_embd], the FFN input of `layer` (host memory). Returns the
  // experts of `target_layer` to prefetch, most likely first, at most `budget` of
  // them (the union over the batch's tokens), or none when the target has no experts.
  virtual std::vector<int> predict(int layer, int target_layer, std::span<const float> hidden, int n_tokens,
                                   int budget) = 0;
  // A gate's choice, in layer order, token after token (a predictor from routing
  // history learns here). Default: ignored.
  virtual void observe(const RoutingEvent& ev) { (void)ev; }
};

// Share of `truth` (the experts really chosen) found in `predicted`: ProMoE's Accuracy.
double predictionAccuracy(std::span<const int> predicted, std::span<const int> truth);

}  // namespace moe
