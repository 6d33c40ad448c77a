// The slot table's eviction (offload/slot_table.h): pickVictim under each rule,
// the decayed request counts the frequency rules rank by, and the same table run
// over a sequence of gates (simulateSlotTable), worked by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "offload/routing/demand_cache.h"
#include "offload/slot_table.h"

using namespace moe;

namespace {

SlotInfo ready(int layer, int expert, uint64_t last_use) {
  SlotInfo s;
  s.state = SlotState::kReady;
  s.layer = layer;
  s.expert = expert;
  s.last_use = last_use;
  return s;
}

// A table whose slots all hold READY experts, loaded in the order given: the
// first is the least recent.
SlotTable filled(int n_layers, const std::vector<std::pair<int, int>>& layer_expert) {
  SlotTable t(static_cast<int>(layer_expert.size()), n_layers, 1);
  for (const auto& [layer, expert] : layer_expert) {
    const int slot = t.reserve(layer, expert, false);
    t.markReady(slot);
  }
  return t;
}

}  // namespace

TEST(SlotTable, anEmptySlotGoesFirstUnderEveryRule) {
  std::vector<SlotInfo> slots = {ready(0, 1, 1), SlotInfo{}, ready(1, 2, 2)};
  const std::vector<double> worth = {0.0, 0.0, 0.0};
  for (Eviction e :
       {Eviction::kLayerLru, Eviction::kSharedLru, Eviction::kLayerFrequency, Eviction::kSharedFrequency})
    EXPECT_EQ(pickVictim(slots, 0, -1, 1, {e, worth}), 1) << evictionName(e);
}

TEST(SlotTable, layerLruTakesTheLayersOwnOnlyWhenItHoldsItsShare) {
  // Layer 0 holds two slots (slots 1 and 3), layer 1 two; the globally oldest is layer 1's.
  const std::vector<SlotInfo> slots = {ready(1, 0, 1), ready(0, 0, 5), ready(1, 1, 2), ready(0, 1, 3)};
  EXPECT_EQ(pickVictim(slots, 0, -1, 2), 3);  // share 2 held: its own oldest
  EXPECT_EQ(pickVictim(slots, 0, -1, 3), 0);  // under its share: the globally oldest
  EXPECT_EQ(pickVictim(slots, 0, -1, 2, {Eviction::kSharedLru, {}}), 0);
}

TEST(SlotTable, protectedSlotsAreNeverVictims) {
  std::vector<SlotInfo> slots = {ready(0, 0, 1), ready(0, 1, 2), ready(0, 2, 3), ready(0, 3, 4),
                                 ready(1, 0, 5)};
  slots[0].pinned = true;
  slots[1].held = true;
  slots[2].state = SlotState::kLoading;
  slots[3].staging = true;
  EXPECT_EQ(pickVictim(slots, 0, -1, 1), 4);
  slots[4].pinned = true;
  EXPECT_EQ(pickVictim(slots, 0, -1, 1), -1);
}

TEST(SlotTable, theComputingLayerGivesUpSlotsToItsOwnMissesOnly) {
  const std::vector<SlotInfo> slots = {ready(0, 0, 1), ready(1, 0, 2), ready(0, 1, 3)};
  // Layer 0 computes: another layer's request (a prefetch) cannot take its slots...
  EXPECT_EQ(pickVictim(slots, 1, 0, 1), 1);
  EXPECT_EQ(pickVictim(slots, 2, 0, 1), 1);
  // ...its own miss may take the one its gate did not choose (not pinned).
  EXPECT_EQ(pickVictim(slots, 0, 0, 2), 0);
}

TEST(SlotTable, frequencyRulesTakeTheLeastAskedForThenTheLeastRecent) {
  // Layer 0: slot 0 old but asked for often, slot 1 recent but rare, slot 2 as rare and older.
  const std::vector<SlotInfo> slots = {ready(0, 0, 1), ready(0, 1, 9), ready(0, 2, 5), ready(1, 0, 2)};
  const std::vector<double> worth = {3.0, 0.5, 0.5, 0.2};
  EXPECT_EQ(pickVictim(slots, 0, -1, 3, {Eviction::kLayerFrequency, worth}), 2);
  EXPECT_EQ(pickVictim(slots, 0, -1, 3, {Eviction::kLayerLru, worth}), 0);
  // Shared: layer 1's expert is asked for least of all.
  EXPECT_EQ(pickVictim(slots, 0, -1, 3, {Eviction::kSharedFrequency, worth}), 3);
}

TEST(SlotTable, requestsWeighLessTheOlderTheyAre) {
  // Experts 0 and 1 of layer 0 cached; expert 0 asked for 3 times long ago, expert 1 once now.
  auto run = [](int gates_between) {
    SlotTable t = filled(2, {{0, 0}, {0, 1}});
    t.setEviction(Eviction::kLayerFrequency);
    const std::vector<int> zero = {0}, one = {1}, other = {3};
    for (int i = 0; i < 3; ++i) t.countGate(0, zero);
    for (int i = 0; i < gates_between; ++i) t.countGate(0, other);
    t.countGate(0, one);
    EXPECT_GE(t.reserve(0, 2, false), 0);  // layer 0 holds its share (2 slots, 2 layers: 1)
    return t.find(0, 0) < 0 ? 0 : t.find(0, 1) < 0 ? 1 : -1;
  };
  // 3 requests 11-13 gates back weigh 0.95^11 + 0.95^12 + 0.95^13 = 1.6 > 1: expert 1 goes.
  EXPECT_EQ(run(10), 1);
  // 101-103 gates back: 0.016 < 1: expert 0 goes.
  EXPECT_EQ(run(100), 0);
}

TEST(SlotTable, decayedCountsStayFiniteOverLongRuns) {
  SlotTable t = filled(1, {{0, 0}, {0, 1}});
  t.setEviction(Eviction::kLayerFrequency);
  const std::vector<int> zero = {0}, one = {1};
  // 50,000 gates (the scale passes 1e100 several times and is rescaled): expert 0
  // asked at every gate but the last 20, expert 1 at those 20 only.
  for (int i = 0; i < 50000; ++i) t.countGate(0, i < 49980 ? zero : one);
  // Expert 0: 0.95^20 / 0.05 = 7.2 requests' worth; expert 1: (1 - 0.95^20) / 0.05 = 12.8.
  const int slot = t.reserve(0, 2, false);
  ASSERT_GE(slot, 0);
  EXPECT_LT(t.find(0, 0), 0);
  EXPECT_GE(t.find(0, 1), 0);
}

TEST(SlotTable, evictionRulesHaveNames) {
  for (Eviction e :
       {Eviction::kLayerLru, Eviction::kSharedLru, Eviction::kLayerFrequency, Eviction::kSharedFrequency})
    EXPECT_EQ(parseEviction(evictionName(e)), e);
  try {
    parseEviction("lfu");
    FAIL() << "an unknown rule was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("shared-frequency"), std::string::npos) << e.what();
  }
}

// Two layers of 4 slots (a share of 2 each). Layer 0 asks for 0, then 1; layer 1 for
// 5, then 6; layer 0 then misses 2: it holds its share, so it replaces its own least
// recent (0), not layer 1's 5, and layer 1's next gates both hit.
TEST(SlotTable, aLayerAtItsShareReplacesItsOwnExperts) {
  const std::vector<ExpertRequest> gates = {{0, {0}}, {0, {1}}, {1, {5}}, {1, {6}},
                                            {0, {2}}, {1, {5}}, {1, {6}}};
  const DemandResult r = simulateSlotTable(gates, 2, 4, Eviction::kLayerLru);
  EXPECT_EQ(r.uses, 7u);
  EXPECT_EQ(r.hits, 2u);
  // Shared LRU replaces the least recent anywhere: layer 0's 0, the same here.
  EXPECT_EQ(simulateSlotTable(gates, 2, 4, Eviction::kSharedLru).hits, 2u);
}

// One layer of 2 slots: 0 is asked for three times, then 1, 2, 0. LRU replaces 0 with
// 2 (0 is the least recent) and misses 0 again; the frequency rule keeps 0.
TEST(SlotTable, theFrequencyRuleKeepsAnOftenUsedExpert) {
  const std::vector<ExpertRequest> gates = {{0, {0}}, {0, {0}}, {0, {0}}, {0, {1}}, {0, {2}}, {0, {0}}};
  EXPECT_EQ(simulateSlotTable(gates, 1, 2, Eviction::kLayerLru).hits, 2u);
  EXPECT_EQ(simulateSlotTable(gates, 1, 2, Eviction::kLayerFrequency).hits, 3u);
  EXPECT_EQ(simulateSlotTable(gates, 1, 2, Eviction::kSharedFrequency).hits, 3u);
}
