// Offload counters: atomic, cheap to bump from the worker and compute threads,
// polled (e.g. by the UI every 250 ms) through snapshot().
#pragma once

#include <atomic>
#include <cstdint>

namespace moe {

struct OffloadSnapshot {
  uint64_t expert_uses = 0;       // experts the gates chose (pushPrecise)
  uint64_t ready_hits = 0;        // READY at the gate
  uint64_t prefetch_hits = 0;     // READY at the gate and brought in by a prediction
  uint64_t inflight_hits = 0;     // LOADING at the gate
  uint64_t misses = 0;            // not in the cache at the gate
  uint64_t unavailable = 0;       // missed and no slot could be reserved
  uint64_t bytes_h2d = 0;         // bytes copied host -> device
  uint64_t chunks_copied = 0;     // chunks copied (a whole-expert task counts kChunks)
  uint64_t chunks_dropped = 0;    // queued low chunks discarded by early preemption
  uint64_t chunks_promoted = 0;   // queued low chunks re-queued high by early preemption
  uint64_t prefetch_skipped = 0;  // predicted experts skipped: no evictable slot
  uint64_t waits = 0;             // waitReady calls that had to wait
};

struct OffloadMetrics {
  std::atomic<uint64_t> expert_uses{0}, ready_hits{0}, prefetch_hits{0}, inflight_hits{0}, misses{0},
      unavailable{0}, bytes_h2d{0}, chunks_copied{0}, chunks_dropped{0}, chunks_promoted{0},
      prefetch_skipped{0}, waits{0};

  OffloadSnapshot snapshot() const {
    OffloadSnapshot s;
    s.expert_uses = expert_uses.load(std::memory_order_relaxed);
    s.ready_hits = ready_hits.load(std::memory_order_relaxed);
    s.prefetch_hits = prefetch_hits.load(std::memory_order_relaxed);
    s.inflight_hits = inflight_hits.load(std::memory_order_relaxed);
    s.misses = misses.load(std::memory_order_relaxed);
    s.unavailable = unavailable.load(std::memory_order_relaxed);
    s.bytes_h2d = bytes_h2d.load(std::memory_order_relaxed);
    s.chunks_copied = chunks_copied.load(std::memory_order_relaxed);
    s.chunks_dropped = chunks_dropped.load(std::memory_order_relaxed);
    s.chunks_promoted = chunks_promoted.load(std::memory_order_relaxed);
    s.prefetch_skipped = prefetch_skipped.load(std::memory_order_relaxed);
    s.waits = waits.load(std::memory_order_relaxed);
    return s;
  }
};

}  // namespace moe
