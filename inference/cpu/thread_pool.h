// A small persistent pool for data-parallel loops. The calling thread takes part
// in every loop, so a pool of N threads starts N - 1 workers. Loops are split
// into chunks handed out through an atomic counter; a chunk is a share of what is
// left (guided scheduling), so the first ones are large and the last ones are one
// grain: the threads finish a loop within about one grain of each other.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace moe {

// Physical cores this process may run on (SMT siblings counted once): memory-bound
// matmuls gain nothing from a core's second hardware thread. Falls back to
// hardware_concurrency() where the topology cannot be read.
int physicalCores();

class ThreadPool {
 public:
  // threads <= 0: physicalCores(). threads == 1 runs everything inline. Throws
  // std::runtime_error, with every started worker joined, when the system refuses a
  // thread. Between loops a worker polls for the next one for kSpinMicros (a decode
  // step issues hundreds of loops of ~50 us each, and waking a sleeping thread costs
  // ~10-20 us), then sleeps on a condition variable: an idle pool uses no CPU.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), each at least `grain`
  // long (except the last), and returns when all are done. The first exception
  // thrown by fn is rethrown here. Calls from inside fn, or from a second thread
  // while a loop runs, execute inline on the calling thread.
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;
  void parallelFor(int64_t n, int64_t grain, const RangeFn& fn);

 private:
  static constexpr int kSpinMicros = 200;

  void workerLoop();
  void stopWorkers();
  void runChunks();
  void waitForWorkers();

  std::vector<std::thread> workers_;
  std::mutex loop_mu_;  // one loop at a time

  // The loop being run: written by parallelFor before generation_ is bumped
  // (release), read by workers after they see the new generation (acquire).
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_workers_{0};
  std::atomic<bool> stop_{false};

  std::mutex mu_;  // guards the sleep state below and error_
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  int sleeping_workers_ = 0;
  bool caller_sleeping_ = false;
  std::exception_ptr error_;
};

}  // namespace moe
