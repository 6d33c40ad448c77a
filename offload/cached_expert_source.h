// The ExpertSource of the offload path: turns a gate's choice into a compute order
// over the slot table (ExpertCache) that the copy queue (TransferWorker) fills from
// the HostExpertStore. The policy's parts (SourcePolicy, offload/policy.h) decide
// the rest:
// - Prefetcher (proactive): at layer L a predictor names layer L+stride's experts,
//   pushed low priority; without one the source is reactive;
// - prefill streaming: a layer whose gate chose more experts than its share of the
//   cache copies its share into cache slots and streams the rest through the
//   staging slots in execution order (never evicting what it still needs);
// - StaticPins (static): the prompt's most-used experts held from the first decode
//   step on (misses then stream through staging);
// - CpuRule (cpu-experts, proactive's fallback): a miss is computed from its host
//   copy when the CPU is predicted to finish it sooner than the link.
// An expert the cache cannot hold at all (kUnavailable) is computed from its host
// copy, so a small cache never stalls.
#pragma once

#include <memory>
#include <vector>

#include "inference/expert_source.h"
#include "offload/cpu_rule.h"
#include "offload/expert_cache.h"
#include "offload/host_expert_store.h"
#include "offload/offload_metrics.h"
#include "offload/prefetcher.h"
#include "offload/static_pins.h"
#include "offload/transfer_worker.h"

namespace moe {

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
  bool wantsLayerInput() const override { return prefetcher_ != nullptr; }
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

  const HostExpertStore& store_;
  ExpertCache& cache_;
  TransferWorker& worker_;
  OffloadMetrics& metrics_;
  CopyWait* copy_wait_ = nullptr;
  SourcePolicy policy_;
  int n_expert_used_;
  int n_tokens_ = 1;                         // batch size of the current forward step
  std::vector<char> from_host_;              // [n_expert] of the current layer: served from the host copy
  std::unique_ptr<StaticPins> static_pins_;  // the static policy
  std::unique_ptr<CpuRule> cpu_rule_;        // cpu-experts, proactive's CPU fallback
  uint64_t host_computed_ = 0;
  std::unique_ptr<Prefetcher> prefetcher_;  // proactive with a predictor; last: its thread stops first
};

}  // namespace moe
