// The entry point of libmoechat_cuda.so (and of its build on the CPU stand-in):
// the table inference/cuda_library.cpp looks up after loading the library.

#include <cuda_runtime.h>

#include <stdexcept>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda_library.h"
#include "offload/cuda/cuda_offload_device.h"
#include "offload/cuda/cuda_runtime_facts.h"

namespace moe {
namespace {

bool deviceAvailable(std::string* why) {
  std::string reason;
  int count = 0;
  const cudaError_t st = cudaGetDeviceCount(&count);
  if (st != cudaSuccess) {
    // Without a driver this is cudaErrorInsufficientDriver (35), not cudaErrorNoDevice.
    reason = std::string("no usable CUDA device: ") + cudaGetErrorName(st) + ": " + cudaGetErrorString(st);
    cudaGetLastError();
  } else if (count == 0) {
    reason = "no CUDA device";
  } else {
    try {
      cuda::launchProbe(nullptr);
      checkCuda(cudaDeviceSynchronize(), "probe kernel");
      return true;
    } catch (const std::exception& e) {
      reason = std::string("CUDA device present but unusable: ") + e.what();
    }
  }
  if (why) *why = reason;
  return false;
}

bool memoryInfo(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why) {
  if (!deviceAvailable(why)) return false;
  size_t free_b = 0, total_b = 0;
  const cudaError_t st = cudaMemGetInfo(&free_b, &total_b);
  if (st != cudaSuccess) {
    if (why) *why = std::string("cudaMemGetInfo: ") + cudaGetErrorString(st);
    cudaGetLastError();
    return false;
  }
  *free_bytes = free_b;
  *total_bytes = total_b;
  return true;
}

std::unique_ptr<Backend> makeCudaBackend() { return std::make_unique<CudaBackend>(); }

std::shared_ptr<OffloadDevice> makeCudaOffloadDevice(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (!cuda)
    throw std::invalid_argument("the CUDA offload device needs a CUDA backend, not " + backend.name());
  return std::make_shared<CudaOffloadDevice>(cuda->stream());
}

// Built on first use: the runtime's facts come from the file of the build's runtime.
const CudaLibraryApi& api() {
  static const CudaLibraryApi table{kCudaLibraryInterface,
                                    kCudaLibraryBuildTag,
                                    cudaRuntimeFacts().name,
                                    deviceAvailable,
                                    memoryInfo,
                                    makeCudaBackend,
                                    makeCudaOffloadDevice,
                                    cudaRuntimeFacts().timings_meaningful,
                                    cudaRuntimeFacts().work_counters};
  return table;
}

}  // namespace
}  // namespace moe

extern "C" __attribute__((visibility("default"))) const moe::CudaLibraryApi* moechat_cuda_library() {
  return &moe::api();
}
