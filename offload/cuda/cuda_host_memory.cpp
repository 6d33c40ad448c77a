#include "offload/cuda/cuda_host_memory.h"

#include <cuda_runtime.h>

#include "inference/cuda/cuda_check.h"

namespace moe {

uint8_t* CudaPinnedAllocator::allocate(size_t bytes) {
  auto* p = static_cast<uint8_t*>(cudaHostAllocOrThrow(bytes, "host expert store"));
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

void CudaPinnedAllocator::deallocate(uint8_t* p, size_t bytes) {
  if (!p) return;
  // Called from the store's destructor: never throw (after a device fault cudaFreeHost
  // reports the fault; the pinned pages go with the context).
  cudaFreeHost(p);
  cudaGetLastError();
  bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

CudaHostRegistration::CudaHostRegistration(void* p, size_t bytes) : p_(p), bytes_(bytes) {
  checkCuda(cudaHostRegister(p, bytes, cudaHostRegisterPortable),
            ("cudaHostRegister of " + formatBytes(bytes)).c_str());
}

CudaHostRegistration::~CudaHostRegistration() {
  cudaHostUnregister(p_);
  cudaGetLastError();
}

bool isPinnedHostMemory(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

}  // namespace moe
