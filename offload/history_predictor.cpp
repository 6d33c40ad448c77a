#include "offload/history_predictor.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moe {

namespace {
int recencyBucket(int64_t tokens_ago) {
  if (tokens_ago <= 0) return HistoryPredictor::kRecencyBuckets - 1;  // never chosen
  if (tokens_ago == 1) return 0;
  if (tokens_ago == 2) return 1;
  if (tokens_ago <= 4) return 2;
  if (tokens_ago <= 8) return 3;
  if (tokens_ago <= 16) return 4;
  if (tokens_ago <= 64) return 5;
  return 6;
}

// A request at every gate is worth 1 / (1 - kPopularityDecay) = 20.
int popularityBucket(double requests) {
  static constexpr double kBounds[HistoryPredictor::kPopularityBuckets - 1] = {0.5, 1.5, 3, 6, 10};
  return int(std::upper_bound(std::begin(kBounds), std::end(kBounds), requests) - std::begin(kBounds));
}
}  // namespace

HistoryPredictor::HistoryPredictor(int n_layer, int n_expert, bool popularity, int sources)
    : n_layer_(n_layer),
      n_expert_(n_expert),
      pairs_(size_t(std::max(n_layer, 0)) * kMaxDistance),
      sources_(size_t(std::max(n_layer, 0)) * kMaxDistance),
      calibration_(kMaxDistance,
                   std::vector<Cell>(size_t(kScoreBuckets) * kRecencyBuckets * kPopularityBuckets)),
      latest_(size_t(std::max(n_layer, 0))),
      gates_(size_t(std::max(n_layer, 0)), 0),
      chosen_at_(size_t(std::max(n_layer, 0))),
      popularity_(popularity),
      sources_n_(sources),
      chosen_total_(size_t(std::max(n_layer, 0))),
      requests_(size_t(std::max(n_layer, 0))),
      scale_(size_t(std::max(n_layer, 0)), 1.0) {
  if (n_layer <= 0 || n_expert <= 0)
    throw std::invalid_argument("HistoryPredictor: needs layers and experts");
  for (auto& c : pairs_) c.assign(size_t(n_expert) * size_t(n_expert), 0.0f);
  for (auto& s : sources_) s.assign(size_t(n_expert), 0.0f);
  for (auto& c : chosen_at_) c.assign(size_t(n_expert), 0);
  for (auto& r : requests_) r.assign(size_t(n_expert), 0.0);
  for (auto& r : chosen_total_) r.assign(size_t(n_expert), 0.0);
}

int HistoryPredictor::distance(int src, int target) const {
  const int d = ((target - src) % n_layer_ + n_layer_) % n_layer_;
  return d == 0 ? n_layer_ : d;
}

// The transition score (the mean over src's latest experts a of P(b | a), in
// [0, 1], or the naive-Bayes log odds over the latest gates), how many tokens ago
// the target last chose b and (optionally) how often it chose it lately.
int HistoryPredictor::cellOf(int src, int d, int target, int b) const {
  int s = 0;
  if (sources_n_ <= 0) {
    const size_t table = size_t(src) * kMaxDistance + size_t(d - 1);
    const std::vector<float>& pair = pairs_[table];
    const std::vector<float>& from = sources_[table];
    const std::vector<int>& given = latest_[size_t(src)];
    float score = 0;
    for (int a : given) {
      const float n = from[size_t(a)];
      if (n > 0) score += pair[size_t(a) * size_t(n_expert_) + size_t(b)] / (n + 1.0f);
    }
    if (!given.empty()) score /= float(given.size());
    s = std::min(kMeanScoreBuckets - 1, int(score * kMeanScoreBuckets));
  } else {
    // Naive Bayes over the latest gates: each expert a of a gate j positions before
    // the target multiplies b's odds by P(b | a) / P(b).
    const double gates = double(std::max<int64_t>(gates_[size_t(target)], 1));
    const double base = (chosen_total_[size_t(target)][size_t(b)] + prior_) / (gates + 1.0);
    double score = 0;
    for (int j = 0; j < sources_n_ && d + j <= kMaxDistance && d + j < n_layer_; ++j) {
      const int from_layer = ((src - j) % n_layer_ + n_layer_) % n_layer_;
      const size_t table = size_t(from_layer) * kMaxDistance + size_t(d + j - 1);
      for (int a : latest_[size_t(from_layer)]) {
        const double n = sources_[table][size_t(a)];
        const double p = (pairs_[table][size_t(a) * size_t(n_expert_) + size_t(b)] + base) / (n + 1.0);
        score += std::log(p / base);
      }
    }
    s = std::clamp(int(std::floor((score + 6.0) * 2.0)), 0, kScoreBuckets - 1);
  }
  const int64_t last = chosen_at_[size_t(target)][size_t(b)];
  const int r = recencyBucket(last > 0 ? gates_[size_t(target)] - last + 1 : 0);
  const int p =
      popularity_ ? popularityBucket(requests_[size_t(target)][size_t(b)] / scale_[size_t(target)]) : 0;
  return (s * kRecencyBuckets + r) * kPopularityBuckets + p;
}

float HistoryPredictor::probability(int d, int cell) const {
  const Cell& c = calibration_[size_t(d - 1)][size_t(cell)];
  return float((c.chosen + prior_) / (c.seen + 1.0));  // an unseen cell: the chance of any expert
}

// A batch's last token stands for the batch (a prompt's last token is the one the
// next decode step follows).
void HistoryPredictor::observe(const RoutingEvent& ev) {
  if (ev.layer < 0 || ev.layer >= n_layer_ || ev.n_tokens <= 0 || ev.experts.empty()) return;
  const size_t k = ev.experts.size() / size_t(ev.n_tokens);
  std::vector<int> now(ev.experts.end() - std::ptrdiff_t(k), ev.experts.end());
  std::erase_if(now, [&](int e) { return e < 0 || e >= n_expert_; });
  std::vector<char> is_chosen(size_t(n_expert_), 0);
  for (int e : now) is_chosen[size_t(e)] = 1;
  std::lock_guard lock(mu_);
  const int l = ev.layer;
  // Learn from every earlier gate within reach, before this gate updates the state the
  // features read (the target's recency as it was when the guesses were made).
  for (int d = 1; d <= kMaxDistance && d < n_layer_; ++d) {
    const int src = ((l - d) % n_layer_ + n_layer_) % n_layer_;
    const std::vector<int>& given = latest_[size_t(src)];
    if (given.empty()) continue;
    std::vector<Cell>& cal = calibration_[size_t(d - 1)];
    for (int b = 0; b < n_expert_; ++b) {
      Cell& c = cal[size_t(cellOf(src, d, l, b))];
      c.seen += 1;
      c.chosen += is_chosen[size_t(b)];
    }
    const size_t table = size_t(src) * kMaxDistance + size_t(d - 1);
    for (int a : given) {
      sources_[table][size_t(a)] += 1;
      float* row = pairs_[table].data() + size_t(a) * size_t(n_expert_);
      for (int b : now) row[b] += 1;
    }
  }
  latest_[size_t(l)] = now;
  prior_ = double(now.size()) / double(n_expert_);
  const int64_t gate = ++gates_[size_t(l)];
  for (int e : now) chosen_at_[size_t(l)][size_t(e)] = gate;
  double& scale = scale_[size_t(l)];
  scale /= kPopularityDecay;
  if (scale > 1e100) {  // rescale before the weights overflow
    for (double& r : requests_[size_t(l)]) r /= scale;
    scale = 1.0;
  }
  for (int e : now) {
    requests_[size_t(l)][size_t(e)] += scale;
    chosen_total_[size_t(l)][size_t(e)] += 1;
  }
  last_layer_ = l;
}

std::vector<ExpertGuess> HistoryPredictor::predictScored(int, int target, std::span<const float>, int,
                                                         int budget) {
  if (target < 0 || target >= n_layer_ || budget <= 0) return {};
  std::lock_guard lock(mu_);
  if (last_layer_ < 0) return {};
  const int d = distance(last_layer_, target);
  if (d > kMaxDistance || latest_[size_t(last_layer_)].empty()) return {};
  std::vector<ExpertGuess> guesses;
  for (int b = 0; b < n_expert_; ++b)
    guesses.push_back({b, probability(d, cellOf(last_layer_, d, target, b))});
  std::stable_sort(guesses.begin(), guesses.end(),
                   [](const ExpertGuess& x, const ExpertGuess& y) { return x.probability > y.probability; });
  if (int(guesses.size()) > budget) guesses.resize(size_t(budget));
  return guesses;
}

std::vector<int> HistoryPredictor::predict(int layer, int target, std::span<const float> hidden, int n_tokens,
                                           int budget) {
  std::vector<int> out;
  for (const ExpertGuess& g : predictScored(layer, target, hidden, n_tokens, budget)) out.push_back(g.expert);
  return out;
}

}  // namespace moe
