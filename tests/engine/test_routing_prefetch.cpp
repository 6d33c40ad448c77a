// Prefetching on recorded real routing, simulated without the engine
// (offload/routing/prefetch_sim.h) on the shipped subset of gpt-oss-20b traces: the
// history predictor's calibrated guesses, admitted only when likelier to be used
// than the expert they would evict, and protected until their gate. Every figure is
// counted (no clock), so the orderings below are exact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "offload/history_predictor.h"
#include "offload/routing/demand_cache.h"
#include "offload/routing/prefetch_sim.h"
#include "offload/routing/routing_trace.h"
#include "offload/slot_table.h"

namespace {

using moe::Eviction;
using moe::SlotTable;

const std::string kShippedTrace = std::string(MOECHAT_TEST_DATA) + "/routing/gpt-oss-20b-mmlu-1k.mrt";

// A prefetched slot is not evicted before its layer's gate has run; afterwards it is.
TEST(SlotTable, prefetchedSlotWaitsForItsGate) {
  SlotTable t(2, 4, 1);
  t.setEviction(Eviction::kSharedLru);
  const int predicted = t.reserve(1, 5, /*predicted=*/true);
  t.markReady(predicted);
  const int demand = t.reserve(0, 0, false);
  t.markReady(demand);
  t.touch(demand);  // the prefetched slot is now the least recent
  ASSERT_EQ(t.reserve(2, 7, false), demand) << "the prefetch awaiting its gate was evicted";
  t.markReady(demand);
  t.countGate(1, std::vector<int>{3});  // layer 1's gate ran (and did not choose 5)
  t.touch(demand);
  ASSERT_EQ(t.reserve(3, 1, false), predicted);
}

// A prefetch is skipped when the victim's decayed request count exceeds its admission bound.
TEST(SlotTable, admissionKeepsAWorthierVictim) {
  SlotTable t(1, 2, 1);
  t.setEviction(Eviction::kSharedFrequency);
  for (int i = 0; i < 4; ++i) t.countGate(0, std::vector<int>{0});
  t.markReady(t.reserve(0, 0, false));
  ASSERT_GT(t.worthOf(0, 0), 3.0);
  ASSERT_EQ(t.reserve(1, 3, true, /*max_victim_worth=*/1.0), -1);
  ASSERT_EQ(t.find(0, 0), 0);
  ASSERT_EQ(t.reserve(1, 3, true, /*max_victim_worth=*/10.0), 0);
}

struct Figures {
  double lru_per_layer, lru_shared, belady, demand, history, history_unbounded;
  double lru_moved, history_moved, history_unbounded_moved;
};

Figures figuresAt(double share) {
  const moe::RoutingTrace t = moe::loadRoutingTrace(kShippedTrace);
  const auto requests = moe::decodeRequests(t);
  const int slots = int(share * t.n_layer * t.n_expert + 0.5);
  moe::ProactiveSimOptions o;
  o.stride = 1;
  o.admission = 4.5;
  auto history = [&](double admission, double& moved) {
    moe::HistoryPredictor p(t.n_layer, t.n_expert);
    moe::ProactiveSimOptions with = o;
    with.admission = admission;
    const auto r = moe::simulateProactive(requests, t.n_layer, slots, &p, with);
    moved = double(r.uses - r.ready + r.prefetch_copies) / double(r.uses);
    return r.readyRate();
  };
  Figures f{};
  const auto lru = moe::simulateLru(requests, t.n_layer, t.n_expert, slots, moe::LruScope::kPerLayer);
  f.lru_per_layer = lru.hitRate();
  f.lru_moved = double(lru.misses()) / double(lru.uses);
  f.lru_shared = moe::simulateLru(requests, t.n_layer, t.n_expert, slots, moe::LruScope::kShared).hitRate();
  f.belady = moe::simulateBelady(requests, t.n_expert, slots).hitRate();
  f.demand = moe::simulateProactive(requests, t.n_layer, slots, nullptr, o).readyRate();
  f.history = history(4.5, f.history_moved);
  f.history_unbounded = history(0, f.history_unbounded_moved);
  return f;
}

// At a quarter of the experts: history prefetching with admission has more experts
// ready at the gate than the same cache without prefetching and than per-layer LRU,
// and moves at most per-layer LRU's bytes + 10%; without admission it would move
// over twice them. Belady's bound is above every demand cache.
TEST(RoutingPrefetch, historyBeatsDemandCachesWithinLruBytes) {
  const Figures f = figuresAt(0.25);
  ASSERT_GE(f.belady, f.lru_per_layer);
  ASSERT_GE(f.belady, f.lru_shared);
  ASSERT_GE(f.belady, f.demand);
  ASSERT_GT(f.demand, f.lru_per_layer);
  ASSERT_GT(f.history, f.demand + 0.02) << "history " << f.history << ", demand " << f.demand;
  ASSERT_GT(f.history, f.lru_per_layer + 0.05);
  ASSERT_LE(f.history_moved, 1.1 * f.lru_moved) << "moved " << f.history_moved << ", LRU " << f.lru_moved;
  ASSERT_GT(f.history_unbounded_moved, 2 * f.lru_moved);
}

// At half the experts the same holds with a smaller margin.
TEST(RoutingPrefetch, historyAtHalfTheExperts) {
  const Figures f = figuresAt(0.5);
  ASSERT_GE(f.belady, f.demand);
  ASSERT_GT(f.history, f.demand);
  ASSERT_GT(f.history, f.lru_per_layer);
  ASSERT_LE(f.history_moved, 1.1 * f.lru_moved);
}

}  // namespace
