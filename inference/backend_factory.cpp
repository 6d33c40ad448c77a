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

DeviceChoice parseDeviceChoice(const std::string& name) {
  for (DeviceChoice c : {DeviceChoice::kAuto, DeviceChoice::kCpu, DeviceChoice::kCuda})
    if (name == deviceChoiceName(c)) return c;
  throw std::invalid_argument("unknown backend '" + name + "' (expected cpu, cuda or auto)");
}

const char* deviceChoiceName(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::kAuto: return "auto";
    case DeviceChoice::kCpu: return "cpu";
    case DeviceChoice::kCuda: return "cuda";
  }
  return "?";
}

std::unique_ptr<Backend> makeBackend(DeviceChoice choice, int threads, std::string* why_not_cuda) {
  if (choice == DeviceChoice::kCpu) return makeCpuBackend(threads);
  std::string why;
  if (cudaDeviceAvailable(&why)) {
    try {
      return cudaLibrary()->makeBackend();
    } catch (const std::exception& e) {  // e.g. out of memory for the cuBLAS workspace
      why = e.what();
    }
  }
  if (why_not_cuda) *why_not_cuda = why;
  if (choice == DeviceChoice::kCuda) throw std::runtime_error("cuda backend unavailable: " + why);
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
