// The CPU stand-in, as the test build of the CUDA library (libmoechat_cuda_standin.so)
// is built on it: its clock is the CPU's, and it counts the work it is given.
#include "cuda_standin.h"
#include "offload/cuda/cuda_runtime_facts.h"

namespace moe {
namespace {

void standinWorkCounters(CudaWorkCounters* out) {
  const cudastandin::DeviceCounters d = cudastandin::totals();
  out->kernel_launches = d.all.kernel_launches;
  out->host_syncs = d.all.host_syncs + d.device_syncs;
  out->bytes_h2d = d.all.bytes_h2d;
  out->bytes_d2h = d.all.bytes_d2h;
  out->stream_syncs = d.all.stream_syncs + d.device_syncs;
  out->graph_launches = d.all.graph_launches;
  out->stalling_host_syncs = d.all.stalling_host_syncs + d.device_syncs;
}

}  // namespace

const CudaRuntimeFacts& cudaRuntimeFacts() {
  static const CudaRuntimeFacts facts{"CPU stand-in of the CUDA runtime (tests only)", false,
                                      standinWorkCounters};
  return facts;
}

}  // namespace moe
