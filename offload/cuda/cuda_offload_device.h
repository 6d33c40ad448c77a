// OffloadDevice on CUDA: pinned host memory (cudaHostAlloc), the slot slab in
// one cudaMalloc, CudaCopyLink on its own stream, and a fence between the
// backend's compute stream and that copy stream (offload/slot_fence.h).
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <mutex>
#include <vector>

#include "offload/cuda/cuda_copy_link.h"
#include "offload/offload_device.h"

namespace moe {

// The fence: one event, re-recorded on the compute stream at every mark; each
// copy's stream waits on its latest record (cudaStreamWaitEvent takes the
// event's state at the time of the call, so later re-records do not affect a
// wait already queued).
class CudaSlotFence final : public SlotFence {
 public:
  CudaSlotFence(cudaStream_t compute, cudaStream_t copy);
  ~CudaSlotFence() override;
  CudaSlotFence(const CudaSlotFence&) = delete;
  CudaSlotFence& operator=(const CudaSlotFence&) = delete;
  void readsQueued() override;
  void beforeOverwrite(int slot) override;  // every slot waits for the same newest mark
  uint64_t marks() const;

 private:
  cudaStream_t compute_, copy_;
  cudaEvent_t event_ = nullptr;
  mutable std::mutex mutex_;
  uint64_t marks_ = 0;
};

// The compute stream waits on the device for the copies into a slot range
// (CudaCopyLink::streamWaitFor), and each wait is timed: a timing event before
// and after it on the compute stream; their elapsed time, read once both have
// completed, is how long the stream stood still there.
class CudaCopyWait final : public CopyWait {
 public:
  CudaCopyWait(CudaCopyLink& copies, cudaStream_t compute) : copies_(copies), compute_(compute) {}
  ~CudaCopyWait() override;
  CudaCopyWait(const CudaCopyWait&) = delete;
  CudaCopyWait& operator=(const CudaCopyWait&) = delete;
  void computeWaitsFor(const void* dst, size_t n) override;
  uint64_t stalledNs() override;

 private:
  struct Timed {
    cudaEvent_t before = nullptr, after = nullptr;
  };
  cudaEvent_t takeEventLocked();
  void harvestLocked();  // adds the elapsed time of completed waits; never blocks

  CudaCopyLink& copies_;
  cudaStream_t compute_;
  std::mutex mutex_;
  std::deque<Timed> timed_;  // waits not yet known complete, oldest first
  std::vector<cudaEvent_t> spare_;
  uint64_t stalled_ns_ = 0;
};

class CudaOffloadDevice final : public OffloadDevice {
 public:
  // compute: the stream the backend's kernels run on (CudaBackend::stream()).
  explicit CudaOffloadDevice(cudaStream_t compute);
  std::string name() const override { return "cuda"; }
  std::shared_ptr<HostAllocator> hostAllocator() override;
  std::unique_ptr<SlotMemory> slotMemory() override;
  CopyLink& copyLink() override { return copier_; }
  SlotFence& fence() override { return fence_; }
  CopyWait* copyWait() override { return &copy_wait_; }
  double linkBytesPerSecond() override;

 private:
  CudaCopyLink copier_;
  CudaSlotFence fence_;
  CudaCopyWait copy_wait_;
  std::once_flag measured_;
  double link_bytes_per_second_ = 0;
};

}  // namespace moe
