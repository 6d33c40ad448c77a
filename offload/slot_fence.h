// Write-after-read safety for a device that computes asynchronously. On a GPU
// the host queues kernels and moves on: a kernel reading expert slot S may still
// be running when the transfer worker evicts S and starts copying another expert
// into it. A fence orders those: the compute side marks "every read queued so
// far" and the worker makes each copy wait (on the device, not the host) until
// the newest such mark has executed.
//
// One mark covers every slot, which is conservative but sufficient: a slot is
// only overwritten after it stopped being protected (its layer released, or its
// streamed expert computed), and the compute side marks at exactly those points
// (TransferWorker::release and beginCompute), so the newest mark at copy time is
// never older than the slot's last read. The host runs at most about one expert
// ahead of the device (each layer reads its router logits back), so the extra
// waiting is short. The CPU path computes synchronously and uses no fence.
#pragma once

namespace moe {

class SlotFence {
 public:
  virtual ~SlotFence() = default;
  // Compute thread: reads queued so far must finish before any later overwrite.
  virtual void readsQueued() = 0;
  // Worker thread, before a copy into `slot`: the copy waits for the newest mark.
  virtual void beforeOverwrite(int slot) = 0;
};

}  // namespace moe
