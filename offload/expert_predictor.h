// Predicts which experts a later layer's gate will choose, from an earlier
// layer's FFN input (stride prefetching: at layer L predict L + distance). The
// learned per-layer MLP predictor (its own issue) implements the same interface.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "inference/expert_source.h"

namespace moe {

// One expert a predictor names, with the probability it gives that the target
// layer's gate chooses it (1 when the predictor does not know one).
struct ExpertGuess {
  int expert = -1;
  float probability = 1.0f;
};

class ExpertPredictor {
 public:
  virtual ~ExpertPredictor() = default;
  virtual std::string name() const = 0;
  // hidden: [n_tokens][n_embd], the FFN input of `layer` (host memory). Returns the
  // experts of `target_layer` to prefetch, most likely first, at most `budget` of
  // them (the union over the batch's tokens), or none when the target has no experts.
  virtual std::vector<int> predict(int layer, int target_layer, std::span<const float> hidden, int n_tokens,
                                   int budget) = 0;
  // As predict, with each expert's probability (most likely first). A predictor
  // without calibrated probabilities gives 1 to each, so every guess is admitted.
  virtual std::vector<ExpertGuess> predictScored(int layer, int target_layer, std::span<const float> hidden,
                                                 int n_tokens, int budget) {
    std::vector<ExpertGuess> out;
    for (int e : predict(layer, target_layer, hidden, n_tokens, budget)) out.push_back({e, 1.0f});
    return out;
  }
  // Whether a target past the last layer means the next token's layers (the
  // prefetcher then wraps it around): a predictor from routing history can.
  virtual bool predictsNextToken() const { return false; }
  // A gate's choice, in layer order, token after token (a predictor from routing
  // history learns here). Default: ignored.
  virtual void observe(const RoutingEvent& ev) { (void)ev; }
};

// Share of `truth` (the experts really chosen) found in `predicted`: ProMoE's Accuracy.
double predictionAccuracy(std::span<const int> predicted, std::span<const int> truth);

}  // namespace moe
