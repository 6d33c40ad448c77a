// Offload scheduling (ExpertCache + TransferWorker + HostCopyEngine), all in
// MANUAL mode but one: outcomes are checked by event order and byte counts,
// never by time.
#include <QtTest>
#include <cmath>
#include <cstring>
#include <functional>
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

// memcpy plus a hook that runs (once) while a copy is "in progress", to push
// work exactly as another thread could while the worker copies.
class HookedCopyEngine final : public CopyEngine {
 public:
  explicit HookedCopyEngine(double bw = 0.0) : inner_(bw) {}
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
  HostCopyEngine inner_;
};

struct Rig {
  Rig(int n_slots, int layers, int experts, TransferOptions opt = {},
      TransferMode mode = TransferMode::kManual)
      : source(layers, experts),
        cache(n_slots, FakeSource::kExpertBytes, layers),
        worker(cache, source, copier, metrics, mode, opt) {}
  FakeSource source;
  ExpertCache cache;
  HookedCopyEngine copier;
  OffloadMetrics metrics;
  TransferWorker worker;

  std::vector<StepResult> drain() {
    std::vector<StepResult> out;
    for (StepResult r = worker.step(); r.did_work; r = worker.step()) out.push_back(r);
    return out;
  }
  // The expert's chunks in its slot equal the source's.
  bool chunksMatch(int layer, int expert) const {
    int slot = cache.find(layer, expert);
    if (slot < 0 || cache.info(slot).state != SlotState::kReady) return false;
    for (int c = 0; c < ExpertBytesSource::kChunks; ++c) {
      size_t off = source.chunkOffset(c);
      if (std::memcmp(cache.slotData(slot) + off, source.expertData(layer, expert) + off,
                      source.chunkBytes(c)))
        return false;
    }
    return true;
  }
};

std::vector<int> v(std::initializer_list<int> l) { return std::vector<int>(l); }

}  // namespace

class TestOffloadScheduling : public QObject {
  Q_OBJECT

 private slots:
  void highBeforeLow() {
    Rig r(8, 4, 8);
    r.worker.pushPredicted(1, v({0, 1}));
    auto e = v({3});
    r.worker.pushPrecise(2, e);
    QCOMPARE(r.worker.queuedLow(), size_t(6));
    QCOMPARE(r.worker.queuedHigh(), size_t(3));
    auto steps = r.drain();
    QCOMPARE(steps.size(), size_t(9));
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(steps[i].priority, Priority::kHigh);
      QCOMPARE(steps[i].task.layer, 2);
      QCOMPARE(steps[i].task.expert, 3);
      QCOMPARE(steps[i].task.chunk, i);
    }
    QVERIFY(steps[2].expert_ready);
    for (int i = 3; i < 9; ++i) {
      QCOMPARE(steps[i].priority, Priority::kLow);
      QCOMPARE(steps[i].task.layer, 1);
      QCOMPARE(steps[i].task.expert, (i - 3) / 3);
      QCOMPARE(steps[i].task.chunk, (i - 3) % 3);
    }
  }

  void highPushedDuringLowChunkWaitsForAtMostThatChunk() {
    Rig r(8, 4, 8);
    r.worker.pushPredicted(1, v({0, 1, 2}));
    bool pushed = false;
    r.copier.hook_ = [&] {
      auto e = v({5});
      r.worker.pushPrecise(2, e);
      pushed = true;
    };
    StepResult first = r.worker.step();  // the push arrives while this low chunk is copied
    QVERIFY(pushed);
    QCOMPARE(first.priority, Priority::kLow);
    QCOMPARE(first.task.layer, 1);
    QCOMPARE(first.bytes, FakeSource::kChunkBytes[0]);  // the started chunk completed
    QCOMPARE(r.cache.info(r.cache.find(1, 0)).chunks_done, 1);
    auto steps = r.drain();
    QCOMPARE(steps.size(), size_t(3 + 8));
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(steps[i].priority, Priority::kHigh);
      QCOMPARE(steps[i].task.expert, 5);
    }
    QVERIFY(r.chunksMatch(2, 5));
    for (int e = 0; e < 3; ++e) QVERIFY(r.chunksMatch(1, e));
  }

  void earlyPreemptionDropsExactlyThisLayersLowChunks() {
    Rig r(16, 4, 8);
    r.worker.pushPredicted(1, v({0, 1, 2}));
    r.worker.pushPredicted(2, v({0, 1}));
    QCOMPARE(r.worker.queuedLow(1), size_t(9));
    QCOMPARE(r.worker.queuedLow(2), size_t(6));
    StepResult s = r.worker.step();  // layer 1 expert 0 chunk 0
    QCOMPARE(s.task.expert, 0);
    auto chosen = v({0, 3});
    r.worker.pushPrecise(1, chosen);
    OffloadSnapshot m = r.metrics.snapshot();
    QCOMPARE(m.chunks_dropped, uint64_t(6));   // experts 1 and 2: 3 chunks each
    QCOMPARE(m.chunks_promoted, uint64_t(2));  // expert 0: chunks 1, 2 now high
    QCOMPARE(r.worker.queuedLow(1), size_t(0));
    QCOMPARE(r.worker.queuedLow(2), size_t(6));  // other layers untouched
    QCOMPARE(r.worker.queuedHigh(), size_t(2 + 3));
    QCOMPARE(r.cache.find(1, 1), -1);  // dropped experts' slots freed, not left LOADING
    QCOMPARE(r.cache.find(1, 2), -1);
    auto steps = r.drain();
    QCOMPARE(steps.size(), size_t(5 + 6));
    QCOMPARE(steps[0].task.expert, 0);
    QCOMPARE(steps[0].task.chunk, 1);
    QCOMPARE(steps[1].task.chunk, 2);
    for (int i = 2; i < 5; ++i) QCOMPARE(steps[i].task.expert, 3);
    for (int i = 5; i < 11; ++i) QCOMPARE(steps[i].task.layer, 2);
    QCOMPARE(r.cache.countState(SlotState::kLoading), 0);
    QVERIFY(r.chunksMatch(1, 0));
    QVERIFY(r.chunksMatch(1, 3));
    QVERIFY(r.chunksMatch(2, 0));
    QVERIFY(r.chunksMatch(2, 1));
    QCOMPARE(r.metrics.snapshot().bytes_h2d,
             uint64_t(4 * r.source.chunkSum()));  // experts (1,0) (1,3) (2,0) (2,1)
  }

  void preemptedExpertInProgressIsFreedAfterItsChunk() {
    Rig r(8, 4, 8);
    r.worker.pushPredicted(1, v({1}));
    r.copier.hook_ = [&] {
      auto chosen = v({0});
      r.worker.pushPrecise(1, chosen);  // expert 1 not chosen: its queued chunks 1, 2 dropped
    };
    StepResult s = r.worker.step();
    QVERIFY(s.discarded);
    QCOMPARE(r.metrics.snapshot().chunks_dropped, uint64_t(2));
    QCOMPARE(r.cache.find(1, 1), -1);
    auto steps = r.drain();
    QCOMPARE(steps.size(), size_t(3));
    QVERIFY(r.chunksMatch(1, 0));
    QCOMPARE(r.cache.countState(SlotState::kLoading), 0);
  }

  void withoutEarlyPreemptionNothingIsDropped() {
    TransferOptions opt;
    opt.early_preemption = false;
    Rig r(8, 4, 8, opt);
    r.worker.pushPredicted(1, v({0, 1}));
    auto chosen = v({2});
    r.worker.pushPrecise(1, chosen);
    QCOMPARE(r.worker.queuedLow(1), size_t(6));
    QCOMPARE(r.worker.queuedHigh(), size_t(3));
    QCOMPARE(r.metrics.snapshot().chunks_dropped, uint64_t(0));
    r.drain();
    QCOMPARE(r.cache.countState(SlotState::kReady), 3);
  }

  void reorderingReadyThenInFlightThenNotStarted() {
    for (bool reorder : {true, false}) {
      TransferOptions opt;
      opt.reordering = reorder;
      Rig r(8, 4, 8, opt);
      r.worker.pushPredicted(1, v({0}));
      r.drain();  // expert 0 READY
      r.worker.pushPredicted(1, v({5}));
      r.worker.step();                    // expert 5: 1 chunk
      r.worker.pushPredicted(1, v({6}));  // expert 6: queued, not started; expert 7 absent
      QCOMPARE(r.cache.info(r.cache.find(1, 5)).chunks_done, 1);
      auto chosen = v({7, 6, 5, 0});
      ExecutionOrder order = r.worker.pushPrecise(1, chosen);
      QCOMPARE(order.size(), size_t(4));
      if (reorder) {
        QCOMPARE(order[0].expert, 0);
        QCOMPARE(order[0].residency, Residency::kReady);
        QCOMPARE(order[1].expert, 5);
        QCOMPARE(order[1].residency, Residency::kInFlight);
        QCOMPARE(order[1].chunks_done, 1);
        QCOMPARE(order[2].residency, Residency::kNotStarted);
        QCOMPARE(order[3].residency, Residency::kNotStarted);
        QCOMPARE(order[2].expert, 7);  // stable among equals: gate order
        QCOMPARE(order[3].expert, 6);
      } else {
        for (size_t i = 0; i < 4; ++i) QCOMPARE(order[i].expert, chosen[i]);
      }
      OffloadSnapshot m = r.metrics.snapshot();
      QCOMPARE(m.expert_uses, uint64_t(4));
      QCOMPARE(m.ready_hits, uint64_t(1));
      QCOMPARE(m.prefetch_hits, uint64_t(1));
      QCOMPARE(m.inflight_hits, uint64_t(2));
      QCOMPARE(m.misses, uint64_t(1));
      for (const OrderedExpert& o : order) {
        r.worker.waitReady(1, o.expert);
        QVERIFY(r.chunksMatch(1, o.expert));
      }
      r.worker.release(1);
    }
  }

  void inFlightOrderedByChunksDone() {
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
    QCOMPARE(r.cache.info(r.cache.find(1, 1)).chunks_done, 1);
    QCOMPARE(r.cache.info(r.cache.find(1, 2)).chunks_done, 2);
    auto chosen = v({0, 1, 2});
    ExecutionOrder order = r.worker.pushPrecise(1, chosen);
    QCOMPARE(order[0].expert, 2);  // in flight, 2 chunks
    QCOMPARE(order[0].residency, Residency::kInFlight);
    QCOMPARE(order[1].expert, 1);  // in flight, 1 chunk
    QCOMPARE(order[1].residency, Residency::kInFlight);
    QCOMPARE(order[2].expert, 0);  // not started
    QCOMPARE(order[2].residency, Residency::kNotStarted);
    for (int e : chosen) r.worker.waitReady(1, e);
    for (int e : chosen) QVERIFY(r.chunksMatch(1, e));
  }

  void loadingAndComputingSlotsAreNeverEvicted() {
    Rig r(4, 2, 8);  // share per layer = 2
    r.worker.pushPredicted(0, v({0, 1}));
    r.drain();
    r.worker.pushPredicted(1, v({0, 1}));  // LOADING, not stepped
    QCOMPARE(r.cache.countState(SlotState::kReady), 2);
    QCOMPARE(r.cache.countState(SlotState::kLoading), 2);
    auto chosen = v({0, 1});
    r.worker.pushPrecise(0, chosen);  // layer 0 computing, its slots pinned
    r.worker.pushPredicted(1, v({2, 3}));
    QCOMPARE(r.metrics.snapshot().prefetch_skipped, uint64_t(2));
    QCOMPARE(r.cache.evictions(), uint64_t(0));
    QCOMPARE(r.cache.find(1, 2), -1);
    QCOMPARE(r.cache.find(1, 3), -1);
    QVERIFY(r.chunksMatch(0, 0));
    QVERIFY(r.chunksMatch(0, 1));
    QCOMPARE(r.cache.info(r.cache.find(1, 0)).state, SlotState::kLoading);
    QCOMPARE(r.cache.info(r.cache.find(1, 1)).state, SlotState::kLoading);
    QCOMPARE(r.worker.queuedLow(), size_t(6));
    // Computing layer alone (no pins) also protects.
    r.worker.release(0);
    r.cache.setComputingLayer(0);
    r.worker.pushPredicted(1, v({2}));
    QCOMPARE(r.cache.find(1, 2), -1);
    QCOMPARE(r.cache.evictions(), uint64_t(0));
    // Unprotected: the least-recently-used layer-0 slot goes (layer 1 holds its share but
    // has nothing evictable: all LOADING).
    r.cache.setComputingLayer(-1);
    r.worker.pushPredicted(1, v({2}));
    QCOMPARE(r.cache.evictions(), uint64_t(1));
    QCOMPARE(r.cache.find(0, 0), -1);
    QVERIFY(r.cache.find(0, 1) >= 0);
    QVERIFY(r.cache.find(1, 2) >= 0);
    r.drain();
    QCOMPARE(r.cache.countState(SlotState::kLoading), 0);
    for (int e : {0, 1, 2}) QVERIFY(r.chunksMatch(1, e));
  }

  void perLayerLruPrefersOwnLayerAtShare() {
    Rig r(4, 2, 8);  // share 2
    r.worker.pushPredicted(0, v({0}));
    r.worker.pushPredicted(1, v({0, 1}));
    r.worker.pushPredicted(0, v({1}));
    r.drain();
    // Layer 1 holds 2 = its share: its own LRU (1,0) goes although (0,0) is older.
    r.worker.pushPredicted(1, v({2}));
    QCOMPARE(r.cache.find(1, 0), -1);
    QVERIFY(r.cache.find(0, 0) >= 0);
    r.drain();
    // Touch on use: (0,0) used now, so (0,1) is layer 0's LRU when layer 0 evicts.
    auto chosen = v({0});
    r.worker.pushPrecise(0, chosen);
    r.worker.release(0);
    r.worker.pushPredicted(0, v({2}));
    QCOMPARE(r.cache.find(0, 1), -1);
    QVERIFY(r.cache.find(0, 0) >= 0);
  }

  void bytesCopiedEqualChunkSums() {
    Rig r(8, 4, 8);
    r.worker.pushPredicted(0, v({0, 1, 2}));
    auto chosen = v({3, 4});
    r.worker.pushPrecise(3, chosen);
    auto steps = r.drain();
    QCOMPARE(steps.size(), size_t(15));
    uint64_t sum = 0;
    for (const StepResult& s : steps) {
      QCOMPARE(s.bytes, r.source.chunkBytes(s.task.chunk));
      sum += s.bytes;
    }
    QCOMPARE(sum, uint64_t(5 * r.source.chunkSum()));
    QCOMPARE(r.copier.bytesCopied(), sum);
    OffloadSnapshot m = r.metrics.snapshot();
    QCOMPARE(m.bytes_h2d, sum);
    QCOMPARE(m.chunks_copied, uint64_t(15));
    for (int e : {0, 1, 2}) QVERIFY(r.chunksMatch(0, e));
    for (int e : {3, 4}) QVERIFY(r.chunksMatch(3, e));
  }

  void withoutChunkingWholeExpertsAreCopied() {
    TransferOptions opt;
    opt.chunking = false;
    Rig r(8, 4, 8, opt);
    r.worker.pushPredicted(1, v({0, 1}));
    QCOMPARE(r.worker.queuedLow(), size_t(2));
    StepResult s = r.worker.step();
    QCOMPARE(s.task.chunk, -1);
    QCOMPARE(s.bytes, FakeSource::kExpertBytes);
    QVERIFY(s.expert_ready);
    int slot = r.cache.find(1, 0);
    QCOMPARE(std::memcmp(r.cache.slotData(slot), r.source.expertData(1, 0), FakeSource::kExpertBytes), 0);
    // Preemption drops whole-expert tasks too, and leaves nothing LOADING.
    auto chosen = v({2});
    r.worker.pushPrecise(1, chosen);
    QCOMPARE(r.metrics.snapshot().chunks_dropped, uint64_t(1));
    QCOMPARE(r.cache.find(1, 1), -1);
    r.drain();
    QVERIFY(r.chunksMatch(1, 2));
    QCOMPARE(r.copier.bytesCopied(), uint64_t(2 * FakeSource::kExpertBytes));
    QCOMPARE(r.metrics.snapshot().chunks_copied, uint64_t(6));
  }

  void simulatedLinkVirtualTime() {
    HostCopyEngine link(1.0e6);  // 1 MB/s
    std::vector<uint8_t> a(5000, 7), b(5000, 0);
    link.copy(b.data(), a.data(), 1000);
    link.copy(b.data(), a.data(), 3000);
    link.copy(b.data(), a.data(), 500);
    QCOMPARE(link.bytesCopied(), uint64_t(4500));
    QCOMPARE(link.copies(), uint64_t(3));
    QVERIFY(std::fabs(link.simulatedSeconds() - 4500 / 1.0e6) < 1e-12);
    QCOMPARE(b[4499], uint8_t(0));
    QCOMPARE(b[2999], uint8_t(7));
    HostCopyEngine plain;
    plain.copy(b.data(), a.data(), 10);
    QCOMPARE(plain.simulatedSeconds(), 0.0);

    // Through the worker: the link time of a layer's misses.
    Rig r(8, 4, 8);
    HostCopyEngine timed(2.0e6);
    TransferWorker w(r.cache, r.source, timed, r.metrics, TransferMode::kManual);
    auto chosen = v({0, 1});
    w.pushPrecise(2, chosen);
    while (w.step().did_work) {
    }
    QVERIFY(std::fabs(timed.simulatedSeconds() - 2.0 * r.source.chunkSum() / 2.0e6) < 1e-12);
  }

  void waitReadyManualStepsAndReports() {
    Rig r(8, 4, 8);
    auto chosen = v({1});
    r.worker.pushPrecise(0, chosen);
    QVERIFY(r.worker.waitReady(0, 1));   // had to copy
    QVERIFY(!r.worker.waitReady(0, 1));  // already READY
    QCOMPARE(r.metrics.snapshot().waits, uint64_t(1));
    QVERIFY_THROWS_EXCEPTION(std::logic_error, r.worker.waitReady(0, 7));
  }

  void threadedFinalState() {
    const int layers = 4, experts = 4;
    Rig r(layers * experts, layers, experts, {}, TransferMode::kThreaded);
    for (int l = 0; l < layers; ++l) r.worker.pushPredicted(l, v({0, 1}));
    for (int l = 0; l < layers; ++l) {
      if (l + 2 < layers) r.worker.pushPredicted(l + 2, v({2, 3}));
      auto chosen = v({3, 1, 2});
      ExecutionOrder order = r.worker.pushPrecise(l, chosen);
      QCOMPARE(order.size(), size_t(3));
      for (const OrderedExpert& o : order) {
        r.worker.waitReady(l, o.expert);
        QVERIFY(r.chunksMatch(l, o.expert));
      }
      r.worker.release(l);
    }
    r.worker.waitIdle();
    QCOMPARE(r.cache.countState(SlotState::kLoading), 0);
    int ready = 0;
    for (int l = 0; l < layers; ++l)
      for (int e = 0; e < experts; ++e)
        if (r.cache.find(l, e) >= 0) {
          QVERIFY(r.chunksMatch(l, e));
          ++ready;
        }
    QCOMPARE(ready, r.cache.countState(SlotState::kReady));
    QVERIFY(ready >= layers * 3);
    QCOMPARE(r.metrics.snapshot().expert_uses, uint64_t(layers * 3));
  }
};

QTEST_APPLESS_MAIN(TestOffloadScheduling)
#include "test_offload_scheduling.moc"
