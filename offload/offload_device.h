// The device side of the offload engine when a GPU computes: pinned host memory
// for the expert store, the cache slab in device memory, the copy engine on its
// own stream, the fence that keeps copies from overwriting slots still being
// read, and the measured host->device bandwidth. Without one, OffloadEngine runs
// its CPU path (host memory as "device" memory, an optional simulated link).
// CUDA-free header: the CUDA implementation lives in offload/cuda/.
#pragma once

#include <memory>
#include <string>

#include "inference/backend.h"
#include "offload/copy_link.h"
#include "offload/host_allocator.h"
#include "offload/slot_fence.h"
#include "offload/slot_slab.h"

namespace moe {

class OffloadDevice {
 public:
  virtual ~OffloadDevice() = default;
  virtual std::string name() const = 0;
  virtual std::shared_ptr<HostAllocator> hostAllocator() = 0;
  virtual std::unique_ptr<SlotMemory> slotMemory() = 0;
  virtual CopyLink& copyLink() = 0;
  virtual SlotFence& fence() = 0;
  // The compute side's device-side wait for copies (null: the host waits for READY).
  virtual CopyWait* copyWait() { return nullptr; }
  // Pinned host->device bytes per second, measured once on first call.
  virtual double linkBytesPerSecond() = 0;
};

// The device for `backend`: null for a CPU backend. For the CUDA backend, its
// compute stream is what the fence marks. Throws std::runtime_error for a
// backend this build cannot offload to.
std::shared_ptr<OffloadDevice> makeOffloadDevice(Backend& backend);

}  // namespace moe
