// The CUDA stand-in itself (tests/cuda_standin): warp shuffles and barriers as
// CUDA defines them, the rules it reports instead of hanging (divergent
// barriers, partial-warp shuffles, host pointers given to a kernel, bad launch
// configurations), the int8 mma.sync's fragment layout, streams that really run
// asynchronously to the host and to each other, events, the copy rules for
// pageable memory, fault injection, device memory limits and counters, device
// memory the host cannot read, cuBLAS GEMM, and half conversions.
// Built only with MOECHAT_CUDA_STANDIN (tests/gpu/CMakeLists.txt).
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuda_standin.h"
#include "quant/quant.h"
#include "support/test_log.h"

namespace {

using cudastandin::launch;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Every case starts on a healthy device with nothing armed.
struct Clean {
  Clean() { cudastandin::recover(); }
  ~Clean() { cudastandin::recover(); }
};

template <typename T>
struct DeviceArray {
  T* p = nullptr;
  size_t n;
  explicit DeviceArray(size_t count) : n(count) {
    if (cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)) != cudaSuccess) throw std::bad_alloc();
  }
  ~DeviceArray() { cudaFree(p); }
  std::vector<T> read() const {
    std::vector<T> h(n);
    if (cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
      throw std::runtime_error("read");
    return h;
  }
};

enum Op { kDown, kUp, kXor, kIdx };

// out[t] = the shuffle of value 100 + t by every lane of a warp.
__global__ void shuffleKernel(int op, int arg, int width, int* out) {
  const int t = static_cast<int>(threadIdx.x);
  const int v = 100 + t;
  int r = 0;
  switch (op) {
    case kDown: r = __shfl_down_sync(0xffffffffu, v, static_cast<unsigned>(arg), width); break;
    case kUp: r = __shfl_up_sync(0xffffffffu, v, static_cast<unsigned>(arg), width); break;
    case kXor: r = __shfl_xor_sync(0xffffffffu, v, arg, width); break;
    case kIdx: r = __shfl_sync(0xffffffffu, v, arg, width); break;
  }
  out[t] = r;
}

// C (16 x 8, row-major) = A (16 x K, row-major) * B (K x 8, column-major: b[n][k])
// with int8 mma.sync, every fragment loaded as the PTX ISA lays it out (g = lane / 4,
// t = lane % 4): A register i from row g + 8 * (i % 2), columns 16 * (i / 2) + 4t;
// B register i from column g, rows 16 * i + 4t; c[i] to row g + 8 * (i / 2),
// column 2t + i % 2. Run by 64 threads: two warps, each its own product (blockDim
// warps x one tile each; the second warp's inputs follow the first's).
template <int K>
__global__ void mmaKernel(const int8_t* a, const int8_t* b, int* c) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int8_t* aw = a + warp * 16 * K;
  const int8_t* bw = b + warp * 8 * K;
  int ra[K / 8], rb[K / 16];
  for (int i = 0; i < K / 8; ++i) std::memcpy(&ra[i], aw + (g + 8 * (i % 2)) * K + 16 * (i / 2) + 4 * t, 4);
  for (int i = 0; i < K / 16; ++i) std::memcpy(&rb[i], bw + g * K + 16 * i + 4 * t, 4);
  int rc[4] = {1, 2, 3, 4};  // accumulated into
  cudastandin::mmaSyncS8<K>(rc, ra, rb);
  for (int i = 0; i < 4; ++i) c[warp * 128 + (g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = rc[i];
}

// Half a warp at an mma.sync: the other half has returned.
__global__ void partialMmaKernel(int* c) {
  if (threadIdx.x >= 16) return;
  int a[4] = {}, b[2] = {}, r[4] = {};
  cudastandin::mmaSyncS8<32>(r, a, b);
  c[threadIdx.x] = r[0];
}

// The source lane CUDA's documentation gives for each shuffle.
int expectedSource(int op, int lane, int arg, int width) {
  const int seg = lane / width * width;
  switch (op) {
    case kDown: return lane % width + arg < width ? lane + arg : lane;
    case kUp: return lane % width >= arg ? lane - arg : lane;
    case kXor: return (lane ^ arg) < seg + width ? lane ^ arg : lane;
    default: return seg + arg % width;
  }
}

// A block sum through __shared__ memory and two barriers: out[block] = sum of in.
__global__ void blockSumKernel(const float* in, float* out) {
  __shared__ float partial[256];
  const unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

__global__ void earlyReturnBarrierKernel(float* out) {
  if (threadIdx.x < 16) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void twoBarriersKernel(float* out) {
  if (threadIdx.x % 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void partialShuffleKernel(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void halfMaskShuffleKernel(float* out) {
  const unsigned mask = threadIdx.x < 16 ? 0x0000ffffu : 0xffff0000u;
  out[threadIdx.x] = __shfl_xor_sync(mask, static_cast<float>(threadIdx.x), 1);
}

__global__ void writeKernel(float* out, float value) { out[threadIdx.x] = value; }

void hostWait(void* flag) {
  auto* f = static_cast<std::atomic<bool>*>(flag);
  while (!f->load()) std::this_thread::yield();
}

}  // namespace

TEST(CudaStandin, shufflesFollowCudaRules) {
  Clean clean;
  DeviceArray<int> out(32);
  for (int op : {kDown, kUp, kXor, kIdx})
    for (int width : {32, 16, 8, 4})
      for (int arg : {0, 1, 3, 5, 16, 31}) {
        launch(shuffleKernel, 1, 32, 0, nullptr, op, arg, width, out.p);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        const std::vector<int> got = out.read();
        for (int lane = 0; lane < 32; ++lane)
          ASSERT_TRUE(got[lane] == 100 + expectedSource(op, lane, arg, width))
              << moe::test::format("op %d width %d arg %d lane %d: %d", op, width, arg, lane, got[lane]);
      }
}

TEST(CudaStandin, barriersAndSharedMemory) {
  Clean clean;
  const int blocks = 7, threads = 256;
  std::vector<float> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 17);
  DeviceArray<float> din(in.size()), dout(blocks);
  ASSERT_EQ(cudaMemcpy(din.p, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  launch(blockSumKernel, blocks, threads, 0, nullptr, din.p, dout.p);
  const std::vector<float> got = dout.read();
  for (int b = 0; b < blocks; ++b) {
    float want = 0;
    for (int t = 0; t < threads; ++t) want += in[b * threads + t];
    ASSERT_EQ(got[b], want);  // small integers: exact in any order
  }
}

TEST(CudaStandin, divergentBarrierIsReported) {
  Clean clean;
  DeviceArray<float> out(64);
  launch(earlyReturnBarrierKernel, 1, 64, 0, nullptr, out.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  ASSERT_TRUE(has(cudastandin::faultDetail(), "has returned")) << cudastandin::faultDetail();
  // Sticky: every later call reports it until the stand-in recovers.
  ASSERT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  ASSERT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  cudastandin::recover();
  launch(twoBarriersKernel, 1, 64, 0, nullptr, out.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  ASSERT_TRUE(has(cudastandin::faultDetail(), "divergent __syncthreads")) << cudastandin::faultDetail();
}

TEST(CudaStandin, partialWarpShuffleIsReported) {
  Clean clean;
  DeviceArray<float> out(32);
  launch(partialShuffleKernel, 1, 32, 0, nullptr, out.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  ASSERT_TRUE(has(cudastandin::faultDetail(), "lane 16 has returned")) << cudastandin::faultDetail();
  cudastandin::recover();
  // Two half-warp groups, each with its own mask, are legal.
  launch(halfMaskShuffleKernel, 1, 32, 0, nullptr, out.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = out.read();
  for (int lane = 0; lane < 32; ++lane) ASSERT_EQ(got[lane], static_cast<float>(lane ^ 1));
  // A full mask on a block of 48 threads names lanes that do not exist.
  DeviceArray<int> ints(48);
  launch(shuffleKernel, 1, 48, 0, nullptr, static_cast<int>(kXor), 1, 32, ints.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  ASSERT_TRUE(has(cudastandin::faultDetail(), "does not exist")) << cudastandin::faultDetail();
}

template <int K>
void checkMma() {
  std::vector<int8_t> a(2 * 16 * K), b(2 * 8 * K);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int8_t>((i * 37 + 11) % 255 - 127);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>((i * 53 + 7) % 255 - 127);
  DeviceArray<int8_t> da(a.size()), db(b.size());
  DeviceArray<int> dc(2 * 128);
  ASSERT_EQ(cudaMemcpy(da.p, a.data(), a.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db.p, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
  launch(mmaKernel<K>, 1, 64, 0, nullptr, da.p, db.p, dc.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<int> got = dc.read();
  int wrong = 0;
  for (int w = 0; w < 2; ++w)
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        int want = 1 + (m >= 8 ? 2 : 0) + n % 2;  // the initial c of that element
        for (int k = 0; k < K; ++k) want += a[w * 16 * K + m * K + k] * b[w * 8 * K + n * K + k];
        wrong += got[w * 128 + m * 8 + n] != want;
      }
  ASSERT_TRUE(wrong == 0) << moe::test::format("K=%d: %d of 256 elements wrong", K, wrong);
}

// The int8 mma.sync the tensor-core GEMM uses: c += A * B for the fragment layout
// the PTX ISA documents, for both shapes; a partial warp is reported.
TEST(CudaStandin, int8MmaFollowsThePtxLayout) {
  Clean clean;
  ASSERT_NO_FATAL_FAILURE(checkMma<32>());
  ASSERT_NO_FATAL_FAILURE(checkMma<16>());
  DeviceArray<int> out(32);
  launch(partialMmaKernel, 1, 32, 0, nullptr, out.p);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  ASSERT_TRUE(has(cudastandin::faultDetail(), "has returned")) << cudastandin::faultDetail();
}

TEST(CudaStandin, hostPointerToAKernelIsAnIllegalAddress) {
  Clean clean;
  std::vector<float> host(32);
  launch(writeKernel, 1, 32, 0, nullptr, host.data(), 1.0f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  ASSERT_TRUE(has(cudastandin::faultDetail(), "argument 0")) << cudastandin::faultDetail();
  ASSERT_EQ(host[0], 0.0f);  // nothing ran
  cudastandin::recover();
  // Pinned host memory is mapped: a kernel may write it.
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 32 * sizeof(float), cudaHostAllocPortable),
            cudaSuccess);
  launch(writeKernel, 1, 32, 0, nullptr, pinned, 2.0f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(pinned[31], 2.0f);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST(CudaStandin, badLaunchConfigurationIsALaunchError) {
  Clean clean;
  DeviceArray<float> out(32);
  for (dim3 block : {dim3(2048), dim3(1, 1, 65), dim3(0)}) {
    launch(writeKernel, 1, block, 0, nullptr, out.p, 1.0f);
    ASSERT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky
  }
  launch(writeKernel, 1, 32, 64 * 1024, nullptr, out.p, 1.0f);  // over 48 KiB of shared memory
  ASSERT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CudaStandin, streamsRunAsynchronously) {
  Clean clean;
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  DeviceArray<float> out(32);
  std::atomic<bool> release{false};
  // Stream a is held by the host; b waits (on the device) for a's event before writing.
  ASSERT_EQ(cudaLaunchHostFunc(a, hostWait, &release), cudaSuccess);
  launch(writeKernel, 1, 32, 0, a, out.p, 1.0f);
  ASSERT_EQ(cudaEventRecord(done, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, done, 0), cudaSuccess);
  launch(writeKernel, 1, 32, 0, b, out.p, 2.0f);
  ASSERT_EQ(cudaStreamQuery(a), cudaErrorNotReady);
  ASSERT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamQuery(b), cudaErrorNotReady);
  release = true;
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  ASSERT_EQ(cudaEventQuery(done), cudaSuccess);
  ASSERT_EQ(out.read()[0], 2.0f);  // b's write came after a's
  // A record made after a wait was queued does not change what that wait waits for.
  std::atomic<bool> second{false};
  ASSERT_EQ(cudaStreamWaitEvent(b, done, 0), cudaSuccess);  // the completed record
  ASSERT_EQ(cudaLaunchHostFunc(a, hostWait, &second), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, a), cudaSuccess);
  launch(writeKernel, 1, 32, 0, b, out.p, 3.0f);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);  // does not wait for a
  ASSERT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  second = true;
  ASSERT_EQ(cudaEventSynchronize(done), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(done), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(a), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(b), cudaSuccess);
}

// A graph runs everything it recorded each time it is launched, reading its inputs
// when it runs: a kernel that adds, and a copy from pinned memory the host rewrites
// between launches.
__global__ void addFirstKernel(float* out, const float* in) { out[threadIdx.x] += in[0]; }

TEST(CudaStandin, aGraphRunsAgainAtEachLaunch) {
  Clean clean;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArray<float> out(32), in(1);
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), sizeof(float), cudaHostAllocDefault),
            cudaSuccess);
  launch(writeKernel, 1, 32, 0, s, out.p, 0.0f);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(in.p, pinned, sizeof(float), cudaMemcpyHostToDevice, s), cudaSuccess);
  launch(addFirstKernel, 1, 32, 0, s, out.p, static_cast<const float*>(in.p));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (float v : {1.0f, 10.0f, 100.0f}) {
    *pinned = v;
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  }
  ASSERT_EQ(out.read()[31], 111.0f);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(CudaStandin, pageableCopiesFollowTheRuntimeRules) {
  Clean clean;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::atomic<bool> release{false};
  DeviceArray<float> dev(4);
  std::vector<float> src{1, 2, 3, 4};
  ASSERT_EQ(cudaLaunchHostFunc(s, hostWait, &release), cudaSuccess);
  // From pageable memory: the bytes are taken at the call, so src may change at once.
  ASSERT_EQ(cudaMemcpyAsync(dev.p, src.data(), 16, cudaMemcpyHostToDevice, s), cudaSuccess);
  src.assign(4, -1.0f);
  release = true;
  std::vector<float> back(4, 0.0f);
  // To pageable memory: complete when the call returns.
  ASSERT_EQ(cudaMemcpyAsync(back.data(), dev.p, 16, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(back, (std::vector<float>{1, 2, 3, 4}));
  // A copy past the end of an allocation, or of the wrong kind, is refused.
  ASSERT_EQ(cudaMemcpyAsync(dev.p, src.data(), 20, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
  ASSERT_EQ(cudaMemcpyAsync(src.data(), back.data(), 16, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(CudaStandin, deviceMemoryIsLimitedAndPoisoned) {
  Clean clean;
  cudastandin::setDeviceBytes(size_t{1} << 20);
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  ASSERT_EQ(total_b, size_t{1} << 20);
  void* big = nullptr;
  ASSERT_EQ(cudaMalloc(&big, size_t{2} << 20), cudaErrorMemoryAllocation);
  ASSERT_TRUE(big == nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  ASSERT_EQ(free_b, (size_t{1} << 20) - 1024);  // whole 256-byte granules
  unsigned char first = 0;
  ASSERT_EQ(cudaMemcpy(&first, p, 1, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(first, 0xff);  // never zero-filled
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
  ASSERT_EQ(attr.type, cudaMemoryTypeDevice);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, &first), cudaSuccess);
  ASSERT_EQ(attr.type, cudaMemoryTypeUnregistered);
  // One past the end is not the allocation's: another object may start there.
  ASSERT_EQ(cudaPointerGetAttributes(&attr, static_cast<char*>(p) + 1000), cudaSuccess);
  ASSERT_EQ(attr.type, cudaMemoryTypeUnregistered);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, static_cast<char*>(p) + 999), cudaSuccess);
  ASSERT_EQ(attr.type, cudaMemoryTypeDevice);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaErrorInvalidValue);  // twice
  cudastandin::setDeviceBytes(size_t{2} << 30);
}

// Device memory is the device's: host code that reads or writes a cudaMalloc'd
// pointer crashes with a message saying so (on a GPU it is an address the host
// cannot use), after cudaDeviceSynchronize, a stream's or an event's synchronise
// alike; copies and kernels reach it, pinned host memory stays the host's.
// Each death runs in a child process (GoogleTest's threadsafe death tests: the
// child starts the program again and runs this case up to the dying statement).
TEST(CudaStandin, hostCodeReadingDeviceMemoryCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Clean clean;
  ASSERT_TRUE(cudastandin::deviceMemoryProtected())
      << "device memory protection is off (CUDA_STANDIN_PROTECT_DEVICE_MEMORY=0?)";
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  DeviceArray<float> dev(32);
  launch(writeKernel, 1, 32, 0, nullptr, dev.p, 5.0f);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(dev.read()[31], 5.0f);  // a copy reaches it
  volatile float* p = dev.p;
  EXPECT_DEATH((void)p[3], "host code read device memory at 0x");
  EXPECT_DEATH(p[3] = 1.0f, "host code wrote device memory at 0x");
  // The same after a stream's or an event's synchronise, and through memcpy.
  launch(writeKernel, 1, 32, 0, s, dev.p, 6.0f);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_DEATH((void)p[0], "host code read device memory at 0x");
  launch(writeKernel, 1, 32, 0, s, dev.p, 7.0f);
  ASSERT_EQ(cudaEventRecord(done, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(done), cudaSuccess);
  float host[32];
  EXPECT_DEATH(std::memcpy(host, dev.p, sizeof host), "host code read device memory at 0x");
  ASSERT_EQ(dev.read()[0], 7.0f);
  // Pinned host memory, mapped or registered, is the host's to read at any time.
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 32 * sizeof(float), cudaHostAllocMapped),
            cudaSuccess);
  launch(writeKernel, 1, 32, 0, s, pinned, 8.0f);
  ASSERT_EQ(cudaMemcpyAsync(host, dev.p, sizeof host, cudaMemcpyDeviceToHost, s), cudaSuccess);
  std::vector<float> registered(32, 0.0f);
  ASSERT_EQ(cudaHostRegister(registered.data(), 32 * sizeof(float), cudaHostRegisterDefault), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(registered.data(), dev.p, 32 * sizeof(float), cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(pinned[0], 8.0f);
  ASSERT_EQ(host[31], 7.0f);
  ASSERT_EQ(registered[5], 7.0f);
  ASSERT_EQ(cudaHostUnregister(registered.data()), cudaSuccess);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(done), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// CUDA_STANDIN_PROTECT_DEVICE_MEMORY=0 (for a debugger) lets host code read device
// memory: the same read as above completes in a child and reads the poison bytes.
TEST(CudaStandin, deviceMemoryProtectionCanBeTurnedOff) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Clean clean;
  ::setenv("CUDA_STANDIN_PROTECT_DEVICE_MEMORY", "0", 1);
  EXPECT_EXIT(
      {
        float* p = nullptr;
        if (cudaMalloc(reinterpret_cast<void**>(&p), 64) != cudaSuccess) std::_Exit(2);
        unsigned char first = 0;
        std::memcpy(&first, p, 1);
        std::_Exit(!cudastandin::deviceMemoryProtected() && first == 0xff ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv("CUDA_STANDIN_PROTECT_DEVICE_MEMORY");
}

// The protection costs one mprotect when device work starts and one when it ends,
// not one per operation: a stream that runs 50 kernels and copies back to back
// opens device memory once and closes it once.
TEST(CudaStandin, aRunOfDeviceWorkSwitchesProtectionTwice) {
  Clean clean;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  DeviceArray<float> dev(32), other(32);
  std::atomic<bool> release{false};
  ASSERT_EQ(cudaLaunchHostFunc(s, hostWait, &release), cudaSuccess);  // everything queues behind it
  for (int i = 0; i < 25; ++i) {
    launch(writeKernel, 1, 32, 0, s, dev.p, float(i));
    ASSERT_EQ(cudaMemcpyAsync(other.p, dev.p, 32 * sizeof(float), cudaMemcpyDeviceToDevice, s), cudaSuccess);
  }
  const uint64_t before = cudastandin::deviceMemoryProtectionSwitches();
  release = true;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudastandin::deviceMemoryProtectionSwitches() - before, uint64_t{2});
  ASSERT_EQ(other.read()[0], 24.0f);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST(CudaStandin, faultInjection) {
  Clean clean;
  void *a = nullptr, *b = nullptr;
  cudastandin::failMallocAt(2);
  ASSERT_EQ(cudaMalloc(&a, 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 64), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaMalloc(&b, 64), cudaSuccess);  // once only
  cudaEvent_t e = nullptr;
  cudastandin::failEventCreateAt(1);
  ASSERT_EQ(cudaEventCreate(&e), cudaErrorMemoryAllocation);
  cudaStream_t s = nullptr;
  cudastandin::failStreamCreateAt(1);
  ASSERT_EQ(cudaStreamCreate(&s), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);  // the stream's; reading it clears it
  cudastandin::failKernelAt(2);
  launch(writeKernel, 1, 32, 0, nullptr, static_cast<float*>(a), 1.0f);
  launch(writeKernel, 1, 32, 0, nullptr, static_cast<float*>(a), 2.0f);
  // Both launches are accepted; the second faults when its stream runs it, which may
  // already have happened (as on a GPU, the error then shows at the next call).
  const cudaError_t after_launch = cudaGetLastError();
  ASSERT_TRUE(after_launch == cudaSuccess || after_launch == cudaErrorLaunchFailure);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  ASSERT_EQ(cudastandin::stickyError(), cudaErrorLaunchFailure);
  void* c = nullptr;
  ASSERT_EQ(cudaMalloc(&c, 64), cudaErrorLaunchFailure);  // a faulted device refuses everything
  cudastandin::recover();
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
}

TEST(CudaStandin, counters) {
  Clean clean;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  const cudastandin::DeviceCounters before = cudastandin::totals();
  DeviceArray<float> dev(1000);
  std::vector<float> host(1000, 1.0f);
  ASSERT_EQ(cudaMemcpyAsync(dev.p, host.data(), 4000, cudaMemcpyHostToDevice, s), cudaSuccess);
  launch(writeKernel, 1, 32, 0, s, dev.p, 1.0f);
  launch(writeKernel, 1, 32, 0, s, dev.p, 1.0f);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), dev.p, 400, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const cudastandin::StreamCounters c = cudastandin::counters(s);
  ASSERT_EQ(c.kernel_launches, uint64_t{2});
  ASSERT_EQ(c.bytes_h2d, uint64_t{4000});
  ASSERT_EQ(c.bytes_d2h, uint64_t{400});
  ASSERT_EQ(c.copies, uint64_t{2});
  ASSERT_EQ(c.host_syncs, uint64_t{2});  // the pageable D2H copy and the synchronise
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  const cudastandin::DeviceCounters after = cudastandin::totals();
  ASSERT_EQ(after.all.kernel_launches - before.all.kernel_launches,
            uint64_t{2});  // kept after the stream went
  ASSERT_EQ(after.mallocs - before.mallocs, uint64_t{1});
}

TEST(CudaStandin, cublasSgemm) {
  Clean clean;
  const int m = 5, n = 3, k = 7;
  std::vector<float> a(m * k), b(k * n), c(m * n, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) + 1;
  DeviceArray<float> da(a.size()), db(b.size()), dc(c.size());
  cudaMemcpy(da.p, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db.p, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const float one = 1.0f, zero = 0.0f;
  // C (m x n) = A^T B with A stored k x m (column-major, lda = k), as the backend calls it.
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da.p, k, db.p, k, &zero, dc.p, m),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = dc.read();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float want = 0;
      for (int l = 0; l < k; ++l) want += a[l + i * k] * b[l + j * k];
      ASSERT_EQ(got[i + j * m], want);
    }
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da.p, 2, db.p, k, &zero, dc.p, m),
            CUBLAS_STATUS_INVALID_VALUE);  // lda < k
  ASSERT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST(CudaStandin, halfConversions) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float f = __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    const float want = moe::quant::fp16ToFp32(static_cast<uint16_t>(bits));
    ASSERT_TRUE((std::isnan(f) && std::isnan(want)) || f == want) << moe::test::format("half %04x", bits);
    if (!std::isnan(f)) {
      ASSERT_EQ(__half_as_ushort(__float2half(f)), static_cast<unsigned short>(bits));
    }
  }
  // Rounding of floats between halves: the project's converter is the reference.
  uint32_t x = 12345;
  for (int i = 0; i < 200000; ++i) {
    x = x * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &x, sizeof f);
    if (std::isnan(f)) continue;
    ASSERT_TRUE(__half_as_ushort(__float2half(f)) == moe::quant::fp32ToFp16(f))
        << moe::test::format("float %08x", x);
  }
}
