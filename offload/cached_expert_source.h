// The expert source of the offload engine: experts come from an ExpertCache that
// a TransferWorker fills from the HostExpertStore. What it does on top of the
// worker is the policy (SourcePolicy):
// - prefetch: at layer L the predictor names layer L+stride's experts, pushed low
//   priority (ProMoE's proactive path); without a predictor it is reactive;
// - prefill streaming: a layer whose gate chose more experts than its share of the
//   cache copies its share into cache slots and streams the rest through the
//   staging slots in execution order (never evicting what it still needs);
// - static pins: the most-used experts so far are held in the cache from the first
//   decode step on (the `static` policy; misses then stream through staging);
// - CPU fallback (cpu-experts): a miss is computed from its host copy when the
//   CPU is predicted to finish it sooner than the link could deliver it.
// An expert the cache cannot hold at all (kUnavailable) is computed from its host
// copy, so a small cache never stalls.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "inference/expert_source.h"
#include "offload/cpu_rule.h"
#include "offload/expert_cache.h"
#include "offload/expert_predictor.h"
#include "offload/host_expert_store.h"
#include "offload/offload_metrics.h"
#include "offload/prediction_thread.h"
#include "offload/static_pins.h"
#include "offload/transfer_worker.h"

namespace moe {

struct PrefetchOptions {
  ExpertPredictor* predictor = nullptr;  // nullptr: reactive (no prefetching)
  int stride = 2;                        // at layer L predict the MoE layer L + stride
  int budget = 0;                        // experts pushed per prediction; 0: 2 x experts used per token
  // Predict on a PredictionThread instead of the compute thread (the GPU path, where
  // the host's time between kernels is the critical path). A result whose target
  // layer's gate has run meanwhile is dropped (`predictions_late`).
  bool async = false;
};

struct SourcePolicy {
  PrefetchOptions prefetch;
  bool stream_prefill = false;  // needs staging slots in the cache
  bool static_pins = false;     // hold the most-used experts from the first decode step on
  CpuFallbackOptions cpu;
};

class CachedExpertSource final : public ExpertSource {
 public:
  // All references must outlive this object. metrics: the worker's.
  CachedExpertSource(const HostExpertStore& store, ExpertCache& cache, TransferWorker& worker,
                     OffloadMetrics& metrics, int n_expert_used, SourcePolicy policy);

  void onLayerInput(int layer, std::span<const float> hidden, int n_tokens) override;
  // Only a predictor reads the layer input.
  bool wantsLayerInput() const override { return policy_.prefetch.predictor != nullptr; }
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override;
  void waitFor(int layer, const ExpertRef& ref) override;
  void release(int layer) override;

  // Experts computed from host memory (no slot could hold them, or the CPU rule chose it).
  uint64_t hostComputed() const { return host_computed_; }
  // Static policy (StaticPins): counts the per-token routing; pins the most-used
  // experts (returns how many; 0 for another policy).
  void onRouting(const RoutingEvent& ev) override;
  int pinMostUsed() { return static_pins_ ? static_pins_->pinMostUsed() : 0; }
  bool pinned() const { return static_pins_ && static_pins_->pinned(); }
  // Async prediction: blocks until no prediction is waiting or running.
  void waitPredictions();
  // A device that computes asynchronously: waitFor() waits on the host only until
  // an expert's copies are issued and lets the device wait for the rest. Null
  // (the CPU path): the host waits until the expert is READY.
  void setCopyWait(CopyWait* wait) { copy_wait_ = wait; }

 private:
  MissAction decideMiss(const MissContext& m, int tokens_per_expert, int& copies, int allowance, int& on_cpu);
  void scorePrediction(int layer, std::span<const int> experts, const ExecutionOrder& order);
  void pushPrediction(int target, std::vector<int> predicted);

  const HostExpertStore& store_;
  ExpertCache& cache_;
  TransferWorker& worker_;
  OffloadMetrics& metrics_;
  CopyWait* copy_wait_ = nullptr;
  SourcePolicy policy_;
  int n_expert_used_;
  int budget_;
  int n_tokens_ = 1;                         // batch size of the current forward step
  std::vector<char> from_host_;              // [n_expert] of the current layer: served from the host copy
  std::vector<std::vector<int>> predicted_;  // [n_layer] the last prediction for the layer
  std::unique_ptr<StaticPins> static_pins_;  // the static policy
  std::unique_ptr<CpuRule> cpu_rule_;        // cpu-experts, proactive's CPU fallback
  uint64_t host_computed_ = 0;
  // Async prediction. pred_mutex_ guards predicted_ and gates_ (taken before the worker's).
  std::mutex pred_mutex_;
  std::vector<uint64_t> gates_;  // [n_layer] gate decisions so far: a prediction's ticket
  std::unique_ptr<PredictionThread> prediction_thread_;  // last: stopped before the rest
};

}  // namespace moe
