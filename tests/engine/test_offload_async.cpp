// The transfer worker over an asynchronous copy engine (AsyncHostCopyLink: the
// CPU stand-in for a GPU copy stream), in THREADED mode. The test holds the
// engine's copy thread and lets copies complete one by one, so every check is
// about what is queued on the "stream" and in what order, never about time:
// - the gate's chunks are issued back to back, with none complete;
// - a predicted (low) chunk goes on the stream only when it is empty, alone, so a
//   precise chunk waits behind at most one chunk;
// - the compute side's wait returns once an expert's copies are issued, and the
//   device waits for them (CopyWait) instead of the host waiting for READY;
// - a staging slot is reused only after its streamed expert's copy landed, and
//   the fence is marked before that overwrite;
// - a dropped prediction's slot is freed only when its chunk in flight lands;
// - predictions on their own thread: a waiting request is replaced by a newer one,
//   and a result that arrives after its target's gate is dropped;
// - a whole generation with asynchronous copies and device-side waits is
//   bit-identical to the synchronous CPU path, for every policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "offload/cached_expert_source.h"
#include "offload/copy_link.h"
#include "offload/host_expert_store.h"
#include "offload/offload_engine.h"
#include "offload/transfer_worker.h"
#include "support/async_host_copy_link.h"
#include "support/engine_fixture.h"
#include "support/fake_expert_bytes.h"
#include "support/offload_run.h"
#include "support/test_log.h"

using namespace moe;
using FakeSource = test::FakeExpertBytes;

namespace {

constexpr int kWaitMs = 10000;  // failure detection only: every wait ends as soon as its condition holds

// Polls `done` (every 2 ms) until it holds or `ms` have passed; whether it held.
// The check that follows (ASSERT_EQ) reports what was there when it did not.
template <class Pred>
bool waitUntil(Pred done, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::vector<int> v(std::initializer_list<int> l) { return std::vector<int>(l); }

struct Rig {
  Rig(int n_slots, int layers, int experts, int staging = 0)
      : source(layers, experts), slab(n_slots, FakeSource::kExpertBytes) {
    SlotTable table(n_slots, layers, ExpertBytesSource::kChunks);
    table.setStagingCount(staging);
    copier.hold();
    worker = std::make_unique<TransferWorker>(slab, std::move(table), source, copier, metrics,
                                              TransferMode::kThreaded);
  }
  ~Rig() {
    copier.resume();
    worker.reset();
  }
  // The stream's contents as "slot+offset" of each queued copy, oldest first.
  std::vector<std::pair<int, size_t>> stream() const {
    std::vector<std::pair<int, size_t>> out;
    for (const void* dst : copier.inFlight()) {
      const size_t at = size_t(static_cast<const uint8_t*>(dst) - slab.slotData(0));
      out.push_back({int(at / slab.slotBytes()), at % slab.slotBytes()});
    }
    return out;
  }
  bool holds(int layer, int expert) const {
    const int slot = worker->snapshot().find(layer, expert);
    if (slot < 0) return false;
    for (int c = 0; c < ExpertBytesSource::kChunks; ++c)
      if (std::memcmp(slab.slotData(slot) + source.chunkOffset(c),
                      source.expertData(layer, expert) + source.chunkOffset(c), source.chunkBytes(c)))
        return false;
    return true;
  }
  FakeSource source;
  SlotSlab slab;
  AsyncHostCopyLink copier;
  OffloadMetrics metrics;
  std::unique_ptr<TransferWorker> worker;
};

class LoggingFence final : public SlotFence {
 public:
  void readsQueued() override {
    std::lock_guard lock(mu_);
    log_.push_back(-1);
  }
  void beforeOverwrite(int slot) override {
    std::lock_guard lock(mu_);
    log_.push_back(slot);
  }
  std::vector<int> log() const {
    std::lock_guard lock(mu_);
    return log_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<int> log_;  // -1: a mark; else a copy into that slot
};

// Records each device-side wait with what the stream held for the slot then.
class RecordingCopyWait final : public CopyWait {
 public:
  explicit RecordingCopyWait(const AsyncHostCopyLink& copier) : copier_(copier) {}
  void computeWaitsFor(const void* dst, size_t n) override {
    int queued = 0;
    for (const void* q : copier_.inFlight())
      queued += static_cast<const uint8_t*>(q) >= static_cast<const uint8_t*>(dst) &&
                static_cast<const uint8_t*>(q) < static_cast<const uint8_t*>(dst) + n;
    waits.push_back({dst, queued});
  }
  struct Wait {
    const void* dst;
    int copies_queued;  // copies into the range still on the stream at the wait
  };
  std::vector<Wait> waits;

 private:
  const AsyncHostCopyLink& copier_;
};

// Host memory as "device" memory, copies on AsyncHostCopyLink's thread, and
// the host standing in for the device at each wait (HostCopyWait).
class AsyncHostDevice final : public OffloadDevice {
 public:
  std::string name() const override { return "async-host"; }
  std::shared_ptr<HostAllocator> hostAllocator() override { return nullptr; }
  std::unique_ptr<SlotMemory> slotMemory() override { return nullptr; }
  CopyLink& copyLink() override { return copier_; }
  SlotFence& fence() override { return fence_; }
  CopyWait* copyWait() override { return &wait_; }
  double linkBytesPerSecond() override { return 12.5e9; }

 private:
  class NoFence final : public SlotFence {  // the host computes synchronously: reads are done
    void readsQueued() override {}
    void beforeOverwrite(int) override {}
  };
  AsyncHostCopyLink copier_;
  NoFence fence_;
  HostCopyWait wait_{copier_};
};

// A predictor that blocks in predict() until the test lets it return, naming
// experts 5 and 6 of whatever layer it is asked about.
class GatedPredictor final : public ExpertPredictor {
 public:
  std::string name() const override { return "gated"; }
  std::vector<int> predict(int, int target, std::span<const float>, int, int) override {
    std::unique_lock lock(mu_);
    targets_.push_back(target);
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_ > 0; });
    --open_;
    return {5, 6};
  }
  void let(int n) {
    std::lock_guard lock(mu_);
    open_ += n;
    cv_.notify_all();
  }
  bool waitEntered(size_t n) {  // the n-th call has started
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs), [&] { return targets_.size() >= n; });
  }
  std::vector<int> targets() {
    std::lock_guard lock(mu_);
    return targets_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int open_ = 0;
  std::vector<int> targets_;
};

// Lets held copies run when a check fails early, so the worker's destructor (which
// waits for copies in flight) cannot hang the test.
struct ResumeOnExit {
  AsyncHostCopyLink& copier;
  ~ResumeOnExit() { copier.resume(); }
};

}  // namespace

TEST(OffloadAsync, gateChunksGoOutBackToBack) {
  Rig r(8, 2, 8);
  r.worker->pushPrecise(1, v({0, 1}));
  waitUntil([&] { return r.copier.queued() == uint64_t(6); }, kWaitMs);
  ASSERT_EQ(r.copier.queued(), uint64_t(6));
  ASSERT_EQ(r.copier.copies(), uint64_t(0));  // six in flight, none complete
  const int s0 = r.worker->snapshot().find(1, 0), s1 = r.worker->snapshot().find(1, 1);
  const std::vector<std::pair<int, size_t>> want = {{s0, 0}, {s0, 256}, {s0, 512},
                                                    {s1, 0}, {s1, 256}, {s1, 512}};
  ASSERT_EQ(r.stream(), want);
  ASSERT_EQ(r.worker->snapshot().at(s0).state, SlotState::kLoading);
  ASSERT_EQ(r.worker->snapshot().at(s0).chunks_done, 0);

  r.copier.release(2);  // expert 0's first two chunks land: still LOADING, 2 done
  waitUntil([&] { return r.worker->snapshot().at(s0).chunks_done == 2; }, kWaitMs);
  ASSERT_EQ(r.worker->snapshot().at(s0).chunks_done, 2);
  ASSERT_EQ(r.worker->snapshot().at(s0).state, SlotState::kLoading);
  r.copier.resume();
  r.worker->waitIdle();
  ASSERT_TRUE(r.holds(1, 0));
  ASSERT_TRUE(r.holds(1, 1));
  ASSERT_EQ(r.metrics.snapshot().bytes_h2d, uint64_t(2 * FakeSource::kSum));
}

TEST(OffloadAsync, lowChunkGoesAloneAndPreciseWaitsAtMostOneChunk) {
  Rig r(8, 3, 8);
  r.worker->pushPredicted(2, v({5}));
  waitUntil([&] { return r.copier.queued() == uint64_t(1); }, kWaitMs);
  ASSERT_EQ(r.copier.queued(), uint64_t(1));
  const int low = r.worker->snapshot().find(2, 5);
  ASSERT_EQ(r.stream(), (std::vector<std::pair<int, size_t>>{{low, 0}}));
  ASSERT_EQ(r.worker->queuedLow(), size_t(2));  // its other chunks wait: the stream is not empty

  r.worker->pushPrecise(1, v({0}));  // the gate: three chunks, behind the one low chunk
  r.copier.release(1);
  waitUntil([&] { return r.copier.copies() == uint64_t(1); }, kWaitMs);
  ASSERT_EQ(r.copier.copies(), uint64_t(1));
  waitUntil([&] { return r.copier.queued() == uint64_t(4); }, kWaitMs);
  ASSERT_EQ(r.copier.queued(), uint64_t(4));
  const int high = r.worker->snapshot().find(1, 0);
  ASSERT_EQ(r.stream(), (std::vector<std::pair<int, size_t>>{{high, 0}, {high, 256}, {high, 512}}));
  ASSERT_EQ(r.worker->queuedLow(), size_t(2));  // no low chunk joined them

  r.copier.release(3);  // the precise expert lands; only then the next low chunk, alone
  waitUntil([&] { return r.copier.copies() == uint64_t(4); }, kWaitMs);
  ASSERT_EQ(r.copier.copies(), uint64_t(4));
  waitUntil([&] { return r.copier.queued() == uint64_t(5); }, kWaitMs);
  ASSERT_EQ(r.copier.queued(), uint64_t(5));
  ASSERT_EQ(r.stream(), (std::vector<std::pair<int, size_t>>{{low, 256}}));
  ASSERT_EQ(r.worker->snapshot().at(high).state, SlotState::kReady);
  r.copier.resume();
  r.worker->waitIdle();
  ASSERT_TRUE(r.holds(2, 5));
}

TEST(OffloadAsync, droppedPredictionFreedWhenItsChunkLands) {
  Rig r(8, 2, 8);
  r.worker->pushPredicted(1, v({2}));
  waitUntil([&] { return r.copier.queued() == uint64_t(1); }, kWaitMs);
  ASSERT_EQ(r.copier.queued(), uint64_t(1));
  r.worker->pushPrecise(1, v({0}));  // expert 2 not chosen: dropped while its chunk is in flight
  ASSERT_EQ(r.metrics.snapshot().chunks_dropped, uint64_t(2));
  ASSERT_TRUE(r.worker->snapshot().find(1, 2) >= 0);  // its chunk still writes into the slot: not free yet
  r.copier.release(1);
  waitUntil([&] { return r.worker->snapshot().find(1, 2) == -1; }, kWaitMs);
  ASSERT_EQ(r.worker->snapshot().find(1, 2), -1);
  r.copier.resume();
  r.worker->waitIdle();
  ASSERT_TRUE(r.holds(1, 0));
  ASSERT_EQ(r.worker->snapshot().countState(SlotState::kLoading), 0);
}

TEST(OffloadAsync, computeWaitsOnTheDeviceNotForReady) {
  auto spec = synth::tinySpec("qwen3moe");
  EngineFixture f(spec);
  HostExpertStore store(*f.model);
  SlotSlab slab(8, store.expertBytes());
  AsyncHostCopyLink copier;
  copier.hold();
  OffloadMetrics metrics;
  TransferWorker worker(slab, SlotTable(8, f.model->config().n_layer, ExpertBytesSource::kChunks), store,
                        copier, metrics, TransferMode::kThreaded);
  ResumeOnExit resume{copier};
  CachedExpertSource source(store, worker, metrics, f.model->config().n_expert_used, nullptr);
  RecordingCopyWait device(copier);
  source.setCopyWait(&device);

  const int layer = 0;
  const auto refs = source.acquire(layer, v({1, 3}));
  ASSERT_EQ(refs.size(), size_t(2));
  for (const ExpertRef& ref : refs) source.waitFor(layer, ref);  // returns with nothing complete
  ASSERT_EQ(copier.copies(), uint64_t(0));
  ASSERT_EQ(int(device.waits.size()), 2);
  for (size_t i = 0; i < refs.size(); ++i) {
    const SlotTable table = worker.snapshot();
    const int slot = table.find(layer, refs[i].expert);
    ASSERT_EQ(device.waits[i].dst, static_cast<const void*>(slab.slotData(slot)));
    ASSERT_EQ(device.waits[i].copies_queued, 3);  // all three chunks issued, none landed
    ASSERT_EQ(table.at(slot).state, SlotState::kLoading);
  }
  ASSERT_EQ(metrics.snapshot().device_waits, uint64_t(2));
  source.release(layer);
  copier.resume();
  worker.waitIdle();

  // READY at the gate: nothing to wait for on either side.
  const auto again = source.acquire(layer, v({1}));
  source.waitFor(layer, again[0]);
  source.release(layer);
  ASSERT_EQ(int(device.waits.size()), 2);
  ASSERT_EQ(metrics.snapshot().device_waits, uint64_t(2));
}

// Prediction on its own thread: a request still waiting is replaced by a newer
// one, and a result whose target gate ran meanwhile is dropped, not pushed.
TEST(OffloadAsync, asyncPredictionDropsLateResultsAndReplacesWaitingRequests) {
  auto spec = synth::tinySpec("qwen3moe");
  spec.n_layer = 6;
  EngineFixture f(spec);
  HostExpertStore store(*f.model);
  SlotSlab slab(32, store.expertBytes());
  HostCopyLink copier;
  OffloadMetrics metrics;
  TransferWorker worker(slab, SlotTable(32, spec.n_layer, ExpertBytesSource::kChunks), store, copier, metrics,
                        TransferMode::kManual);
  GatedPredictor gated;
  ProactiveParts parts;
  parts.prefetch = {&gated, /*stride=*/2, /*budget=*/0, /*async=*/true};
  const int k = f.model->config().n_expert_used;
  CachedExpertSource source(
      store, worker, metrics, k,
      std::make_unique<ProactivePolicy>(PolicyContext{store, worker, metrics, k}, parts));
  struct Opener {  // destroyed before the source: its prediction thread is never left blocked
    GatedPredictor& p;
    ~Opener() { p.let(100); }
  } opener{gated};
  const std::vector<float> hidden(size_t(f.model->config().n_embd), 0.5f);

  source.onLayerInput(0, hidden, 1);  // predicts layer 2; blocks in the predictor
  ASSERT_TRUE(gated.waitEntered(1));
  source.onLayerInput(1, hidden, 1);  // waits (layer 3)...
  source.onLayerInput(2, hidden, 1);  // ...and is replaced by this one (layer 4)
  ASSERT_EQ(metrics.snapshot().predictions_replaced, uint64_t(1));
  const auto refs = source.acquire(2, v({0, 1}));  // layer 2's gate runs before its prediction lands
  for (const ExpertRef& r : refs) source.waitFor(2, r);
  source.release(2);

  gated.let(2);
  source.waitPredictions();
  ASSERT_EQ(gated.targets(), (std::vector<int>{2, 4}));
  const auto m = metrics.snapshot();
  ASSERT_EQ(m.predictions_late, uint64_t(1));  // layer 2's: its gate had run
  ASSERT_EQ(m.predicted, uint64_t(2));         // layer 4's two experts, pushed low priority
  ASSERT_EQ(worker.queuedLow(4), size_t(2 * ExpertBytesSource::kChunks));
  ASSERT_EQ(worker.queuedLow(2), size_t(0));
}

TEST(OffloadAsync, stagingSlotReusedOnlyAfterItsCopyLands) {
  // 4 slots, 2 of them staging, 2 layers: a layer's share is 1, so a gate of 4
  // copies one expert and streams three through the staging slots.
  Rig r(4, 2, 8, /*staging=*/2);
  LoggingFence fence;
  r.worker->setSlotFence(&fence);
  int copies = 0;
  const ExecutionOrder order = r.worker->pushPrecise(0, v({0, 1, 2, 3}), [&](const MissContext&) {
    return copies++ < 1 ? MissAction::kCopy : MissAction::kStream;
  });
  std::vector<int> streamed;
  for (const OrderedExpert& o : order)
    if (o.residency == Residency::kStreamed) streamed.push_back(o.expert);
  ASSERT_EQ(int(streamed.size()), 3);
  waitUntil([&] { return r.copier.queued() == uint64_t(9); }, kWaitMs);
  ASSERT_EQ(r.copier.queued(), uint64_t(9));  // 1 copied + 2 staged, 3 chunks each

  // The first streamed expert is computed once its copies are issued (none landed).
  r.worker->beginCompute(0, streamed[0]);
  ASSERT_TRUE(!r.worker->waitIssued(0, streamed[0]).ready);
  const int recycled = r.worker->snapshot().find(0, streamed[0]);
  // Computing the second hands the first one's staging slot to the third: that
  // waits for the first one's copy to land.
  auto second = std::async(std::launch::async, [&] { r.worker->beginCompute(0, streamed[1]); });
  // Not fatal: ending the case here would leave `second` blocked on the held copy.
  EXPECT_EQ(r.worker->snapshot().find(0, streamed[2]), -1);  // not staged while the slot's copy is held
  r.copier.release(3 + 3);  // the copied expert and the first streamed one land
  ASSERT_EQ(second.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready);
  second.get();
  ASSERT_EQ(r.worker->snapshot().find(0, streamed[2]), recycled);
  waitUntil([&] { return r.copier.queued() == uint64_t(12); }, kWaitMs);
  ASSERT_EQ(r.copier.queued(), uint64_t(12));

  // The fence: a mark after the first streamed expert's reads, before the overwrite
  // (the first 9 entries are the initial copies).
  const auto log = fence.log();
  const auto overwrite = std::find(log.begin() + 9, log.end(), recycled);
  ASSERT_TRUE(overwrite != log.end());
  ASSERT_TRUE(std::find(log.begin() + 9, overwrite, -1) != overwrite);
  r.copier.resume();
  r.worker->release(0);  // waits for the streamed copies still in flight, then frees the staging slots
  ASSERT_EQ(r.worker->snapshot().find(0, streamed[2]), -1);
  r.worker->waitIdle();
  ASSERT_EQ(r.worker->snapshot().countState(SlotState::kLoading), 0);
}

TEST(OffloadAsync, generationBitIdenticalWithAsyncCopies) {
  auto spec = synth::tinySpec("qwen3moe");  // 16 experts, top-4
  spec.n_layer = 6;
  EngineFixture f(spec);
  for (auto policy : {OffloadPolicy::kReactiveLru, OffloadPolicy::kStatic, OffloadPolicy::kProactive}) {
    for (int n_slots : {3, 24}) {
      const std::string what = moe::test::format("%s, %d slots", policyName(policy), n_slots);
      OffloadConfig plain;
      plain.policy = policy;
      plain.cache_slots = n_slots;
      plain.switches.cpu_fallback = false;
      OffloadEngine sync_engine(*f.model, *f.backend, plain);
      const auto want = runPromptAndDecode(f, sync_engine.source(), sync_engine);

      OffloadConfig oc = plain;
      auto device = std::make_shared<AsyncHostDevice>();
      oc.device = device;
      OffloadEngine engine(*f.model, *f.backend, oc);
      ASSERT_TRUE(runPromptAndDecode(f, engine.source(), engine) == want) << what;
      // The schedule may differ (copies land later), the gates' choices may not.
      const auto s = engine.snapshot();
      ASSERT_EQ(s.expert_uses, sync_engine.snapshot().expert_uses);
      ASSERT_EQ(s.bytes_h2d, device->copyLink().bytesCopied());
      // Whether the compute side found a copy still in flight depends on the copy
      // thread's timing (under a loaded machine it may never): the device-side wait
      // is checked step by step, with the copies held, in computeWaitsOnTheDeviceNotForReady.
    }
  }
}
