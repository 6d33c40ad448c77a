#include "offload/offload_device.h"

#include <stdexcept>

#include "inference/cuda_library.h"

namespace moe {

std::shared_ptr<OffloadDevice> makeOffloadDevice(Backend& backend) {
  if (backend.name().rfind("cpu", 0) == 0) return nullptr;
  std::string why;
  if (backend.name().rfind("cuda", 0) == 0)
    if (const CudaLibraryApi* cuda = cudaLibrary(&why)) return cuda->makeOffloadDevice(backend);
  throw std::runtime_error("no offload device for the " + backend.name() + " backend" +
                           (why.empty() ? "" : ": " + why));
}

}  // namespace moe
