// The entry point of libmoechat_cuda.so (and of its build on the CPU stand-in):
// the table inference/cuda_library.cpp looks up after loading the library.

#include <cuda_runtime.h>

#include <stdexcept>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda_library.h"
#include "offload/cuda/cuda_offload_device.h"

#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

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

#if MOECHAT_CUDA_STANDIN
constexpr const char kRuntime[] = "CPU stand-in of the CUDA runtime (tests only)";
constexpr bool kTimingsMeaningful = false;

void workCounters(CudaWorkCounters* out) {
  const cudastandin::DeviceCounters d = cudastandin::totals();
  out->kernel_launches = d.all.kernel_launches;
  out->host_syncs = d.all.host_syncs + d.device_syncs;
  out->bytes_h2d = d.all.bytes_h2d;
  out->bytes_d2h = d.all.bytes_d2h;
  out->stream_syncs = d.all.stream_syncs + d.device_syncs;
  out->graph_launches = d.all.graph_launches;
  out->stalling_host_syncs = d.all.stalling_host_syncs + d.device_syncs;
}
constexpr auto kWorkCounters = workCounters;
#else
constexpr bool kTimingsMeaningful = true;
constexpr void (*kWorkCounters)(CudaWorkCounters*) = nullptr;
#define MOECHAT_STRINGIFY2(x) #x
#define MOECHAT_STRINGIFY(x) MOECHAT_STRINGIFY2(x)
constexpr const char kRuntime[] = "CUDA runtime " MOECHAT_STRINGIFY(CUDART_VERSION);
#endif

const CudaLibraryApi kApi{kCudaLibraryInterface, kCudaLibraryBuildTag, kRuntime,
                          deviceAvailable,       memoryInfo,           makeCudaBackend,
                          makeCudaOffloadDevice, kTimingsMeaningful,   kWorkCounters};

}  // namespace
}  // namespace moe

extern "C" __attribute__((visibility("default"))) const moe::CudaLibraryApi* moechat_cuda_library() {
  return &moe::kApi;
}
