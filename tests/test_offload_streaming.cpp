// Prefill streaming through staging slots, static holds and per-miss decisions
// (TransferWorker + ExpertCache in MANUAL mode): checked by event order, slot
// contents at compute time and byte counts, never by time.
#include <QtTest>
#include <cstring>
#include <string>
#include <vector>

#include "fake_expert_bytes.h"
#include "offload/copy_engine.h"
#include "offload/expert_bytes_source.h"
#include "offload/expert_cache.h"
#include "offload/offload_metrics.h"
#include "offload/transfer_worker.h"

using namespace moe;

namespace {

using FakeSource = test::FakeExpertBytes;

// memcpy that logs "copy L.E->slot" for each chunk into a shared event list.
class LoggingCopyEngine final : public CopyEngine {
 public:
  LoggingCopyEngine(const FakeSource& src, std::vector<std::string>& log) : src_(src), log_(log) {}
  void setCache(const ExpertCache* c) { cache_ = c; }
  void copy(void* dst, const void* src, size_t n) override {
    const size_t slot = size_t(static_cast<uint8_t*>(dst) - cache_->slotData(0)) / cache_->slotBytes();
    log_.push_back("copy " + src_.whose(src) + "->" + std::to_string(slot));
    inner_.copy(dst, src, n);
  }
  uint64_t bytesCopied() const override { return inner_.bytesCopied(); }
  uint64_t copies() const override { return inner_.copies(); }
  double simulatedSeconds() const override { return 0; }

 private:
  const FakeSource& src_;
  std::vector<std::string>& log_;
  const ExpertCache* cache_ = nullptr;
  HostCopyEngine inner_;
};

struct Rig {
  Rig(int n_slots, int staging, int layers, int experts, TransferOptions opt = {})
      : source(layers, experts), cache(n_slots, FakeSource::kExpertBytes, layers), copier(source, log) {
    cache.setStagingCount(staging);
    copier.setCache(&cache);
    worker = std::make_unique<TransferWorker>(cache, source, copier, metrics, TransferMode::kManual, opt);
  }
  bool holds(int slot, int layer, int expert) const {
    for (int c = 0; c < ExpertBytesSource::kChunks; ++c)
      if (std::memcmp(cache.slotData(slot) + source.chunkOffset(c),
                      source.expertData(layer, expert) + source.chunkOffset(c), source.chunkBytes(c)))
        return false;
    return true;
  }
  // What the MoE block does: per expert in order, beginCompute, wait, "compute"
  // (checks the slot holds exactly this expert's bytes), then release.
  void computeLayer(int layer, const ExecutionOrder& order) {
    for (const OrderedExpert& o : order) {
      worker->beginCompute(layer, o.expert);
      if (o.residency == Residency::kHost || o.residency == Residency::kUnavailable) {
        log.push_back("host " + std::to_string(layer) + "." + std::to_string(o.expert));
        continue;
      }
      worker->waitReady(layer, o.expert);
      QVERIFY(holds(o.slot, layer, o.expert));
      log.push_back("compute " + std::to_string(layer) + "." + std::to_string(o.expert));
    }
    worker->release(layer);
  }
  std::vector<std::string> log;
  FakeSource source;
  ExpertCache cache;
  LoggingCopyEngine copier;
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

class TestOffloadStreaming : public QObject {
  Q_OBJECT

 private slots:
  // 4 cache slots + 2 staging, 2 layers: share 2. Layer 1 holds 2 experts; layer 0's
  // gate chooses 6: 2 get cache slots, 4 stream through staging slots 4 and 5.
  void prefillStreamsInExecutionOrderThroughStaging() {
    Rig r(6, 2, 2, 8);
    QCOMPARE(r.cache.layerShare(), 2);
    r.computeLayer(1, r.worker->pushPrecise(1, v({6, 7})));
    r.log.clear();

    int copies = 0;
    const ExecutionOrder order = r.worker->pushPrecise(0, v({0, 1, 2, 3, 4, 5}), streamPast(2, copies));
    QCOMPARE(order.size(), size_t(6));
    for (int i = 0; i < 2; ++i) QCOMPARE(order[i].residency, Residency::kNotStarted);
    for (int i = 2; i < 6; ++i) {
      QCOMPARE(order[i].residency, Residency::kStreamed);
      QCOMPARE(order[i].expert, i);
      QCOMPARE(order[i].slot, 4 + i % 2);  // round robin over the staging slots
    }
    // Only the first two streamed experts are loading; 4 and 5 wait for a free staging slot.
    QCOMPARE(r.worker->queuedHigh(), size_t(4 * 3));
    QCOMPARE(r.cache.find(0, 4), -1);

    r.worker->beginCompute(0, 0);
    r.worker->waitReady(0, 0);
    r.worker->beginCompute(0, 1);
    r.worker->waitReady(0, 1);
    r.worker->beginCompute(0, 2);
    r.worker->waitReady(0, 2);
    QCOMPARE(r.cache.find(0, 4), -1);  // staging slot 4 still holds expert 2, being computed
    // Expert 3 starts: 2 is done, so its staging slot takes 4, which copies while 3 computes.
    r.worker->beginCompute(0, 3);
    QCOMPARE(r.cache.find(0, 4), 4);
    QCOMPARE(r.cache.find(0, 2), -1);
    r.log.clear();
    r.worker->release(0);

    // The whole layer, event by event, on a fresh rig.
    Rig s(6, 2, 2, 8);
    s.computeLayer(1, s.worker->pushPrecise(1, v({6, 7})));
    s.log.clear();
    copies = 0;
    s.computeLayer(0, s.worker->pushPrecise(0, v({0, 1, 2, 3, 4, 5}), streamPast(2, copies)));
    std::vector<std::string> expected;
    auto add = [&](const std::vector<std::string>& e) {
      expected.insert(expected.end(), e.begin(), e.end());
    };
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
    QCOMPARE(s.log, expected);
    // Every expert crossed exactly once (layer 1's two before); layer 1's experts were not evicted.
    QCOMPARE(s.metrics.snapshot().bytes_h2d, uint64_t((2 + 6) * FakeSource::kSum));
    QCOMPARE(s.metrics.snapshot().streamed, uint64_t(4));
    QVERIFY(s.cache.find(1, 6) >= 0 && s.cache.find(1, 7) >= 0);
    QVERIFY(s.cache.find(0, 0) >= 0 && s.cache.find(0, 1) >= 0);  // its share stays cached
    for (int i = 0; i < 2; ++i) QCOMPARE(s.cache.info(s.cache.stagingSlot(i)).state, SlotState::kEmpty);
    QCOMPARE(s.cache.evictions(), uint64_t(0));
  }

  // Without streaming the same layer evicts the other layer's experts (LRU thrash)
  // and the cache cannot hold it all: the rest falls back to host memory.
  void withoutStagingTheLayerThrashes() {
    Rig r(6, 0, 2, 8);
    r.computeLayer(1, r.worker->pushPrecise(1, v({6, 7})));
    const ExecutionOrder order = r.worker->pushPrecise(0, v({0, 1, 2, 3, 4, 5, 6, 7}));
    int unavailable = 0;
    for (const auto& o : order) unavailable += o.residency == Residency::kUnavailable;
    QCOMPARE(unavailable, 2);
    QCOMPARE(r.cache.find(1, 6), -1);  // evicted though layer 1 comes next
    QCOMPARE(r.cache.find(1, 7), -1);
    r.computeLayer(0, order);
  }

  // No reordering: streamed experts interleave with cached ones in gate order, and
  // still take staging slots in execution order with nothing overwritten early.
  void streamingFollowsGateOrderWithoutReordering() {
    Rig r(4, 2, 2, 8, TransferOptions{true, true, false});
    r.computeLayer(0, r.worker->pushPrecise(0, v({3})));  // 3 cached in a regular slot
    r.log.clear();
    int copies = 0;
    const ExecutionOrder order = r.worker->pushPrecise(0, v({5, 3, 6, 7}), streamPast(0, copies));
    QCOMPARE(order[0].residency, Residency::kStreamed);
    QCOMPARE(order[1].residency, Residency::kReady);
    QCOMPARE(order[1].expert, 3);
    QCOMPARE(order[0].slot, 2);
    QCOMPARE(order[2].slot, 3);
    QCOMPARE(order[3].slot, 2);
    r.computeLayer(0, order);  // computeLayer verifies each slot's bytes at compute time
    QCOMPARE(r.metrics.snapshot().streamed, uint64_t(3));
    QCOMPARE(r.metrics.snapshot().bytes_h2d, uint64_t(4 * FakeSource::kSum));
  }

  void heldSlotsAreNeverEvicted() {
    Rig r(4, 0, 4, 8);
    QVERIFY(r.worker->hold(0, 1));
    QVERIFY(r.worker->hold(2, 5));
    r.worker->waitIdle();
    QCOMPARE(r.cache.heldCount(), 2);
    // Far more experts than the two free slots, across every layer, predicted and precise.
    for (int layer = 0; layer < 4; ++layer) {
      r.worker->pushPredicted(layer, v({0, 2, 3, 4}));
      r.computeLayer(layer, r.worker->pushPrecise(layer, v({6, 7})));
    }
    QVERIFY(r.cache.find(0, 1) >= 0 && r.cache.info(r.cache.find(0, 1)).held);
    QVERIFY(r.cache.find(2, 5) >= 0 && r.cache.info(r.cache.find(2, 5)).held);
    QVERIFY(r.holds(r.cache.find(0, 1), 0, 1));
    QVERIFY(r.cache.evictions() > 0);
    // Full of held slots, a new expert cannot get one; released, it can.
    QVERIFY(r.worker->hold(1, 0));
    QVERIFY(r.worker->hold(1, 2));
    r.worker->waitIdle();
    QVERIFY(!r.worker->hold(3, 3));
    r.worker->releaseHolds();
    QVERIFY(r.worker->hold(3, 3));
  }

  // Each miss is decided by the policy, which sees exactly the bytes queued ahead of it.
  void missPolicySeesQueuedBytesAndHostGoesFirst() {
    Rig r(8, 0, 2, 8);
    std::vector<MissContext> seen;
    const ExecutionOrder order = r.worker->pushPrecise(0, v({4, 5, 6}), [&](const MissContext& m) {
      seen.push_back(m);
      return m.expert == 5 ? MissAction::kHost : MissAction::kCopy;
    });
    QCOMPARE(seen.size(), size_t(3));
    QCOMPARE(seen[0].queued_high_bytes, size_t(0));
    QCOMPARE(seen[1].queued_high_bytes, FakeSource::kSum);  // expert 4's three chunks
    QCOMPARE(seen[2].queued_high_bytes, FakeSource::kSum);  // 5 went to the host: nothing added
    QCOMPARE(seen[2].misses_before, 2);
    QCOMPARE(order[0].expert, 5);  // nothing to wait for: computed first
    QCOMPARE(order[0].residency, Residency::kHost);
    QCOMPARE(order[0].slot, -1);
    QCOMPARE(r.cache.find(0, 5), -1);
    r.computeLayer(0, order);
    QCOMPARE(r.metrics.snapshot().bytes_h2d, uint64_t(2 * FakeSource::kSum));
    QCOMPARE(r.metrics.snapshot().misses, uint64_t(3));
  }

  void stagingSlotsAreOutsideReserve() {
    ExpertCache c(3, 256, 1);
    c.setStagingCount(1);
    QCOMPARE(c.stagingSlot(0), 2);
    QVERIFY(c.reserve(0, 0, false) >= 0);
    QVERIFY(c.reserve(0, 1, false) >= 0);
    QCOMPARE(c.reserve(0, 2, false), -1);  // two LOADING slots, staging not handed out
    c.loadStaging(2, 0, 2);
    QCOMPARE(c.find(0, 2), 2);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, c.loadStaging(2, 0, 3));
    c.free(2);
    QCOMPARE(c.info(2).state, SlotState::kEmpty);
    QVERIFY(c.info(2).staging);  // stays a staging slot
  }
};

QTEST_APPLESS_MAIN(TestOffloadStreaming)
#include "test_offload_streaming.moc"
