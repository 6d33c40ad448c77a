// Proactive's prefetching: at layer L a predictor (skip-gate or learned) names
// layer L + stride's experts, pushed low priority on the copy queue. On a GPU the
// prediction runs on a PredictionThread (the host thread's time is the critical
// path there), and a result whose target layer's gate has run meanwhile is dropped
// (`predictions_late`). Each gate is scored against the last prediction for its
// layer (ProMoE's Accuracy / FetchRate / GoodPred counters).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "offload/expert_predictor.h"
#include "offload/host_expert_store.h"
#include "offload/offload_metrics.h"
#include "offload/prediction_thread.h"
#include "offload/transfer_worker.h"

namespace moe {

struct PrefetchOptions {
  ExpertPredictor* predictor = nullptr;  // nullptr: reactive (no prefetching)
  int stride = 2;                        // at layer L predict the MoE layer L + stride
  int budget = 0;                        // experts pushed per prediction; 0: 2 x experts used per token
  // Predict on a PredictionThread instead of the compute thread. A result whose
  // target layer's gate has run meanwhile is dropped.
  bool async = false;
  // Admission of a guess that would evict a cached expert: 0 admits every guess;
  // a > 0 admits a guess of probability p only when the victim's worth (its decayed
  // request count, SlotTable::worthOf, about its per-gate request rate q over
  // 1 - decay) is at most p / (a x (1 - decay)), i.e. when p >= a x q: a prefetch
  // must be likelier to be used than what it displaces. Under the shared-reuse
  // rule the victim's worth is already a probability v, and p >= a x v
  // (SlotTable::admissionBound). Predictors without probabilities give p = 1.
  double admission = 0;
};

class Prefetcher {
 public:
  // options.predictor must be set. All references must outlive the prefetcher.
  Prefetcher(const PrefetchOptions& options, const HostExpertStore& store, TransferWorker& worker,
             OffloadMetrics& metrics, int n_expert_used);

  // Layer `layer`'s input: predicts layer + stride's experts and queues them (low);
  // past the last layer, the next token's first layers when the predictor can.
  void onLayerInput(int layer, std::span<const float> hidden, int n_tokens);
  // The gate of `layer` chose `experts`: `push` (the precise push, returning the
  // execution order) runs as one step with the gate's ticket and its scoring, so a
  // prediction from the thread lands before it or is dropped (this lock is taken
  // before the worker's).
  ExecutionOrder gate(int layer, std::span<const int> experts, const std::function<ExecutionOrder()>& push);
  // A gate's per-token choice, for a predictor that learns from routing history.
  void observe(const RoutingEvent& ev) { predictor_.observe(ev); }
  // Blocks until no prediction is waiting or running.
  void waitIdle();

 private:
  void pushPrediction(int target, const std::vector<ExpertGuess>& guesses);
  int targetOf(int layer) const;
  void score(int layer, std::span<const int> experts, const ExecutionOrder& order);

  const HostExpertStore& store_;
  TransferWorker& worker_;
  OffloadMetrics& metrics_;
  ExpertPredictor& predictor_;
  const int stride_;
  const int budget_;
  const double admission_;
  // pred_mutex_ guards predicted_ and gates_.
  std::mutex pred_mutex_;
  std::vector<std::vector<int>> predicted_;   // [n_layer] the last prediction for the layer
  std::vector<uint64_t> gates_;               // [n_layer] gate decisions so far: a prediction's ticket
  std::unique_ptr<PredictionThread> thread_;  // last: stopped before the rest
};

}  // namespace moe
