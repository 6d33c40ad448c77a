#include "offload/history_predictor.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace moe {

HistoryPredictor::HistoryPredictor(int n_layer, int n_expert)
    : n_layer_(n_layer),
      n_expert_(n_expert),
      counts_(size_t(std::max(n_layer, 0)) * kMaxDistance),
      latest_(size_t(std::max(n_layer, 0))) {
  if (n_layer <= 0 || n_expert <= 0)
    throw std::invalid_argument("HistoryPredictor: needs layers and experts");
  for (auto& c : counts_) c.assign(size_t(n_expert) * size_t(n_expert), 0.0f);
}

// A batch's last token stands for the batch (a prompt's last token is the one the
// next decode step follows).
void HistoryPredictor::observe(const RoutingEvent& ev) {
  if (ev.layer < 0 || ev.layer >= n_layer_ || ev.n_tokens <= 0 || ev.experts.empty()) return;
  const size_t k = ev.experts.size() / size_t(ev.n_tokens);
  std::lock_guard lock(mu_);
  const bool new_token = ev.layer <= last_layer_;
  last_layer_ = ev.layer;
  std::vector<int>& now = latest_[size_t(ev.layer)];
  now.assign(ev.experts.end() - std::ptrdiff_t(k), ev.experts.end());
  if (new_token && ev.layer > 0) return;  // the layers before it were not this token's
  for (int d = 1; d <= kMaxDistance; ++d) {
    const int src = ev.layer - d;
    if (src < 0) break;
    const std::vector<int>& from = latest_[size_t(src)];
    if (from.empty()) continue;
    std::vector<float>& c = pair(src, d);
    for (int a : from)
      for (int b : now) c[size_t(a) * size_t(n_expert_) + size_t(b)] += 1.0f;
  }
}

std::vector<int> HistoryPredictor::predict(int layer, int target, std::span<const float>, int, int budget) {
  if (target < 0 || target >= n_layer_ || budget <= 0) return {};
  std::lock_guard lock(mu_);
  std::vector<float> score(static_cast<size_t>(n_expert_), 0.0f);
  // The latest layer of this token whose gate ran, before `layer`.
  int src = -1;
  if (last_layer_ >= 0 && last_layer_ < layer) src = last_layer_;
  const int d = target - src;
  if (src >= 0 && d >= 1 && d <= kMaxDistance) {
    const std::vector<float>& c = pair(src, d);
    for (int a : latest_[size_t(src)]) {
      const float* row = c.data() + size_t(a) * size_t(n_expert_);
      const float total = std::accumulate(row, row + n_expert_, 0.0f);
      if (total > 0)
        for (int b = 0; b < n_expert_; ++b) score[size_t(b)] += row[b] / total;
    }
  }
  // The previous token's choice at the target (not reached yet by this token), worth
  // half a transition.
  if (target > last_layer_ || src < 0)
    for (int b : latest_[size_t(target)]) score[size_t(b)] += 0.5f;
  std::vector<int> order(static_cast<size_t>(n_expert_));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return score[size_t(x)] > score[size_t(y)]; });
  std::vector<int> out;
  for (int e : order) {
    if (int(out.size()) >= budget || score[size_t(e)] <= 0) break;
    out.push_back(e);
  }
  return out;
}

}  // namespace moe
