// The one way the CUDA backend launches a kernel: `<<<>>>` under nvcc, and the
// CPU stand-in's queue when the CUDA code is built on it (tests/cuda_standin).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace moe::cuda {

template <typename... Params, typename... Args>
void launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                  Args&&... args) {
#if MOECHAT_CUDA_STANDIN
  ::cudastandin::launch(kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
#else
  // clang-format splits the closing >>> in a .h file.
  // clang-format off
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
#endif
}

}  // namespace moe::cuda
