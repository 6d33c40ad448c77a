// A small persistent pool for data-parallel loops. The calling thread takes part
// in every loop, so a pool of N threads starts N - 1 workers. Loops are split
// into chunks handed out through an atomic counter (cheap load balancing).
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

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread. threads == 1 runs everything inline.
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
  void workerLoop();
  void runChunks();

  std::vector<std::thread> workers_;
  std::mutex loop_mu_;  // one loop at a time

  std::mutex mu_;  // guards the fields below
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;
  int pending_workers_ = 0;
  bool stop_ = false;
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::exception_ptr error_;

  std::atomic<int64_t> next_{0};
};

}  // namespace moe
