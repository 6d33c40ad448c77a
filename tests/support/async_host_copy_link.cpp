#include "support/async_host_copy_link.h"

#include <algorithm>
#include <cstring>

namespace moe {

AsyncHostCopyLink::AsyncHostCopyLink() : thread_([this] { run(); }) {}

AsyncHostCopyLink::~AsyncHostCopyLink() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

CopyTicket AsyncHostCopyLink::copyAsync(void* dst, const void* src, size_t n) {
  CopyTicket t;
  {
    std::lock_guard lock(mutex_);
    t = next_ticket_++;
    jobs_.push_back({t, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n});
  }
  work_cv_.notify_all();
  return t;
}

void AsyncHostCopyLink::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return (stop_ || !held_ || allowance_ > 0) && (stop_ || !jobs_.empty()); });
    if (jobs_.empty()) return;  // stopping, nothing left
    if (held_ && !stop_) --allowance_;
    const Job job = jobs_.front();  // stays queued (visible to waitRange) while it runs
    lock.unlock();
    if (job.n > 0) std::memcpy(job.dst, job.src, job.n);
    lock.lock();
    jobs_.pop_front();
    completed_ = job.ticket;
    bytes_ += job.n;
    ++copies_;
    done_cv_.notify_all();
  }
}

void AsyncHostCopyLink::waitCopy(CopyTicket ticket) {
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return completed_ >= ticket; });
}

bool AsyncHostCopyLink::copyDone(CopyTicket ticket) {
  std::lock_guard lock(mutex_);
  return completed_ >= ticket;
}

void AsyncHostCopyLink::waitRange(const void* dst, size_t n) {
  const auto* b = static_cast<const uint8_t*>(dst);
  const uint8_t* e = b + n;
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] {
    return std::none_of(jobs_.begin(), jobs_.end(),
                        [&](const Job& j) { return j.dst < e && j.dst + j.n > b; });
  });
}

uint64_t AsyncHostCopyLink::bytesCopied() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

uint64_t AsyncHostCopyLink::copies() const {
  std::lock_guard lock(mutex_);
  return copies_;
}

uint64_t AsyncHostCopyLink::queued() const {
  std::lock_guard lock(mutex_);
  return next_ticket_ - 1;
}

std::vector<const void*> AsyncHostCopyLink::inFlight() const {
  std::lock_guard lock(mutex_);
  std::vector<const void*> v;
  for (const Job& j : jobs_) v.push_back(j.dst);
  return v;
}

void AsyncHostCopyLink::hold() {
  std::lock_guard lock(mutex_);
  held_ = true;
  allowance_ = 0;
}

void AsyncHostCopyLink::release(int n) {
  {
    std::lock_guard lock(mutex_);
    allowance_ += n;
  }
  work_cv_.notify_all();
}

void AsyncHostCopyLink::resume() {
  {
    std::lock_guard lock(mutex_);
    held_ = false;
  }
  work_cv_.notify_all();
}

}  // namespace moe
