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

CudaCopyWait::~CudaCopyWait() {
  for (const Timed& t : timed_) {
    cudaEventDestroy(t.before);
    cudaEventDestroy(t.after);
  }
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
  cudaGetLastError();
}

cudaEvent_t CudaCopyWait::takeEventLocked() {
  if (!spare_.empty()) {
    cudaEvent_t e = spare_.back();
    spare_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  checkCuda(cudaEventCreate(&e), "cudaEventCreate (copy wait timing)");  // timing enabled
  return e;
}

void CudaCopyWait::computeWaitsFor(const void* dst, size_t n) {
  std::lock_guard lock(mutex_);
  harvestLocked();
  // Events go back to spare_ on every way out but a timed wait, a device fault's
  // exception included, so the destructor finds and destroys each of them.
  Timed t;
  auto give_back = [&] {
    for (cudaEvent_t e : {t.before, t.after})
      if (e) spare_.push_back(e);
  };
  try {
    t.before = takeEventLocked();
    t.after = takeEventLocked();
    checkCuda(cudaEventRecord(t.before, compute_), "cudaEventRecord (copy wait, before)");
    if (!copies_.streamWaitFor(compute_, dst, n)) {  // no copy into the range: nothing to time
      give_back();
      return;
    }
    checkCuda(cudaEventRecord(t.after, compute_), "cudaEventRecord (copy wait, after)");
  } catch (...) {
    give_back();
    throw;
  }
  timed_.push_back(t);
}

void CudaCopyWait::harvestLocked() {
  while (!timed_.empty()) {
    const Timed t = timed_.front();
    const cudaError_t st = cudaEventQuery(t.after);
    if (st == cudaErrorNotReady) {
      cudaGetLastError();
      return;
    }
    checkCuda(st, "cudaEventQuery (copy wait)");
    float ms = 0;
    checkCuda(cudaEventElapsedTime(&ms, t.before, t.after), "cudaEventElapsedTime (copy wait)");
    stalled_ns_ += static_cast<uint64_t>(double(ms) * 1e6);
    spare_.push_back(t.before);
    spare_.push_back(t.after);
    timed_.pop_front();
  }
}

uint64_t CudaCopyWait::stalledNs() {
  std::lock_guard lock(mutex_);
  harvestLocked();
  return stalled_ns_;
}

CudaOffloadDevice::CudaOffloadDevice(cudaStream_t compute)
    : fence_(compute, copier_.stream()), copy_wait_(copier_, compute) {}

std::shared_ptr<HostAllocator> CudaOffloadDevice::hostAllocator() {
  return std::make_shared<PinnedHostAllocator>();
}

std::unique_ptr<SlotMemory> CudaOffloadDevice::slotMemory() { return std::make_unique<CudaSlotMemory>(); }

double CudaOffloadDevice::linkBytesPerSecond() {
  std::call_once(measured_, [this] { link_bytes_per_second_ = measurePinnedH2DBandwidth() * 1e9; });
  return link_bytes_per_second_;
}

}  // namespace moe
