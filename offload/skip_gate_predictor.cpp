#include "offload/skip_gate_predictor.h"

#include <algorithm>
#include <numeric>

#include "offload/dot8.h"

namespace moe {

double predictionAccuracy(std::span<const int> predicted, std::span<const int> truth) {
  if (truth.empty()) return 1.0;
  int found = 0;
  for (int e : truth) found += std::find(predicted.begin(), predicted.end(), e) != predicted.end();
  return double(found) / truth.size();
}

SkipGatePredictor::SkipGatePredictor(const Model& model)
    : n_embd_(model.config().n_embd),
      n_expert_(model.config().n_expert),
      n_used_(model.config().n_expert_used) {
  for (int il = 0; il < model.config().n_layer; ++il) {
    routers_.emplace_back();
    const WeightView& r = model.hostRouter(il);
    if (r.empty()) continue;
    // The router is small ([n_expert][n_embd]); a float copy keeps prediction cheap.
    auto& out = routers_.back();
    out.resize(size_t(r.rows) * r.cols);
    for (int64_t e = 0; e < r.rows; ++e) dequantizeWeightRow(r, e, out.data() + e * r.cols);
  }
}

std::vector<int> SkipGatePredictor::predict(int layer, int target_layer, std::span<const float> hidden,
                                            int n_tokens, int budget) {
  (void)layer;
  if (target_layer < 0 || target_layer >= int(routers_.size()) || routers_[target_layer].empty() ||
      n_tokens <= 0 || budget <= 0)
    return {};
  const auto& router = routers_[target_layer];
  // Votes: each token's top-k experts under the target router, weighted by rank.
  std::vector<double> votes(n_expert_, 0.0);
  std::vector<float> logits(n_expert_);
  std::vector<int> order(n_expert_);
  for (int t = 0; t < n_tokens; ++t) {
    const float* x = hidden.data() + size_t(t) * n_embd_;
    for (int e = 0; e < n_expert_; ++e) logits[e] = dot8(x, router.data() + size_t(e) * n_embd_, n_embd_);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n_used_, order.end(), [&](int a, int b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int j = 0; j < n_used_; ++j) votes[order[j]] += n_used_ - j;
  }
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return votes[a] > votes[b]; });
  int n = 0;
  while (n < n_expert_ && n < budget && votes[order[n]] > 0) ++n;
  order.resize(n);
  return order;
}

}  // namespace moe
