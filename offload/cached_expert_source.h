// The expert source of the offload engine: experts come from an ExpertCache that
// a TransferWorker fills from the HostExpertStore. With a predictor it is
// ProMoE's proactive path (at layer L predict layer L+stride and push those
// experts low priority); without one it is reactive (fetch on the gate's demand).
// An expert the cache cannot hold this layer (kUnavailable) is computed from its
// host copy (the cpu-experts fallback), so a small cache never stalls.
#pragma once

#include <vector>

#include "inference/expert_source.h"
#include "offload/expert_cache.h"
#include "offload/expert_predictor.h"
#include "offload/host_expert_store.h"
#include "offload/offload_metrics.h"
#include "offload/transfer_worker.h"

namespace moe {

struct PrefetchOptions {
  ExpertPredictor* predictor = nullptr;  // nullptr: reactive (no prefetching)
  int stride = 2;                        // at layer L predict the MoE layer L + stride
  int budget = 0;                        // experts pushed per prediction; 0: 2 x experts used per token
};

class CachedExpertSource final : public ExpertSource {
 public:
  // All references must outlive this object.
  CachedExpertSource(const HostExpertStore& store, ExpertCache& cache, TransferWorker& worker,
                     int n_expert_used, PrefetchOptions prefetch = {});

  void onLayerInput(int layer, std::span<const float> hidden, int n_tokens) override;
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override;
  void waitFor(int layer, const ExpertRef& ref) override;
  void release(int layer) override;

  // Experts computed from host memory because no cache slot could hold them.
  uint64_t hostComputed() const { return host_computed_; }

 private:
  const HostExpertStore& store_;
  ExpertCache& cache_;
  TransferWorker& worker_;
  PrefetchOptions prefetch_;
  int budget_;
  std::vector<char> from_host_;  // [n_expert] of the current layer: served from the host copy
  uint64_t host_computed_ = 0;
};

}  // namespace moe
