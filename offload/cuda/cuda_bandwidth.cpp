// The pinned host -> device bandwidth probe of cuda_copy_link.h.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "inference/cuda/cuda_check.h"
#include "offload/cuda/cuda_copy_link.h"

namespace moe {
namespace {

// Owns everything the probe allocates, released in any exit path.
struct Probe {
  void* host = nullptr;
  void* dev = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Probe() {
    if (stream) cudaStreamSynchronize(stream);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
    if (dev) cudaFree(dev);
    if (host) cudaFreeHost(host);
    cudaGetLastError();
  }
};

}  // namespace

std::vector<BandwidthSample> measurePinnedH2DBandwidthSamples(const std::vector<size_t>& sizes, int reps) {
  if (sizes.empty() || reps <= 0) throw std::invalid_argument("bandwidth probe: needs sizes and reps > 0");
  const size_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  if (max_bytes == 0) throw std::invalid_argument("bandwidth probe: sizes must be > 0");
  Probe p;
  p.host = cudaHostAllocOrThrow(max_bytes, "bandwidth probe");
  std::memset(p.host, 0x5a, max_bytes);  // touch every page before timing
  p.dev = cudaMallocOrThrow(max_bytes, "bandwidth probe");
  checkCuda(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking), "cudaStreamCreate (probe)");
  checkCuda(cudaEventCreate(&p.start), "cudaEventCreate (probe)");
  checkCuda(cudaEventCreate(&p.stop), "cudaEventCreate (probe)");

  std::vector<BandwidthSample> out;
  for (size_t bytes : sizes) {
    checkCuda(cudaMemcpyAsync(p.dev, p.host, bytes, cudaMemcpyHostToDevice, p.stream), "probe warm-up copy");
    checkCuda(cudaEventRecord(p.start, p.stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i)
      checkCuda(cudaMemcpyAsync(p.dev, p.host, bytes, cudaMemcpyHostToDevice, p.stream), "probe copy");
    checkCuda(cudaEventRecord(p.stop, p.stream), "cudaEventRecord");
    checkCuda(cudaEventSynchronize(p.stop), "cudaEventSynchronize");
    float ms = 0.0f;
    checkCuda(cudaEventElapsedTime(&ms, p.start, p.stop), "cudaEventElapsedTime");
    const double seconds = std::max(static_cast<double>(ms), 1e-3) / 1e3;  // events resolve ~0.5 us
    out.push_back({bytes, static_cast<double>(bytes) * reps / seconds / 1e9});
  }
  return out;
}

double measurePinnedH2DBandwidth() {
  double best = 0.0;
  for (const auto& s : measurePinnedH2DBandwidthSamples({size_t{1} << 20, size_t{8} << 20, size_t{64} << 20}))
    best = std::max(best, s.gb_per_s);
  return best;
}

}  // namespace moe
