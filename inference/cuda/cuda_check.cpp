#include "inference/cuda/cuda_check.h"

#include <cstdio>

namespace moe {

std::string formatBytes(size_t bytes) {
  char buf[64];
  if (bytes >= (size_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (size_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  return buf;
}

void checkCuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  const std::string msg =
      std::string(what) + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
  if (status == cudaErrorMemoryAllocation) throw CudaOutOfMemory(msg);
  throw CudaError(msg);
}

void checkCublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  // cuBLAS says only that its kernel failed; a device fault behind it (sticky, so
  // every later call fails the same way) is the reason worth reporting.
  const cudaError_t device_error = cudaGetLastError();
  std::string msg =
      std::string(what) + ": cuBLAS " + cublasGetStatusName(status) + ": " + cublasGetStatusString(status);
  if (device_error != cudaSuccess)
    msg += std::string(" (device: ") + cudaGetErrorName(device_error) + ": " +
           cudaGetErrorString(device_error) + ")";
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw CudaOutOfMemory(msg);
  throw CudaError(msg);
}

void checkLaunch(const char* kernel) { checkCuda(cudaGetLastError(), kernel); }

void* cudaMallocOrThrow(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (status == cudaSuccess) return p;
  cudaGetLastError();
  if (status == cudaErrorMemoryAllocation) {
    size_t free_b = 0, total_b = 0;
    std::string have;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      have = " (" + formatBytes(free_b) + " free of " + formatBytes(total_b) + ")";
    cudaGetLastError();
    throw CudaOutOfMemory(std::string("GPU out of memory: ") + what + " needs " + formatBytes(bytes) +
                          " of device memory" + have);
  }
  checkCuda(status, what);
  return nullptr;
}

void* cudaHostAllocOrThrow(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t status = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
  if (status == cudaSuccess) return p;
  cudaGetLastError();
  if (status == cudaErrorMemoryAllocation)
    throw CudaOutOfMemory(std::string("out of pinned host memory: ") + what + " needs " + formatBytes(bytes));
  checkCuda(status, what);
  return nullptr;
}

}  // namespace moe
