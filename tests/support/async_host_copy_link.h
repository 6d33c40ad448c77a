// A test double (not part of the engine): host -> "device" copies on their own
// thread, the CPU stand-in for a GPU copy stream. copyAsync queues a memcpy and returns a ticket; copies run
// one at a time in queue order (a FIFO stream), so waiting for a ticket also waits for every earlier copy.
// With it the transfer worker's asynchronous path (several chunks in flight, the compute side waiting per
// copy rather than per READY expert) runs and is tested on machines without a GPU.
//
// hold() / release(n) / resume() gate the copy thread so a test decides when
// each queued copy completes (scheduling checked by event order, never by time).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "offload/copy_link.h"
#include "offload/slot_fence.h"

namespace moe {

class AsyncHostCopyLink final : public CopyLink {
 public:
  AsyncHostCopyLink();
  ~AsyncHostCopyLink() override;  // completes every queued copy first
  AsyncHostCopyLink(const AsyncHostCopyLink&) = delete;
  AsyncHostCopyLink& operator=(const AsyncHostCopyLink&) = delete;

  void copy(void* dst, const void* src, size_t n) override { waitCopy(copyAsync(dst, src, n)); }
  CopyTicket copyAsync(void* dst, const void* src, size_t n) override;
  void waitCopy(CopyTicket ticket) override;
  bool copyDone(CopyTicket ticket) override;
  // Blocks until no queued or running copy writes any byte of [dst, dst + n).
  void waitRange(const void* dst, size_t n);

  uint64_t bytesCopied() const override;  // completed copies only
  uint64_t copies() const override;
  double simulatedSeconds() const override { return 0.0; }
  uint64_t queued() const;  // tickets handed out (copies issued)
  // Destinations of the copies queued or running, oldest first (what is "on the stream").
  std::vector<const void*> inFlight() const;

  // Test gate: after hold(), queued copies wait until release(n) lets n more run
  // (or resume() lets all run).
  void hold();
  void release(int n);
  void resume();

 private:
  struct Job {
    CopyTicket ticket;
    uint8_t* dst;
    const uint8_t* src;
    size_t n;
  };
  void run();

  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Job> jobs_;  // queued and running, in ticket order
  CopyTicket next_ticket_ = 1, completed_ = 0;
  uint64_t bytes_ = 0, copies_ = 0;
  bool held_ = false;
  long allowance_ = 0;  // copies that may run while held
  bool stop_ = false;
  std::thread thread_;
};

// The CPU counterpart of the GPU's device-side wait: the "device" is the host,
// so the compute side waits here for the copies into the range it reads next.
class HostCopyWait final : public CopyWait {
 public:
  explicit HostCopyWait(AsyncHostCopyLink& engine) : engine_(engine) {}
  void computeWaitsFor(const void* dst, size_t n) override { engine_.waitRange(dst, n); }

 private:
  AsyncHostCopyLink& engine_;
};

}  // namespace moe
