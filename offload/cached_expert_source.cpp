#include "offload/cached_expert_source.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <numeric>

namespace moe {

CachedExpertSource::CachedExpertSource(const HostExpertStore& store, ExpertCache& cache,
                                       TransferWorker& worker, OffloadMetrics& metrics, int n_expert_used,
                                       SourcePolicy policy)
    : store_(store),
      cache_(cache),
      worker_(worker),
      metrics_(metrics),
      policy_(std::move(policy)),
      n_expert_used_(n_expert_used),
      budget_(policy_.prefetch.budget > 0 ? policy_.prefetch.budget : 2 * n_expert_used),
      from_host_(store.experts(), 0),
      predicted_(store.layers()),
      gates_(size_t(store.layers()), 0) {
  if (policy_.static_pins)
    static_pins_ = std::make_unique<StaticPins>(store.layers(), store.experts(), cache, worker, metrics);
  if (policy_.cpu.enabled) cpu_rule_ = std::make_unique<CpuRule>(policy_.cpu, store.expertBytes(), metrics);
  if (policy_.prefetch.predictor && policy_.prefetch.async)
    prediction_thread_ = std::make_unique<PredictionThread>(
        *policy_.prefetch.predictor, [this](const PredictionRequest& r, std::vector<int> experts) {
          std::lock_guard lock(pred_mutex_);
          if (gates_.at(size_t(r.target)) != r.ticket) {  // its gate ran meanwhile: too late to help
            metrics_.predictions_late.fetch_add(1, std::memory_order_relaxed);
            return;
          }
          pushPrediction(r.target, std::move(experts));
        });
}

void CachedExpertSource::waitPredictions() {
  if (prediction_thread_) prediction_thread_->waitIdle();
}

void CachedExpertSource::pushPrediction(int target, std::vector<int> predicted) {
  worker_.pushPredicted(target, predicted);
  metrics_.predicted.fetch_add(predicted.size(), std::memory_order_relaxed);
  predicted_.at(target) = std::move(predicted);
}

void CachedExpertSource::onLayerInput(int layer, std::span<const float> hidden, int n_tokens) {
  n_tokens_ = std::max(1, n_tokens);
  // Static: the prompt's routing decides what stays; pinned at the first decode step.
  if (static_pins_) static_pins_->onLayerInput(n_tokens);
  const auto& prefetch = policy_.prefetch;
  if (!prefetch.predictor) return;
  const int target = layer + prefetch.stride;
  if (!store_.hasLayer(target)) return;
  if (prediction_thread_) {
    uint64_t ticket;
    {
      std::lock_guard lock(pred_mutex_);
      ticket = gates_.at(size_t(target));
    }
    if (prediction_thread_->submit(layer, target, hidden, n_tokens, budget_, ticket))
      metrics_.predictions_replaced.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto predicted = prefetch.predictor->predict(layer, target, hidden, n_tokens, budget_);
  if (predicted.empty()) return;
  std::lock_guard lock(pred_mutex_);
  pushPrediction(target, std::move(predicted));
}

MissAction CachedExpertSource::decideMiss(const MissContext& m, int tokens_per_expert, int& copies,
                                          int allowance, int& on_cpu) {
  if (cpu_rule_ &&
      cpu_rule_->computeOnCpu(m.layer, m.expert, tokens_per_expert, m.queued_high_bytes, on_cpu)) {
    ++on_cpu;
    return MissAction::kHost;
  }
  if (copies >= allowance) return MissAction::kStream;
  ++copies;
  return MissAction::kCopy;
}

std::vector<ExpertRef> CachedExpertSource::acquire(int layer, std::span<const int> experts) {
  if (static_pins_) static_pins_->countGate(layer, experts);
  // Prefill streaming: past its share, a layer's misses go through the staging slots.
  const int share = cache_.layerShare();
  const bool streaming =
      policy_.stream_prefill && cache_.stagingCount() > 0 && static_cast<int>(experts.size()) > share;
  const int allowance = streaming ? std::max(0, share - cache_.residentCount(layer)) : INT_MAX;
  const int tokens_per_expert =
      std::max(1, (n_tokens_ * n_expert_used_ + static_cast<int>(experts.size()) - 1) /
                      static_cast<int>(experts.size()));
  int copies = 0, on_cpu = 0;
  const bool custom = streaming || policy_.cpu.enabled;
  // The gate and its scoring against the prediction happen as one step for a
  // prediction arriving from the prediction thread (pred_mutex_ before the worker's).
  std::lock_guard pred_lock(pred_mutex_);
  ++gates_.at(size_t(layer));
  const ExecutionOrder order =
      custom ? worker_.pushPrecise(layer, experts,
                                   [&](const MissContext& m) {
                                     return decideMiss(m, tokens_per_expert, copies, allowance, on_cpu);
                                   })
             : worker_.pushPrecise(layer, experts);
  scorePrediction(layer, experts, order);

  std::vector<ExpertRef> refs;
  refs.reserve(order.size());
  for (const OrderedExpert& o : order) {
    const bool host = o.residency == Residency::kUnavailable || o.residency == Residency::kHost;
    from_host_.at(o.expert) = host;
    const uint8_t* base = host ? store_.expertData(layer, o.expert) : cache_.slotData(o.slot);
    refs.push_back({o.expert, store_.viewAt(layer, base), o.residency == Residency::kHost});
    host_computed_ += host;
  }
  return refs;
}

// ProMoE's Accuracy / FetchRate / GoodPred inputs, for layers that had a prediction.
void CachedExpertSource::scorePrediction(int layer, std::span<const int> experts,
                                         const ExecutionOrder& order) {
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

void CachedExpertSource::waitFor(int layer, const ExpertRef& ref) {
  worker_.beginCompute(layer, ref.expert);
  if (from_host_.at(ref.expert)) return;
  const auto start = std::chrono::steady_clock::now();
  bool waited = false;
  if (copy_wait_) {
    const TransferWorker::IssueWait w = worker_.waitIssued(layer, ref.expert);
    waited = w.waited;
    if (!w.ready) {
      copy_wait_->computeWaitsFor(cache_.slotData(w.slot), cache_.slotBytes());
      metrics_.device_waits.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    waited = worker_.waitReady(layer, ref.expert);
  }
  if (waited) {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count();
    metrics_.blocked_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
}

void CachedExpertSource::release(int layer) { worker_.release(layer); }

void CachedExpertSource::onRouting(const RoutingEvent& ev) {
  if (static_pins_) static_pins_->countRouting(ev.layer, ev.experts);
}

}  // namespace moe
