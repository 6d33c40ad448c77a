#include "offload/offload_device.h"

#include <stdexcept>

#include "inference/cuda_library.h"

namespace moe {

std::shared_ptr<OffloadDevice> makeOffloadDevice(Backend& backend) {
  if (backend.device() == Device::kCpu) return nullptr;
  std::string why;
  if (backend.device() == Device::kCuda)
    if (const CudaLibraryApi* cuda = cudaLibrary(&why)) return cuda->makeOffloadDevice(backend);
  throw std::runtime_error("no offload device for the " + backend.name() + " backend" +
                           (why.empty() ? "" : ": " + why));
}

}  // namespace moe
