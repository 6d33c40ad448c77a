#include "offload/cuda/cuda_copy_engine.h"

#include <algorithm>

#include "inference/cuda/cuda_check.h"

namespace moe {

CudaCopyEngine::CudaCopyEngine() {
  checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate (copy stream)");
}

CudaCopyEngine::~CudaCopyEngine() {
  cudaStreamSynchronize(stream_);
  for (auto& [begin, r] : records_) cudaEventDestroy(r.event);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  cudaStreamDestroy(stream_);
  cudaGetLastError();
}

cudaEvent_t CudaCopyEngine::takeEventLocked() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  checkCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate (copy event)");
  return e;
}

void CudaCopyEngine::copyAsync(void* dst, const void* src, size_t n) { enqueue(dst, src, n); }

cudaEvent_t CudaCopyEngine::enqueue(void* dst, const void* src, size_t n) {
  if (n == 0) return nullptr;
  const auto b = reinterpret_cast<uintptr_t>(dst), e = b + n;
  std::lock_guard lock(mutex_);
  checkCuda(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (expert chunk)");
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
  r.seq = ++seq_;
  checkCuda(cudaEventRecord(r.event, stream_), "cudaEventRecord (copy event)");
  bytes_.fetch_add(n, std::memory_order_relaxed);
  copies_.fetch_add(1, std::memory_order_relaxed);
  return r.event;
}

void CudaCopyEngine::copy(void* dst, const void* src, size_t n) {
  // The worker thread waits here, on this copy's event. Should a later copy re-record
  // the event meanwhile, the wait only gets longer (FIFO stream): never too short.
  if (cudaEvent_t done = enqueue(dst, src, n))
    checkCuda(cudaEventSynchronize(done), "cudaEventSynchronize (expert chunk)");
}

void CudaCopyEngine::synchronize() { checkCuda(cudaStreamSynchronize(stream_), "copy stream synchronize"); }

CudaCopyEngine::Record* CudaCopyEngine::newestOverlapLocked(uintptr_t b, uintptr_t e) {
  Record* best = nullptr;
  for (auto it = records_.begin(); it != records_.end() && it->first < e; ++it)
    if (it->second.end > b && (!best || it->second.seq > best->seq)) best = &it->second;
  return best;
}

bool CudaCopyEngine::streamWaitFor(cudaStream_t stream, const void* dst, size_t n) {
  const auto b = reinterpret_cast<uintptr_t>(dst);
  std::lock_guard lock(mutex_);  // the event cannot be re-recorded between lookup and wait
  Record* r = newestOverlapLocked(b, b + n);
  if (!r) return false;
  checkCuda(cudaStreamWaitEvent(stream, r->event, 0), "cudaStreamWaitEvent (expert slot)");
  return true;
}

bool CudaCopyEngine::isComplete(const void* dst, size_t n) {
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

size_t CudaCopyEngine::trackedRanges() const {
  std::lock_guard lock(mutex_);
  return records_.size();
}

}  // namespace moe
