#include "offload/cuda/cuda_offload_device.h"

#include "inference/cuda/cuda_check.h"
#include "offload/cuda/cuda_host_memory.h"
#include "offload/cuda/cuda_slot_memory.h"

namespace moe {
namespace {

class PinnedHostAllocator final : public HostAllocator {
 public:
  uint8_t* allocate(size_t bytes) override { return pinned_.allocate(bytes); }
  void deallocate(uint8_t* p, size_t bytes) override { pinned_.deallocate(p, bytes); }
  const char* name() const override { return "pinned"; }

 private:
  CudaPinnedAllocator pinned_;
};

}  // namespace

CudaSlotFence::CudaSlotFence(cudaStream_t compute, cudaStream_t copy) : compute_(compute), copy_(copy) {
  checkCuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate (slot fence)");
}

CudaSlotFence::~CudaSlotFence() {
  if (event_) cudaEventDestroy(event_);
}

void CudaSlotFence::readsQueued() {
  std::lock_guard lock(mutex_);
  checkCuda(cudaEventRecord(event_, compute_), "cudaEventRecord (slot fence)");
  ++marks_;
}

void CudaSlotFence::beforeOverwrite(int /*slot*/) {
  std::lock_guard lock(mutex_);
  if (marks_ == 0) return;  // nothing computed yet: no read to wait for
  checkCuda(cudaStreamWaitEvent(copy_, event_, 0), "cudaStreamWaitEvent (slot fence)");
}

uint64_t CudaSlotFence::marks() const {
  std::lock_guard lock(mutex_);
  return marks_;
}

CudaOffloadDevice::CudaOffloadDevice(cudaStream_t compute) : fence_(compute, copier_.stream()) {}

std::shared_ptr<HostAllocator> CudaOffloadDevice::hostAllocator() {
  return std::make_shared<PinnedHostAllocator>();
}

std::unique_ptr<SlotMemory> CudaOffloadDevice::slotMemory() { return std::make_unique<CudaSlotMemory>(); }

double CudaOffloadDevice::linkBytesPerSecond() {
  std::call_once(measured_, [this] { link_bytes_per_second_ = measurePinnedH2DBandwidth() * 1e9; });
  return link_bytes_per_second_;
}

}  // namespace moe
