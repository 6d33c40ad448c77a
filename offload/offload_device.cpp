#include "offload/offload_device.h"

#include <stdexcept>

#if MOECHAT_HAVE_CUDA
#include "inference/cuda/cuda_backend.h"
#include "offload/cuda/cuda_offload_device.h"
#endif

namespace moe {

std::shared_ptr<OffloadDevice> makeOffloadDevice(Backend& backend) {
  if (backend.name().rfind("cpu", 0) == 0) return nullptr;
#if MOECHAT_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend))
    return std::make_shared<CudaOffloadDevice>(cuda->stream());
#endif
  throw std::runtime_error("no offload device for the " + backend.name() + " backend in this build");
}

}  // namespace moe
