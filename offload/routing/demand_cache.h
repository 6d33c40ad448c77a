// Expert caches simulated on a sequence of gate requests, with no copies and no
// clock: what a demand cache of a given size can hit at best (Belady's policy,
// which evicts the expert used furthest in the future) and what plain LRU hits,
// per layer or over one shared pool. The bench reports them beside the real
// policies, so "x% of the optimum" is a column.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "offload/routing/routing_trace.h"
#include "offload/slot_table.h"

namespace moe {

// One gate: the distinct experts one MoE layer needs for one batch, all at once.
struct ExpertRequest {
  int layer = 0;
  std::vector<int> experts;
};

struct DemandResult {
  uint64_t uses = 0;  // experts requested
  uint64_t hits = 0;  // in the cache at their gate
  uint64_t misses() const { return uses - hits; }
  double hitRate() const { return uses ? double(hits) / double(uses) : 0.0; }
};

// Belady's policy over one pool of `slots` experts shared by every layer: a miss
// loads the expert, evicting the cached one (not needed by this gate) whose next
// use is furthest away, or streams it past the cache (computed, not kept) when
// every cached expert is needed before it again, as the policies that stream or
// compute on the CPU may. No demand policy with `slots` slots hits more.
DemandResult simulateBelady(std::span<const ExpertRequest> requests, int n_expert, int slots);

enum class LruScope { kShared, kPerLayer };
// LRU over one shared pool, or with each of n_layer layers owning slots / n_layer
// slots (at least one).
DemandResult simulateLru(std::span<const ExpertRequest> requests, int n_layer, int n_expert, int slots,
                         LruScope scope);

// The offload path's own slot table (offload/slot_table.h) with `slots` cache slots
// and `rule`, each gate's misses copied in at once (no clock): what that eviction
// rule hits on these gates. A miss that finds no evictable slot is streamed.
DemandResult simulateSlotTable(std::span<const ExpertRequest> requests, int n_layer, int slots,
                               Eviction rule);

// A trace's decode requests: one per token and layer, tokens in order. At most
// max_tokens tokens (all when 0).
std::vector<ExpertRequest> decodeRequests(const RoutingTrace& trace, int max_tokens = 0);

}  // namespace moe
