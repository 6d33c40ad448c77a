#include "offload/transfer_worker.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace moe {

TransferWorker::TransferWorker(SlotSlab& slab, SlotTable table, const ExpertBytesSource& source,
                               CopyLink& copier, OffloadMetrics& metrics, TransferMode mode,
                               TransferOptions options)
    : slab_(slab),
      source_(source),
      copier_(copier),
      metrics_(metrics),
      mode_(mode),
      options_(options),
      table_(std::move(table)),
      staging_count_(table_.stagingCount()),
      layer_share_(table_.layerShare()) {
  if (table_.chunksPerExpert() != ExpertBytesSource::kChunks)
    throw std::invalid_argument("TransferWorker: table chunks per expert != ExpertBytesSource::kChunks");
  if (table_.slotCount() != slab.slotCount())
    throw std::invalid_argument("TransferWorker: the table describes " + std::to_string(table_.slotCount()) +
                                " slots, the slab has " + std::to_string(slab.slotCount()));
  if (slab.slotBytes() < source.expertBytes())
    throw std::invalid_argument("TransferWorker: cache slots smaller than one expert");
  if (mode_ == TransferMode::kThreaded) thread_ = std::thread([this] { run(); });
}

TransferWorker::~TransferWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Copies still in flight write into the cache's slab: let them land first.
  // After a device fault the wait fails: a destructor must not throw, and the
  // fault has been reported to whoever waited on the worker.
  for (const InFlight& f : in_flight_)
    if (f.issued) try {
        copier_.waitCopy(f.ticket);
      } catch (const std::exception&) {
      }
}

void TransferWorker::queueExpertLocked(int layer, int expert, int slot, int first_chunk, Priority p) {
  std::deque<ChunkTask>& q = p == Priority::kHigh ? high_ : low_;
  if (!options_.chunking) {
    q.push_back({layer, expert, -1, slot});
    ++table_.at(slot).pending;
    return;
  }
  for (int c = first_chunk; c < ExpertBytesSource::kChunks; ++c) {
    q.push_back({layer, expert, c, slot});
    ++table_.at(slot).pending;
  }
}

void TransferWorker::pushPredicted(int layer, std::span<const int> experts,
                                   std::span<const float> probabilities, double admission) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < experts.size(); ++i) {
      const int e = experts[i];
      if (int slot = table_.find(layer, e); slot >= 0) {
        table_.touch(slot);
        continue;
      }
      const double admit = i < probabilities.size() ? table_.admissionBound(probabilities[i], admission)
                                                    : std::numeric_limits<double>::infinity();
      int slot = table_.reserve(layer, e, /*predicted=*/true, admit);
      if (slot < 0) {
        metrics_.prefetch_skipped.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      queueExpertLocked(layer, e, slot, 0, Priority::kLow);
    }
  }
  work_cv_.notify_all();
}

std::vector<int> TransferWorker::mapLayer(int layer, int n_expert) {
  std::vector<int> slots(static_cast<size_t>(std::max(0, n_expert)), -1);
  std::lock_guard<std::mutex> lock(mutex_);
  for (int e = 0; e < n_expert; ++e) {
    const int slot = table_.find(layer, e);
    if (slot < 0) continue;
    const SlotInfo& s = table_.at(slot);
    if (s.state != SlotState::kReady || s.staging || s.free_when_done) continue;
    table_.pin(slot);
    slots[size_t(e)] = slot;
  }
  return slots;
}

void TransferWorker::learnMappedGate(int layer, std::span<const int> experts, std::span<const int> slots) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    table_.countGate(layer, experts);
    for (int e : experts) {
      metrics_.expert_uses.fetch_add(1, std::memory_order_relaxed);
      const int mapped = e >= 0 && size_t(e) < slots.size() ? slots[size_t(e)] : -1;
      if (mapped >= 0) {
        metrics_.ready_hits.fetch_add(1, std::memory_order_relaxed);
        if (table_.find(layer, e) == mapped) {  // still its slot (an earlier layer's copy may have taken it)
          if (table_.at(mapped).predicted) metrics_.prefetch_hits.fetch_add(1, std::memory_order_relaxed);
          table_.touch(mapped);
        }
        continue;
      }
      metrics_.misses.fetch_add(1, std::memory_order_relaxed);
      metrics_.host_read_bytes.fetch_add(source_.expertBytes(), std::memory_order_relaxed);
      if (table_.find(layer, e) >= 0) continue;  // on its way in already
      const int slot = table_.reserve(layer, e, /*predicted=*/false);
      if (slot < 0) continue;  // nothing evictable: it stays in host memory
      queueExpertLocked(layer, e, slot, 0, Priority::kLow);
    }
  }
  work_cv_.notify_all();
}

bool TransferWorker::hold(int layer, int expert) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (int slot = table_.find(layer, expert); slot >= 0) {
      if (table_.at(slot).staging) return false;  // streaming now: only a cache slot can be held
      table_.hold(slot);
      return true;
    }
    const int slot = table_.reserve(layer, expert, /*predicted=*/false);
    if (slot < 0) return false;
    table_.hold(slot);
    queueExpertLocked(layer, expert, slot, 0, Priority::kHigh);
  }
  work_cv_.notify_all();
  return true;
}

void TransferWorker::releaseHolds() {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.releaseHolds();
}

SlotTable TransferWorker::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_;
}

int TransferWorker::residentCount(int layer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.residentCount(layer);
}

std::optional<std::pair<ChunkTask, Priority>> TransferWorker::popLocked() {
  if (!high_.empty()) {
    ChunkTask t = high_.front();
    high_.pop_front();
    return std::make_pair(t, Priority::kHigh);
  }
  if (!low_.empty()) {
    ChunkTask t = low_.front();
    low_.pop_front();
    return std::make_pair(t, Priority::kLow);
  }
  return std::nullopt;
}

bool TransferWorker::canIssueLocked() const {
  if (in_flight_.size() >= kMaxInFlight) return false;
  if (!high_.empty()) return true;
  return !low_.empty() && in_flight_.empty();  // a low chunk never queues ahead of more than itself
}

int TransferWorker::inFlightLocked(int slot, bool issued_only) const {
  return static_cast<int>(std::count_if(in_flight_.begin(), in_flight_.end(), [&](const InFlight& f) {
    return f.task.slot == slot && (f.issued || !issued_only);
  }));
}

CopyTicket TransferWorker::issueCopy(const ChunkTask& t) {
  uint8_t* dst = slab_.slotData(t.slot);
  const uint8_t* src = source_.expertData(t.layer, t.expert);
  if (fence_) fence_->beforeOverwrite(t.slot);
  if (t.chunk < 0) return copier_.copyAsync(dst, src, source_.expertBytes());  // whole expert, no yielding
  const size_t off = source_.chunkOffset(t.chunk);
  return copier_.copyAsync(dst + off, src + off, source_.chunkBytes(t.chunk));
}

void TransferWorker::issueNextLocked(std::unique_lock<std::mutex>& lock) {
  const auto [task, priority] = *popLocked();
  if (in_flight_.empty()) busy_since_ = std::chrono::steady_clock::now();
  // When the link should finish it: after the copies ahead of it, at the bandwidth the
  // engine was given (unknown: now, so the worker polls).
  const auto now = std::chrono::steady_clock::now();
  auto due = in_flight_.empty() ? now : std::max(now, in_flight_.back().due);
  const double bw = metrics_.link_bytes_per_second.load(std::memory_order_relaxed);
  if (bw > 0) {
    const size_t bytes = task.chunk < 0 ? source_.expertBytes() : source_.chunkBytes(task.chunk);
    due += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(double(bytes) / bw));
  }
  in_flight_.push_back({task, priority, 0, false, due});
  InFlight& f = in_flight_.back();  // deque references survive push_back / pop_front elsewhere
  lock.unlock();                    // a push may arrive meanwhile; a synchronous engine copies here
  const CopyTicket ticket = issueCopy(task);
  lock.lock();
  f.ticket = ticket;
  f.issued = true;
}

StepResult TransferWorker::reapFrontLocked() {
  const InFlight f = in_flight_.front();
  in_flight_.pop_front();
  const ChunkTask& t = f.task;
  const size_t bytes = t.chunk < 0 ? source_.expertBytes() : source_.chunkBytes(t.chunk);
  StepResult r;
  r.did_work = true;
  r.task = t;
  r.priority = f.priority;
  r.bytes = bytes;
  --table_.at(t.slot).pending;
  metrics_.bytes_h2d.fetch_add(bytes, std::memory_order_relaxed);
  metrics_.chunks_copied.fetch_add(t.chunk < 0 ? ExpertBytesSource::kChunks : 1, std::memory_order_relaxed);
  if (in_flight_.empty()) {  // the link goes idle: its busy time is the span since it last had work
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - busy_since_)
            .count();
    metrics_.copy_busy_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
  if (table_.at(t.slot).free_when_done) {
    if (table_.at(t.slot).pending == 0) {
      table_.at(t.slot).free_when_done = false;
      table_.free(t.slot);
    }
    r.discarded = true;
  } else if (t.chunk < 0) {
    table_.markReady(t.slot);
    r.expert_ready = true;
  } else {
    r.expert_ready = table_.markChunkDone(t.slot) == SlotState::kReady;
  }
  return r;
}

StepResult TransferWorker::step() {
  if (mode_ != TransferMode::kManual) throw std::logic_error("TransferWorker::step: manual mode only");
  StepResult r;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!in_flight_.empty()) throw std::logic_error("TransferWorker::step: re-entered during a copy");
    if (high_.empty() && low_.empty()) return {};
    issueNextLocked(lock);
    const CopyTicket ticket = in_flight_.front().ticket;
    lock.unlock();
    copier_.waitCopy(ticket);
    lock.lock();
    r = reapFrontLocked();
  }
  ready_cv_.notify_all();
  return r;
}

void TransferWorker::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  try {
    runLocked(lock);
  } catch (const std::exception&) {
    // A copy or its completion check failed (a device fault): the thread ends, and
    // the compute side's next wait throws the error instead of waiting forever.
    if (!lock.owns_lock()) lock.lock();
    failure_ = std::current_exception();
    ready_cv_.notify_all();
  }
}

void TransferWorker::runLocked(std::unique_lock<std::mutex>& lock) {
  // Waiting for the oldest copy: sleep until the link should have finished it (its
  // bytes at the measured bandwidth, after the copies ahead of it), then look every
  // few microseconds, backing off to 200 us; wake at once for new work. Noting a
  // copy done late would leave the link idle before the next predicted chunk.
  constexpr std::chrono::microseconds kFinePoll{4}, kLastPoll{200};
  auto poll = kFinePoll;
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || canIssueLocked() || !in_flight_.empty(); });
    if (stop_) return;
    if (canIssueLocked()) {
      issueNextLocked(lock);
      while (!in_flight_.empty() && in_flight_.front().issued && copier_.copyDone(in_flight_.front().ticket))
        reapFrontLocked();
      poll = kFinePoll;
    } else if (copier_.copyDone(in_flight_.front().ticket)) {
      reapFrontLocked();
      poll = kFinePoll;
    } else {
      const auto now = std::chrono::steady_clock::now();
      const auto due = in_flight_.front().due;
      if (due > now + kFinePoll) {
        work_cv_.wait_until(lock, due, [&] { return stop_ || canIssueLocked(); });
      } else {
        work_cv_.wait_for(lock, poll, [&] { return stop_ || canIssueLocked(); });
        poll = std::min(poll * 2, kLastPoll);
      }
      continue;
    }
    ready_cv_.notify_all();  // issued (waitIssued) or completed (waitReady, waitIdle)
  }
}

bool TransferWorker::waitReady(int layer, int expert) {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool waited = waitLocked(lock, [&] {  // true when READY, throws when it never will be
    const int slot = table_.find(layer, expert);
    if (slot < 0) throw std::logic_error("TransferWorker::waitReady: expert not in the cache");
    if (table_.at(slot).state == SlotState::kReady) return true;
    if (table_.at(slot).pending == 0)
      throw std::logic_error("TransferWorker::waitReady: expert LOADING with nothing queued");
    return false;
  });
  if (waited) metrics_.waits.fetch_add(1, std::memory_order_relaxed);
  return waited;
}

TransferWorker::IssueWait TransferWorker::waitIssued(int layer, int expert) {
  IssueWait w;
  std::unique_lock<std::mutex> lock(mutex_);
  w.waited = waitLocked(lock, [&] {
    w.slot = table_.find(layer, expert);
    if (w.slot < 0) throw std::logic_error("TransferWorker::waitIssued: expert not in the cache");
    w.ready = table_.at(w.slot).state == SlotState::kReady;
    if (w.ready) return true;
    if (table_.at(w.slot).pending == 0)
      throw std::logic_error("TransferWorker::waitIssued: expert LOADING with nothing queued");
    return table_.at(w.slot).pending == inFlightLocked(w.slot, /*issued_only=*/true);
  });
  if (w.waited) metrics_.waits.fetch_add(1, std::memory_order_relaxed);
  return w;
}

void TransferWorker::waitIdle() {
  std::unique_lock<std::mutex> lock(mutex_);
  waitLocked(lock, [&] { return stop_ || (high_.empty() && low_.empty() && in_flight_.empty()); });
}

size_t TransferWorker::queuedHigh() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return high_.size();
}

size_t TransferWorker::queuedLow() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return low_.size();
}

size_t TransferWorker::queuedLow(int layer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(
      std::count_if(low_.begin(), low_.end(), [&](const ChunkTask& t) { return t.layer == layer; }));
}

}  // namespace moe
