// The policies end to end on the CPU backend (OffloadEngine in MANUAL transfer
// mode, so queues evolve deterministically): the cpu-experts rule decides each
// miss by its formula and logs it; static holds the prompt's most-used experts
// and streams everything else; the predictor counters add up; a session's
// snapshot can be polled from another thread while it generates.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "app/core/engine_session.h"
#include "offload/offload_engine.h"
#include "support/engine_fixture.h"
#include "support/test_log.h"

using namespace moe;

namespace {

synth::SyntheticSpec deepSpec() {
  auto spec = synth::tinySpec("qwen3moe");  // 16 experts, top-4
  spec.n_layer = 6;
  return spec;
}

const int32_t kPrompt[] = {4, 8, 15, 16, 23, 42, 7, 99, 3, 61};
const int32_t kDecode[] = {5, 77, 12, 300, 2, 31};

// Prefill, then decode steps; all logits concatenated.
std::vector<float> run(EngineFixture& f, ExpertSource& source,
                       const std::function<void()>& after_prefill = {}) {
  auto t = f.transformer(64, &source);
  std::vector<float> all, step;
  t->forward(kPrompt, step, true);
  all = step;
  if (after_prefill) after_prefill();
  for (int32_t next : kDecode) {
    const int32_t one[] = {next % f.model->config().n_vocab};
    t->forward(one, step);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

size_t chunkSum(const HostExpertStore& s) {
  size_t n = 0;
  for (int c = 0; c < ExpertBytesSource::kChunks; ++c) n += s.chunkBytes(c);
  return n;
}

}  // namespace

// One expert copy takes 1 ms on the simulated link; the CPU needs 2.5 ms per
// expert. Per layer the k-th miss copies when (copies before + 1) ms is sooner
// than (CPU experts before + 1) x 2.5 ms: copy, copy, CPU, copy, ...
TEST(OffloadPolicies, cpuExpertsDecidesEachMissByItsRule) {
  EngineFixture f(deepSpec());
  const auto expected = run(f, *f.experts);
  const uint64_t expert_bytes = HostExpertStore(*f.model).expertBytes();
  OffloadConfig oc;
  oc.policy = OffloadPolicy::kCpuExperts;
  oc.cache_slots = 24;
  oc.mode = TransferMode::kManual;
  oc.link.bytes_per_second = double(expert_bytes) / 1e-3;
  oc.cpu_cost = {2.5e-3, 7.5e-3};
  std::vector<CpuDecision> log;
  oc.on_cpu_decision = [&](const CpuDecision& d) { log.push_back(d); };
  OffloadEngine engine(*f.model, *f.backend, oc);
  ASSERT_TRUE(run(f, engine.source()) == expected);  // bit-identical whoever computes

  const OffloadSnapshot m = engine.snapshot();
  ASSERT_EQ(m.cpu_decisions, uint64_t(log.size()));
  ASSERT_EQ(m.cpu_decisions, m.misses);  // every miss is decided
  int on_cpu = 0, copies = 0, cpu_before = 0, copies_before = 0, layer = -1;
  for (const CpuDecision& d : log) {
    if (d.layer != layer) layer = d.layer, cpu_before = copies_before = 0;  // a new gate
    ASSERT_DOUBLE_EQ(d.copy_seconds, double((copies_before + 1) * expert_bytes) / oc.link.bytes_per_second);
    ASSERT_DOUBLE_EQ(d.cpu_seconds, (cpu_before + 1) * oc.cpu_cost.estimate(d.tokens));
    ASSERT_EQ(d.on_cpu, d.cpu_seconds < d.copy_seconds);
    (d.on_cpu ? cpu_before : copies_before)++;
    (d.on_cpu ? on_cpu : copies)++;
  }
  ASSERT_TRUE(on_cpu > 0 && copies > 0);  // the rule really chose both ways
  ASSERT_EQ(m.cpu_computed, uint64_t(on_cpu));
  ASSERT_EQ(m.bytes_h2d, (m.misses - m.cpu_computed - m.unavailable) * expert_bytes);  // whole experts
  moe::test::info("cpu-experts: %llu misses, %d computed on the CPU, %d copied", (unsigned long long)m.misses,
                  on_cpu, copies);
}

TEST(OffloadPolicies, cpuExpertsExtremes) {
  EngineFixture f(deepSpec());
  const auto expected = run(f, *f.experts);
  for (double cost : {1e-12, 1e3}) {
    OffloadConfig oc;
    oc.policy = OffloadPolicy::kCpuExperts;
    oc.cache_slots = 24;
    oc.mode = TransferMode::kManual;
    oc.link.bytes_per_second = 25e9;
    oc.cpu_cost = {cost, cost};
    OffloadEngine engine(*f.model, *f.backend, oc);
    ASSERT_TRUE(run(f, engine.source()) == expected);
    const auto m = engine.snapshot();
    if (cost < 1) {  // a free CPU: nothing crosses the link
      ASSERT_EQ(m.cpu_computed, m.misses);
      ASSERT_EQ(m.bytes_h2d, uint64_t(0));
    } else {
      ASSERT_EQ(m.cpu_computed, uint64_t(0));
      ASSERT_TRUE(m.bytes_h2d > 0);
    }
  }
}

// static: after the prompt, the 10 most-used experts (by per-token routing) are
// held; decode streams every other expert through the 2 staging slots.
TEST(OffloadPolicies, staticHoldsThePromptsMostUsedExperts) {
  EngineFixture f(deepSpec());
  const auto expected = run(f, *f.experts);
  const auto& c = f.model->config();
  OffloadConfig oc;
  oc.policy = OffloadPolicy::kStatic;
  oc.cache_slots = 12;
  oc.mode = TransferMode::kManual;
  OffloadEngine engine(*f.model, *f.backend, oc);
  ASSERT_EQ(engine.worker()->stagingCount(), 2);

  std::vector<uint64_t> uses(size_t(c.n_layer) * c.n_expert, 0);
  OffloadSnapshot after_pin;
  std::vector<std::pair<int, int>> held;
  auto t = f.transformer(64, &engine.source());
  t->setRoutingObserver([&](const RoutingEvent& ev) {
    if (ev.n_tokens > 1)
      for (int e : ev.experts) ++uses[size_t(ev.layer) * c.n_expert + e];
  });
  std::vector<float> all, step;
  t->forward(kPrompt, step, true);
  all = step;
  const auto* static_policy = dynamic_cast<const StaticPolicy*>(&engine.cachedSource()->policy());
  ASSERT_TRUE(static_policy);
  ASSERT_TRUE(!static_policy->pinned());
  for (size_t i = 0; i < std::size(kDecode); ++i) {
    const int32_t one[] = {kDecode[i] % c.n_vocab};
    t->forward(one, step);
    all.insert(all.end(), step.begin(), step.end());
    if (i == 0) {
      ASSERT_TRUE(static_policy->pinned());
      after_pin = engine.snapshot();
      const SlotTable table = engine.worker()->snapshot();
      for (int s = 0; s < table.slotCount(); ++s)
        if (const SlotInfo& info = table.at(s); info.held) held.push_back({info.layer, info.expert});
    }
  }
  ASSERT_TRUE(all == expected);

  // The expected pins: most uses first, ties by (layer, expert).
  std::vector<size_t> ids(uses.size());
  std::iota(ids.begin(), ids.end(), size_t(0));
  std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return uses[a] > uses[b]; });
  std::vector<std::pair<int, int>> want;
  for (size_t k = 0; k < 10; ++k) want.push_back({int(ids[k] / c.n_expert), int(ids[k] % c.n_expert)});
  std::sort(want.begin(), want.end());
  std::sort(held.begin(), held.end());
  ASSERT_TRUE(held == want);
  ASSERT_EQ(after_pin.held_slots, uint64_t(10));

  // Still held, READY and unmoved at the end; every decode miss since was streamed.
  for (const auto& [layer, expert] : want) {
    const SlotTable table = engine.worker()->snapshot();
    const int slot = table.find(layer, expert);
    ASSERT_TRUE(slot >= 0);
    ASSERT_TRUE(table.at(slot).held);
    ASSERT_EQ(table.at(slot).state, SlotState::kReady);
  }
  const OffloadSnapshot end = engine.snapshot();
  const uint64_t misses = end.misses - after_pin.misses, streamed = end.streamed - after_pin.streamed;
  ASSERT_TRUE(misses > 0);
  ASSERT_EQ(streamed, misses);
  ASSERT_EQ(end.bytes_h2d - after_pin.bytes_h2d, streamed * chunkSum(*engine.store()));
}

// Accuracy / FetchRate / GoodPred add up as defined (docs/offload.md).
TEST(OffloadPolicies, predictorCountersAreConsistent) {
  EngineFixture f(deepSpec());
  OffloadConfig oc;
  oc.policy = OffloadPolicy::kProactive;
  oc.cache_slots = 40;
  oc.link.bytes_per_second = 25e9;
  oc.cpu_cost = {1.0, 1.0};  // the CPU never wins here
  OffloadEngine engine(*f.model, *f.backend, oc);
  run(f, engine.source());
  engine.waitIdle();
  const auto m = engine.snapshot();
  ASSERT_TRUE(m.predicted > 0 && m.pred_truth > 0);
  ASSERT_TRUE(m.pred_correct <= m.pred_truth);
  ASSERT_TRUE(m.pred_timely <= m.pred_correct);
  ASSERT_TRUE(m.pred_truth < m.expert_uses);  // the first `stride` MoE layers have no prediction
  ASSERT_TRUE(std::abs(m.goodPred() - double(m.pred_timely) / double(m.pred_truth)) < 1e-12);
  ASSERT_TRUE(m.accuracy() > 8.0 / 16);  // better than a random guess of 8 (the budget) of 16
  moe::test::info("skip-gate: Accuracy %.3f FetchRate %.3f GoodPred %.3f", m.accuracy(), m.fetchRate(),
                  m.goodPred());
}

// The GUI polls offloadSnapshot() from its own thread while the worker generates.
TEST(OffloadPolicies, sessionSnapshotPolledWhileGenerating) {
  SessionOptions so;
  so.demo = true;
  so.policy = OffloadPolicy::kProactive;
  so.budget = BudgetSetting::cacheShare(0.5);
  EngineSession session(so);
  ASSERT_EQ(session.cacheSlots(), OffloadEngine::routedExperts(session.model()) / 2);
  ASSERT_EQ(session.plan().cache_slots, session.cacheSlots());
  std::atomic<bool> done{false};
  std::atomic<int> polls{0}, regressions{0};
  std::thread poller([&] {
    uint64_t last = 0;
    do {
      const OffloadSnapshot s = session.offloadSnapshot();
      if (s.expert_uses < last) ++regressions;
      last = s.expert_uses;
      ++polls;
      std::this_thread::yield();
    } while (!done.load());
  });
  while (polls.load() == 0) std::this_thread::yield();  // polling has begun before generating
  GenerationParams p;
  p.max_tokens = 24;
  p.sampler.temperature = 0;
  p.stop_at_end_token = false;
  const int32_t prompt[] = {1, 20, 30, 40, 50};
  const GenerationStats st = session.generate(prompt, p, nullptr);
  done = true;
  poller.join();
  ASSERT_TRUE(polls.load() > 0);
  ASSERT_EQ(regressions.load(), 0);
  const OffloadSnapshot s = session.offloadSnapshot();
  ASSERT_EQ(s.ready_hits + s.inflight_hits + s.misses, s.expert_uses);
  ASSERT_EQ(s.prefill_tokens, uint64_t(5));
  ASSERT_EQ(s.decode_tokens, uint64_t(st.decode_steps));
  ASSERT_TRUE(s.link_bytes_per_second > 0);  // measured at start (no simulated link)

  so.policy = OffloadPolicy::kResident;
  EngineSession resident(so);
  resident.generate(prompt, p, nullptr);
  const OffloadSnapshot z = resident.offloadSnapshot();
  ASSERT_EQ(z.expert_uses + z.bytes_h2d + z.decode_tokens + z.prefill_tokens, uint64_t(0));
  ASSERT_EQ(resident.cacheSlots(), 0);
}

TEST(OffloadPolicies, policyNamesRoundTrip) {
  for (OffloadPolicy p : allPolicies()) ASSERT_TRUE(parsePolicy(policyName(p)) == p);
  ASSERT_THROW(parsePolicy("lfu"), std::invalid_argument);
  SessionOptions so;
  so.demo = true;
  so.policy = OffloadPolicy::kReactiveLru;
  so.budget = BudgetSetting::cacheBytes(1);  // less than one expert
  ASSERT_THROW(EngineSession{so}, std::invalid_argument);
}
