// The ExpertSource of the offload path: turns a gate's choice into a compute order
// over the slot slab that the copy queue (TransferWorker, the owner of the slot table) fills from
// the HostExpertStore. Its CachePolicy (offload/cache_policy.h) makes the decisions
// in which the policies differ: what to prefetch at a layer's input, what to do on
// a miss, what to do with routing statistics. Shared here:
// - prefill streaming (for a policy that streams past its share): a layer whose gate
//   chose more experts than its share of the cache copies its share into cache
//   slots and streams the rest through the staging slots in execution order (never
//   evicting what it still needs);
// - an expert the cache cannot hold at all (kUnavailable), or one the policy sent to
//   the CPU (kHost), is computed from its host copy, so a small cache never stalls.
#pragma once

#include <memory>
#include <vector>

#include "inference/expert_source.h"
#include "offload/cache_policy.h"
#include "offload/host_expert_store.h"
#include "offload/offload_metrics.h"
#include "offload/transfer_worker.h"

namespace moe {

class CachedExpertSource final : public ExpertSource {
 public:
  // All references must outlive this object. metrics: the worker's. policy null: reactive-lru.
  CachedExpertSource(const HostExpertStore& store, TransferWorker& worker, OffloadMetrics& metrics,
                     int n_expert_used, std::unique_ptr<CachePolicy> policy);

  void onLayerInput(int layer, std::span<const float> hidden, int n_tokens) override;
  bool wantsLayerInput() const override { return policy_->readsLayerInput(); }
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override;
  void waitFor(int layer, const ExpertRef& ref) override;
  void release(int layer) override;

  // Experts computed from host memory (no slot could hold them, or the CPU rule chose it).
  uint64_t hostComputed() const { return host_computed_; }
  void onRouting(const RoutingEvent& ev) override { policy_->onRouting(ev); }
  CachePolicy& policy() { return *policy_; }
  // Async prediction: blocks until no prediction is waiting or running.
  void waitPredictions() { policy_->waitPredictions(); }
  // A device that computes asynchronously: waitFor() waits on the host only until
  // an expert's copies are issued and lets the device wait for the rest. Null
  // (the CPU path): the host waits until the expert is READY.
  void setCopyWait(CopyWait* wait) { copy_wait_ = wait; }
  // Decode steps on a device that routes them itself: the missed experts are read in
  // place from the pinned store (mappedExperts), the host learns the routing after
  // the step, and copies the misses in for the next token (TransferWorker's
  // learnMappedGate). Off: each MoE layer's routing is read back before its experts.
  void setMappedDecode(bool on) { mapped_decode_ = on; }
  std::span<const ExpertWeights> mappedExperts(int layer) override;
  void mappedLayerQueued(int layer) override;
  void routedOnDevice(const RoutingEvent& ev) override;

 private:
  const HostExpertStore& store_;
  TransferWorker& worker_;
  OffloadMetrics& metrics_;
  CopyWait* copy_wait_ = nullptr;
  int n_expert_used_;
  int n_tokens_ = 1;             // batch size of the current forward step
  std::vector<char> from_host_;  // [n_expert] of the current layer: served from the host copy
  bool mapped_decode_ = false;
  std::vector<ExpertWeights> map_;              // mappedExperts' answer for the layer being queued
  std::vector<std::vector<int>> mapped_slots_;  // [layer] the slots its last map read (-1: host)
  uint64_t host_computed_ = 0;
  std::unique_ptr<CachePolicy> policy_;  // last: a prediction thread stops first
};

}  // namespace moe
