// The CUDA code (inference/cuda, offload/cuda) is a library the programs load at
// run time, libmoechat_cuda.so, so moechat and moechat-cli start and run on the
// CPU where no NVIDIA driver or CUDA runtime is installed: only that library
// links libcudart and libcublas. Where it is looked for:
//   1. $MOECHAT_CUDA_LIBRARY, a full path (the tests point it at the library
//      built on the CPU stand-in of the CUDA runtime, docs/CUDA.md);
//   2. <directory of the running program>/../lib/moechat/libmoechat_cuda.so
//      (the build tree's build/lib/moechat and an install's <prefix>/lib/moechat).
// C++ objects cross the boundary, so a library is accepted only when it was built
// with the same interface version, project version and compiler as the program.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace moe {

class Backend;
class OffloadDevice;

// Raised whenever Backend, OffloadDevice or this table changes shape.
inline constexpr int kCudaLibraryInterface = 5;

// What the CUDA code asked of the device so far, every stream together.
struct CudaWorkCounters {
  uint64_t kernel_launches = 0;  // kernels and cuBLAS calls queued
  uint64_t host_syncs = 0;       // host waits for the device (stream, event, device, synchronous copies)
  uint64_t bytes_h2d = 0;        // host -> device bytes copied
  uint64_t bytes_d2h = 0;        // device -> host bytes copied
  uint64_t stream_syncs = 0;     // of host_syncs, waits for a whole stream or the device (not an event)
  uint64_t graph_launches = 0;   // recorded steps replayed (each runs many kernels with one launch)
  // Of host_syncs, those after which the device had nothing queued: it idles until the
  // host queues more (a wait on an earlier event while later work is queued is not).
  uint64_t stalling_host_syncs = 0;
};

// What the library's entry point (kCudaLibraryEntry) returns.
struct CudaLibraryApi {
  int interface_version;  // kCudaLibraryInterface of the library's build
  const char* build;      // kCudaLibraryBuildTag of the library's build
  const char* runtime;    // "CUDA runtime 13000" or "CPU stand-in of the CUDA runtime"
  // True when a device is usable (a probe kernel ran); otherwise the reason.
  bool (*deviceAvailable)(std::string* why);
  bool (*memoryInfo)(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why);
  // The CUDA backend on the calling thread's current device. Throws CudaError
  // (a std::runtime_error) when it cannot be created.
  std::unique_ptr<Backend> (*makeBackend)();
  // The offload device for a backend makeBackend returned.
  std::shared_ptr<OffloadDevice> (*makeOffloadDevice)(Backend& backend);
  // False on the CPU stand-in: its times say nothing about a GPU's.
  bool timings_meaningful;
  // The stand-in's counters; null where the runtime does not count (the real one).
  void (*workCounters)(CudaWorkCounters* out);
};

inline constexpr const char* kCudaLibraryEntry = "moechat_cuda_library";
inline constexpr const char* kCudaLibraryFile = "libmoechat_cuda.so";

// Project version and compiler: what a loaded library must have been built with
// (MOECHAT_PROJECT_VERSION comes from the top-level CMakeLists).
inline constexpr const char kCudaLibraryBuildTag[] = "moechat " MOECHAT_PROJECT_VERSION ", " __VERSION__;

// The library's interface, loaded on first call (once per process); null when it
// is absent or unusable, with the reason in *why ("no libmoechat_cuda.so at ...",
// the loader's message such as a missing libcudart.so.13, a version mismatch).
const CudaLibraryApi* cudaLibrary(std::string* why = nullptr);

// Where the library was loaded from (empty when it was not).
std::string cudaLibraryPath();

// The loaded library's work counters; false where there are none (no library, or
// the real CUDA runtime).
bool readCudaWorkCounters(CudaWorkCounters* out);

}  // namespace moe
