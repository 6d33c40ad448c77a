// The CUDA stand-in's device, errors and memory: cudaMalloc is a block of the
// device arena (device_memory.cpp: the host cannot read it outside the stand-in's
// streams and copies; under AddressSanitizer the bytes past the size asked for are
// poisoned, so a kernel that reads past it is reported), filled with 0xff bytes
// (NaN as floats) so that code that reads memory it never wrote notices; the
// device's size is a setting.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <new>

#include "standin_device.h"

namespace cudastandin::detail {

namespace {
constexpr size_t kDeviceAlign = 256;  // cudaMalloc's alignment guarantee
constexpr size_t kHostAlign = 64;

size_t physicalMemoryBytes() {
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// CUDA_STANDIN_FAULTS="malloc=3,kernel=10,copy=4,event=1,stream=2": arm faults for a
// process a test starts (the same countdowns as the fail*At calls).
void armFaultsFromEnvironment(Device& d) {
  const char* spec = std::getenv("CUDA_STANDIN_FAULTS");
  if (!spec) return;
  std::string s(spec);
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t end = s.find(',', pos) == std::string::npos ? s.size() : s.find(',', pos);
    const std::string item = s.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) {
      const std::string key = item.substr(0, eq);
      const int n = std::atoi(item.c_str() + eq + 1);
      if (key == "malloc") d.fail_malloc_at = n;
      if (key == "kernel") d.fail_kernel_at = n;
      if (key == "copy") d.fail_copy_at = n;
      if (key == "event") d.fail_event_at = n;
      if (key == "stream") d.fail_stream_at = n;
    }
    pos = end + 1;
  }
}
}  // namespace

Device::Device() {
  if (const char* mb = std::getenv("CUDA_STANDIN_DEVICE_MB"))
    if (const long long v = std::atoll(mb); v > 0) device_bytes = static_cast<size_t>(v) << 20;
  if (const char* us = std::getenv("CUDA_STANDIN_COPY_LATENCY_US")) copy_latency_us = std::atoi(us);
  if (const char* us = std::getenv("CUDA_STANDIN_KERNEL_LATENCY_US")) kernel_latency_us = std::atoi(us);
  armFaultsFromEnvironment(*this);
}

Device& device() {
  static Device* d = new Device;
  return *d;
}

cudaError_t& lastError() {
  thread_local cudaError_t error = cudaSuccess;
  return error;
}

const Allocation* Device::findLocked(const void* p, size_t n, uintptr_t* base) const {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(addr);
  if (it == allocations.begin()) return nullptr;
  --it;
  // The address itself must lie inside (one past the end is the next object's), and so must the range.
  const uintptr_t end = it->first + it->second.bytes;
  if (addr >= end || addr + n > end || addr + n < addr) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}

void Device::setSticky(cudaError_t error, const std::string& detail) {
  int expected = cudaSuccess;
  if (sticky.compare_exchange_strong(expected, error)) {
    {
      std::lock_guard lock(mu);
      fault_detail = detail;
    }
    std::fprintf(stderr, "cuda stand-in: device fault (%s): %s\n", cudaGetErrorName(error), detail.c_str());
  }
  std::lock_guard lock(event_mu);
  event_cv.notify_all();
}

Stream& Device::stream(cudaStream_t s) {
  if (s) return *reinterpret_cast<Stream*>(s);
  std::lock_guard lock(mu);
  if (!default_stream_) default_stream_ = std::make_unique<Stream>();
  return *default_stream_;
}

void Device::countHostSync(Stream* s, uint64_t waits_for) {
  bool stalling = false;
  {
    std::lock_guard lock(mu);
    if (!s || (!streams.count(s) && s != default_stream_.get())) return;
    s->counts.host_syncs.fetch_add(1, std::memory_order_relaxed);
    stalling = waits_for == 0 || s->queuedSoFar() == waits_for;
    if (stalling) s->counts.stalling_host_syncs.fetch_add(1, std::memory_order_relaxed);
  }
  std::function<void(bool)> observer;
  {
    std::lock_guard lock(observer_mu);
    observer = host_wait_observer;
  }
  if (observer) observer(stalling);
}

void Device::countStreamSync(Stream& s) {
  s.counts.stream_syncs.fetch_add(1, std::memory_order_relaxed);
  countHostSync(&s, 0);
}

void Device::synchronizeAll() {
  std::vector<Stream*> all;
  {
    std::lock_guard lock(mu);
    all.assign(streams.begin(), streams.end());
    if (default_stream_) all.push_back(default_stream_.get());
  }
  for (Stream* s : all) s->synchronize();
}

bool deviceAccessible(const void* p) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  return d.findLocked(p, 0) != nullptr;  // device memory and pinned host memory alike (mapped, one address)
}

}  // namespace cudastandin::detail

using namespace cudastandin::detail;

// ---------------------------------------------------------------------------
// Errors

cudaError_t cudaGetLastError() {
  if (const cudaError_t s = sticky()) return s;
  const cudaError_t e = lastError();
  lastError() = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  if (const cudaError_t s = sticky()) return s;
  return lastError();
}

namespace {
struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};
// Names and descriptions as the CUDA runtime reports them.
constexpr ErrorText kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
const ErrorText* errorText(cudaError_t e) {
  for (const ErrorText& t : kErrors)
    if (t.code == e) return &t;
  return nullptr;
}
}  // namespace

const char* cudaGetErrorName(cudaError_t error) {
  const ErrorText* t = errorText(error);
  return t ? t->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  const ErrorText* t = errorText(error);
  return t ? t->text : "unrecognized error code";
}

// ---------------------------------------------------------------------------
// Device

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  Device& d = device();
  std::lock_guard lock(d.mu);
  *count = d.device_count;
  return d.device_count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

int& cudastandin::detail::currentDevice() {
  thread_local int current = 0;
  return current;
}

cudaError_t cudaGetDevice(int* dev) {
  if (!dev) return fail(cudaErrorInvalidValue);
  *dev = currentDevice();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  if (dev < 0 || dev >= d.device_count) return fail(cudaErrorInvalidDevice);
  currentDevice() = dev;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int dev) {
  if (!prop) return fail(cudaErrorInvalidValue);
  {
    Device& d = device();
    std::lock_guard lock(d.mu);
    if (dev < 0 || dev >= d.device_count) return fail(cudaErrorInvalidDevice);
  }
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "CUDA stand-in (CPU)");
  {
    Device& d = device();
    std::lock_guard lock(d.mu);
    prop->totalGlobalMem = d.device_bytes;
  }
  prop->sharedMemPerBlock = 48 * 1024;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024, prop->maxThreadsDim[1] = 1024, prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff, prop->maxGridSize[1] = 65535, prop->maxGridSize[2] = 65535;
  prop->multiProcessorCount = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  prop->major = 8, prop->minor = 9;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t e = forbiddenWhileCapturing("cudaDeviceSynchronize")) return e;
  Device& d = device();
  d.synchronizeAll();
  {
    std::lock_guard lock(d.mu);
    ++d.device_syncs;
  }
  return fail(sticky());
}

cudaError_t cudaDeviceReset() { return cudaDeviceSynchronize(); }

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return fail(cudaErrorInvalidValue);
  if (const cudaError_t s = sticky()) return s;
  Device& d = device();
  std::lock_guard lock(d.mu);
  *total_bytes = d.device_bytes;
  *free_bytes = d.device_bytes > d.used ? d.device_bytes - d.used : 0;
  return cudaSuccess;
}

// ---------------------------------------------------------------------------
// Memory

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (const cudaError_t e = forbiddenWhileCapturing("cudaMalloc")) return e;
  if (const cudaError_t s = sticky()) return s;
  if (bytes == 0) return cudaSuccess;
  Device& d = device();
  std::lock_guard lock(d.mu);
  if (Device::countdown(d.fail_malloc_at)) return fail(cudaErrorMemoryAllocation);
  // Accounted as the device would: whole 256-byte granules.
  const size_t charged = (bytes + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign;
  if (charged > d.device_bytes - d.used) return fail(cudaErrorMemoryAllocation);
  void* p = arena().allocate(bytes);
  if (!p) return fail(cudaErrorMemoryAllocation);
  {
    DeviceMemoryScope open;
    std::memset(p, 0xff, bytes);
  }
  d.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, MemoryKind::Device};
  d.used += charged;
  d.peak = std::max(d.peak, d.used);
  ++d.mallocs;
  *ptr = p;
  return cudaSuccess;
}

namespace {
// Frees an allocation of `kind` after the device is idle (cudaFree and cudaFreeHost
// wait for queued work, so no kernel can still be reading the memory).
cudaError_t freeKind(void* ptr, MemoryKind kind) {
  if (const cudaError_t e = forbiddenWhileCapturing("a free")) return e;
  if (!ptr) return cudaSuccess;
  Device& d = device();
  d.synchronizeAll();
  std::lock_guard lock(d.mu);
  auto it = d.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == d.allocations.end() || it->second.kind != kind) return fail(cudaErrorInvalidValue);
  const size_t bytes = it->second.bytes;
  if (kind == MemoryKind::Device) {
    d.used -= (bytes + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign;
    arena().free(ptr, bytes);
  } else {
    d.pinned -= bytes;
    ::operator delete(ptr, std::align_val_t(kHostAlign));
  }
  d.allocations.erase(it);
  return fail(sticky());  // freed either way; a faulted device still reports its error
}
}  // namespace

cudaError_t cudaFree(void* ptr) { return freeKind(ptr, MemoryKind::Device); }

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (const cudaError_t e = forbiddenWhileCapturing("cudaHostAlloc")) return e;
  if (const cudaError_t s = sticky()) return s;
  // The driver cannot pin more than the machine has (and a sanitizer's allocator
  // aborts on absurd sizes instead of returning null).
  if (bytes > physicalMemoryBytes()) return fail(cudaErrorMemoryAllocation);
  void* p = ::operator new(bytes ? bytes : 1, std::align_val_t(kHostAlign), std::nothrow);
  if (!p) return fail(cudaErrorMemoryAllocation);
  Device& d = device();
  std::lock_guard lock(d.mu);
  d.allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes ? bytes : 1, MemoryKind::Pinned};
  d.pinned += bytes ? bytes : 1;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void* ptr) { return freeKind(ptr, MemoryKind::Pinned); }

cudaError_t cudaHostRegister(void* ptr, size_t bytes, unsigned int) {
  if (!ptr || bytes == 0) return fail(cudaErrorInvalidValue);
  if (const cudaError_t s = sticky()) return s;
  Device& d = device();
  std::lock_guard lock(d.mu);
  const auto b = reinterpret_cast<uintptr_t>(ptr);
  auto it = d.allocations.lower_bound(b);
  const bool overlaps_next = it != d.allocations.end() && it->first < b + bytes;
  const bool overlaps_prev =
      it != d.allocations.begin() && std::prev(it)->first + std::prev(it)->second.bytes > b;
  if (overlaps_next || overlaps_prev) return fail(cudaErrorHostMemoryAlreadyRegistered);
  d.allocations[b] = Allocation{bytes, MemoryKind::Registered};
  d.pinned += bytes;
  return cudaSuccess;
}

cudaError_t cudaHostUnregister(void* ptr) {
  Device& d = device();
  d.synchronizeAll();
  std::lock_guard lock(d.mu);
  auto it = d.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == d.allocations.end() || it->second.kind != MemoryKind::Registered)
    return fail(cudaErrorHostMemoryNotRegistered);
  d.pinned -= it->second.bytes;
  d.allocations.erase(it);
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  if (!attr) return fail(cudaErrorInvalidValue);
  *attr = cudaPointerAttributes{};
  Device& d = device();
  std::lock_guard lock(d.mu);
  const Allocation* a = d.findLocked(ptr, 0);
  void* p = const_cast<void*>(ptr);
  if (!a) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->hostPointer = p;
  } else if (a->kind == MemoryKind::Device) {
    attr->type = cudaMemoryTypeDevice;
    attr->devicePointer = p;
  } else {  // pinned host memory is mapped at the same address (unified addressing)
    attr->type = cudaMemoryTypeHost;
    attr->devicePointer = p;
    attr->hostPointer = p;
  }
  return cudaSuccess;
}

// ---------------------------------------------------------------------------
// Test control

namespace cudastandin {

StreamCounters counters(cudaStream_t stream) { return device().stream(stream).snapshot(); }

void waitUntilStreamStalled(cudaStream_t stream) { device().stream(stream).waitUntilStalled(); }

DeviceCounters totals() {
  Device& d = device();
  DeviceCounters t;
  std::vector<Stream*> live;
  {
    std::lock_guard lock(d.mu);
    t.all = d.destroyed;
    live.assign(d.streams.begin(), d.streams.end());
    t.device_syncs = d.device_syncs;
    t.mallocs = d.mallocs;
    t.bytes_allocated = d.used;
    t.peak_bytes = d.peak;
    t.pinned_bytes = d.pinned;
  }
  live.push_back(&d.stream(nullptr));
  for (Stream* s : live) t.all += s->snapshot();
  return t;
}

void setDeviceBytes(size_t bytes) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  d.device_bytes = bytes;
}

void setDeviceCount(int count) {
  Device& d = device();
  std::lock_guard lock(d.mu);
  d.device_count = count;
}

void setHostWaitObserver(std::function<void(bool stalling)> observer) {
  Device& d = device();
  std::lock_guard lock(d.observer_mu);
  d.host_wait_observer = std::move(observer);
}

void setCopyLatencyMicros(int us) { device().copy_latency_us = us; }
void setKernelLatencyMicros(int us) { device().kernel_latency_us = us; }

void failMallocAt(int n) {
  std::lock_guard lock(device().mu);
  device().fail_malloc_at = n;
}
void failKernelAt(int n) {
  std::lock_guard lock(device().mu);
  device().fail_kernel_at = n;
}
void failCopyAt(int n) {
  std::lock_guard lock(device().mu);
  device().fail_copy_at = n;
}
void failEventCreateAt(int n) {
  std::lock_guard lock(device().mu);
  device().fail_event_at = n;
}
void failStreamCreateAt(int n) {
  std::lock_guard lock(device().mu);
  device().fail_stream_at = n;
}

cudaError_t stickyError() { return sticky(); }

std::string faultDetail() {
  std::lock_guard lock(device().mu);
  return device().fault_detail;
}

void recover() {
  Device& d = device();
  d.synchronizeAll();
  d.sticky.store(cudaSuccess, std::memory_order_release);
  lastError() = cudaSuccess;
  std::lock_guard lock(d.mu);
  d.fault_detail.clear();
  d.fail_malloc_at = d.fail_kernel_at = d.fail_copy_at = d.fail_event_at = d.fail_stream_at = 0;
}

}  // namespace cudastandin
