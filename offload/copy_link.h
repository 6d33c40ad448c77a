// Host -> device copies behind one interface: CudaCopyLink (offload/cuda/) is
// cudaMemcpyAsync on a copy stream; HostCopyLink is memcpy; the tests'
// AsyncHostCopyLink is memcpy on its own thread, the CPU stand-in for a copy stream. An optional
// simulated link turns bandwidth into a *virtual clock*: each copy adds
// n / bytes_per_second seconds to a counter instead of sleeping, so tests and
// benches get "time the link would take" deterministically. A *paced* link also
// makes each copy take that long in wall time (it sleeps until the link's own
// clock, so back-to-back copies queue), which lets a CPU-only bench show what
// overlapping copies with compute buys; tests never rely on it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace moe {

// One queued copy of an asynchronous engine; 0 is a copy that completed already.
using CopyTicket = uint64_t;

class CopyLink {
 public:
  virtual ~CopyLink() = default;
  // Copies n bytes; returns when dst holds them.
  virtual void copy(void* dst, const void* src, size_t n) = 0;
  // Queues the copy and returns at once when the engine is asynchronous (a GPU's
  // copy stream); a synchronous engine copies here and returns 0. Copies complete
  // in the order they were queued. src must stay unchanged until completion.
  virtual CopyTicket copyAsync(void* dst, const void* src, size_t n) {
    copy(dst, src, n);
    return 0;
  }
  // Blocks until the ticket's copy is complete (0: at once).
  virtual void waitCopy(CopyTicket ticket) { (void)ticket; }
  // True when the ticket's copy is complete; never blocks.
  virtual bool copyDone(CopyTicket ticket) {
    (void)ticket;
    return true;
  }
  virtual uint64_t bytesCopied() const = 0;
  virtual uint64_t copies() const = 0;
  // Seconds the simulated link would have been busy (0 without a simulated link).
  virtual double simulatedSeconds() const = 0;
  // Host->device bytes per second this engine moves (simulated, or measured at
  // start by a real engine); 0 when unknown. The cpu-experts rule uses it.
  virtual double linkBytesPerSecond() const { return 0.0; }
};

class HostCopyLink : public CopyLink {
 public:
  // bytes_per_second <= 0: no simulated link (virtual clock stays 0).
  // paced: each copy also lasts n / bytes_per_second in wall time.
  explicit HostCopyLink(double bytes_per_second = 0.0, bool paced = false)
      : bytes_per_second_(bytes_per_second), paced_(paced && bytes_per_second > 0.0) {}
  void copy(void* dst, const void* src, size_t n) override;
  uint64_t bytesCopied() const override { return bytes_.load(std::memory_order_relaxed); }
  uint64_t copies() const override { return copies_.load(std::memory_order_relaxed); }
  double simulatedSeconds() const override;
  double bandwidth() const { return bytes_per_second_; }
  double linkBytesPerSecond() const override { return bytes_per_second_; }
  bool paced() const { return paced_; }
  // While *flag is true (a cancelled reply), paced copies stop waiting for the link:
  // the bytes are copied already and the pacing is only a simulation. Null: none.
  void setInterrupt(const std::atomic<bool>* flag) { interrupt_.store(flag, std::memory_order_release); }

 private:
  const double bytes_per_second_;
  const bool paced_;
  std::chrono::steady_clock::time_point link_free_at_{};  // paced: when the link finishes its last copy
  std::atomic<uint64_t> bytes_{0}, copies_{0};
  mutable std::mutex clock_mutex_;
  double simulated_seconds_ = 0.0;
  std::atomic<const std::atomic<bool>*> interrupt_{nullptr};
};

// Bytes per second of plain host memcpy (best of 3 copies of `bytes`): the "link"
// of the CPU path when no simulated link is set.
double measureHostCopyBandwidth(size_t bytes = size_t(32) << 20);

}  // namespace moe
