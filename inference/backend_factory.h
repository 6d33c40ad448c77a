// Picks a compute backend by name. The CUDA backend comes from the CUDA library
// loaded at run time (inference/cuda_library.h); without it only the CPU backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/expert_source.h"

namespace moe {

// True when the CUDA library loaded and a device is usable (a probe kernel ran).
// Otherwise false, with the reason in *why (no library, the loader's or the driver's error).
bool cudaDeviceAvailable(std::string* why = nullptr);

// Free and total memory of the CUDA device (cudaMemGetInfo). False (with the
// reason in *why) where no device is usable.
bool cudaMemoryInfo(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why = nullptr);

// What to compute on: the GPU when one is usable else the CPU (kAuto), or one of them.
enum class DeviceChoice { kAuto, kCpu, kCuda };

// The one parser of a device name ("auto", "cpu", "cuda"; settings, command lines).
// Throws std::invalid_argument for any other name.
DeviceChoice parseDeviceChoice(const std::string& name);
const char* deviceChoiceName(DeviceChoice choice);

// kAuto: CUDA when available, else the CPU backend, with the reason CUDA was not
// used in *why_not_cuda. kCuda without a usable device throws std::runtime_error
// naming the reason. threads: the CPU backend's thread count (<= 0: one per
// hardware thread).
std::unique_ptr<Backend> makeBackend(DeviceChoice choice, int threads = 0,
                                     std::string* why_not_cuda = nullptr);

// Every routed expert of `table` ([n_layer][n_expert], e.g. Model::hostExperts())
// prepared for `backend`: the identity for the CPU backend, one device upload per
// matrix for CUDA (for models whose experts all fit in VRAM; a ResidentExpertSource
// over the result then serves them from the device).
std::vector<std::vector<ExpertWeights>> prepareExperts(Backend& backend,
                                                       const std::vector<std::vector<ExpertWeights>>& table);

}  // namespace moe
