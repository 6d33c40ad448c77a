#include "offload/reuse_model.h"

#include <algorithm>
#include <stdexcept>

namespace moe {

namespace {
int recencyBucket(int64_t gates_ago) {  // < 0: never chosen
  if (gates_ago < 0) return ReuseModel::kRecencyBuckets - 1;
  if (gates_ago <= 1) return int(gates_ago);
  if (gates_ago <= 3) return 2;
  if (gates_ago <= 7) return 3;
  if (gates_ago <= 15) return 4;
  if (gates_ago <= 63) return 5;
  return 6;
}

// A request per gate forever is worth 1 / (1 - kDecay) = 20.
int frequencyBucket(double requests) {
  static constexpr double kBounds[ReuseModel::kFrequencyBuckets - 1] = {0.25, 0.5, 1, 2, 3.5, 6, 10};
  return int(std::upper_bound(std::begin(kBounds), std::end(kBounds), requests) - std::begin(kBounds));
}
// Relative to the layer's experts per gate share: 1 / (1 - kSlowDecay) = 200 at every gate.
int slowBucket(double requests) {
  static constexpr double kBounds[ReuseModel::kSlowBuckets - 1] = {2, 6, 15, 35, 70};
  return int(std::upper_bound(std::begin(kBounds), std::end(kBounds), requests) - std::begin(kBounds));
}
}  // namespace

ReuseModel::ReuseModel(int horizon)
    : horizon_(horizon), cells_(size_t(kRecencyBuckets) * kFrequencyBuckets * kSlowBuckets) {
  if (horizon < 1) throw std::invalid_argument("ReuseModel: horizon must be >= 1");
}

ReuseModel::Layer& ReuseModel::layer(int l, int n_expert) {
  if (size_t(l) >= layers_.size()) layers_.resize(size_t(l) + 1);
  Layer& L = layers_[size_t(l)];
  if (size_t(n_expert) > L.last.size()) {
    L.requests.resize(size_t(n_expert), 0.0);
    L.slow.resize(size_t(n_expert), 0.0);
    L.last.resize(size_t(n_expert), 0);
    L.pending.resize(size_t(n_expert) * size_t(horizon_), -1);
    L.hint.resize(size_t(n_expert), -1.0);
  }
  return L;
}

int ReuseModel::cellOf(const Layer& L, int e) const {
  const bool known = size_t(e) < L.last.size();
  const int64_t last = known ? L.last[size_t(e)] : 0;
  const double requests = known ? L.requests[size_t(e)] / L.scale : 0.0;
  const double slow = known ? L.slow[size_t(e)] / L.slow_scale : 0.0;
  return (recencyBucket(last > 0 ? L.gates - last : -1) * kFrequencyBuckets + frequencyBucket(requests)) *
             kSlowBuckets +
         slowBucket(slow);
}

double ReuseModel::rate(int cell) const {
  const Cell& c = cells_[size_t(cell)];
  return (c.chosen + prior_) / (c.seen + 1.0);
}

void ReuseModel::observe(int l, std::span<const int> experts) {
  if (l < 0) return;
  int n = 0;
  for (int e : experts) n = std::max(n, e + 1);
  Layer& L = layer(l, n);
  const int n_expert = int(L.last.size());
  const size_t h = size_t(horizon_);
  // This gate labels the cells its experts were in after each of the last `horizon` gates.
  for (int e : experts) {
    if (e < 0) continue;
    for (size_t j = 0; j < h; ++j) {
      int& cell = L.pending[size_t(e) * h + j];
      if (cell < 0) continue;
      cells_[size_t(cell)].chosen += 1;
      cells_[size_t(cell)].seen += 1;
      cell = -1;
    }
  }
  // The gate `horizon` gates ago has had its window: what it left unlabelled was not chosen.
  const size_t oldest = size_t(L.gates % horizon_);
  for (int e = 0; e < n_expert; ++e) {
    int& cell = L.pending[size_t(e) * h + oldest];
    if (cell >= 0) cells_[size_t(cell)].seen += 1;
    cell = -1;
  }
  ++L.gates;
  L.scale /= kDecay;
  if (L.scale > 1e100) {  // rescale before the weights overflow
    for (double& r : L.requests) r /= L.scale;
    L.scale = 1;
  }
  L.slow_scale /= kSlowDecay;
  if (L.slow_scale > 1e100) {
    for (double& r : L.slow) r /= L.slow_scale;
    L.slow_scale = 1;
  }
  for (int e : experts) {
    if (e < 0) continue;
    L.slow[size_t(e)] += L.slow_scale;
    L.requests[size_t(e)] += L.scale;
    L.last[size_t(e)] = L.gates;
  }
  for (int e = 0; e < n_expert; ++e) {
    L.pending[size_t(e) * h + oldest] = cellOf(L, e);
    L.hint[size_t(e)] = -1.0;
  }
  prior_ = n_expert > 0 ? std::min(1.0, double(experts.size()) * double(horizon_) / double(n_expert)) : 0.0;
}

double ReuseModel::value(int l, int e) const {
  if (l < 0 || e < 0) return 0.0;
  if (size_t(l) >= layers_.size()) return prior_;
  const Layer& L = layers_[size_t(l)];
  if (size_t(e) < L.hint.size() && L.hint[size_t(e)] >= 0) return L.hint[size_t(e)];
  return rate(cellOf(L, e));
}

void ReuseModel::hint(int l, int e, double probability) {
  if (l < 0 || e < 0) return;
  Layer& L = layer(l, e + 1);
  L.hint[size_t(e)] = probability;
}

}  // namespace moe
