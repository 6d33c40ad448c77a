// Host -> device expert copies on a dedicated copy stream (cudaMemcpyAsync from
// pinned memory), with a CUDA event recorded after every copy (one chunk, or one
// whole expert when chunking is off).
//
// Two ways to wait for a copy:
// - by ticket (the CopyLink interface the transfer worker uses): copyAsync()
//   returns a ticket with its own event; the worker polls it (copyDone) or waits
//   on it (waitCopy), off the critical path, and marks the chunk done in the
//   slot table afterwards. copy() is copyAsync + waitCopy.
// - by range: the compute side calls streamWaitFor(compute stream, slot range)
//   before its first kernel that reads the slot: the compute stream (not the
//   host) waits on the newest copy event into that range, via cudaStreamWaitEvent.
//   The copy stream is FIFO, so the newest overlapping copy's event completes
//   after every earlier one.
//
// Thread-safe: copies may be issued from one thread while another waits.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "offload/copy_link.h"
#include "offload/slot_slab.h"

namespace moe {

class CudaCopyLink final : public CopyLink {
 public:
  // Copies to the calling thread's current device (the compute device): copyAsync
  // binds whichever thread calls it (the transfer worker's) to that device first.
  CudaCopyLink();
  ~CudaCopyLink() override;
  CudaCopyLink(const CudaCopyLink&) = delete;
  CudaCopyLink& operator=(const CudaCopyLink&) = delete;

  // dst: device memory; src: host memory (pinned for an async DMA). Returns when dst holds the bytes.
  void copy(void* dst, const void* src, size_t n) override;
  // Queues the copy and records its events; returns at once. src must stay unchanged until the
  // copy completes (its ticket / isComplete / synchronize / a stream that streamWaitFor'd it).
  CopyTicket copyAsync(void* dst, const void* src, size_t n) override;
  void waitCopy(CopyTicket ticket) override;
  bool copyDone(CopyTicket ticket) override;

  // Makes `stream` wait (on the device) for the newest queued copy that wrote any byte of
  // [dst, dst + n). Returns false when no recorded copy overlaps the range (nothing to wait for).
  bool streamWaitFor(cudaStream_t stream, const void* dst, size_t n);
  // True when every copy into [dst, dst + n) has completed (cudaEventQuery; never blocks).
  bool isComplete(const void* dst, size_t n);
  void synchronize();  // waits for every queued copy

  uint64_t bytesCopied() const override { return bytes_.load(std::memory_order_relaxed); }
  uint64_t copies() const override { return copies_.load(std::memory_order_relaxed); }
  double simulatedSeconds() const override { return 0.0; }  // a real link: nothing simulated
  cudaStream_t stream() const { return stream_; }
  size_t trackedRanges() const;  // distinct destination ranges with an event

 private:
  struct Record {
    uintptr_t end = 0;
    cudaEvent_t event = nullptr;
    uint64_t seq = 0;
  };
  // The record with the highest seq overlapping [b, e), or null. Caller holds mutex_.
  Record* newestOverlapLocked(uintptr_t b, uintptr_t e);
  cudaEvent_t takeEventLocked();
  void recordRangeLocked(uintptr_t b, uintptr_t e);
  void reapTicketsLocked();  // recycles the events of completed tickets, oldest first; never blocks

  // Binds the calling thread to device_ (cudaSetDevice), once per thread.
  void bindThread() const;

  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Record> records_;  // by destination start
  std::vector<cudaEvent_t> spare_events_;
  std::deque<std::pair<CopyTicket, cudaEvent_t>> tickets_;  // not known complete, oldest first
  CopyTicket completed_ = 0;                                // every ticket <= this is complete
  uint64_t seq_ = 0;                                        // the last copy's ticket
  std::atomic<uint64_t> bytes_{0}, copies_{0};
};

// The compute stream waits for every copy into `slot` of `cache` (a slab from CudaSlotMemory).
inline bool streamWaitForSlot(CudaCopyLink& engine, cudaStream_t compute, const SlotSlab& slab, int slot) {
  return engine.streamWaitFor(compute, slab.slotData(slot), slab.slotBytes());
}

// Pinned host -> device bandwidth in GB/s (1e9 bytes/s), timed with CUDA events over
// `reps` copies of each size after one warm-up copy; returns the best size's rate.
struct BandwidthSample {
  size_t bytes = 0;
  double gb_per_s = 0.0;
};
std::vector<BandwidthSample> measurePinnedH2DBandwidthSamples(const std::vector<size_t>& sizes, int reps = 4);
double measurePinnedH2DBandwidth();  // sizes 1, 8 and 64 MiB

}  // namespace moe
