// What the CUDA runtime the library is built on says about itself, for the library's
// entry point (cuda_library_entry.cpp). Defined once per build of the library:
// cuda_runtime_facts_toolkit.cpp for the CUDA toolkit's runtime (libmoechat_cuda.so),
// tests/cuda_standin/runtime_facts.cpp for the CPU stand-in the GPU tests run on.
#pragma once

#include "inference/cuda_library.h"

namespace moe {

struct CudaRuntimeFacts {
  const char* name;         // "CUDA runtime 13000", or the stand-in's name
  bool timings_meaningful;  // false: its clock says nothing about a GPU's
  // Counters of the work the runtime was given; null where it counts nothing.
  void (*work_counters)(CudaWorkCounters* out);
};

const CudaRuntimeFacts& cudaRuntimeFacts();

}  // namespace moe
