// Eviction by the measured chance of reuse (offload/reuse_model.h, the shared-reuse
// rule of offload/slot_table.h) and the history predictor's naive-Bayes score over
// several earlier gates (offload/history_predictor.h). Worked by hand where a rule's
// choice is the point, and on the shipped gpt-oss-20b trace for the predictor; every
// figure is counted (no clock), so the orderings are exact.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "offload/history_predictor.h"
#include "offload/reuse_model.h"
#include "offload/routing/prefetch_sim.h"
#include "offload/routing/routing_trace.h"
#include "offload/slot_table.h"

namespace {

using moe::Eviction;
using moe::ReuseModel;
using moe::SlotTable;

const std::string kShippedTrace = std::string(MOECHAT_TEST_DATA) + "/routing/gpt-oss-20b-mmlu-1k.mrt";

// Layer 0's gates alternate between experts 0 and 1.
std::vector<int> alternating(int gate) { return {gate % 2}; }

// The value is learned, not assumed: when a layer alternates, the expert chosen a
// gate ago is the one not chosen next, which recency alone ranks the other way.
TEST(ReuseModel, learnsThatAnAlternatingExpertSkipsTheNextGate) {
  ReuseModel m(/*horizon=*/1);
  for (int g = 0; g < 200; ++g) m.observe(0, alternating(g));
  // The last gate (199) chose 1: gate 200 will choose 0.
  EXPECT_GT(m.value(0, 0), 0.9);
  EXPECT_LT(m.value(0, 1), 0.1);
}

// A predictor's hint replaces the learned value until the layer's next gate.
TEST(ReuseModel, hintHoldsUntilItsGate) {
  ReuseModel m(1);
  for (int g = 0; g < 50; ++g) m.observe(0, alternating(g));
  const double learned = m.value(0, 1);
  m.hint(0, 1, 0.75);
  EXPECT_DOUBLE_EQ(m.value(0, 1), 0.75);
  m.observe(1, std::vector<int>{0});  // another layer's gate leaves it
  EXPECT_DOUBLE_EQ(m.value(0, 1), 0.75);
  m.observe(0, alternating(50));
  EXPECT_NE(m.value(0, 1), 0.75);
  EXPECT_GT(m.value(0, 1), learned) << "after gate 50 (chose 0), gate 51 chooses 1";
}

// The table: two cached experts of an alternating layer, one slot needed. shared-reuse
// evicts the one chosen at the last gate (not wanted next); shared-lru the other.
int victimAfterAlternation(Eviction rule) {
  SlotTable t(2, 2, 1);
  t.setEviction(rule);
  t.reuse() = ReuseModel(1);
  t.markReady(t.reserve(0, 0, false));
  t.markReady(t.reserve(0, 1, false));
  for (int g = 0; g < 100; ++g) {
    t.countGate(0, alternating(g));
    t.touch(t.find(0, g % 2));
  }
  // Gate 99 chose expert 1; gate 100 will choose 0.
  const int slot = t.reserve(1, 7, false);
  return slot < 0 ? -1 : (t.find(0, 0) < 0 ? 0 : 1);
}

TEST(SlotTable, sharedReuseEvictsTheExpertLeastLikelyNext) {
  EXPECT_EQ(victimAfterAlternation(Eviction::kSharedReuse), 1);
  EXPECT_EQ(victimAfterAlternation(Eviction::kSharedLru), 0);
  EXPECT_EQ(moe::parseEviction("shared-reuse"), Eviction::kSharedReuse);
}

// Admission compares a guess with the victim on the rule's own scale: a probability
// under shared-reuse, a decayed request count (rate / (1 - decay)) otherwise.
TEST(SlotTable, admissionBoundFollowsTheRule) {
  SlotTable t(4, 2, 1);
  t.setEviction(Eviction::kSharedReuse);
  EXPECT_DOUBLE_EQ(t.admissionBound(0.6, 3.0), 0.2);
  t.setEviction(Eviction::kSharedFrequency);
  EXPECT_NEAR(t.admissionBound(0.6, 3.0), 0.2 / (1.0 - SlotTable::kFrequencyDecay), 1e-12);
  EXPECT_GT(t.admissionBound(0.6, 0.0), 1e300) << "0 admits every guess";
}

// On the shipped trace: scoring by the evidence of the latest three gates names more
// of the gate's experts than the mean transition from the latest gate alone.
TEST(HistoryPredictor, naiveBayesOverThreeGatesNamesMore) {
  const moe::RoutingTrace t = moe::loadRoutingTrace(kShippedTrace);
  const auto requests = moe::decodeRequests(t);
  moe::ProactiveSimOptions o;
  o.stride = 1;
  o.admission = 4.5;
  const int slots = t.n_layer * t.n_expert / 4;
  auto accuracy = [&](int sources) {
    moe::HistoryPredictor p(t.n_layer, t.n_expert, /*popularity=*/true, sources);
    return moe::simulateProactive(requests, t.n_layer, slots, &p, o).accuracy();
  };
  const double mean = accuracy(0), bayes = accuracy(3);
  EXPECT_GT(bayes, mean + 0.03) << "naive Bayes " << bayes << ", mean " << mean;
}

// Through the simulated proactive cache at a quarter of the experts, shared-reuse
// eviction: history prefetching has more experts ready than the same cache alone
// and than per-layer LRU, and Belady's demand bound is above the cache alone.
TEST(RoutingPrefetch, sharedReuseWithHistory) {
  const moe::RoutingTrace t = moe::loadRoutingTrace(kShippedTrace);
  const auto requests = moe::decodeRequests(t);
  const int slots = t.n_layer * t.n_expert / 4;
  moe::ProactiveSimOptions o;
  o.stride = 1;
  o.admission = 3;
  o.eviction = Eviction::kSharedReuse;
  o.reuse_horizon = 1;
  const auto demand = moe::simulateProactive(requests, t.n_layer, slots, nullptr, o);
  moe::HistoryPredictor p(t.n_layer, t.n_expert, true, 3);
  const auto history = moe::simulateProactive(requests, t.n_layer, slots, &p, o);
  const double lru =
      moe::simulateLru(requests, t.n_layer, t.n_expert, slots, moe::LruScope::kPerLayer).hitRate();
  EXPECT_GE(moe::simulateBelady(requests, t.n_expert, slots).hitRate(), demand.readyRate());
  EXPECT_GT(demand.readyRate(), lru);
  EXPECT_GT(history.readyRate(), demand.readyRate() + 0.05);
}

}  // namespace
