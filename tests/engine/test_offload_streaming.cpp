// Prefill streaming through staging slots, static holds and per-miss decisions
// (TransferWorker + SlotSlab in MANUAL mode): checked by event order, slot
// contents at compute time and byte counts, never by time.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "offload/copy_link.h"
#include "offload/expert_bytes_source.h"
#include "offload/offload_metrics.h"
#include "offload/transfer_worker.h"
#include "support/fake_expert_bytes.h"

using namespace moe;

namespace {

using FakeSource = test::FakeExpertBytes;

// memcpy that logs "copy L.E->slot" for each chunk into a shared event list.
class LoggingCopyLink final : public CopyLink {
 public:
  LoggingCopyLink(const FakeSource& src, std::vector<std::string>& log) : src_(src), log_(log) {}
  void setSlab(const SlotSlab* s) { slab_ = s; }
  void copy(void* dst, const void* src, size_t n) override {
    const size_t slot = size_t(static_cast<uint8_t*>(dst) - slab_->slotData(0)) / slab_->slotBytes();
    log_.push_back("copy " + src_.whose(src) + "->" + std::to_string(slot));
    inner_.copy(dst, src, n);
  }
  uint64_t bytesCopied() const override { return inner_.bytesCopied(); }
  uint64_t copies() const override { return inner_.copies(); }
  double simulatedSeconds() const override { return 0; }

 private:
  const FakeSource& src_;
  std::vector<std::string>& log_;
  const SlotSlab* slab_ = nullptr;
  HostCopyLink inner_;
};

struct Rig {
  Rig(int n_slots, int staging, int layers, int experts, TransferOptions opt = {})
      : source(layers, experts), slab(n_slots, FakeSource::kExpertBytes), copier(source, log) {
    SlotTable table(n_slots, layers, ExpertBytesSource::kChunks);
    table.setStagingCount(staging);
    copier.setSlab(&slab);
    worker = std::make_unique<TransferWorker>(slab, std::move(table), source, copier, metrics,
                                              TransferMode::kManual, opt);
  }
  bool holds(int slot, int layer, int expert) const {
    for (int c = 0; c < ExpertBytesSource::kChunks; ++c)
      if (std::memcmp(slab.slotData(slot) + source.chunkOffset(c),
                      source.expertData(layer, expert) + source.chunkOffset(c), source.chunkBytes(c)))
        return false;
    return true;
  }
  // What the MoE block does: per expert in order, beginCompute, wait, "compute"
  // (checks the slot holds exactly this expert's bytes), then release. A failed check
  // ends only this function: callers wrap it in ASSERT_NO_FATAL_FAILURE.
  void computeLayer(int layer, const ExecutionOrder& order) {
    for (const OrderedExpert& o : order) {
      worker->beginCompute(layer, o.expert);
      if (o.residency == Residency::kHost || o.residency == Residency::kUnavailable) {
        log.push_back("host " + std::to_string(layer) + "." + std::to_string(o.expert));
        continue;
      }
      worker->waitReady(layer, o.expert);
      ASSERT_TRUE(holds(o.slot, layer, o.expert));
      log.push_back("compute " + std::to_string(layer) + "." + std::to_string(o.expert));
    }
    worker->release(layer);
  }
  std::vector<std::string> log;
  FakeSource source;
  SlotSlab slab;
  LoggingCopyLink copier;
  OffloadMetrics metrics;
  std::unique_ptr<TransferWorker> worker;
};

std::vector<int> v(std::initializer_list<int> l) { return std::vector<int>(l); }

// The source's streaming rule: `allowance` misses get cache slots, the rest stream.
MissPolicy streamPast(int allowance, int& copies) {
  return [allowance, &copies](const MissContext&) {
    if (copies >= allowance) return MissAction::kStream;
    ++copies;
    return MissAction::kCopy;
  };
}

std::vector<std::string> copiesOf(const std::string& expert, int slot) {
  const std::string e = "copy " + expert + "->" + std::to_string(slot);
  return {e, e, e};
}

}  // namespace

// 4 cache slots + 2 staging, 2 layers: share 2. Layer 1 holds 2 experts; layer 0's
// gate chooses 6: 2 get cache slots, 4 stream through staging slots 4 and 5.
TEST(OffloadStreaming, prefillStreamsInExecutionOrderThroughStaging) {
  Rig r(6, 2, 2, 8);
  ASSERT_EQ(r.worker->layerShare(), 2);
  ASSERT_NO_FATAL_FAILURE(r.computeLayer(1, r.worker->pushPrecise(1, v({6, 7}))));
  r.log.clear();

  int copies = 0;
  const ExecutionOrder order = r.worker->pushPrecise(0, v({0, 1, 2, 3, 4, 5}), streamPast(2, copies));
  ASSERT_EQ(order.size(), size_t(6));
  for (int i = 0; i < 2; ++i) ASSERT_EQ(order[i].residency, Residency::kNotStarted);
  for (int i = 2; i < 6; ++i) {
    ASSERT_EQ(order[i].residency, Residency::kStreamed);
    ASSERT_EQ(order[i].expert, i);
    ASSERT_EQ(order[i].slot, 4 + i % 2);  // round robin over the staging slots
  }
  // Only the first two streamed experts are loading; 4 and 5 wait for a free staging slot.
  ASSERT_EQ(r.worker->queuedHigh(), size_t(4 * 3));
  ASSERT_EQ(r.worker->snapshot().find(0, 4), -1);

  r.worker->beginCompute(0, 0);
  r.worker->waitReady(0, 0);
  r.worker->beginCompute(0, 1);
  r.worker->waitReady(0, 1);
  r.worker->beginCompute(0, 2);
  r.worker->waitReady(0, 2);
  ASSERT_EQ(r.worker->snapshot().find(0, 4), -1);  // staging slot 4 still holds expert 2, being computed
  // Expert 3 starts: 2 is done, so its staging slot takes 4, which copies while 3 computes.
  r.worker->beginCompute(0, 3);
  ASSERT_EQ(r.worker->snapshot().find(0, 4), 4);
  ASSERT_EQ(r.worker->snapshot().find(0, 2), -1);
  r.log.clear();
  r.worker->release(0);

  // The whole layer, event by event, on a fresh rig.
  Rig s(6, 2, 2, 8);
  ASSERT_NO_FATAL_FAILURE(s.computeLayer(1, s.worker->pushPrecise(1, v({6, 7}))));
  s.log.clear();
  copies = 0;
  ASSERT_NO_FATAL_FAILURE(
      s.computeLayer(0, s.worker->pushPrecise(0, v({0, 1, 2, 3, 4, 5}), streamPast(2, copies))));
  std::vector<std::string> expected;
  auto add = [&](const std::vector<std::string>& e) { expected.insert(expected.end(), e.begin(), e.end()); };
  // reserve() hands out the EMPTY slots 2 and 3 to experts 0 and 1.
  add(copiesOf("0.0", 2));
  add({"compute 0.0"});
  add(copiesOf("0.1", 3));
  add({"compute 0.1"});
  add(copiesOf("0.2", 4));
  add({"compute 0.2"});
  add(copiesOf("0.3", 5));  // queued at pushPrecise, behind 2
  add({"compute 0.3"});
  add(copiesOf("0.4", 4));  // staged when 3 began, so it copies while 3 computes
  add({"compute 0.4"});
  add(copiesOf("0.5", 5));
  add({"compute 0.5"});
  ASSERT_EQ(s.log, expected);
  // Every expert crossed exactly once (layer 1's two before); layer 1's experts were not evicted.
  ASSERT_EQ(s.metrics.snapshot().bytes_h2d, uint64_t((2 + 6) * FakeSource::kSum));
  ASSERT_EQ(s.metrics.snapshot().streamed, uint64_t(4));
  ASSERT_TRUE(s.worker->snapshot().find(1, 6) >= 0 && s.worker->snapshot().find(1, 7) >= 0);
  ASSERT_TRUE(s.worker->snapshot().find(0, 0) >= 0 &&
              s.worker->snapshot().find(0, 1) >= 0);  // its share stays cached
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(s.worker->snapshot().at(s.worker->snapshot().stagingSlot(i)).state, SlotState::kEmpty);
  ASSERT_EQ(s.worker->snapshot().evictions(), uint64_t(0));
}

// Without streaming the same layer evicts the other layer's experts (LRU thrash)
// and the cache cannot hold it all: the rest falls back to host memory.
TEST(OffloadStreaming, withoutStagingTheLayerThrashes) {
  Rig r(6, 0, 2, 8);
  ASSERT_NO_FATAL_FAILURE(r.computeLayer(1, r.worker->pushPrecise(1, v({6, 7}))));
  const ExecutionOrder order = r.worker->pushPrecise(0, v({0, 1, 2, 3, 4, 5, 6, 7}));
  int unavailable = 0;
  for (const auto& o : order) unavailable += o.residency == Residency::kUnavailable;
  ASSERT_EQ(unavailable, 2);
  ASSERT_EQ(r.worker->snapshot().find(1, 6), -1);  // evicted though layer 1 comes next
  ASSERT_EQ(r.worker->snapshot().find(1, 7), -1);
  ASSERT_NO_FATAL_FAILURE(r.computeLayer(0, order));
}

// No reordering: streamed experts interleave with cached ones in gate order, and
// still take staging slots in execution order with nothing overwritten early.
TEST(OffloadStreaming, streamingFollowsGateOrderWithoutReordering) {
  Rig r(4, 2, 2, 8, TransferOptions{true, true, false});
  ASSERT_NO_FATAL_FAILURE(r.computeLayer(0, r.worker->pushPrecise(0, v({3}))));  // 3 cached in a regular slot
  r.log.clear();
  int copies = 0;
  const ExecutionOrder order = r.worker->pushPrecise(0, v({5, 3, 6, 7}), streamPast(0, copies));
  ASSERT_EQ(order[0].residency, Residency::kStreamed);
  ASSERT_EQ(order[1].residency, Residency::kReady);
  ASSERT_EQ(order[1].expert, 3);
  ASSERT_EQ(order[0].slot, 2);
  ASSERT_EQ(order[2].slot, 3);
  ASSERT_EQ(order[3].slot, 2);
  ASSERT_NO_FATAL_FAILURE(
      r.computeLayer(0, order));  // computeLayer verifies each slot's bytes at compute time
  ASSERT_EQ(r.metrics.snapshot().streamed, uint64_t(3));
  ASSERT_EQ(r.metrics.snapshot().bytes_h2d, uint64_t(4 * FakeSource::kSum));
}

TEST(OffloadStreaming, heldSlotsAreNeverEvicted) {
  Rig r(4, 0, 4, 8);
  ASSERT_TRUE(r.worker->hold(0, 1));
  ASSERT_TRUE(r.worker->hold(2, 5));
  r.worker->waitIdle();
  ASSERT_EQ(r.worker->snapshot().heldCount(), 2);
  // Far more experts than the two free slots, across every layer, predicted and precise.
  for (int layer = 0; layer < 4; ++layer) {
    r.worker->pushPredicted(layer, v({0, 2, 3, 4}));
    ASSERT_NO_FATAL_FAILURE(r.computeLayer(layer, r.worker->pushPrecise(layer, v({6, 7}))));
  }
  ASSERT_TRUE(r.worker->snapshot().find(0, 1) >= 0 &&
              r.worker->snapshot().at(r.worker->snapshot().find(0, 1)).held);
  ASSERT_TRUE(r.worker->snapshot().find(2, 5) >= 0 &&
              r.worker->snapshot().at(r.worker->snapshot().find(2, 5)).held);
  ASSERT_TRUE(r.holds(r.worker->snapshot().find(0, 1), 0, 1));
  ASSERT_TRUE(r.worker->snapshot().evictions() > 0);
  // Full of held slots, a new expert cannot get one; released, it can.
  ASSERT_TRUE(r.worker->hold(1, 0));
  ASSERT_TRUE(r.worker->hold(1, 2));
  r.worker->waitIdle();
  ASSERT_TRUE(!r.worker->hold(3, 3));
  r.worker->releaseHolds();
  ASSERT_TRUE(r.worker->hold(3, 3));
}

// Each miss is decided by the policy, which sees exactly the bytes queued ahead of it.
TEST(OffloadStreaming, missPolicySeesQueuedBytesAndHostGoesFirst) {
  Rig r(8, 0, 2, 8);
  std::vector<MissContext> seen;
  const ExecutionOrder order = r.worker->pushPrecise(0, v({4, 5, 6}), [&](const MissContext& m) {
    seen.push_back(m);
    return m.expert == 5 ? MissAction::kHost : MissAction::kCopy;
  });
  ASSERT_EQ(seen.size(), size_t(3));
  ASSERT_EQ(seen[0].queued_high_bytes, size_t(0));
  ASSERT_EQ(seen[1].queued_high_bytes, FakeSource::kSum);  // expert 4's three chunks
  ASSERT_EQ(seen[2].queued_high_bytes, FakeSource::kSum);  // 5 went to the host: nothing added
  ASSERT_EQ(seen[2].misses_before, 2);
  ASSERT_EQ(order[0].expert, 5);  // nothing to wait for: computed first
  ASSERT_EQ(order[0].residency, Residency::kHost);
  ASSERT_EQ(order[0].slot, -1);
  ASSERT_EQ(r.worker->snapshot().find(0, 5), -1);
  ASSERT_NO_FATAL_FAILURE(r.computeLayer(0, order));
  ASSERT_EQ(r.metrics.snapshot().bytes_h2d, uint64_t(2 * FakeSource::kSum));
  ASSERT_EQ(r.metrics.snapshot().misses, uint64_t(3));
}

TEST(OffloadStreaming, stagingSlotsAreOutsideReserve) {
  SlotTable c(3, 1, ExpertBytesSource::kChunks);
  c.setStagingCount(1);
  ASSERT_EQ(c.stagingSlot(0), 2);
  ASSERT_TRUE(c.reserve(0, 0, false) >= 0);
  ASSERT_TRUE(c.reserve(0, 1, false) >= 0);
  ASSERT_EQ(c.reserve(0, 2, false), -1);  // two LOADING slots, staging not handed out
  c.loadStaging(2, 0, 2);
  ASSERT_EQ(c.find(0, 2), 2);
  ASSERT_THROW(c.loadStaging(2, 0, 3), std::logic_error);
  c.free(2);
  ASSERT_EQ(c.at(2).state, SlotState::kEmpty);
  ASSERT_TRUE(c.at(2).staging);  // stays a staging slot
}
