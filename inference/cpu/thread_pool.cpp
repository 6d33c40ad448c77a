#include "inference/cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace moe {
namespace {
// Set while a thread runs a chunk, so nested parallelFor calls run inline
// instead of waiting on workers that are busy with the outer loop.
thread_local bool t_in_pool_loop = false;
}  // namespace

int physicalCores() {
  const int logical = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return logical;
  std::set<std::string> cores;  // one sibling list per physical core
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    std::string siblings;
    if (!std::getline(f, siblings)) return logical;
    cores.insert(siblings);
  }
  return cores.empty() ? logical : static_cast<int>(cores.size());
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = physicalCores();
  workers_.reserve(threads - 1);
  try {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
  } catch (const std::system_error& e) {
    // The workers already started wait on members that unwinding would destroy.
    const size_t started = workers_.size();
    stopWorkers();
    throw std::runtime_error("cannot start " + std::to_string(threads) +
                             " threads (the system refused one after " + std::to_string(started + 1) + ": " +
                             e.what() + "); try fewer with --threads");
  }
}

ThreadPool::~ThreadPool() { stopWorkers(); }

void ThreadPool::stopWorkers() {
  {
    std::lock_guard lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

namespace {
// Polls ready() for up to `micros`; true as soon as it holds.
template <class Ready>
bool spinUntil(Ready&& ready, int micros) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
  }
}
}  // namespace

void ThreadPool::parallelFor(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  std::unique_lock loop_lock(loop_mu_, std::defer_lock);
  if (workers_.empty() || n <= grain || t_in_pool_loop || !loop_lock.try_lock()) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  grain_ = grain;
  next_.store(0, std::memory_order_relaxed);
  pending_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  {
    std::lock_guard lock(mu_);
    if (sleeping_workers_ > 0) start_cv_.notify_all();
  }
  runChunks();
  waitForWorkers();
  fn_ = nullptr;
  std::lock_guard lock(mu_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::waitForWorkers() {
  auto done = [this] { return pending_workers_.load(std::memory_order_acquire) == 0; };
  if (spinUntil(done, kSpinMicros)) return;
  std::unique_lock lock(mu_);
  caller_sleeping_ = true;
  done_cv_.wait(lock, done);
  caller_sleeping_ = false;
}

void ThreadPool::runChunks() {
  t_in_pool_loop = true;
  try {
    // Each grab takes 1 / (2 * threads) of what is left, at least a grain: about
    // 2 * threads * ln(n / grain) grabs per loop.
    const int64_t share = 2 * threads();
    int64_t begin = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (begin >= n_) break;
      const int64_t size = std::max(grain_, (n_ - begin) / share);
      if (!next_.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) continue;
      (*fn_)(begin, std::min(n_, begin + size));
      begin = next_.load(std::memory_order_relaxed);
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
    auto started = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spinUntil(started, kSpinMicros)) {
      std::unique_lock lock(mu_);
      ++sleeping_workers_;
      start_cv_.wait(lock, started);
      --sleeping_workers_;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    runChunks();
    if (pending_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mu_);
      if (caller_sleeping_) done_cv_.notify_one();
    }
  }
}

}  // namespace moe
