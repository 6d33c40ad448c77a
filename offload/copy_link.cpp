#include "offload/copy_link.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace moe {

void HostCopyLink::copy(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
  bytes_.fetch_add(n, std::memory_order_relaxed);
  copies_.fetch_add(1, std::memory_order_relaxed);
  if (bytes_per_second_ <= 0.0) return;
  const double seconds = static_cast<double>(n) / bytes_per_second_;
  std::chrono::steady_clock::time_point done;
  {
    std::lock_guard<std::mutex> lock(clock_mutex_);
    simulated_seconds_ += seconds;
    if (!paced_) return;
    link_free_at_ = std::max(link_free_at_, std::chrono::steady_clock::now()) +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(seconds));
    done = link_free_at_;
  }
  // Slices of 10 ms, so that an interrupt ends the wait soon.
  for (auto now = std::chrono::steady_clock::now(); now < done; now = std::chrono::steady_clock::now()) {
    const std::atomic<bool>* flag = interrupt_.load(std::memory_order_acquire);
    if (flag != nullptr && flag->load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(clock_mutex_);
      link_free_at_ = std::min(link_free_at_, now);  // queued pacing is dropped with the run
      return;
    }
    std::this_thread::sleep_until(std::min(done, now + std::chrono::milliseconds(10)));
  }
}

double measureHostCopyBandwidth(size_t bytes) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best > 0 ? double(bytes) / best : 0.0;
}

double HostCopyLink::simulatedSeconds() const {
  std::lock_guard<std::mutex> lock(clock_mutex_);
  return simulated_seconds_;
}

}  // namespace moe
