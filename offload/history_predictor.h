// history: predicts a later layer's experts from routing alone, no hidden state
// (recorded traces have none, and real routing is history-driven). It learns as
// it runs, from every gate it observes:
//  - within a token, how often expert b of layer T follows expert a of layer S
//    (S < T, up to kMaxDistance layers apart): real routers agree from layer to
//    layer (gpt-oss-20b: a layer's 4 experts name ~55% of the next layer's);
//  - from a token to the next, which experts a layer chose last (adjacent tokens
//    share 43% of their experts there).
// At layer L's input (before its gate) it scores layer T's experts by the
// transitions from the latest layer of the current token whose gate has run, plus
// the previous token's choice at T, and names the best `budget`.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "inference/expert_source.h"
#include "offload/expert_predictor.h"

namespace moe {

class HistoryPredictor final : public ExpertPredictor {
 public:
  static constexpr int kMaxDistance = 4;
  HistoryPredictor(int n_layer, int n_expert);
  std::string name() const override { return "history"; }
  std::vector<int> predict(int layer, int target_layer, std::span<const float> hidden, int n_tokens,
                           int budget) override;
  void observe(const RoutingEvent& ev) override;

 private:
  // counts_[(S * kMaxDistance + d - 1)][a * n_expert + b]: b at layer S + d after a at layer S
  std::vector<float>& pair(int layer, int distance) {
    return counts_[size_t(layer) * kMaxDistance + size_t(distance - 1)];
  }
  const int n_layer_, n_expert_;
  std::mutex mu_;  // observe (the compute thread) and predict (perhaps a prediction thread)
  std::vector<std::vector<float>> counts_;
  // [layer] its latest choice: the current token's for the layers up to last_layer_,
  // the previous token's past it (gates run in layer order, token after token).
  std::vector<std::vector<int>> latest_;
  int last_layer_ = -1;
};

}  // namespace moe
