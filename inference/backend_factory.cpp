#include "inference/backend_factory.h"

#include <stdexcept>

#if MOECHAT_HAVE_CUDA
#include <cuda_runtime.h>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#endif

namespace moe {

bool cudaDeviceAvailable(std::string* why) {
  std::string reason;
#if MOECHAT_HAVE_CUDA
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
#else
  reason = "built without CUDA";
#endif
  if (why) *why = reason;
  return false;
}

bool cudaMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why) {
  if (!cudaDeviceAvailable(why)) return false;
#if MOECHAT_HAVE_CUDA
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
#else
  (void)free_bytes;
  (void)total_bytes;
  return false;
#endif
}

std::unique_ptr<Backend> makeBackend(const std::string& name, int threads, std::string* why_not_cuda) {
  if (name == "cpu") return makeCpuBackend(threads);
  if (name != "cuda" && name != "auto")
    throw std::invalid_argument("unknown backend '" + name + "' (expected cpu, cuda or auto)");
  std::string why;
#if MOECHAT_HAVE_CUDA
  if (cudaDeviceAvailable(&why)) {
    try {
      return std::make_unique<CudaBackend>();
    } catch (const std::exception& e) {  // e.g. out of memory for the cuBLAS workspace
      why = e.what();
    }
  }
#else
  cudaDeviceAvailable(&why);
#endif
  if (why_not_cuda) *why_not_cuda = why;
  if (name == "cuda") throw std::runtime_error("cuda backend unavailable: " + why);
  return makeCpuBackend(threads);
}

std::vector<std::vector<ExpertWeights>> prepareExperts(Backend& backend,
                                                       const std::vector<std::vector<ExpertWeights>>& table) {
  auto out = table;
  for (auto& layer : out)
    for (ExpertWeights& e : layer) {
      e.gate = backend.prepareWeight(e.gate);
      e.up = backend.prepareWeight(e.up);
      e.down = backend.prepareWeight(e.down);
    }
  return out;
}

}  // namespace moe
