// The CUDA toolkit's runtime, as libmoechat_cuda.so is built on it.
#include <cuda_runtime.h>

#include "offload/cuda/cuda_runtime_facts.h"

namespace moe {

#define MOECHAT_STRINGIFY2(x) #x
#define MOECHAT_STRINGIFY(x) MOECHAT_STRINGIFY2(x)

const CudaRuntimeFacts& cudaRuntimeFacts() {
  static const CudaRuntimeFacts facts{"CUDA runtime " MOECHAT_STRINGIFY(CUDART_VERSION), true, nullptr};
  return facts;
}

}  // namespace moe
