#include "offload/copy_engine.h"

#include <cstring>

namespace moe {

void HostCopyEngine::copy(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
  bytes_.fetch_add(n, std::memory_order_relaxed);
  copies_.fetch_add(1, std::memory_order_relaxed);
  if (bytes_per_second_ > 0.0) {
    std::lock_guard<std::mutex> lock(clock_mutex_);
    simulated_seconds_ += static_cast<double>(n) / bytes_per_second_;
  }
}

double HostCopyEngine::simulatedSeconds() const {
  std::lock_guard<std::mutex> lock(clock_mutex_);
  return simulated_seconds_;
}

}  // namespace moe
