// Pinned (page-locked) host memory for the host expert store, so host->device
// expert copies run as true async DMA at full link speed (pageable memory would
// be staged through a driver buffer, and cudaMemcpyAsync would block).
//
// Two ways in: CudaPinnedAllocator allocates fresh pinned memory
// (cudaHostAlloc), for a store that takes an allocator; CudaHostRegistration
// pins memory that already exists (cudaHostRegister), for a store built before.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace moe {

class CudaPinnedAllocator {
 public:
  // Throws CudaOutOfMemory (naming the size) when the driver refuses.
  uint8_t* allocate(size_t bytes);
  void deallocate(uint8_t* p, size_t bytes);  // p from allocate(); null is a no-op; never throws
  uint64_t bytesAllocated() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> bytes_{0};
};

// Pins [p, p + bytes) for its lifetime. Throws CudaError when the range cannot be
// registered (e.g. more than the OS lets a process lock).
class CudaHostRegistration {
 public:
  CudaHostRegistration(void* p, size_t bytes);
  ~CudaHostRegistration();
  CudaHostRegistration(const CudaHostRegistration&) = delete;
  CudaHostRegistration& operator=(const CudaHostRegistration&) = delete;
  size_t bytes() const { return bytes_; }

 private:
  void* p_;
  size_t bytes_;
};

// True when p is page-locked host memory the CUDA driver knows (allocated pinned or registered).
bool isPinnedHostMemory(const void* p);

}  // namespace moe
