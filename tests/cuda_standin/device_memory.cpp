// The CUDA stand-in's device memory: one reserved range of address space, the
// arena, from which cudaMalloc takes page-aligned blocks. On a GPU the host cannot
// read device memory; here it would be ordinary memory, so the arena is
// inaccessible (PROT_NONE) whenever no stand-in stream, kernel or copy is working
// on it, and readable and writable while any is (a count of the threads doing
// device work; each transition of the count between 0 and 1 is one mprotect).
// Host code that reads a device pointer after a synchronise then faults every
// time, and the SIGSEGV handler says what happened. A stream's thread holds the
// arena open from its first device operation until its queue runs dry or it must
// wait (an event, a host function), so a run of kernels costs no mprotect each.
// CUDA_STANDIN_PROTECT_DEVICE_MEMORY=0 leaves the arena open (for a debugger).
// Under AddressSanitizer the bytes between blocks and freed blocks are poisoned,
// so a kernel that reads past its allocation is still reported.
#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "standin_device.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STANDIN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define STANDIN_ASAN 1
#endif
#if STANDIN_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace cudastandin::detail {

namespace {

constexpr size_t kPage = 4096;
// The arena asks for transparent huge pages and grows in whole ones: an mprotect
// then changes one entry per 2 MiB instead of 512 (on the development VM, 0.06 ms
// instead of 28 ms for 122 MiB of device memory).
constexpr size_t kHugePage = size_t{2} << 20;
// At least this many bytes follow each block before the next one starts: under
// ASan they are poisoned, a kernel's read past the end is reported.
constexpr size_t kGap = 256;

size_t roundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

void poison([[maybe_unused]] uintptr_t p, [[maybe_unused]] size_t n) {
#if STANDIN_ASAN
  __asan_poison_memory_region(reinterpret_cast<void*>(p), n);
#endif
}
void unpoison([[maybe_unused]] uintptr_t p, [[maybe_unused]] size_t n) {
#if STANDIN_ASAN
  __asan_unpoison_memory_region(reinterpret_cast<void*>(p), n);
#endif
}

struct sigaction g_previous_segv;  // the handler before ours: called for faults that are not ours
void onSegv(int sig, siginfo_t* info, void* context);

}  // namespace

// Read by the signal handler: set once, before the handler is installed.
std::atomic<uintptr_t> DeviceArena::base_{0}, DeviceArena::end_{0};

DeviceArena::DeviceArena(size_t reserve, bool protect)
    : reserve_(roundUp(reserve, kHugePage)), protect_(protect) {
  // Address space only: pages exist once written, and freed ones go back. The base
  // on a huge page boundary (the slack either side unmapped again).
  void* p = mmap(nullptr, reserve_ + kHugePage, protect_ ? PROT_NONE : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "cuda stand-in: cannot reserve %zu bytes of address space for device memory\n",
                 reserve_);
    std::abort();
  }
  const auto mapped = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = roundUp(mapped, kHugePage);
  if (b > mapped) munmap(p, b - mapped);
  if (const uintptr_t tail = mapped + reserve_ + kHugePage; tail > b + reserve_)
    munmap(reinterpret_cast<void*>(b + reserve_), tail - (b + reserve_));
  madvise(reinterpret_cast<void*>(b), reserve_, MADV_HUGEPAGE);  // a hint: without it, only slower
  end_.store(b + reserve_);
  base_.store(b);
  // backtrace() loads its unwinder on first use (which allocates): not in the signal handler.
  void* frames[4];
  (void)backtrace(frames, 4);
  struct sigaction sa {};
  sa.sa_sigaction = onSegv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous_segv);
}

void* DeviceArena::allocate(size_t bytes) {
  const size_t span = roundUp(bytes + kGap, kPage);
  std::lock_guard lock(mu_);
  size_t offset = SIZE_MAX;
  // First fit among freed ranges, else above everything handed out so far.
  for (auto it = free_.begin(); it != free_.end(); ++it)
    if (it->second >= span) {
      offset = it->first;
      const size_t left = it->second - span;
      free_.erase(it);
      if (left) free_[offset + span] = left;
      break;
    }
  if (offset == SIZE_MAX) {
    // Grow by whole huge pages; what this block leaves of them is free.
    offset = extent_;
    auto last = free_.empty() ? free_.end() : std::prev(free_.end());
    if (last != free_.end() && last->first + last->second == extent_) {  // the free top of the arena
      offset = last->first;
      free_.erase(last);
    }
    const size_t grown = roundUp(offset + span, kHugePage);
    if (grown > reserve_) {
      if (offset < extent_) free_[offset] = extent_ - offset;
      return nullptr;
    }
    // New pages take the arena's present state (they were PROT_NONE since the mapping).
    if (protect_ && active_ > 0) setProtection(extent_, grown - extent_, PROT_READ | PROT_WRITE);
    if (grown > offset + span) free_[offset + span] = grown - (offset + span);
    extent_ = grown;
  }
  const uintptr_t p = base_.load() + offset;
  unpoison(p, bytes);
  poison(p + bytes, span - bytes);
  return reinterpret_cast<void*>(p);
}

void DeviceArena::free(void* ptr, size_t bytes) {
  const size_t span = roundUp(bytes + kGap, kPage);
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  poison(p, span);
  std::lock_guard lock(mu_);
  size_t offset = p - base_.load(), len = span;
  // Merge with the free neighbours on either side.
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == offset + len) {
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_[offset] = len;
  // The whole huge pages of the free range go back to the system (the range stays
  // reserved); giving back part of one would split it into small pages.
  const size_t first = roundUp(offset, kHugePage), last = (offset + len) / kHugePage * kHugePage;
  if (last > first) madvise(reinterpret_cast<void*>(base_.load() + first), last - first, MADV_DONTNEED);
}

void DeviceArena::open() {
  std::lock_guard lock(mu_);
  if (active_++ == 0 && protect_ && extent_ > 0) setProtection(0, extent_, PROT_READ | PROT_WRITE);
}

void DeviceArena::close() {
  std::lock_guard lock(mu_);
  if (--active_ == 0 && protect_ && extent_ > 0) setProtection(0, extent_, PROT_NONE);
}

bool DeviceArena::protecting() {
  std::lock_guard lock(mu_);
  return protect_;
}

uint64_t DeviceArena::switches() {
  std::lock_guard lock(mu_);
  return switches_;
}

void DeviceArena::setProtection(size_t offset, size_t bytes, int prot) {
  if (mprotect(reinterpret_cast<void*>(base_.load() + offset), bytes, prot) != 0) {
    std::fprintf(stderr, "cuda stand-in: mprotect of device memory failed (%s); it stays readable\n",
                 std::strerror(errno));
    mprotect(reinterpret_cast<void*>(base_.load()), reserve_, PROT_READ | PROT_WRITE);
    protect_ = false;
    return;
  }
  ++switches_;
}

DeviceArena& arena() {
  static DeviceArena* a = [] {
    const char* v = std::getenv("CUDA_STANDIN_PROTECT_DEVICE_MEMORY");
    const bool protect = !(v && std::string(v) == "0");
    // Address space only: room for the default device (2 GiB) many times over, or
    // for CUDA_STANDIN_DEVICE_MB's several times (page rounding and gaps). A device
    // made larger later by setDeviceBytes gets cudaErrorMemoryAllocation past it.
    size_t reserve = size_t{64} << 30;
    if (const char* mb = std::getenv("CUDA_STANDIN_DEVICE_MB"))
      if (const long long v = std::atoll(mb); v > 0) reserve = std::max(reserve, 4 * (size_t(v) << 20));
    return new DeviceArena(reserve, protect);
  }();  // never destroyed: stream threads may outlive static destruction
  return *a;
}

namespace {
thread_local bool tl_holds_device_memory = false;
}

void holdDeviceMemory() {
  if (tl_holds_device_memory) return;
  arena().open();
  tl_holds_device_memory = true;
}

void releaseDeviceMemory() {
  if (!tl_holds_device_memory) return;
  tl_holds_device_memory = false;
  arena().close();
}

namespace {

// Async-signal-safe formatting for the handler.
void append(char*& out, const char* end, const char* s) {
  while (*s && out < end) *out++ = *s++;
}
void appendNumber(char*& out, const char* end, uint64_t v, int base) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v && n < 24);
  if (base == 16) append(out, end, "0x");
  while (n > 0 && out < end) *out++ = digits[--n];
}

void onSegv(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const uintptr_t base = DeviceArena::base_.load(), end = DeviceArena::end_.load();
  if (base && addr >= base && addr < end) {
    bool write = false;
#if defined(__x86_64__)
    // The page fault's error code: bit 1 is set for a write.
    write = context && (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)context;
#endif
    char msg[512];
    char* out = msg;
    const char* stop = msg + sizeof msg - 1;
    append(out, stop, "cuda stand-in: host code ");
    append(out, stop, write ? "wrote" : "read");
    append(out, stop, " device memory at ");
    appendNumber(out, stop, addr, 16);
    append(out, stop, " (");
    appendNumber(out, stop, addr - base, 10);
    append(out, stop,
           " bytes into the device arena), outside the stand-in's streams and copies. On a GPU this is a "
           "device address the host cannot use: copy the bytes with cudaMemcpy, or keep a host copy. "
           "(CUDA_STANDIN_PROTECT_DEVICE_MEMORY=0 lets it pass, for a debugger.)\n");
    (void)!::write(STDERR_FILENO, msg, static_cast<size_t>(out - msg));
    if (!(g_previous_segv.sa_flags & SA_SIGINFO) && g_previous_segv.sa_handler == SIG_DFL) {
      void* frames[64];
      const int n = backtrace(frames, 64);
      backtrace_symbols_fd(frames, n, STDERR_FILENO);
    }
  }
  // Not ours, or reported: the previous handler (a sanitizer's report), or the
  // default action when the faulting instruction runs again.
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    if (g_previous_segv.sa_sigaction) {
      g_previous_segv.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    g_previous_segv.sa_handler(sig);
    return;
  }
  signal(SIGSEGV, SIG_DFL);
}

}  // namespace

}  // namespace cudastandin::detail

namespace cudastandin {

std::atomic<uint64_t> detail::weight_eighths_loaded{0};

uint64_t weightBytesLoaded() { return detail::weight_eighths_loaded.load() / 8; }

bool deviceMemoryProtected() { return detail::arena().protecting(); }
uint64_t deviceMemoryProtectionSwitches() { return detail::arena().switches(); }

}  // namespace cudastandin
