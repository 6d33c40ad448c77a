// The two orderings between the compute side and the copies into expert slots,
// for a device that computes asynchronously. On a GPU the host queues kernels
// and moves on, so neither holds by itself:
//
// - write-after-read (SlotFence): a kernel reading slot S may still be running
//   when the transfer worker evicts S and starts copying another expert into it.
//   The compute side marks "every read queued so far" and the worker makes each
//   copy wait (on the device, not the host) until the newest such mark has
//   executed. One mark covers every slot, which is conservative but sufficient:
//   a slot is only overwritten after it stopped being protected (its layer
//   released, or its streamed expert computed), and the compute side marks at
//   exactly those points (TransferWorker::release and beginCompute), so the
//   newest mark at copy time is never older than the slot's last read. The host
//   runs at most about one layer ahead of the device (each layer reads its router
//   logits back), so the extra waiting is short.
// - read-after-write (CopyWait): an expert whose copies are queued but not done
//   can be computed as soon as they finish. The compute side queues its kernels
//   behind a device-side wait on those copies (cudaStreamWaitEvent) instead of
//   blocking the host until the expert is READY (ProMoE's critical path: no host
//   sync per expert).
//
// The synchronous CPU path needs neither: its copies are done when copy() returns.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe {

class SlotFence {
 public:
  virtual ~SlotFence() = default;
  // Compute thread: reads queued so far must finish before any later overwrite.
  virtual void readsQueued() = 0;
  // Worker thread, before a copy into `slot`: the copy waits for the newest mark.
  virtual void beforeOverwrite(int slot) = 0;
};

class CopyWait {
 public:
  virtual ~CopyWait() = default;
  // Compute thread: the next reads of [dst, dst + n) wait for every copy already
  // queued into that range (a GPU: the compute stream waits; the host goes on).
  virtual void computeWaitsFor(const void* dst, size_t n) = 0;
  // Time the compute side stood still in those waits, measured where it waited
  // (on a GPU: timing events around each wait, counted once they completed).
  virtual uint64_t stalledNs() { return 0; }
};

}  // namespace moe
