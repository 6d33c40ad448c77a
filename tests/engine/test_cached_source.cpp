// The offload engine's expert source end to end on the CPU backend: host expert
// store -> transfer worker (its own thread) -> expert cache -> MoE block. Every
// policy and every ablation switch must compute bit-identical logits to the
// experts-in-place engine, over a batched prefill and token-by-token decode, at
// cache sizes from "everything fits" down to fewer slots than one token's experts.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "offload/cached_expert_source.h"
#include "offload/copy_link.h"
#include "offload/offload_engine.h"
#include "offload/skip_gate_predictor.h"
#include "support/engine_fixture.h"
#include "support/test_log.h"

using namespace moe;

namespace {

// Prefill of 10 tokens, then 6 decode steps: all logits concatenated.
std::vector<float> run(EngineFixture& f, ExpertSource& source) {
  auto t = f.transformer(64, &source);
  std::vector<float> all, step;
  const int32_t prompt[] = {4, 8, 15, 16, 23, 42, 7, 99, 3, 61};
  t->forward(prompt, step, true);
  all = step;
  for (int32_t next : {5, 77, 12, 300, 2, 31}) {
    const int32_t one[] = {next % f.model->config().n_vocab};
    t->forward(one, step);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

synth::SyntheticSpec deepSpec() {
  auto spec = synth::tinySpec("qwen3moe");  // 16 experts, top-4
  spec.n_layer = 6;
  return spec;
}

}  // namespace

namespace {

// The rows of everyPolicyComputesTheSame.
struct SourceRow {
  const char* name;
  int cache_slots;
  bool predict, chunking, preemption, reordering;
};

const SourceRow kSourceRows[] = {
    {"reactive, all experts fit", -1, false, true, true, true},
    {"reactive, 24 slots", 24, false, true, true, true},
    {"reactive, 3 slots (< experts per token)", 3, false, true, true, true},
    {"proactive skip-gate, 40 slots", 40, true, true, true, true},
    {"proactive skip-gate, 12 slots", 12, true, true, true, true},
    {"proactive, no chunking", 24, true, false, true, true},
    {"proactive, no early preemption", 24, true, true, false, true},
    {"proactive, no reordering", 24, true, true, true, false},
};

// One row: a failed check ends the row, and the next row still runs.
void checkSourceRow(const SourceRow& row) {
  const int cache_slots = row.cache_slots;
  const bool predict = row.predict, chunking = row.chunking, preemption = row.preemption,
             reordering = row.reordering;
  EngineFixture f(deepSpec());
  const auto expected = run(f, *f.experts);

  const auto& c = f.model->config();
  HostExpertStore store(*f.model);
  const int n_slots = cache_slots < 0 ? c.n_layer * c.n_expert : cache_slots;
  SlotSlab slab(n_slots, store.expertBytes());
  HostCopyLink link;
  OffloadMetrics metrics;
  TransferWorker worker(slab, SlotTable(n_slots, c.n_layer, ExpertBytesSource::kChunks), store, link, metrics,
                        TransferMode::kThreaded, TransferOptions{chunking, preemption, reordering});
  SkipGatePredictor skip_gate(*f.model);
  ProactiveParts parts;
  parts.prefetch.predictor = predict ? &skip_gate : nullptr;  // none: reactive
  CachedExpertSource source(
      store, worker, metrics, c.n_expert_used,
      std::make_unique<ProactivePolicy>(PolicyContext{store, worker, metrics, c.n_expert_used}, parts));

  const auto got = run(f, source);
  ASSERT_TRUE(got == expected);  // bit-identical

  worker.waitIdle();
  const auto m = metrics.snapshot();
  ASSERT_TRUE(m.expert_uses > 0);
  ASSERT_EQ(m.ready_hits + m.inflight_hits + m.misses, m.expert_uses);
  ASSERT_TRUE(m.unavailable <= m.misses);
  ASSERT_EQ(source.hostComputed(), m.unavailable);
  ASSERT_EQ(link.bytesCopied(), m.bytes_h2d);
  if (cache_slots < 0) {  // everything fits: nothing falls back
    ASSERT_EQ(m.unavailable, uint64_t(0));
  }
  if (!predict) {
    ASSERT_EQ(m.prefetch_hits, uint64_t(0));
  }
  moe::test::info(
      "%d slots, %s: uses %llu, ready %llu (prefetched %llu), in flight %llu, missed %llu "
      "(host-computed %llu), %.1f KB copied",
      n_slots, predict ? "skip-gate" : "reactive", (unsigned long long)m.expert_uses,
      (unsigned long long)m.ready_hits, (unsigned long long)m.prefetch_hits,
      (unsigned long long)m.inflight_hits, (unsigned long long)m.misses, (unsigned long long)m.unavailable,
      m.bytes_h2d / 1e3);
}

// The rows of everyEnginePolicyComputesTheSame.
struct EngineRow {
  std::string name;
  std::string policy;
  int cache_slots;
  std::string switch_off;
};

std::vector<EngineRow> engineRows() {
  std::vector<EngineRow> rows;
  for (OffloadPolicy p : allPolicies())
    for (int n_slots : {2, 3, 12, 40, 96})
      rows.push_back({moe::test::format("%s, %d slots", policyName(p), n_slots), policyName(p), n_slots, ""});
  for (const char* off : {"prefetch", "chunking", "preemption", "reordering", "cpu-fallback", "streaming"})
    for (int n_slots : {3, 24})
      rows.push_back(
          {moe::test::format("proactive without %s, %d slots", off, n_slots), "proactive", n_slots, off});
  return rows;
}

// One row: a failed check ends the row, and the next row still runs.
void checkEngineRow(const EngineRow& row) {
  const std::string& policy = row.policy;
  const int cache_slots = row.cache_slots;
  const std::string& switch_off = row.switch_off;
  EngineFixture f(deepSpec());
  const auto expected = run(f, *f.experts);
  OffloadConfig oc;
  oc.policy = parsePolicy(policy);
  oc.cache_slots = cache_slots;
  const double expert_bytes = double(HostExpertStore(*f.model).expertBytes());
  oc.link.bytes_per_second = expert_bytes / 1e-3;
  oc.cpu_cost = {1.5e-3, 4e-3};
  ProactiveSwitches& sw = oc.switches;
  sw.prefetch = switch_off != "prefetch";
  sw.chunking = switch_off != "chunking";
  sw.early_preemption = switch_off != "preemption";
  sw.reordering = switch_off != "reordering";
  sw.cpu_fallback = switch_off != "cpu-fallback";
  sw.prefill_streaming = switch_off != "streaming";
  OffloadEngine engine(*f.model, *f.backend, oc);
  auto t = f.transformer(64, &engine.source());
  std::vector<float> got, step;
  const int32_t prompt[] = {4, 8, 15, 16, 23, 42, 7, 99, 3, 61};
  t->forward(prompt, step, true);
  got = step;
  for (int32_t next : {5, 77, 12, 300, 2, 31}) {
    const int32_t one[] = {next % f.model->config().n_vocab};
    t->forward(one, step);
    got.insert(got.end(), step.begin(), step.end());
  }
  ASSERT_TRUE(got == expected);  // bit-identical

  engine.waitIdle();
  const auto m = engine.snapshot();
  if (oc.policy == OffloadPolicy::kResident) {
    ASSERT_EQ(m.expert_uses, uint64_t(0));
    return;
  }
  ASSERT_EQ(m.ready_hits + m.inflight_hits + m.misses, m.expert_uses);
  ASSERT_TRUE(m.unavailable + m.cpu_computed + m.streamed <= m.misses);
  ASSERT_EQ(engine.cachedSource()->hostComputed(), m.unavailable + m.cpu_computed);
  if (engine.worker()->stagingCount() > 0) {  // staging always streams
    ASSERT_EQ(m.unavailable, uint64_t(0));
  }
  if (oc.policy == OffloadPolicy::kStatic) {
    ASSERT_TRUE(m.held_slots > 0 || cache_slots <= 2);
  }
  moe::test::info(
      "%s%s%s, %d slots: uses %llu, ready %llu, in flight %llu, missed %llu (streamed %llu, CPU %llu, "
      "no slot %llu), %.1f KB",
      policy.c_str(), switch_off.empty() ? "" : " without ", switch_off.c_str(), cache_slots,
      (unsigned long long)m.expert_uses, (unsigned long long)m.ready_hits,
      (unsigned long long)m.inflight_hits, (unsigned long long)m.misses, (unsigned long long)m.streamed,
      (unsigned long long)m.cpu_computed, (unsigned long long)m.unavailable, m.bytes_h2d / 1e3);
}

}  // namespace

TEST(CachedSource, everyPolicyComputesTheSame) {
  for (const SourceRow& row : kSourceRows) {
    SCOPED_TRACE(row.name);
    checkSourceRow(row);
  }
}

// Every policy of OffloadEngine (threaded worker, simulated link) and each of
// proactive's switches off, at cache sizes from 2 slots (staging only) to all.
// The CPU cost is chosen so that the cpu-experts rule really sends some misses
// to the CPU: 1.5 expert copies' worth of link time.
TEST(CachedSource, everyEnginePolicyComputesTheSame) {
  for (const EngineRow& row : engineRows()) {
    SCOPED_TRACE(row.name);
    checkEngineRow(row);
  }
}
