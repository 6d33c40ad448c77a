// The expert cache's slab in device memory: one cudaMalloc for all slots.
#pragma once

#include <cstddef>
#include <cstdint>

#include "offload/slot_slab.h"

namespace moe {

class CudaSlotMemory final : public SlotMemory {
 public:
  // Throws CudaOutOfMemory naming the slab size and the device's free memory.
  uint8_t* allocate(size_t bytes) override;
  void deallocate(uint8_t* p, size_t bytes) override;  // waits for the device first
};

}  // namespace moe
