// Kernel execution on the CUDA stand-in: the blocks of a grid spread over the
// stream's own thread and a small pool (so ThreadSanitizer sees blocks that
// race), each block on one OS thread, each CUDA thread a fiber
// (Boost.Context's fcontext: a switch costs tens of nanoseconds). A block's
// scheduler runs every fiber until it blocks (barrier, shuffle) or ends, then
// completes what can complete and checks the rules (cuda_standin_device.h).
#include <sys/mman.h>

#include <boost/context/detail/fcontext.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "standin_device.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STANDIN_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define STANDIN_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define STANDIN_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define STANDIN_TSAN 1
#endif
#if STANDIN_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if STANDIN_TSAN
// Under ThreadSanitizer a block's CUDA threads are one TSan thread, the OS thread
// that runs the block: TSan looks for races between the host, the streams, the
// copies and the blocks (each on an OS thread), not between the lanes of one block
// (the scheduler itself checks barrier and shuffle use). As TSan fibers, the ~1,000
// lanes of each OS thread widened every vector clock to thousands of entries and
// every switch synchronised them: two thirds of a GPU test's time under TSan.
// Lanes interleave their frames on the thread's shadow stack (a report's innermost
// frames are the racing lane's), balanced because each lane returns from what it
// entered; a fiber's entry function never returns (it ends by jumping back to the
// scheduler), so it and the switch are not instrumented.
#define STANDIN_NOT_TSAN_INSTRUMENTED __attribute__((no_sanitize("thread")))
#else
#define STANDIN_NOT_TSAN_INSTRUMENTED
#endif

namespace ctx = boost::context::detail;

namespace cudastandin::detail {

thread_local ThreadState* tl_thread = nullptr;

namespace {

// Sanitizers run larger frames; a guard page below each stack turns an overflow into a fault.
#if STANDIN_ASAN || STANDIN_TSAN
constexpr size_t kStackBytes = 512 * 1024;
#else
constexpr size_t kStackBytes = 128 * 1024;
#endif
constexpr size_t kGuardBytes = 4096;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr size_t kMaxSharedBytes = 48 * 1024;

struct FiberStack {
  void* mapping = nullptr;  // guard page + stack
  void* bottom() const { return static_cast<char*>(mapping) + kGuardBytes; }
  void* top() const { return static_cast<char*>(mapping) + kGuardBytes + kStackBytes; }
};

// Stacks of the fibers of this OS thread, reused by every block it runs.
struct StackPool {
  std::vector<FiberStack> stacks;
  FiberStack& at(size_t i) {
    while (stacks.size() <= i) {
      FiberStack s;
      s.mapping = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
      if (s.mapping == MAP_FAILED) throw std::bad_alloc();
      mprotect(s.mapping, kGuardBytes, PROT_NONE);
      stacks.push_back(s);
    }
    return stacks[i];
  }
  ~StackPool() {
    for (FiberStack& s : stacks) {
#if STANDIN_ASAN
      // Frames a fiber left poisoned would stay so in the shadow of whatever is
      // mapped at these addresses next (a model file's mapping, say).
      __asan_unpoison_memory_region(s.bottom(), kStackBytes);
#endif
      munmap(s.mapping, kGuardBytes + kStackBytes);
    }
  }
};
thread_local StackPool tl_stacks;

enum class Status { Runnable, AtBarrier, AtShuffle, Done };

struct Fiber {
  ThreadState state{};
  int linear = 0, warp = 0, lane = 0;
  ctx::fcontext_t context = nullptr;
  FiberStack* stack = nullptr;
  Status status = Status::Runnable;
  bool started = false;
  // The pending barrier or shuffle.
  const char* file = "";
  int line = 0;
  unsigned mask = 0;
  ShuffleKind kind = ShuffleKind::Index;
  int arg = 0, width = 32;
  size_t bytes = 0;
  uint64_t value = 0, result = 0;
  void* asan_fake_stack = nullptr;
};

// The block running on this OS thread.
struct BlockRun {
  const KernelBody* body = nullptr;
  std::vector<Fiber>* fibers = nullptr;
  Fiber* running = nullptr;
  ctx::fcontext_t scheduler = nullptr;
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_size = 0;
  std::string error;
};
thread_local BlockRun* tl_run = nullptr;

std::string where(const Fiber& f) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "thread (%u,%u,%u) of block (%u,%u,%u)", f.state.thread_idx.x,
                f.state.thread_idx.y, f.state.thread_idx.z, f.state.block_idx.x, f.state.block_idx.y,
                f.state.block_idx.z);
  return buf;
}

std::string site(const Fiber& f) { return std::string(f.file) + ":" + std::to_string(f.line); }

// Fiber side: back to the scheduler; returns when the scheduler resumes this fiber.
STANDIN_NOT_TSAN_INSTRUMENTED void yieldToScheduler([[maybe_unused]] Fiber& f, bool final) {
  BlockRun& run = *tl_run;
#if STANDIN_ASAN
  __sanitizer_start_switch_fiber(final ? nullptr : &f.asan_fake_stack, run.scheduler_stack_bottom,
                                 run.scheduler_stack_size);
#endif
  const ctx::transfer_t back = ctx::jump_fcontext(run.scheduler, nullptr);
  (void) final;
  tl_run->scheduler = back.fctx;
#if STANDIN_ASAN
  __sanitizer_finish_switch_fiber(f.asan_fake_stack, &tl_run->scheduler_stack_bottom,
                                  &tl_run->scheduler_stack_size);
#endif
}

STANDIN_NOT_TSAN_INSTRUMENTED void fiberMain(ctx::transfer_t from) {
  BlockRun& run = *tl_run;
  run.scheduler = from.fctx;
  Fiber& f = *static_cast<Fiber*>(from.data);
#if STANDIN_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &run.scheduler_stack_bottom, &run.scheduler_stack_size);
#endif
  try {
    (*run.body)();
  } catch (const std::exception& e) {
    run.error = where(f) + " threw: " + e.what();
  } catch (...) {
    run.error = where(f) + " threw an exception";
  }
  f.status = Status::Done;
  yieldToScheduler(f, true);  // never resumed
}

// Scheduler side: runs f until it blocks or ends.
void resume(BlockRun& run, Fiber& f) {
  run.running = &f;
  tl_thread = &f.state;
  if (!f.started) {
    f.started = true;
    f.context = ctx::make_fcontext(f.stack->top(), kStackBytes, fiberMain);
  }
#if STANDIN_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, f.stack->bottom(), kStackBytes);
#endif
  const ctx::transfer_t back = ctx::jump_fcontext(f.context, &f);
  f.context = back.fctx;
#if STANDIN_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  tl_thread = nullptr;
  run.running = nullptr;
}

// c += A (16 x K) * B (K x 8) for the 32 lanes of the warp at `base` that wait at an
// int8 mma.sync, with the fragment layout of the PTX ISA (g = lane / 4, t = lane % 4,
// four consecutive k per 32-bit register): A's register i holds row g + 8 * (i % 2),
// columns 16 * (i / 2) + 4t .. + 3; B's register i column g, rows 16 * i + 4t .. + 3;
// c[i] is row g + 8 * (i / 2), column 2t + i % 2. Their operands stay valid on the
// waiting fibers' stacks. Returns false (run.error set) for a partial warp or
// lanes that disagree on K.
bool completeMma(BlockRun& run, std::vector<Fiber>& fibers, int base) {
  const Fiber& first = fibers[base];
  if (first.mask != 0xffffffffu) {
    run.error = "mma.sync at " + site(first) + " in " + where(first) + ": the whole warp must take part";
    return false;
  }
  const int k_total = first.arg;
  MmaOperands ops[32];
  for (int lane = 0; lane < 32; ++lane) {
    const Fiber& f = fibers[base + lane];
    if (f.arg != k_total) {
      run.error = "mma.sync at " + site(f) + ": lanes of " + where(f) + "'s warp use different shapes";
      return false;
    }
    const MmaOperands* p = nullptr;
    std::memcpy(&p, &f.value, sizeof p);
    ops[lane] = *p;
  }
  const auto byteAt = [](int word, int k) {
    return static_cast<int>(static_cast<int8_t>(word >> (8 * (k % 4))));
  };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      int sum = 0;
      for (int k = 0; k < k_total; ++k) {
        const int a_word = ops[(row % 8) * 4 + (k % 16) / 4].a[row / 8 + 2 * (k / 16)];
        const int b_word = ops[col * 4 + (k % 16) / 4].b[k / 16];
        sum += byteAt(a_word, k) * byteAt(b_word, k);
      }
      ops[lane].c[i] += sum;
    }
  }
  for (int lane = 0; lane < 32; ++lane) fibers[base + lane].status = Status::Runnable;
  return true;
}

// Completes every shuffle whose mask's lanes all wait at it. Returns whether any
// completed; sets run.error for a shuffle that can never complete.
bool resolveShuffles(BlockRun& run, int n_threads) {
  std::vector<Fiber>& fibers = *run.fibers;
  bool progressed = false;
  for (Fiber& first : fibers) {
    if (first.status != Status::AtShuffle) continue;
    const int base = first.warp * 32;
    const unsigned mask = first.mask;
    // Every lane the mask names must exist and wait at a shuffle with the same mask and kind.
    for (int lane = 0; lane < 32; ++lane) {
      if (!(mask >> lane & 1u)) continue;
      const int t = base + lane;
      if (t >= n_threads) {
        run.error = "__shfl_sync at " + site(first) + ": the mask names lane " + std::to_string(lane) +
                    ", which does not exist in " + where(first);
        return false;
      }
      const Fiber& other = fibers[t];
      if (other.status != Status::AtShuffle || other.mask != mask || other.kind != first.kind ||
          other.bytes != first.bytes) {
        const char* state = other.status == Status::Done        ? "has returned"
                            : other.status == Status::AtBarrier ? "waits at __syncthreads"
                            : other.mask != mask                ? "waits at a shuffle with another mask"
                                                                : "waits at a different shuffle";
        run.error = "__shfl_sync at " + site(first) + " (mask " + std::to_string(mask) + ") in " +
                    where(first) + ": lane " + std::to_string(lane) + " " + state +
                    (other.file[0] ? " (" + site(other) + ")" : "");
        return false;
      }
    }
    if (!(mask >> first.lane & 1u)) {
      run.error = "__shfl_sync at " + site(first) + ": " + where(first) + " is not in its own mask";
      return false;
    }
    if (first.kind == ShuffleKind::MmaS8) {
      if (!completeMma(run, fibers, base)) return false;
      progressed = true;
      continue;
    }
    for (int lane = 0; lane < 32; ++lane) {
      if (!(mask >> lane & 1u)) continue;
      Fiber& f = fibers[base + lane];
      const int w = f.width;
      if (w <= 0 || w > 32 || (w & (w - 1)) != 0) {
        run.error =
            "__shfl_sync at " + site(f) + ": width " + std::to_string(w) + " is not a power of 2 <= 32";
        return false;
      }
      const int seg = lane / w * w;  // first lane of this lane's segment
      int src = lane;
      switch (f.kind) {
        case ShuffleKind::Index: src = seg + ((f.arg % w) + w) % w; break;
        case ShuffleKind::Up: src = lane - seg >= f.arg ? lane - f.arg : lane; break;
        case ShuffleKind::Down: src = lane - seg + f.arg < w ? lane + f.arg : lane; break;
        case ShuffleKind::Xor: src = (lane ^ f.arg) < seg + w ? (lane ^ f.arg) : lane; break;
        case ShuffleKind::MmaS8: break;  // completed by completeMma above
      }
      if (src < 0 || src >= 32 || !(mask >> src & 1u)) {
        run.error = "__shfl_sync at " + site(f) + ": " + where(f) + " reads lane " + std::to_string(src) +
                    ", which is not in the mask";
        return false;
      }
      f.result = fibers[base + src].value;
    }
    for (int lane = 0; lane < 32; ++lane)
      if (mask >> lane & 1u) fibers[base + lane].status = Status::Runnable;
    progressed = true;
  }
  return progressed;
}

// Releases a barrier every live thread waits at. Returns whether it did; sets
// run.error for a barrier that can never complete.
bool resolveBarrier(BlockRun& run) {
  std::vector<Fiber>& fibers = *run.fibers;
  const Fiber* waiting = nullptr;
  for (const Fiber& f : fibers)
    if (f.status == Status::AtBarrier) waiting = waiting ? waiting : &f;
  if (!waiting) return false;
  for (const Fiber& f : fibers) {
    if (f.status == Status::Done) {
      run.error = "__syncthreads at " + site(*waiting) + " is never reached by " + where(f) +
                  ", which has returned (a barrier in divergent code)";
      return false;
    }
    if (f.status == Status::AtShuffle) return false;  // reported by resolveShuffles
    if (f.line != waiting->line || std::string(f.file) != waiting->file) {
      run.error = "divergent __syncthreads: " + where(*waiting) + " waits at " + site(*waiting) + ", " +
                  where(f) + " at " + site(f);
      return false;
    }
  }
  for (Fiber& f : fibers) f.status = Status::Runnable;
  return true;
}

// Runs one block to its end; returns the rule it broke, or "".
std::string runBlock(const KernelBody& body, dim3 grid, dim3 block, uint64_t block_linear) {
  const int n = static_cast<int>(block.x * block.y * block.z);
  std::vector<Fiber> fibers(static_cast<size_t>(n));
  tl_stacks.at(static_cast<size_t>(n) - 1);  // grow the pool first: its vector may move
  const uint3 bidx{static_cast<unsigned>(block_linear % grid.x),
                   static_cast<unsigned>(block_linear / grid.x % grid.y),
                   static_cast<unsigned>(block_linear / (uint64_t{grid.x} * grid.y))};
  for (int t = 0; t < n; ++t) {
    Fiber& f = fibers[t];
    f.state.thread_idx = uint3{t % block.x, t / block.x % block.y, t / (block.x * block.y)};
    f.state.block_idx = bidx;
    f.state.block_dim = block;
    f.state.grid_dim = grid;
    f.linear = t, f.warp = t / 32, f.lane = t % 32;
    f.stack = &tl_stacks.at(static_cast<size_t>(t));
  }
  BlockRun run;
  run.body = &body;
  run.fibers = &fibers;
  BlockRun* outer = tl_run;
  tl_run = &run;
  for (;;) {
    for (Fiber& f : fibers)
      if (f.status == Status::Runnable) {
        resume(run, f);
        if (!run.error.empty()) break;
      }
    if (!run.error.empty()) break;
    bool all_done = true;
    for (const Fiber& f : fibers) all_done = all_done && f.status == Status::Done;
    if (all_done) break;
    if (resolveShuffles(run, n)) continue;
    if (!run.error.empty()) break;
    if (resolveBarrier(run)) continue;
    if (run.error.empty()) run.error = "deadlock in block: no thread can continue";
    break;
  }
  tl_run = outer;
  if (!run.error.empty()) {
#if STANDIN_ASAN
    // Fibers left suspended keep their frames' poisoned redzones; the next block reuses the stacks.
    for (int t = 0; t < n; ++t) __asan_unpoison_memory_region(fibers[t].stack->bottom(), kStackBytes);
#endif
  }
  return run.error;
}

// A grid's blocks, taken one at a time by the threads that run it.
struct GridJob {
  KernelBody body;
  dim3 grid, block;
  uint64_t total = 0;
  std::atomic<uint64_t> next{0}, finished{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable done_cv;
  std::string error;  // the first fault (under mu)

  void work() {
    for (;;) {
      const uint64_t b = next.fetch_add(1);
      if (b >= total) return;
      if (!failed.load()) {
        std::string fault = runBlock(body, grid, block, b);
        if (!fault.empty()) {
          std::lock_guard lock(mu);
          if (!failed.exchange(true)) error = std::move(fault);
        }
      }
      if (finished.fetch_add(1) + 1 == total) {
        std::lock_guard lock(mu);
        done_cv.notify_all();
      }
    }
  }
};

// Threads that help the stream threads run blocks.
class BlockPool {
 public:
  BlockPool() {
    const unsigned hw = std::max(2u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i + 1 < std::min(hw, 4u); ++i) threads_.emplace_back([this] { serve(); });
  }
  void offer(const std::shared_ptr<GridJob>& job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(job);
    }
    cv_.notify_all();
  }
  void withdraw(const std::shared_ptr<GridJob>& job) {
    std::lock_guard lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
      if (*it == job) {
        jobs_.erase(it);
        return;
      }
  }

 private:
  void serve() {
    for (;;) {
      std::shared_ptr<GridJob> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = jobs_.front();
        if (job->next.load() >= job->total) {  // nothing left to take: drop it and look again
          jobs_.pop_front();
          continue;
        }
      }
      job->work();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GridJob>> jobs_;
  std::vector<std::thread> threads_;
};

BlockPool& blockPool() {
  static BlockPool* pool = new BlockPool;  // never destroyed: its threads wait forever
  return *pool;
}

void runGrid(const std::shared_ptr<GridJob>& job) {
  if (job->total > 1) blockPool().offer(job);
  job->work();
  {
    std::unique_lock lock(job->mu);
    job->done_cv.wait(lock, [&] { return job->finished.load() == job->total; });
  }
  if (job->total > 1) blockPool().withdraw(job);
  if (job->failed.load()) device().setSticky(cudaErrorLaunchFailure, "kernel fault: " + job->error);
}

}  // namespace

// ---------------------------------------------------------------------------
// Fiber side of barriers and shuffles

void syncThreads(const char* file, int line) {
  if (!tl_run || !tl_run->running) {
    std::fprintf(stderr, "cuda stand-in: __syncthreads outside a kernel\n");
    return;
  }
  Fiber& f = *tl_run->running;
  f.status = Status::AtBarrier;
  f.file = file;
  f.line = line;
  yieldToScheduler(f, false);
  f.file = "";
}

void shuffle(unsigned mask, const void* value, void* out, size_t bytes, ShuffleKind kind, int arg, int width,
             const char* file, int line) {
  if (!tl_run || !tl_run->running) {
    std::memcpy(out, value, bytes);
    return;
  }
  Fiber& f = *tl_run->running;
  f.status = Status::AtShuffle;
  f.mask = mask, f.kind = kind, f.arg = arg, f.width = width, f.bytes = bytes;
  f.file = file, f.line = line;
  f.value = 0;
  std::memcpy(&f.value, value, bytes);
  yieldToScheduler(f, false);
  std::memcpy(out, &f.result, bytes);
  f.file = "";
}

// ---------------------------------------------------------------------------
// Launch

void enqueueKernel(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, KernelBody body,
                   std::vector<PointerArg> pointers) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  const bool config_ok = block.x >= 1 && block.y >= 1 && block.z >= 1 && block.x <= 1024 && block.y <= 1024 &&
                         block.z <= 64 && threads <= kMaxThreadsPerBlock && grid.x >= 1 && grid.y >= 1 &&
                         grid.z >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535 &&
                         shared_bytes <= kMaxSharedBytes;
  if (!config_ok) {
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  // The launch may run more than once (a graph replayed): each run gets a job of its own.
  auto shared_body = std::make_shared<const KernelBody>(std::move(body));
  enqueueLaunch(stream, [shared_body, grid, block, pointers = std::move(pointers)] {
    for (const PointerArg& p : pointers)
      if (!deviceAccessible(p.ptr)) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "kernel argument %d (%p) is not device memory or pinned host memory",
                      p.index, p.ptr);
        device().setSticky(cudaErrorIllegalAddress, buf);
        return;
      }
    auto job = std::make_shared<GridJob>();
    job->body = *shared_body;
    job->grid = grid;
    job->block = block;
    job->total = uint64_t{grid.x} * grid.y * grid.z;
    runGrid(job);
  });
}

}  // namespace cudastandin::detail
