// Picks a compute backend by name. Compiled with and without CUDA: a build
// without it offers only the CPU backend.
#pragma once

#include <memory>
#include <string>

#include "inference/backend.h"

namespace moe {

// True when this build has CUDA and a device is usable (a probe kernel ran). Otherwise
// false, with the reason in *why ("built without CUDA", the driver's error, ...).
bool cudaDeviceAvailable(std::string* why = nullptr);

// name: "cpu", "cuda" or "auto" (CUDA when available, else the CPU backend with the
// reason CUDA was not used in *why_not_cuda). "cuda" without a usable device throws
// std::runtime_error naming the reason; any other name throws std::invalid_argument.
// threads: the CPU backend's thread count (<= 0: one per hardware thread).
std::unique_ptr<Backend> makeBackend(const std::string& name, int threads = 0,
                                     std::string* why_not_cuda = nullptr);

}  // namespace moe
