// history: predicts a later layer's experts from routing alone, no hidden state
// (recorded traces have none, and real routing is history-driven). Gates run in
// layer order, token after token, so they form one stream of positions; a
// prediction may target a layer of the next token (the layers past the last wrap
// around). It learns as it runs, from every gate it observes:
//  - how often expert b of a target layer follows expert a of the gate d
//    positions before it (d = 1..kMaxDistance, across the token boundary too):
//    real routers agree from layer to layer (gpt-oss-20b: a layer's 4 experts
//    name ~55% of the next layer's);
//  - how many tokens ago the target layer last chose b (adjacent tokens share 43%
//    of their experts there, and a reply keeps returning to a working set);
//  - a calibration table: for each distance, each bucket of the transition score,
//    each recency bucket (and optionally each popularity bucket), how often an
//    expert in that cell was chosen. Every
//    gate updates it for all the layer's experts, so a guess's probability is
//    measured, not assumed, and the prefetcher can weigh it against what an
//    eviction would lose (PrefetchOptions::admission, offload/prefetcher.h).
// At layer L's input the latest gate that has run is the source; the target's
// experts are ranked by their cell's probability.
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
  static constexpr int kScoreBuckets = 24;  // transition score, evenly (see cellOf; the mean: 16)
  static constexpr int kMeanScoreBuckets = 16;
  static constexpr int kRecencyBuckets = 7;  // chosen 1, 2, 3-4, 5-8, 9-16, 17-64 tokens ago, or not
  // the target layer's decayed request count of the expert (popularity), or 1 bucket without it
  static constexpr int kPopularityBuckets = 6;
  static constexpr double kPopularityDecay = 0.95;  // per gate of the layer

  // sources: 0 scores b by the mean over the latest gate's experts a of P(b | a);
  // n >= 1 by the sum of log(P(b | a) / P(b)) over the experts of the latest n gates
  // (naive Bayes: sharper on real routing, docs/offload.md). popularity: the
  // calibration cell also has the target's decayed request count of b.
  HistoryPredictor(int n_layer, int n_expert, bool popularity = false, int sources = 0);
  std::string name() const override { return "history"; }
  std::vector<int> predict(int layer, int target_layer, std::span<const float> hidden, int n_tokens,
                           int budget) override;
  std::vector<ExpertGuess> predictScored(int layer, int target_layer, std::span<const float> hidden,
                                         int n_tokens, int budget) override;
  void observe(const RoutingEvent& ev) override;
  bool predictsNextToken() const override { return true; }

 private:
  struct Cell {
    double chosen = 0, seen = 0;
  };
  // The stream distance from layer `src` forward to layer `target` (1..n_layer).
  int distance(int src, int target) const;
  // The calibration cell of expert b of `target` seen from `src`, d positions before it.
  int cellOf(int src, int d, int target, int b) const;
  float probability(int d, int cell) const;

  const int n_layer_, n_expert_;
  std::mutex mu_;  // observe (the compute thread) and predict (perhaps a prediction thread)
  // [src * kMaxDistance + d - 1][a * n_expert + b]: b chosen d positions after a at src
  std::vector<std::vector<float>> pairs_;
  // [src * kMaxDistance + d - 1][a]: how often a at src was followed d positions later
  std::vector<std::vector<float>> sources_;
  // [d - 1][(score bucket * kRecencyBuckets + recency bucket) * kPopularityBuckets + popularity bucket]
  std::vector<std::vector<Cell>> calibration_;
  // [layer] its latest gate's choice (this token's up to last_layer_, the token before's past it).
  std::vector<std::vector<int>> latest_;
  std::vector<int64_t> gates_;  // [layer] gates observed
  std::vector<std::vector<int64_t>>
      chosen_at_;  // [layer][expert] the gate (1-based) that last chose it; 0: never
  const bool popularity_;
  const int sources_n_;
  std::vector<std::vector<double>> chosen_total_;  // [layer][expert] gates that chose it
  std::vector<std::vector<double>> requests_;      // [layer][expert] decayed requests, in units of 1 / scale_
  std::vector<double> scale_;                      // [layer] a request at its latest gate counts this
  int last_layer_ = -1;
  double prior_ = 0;  // experts a gate chooses over the layer's experts
};

}  // namespace moe
