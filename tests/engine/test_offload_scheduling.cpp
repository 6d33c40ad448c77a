// Offload scheduling (SlotSlab + TransferWorker + HostCopyLink), all in
// MANUAL mode but one: outcomes are checked by event order and byte counts,
// never by time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "offload/copy_link.h"
#include "offload/expert_bytes_source.h"
#include "offload/offload_metrics.h"
#include "offload/transfer_worker.h"
#include "support/fake_expert_bytes.h"

using namespace moe;

namespace {

using FakeSource = test::FakeExpertBytes;

// memcpy plus a hook that runs (once) while a copy is "in progress", to push
// work exactly as another thread could while the worker copies.
class HookedCopyLink final : public CopyLink {
 public:
  explicit HookedCopyLink(double bw = 0.0) : inner_(bw) {}
  void copy(void* dst, const void* src, size_t n) override {
    if (hook_) {
      auto h = std::move(hook_);
      hook_ = nullptr;
      h();
    }
    inner_.copy(dst, src, n);
  }
  uint64_t bytesCopied() const override { return inner_.bytesCopied(); }
  uint64_t copies() const override { return inner_.copies(); }
  double simulatedSeconds() const override { return inner_.simulatedSeconds(); }
  std::function<void()> hook_;

 private:
  HostCopyLink inner_;
};

struct Rig {
  Rig(int n_slots, int layers, int experts, TransferOptions opt = {},
      TransferMode mode = TransferMode::kManual)
      : source(layers, experts),
        slab(n_slots, FakeSource::kExpertBytes),
        worker(slab, SlotTable(n_slots, layers, ExpertBytesSource::kChunks), source, copier, metrics, mode,
               opt) {}
  FakeSource source;
  SlotSlab slab;
  HookedCopyLink copier;
  OffloadMetrics metrics;
  TransferWorker worker;

  std::vector<StepResult> drain() {
    std::vector<StepResult> out;
    for (StepResult r = worker.step(); r.did_work; r = worker.step()) out.push_back(r);
    return out;
  }
  // The expert's chunks in its slot equal the source's.
  bool chunksMatch(int layer, int expert) const {
    const SlotTable table = worker.snapshot();
    const int slot = table.find(layer, expert);
    if (slot < 0 || table.at(slot).state != SlotState::kReady) return false;
    for (int c = 0; c < ExpertBytesSource::kChunks; ++c) {
      size_t off = source.chunkOffset(c);
      if (std::memcmp(slab.slotData(slot) + off, source.expertData(layer, expert) + off,
                      source.chunkBytes(c)))
        return false;
    }
    return true;
  }
};

std::vector<int> v(std::initializer_list<int> l) { return std::vector<int>(l); }

}  // namespace

TEST(OffloadScheduling, highBeforeLow) {
  Rig r(8, 4, 8);
  r.worker.pushPredicted(1, v({0, 1}));
  auto e = v({3});
  r.worker.pushPrecise(2, e);
  ASSERT_EQ(r.worker.queuedLow(), size_t(6));
  ASSERT_EQ(r.worker.queuedHigh(), size_t(3));
  auto steps = r.drain();
  ASSERT_EQ(steps.size(), size_t(9));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(steps[i].priority, Priority::kHigh);
    ASSERT_EQ(steps[i].task.layer, 2);
    ASSERT_EQ(steps[i].task.expert, 3);
    ASSERT_EQ(steps[i].task.chunk, i);
  }
  ASSERT_TRUE(steps[2].expert_ready);
  for (int i = 3; i < 9; ++i) {
    ASSERT_EQ(steps[i].priority, Priority::kLow);
    ASSERT_EQ(steps[i].task.layer, 1);
    ASSERT_EQ(steps[i].task.expert, (i - 3) / 3);
    ASSERT_EQ(steps[i].task.chunk, (i - 3) % 3);
  }
}

TEST(OffloadScheduling, highPushedDuringLowChunkWaitsForAtMostThatChunk) {
  Rig r(8, 4, 8);
  r.worker.pushPredicted(1, v({0, 1, 2}));
  bool pushed = false;
  r.copier.hook_ = [&] {
    auto e = v({5});
    r.worker.pushPrecise(2, e);
    pushed = true;
  };
  StepResult first = r.worker.step();  // the push arrives while this low chunk is copied
  ASSERT_TRUE(pushed);
  ASSERT_EQ(first.priority, Priority::kLow);
  ASSERT_EQ(first.task.layer, 1);
  ASSERT_EQ(first.bytes, FakeSource::kChunkBytes[0]);  // the started chunk completed
  ASSERT_EQ(r.worker.snapshot().at(r.worker.snapshot().find(1, 0)).chunks_done, 1);
  auto steps = r.drain();
  ASSERT_EQ(steps.size(), size_t(3 + 8));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(steps[i].priority, Priority::kHigh);
    ASSERT_EQ(steps[i].task.expert, 5);
  }
  ASSERT_TRUE(r.chunksMatch(2, 5));
  for (int e = 0; e < 3; ++e) ASSERT_TRUE(r.chunksMatch(1, e));
}

TEST(OffloadScheduling, earlyPreemptionDropsExactlyThisLayersLowChunks) {
  Rig r(16, 4, 8);
  r.worker.pushPredicted(1, v({0, 1, 2}));
  r.worker.pushPredicted(2, v({0, 1}));
  ASSERT_EQ(r.worker.queuedLow(1), size_t(9));
  ASSERT_EQ(r.worker.queuedLow(2), size_t(6));
  StepResult s = r.worker.step();  // layer 1 expert 0 chunk 0
  ASSERT_EQ(s.task.expert, 0);
  auto chosen = v({0, 3});
  r.worker.pushPrecise(1, chosen);
  OffloadSnapshot m = r.metrics.snapshot();
  ASSERT_EQ(m.chunks_dropped, uint64_t(6));   // experts 1 and 2: 3 chunks each
  ASSERT_EQ(m.chunks_promoted, uint64_t(2));  // expert 0: chunks 1, 2 now high
  ASSERT_EQ(r.worker.queuedLow(1), size_t(0));
  ASSERT_EQ(r.worker.queuedLow(2), size_t(6));  // other layers untouched
  ASSERT_EQ(r.worker.queuedHigh(), size_t(2 + 3));
  ASSERT_EQ(r.worker.snapshot().find(1, 1), -1);  // dropped experts' slots freed, not left LOADING
  ASSERT_EQ(r.worker.snapshot().find(1, 2), -1);
  auto steps = r.drain();
  ASSERT_EQ(steps.size(), size_t(5 + 6));
  ASSERT_EQ(steps[0].task.expert, 0);
  ASSERT_EQ(steps[0].task.chunk, 1);
  ASSERT_EQ(steps[1].task.chunk, 2);
  for (int i = 2; i < 5; ++i) ASSERT_EQ(steps[i].task.expert, 3);
  for (int i = 5; i < 11; ++i) ASSERT_EQ(steps[i].task.layer, 2);
  ASSERT_EQ(r.worker.snapshot().countState(SlotState::kLoading), 0);
  ASSERT_TRUE(r.chunksMatch(1, 0));
  ASSERT_TRUE(r.chunksMatch(1, 3));
  ASSERT_TRUE(r.chunksMatch(2, 0));
  ASSERT_TRUE(r.chunksMatch(2, 1));
  ASSERT_EQ(r.metrics.snapshot().bytes_h2d,
            uint64_t(4 * r.source.chunkSum()));  // experts (1,0) (1,3) (2,0) (2,1)
}

TEST(OffloadScheduling, preemptedExpertInProgressIsFreedAfterItsChunk) {
  Rig r(8, 4, 8);
  r.worker.pushPredicted(1, v({1}));
  r.copier.hook_ = [&] {
    auto chosen = v({0});
    r.worker.pushPrecise(1, chosen);  // expert 1 not chosen: its queued chunks 1, 2 dropped
  };
  StepResult s = r.worker.step();
  ASSERT_TRUE(s.discarded);
  ASSERT_EQ(r.metrics.snapshot().chunks_dropped, uint64_t(2));
  ASSERT_EQ(r.worker.snapshot().find(1, 1), -1);
  auto steps = r.drain();
  ASSERT_EQ(steps.size(), size_t(3));
  ASSERT_TRUE(r.chunksMatch(1, 0));
  ASSERT_EQ(r.worker.snapshot().countState(SlotState::kLoading), 0);
}

TEST(OffloadScheduling, withoutEarlyPreemptionNothingIsDropped) {
  TransferOptions opt;
  opt.early_preemption = false;
  Rig r(8, 4, 8, opt);
  r.worker.pushPredicted(1, v({0, 1}));
  auto chosen = v({2});
  r.worker.pushPrecise(1, chosen);
  ASSERT_EQ(r.worker.queuedLow(1), size_t(6));
  ASSERT_EQ(r.worker.queuedHigh(), size_t(3));
  ASSERT_EQ(r.metrics.snapshot().chunks_dropped, uint64_t(0));
  r.drain();
  ASSERT_EQ(r.worker.snapshot().countState(SlotState::kReady), 3);
}

TEST(OffloadScheduling, reorderingReadyThenInFlightThenNotStarted) {
  for (bool reorder : {true, false}) {
    TransferOptions opt;
    opt.reordering = reorder;
    Rig r(8, 4, 8, opt);
    r.worker.pushPredicted(1, v({0}));
    r.drain();  // expert 0 READY
    r.worker.pushPredicted(1, v({5}));
    r.worker.step();                    // expert 5: 1 chunk
    r.worker.pushPredicted(1, v({6}));  // expert 6: queued, not started; expert 7 absent
    ASSERT_EQ(r.worker.snapshot().at(r.worker.snapshot().find(1, 5)).chunks_done, 1);
    auto chosen = v({7, 6, 5, 0});
    ExecutionOrder order = r.worker.pushPrecise(1, chosen);
    ASSERT_EQ(order.size(), size_t(4));
    if (reorder) {
      ASSERT_EQ(order[0].expert, 0);
      ASSERT_EQ(order[0].residency, Residency::kReady);
      ASSERT_EQ(order[1].expert, 5);
      ASSERT_EQ(order[1].residency, Residency::kInFlight);
      ASSERT_EQ(order[1].chunks_done, 1);
      ASSERT_EQ(order[2].residency, Residency::kNotStarted);
      ASSERT_EQ(order[3].residency, Residency::kNotStarted);
      ASSERT_EQ(order[2].expert, 7);  // stable among equals: gate order
      ASSERT_EQ(order[3].expert, 6);
    } else {
      for (size_t i = 0; i < 4; ++i) ASSERT_EQ(order[i].expert, chosen[i]);
    }
    OffloadSnapshot m = r.metrics.snapshot();
    ASSERT_EQ(m.expert_uses, uint64_t(4));
    ASSERT_EQ(m.ready_hits, uint64_t(1));
    ASSERT_EQ(m.prefetch_hits, uint64_t(1));
    ASSERT_EQ(m.inflight_hits, uint64_t(2));
    ASSERT_EQ(m.misses, uint64_t(1));
    for (const OrderedExpert& o : order) {
      r.worker.waitReady(1, o.expert);
      ASSERT_TRUE(r.chunksMatch(1, o.expert));
    }
    r.worker.release(1);
  }
}

TEST(OffloadScheduling, inFlightOrderedByChunksDone) {
  TransferOptions opt;
  opt.early_preemption = false;  // keeps expert 1's low chunks queued behind the high ones
  Rig r(8, 4, 8, opt);
  r.worker.pushPredicted(1, v({1}));
  r.worker.step();  // expert 1: 1 chunk
  auto first = v({2});
  r.worker.pushPrecise(1, first);
  r.worker.step();
  r.worker.step();  // expert 2 (high): 2 chunks
  r.worker.release(1);
  ASSERT_EQ(r.worker.snapshot().at(r.worker.snapshot().find(1, 1)).chunks_done, 1);
  ASSERT_EQ(r.worker.snapshot().at(r.worker.snapshot().find(1, 2)).chunks_done, 2);
  auto chosen = v({0, 1, 2});
  ExecutionOrder order = r.worker.pushPrecise(1, chosen);
  ASSERT_EQ(order[0].expert, 2);  // in flight, 2 chunks
  ASSERT_EQ(order[0].residency, Residency::kInFlight);
  ASSERT_EQ(order[1].expert, 1);  // in flight, 1 chunk
  ASSERT_EQ(order[1].residency, Residency::kInFlight);
  ASSERT_EQ(order[2].expert, 0);  // not started
  ASSERT_EQ(order[2].residency, Residency::kNotStarted);
  for (int e : chosen) r.worker.waitReady(1, e);
  for (int e : chosen) ASSERT_TRUE(r.chunksMatch(1, e));
}

TEST(OffloadScheduling, loadingAndComputingSlotsAreNeverEvicted) {
  Rig r(4, 2, 8);  // share per layer = 2
  r.worker.pushPredicted(0, v({0, 1}));
  r.drain();
  r.worker.pushPredicted(1, v({0, 1}));  // LOADING, not stepped
  ASSERT_EQ(r.worker.snapshot().countState(SlotState::kReady), 2);
  ASSERT_EQ(r.worker.snapshot().countState(SlotState::kLoading), 2);
  auto chosen = v({0, 1});
  r.worker.pushPrecise(0, chosen);  // layer 0 computing, its slots pinned
  r.worker.pushPredicted(1, v({2, 3}));
  ASSERT_EQ(r.metrics.snapshot().prefetch_skipped, uint64_t(2));
  ASSERT_EQ(r.worker.snapshot().evictions(), uint64_t(0));
  ASSERT_EQ(r.worker.snapshot().find(1, 2), -1);
  ASSERT_EQ(r.worker.snapshot().find(1, 3), -1);
  ASSERT_TRUE(r.chunksMatch(0, 0));
  ASSERT_TRUE(r.chunksMatch(0, 1));
  ASSERT_EQ(r.worker.snapshot().at(r.worker.snapshot().find(1, 0)).state, SlotState::kLoading);
  ASSERT_EQ(r.worker.snapshot().at(r.worker.snapshot().find(1, 1)).state, SlotState::kLoading);
  ASSERT_EQ(r.worker.queuedLow(), size_t(6));
  // Computing layer alone (no pins) also protects.
  r.worker.release(0);
  r.worker.pushPrecise(0, std::vector<int>{});
  r.worker.pushPredicted(1, v({2}));
  ASSERT_EQ(r.worker.snapshot().find(1, 2), -1);
  ASSERT_EQ(r.worker.snapshot().evictions(), uint64_t(0));
  // Unprotected: the least-recently-used layer-0 slot goes (layer 1 holds its share but
  // has nothing evictable: all LOADING).
  r.worker.release(0);
  r.worker.pushPredicted(1, v({2}));
  ASSERT_EQ(r.worker.snapshot().evictions(), uint64_t(1));
  ASSERT_EQ(r.worker.snapshot().find(0, 0), -1);
  ASSERT_TRUE(r.worker.snapshot().find(0, 1) >= 0);
  ASSERT_TRUE(r.worker.snapshot().find(1, 2) >= 0);
  r.drain();
  ASSERT_EQ(r.worker.snapshot().countState(SlotState::kLoading), 0);
  for (int e : {0, 1, 2}) ASSERT_TRUE(r.chunksMatch(1, e));
}

TEST(OffloadScheduling, perLayerLruPrefersOwnLayerAtShare) {
  Rig r(4, 2, 8);  // share 2
  r.worker.pushPredicted(0, v({0}));
  r.worker.pushPredicted(1, v({0, 1}));
  r.worker.pushPredicted(0, v({1}));
  r.drain();
  // Both layers' gates ran (a prefetch is kept until then), choosing nothing cached.
  for (int layer : {0, 1}) {
    r.worker.pushPrecise(layer, std::vector<int>{});
    r.worker.release(layer);
  }
  // Layer 1 holds 2 = its share: its own LRU (1,0) goes although (0,0) is older.
  r.worker.pushPredicted(1, v({2}));
  ASSERT_EQ(r.worker.snapshot().find(1, 0), -1);
  ASSERT_TRUE(r.worker.snapshot().find(0, 0) >= 0);
  r.drain();
  // Touch on use: (0,0) used now, so (0,1) is layer 0's LRU when layer 0 evicts.
  auto chosen = v({0});
  r.worker.pushPrecise(0, chosen);
  r.worker.release(0);
  r.worker.pushPredicted(0, v({2}));
  ASSERT_EQ(r.worker.snapshot().find(0, 1), -1);
  ASSERT_TRUE(r.worker.snapshot().find(0, 0) >= 0);
}

TEST(OffloadScheduling, bytesCopiedEqualChunkSums) {
  Rig r(8, 4, 8);
  r.worker.pushPredicted(0, v({0, 1, 2}));
  auto chosen = v({3, 4});
  r.worker.pushPrecise(3, chosen);
  auto steps = r.drain();
  ASSERT_EQ(steps.size(), size_t(15));
  uint64_t sum = 0;
  for (const StepResult& s : steps) {
    ASSERT_EQ(s.bytes, r.source.chunkBytes(s.task.chunk));
    sum += s.bytes;
  }
  ASSERT_EQ(sum, uint64_t(5 * r.source.chunkSum()));
  ASSERT_EQ(r.copier.bytesCopied(), sum);
  OffloadSnapshot m = r.metrics.snapshot();
  ASSERT_EQ(m.bytes_h2d, sum);
  ASSERT_EQ(m.chunks_copied, uint64_t(15));
  for (int e : {0, 1, 2}) ASSERT_TRUE(r.chunksMatch(0, e));
  for (int e : {3, 4}) ASSERT_TRUE(r.chunksMatch(3, e));
}

TEST(OffloadScheduling, withoutChunkingWholeExpertsAreCopied) {
  TransferOptions opt;
  opt.chunking = false;
  Rig r(8, 4, 8, opt);
  r.worker.pushPredicted(1, v({0, 1}));
  ASSERT_EQ(r.worker.queuedLow(), size_t(2));
  StepResult s = r.worker.step();
  ASSERT_EQ(s.task.chunk, -1);
  ASSERT_EQ(s.bytes, FakeSource::kExpertBytes);
  ASSERT_TRUE(s.expert_ready);
  int slot = r.worker.snapshot().find(1, 0);
  ASSERT_EQ(std::memcmp(r.slab.slotData(slot), r.source.expertData(1, 0), FakeSource::kExpertBytes), 0);
  // Preemption drops whole-expert tasks too, and leaves nothing LOADING.
  auto chosen = v({2});
  r.worker.pushPrecise(1, chosen);
  ASSERT_EQ(r.metrics.snapshot().chunks_dropped, uint64_t(1));
  ASSERT_EQ(r.worker.snapshot().find(1, 1), -1);
  r.drain();
  ASSERT_TRUE(r.chunksMatch(1, 2));
  ASSERT_EQ(r.copier.bytesCopied(), uint64_t(2 * FakeSource::kExpertBytes));
  ASSERT_EQ(r.metrics.snapshot().chunks_copied, uint64_t(6));
}

TEST(OffloadScheduling, simulatedLinkVirtualTime) {
  HostCopyLink link(1.0e6);  // 1 MB/s
  std::vector<uint8_t> a(5000, 7), b(5000, 0);
  link.copy(b.data(), a.data(), 1000);
  link.copy(b.data(), a.data(), 3000);
  link.copy(b.data(), a.data(), 500);
  ASSERT_EQ(link.bytesCopied(), uint64_t(4500));
  ASSERT_EQ(link.copies(), uint64_t(3));
  ASSERT_TRUE(std::fabs(link.simulatedSeconds() - 4500 / 1.0e6) < 1e-12);
  ASSERT_EQ(b[4499], uint8_t(0));
  ASSERT_EQ(b[2999], uint8_t(7));
  HostCopyLink plain;
  plain.copy(b.data(), a.data(), 10);
  ASSERT_DOUBLE_EQ(plain.simulatedSeconds(), 0.0);

  // Through the worker: the link time of a layer's misses.
  Rig r(8, 4, 8);
  HostCopyLink timed(2.0e6);
  TransferWorker w(r.slab, SlotTable(8, 4, ExpertBytesSource::kChunks), r.source, timed, r.metrics,
                   TransferMode::kManual);
  auto chosen = v({0, 1});
  w.pushPrecise(2, chosen);
  while (w.step().did_work) {
  }
  ASSERT_TRUE(std::fabs(timed.simulatedSeconds() - 2.0 * r.source.chunkSum() / 2.0e6) < 1e-12);
}

TEST(OffloadScheduling, waitReadyManualStepsAndReports) {
  Rig r(8, 4, 8);
  auto chosen = v({1});
  r.worker.pushPrecise(0, chosen);
  ASSERT_TRUE(r.worker.waitReady(0, 1));   // had to copy
  ASSERT_TRUE(!r.worker.waitReady(0, 1));  // already READY
  ASSERT_EQ(r.metrics.snapshot().waits, uint64_t(1));
  ASSERT_THROW(r.worker.waitReady(0, 7), std::logic_error);
}

TEST(OffloadScheduling, threadedFinalState) {
  const int layers = 4, experts = 4;
  Rig r(layers * experts, layers, experts, {}, TransferMode::kThreaded);
  for (int l = 0; l < layers; ++l) r.worker.pushPredicted(l, v({0, 1}));
  for (int l = 0; l < layers; ++l) {
    if (l + 2 < layers) r.worker.pushPredicted(l + 2, v({2, 3}));
    auto chosen = v({3, 1, 2});
    ExecutionOrder order = r.worker.pushPrecise(l, chosen);
    ASSERT_EQ(order.size(), size_t(3));
    for (const OrderedExpert& o : order) {
      r.worker.waitReady(l, o.expert);
      ASSERT_TRUE(r.chunksMatch(l, o.expert));
    }
    r.worker.release(l);
  }
  r.worker.waitIdle();
  ASSERT_EQ(r.worker.snapshot().countState(SlotState::kLoading), 0);
  int ready = 0;
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < experts; ++e)
      if (r.worker.snapshot().find(l, e) >= 0) {
        ASSERT_TRUE(r.chunksMatch(l, e));
        ++ready;
      }
  ASSERT_EQ(ready, r.worker.snapshot().countState(SlotState::kReady));
  ASSERT_TRUE(ready >= layers * 3);
  ASSERT_EQ(r.metrics.snapshot().expert_uses, uint64_t(layers * 3));
}

// A gate's cached experts are pinned before its misses take slots: a miss listed
// first never replaces an expert the same gate chose (here the least recent one).
TEST(OffloadScheduling, aGatesMissNeverReplacesAnExpertThatGateChose) {
  Rig r(2, 1, 8, {/*chunking=*/false, /*early_preemption=*/false, /*reordering=*/false});
  for (int e : {0, 1}) {
    auto one = v({e});
    r.worker.pushPrecise(0, one);
    r.drain();
    r.worker.release(0);
  }
  auto gate = v({2, 0});  // 2 misses; 0 is cached and the least recent
  const ExecutionOrder order = r.worker.pushPrecise(0, gate);
  r.drain();
  r.worker.release(0);
  ASSERT_EQ(order.size(), size_t(2));
  EXPECT_EQ(r.metrics.snapshot().misses, uint64_t(3));      // 0, 1, then 2 only
  EXPECT_EQ(r.worker.snapshot().evictions(), uint64_t(1));  // 1 made room for 2
  EXPECT_TRUE(r.chunksMatch(0, 0));
  EXPECT_TRUE(r.chunksMatch(0, 2));
  EXPECT_LT(r.worker.snapshot().find(0, 1), 0);
}
