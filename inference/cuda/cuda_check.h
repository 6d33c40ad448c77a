// Error handling for every CUDA runtime and cuBLAS call: a failed call becomes a
// C++ exception naming the call and the error, and an allocation that does not fit
// becomes CudaOutOfMemory with the sizes in its message (never an abort).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "inference/device_error.h"

namespace moe {

class CudaError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

class CudaOutOfMemory : public CudaError {
 public:
  using CudaError::CudaError;
};

// Throws CudaError "<what>: <cuda error name>: <description>" unless status is cudaSuccess.
// The error is cleared first (cudaGetLastError) so a later, unrelated check does not see it.
void checkCuda(cudaError_t status, const char* what);
void checkCublas(cublasStatus_t status, const char* what);
// Checks the launch of the kernel just queued (bad configuration, missing kernel image).
void checkLaunch(const char* kernel);

// cudaMalloc that throws CudaOutOfMemory with the request and the device's free/total memory.
void* cudaMallocOrThrow(size_t bytes, const char* what);
// cudaHostAlloc (pinned) likewise.
void* cudaHostAllocOrThrow(size_t bytes, const char* what);

std::string formatBytes(size_t bytes);  // "1.5 GiB", "12.0 MiB", "512 B"

}  // namespace moe
