#include "inference/backend_factory.h"

#include <stdexcept>

#include "inference/cuda_library.h"

namespace moe {

bool cudaDeviceAvailable(std::string* why) {
  std::string reason;
  const CudaLibraryApi* cuda = cudaLibrary(&reason);
  if (cuda && cuda->deviceAvailable(&reason)) return true;
  if (why) *why = reason;
  return false;
}

bool cudaMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why) {
  std::string reason;
  const CudaLibraryApi* cuda = cudaLibrary(&reason);
  if (cuda && cuda->memoryInfo(free_bytes, total_bytes, &reason)) return true;
  if (why) *why = reason;
  return false;
}

std::unique_ptr<Backend> makeBackend(const std::string& name, int threads, std::string* why_not_cuda) {
  if (name == "cpu") return makeCpuBackend(threads);
  if (name != "cuda" && name != "auto")
    throw std::invalid_argument("unknown backend '" + name + "' (expected cpu, cuda or auto)");
  std::string why;
  if (cudaDeviceAvailable(&why)) {
    try {
      return cudaLibrary()->makeBackend();
    } catch (const std::exception& e) {  // e.g. out of memory for the cuBLAS workspace
      why = e.what();
    }
  }
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
