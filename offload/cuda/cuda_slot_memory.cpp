#include "offload/cuda/cuda_slot_memory.h"

#include <cuda_runtime.h>

#include "inference/cuda/cuda_check.h"

namespace moe {

uint8_t* CudaSlotMemory::allocate(size_t bytes) {
  return static_cast<uint8_t*>(cudaMallocOrThrow(bytes, "expert cache slab"));
}

void CudaSlotMemory::deallocate(uint8_t* p, size_t bytes) {
  (void)bytes;
  if (!p) return;
  // Called from a destructor: never throw. A copy or kernel may still use the
  // slab, so wait for the whole device before freeing it.
  cudaDeviceSynchronize();
  cudaFree(p);
  cudaGetLastError();
}

}  // namespace moe
