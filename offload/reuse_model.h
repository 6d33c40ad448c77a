// reuse: how likely each expert is to be asked for again soon, for eviction. A
// demand cache is best when it evicts the expert needed furthest ahead (Belady);
// online, the next best is the one least likely to be needed within the next few
// gates of its layer. Two features predict that on real routing: how many tokens
// ago the layer last chose the expert (adjacent tokens share 43% of their experts
// in gpt-oss-20b) and how often it chose it lately (a layer's 8 favourites take
// half its selections). Neither alone ranks well: a favourite in a lull is worth
// more than a one-off chosen a token ago, but less than a favourite just chosen.
// So the model measures, for every cell of (recency bucket x frequency bucket),
// how often an expert in that cell was chosen within the next `horizon` gates of
// its layer, and an expert's value is its cell's rate: a probability, on the same
// scale as a predictor's guess (the prefetcher's admission compares the two).
//
// Every gate labels the cells its layer's experts were in up to `horizon` gates
// before, so the rates are measured on the routing being served, not assumed.
// A predictor may also give a sharper probability for a layer about to run
// (hint): it replaces the cell's rate for that layer until its gate runs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace moe {

class ReuseModel {
 public:
  static constexpr int kRecencyBuckets = 8;    // chosen 0, 1, 2-3, 4-7, 8-15, 16-63, 64+ gates ago, or never
  static constexpr int kFrequencyBuckets = 8;  // decayed request count, see frequencyBucket
  static constexpr double kDecay = 0.95;       // weight of a request per later gate of its layer
  static constexpr int kSlowBuckets = 6;       // the same count with kSlowDecay
  static constexpr double kSlowDecay = 0.995;

  explicit ReuseModel(int horizon = 1);
  int horizon() const { return horizon_; }

  // The gate of `layer` chose `experts`.
  void observe(int layer, std::span<const int> experts);
  // The probability that `layer` asks for `expert` within its next `horizon` gates
  // (the hint instead while one is set).
  double value(int layer, int expert) const;
  // A predictor's probability that the next gate of `layer` chooses `expert`; cleared
  // by that gate.
  void hint(int layer, int expert, double probability);

 private:
  struct Cell {
    double chosen = 0, seen = 0;
  };
  struct Layer {
    int64_t gates = 0;
    double scale = 1;              // a request at the latest gate counts `scale` (grows 1 / kDecay per gate)
    std::vector<double> requests;  // [expert] decayed requests, in units of 1 / scale
    double slow_scale = 1;
    std::vector<double> slow;   // [expert] requests decayed by kSlowDecay, in units of 1 / slow_scale
    std::vector<int64_t> last;  // [expert] the gate (1-based) that last chose it; 0: never
    std::vector<int> pending;   // [expert][horizon] its cell after each of the last gates; -1: labelled
    std::vector<double> hint;   // [expert] a predictor's probability; < 0: none
  };
  Layer& layer(int l, int n_expert);
  int cellOf(const Layer& L, int expert) const;
  double rate(int cell) const;

  int horizon_;
  std::vector<Layer> layers_;
  std::vector<Cell> cells_;  // [recency bucket * kFrequencyBuckets + frequency bucket]
  double prior_ = 0;         // the chance of a cell never seen (experts per gate over the layer's experts)
};

}  // namespace moe
