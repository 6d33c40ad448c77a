#include "offload/cuda/cuda_copy_link.h"

#include <algorithm>

#include "inference/cuda/cuda_check.h"

namespace moe {

CudaCopyLink::CudaCopyLink() {
  checkCuda(cudaGetDevice(&device_), "cudaGetDevice (copy engine)");
  checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (copy stream)");
}

CudaCopyLink::~CudaCopyLink() {
  cudaStreamSynchronize(stream_);
  for (auto& [begin, r] : records_) cudaEventDestroy(r.event);
  for (auto& [ticket, e] : tickets_) cudaEventDestroy(e);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  cudaStreamDestroy(stream_);
  cudaGetLastError();
}

cudaEvent_t CudaCopyLink::takeEventLocked() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  checkCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate (copy event)");
  return e;
}

void CudaCopyLink::bindThread() const {
  thread_local int bound = -1;
  if (bound == device_) return;
  checkCuda(cudaSetDevice(device_), "cudaSetDevice (copy thread)");
  bound = device_;
}

CopyTicket CudaCopyLink::copyAsync(void* dst, const void* src, size_t n) {
  if (n == 0) return 0;
  bindThread();
  const auto b = reinterpret_cast<uintptr_t>(dst);
  std::lock_guard lock(mutex_);
  checkCuda(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (expert chunk)");
  ++seq_;
  recordRangeLocked(b, b + n);
  cudaEvent_t done = takeEventLocked();
  try {
    checkCuda(cudaEventRecord(done, stream_), "cudaEventRecord (copy ticket)");
  } catch (...) {  // a device fault: the event stays the engine's, for its destructor
    spare_events_.push_back(done);
    throw;
  }
  tickets_.emplace_back(seq_, done);
  bytes_.fetch_add(n, std::memory_order_relaxed);
  copies_.fetch_add(1, std::memory_order_relaxed);
  reapTicketsLocked();
  return seq_;
}

void CudaCopyLink::recordRangeLocked(uintptr_t b, uintptr_t e) {
  // Records wholly inside the new range are superseded: its event completes after
  // theirs (FIFO stream), so their events go back to the spare list.
  for (auto it = records_.lower_bound(b); it != records_.end() && it->first < e;) {
    if (it->second.end <= e) {
      spare_events_.push_back(it->second.event);
      it = records_.erase(it);
    } else {
      ++it;
    }
  }
  Record& r = records_[b];  // a longer record at the same start keeps its end (waiting longer is safe)
  r.end = std::max(r.end, e);
  if (!r.event) r.event = takeEventLocked();
  r.seq = seq_;
  checkCuda(cudaEventRecord(r.event, stream_), "cudaEventRecord (copy event)");
}

void CudaCopyLink::reapTicketsLocked() {
  while (!tickets_.empty()) {
    const cudaError_t st = cudaEventQuery(tickets_.front().second);
    if (st == cudaErrorNotReady) {
      cudaGetLastError();
      return;
    }
    checkCuda(st, "cudaEventQuery (copy ticket)");
    completed_ = tickets_.front().first;
    spare_events_.push_back(tickets_.front().second);
    tickets_.pop_front();
  }
}

bool CudaCopyLink::copyDone(CopyTicket ticket) {
  std::lock_guard lock(mutex_);
  if (ticket > completed_) reapTicketsLocked();
  return ticket <= completed_;
}

void CudaCopyLink::waitCopy(CopyTicket ticket) {
  cudaEvent_t done = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (ticket <= completed_) return;
    for (const auto& [t, e] : tickets_)
      if (t == ticket) done = e;
  }
  // Outside the lock, so other threads may queue copies meanwhile. Should this event be
  // recycled and re-recorded for a later copy, the wait only gets longer (FIFO stream).
  if (done)
    checkCuda(cudaEventSynchronize(done), "cudaEventSynchronize (copy ticket)");
  else
    synchronize();  // not a ticket of this engine: wait for everything
  std::lock_guard lock(mutex_);
  while (!tickets_.empty() && tickets_.front().first <= ticket) {
    spare_events_.push_back(tickets_.front().second);
    tickets_.pop_front();
  }
  completed_ = std::max(completed_, ticket);
}

void CudaCopyLink::copy(void* dst, const void* src, size_t n) { waitCopy(copyAsync(dst, src, n)); }

void CudaCopyLink::synchronize() { checkCuda(cudaStreamSynchronize(stream_), "copy stream synchronize"); }

CudaCopyLink::Record* CudaCopyLink::newestOverlapLocked(uintptr_t b, uintptr_t e) {
  Record* best = nullptr;
  for (auto it = records_.begin(); it != records_.end() && it->first < e; ++it)
    if (it->second.end > b && (!best || it->second.seq > best->seq)) best = &it->second;
  return best;
}

bool CudaCopyLink::streamWaitFor(cudaStream_t stream, const void* dst, size_t n) {
  const auto b = reinterpret_cast<uintptr_t>(dst);
  std::lock_guard lock(mutex_);  // the event cannot be re-recorded between lookup and wait
  Record* r = newestOverlapLocked(b, b + n);
  if (!r) return false;
  checkCuda(cudaStreamWaitEvent(stream, r->event, 0), "cudaStreamWaitEvent (expert slot)");
  return true;
}

bool CudaCopyLink::isComplete(const void* dst, size_t n) {
  const auto b = reinterpret_cast<uintptr_t>(dst);
  std::lock_guard lock(mutex_);
  Record* r = newestOverlapLocked(b, b + n);
  if (!r) return true;
  const cudaError_t st = cudaEventQuery(r->event);
  if (st == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  checkCuda(st, "cudaEventQuery (copy event)");
  return true;
}

size_t CudaCopyLink::trackedRanges() const {
  std::lock_guard lock(mutex_);
  return records_.size();
}

}  // namespace moe
