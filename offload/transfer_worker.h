// The transfer worker, the copy queue: feeds the slot slab from an ExpertBytesSource
// through a CopyLink (ProMoE: chunked prefetching, early preemption, reordered
// inference), and owns the SlotTable that says what each slot holds.
//
// Tasks are chunks (layer, expert, chunk, slot) in two FIFO queues. The high
// queue is always drained before the low one; a started chunk always completes,
// so a high task waits for at most the one chunk in progress. Low: predictions
// (pushPredicted). High: the gate's precise experts (pushPrecise), which first
// drops that layer's still-queued low chunks (early preemption) and returns the
// execution order (ready, then in-flight, then not started).
//
// Misses (pushPrecise with a MissPolicy): each expert not in the cache is copied
// into a cache slot (kCopy), computed from its host copy (kHost: the cpu-experts
// decision), or streamed (kStream) through the cache's staging slots: streamed
// experts are loaded in execution order, the first `staging` at once and each
// further one into the staging slot of the streamed expert computed before it
// (beginCompute), so expert i+1 copies while expert i computes and nothing this
// layer still needs is ever evicted. A kCopy miss with no evictable slot streams
// when the cache has staging slots, else is kUnavailable (host-computed).
//
// Asynchronous copies (a GPU's copy stream; in tests AsyncHostCopyLink): the worker
// issues a chunk and goes on; it notes the chunk done (LOADING -> READY) when the
// engine reports the copy complete, oldest first. High chunks are issued back to
// back (up to kMaxInFlight), so the link never idles between the gate's experts; a
// low chunk is issued only when nothing is in flight, so a high task still waits
// for at most one chunk. The compute side then need not block the host until an
// expert is READY: waitIssued() returns once its copies are queued on the link
// and the device waits for them (CopyWait, offload/slot_fence.h). A synchronous
// engine completes each copy as it is issued: one chunk at a time, as before.
//
// Modes: kThreaded runs a worker std::thread; kManual has no thread: the caller
// runs one chunk per step() (deterministic tests; the step waits for its copy),
// and waitReady() steps until done.
//
// Locking: one lock, the worker's, guards the slot table and the queues; every
// method takes it once. Copies run with no lock held. Others see the table through
// snapshot() (a copy) and the few counts below.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "offload/copy_link.h"
#include "offload/expert_bytes_source.h"
#include "offload/offload_metrics.h"
#include "offload/slot_fence.h"
#include "offload/slot_slab.h"
#include "offload/slot_table.h"

namespace moe {

enum class TransferMode { kThreaded, kManual };

struct TransferOptions {
  bool chunking = true;          // false: a whole expert is one task (all chunks, no yielding)
  bool early_preemption = true;  // pushPrecise drops the layer's queued low chunks
  bool reordering = true;        // pushPrecise orders ready -> in-flight -> not started
};

enum class Priority { kLow, kHigh };

struct ChunkTask {
  int layer = -1, expert = -1;
  int chunk = -1;  // 0..kChunks-1, or -1 for a whole expert (chunking off)
  int slot = -1;
};

struct StepResult {
  bool did_work = false;  // false: both queues were empty
  ChunkTask task;
  Priority priority = Priority::kLow;
  size_t bytes = 0;
  bool expert_ready = false;  // this chunk made the slot READY
  bool discarded = false;     // the expert was preempted meanwhile; slot freed
};

// Execution order with reordering: kReady, then the experts computed from host
// memory (kUnavailable, kHost: nothing to wait for), kInFlight (most chunks done
// first), kNotStarted, kStreamed.
enum class Residency { kReady, kInFlight, kNotStarted, kUnavailable, kHost, kStreamed };

enum class MissAction { kCopy, kHost, kStream };
struct MissContext {
  int layer = -1, expert = -1;
  size_t queued_high_bytes = 0;  // bytes ahead of this expert on the link (high queue + the copy in progress)
  int misses_before = 0;         // misses of this pushPrecise decided before this one
};
using MissPolicy = std::function<MissAction(const MissContext&)>;

struct OrderedExpert {
  int expert = -1;
  int slot = -1;  // -1 when kUnavailable (no slot could be reserved)
  Residency residency = Residency::kNotStarted;
  int chunks_done = 0;
};
using ExecutionOrder = std::vector<OrderedExpert>;

class TransferWorker {
 public:
  // All references must outlive the worker. `table` (its eviction rule and staging
  // slots set) describes `slab`'s slots, a chunk per ExpertBytesSource::kChunks.
  TransferWorker(SlotSlab& slab, SlotTable table, const ExpertBytesSource& source, CopyLink& copier,
                 OffloadMetrics& metrics, TransferMode mode, TransferOptions options = {});
  ~TransferWorker();
  TransferWorker(const TransferWorker&) = delete;
  TransferWorker& operator=(const TransferWorker&) = delete;

  // Low priority: each expert not resident/loading gets a slot (evicting per the
  // cache's rule; skipped when nothing is evictable) and its chunks queued.
  // probabilities (empty, or one per expert) and admission > 0: a prefetch's
  // admission, a victim worth more than SlotTable::admissionBound is kept and the
  // prefetch skipped (SlotTable::reserve).
  void pushPredicted(int layer, std::span<const int> experts, std::span<const float> probabilities = {},
                     double admission = 0);
  // The gate of `layer` chose `experts`: makes `layer` the computing layer, drops
  // its queued low chunks (re-queued high for chosen experts, slot freed for the
  // others), queues missing experts high, pins the chosen slots, returns the order.
  ExecutionOrder pushPrecise(int layer, std::span<const int> experts);
  // The same, with each miss decided by `on_miss` (called under the worker's lock;
  // it must not call back into the worker). An empty policy copies every miss.
  ExecutionOrder pushPrecise(int layer, std::span<const int> experts, const MissPolicy& on_miss);
  // A decode step that routes on the device (ExpertSource::mappedExperts): the slot
  // of each of the layer's n_expert experts that is READY now, pinned until
  // release(layer), or -1 (the kernels read it from host memory).
  std::vector<int> mapLayer(int layer, int n_expert);
  // The routing of a mapped layer, learned after the step: `experts` (distinct) were
  // computed, from the slots mapLayer gave (`slots`, by expert) or from host memory.
  // Counts the gate (hits: READY at the gate; the rest misses), touches the hits, and
  // copies each miss into a slot at low priority (as the cache's rule decides), so
  // the next token finds it.
  void learnMappedGate(int layer, std::span<const int> experts, std::span<const int> slots);
  // The MoE block is about to compute `expert` of `layer`: every expert before it
  // in the execution order is done, so their staging slots take the next streamed experts.
  void beginCompute(int layer, int expert);
  // Static policy: (layer, expert) gets a cache slot (copied high priority if
  // missing) that no eviction touches until releaseHolds(). False: no slot free
  // (or the expert sits in a staging slot right now).
  bool hold(int layer, int expert);
  void releaseHolds();
  // Blocks until (layer, expert) is READY; returns whether it had to wait.
  // Throws std::logic_error when it can never become READY (not in the cache).
  bool waitReady(int layer, int expert);
  // Blocks until every copy of (layer, expert) is issued on the link, or it is
  // READY: the caller then lets the device wait for those copies (CopyWait).
  // Throws std::logic_error like waitReady.
  struct IssueWait {
    int slot = -1;
    bool ready = false;   // READY: nothing left to wait for
    bool waited = false;  // the host had to wait (for a copy to be issued)
  };
  IssueWait waitIssued(int layer, int expert);
  // Blocks until both queues are empty and no copy is in flight (kManual: steps until then).
  void waitIdle();
  // Layer computed: unpins its slots and clears the computing layer. A streamed
  // expert's copies still in flight (device-side waits) are waited for first, so
  // the staging slots are free for the next layer.
  void release(int layer);
  // A device that computes asynchronously (offload/slot_fence.h): set before the
  // first push; null (the CPU path) needs none. Must outlive the worker.
  void setSlotFence(SlotFence* fence) { fence_ = fence; }

  StepResult step();  // kManual only: copies exactly one task (chunk or whole expert), waits for it

  static constexpr size_t kMaxInFlight = 16;  // issued, not yet complete

  // The slot table as it is now (a copy, taken under the lock).
  SlotTable snapshot() const;
  int residentCount(int layer) const;  // LOADING + READY slots of the layer (staging not counted)
  // Fixed for the worker's life.
  const SlotSlab& slab() const { return slab_; }
  int slotCount() const { return slab_.slotCount(); }
  int stagingCount() const { return staging_count_; }
  int layerShare() const { return layer_share_; }  // (slots - staging) / layers, at least 1

  size_t queuedHigh() const;
  size_t queuedLow() const;
  size_t queuedLow(int layer) const;
  const TransferOptions& options() const { return options_; }

 private:
  void queueExpertLocked(int layer, int expert, int slot, int first_chunk, Priority p);
  size_t highBytesLocked() const;
  void stageLocked(size_t k);
  void clearStreamLocked();
  std::optional<std::pair<ChunkTask, Priority>> popLocked();
  bool canIssueLocked() const;
  // Pops the next task and issues its copy (the lock is released meanwhile).
  void issueNextLocked(std::unique_lock<std::mutex>& lock);
  CopyTicket issueCopy(const ChunkTask& t);
  // The oldest in-flight copy completed: accounts it and updates the cache.
  StepResult reapFrontLocked();
  int inFlightLocked(int slot, bool issued_only) const;
  // Blocks (kManual: steps) until done() holds; returns whether it had to wait.
  template <class Done>
  bool waitLocked(std::unique_lock<std::mutex>& lock, Done done);
  void run();
  void runLocked(std::unique_lock<std::mutex>& lock);  // the worker's loop; throws what a copy throws

  SlotSlab& slab_;
  const ExpertBytesSource& source_;
  CopyLink& copier_;
  SlotFence* fence_ = nullptr;
  OffloadMetrics& metrics_;
  const TransferMode mode_;
  const TransferOptions options_;

  // The one lock of the slot state. It guards table_ (each slot's state and its
  // copies queued or in flight) and everything below it.
  mutable std::mutex mutex_;
  SlotTable table_;
  const int staging_count_, layer_share_;
  std::condition_variable work_cv_, ready_cv_;
  std::deque<ChunkTask> high_, low_;
  struct InFlight {
    ChunkTask task;
    Priority priority = Priority::kLow;
    CopyTicket ticket = 0;
    bool issued = false;                        // false while the worker is inside copyAsync
    std::chrono::steady_clock::time_point due;  // when the link should have finished it
  };
  std::deque<InFlight> in_flight_;  // popped tasks, oldest first, until their copy completes
  std::chrono::steady_clock::time_point busy_since_;  // when in_flight_ last became non-empty
  bool stop_ = false;
  // What ended the worker thread (a failed copy: a device fault); every wait rethrows it.
  std::exception_ptr failure_;
  // The streaming layer: its streamed experts in execution order, each with its
  // position in that order and its staging slot.
  struct Streamed {
    int expert = -1, position = -1, slot = -1;
    bool recycled = false;
  };
  int stream_layer_ = -1;
  std::vector<Streamed> stream_;
  std::vector<int> order_position_;  // [expert] position in the last execution order, -1 if not chosen
  std::thread thread_;
};

// Blocks (kManual: steps) until done() holds; returns whether it had to wait.
template <class Done>
bool TransferWorker::waitLocked(std::unique_lock<std::mutex>& lock, Done done) {
  if (done()) return false;
  if (mode_ == TransferMode::kManual) {
    do {
      lock.unlock();
      const bool worked = step().did_work;
      lock.lock();
      if (!worked && !done()) throw std::logic_error("TransferWorker: waiting for a copy that is not queued");
    } while (!done());
  } else {
    ready_cv_.wait(lock, [&] {
      if (failure_) std::rethrow_exception(failure_);
      if (done()) return true;
      if (stop_) throw std::logic_error("TransferWorker: worker stopped while waited for");
      return false;
    });
  }
  return true;
}

}  // namespace moe
