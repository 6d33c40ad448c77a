// Where the host expert store's buffer comes from: plain aligned memory on the
// CPU path, pinned (page-locked) memory when a GPU copies from it, so each
// host->device copy is a true async DMA at full link speed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // At least 4096-byte aligned; throws (std::bad_alloc, CudaOutOfMemory) on failure.
  virtual uint8_t* allocate(size_t bytes) = 0;
  virtual void deallocate(uint8_t* p, size_t bytes) = 0;  // null is a no-op
  virtual const char* name() const = 0;                   // "aligned" / "pinned", for logs
};

}  // namespace moe
