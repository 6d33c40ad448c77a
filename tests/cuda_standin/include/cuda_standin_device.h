// The device side of the CUDA stand-in (included by its cuda_runtime.h).
//
// A kernel launch runs every block of the grid on one OS thread (the blocks
// spread over the stream's thread and a small pool), and every CUDA thread of a
// block as a fiber on that OS thread. A fiber runs until it reaches
// __syncthreads, a warp shuffle or its end; the block's scheduler then completes
// the barrier or the shuffle and checks the rules a GPU does not check:
//   - __syncthreads must be reached by every thread of the block, at the same
//     call site (a thread that returned, or one waiting elsewhere, is reported);
//   - a shuffle's mask must name exactly the lanes that call it together, with
//     the same mask, and only lanes that exist (a partial or divergent shuffle
//     is reported, not hung);
// Such a fault, and a pointer argument that is not device-accessible memory,
// ends the kernel with a sticky error (cudaErrorLaunchFailure /
// cudaErrorIllegalAddress), as a GPU fault would.
// __shared__ variables are per OS thread (static thread_local): one block at a
// time runs on an OS thread, so each running block has its own copy.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __launch_bounds__(...)

namespace cudastandin::detail {

// The CUDA thread running on this OS thread (null outside a kernel).
struct ThreadState {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
extern thread_local ThreadState* tl_thread;

inline ThreadState& current() { return *tl_thread; }

enum class ShuffleKind { Index, Up, Down, Xor, MmaS8 };
// One lane's operands of an int8 mma.sync (ShuffleKind::MmaS8, arg = K): the
// scheduler reads every lane's registers and adds each lane's four sums into c.
struct MmaOperands {
  const int* a;
  const int* b;
  int* c;
};
// Exchanges `bytes` bytes (<= 8) of each participating lane; *out gets the source lane's value.
void shuffle(unsigned mask, const void* value, void* out, size_t bytes, ShuffleKind kind, int arg, int width,
             const char* file, int line);
void syncThreads(const char* file, int line);

// One CUDA thread's work: the kernel called with the launch's arguments.
using KernelBody = std::function<void()>;
struct PointerArg {
  const void* ptr;
  int index;  // argument position, for the message
};
// Queues the grid on `stream` (validating the configuration first: an invalid one
// is the calling thread's last error, nothing runs). pointers: the kernel's pointer
// arguments, checked when the kernel runs.
void enqueueKernel(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, KernelBody body,
                   std::vector<PointerArg> pointers);

template <typename T>
void collectPointer(std::vector<PointerArg>& out, int index, const T& value) {
  if constexpr (std::is_pointer_v<T>)
    if (value) out.push_back({static_cast<const void*>(value), index});
}

}  // namespace cudastandin::detail

namespace cudastandin {

namespace detail {
extern std::atomic<uint64_t> weight_eighths_loaded;
}

// Weight bytes the kernels loaded, counted where they load them (a quantised unit
// of 32 weights, a float weight), in eighths of a byte: a unit of a 256-weight
// block is an eighth of the block. Kernels call it on the stand-in only.
inline void countWeightLoad(uint64_t eighths) {
  detail::weight_eighths_loaded.fetch_add(eighths, std::memory_order_relaxed);
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...) on the stand-in.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count");
  std::tuple<std::decay_t<Params>...> packed(static_cast<Params>(std::forward<Args>(args))...);
  std::vector<detail::PointerArg> pointers;
  std::apply(
      [&](const auto&... v) {
        int index = 0;
        (detail::collectPointer(pointers, index++, v), ...);
      },
      packed);
  detail::enqueueKernel(
      grid, block, shared_bytes, stream, [kernel, packed]() { std::apply(kernel, packed); },
      std::move(pointers));
}

}  // namespace cudastandin

#define threadIdx (::cudastandin::detail::current().thread_idx)
#define blockIdx (::cudastandin::detail::current().block_idx)
#define blockDim (::cudastandin::detail::current().block_dim)
#define gridDim (::cudastandin::detail::current().grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::cudastandin::detail::syncThreads(file, line);
}

namespace cudastandin::detail {
template <typename T>
T shuffleAs(unsigned mask, T value, ShuffleKind kind, int arg, int width, const char* file, int line) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  T out;
  shuffle(mask, &value, &out, sizeof(T), kind, arg, width, file, line);
  return out;
}
}  // namespace cudastandin::detail

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) {
  return ::cudastandin::detail::shuffleAs(mask, var, ::cudastandin::detail::ShuffleKind::Index, src_lane,
                                          width, file, line);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return ::cudastandin::detail::shuffleAs(mask, var, ::cudastandin::detail::ShuffleKind::Up,
                                          static_cast<int>(delta), width, file, line);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return ::cudastandin::detail::shuffleAs(mask, var, ::cudastandin::detail::ShuffleKind::Down,
                                          static_cast<int>(delta), width, file, line);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return ::cudastandin::detail::shuffleAs(mask, var, ::cudastandin::detail::ShuffleKind::Xor, lane_mask,
                                          width, file, line);
}

// Correctly rounded single and double operations. The stand-in's CUDA sources are compiled
// with -ffp-contract=off, so these are never fused into an FMA.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }

inline float __uint_as_float(unsigned int bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline unsigned int __float_as_uint(float f) {
  unsigned int bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
inline float __int_as_float(int bits) { return __uint_as_float(static_cast<unsigned int>(bits)); }
inline int __float_as_int(float f) { return static_cast<int>(__float_as_uint(f)); }

template <typename T>
T __ldg(const T* p) {
  return *p;
}

// The low 32 bits of hi:lo shifted right by shift & 31 (the shf.r.wrap instruction).
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
  const uint64_t both = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<unsigned int>(both >> (shift & 31));
}

// Four signed bytes of a times four of b, plus c (the dp4a instruction).
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i)
    c += static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i))) *
         static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i)));
  return c;
}
// Byte n of the result is byte (s >> 4n) & 7 of the eight bytes y:x (x the low four);
// the PTX prmt default mode, the selector's sign bits unused as CUDA's __byte_perm does.
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  unsigned int r = 0;
  for (int n = 0; n < 4; ++n)
    r |= static_cast<unsigned int>((bytes >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
}
// Float to int, rounded to nearest, ties to even (the default rounding mode).
inline int __float2int_rn(float f) { return static_cast<int>(std::nearbyint(f)); }
// The integer min / max CUDA declares at global scope.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

// Waits until every lane of `mask` reaches it (checked as a shuffle is).
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
  (void)::cudastandin::detail::shuffleAs(mask, 0, ::cudastandin::detail::ShuffleKind::Xor, 0, warpSize, file,
                                         line);
}

namespace cudastandin {

// The int8 tensor-core instruction mma.sync.aligned.m16n8k{K}.row.col.s32.s8.s8.s32
// for K = 16 or 32, a whole-warp operation: c += A (16 x K) * B (K x 8). Each lane
// holds parts of the operands as the PTX ISA lays out its fragments, with
// g = lane / 4 and t = lane % 4 and four bytes (consecutive k) per register:
//   A: register i holds row g + 8 * (i % 2), columns 16 * (i / 2) + 4t .. + 3;
//   B: register i holds column g, rows 16 * i + 4t .. + 3;
//   C: c[i] is row g + 8 * (i / 2), column 2t + i % 2.
// The warp meets as at a shuffle (the mask must be the whole warp); the scheduler
// then reads every lane's registers and computes each lane's sums
// (block_executor.cpp).
template <int K>
void mmaSyncS8(int (&c)[4], const int (&a)[K / 8], const int (&b)[K / 16],
               const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  static_assert(K == 16 || K == 32, "m16n8k16 or m16n8k32");
  const detail::MmaOperands ops{a, b, c};
  const detail::MmaOperands* p = &ops;
  const detail::MmaOperands* unused = nullptr;
  detail::shuffle(0xffffffffu, &p, &unused, sizeof p, detail::ShuffleKind::MmaS8, K, warpSize, file, line);
}

}  // namespace cudastandin
