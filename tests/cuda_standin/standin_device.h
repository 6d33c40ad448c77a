// The CUDA stand-in's simulated device: its memory map, streams, events, sticky
// error, fault injection and counters. Internal to tests/cuda_standin/.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda_standin.h"

namespace cudastandin::detail {

enum class MemoryKind { Device, Pinned, Registered };

struct Allocation {
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::Device;
};

// What a stream recorded between cudaStreamBeginCapture and cudaStreamEndCapture:
// the operations, in order, with the arguments they were given then.
struct CapturedGraph {
  std::vector<std::function<void()>> ops;
  bool invalidated = false;  // a forbidden call broke the capture
  std::string why;
};

// An in-order queue of operations run by its own thread, so that work queued on a
// stream really is asynchronous to the host (and to other streams).
class Stream {
 public:
  // device: the device the creating thread was bound to (cudaSetDevice); -1 for the
  // default stream, which serves whichever device the calling thread is bound to.
  explicit Stream(int device = -1);
  ~Stream();  // runs what is queued, then joins
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Queues op, or records it when the stream captures.
  void enqueue(std::function<void()> op);
  // An operation that runs even after a fault: an event's completion, so that a
  // recover()ed device has no event left waiting for work that was dropped (while
  // the fault stands, every wait returns the error anyway). Returns its place in the
  // stream's queue (queuedSoFar() once queued); 0 when recorded into a graph.
  uint64_t enqueueMarker(std::function<void()> op);
  // Operations queued so far (not those recorded): what was queued after a record.
  uint64_t queuedSoFar();
  void synchronize();  // until every queued operation has run
  bool idle();
  // Until the stream has run all it can: it is idle, or it waits for an event that
  // had not completed when it reached the wait (cudaStreamWaitEvent).
  void waitUntilStalled();
  void setWaitingForEvent(bool waiting);  // called by the stream's own thread

  struct Counts {
    std::atomic<uint64_t> kernel_launches{0}, host_syncs{0}, stream_syncs{0}, wrong_device_ops{0},
        bytes_h2d{0}, bytes_d2h{0}, bytes_d2d{0}, copies{0}, graph_launches{0}, captured_kernels{0},
        stalling_host_syncs{0};
  } counts;
  // The graph being recorded (cudaStreamBeginCapture), or null. Set and read by the
  // capturing thread only.
  std::shared_ptr<CapturedGraph> capture;
  // Breaks the stream's capture (if any) for `why`; returns the error the call gets.
  cudaError_t breakCapture(const char* why);
  StreamCounters snapshot() const;
  const int device;

 private:
  friend void releaseDeviceMemoryIfStreamIdle();
  void run();
  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  struct Op {
    std::function<void()> run;
    bool marker = false;
  };
  std::deque<Op> queue_;
  uint64_t queued_ = 0;  // operations ever queued
  bool busy_ = false, stopping_ = false, waiting_for_event_ = false;
  std::thread thread_;
};

// One cudaEvent_t's state. Records are numbered; a wait captures the number of the
// newest record at the time of the call (cudaStreamWaitEvent's rule).
struct EventState {
  unsigned flags = 0;
  uint64_t recorded = 0, completed = 0;  // guarded by Device::event_mu
  std::chrono::steady_clock::time_point completed_at;
  Stream* last_stream = nullptr;
  const CapturedGraph* capture = nullptr;  // the capture the last record was made in, if any
  uint64_t queued_at = 0;                  // the last record's place in its stream's queue (0: in a capture)
};

class Device {
 public:
  Device();

  // Memory map: guarded by mu.
  std::mutex mu;
  std::map<uintptr_t, Allocation> allocations;
  size_t device_bytes = size_t{2} << 30;
  size_t used = 0, peak = 0, pinned = 0;
  uint64_t mallocs = 0;
  int device_count = 1;
  int fail_malloc_at = 0, fail_kernel_at = 0, fail_copy_at = 0, fail_event_at = 0, fail_stream_at = 0;
  std::set<Stream*> streams;  // every live stream but the default one
  StreamCounters destroyed;   // what destroyed streams did
  uint64_t device_syncs = 0;
  std::string fault_detail;
  std::atomic<int> copy_latency_us{0}, kernel_latency_us{0};

  // The allocation holding [p, p + n) whole, or null. Caller holds mu.
  const Allocation* findLocked(const void* p, size_t n, uintptr_t* base = nullptr) const;
  // True when the n-th-call countdown `at` reaches this call. Caller holds mu.
  static bool countdown(int& at) { return at > 0 && --at == 0; }

  // Events: every completion and the sticky error notify event_cv.
  std::mutex event_mu;
  std::condition_variable event_cv;

  std::atomic<int> sticky{cudaSuccess};
  void setSticky(cudaError_t error, const std::string& detail);

  Stream& stream(cudaStream_t s);  // 0: the default stream
  // Counts a host wait on s, if s is still a live stream (an event's last stream may be
  // gone), for the operation queued at place `waits_for` (0: for all of them): stalling
  // where nothing was queued after it, so the device has nothing left to do until the
  // host queues more. Reports it to the host-wait observer.
  void countHostSync(Stream* s, uint64_t waits_for);
  // A wait for everything queued on s (a stream synchronise, a synchronous copy).
  void countStreamSync(Stream& s);
  std::mutex observer_mu;
  std::function<void(bool stalling)> host_wait_observer;  // cudastandin::setHostWaitObserver
  void synchronizeAll();

 private:
  std::unique_ptr<Stream> default_stream_;
};

// The device, created on first use and never destroyed (stream threads may
// outlive static destruction).
Device& device();

// The device the calling thread is bound to (cudaSetDevice; 0 until set), as in CUDA.
int& currentDevice();

// The calling thread's last error (cudaGetLastError).
cudaError_t& lastError();
// Records a failed call's error as the thread's last error and returns it.
inline cudaError_t fail(cudaError_t error) {
  if (error != cudaSuccess) lastError() = error;
  return error;
}
// The sticky error, which every call returns once a kernel has faulted.
inline cudaError_t sticky() {
  return static_cast<cudaError_t>(device().sticky.load(std::memory_order_acquire));
}

// The stream the calling thread captures on, or null (a thread captures one stream at a time).
Stream*& capturingStream();
// Where the calling thread captures: its capture is broken for `why` and the error
// for the forbidden call returned; cudaSuccess where it does not capture.
cudaError_t forbiddenWhileCapturing(const char* why);

// Queues a kernel-like operation (a kernel, a cuBLAS call): counted as a launch,
// subject to kernel fault injection. Returns false (last error set) after a sticky error.
bool enqueueLaunch(cudaStream_t stream, std::function<void()> run);
// Sleeps for the simulated latency (copy_latency_us or kernel_latency_us).
void simulateLatency(const std::atomic<int>& micros);
// True when p is memory a kernel may read: device memory or mapped pinned host memory.
bool deviceAccessible(const void* p);

// Device memory (device_memory.cpp): one reserved range of address space that
// cudaMalloc takes page-aligned blocks from, inaccessible to the host while no
// stream, kernel or copy of the stand-in works on it.
class DeviceArena {
 public:
  DeviceArena(size_t reserve, bool protect);
  // A block of `bytes` (page-aligned; the rest of its pages and a gap after it
  // belong to no block), or null when the arena is full.
  void* allocate(size_t bytes);
  void free(void* p, size_t bytes);
  // One more / one fewer thread working on device memory: readable and writable
  // while any is (unless protection is off).
  void open();
  void close();
  bool protecting();
  uint64_t switches();  // mprotect calls so far
  // The reserved range, for the SIGSEGV handler (set once, then read without a lock).
  static std::atomic<uintptr_t> base_, end_;

 private:
  void setProtection(size_t offset, size_t bytes, int prot);  // caller holds mu_
  std::mutex mu_;
  size_t reserve_;
  size_t extent_ = 0;              // bytes from the base ever handed out, in whole huge pages
  std::map<size_t, size_t> free_;  // offset -> length of the free ranges below extent_
  int active_ = 0;                 // threads working on device memory now
  bool protect_;
  uint64_t switches_ = 0;
};
DeviceArena& arena();  // created on first use, never destroyed

// The calling thread starts working on device memory (a stream's thread before a
// kernel, copy or memset): the arena stays open until the same thread releases it.
// Cheap when the thread already holds it.
void holdDeviceMemory();
void releaseDeviceMemory();
// On a stream's thread: releases device memory if nothing is queued behind the
// running operation (an event's completion, before a host waiting for it goes on).
void releaseDeviceMemoryIfStreamIdle();
// Device memory open for one scope of a host thread (cudaMalloc's fill).
struct DeviceMemoryScope {
  DeviceMemoryScope() { arena().open(); }
  ~DeviceMemoryScope() { arena().close(); }
  DeviceMemoryScope(const DeviceMemoryScope&) = delete;
  DeviceMemoryScope& operator=(const DeviceMemoryScope&) = delete;
};

}  // namespace cudastandin::detail
