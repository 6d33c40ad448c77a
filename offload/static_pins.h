// The `static` policy's use of routing statistics: the prompt's routing is counted
// per token; at the first decode step the most-used experts (ties by layer, then
// expert) fill every non-staging slot and are held there (never evicted) for the
// rest of the session, so every later miss streams through the staging slots.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "offload/offload_metrics.h"
#include "offload/transfer_worker.h"

namespace moe {

class StaticPins {
 public:
  // All references must outlive this object.
  StaticPins(int n_layer, int n_expert, TransferWorker& worker, OffloadMetrics& metrics);

  // The gate's per-token choice (experts_per_token: [n_tokens][k]), a finer count
  // than countGate's one per expert per batch, which it replaces once seen.
  void countRouting(int layer, std::span<const int> experts_per_token);
  // The unique experts a gate chose: the count when no per-token routing is given.
  void countGate(int layer, std::span<const int> experts);
  // A layer's input of n_tokens: the first single-token step after some routing
  // was counted pins the most-used experts.
  void onLayerInput(int n_tokens);
  // Holds the most-used experts seen so far (slots minus staging of them), copying
  // the missing ones; blocks until they are READY. Returns how many.
  int pinMostUsed();
  bool pinned() const { return pinned_; }

 private:
  const int n_expert_;
  TransferWorker& worker_;
  OffloadMetrics& metrics_;
  std::vector<uint64_t> uses_;  // [n_layer * n_expert] gate choices
  bool pinned_ = false;
  bool routing_counted_ = false;  // countRouting() feeds uses_
};

}  // namespace moe
