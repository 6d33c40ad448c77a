// TransferWorker, the gate's side: what a gate's choice does to the copy queue
// (early preemption, each miss copied, streamed or left to the host), the
// execution order it returns, and the streaming of a layer's misses through the
// staging slots while the MoE block computes (beginCompute, release). The copy
// loop itself is in transfer_worker.cpp.
#include <algorithm>
#include <stdexcept>

#include "offload/transfer_worker.h"

namespace moe {

ExecutionOrder TransferWorker::pushPrecise(int layer, std::span<const int> experts) {
  return pushPrecise(layer, experts, MissPolicy{});
}

size_t TransferWorker::highBytesLocked() const {
  auto bytes = [&](const ChunkTask& t) {
    return t.chunk < 0 ? source_.expertBytes() : source_.chunkBytes(t.chunk);
  };
  size_t n = 0;
  for (const InFlight& f : in_flight_) n += bytes(f.task);
  for (const ChunkTask& t : high_) n += bytes(t);
  return n;
}

namespace {
// Reordered inference: what can run now first, then by how soon it will be READY.
int executionRank(Residency r) {
  switch (r) {
    case Residency::kReady: return 0;
    case Residency::kUnavailable:
    case Residency::kHost: return 1;
    case Residency::kInFlight: return 2;
    case Residency::kNotStarted: return 3;
    case Residency::kStreamed: return 4;
  }
  return 5;
}
}  // namespace

ExecutionOrder TransferWorker::pushPrecise(int layer, std::span<const int> experts,
                                           const MissPolicy& on_miss) {
  ExecutionOrder order;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    table_.setComputingLayer(layer);
    table_.countGate(layer, experts);
    // The chosen experts already cached are pinned before any miss takes a slot:
    // a miss may evict this layer's other experts, never one the gate chose.
    for (int e : experts)
      if (const int slot = table_.find(layer, e); slot >= 0) table_.pin(slot);
    auto chosen = [&](int e) { return std::find(experts.begin(), experts.end(), e) != experts.end(); };

    if (options_.early_preemption) {
      std::deque<ChunkTask> keep, promote;
      std::vector<int> discarded_slots;
      for (const ChunkTask& t : low_) {
        if (t.layer != layer) {
          keep.push_back(t);
        } else if (chosen(t.expert)) {
          promote.push_back(t);
        } else {
          --table_.at(t.slot).pending;
          metrics_.chunks_dropped.fetch_add(1, std::memory_order_relaxed);
          if (std::find(discarded_slots.begin(), discarded_slots.end(), t.slot) == discarded_slots.end())
            discarded_slots.push_back(t.slot);
        }
      }
      low_.swap(keep);
      metrics_.chunks_promoted.fetch_add(promote.size(), std::memory_order_relaxed);
      for (const ChunkTask& t : promote) high_.push_back(t);
      for (int slot : discarded_slots) {
        if (table_.at(slot).pending > 0)
          table_.at(slot).free_when_done = true;  // a chunk of it is in flight: freed once that completes
        else
          table_.free(slot);
      }
    }

    clearStreamLocked();  // a previous layer's stream that was never released (an exception)
    int misses = 0;
    for (int e : experts) {
      metrics_.expert_uses.fetch_add(1, std::memory_order_relaxed);
      OrderedExpert o;
      o.expert = e;
      o.slot = table_.find(layer, e);
      if (o.slot < 0) {
        metrics_.misses.fetch_add(1, std::memory_order_relaxed);
        const MissAction action =
            on_miss ? on_miss(MissContext{layer, e, highBytesLocked(), misses}) : MissAction::kCopy;
        ++misses;
        if (action == MissAction::kHost) {
          o.residency = Residency::kHost;
          order.push_back(o);
          continue;
        }
        if (action == MissAction::kCopy) o.slot = table_.reserve(layer, e, /*predicted=*/false);
        if (o.slot < 0) {
          if (table_.stagingCount() > 0) {
            metrics_.streamed.fetch_add(1, std::memory_order_relaxed);
            o.residency = Residency::kStreamed;
          } else {
            metrics_.unavailable.fetch_add(1, std::memory_order_relaxed);
            o.residency = Residency::kUnavailable;
          }
          order.push_back(o);
          continue;
        }
        queueExpertLocked(layer, e, o.slot, 0, Priority::kHigh);
      } else {
        table_.touch(o.slot);
        if (table_.at(o.slot).free_when_done) {
          // Preempted earlier, chosen now: keep it and queue what the drop removed
          // (its in-flight chunks follow the ones done).
          table_.at(o.slot).free_when_done = false;
          const int next = table_.at(o.slot).chunks_done + table_.at(o.slot).pending;
          if (options_.chunking && next < ExpertBytesSource::kChunks)
            queueExpertLocked(layer, e, o.slot, next, Priority::kHigh);
        }
        SlotInfo s = table_.at(o.slot);
        if (s.state == SlotState::kReady) {
          metrics_.ready_hits.fetch_add(1, std::memory_order_relaxed);
          if (s.predicted) metrics_.prefetch_hits.fetch_add(1, std::memory_order_relaxed);
        } else {
          metrics_.inflight_hits.fetch_add(1, std::memory_order_relaxed);
          if (table_.at(o.slot).pending == 0) {  // defensive: LOADING with nothing left to copy
            queueExpertLocked(layer, e, o.slot, options_.chunking ? s.chunks_done : 0, Priority::kHigh);
          }
        }
      }
      table_.pin(o.slot);
      SlotInfo s = table_.at(o.slot);
      o.chunks_done = s.chunks_done;
      const bool started = s.chunks_done > 0 || inFlightLocked(o.slot, /*issued_only=*/false) > 0;
      o.residency = s.state == SlotState::kReady ? Residency::kReady
                    : started                    ? Residency::kInFlight
                                                 : Residency::kNotStarted;
      order.push_back(o);
    }
    if (options_.reordering) {
      std::stable_sort(order.begin(), order.end(), [](const OrderedExpert& a, const OrderedExpert& b) {
        const int ra = executionRank(a.residency), rb = executionRank(b.residency);
        if (ra != rb) return ra < rb;
        if (a.residency == Residency::kInFlight) return a.chunks_done > b.chunks_done;
        return false;
      });
    }
    // Streamed experts take the staging slots in execution order, round robin.
    order_position_.assign(order_position_.size(), -1);
    const int staging = table_.stagingCount();
    for (size_t i = 0; i < order.size(); ++i) {
      const int e = order[i].expert;
      if (e >= static_cast<int>(order_position_.size())) order_position_.resize(size_t(e) + 1, -1);
      order_position_[e] = static_cast<int>(i);
      if (order[i].residency != Residency::kStreamed) continue;
      order[i].slot = table_.stagingSlot(static_cast<int>(stream_.size() % size_t(staging)));
      stream_.push_back({e, static_cast<int>(i), order[i].slot, false});
    }
    if (!stream_.empty()) {
      stream_layer_ = layer;
      for (size_t k = 0; k < stream_.size() && k < size_t(staging); ++k) stageLocked(k);
    }
  }
  work_cv_.notify_all();
  return order;
}

void TransferWorker::stageLocked(size_t k) {
  const Streamed& s = stream_[k];
  table_.loadStaging(s.slot, stream_layer_, s.expert);
  queueExpertLocked(stream_layer_, s.expert, s.slot, 0, Priority::kHigh);
}

void TransferWorker::beginCompute(int layer, int expert) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (layer != stream_layer_ || expert < 0 || expert >= static_cast<int>(order_position_.size())) return;
    const int position = order_position_[expert];
    const size_t staging = static_cast<size_t>(table_.stagingCount());
    bool marked = false;
    // Only the compute thread changes stream_, so it stays put while waitLocked unlocks.
    for (size_t k = 0; k < stream_.size(); ++k) {
      if (stream_[k].position >= position || stream_[k].recycled) continue;
      const int slot = stream_[k].slot;
      if (table_.at(slot).pending != inFlightLocked(slot, /*issued_only=*/true))
        throw std::logic_error("TransferWorker: a streamed expert was computed before its copy was issued");
      // With a device-side copy wait its copy may still run: the slot is reused once it is done.
      waitLocked(lock, [&] { return table_.at(slot).pending == 0; });
      if (fence_ && !marked) {  // the recycled slot's reads are queued, maybe not done
        fence_->readsQueued();
        marked = true;
      }
      // Computed: its staging slot takes the streamed expert `staging` places later.
      table_.free(slot);
      stream_[k].recycled = true;
      if (k + staging < stream_.size()) stageLocked(k + staging);
    }
  }
  work_cv_.notify_all();
}

void TransferWorker::clearStreamLocked() {
  for (const Streamed& s : stream_) {
    if (s.recycled || table_.find(stream_layer_, s.expert) != s.slot) continue;
    std::erase_if(high_, [&](const ChunkTask& t) { return t.slot == s.slot; });
    table_.at(s.slot).pending = inFlightLocked(s.slot, /*issued_only=*/false);
    if (table_.at(s.slot).pending > 0)
      table_.at(s.slot).free_when_done = true;  // freed once its copies in flight complete
    else
      table_.free(s.slot);
  }
  stream_.clear();
  stream_layer_ = -1;
}

void TransferWorker::release(int layer) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (fence_) fence_->readsQueued();  // the layer's slots become evictable
  if (layer == stream_layer_) {
    waitLocked(lock, [&] {
      return std::all_of(stream_.begin(), stream_.end(), [&](const Streamed& s) {
        return s.recycled || table_.find(stream_layer_, s.expert) != s.slot || table_.at(s.slot).pending == 0;
      });
    });
    clearStreamLocked();
  }
  table_.unpinAll();
  if (table_.computingLayer() == layer) table_.setComputingLayer(-1);
}

}  // namespace moe
