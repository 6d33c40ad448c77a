// The CUDA stand-in's streams, events and copies. Each stream is an in-order
// queue run by its own thread, so the host really does race with queued work:
// reading a result before synchronising, or reusing a pinned buffer an async
// copy has not read yet, is a data race ThreadSanitizer reports and tests can
// observe. Copies follow the runtime's documented rules for pageable memory:
// an async copy from pageable host memory has consumed the source when the call
// returns; one to pageable host memory has completed when it returns.
#include <cstring>
#include <thread>
#include <vector>

#include "standin_device.h"

namespace cudastandin::detail {

void simulateLatency(const std::atomic<int>& micros) {
  if (const int us = micros.load(std::memory_order_relaxed); us > 0) {
    releaseDeviceMemory();  // the host may run alone meanwhile
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
}

namespace {
thread_local Stream* tl_stream = nullptr;  // the stream whose thread this is
}

void releaseDeviceMemoryIfStreamIdle() {
  if (!tl_stream) return;
  std::lock_guard lock(tl_stream->mu_);
  if (tl_stream->queue_.empty()) releaseDeviceMemory();
}

Stream::Stream(int dev) : device(dev), thread_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void Stream::enqueue(std::function<void()> op) {
  if (device >= 0 && currentDevice() != device)
    counts.wrong_device_ops.fetch_add(1, std::memory_order_relaxed);
  if (capture) {
    capture->ops.push_back(std::move(op));
    return;
  }
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(op), false});
    ++queued_;
  }
  work_cv_.notify_one();
}

uint64_t Stream::enqueueMarker(std::function<void()> op) {
  if (capture) {
    capture->ops.push_back(std::move(op));
    return 0;
  }
  uint64_t place = 0;
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::move(op), true});
    place = ++queued_;
  }
  work_cv_.notify_one();
  return place;
}

uint64_t Stream::queuedSoFar() {
  std::lock_guard lock(mu_);
  return queued_;
}

void Stream::synchronize() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void Stream::waitUntilStalled() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || waiting_for_event_; });
}

void Stream::setWaitingForEvent(bool waiting) {
  {
    std::lock_guard lock(mu_);
    waiting_for_event_ = waiting;
  }
  if (waiting) idle_cv_.notify_all();
}

bool Stream::idle() {
  std::lock_guard lock(mu_);
  return queue_.empty() && !busy_;
}

void Stream::run() {
  tl_stream = this;
  for (;;) {
    Op op;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) {  // stopping, and everything queued has run
        releaseDeviceMemory();
        return;
      }
      op = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    if (op.marker || sticky() == cudaSuccess) op.run();  // a faulted device runs nothing more
    op.run = nullptr;
    {
      std::lock_guard lock(mu_);
      // Nothing more to do: device memory closes before a synchronising host can go on.
      if (queue_.empty()) releaseDeviceMemory();
      busy_ = false;
      if (queue_.empty()) idle_cv_.notify_all();
    }
  }
}

StreamCounters Stream::snapshot() const {
  StreamCounters c;
  c.kernel_launches = counts.kernel_launches.load();
  c.host_syncs = counts.host_syncs.load();
  c.stream_syncs = counts.stream_syncs.load();
  c.wrong_device_ops = counts.wrong_device_ops.load();
  c.bytes_h2d = counts.bytes_h2d.load();
  c.bytes_d2h = counts.bytes_d2h.load();
  c.bytes_d2d = counts.bytes_d2d.load();
  c.copies = counts.copies.load();
  c.graph_launches = counts.graph_launches.load();
  c.captured_kernels = counts.captured_kernels.load();
  c.stalling_host_syncs = counts.stalling_host_syncs.load();
  return c;
}

bool enqueueLaunch(cudaStream_t stream, std::function<void()> run) {
  if (const cudaError_t s = sticky()) {
    fail(s);
    return false;
  }
  Device& d = device();
  bool inject = false;
  {
    std::lock_guard lock(d.mu);
    inject = Device::countdown(d.fail_kernel_at);
  }
  Stream& s = d.stream(stream);
  (s.capture ? s.counts.captured_kernels : s.counts.kernel_launches).fetch_add(1, std::memory_order_relaxed);
  if (inject)
    s.enqueue([] { device().setSticky(cudaErrorLaunchFailure, "injected kernel fault (failKernelAt)"); });
  else
    s.enqueue([run = std::move(run)] {
      simulateLatency(device().kernel_latency_us);
      holdDeviceMemory();
      run();
    });
  return true;
}

}  // namespace cudastandin::detail

using namespace cudastandin::detail;

// The handle of a cudaEvent_t: the state is shared with queued records, so an
// event destroyed while a record is pending stays valid until it completes.
struct CUevent_st {
  std::shared_ptr<EventState> state;
};

// ---------------------------------------------------------------------------
// Streams

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  if (!stream) return fail(cudaErrorInvalidValue);
  if (const cudaError_t s = sticky()) return s;
  Device& d = device();
  {
    std::lock_guard lock(d.mu);
    if (Device::countdown(d.fail_stream_at)) return fail(cudaErrorMemoryAllocation);
  }
  auto* s = new Stream(currentDevice());
  std::lock_guard lock(d.mu);
  d.streams.insert(s);
  *stream = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return fail(cudaErrorInvalidResourceHandle);
  auto* s = reinterpret_cast<Stream*>(stream);
  Device& d = device();
  {
    std::lock_guard lock(d.mu);
    if (!d.streams.count(s)) return fail(cudaErrorInvalidResourceHandle);
  }
  s->synchronize();  // the runtime lets queued work finish before the stream's resources go
  {
    std::lock_guard lock(d.mu);
    d.destroyed += s->snapshot();
    d.streams.erase(s);
  }
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  Stream& s = device().stream(stream);
  if (s.capture) return s.breakCapture("cudaStreamSynchronize on a capturing stream");
  if (const cudaError_t e = forbiddenWhileCapturing("cudaStreamSynchronize")) return e;
  device().countStreamSync(s);
  s.synchronize();
  return fail(sticky());
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (const cudaError_t s = sticky()) return s;
  if (Stream& c = device().stream(stream); c.capture)
    return c.breakCapture("cudaStreamQuery on a capturing stream");
  return device().stream(stream).idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  if (!fn) return fail(cudaErrorInvalidValue);
  if (const cudaError_t s = sticky()) return s;
  device().stream(stream).enqueue([fn, user_data] {
    releaseDeviceMemory();  // host code: device memory is not its to read
    fn(user_data);
  });
  return cudaSuccess;
}

// ---------------------------------------------------------------------------
// Events

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (!event) return fail(cudaErrorInvalidValue);
  if (const cudaError_t s = sticky()) return s;
  Device& d = device();
  {
    std::lock_guard lock(d.mu);
    if (Device::countdown(d.fail_event_at)) return fail(cudaErrorMemoryAllocation);
  }
  auto* e = new CUevent_st{std::make_shared<EventState>()};
  e->state->flags = flags;
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t s = sticky()) return s;
  Device& d = device();
  Stream& s = d.stream(stream);
  std::shared_ptr<EventState> state = event->state;
  uint64_t number = 0;
  {
    std::lock_guard lock(d.event_mu);
    number = ++state->recorded;
    state->last_stream = &s;
    state->capture = s.capture.get();
  }
  const uint64_t place = s.enqueueMarker([state, number] {
    releaseDeviceMemoryIfStreamIdle();  // before a host waiting for the event goes on
    Device& dev = device();
    std::lock_guard lock(dev.event_mu);
    if (number > state->completed) {
      state->completed = number;
      state->completed_at = std::chrono::steady_clock::now();
    }
    dev.event_cv.notify_all();
  });
  std::lock_guard lock(d.event_mu);
  if (state->recorded == number) state->queued_at = place;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t s = sticky()) return s;
  std::lock_guard lock(device().event_mu);
  return event->state->completed >= event->state->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = forbiddenWhileCapturing("cudaEventSynchronize")) return e;
  Device& d = device();
  const std::shared_ptr<EventState> state = event->state;
  uint64_t number = 0, queued_at = 0;
  Stream* stream = nullptr;
  {
    std::lock_guard lock(d.event_mu);
    number = state->recorded;
    queued_at = state->queued_at;
    stream = state->last_stream;
  }
  d.countHostSync(stream, queued_at);
  std::unique_lock lock(d.event_mu);
  d.event_cv.wait(lock, [&] { return state->completed >= number || sticky() != cudaSuccess; });
  return fail(sticky());
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t s = sticky()) return s;
  Device& d = device();
  std::shared_ptr<EventState> state = event->state;
  uint64_t number = 0;
  const CapturedGraph* recorded_in = nullptr;
  {
    std::lock_guard lock(d.event_mu);
    number = state->recorded;  // the record at the time of the call; later records do not matter
    recorded_in = state->capture;
  }
  Stream& waiting = d.stream(stream);
  if (waiting.capture && number != 0 &&
      recorded_in != waiting.capture.get())  // a wait on work outside the graph
    return waiting.breakCapture("cudaStreamWaitEvent on an event recorded outside the capture");
  if (number == 0) return cudaSuccess;  // never recorded: nothing to wait for
  waiting.enqueue([state, number, stream = &waiting] {
    Device& dev = device();
    std::unique_lock lock(dev.event_mu);
    const auto done = [&] { return state->completed >= number || sticky() != cudaSuccess; };
    if (done()) return;
    lock.unlock();
    releaseDeviceMemory();  // no device work while the stream waits
    stream->setWaitingForEvent(true);
    lock.lock();
    dev.event_cv.wait(lock, done);
    lock.unlock();
    stream->setWaitingForEvent(false);
  });
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t s = sticky()) return s;
  std::lock_guard lock(device().event_mu);
  const EventState &a = *start->state, &b = *end->state;
  if ((a.flags | b.flags) & cudaEventDisableTiming) return fail(cudaErrorInvalidResourceHandle);
  if (a.recorded == 0 || b.recorded == 0) return fail(cudaErrorInvalidResourceHandle);
  if (a.completed < a.recorded || b.completed < b.recorded) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b.completed_at - a.completed_at).count();
  return cudaSuccess;
}

// ---------------------------------------------------------------------------
// Copies

namespace {

enum class Side { Pageable, Pinned, Device };

Side sideOf(const void* p, size_t n, bool* whole) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  *whole = true;
  const Allocation* a = d.findLocked(p, 0);
  if (!a) return Side::Pageable;
  *whole = d.findLocked(p, n) != nullptr;
  return a->kind == MemoryKind::Device ? Side::Device : Side::Pinned;
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (const cudaError_t s = sticky()) return s;
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  bool dst_whole = true, src_whole = true;
  const Side to = sideOf(dst, bytes, &dst_whole), from = sideOf(src, bytes, &src_whole);
  if (!dst_whole || !src_whole) return fail(cudaErrorInvalidValue);  // runs past the end of an allocation
  const bool to_dev = to == Side::Device, from_dev = from == Side::Device;
  if (kind == cudaMemcpyDefault)
    kind = from_dev ? (to_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                    : (to_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  const bool kind_matches = (kind == cudaMemcpyHostToDevice && to_dev && !from_dev) ||
                            (kind == cudaMemcpyDeviceToHost && from_dev && !to_dev) ||
                            (kind == cudaMemcpyDeviceToDevice && from_dev && to_dev) ||
                            (kind == cudaMemcpyHostToHost && !from_dev && !to_dev);
  if (!kind_matches) return fail(cudaErrorInvalidValue);

  Device& d = device();
  Stream& s = d.stream(stream);
  if (s.capture && (from == Side::Pageable || to == Side::Pageable) && kind != cudaMemcpyHostToHost)
    return s.breakCapture("a copy from or to pageable host memory on a capturing stream");
  s.counts.copies.fetch_add(1, std::memory_order_relaxed);
  bool inject = false;
  {
    std::lock_guard lock(d.mu);
    inject = kind != cudaMemcpyHostToHost && Device::countdown(d.fail_copy_at);
  }
  if (inject) {
    s.enqueue([] { device().setSticky(cudaErrorIllegalAddress, "injected copy fault (failCopyAt)"); });
    return cudaSuccess;
  }
  if (kind == cudaMemcpyHostToDevice) s.counts.bytes_h2d.fetch_add(bytes, std::memory_order_relaxed);
  if (kind == cudaMemcpyDeviceToHost) s.counts.bytes_d2h.fetch_add(bytes, std::memory_order_relaxed);
  if (kind == cudaMemcpyDeviceToDevice) s.counts.bytes_d2d.fetch_add(bytes, std::memory_order_relaxed);

  if (from == Side::Pageable && kind != cudaMemcpyHostToHost) {
    // Staged: the source is read now, the device gets it in stream order.
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    s.enqueue([dst, staged] {
      simulateLatency(device().copy_latency_us);
      holdDeviceMemory();
      std::memcpy(dst, staged->data(), staged->size());
    });
    return cudaSuccess;
  }
  s.enqueue([dst, src, bytes, host_only = kind == cudaMemcpyHostToHost] {
    simulateLatency(device().copy_latency_us);
    if (!host_only) holdDeviceMemory();
    std::memmove(dst, src, bytes);
  });
  if (to == Side::Pageable && kind == cudaMemcpyDeviceToHost) {  // returns once the copy has completed
    d.countStreamSync(s);
    s.synchronize();
    return fail(sticky());
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  const cudaError_t st = cudaMemcpyAsync(dst, src, bytes, kind, 0);
  if (st != cudaSuccess) return st;
  return cudaStreamSynchronize(0);
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (const cudaError_t s = sticky()) return s;
  if (bytes == 0) return cudaSuccess;
  bool whole = true;
  if (sideOf(dst, bytes, &whole) != Side::Device || !whole) return fail(cudaErrorInvalidValue);
  device().stream(stream).enqueue([dst, value, bytes] {
    holdDeviceMemory();
    std::memset(dst, value, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  const cudaError_t st = cudaMemsetAsync(dst, value, bytes, 0);
  if (st != cudaSuccess) return st;
  return cudaStreamSynchronize(0);
}
