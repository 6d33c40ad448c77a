#include "offload/learned_predictor.h"

#include <stdexcept>

namespace moe {

LearnedPredictor::LearnedPredictor(PredictorSet set, int n_embd, int n_expert) : set_(std::move(set)) {
  for (const auto& p : set_.layers) {
    if (p.n_in != n_embd || p.n_out != n_expert)
      throw std::invalid_argument("the predictor for layer " + std::to_string(p.layer) + " expects " +
                                  std::to_string(p.n_in) + " inputs and " + std::to_string(p.n_out) +
                                  " experts; this model has " + std::to_string(n_embd) + " and " +
                                  std::to_string(n_expert) + ": it was trained for another model");
    if (p.layer >= int(by_layer_.size())) by_layer_.resize(p.layer + 1, nullptr);
    by_layer_[p.layer] = &p;
    scratch_.resize(std::max<size_t>(scratch_.size(), p.n_hidden));
  }
  logits_.resize(n_expert);
  score_.resize(n_expert);
}

std::vector<int> LearnedPredictor::predict(int layer, int target_layer, std::span<const float> hidden,
                                           int n_tokens, int budget) {
  if (layer < 0 || layer >= int(by_layer_.size()) || !by_layer_[layer] || n_tokens <= 0 || budget <= 0)
    return {};
  const MlpPredictor& p = *by_layer_[layer];
  if (p.target_layer != target_layer || hidden.size() < size_t(n_tokens) * p.n_in) return {};
  if (n_tokens == 1) {
    p.forward(hidden.data(), scratch_.data(), logits_.data());
    return topExperts(logits_, budget);
  }
  // A batch: the union of each token's top-k, ranked by rank-weighted votes (as
  // skip-gate does), so both predictors name comparably many experts.
  std::fill(score_.begin(), score_.end(), 0.0f);
  for (int t = 0; t < n_tokens; ++t) {
    p.forward(hidden.data() + size_t(t) * p.n_in, scratch_.data(), logits_.data());
    const auto top = topExperts(logits_, p.k);
    for (int j = 0; j < int(top.size()); ++j) score_[top[j]] += float(p.k - j);
  }
  auto order = topExperts(score_, budget);
  while (!order.empty() && score_[order.back()] <= 0) order.pop_back();
  return order;
}

}  // namespace moe
