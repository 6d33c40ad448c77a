#include "inference/cpu/thread_pool.h"

#include <algorithm>
#include <utility>

namespace moe {
namespace {
// Set while a thread runs a chunk, so nested parallelFor calls run inline
// instead of waiting on workers that are busy with the outer loop.
thread_local bool t_in_pool_loop = false;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallelFor(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  std::unique_lock loop_lock(loop_mu_, std::defer_lock);
  if (workers_.empty() || n <= grain || t_in_pool_loop || !loop_lock.try_lock()) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mu_);
    fn_ = &fn;
    n_ = n;
    // About four chunks per thread balances uneven rows without many atomics.
    chunk_ = std::max(grain, (n + 4 * threads() - 1) / (4 * threads()));
    next_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    pending_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_cv_.notify_all();
  runChunks();
  std::unique_lock lock(mu_);
  done_cv_.wait(lock, [this] { return pending_workers_ == 0; });
  fn_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::runChunks() {
  t_in_pool_loop = true;
  try {
    for (;;) {
      const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
      if (begin >= n_) break;
      (*fn_)(begin, std::min(n_, begin + chunk_));
    }
  } catch (...) {
    std::lock_guard lock(mu_);
    if (!error_) error_ = std::current_exception();
    next_.store(n_, std::memory_order_relaxed);  // stop handing out chunks
  }
  t_in_pool_loop = false;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    runChunks();
    {
      std::lock_guard lock(mu_);
      --pending_workers_;
    }
    done_cv_.notify_one();
  }
}

}  // namespace moe
