#include "offload/prefetcher.h"

#include <algorithm>

namespace moe {

Prefetcher::Prefetcher(const PrefetchOptions& options, const HostExpertStore& store, TransferWorker& worker,
                       OffloadMetrics& metrics, int n_expert_used)
    : store_(store),
      worker_(worker),
      metrics_(metrics),
      predictor_(*options.predictor),
      stride_(options.stride),
      budget_(options.budget > 0 ? options.budget : 2 * n_expert_used),
      admission_(options.admission),
      predicted_(store.layers()),
      gates_(size_t(store.layers()), 0) {
  if (options.async)
    thread_ = std::make_unique<PredictionThread>(
        predictor_, [this](const PredictionRequest& r, std::vector<ExpertGuess> guesses) {
          std::lock_guard lock(pred_mutex_);
          if (gates_.at(size_t(r.target)) != r.ticket) {  // its gate ran meanwhile: too late to help
            metrics_.predictions_late.fetch_add(1, std::memory_order_relaxed);
            return;
          }
          pushPrediction(r.target, guesses);
        });
}

void Prefetcher::waitIdle() {
  if (thread_) thread_->waitIdle();
}

void Prefetcher::pushPrediction(int target, const std::vector<ExpertGuess>& guesses) {
  std::vector<int> experts;
  std::vector<float> probabilities;
  for (const ExpertGuess& g : guesses) {
    experts.push_back(g.expert);
    probabilities.push_back(g.probability);
  }
  worker_.pushPredicted(target, experts, probabilities, admission_);
  metrics_.predicted.fetch_add(experts.size(), std::memory_order_relaxed);
  predicted_.at(target) = std::move(experts);
}

// layer + stride; past the last layer, the next token's layer as far on when the
// predictor predicts across tokens; -1 when there is none.
int Prefetcher::targetOf(int layer) const {
  int target = layer + stride_;
  if (target >= store_.layers() && predictor_.predictsNextToken()) target -= store_.layers();
  return store_.hasLayer(target) ? target : -1;
}

void Prefetcher::onLayerInput(int layer, std::span<const float> hidden, int n_tokens) {
  const int target = targetOf(layer);
  if (target < 0) return;
  if (thread_) {
    uint64_t ticket;
    {
      std::lock_guard lock(pred_mutex_);
      ticket = gates_.at(size_t(target));
    }
    if (thread_->submit(layer, target, hidden, n_tokens, budget_, ticket))
      metrics_.predictions_replaced.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const auto guesses = predictor_.predictScored(layer, target, hidden, n_tokens, budget_);
  if (guesses.empty()) return;
  std::lock_guard lock(pred_mutex_);
  pushPrediction(target, guesses);
}

ExecutionOrder Prefetcher::gate(int layer, std::span<const int> experts,
                                const std::function<ExecutionOrder()>& push) {
  std::lock_guard lock(pred_mutex_);
  ++gates_.at(size_t(layer));
  ExecutionOrder order = push();
  score(layer, experts, order);
  return order;
}

// ProMoE's Accuracy / FetchRate / GoodPred inputs, for layers that had a prediction.
void Prefetcher::score(int layer, std::span<const int> experts, const ExecutionOrder& order) {
  std::vector<int>& predicted = predicted_.at(layer);
  if (predicted.empty()) return;
  uint64_t correct = 0, timely = 0;
  for (const OrderedExpert& o : order) {
    if (std::find(predicted.begin(), predicted.end(), o.expert) == predicted.end()) continue;
    ++correct;
    timely += o.residency == Residency::kReady;
  }
  metrics_.pred_truth.fetch_add(experts.size(), std::memory_order_relaxed);
  metrics_.pred_correct.fetch_add(correct, std::memory_order_relaxed);
  metrics_.pred_timely.fetch_add(timely, std::memory_order_relaxed);
  predicted.clear();
}

}  // namespace moe
