// Host -> device copies behind one interface: the CUDA path will implement it
// with cudaMemcpyAsync on a copy stream; HostCopyEngine is memcpy. An optional
// simulated link turns bandwidth into a *virtual clock*: each copy adds
// n / bytes_per_second seconds to a counter instead of sleeping, so tests and
// benches get "time the link would take" deterministically.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace moe {

class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Copies n bytes; returns when dst holds them.
  virtual void copy(void* dst, const void* src, size_t n) = 0;
  virtual uint64_t bytesCopied() const = 0;
  virtual uint64_t copies() const = 0;
  // Seconds the simulated link would have been busy (0 without a simulated link).
  virtual double simulatedSeconds() const = 0;
};

class HostCopyEngine : public CopyEngine {
 public:
  // bytes_per_second <= 0: no simulated link (virtual clock stays 0).
  explicit HostCopyEngine(double bytes_per_second = 0.0) : bytes_per_second_(bytes_per_second) {}
  void copy(void* dst, const void* src, size_t n) override;
  uint64_t bytesCopied() const override { return bytes_.load(std::memory_order_relaxed); }
  uint64_t copies() const override { return copies_.load(std::memory_order_relaxed); }
  double simulatedSeconds() const override;
  double bandwidth() const { return bytes_per_second_; }

 private:
  const double bytes_per_second_;
  std::atomic<uint64_t> bytes_{0}, copies_{0};
  mutable std::mutex clock_mutex_;
  double simulated_seconds_ = 0.0;
};

}  // namespace moe
