// The CUDA pieces of the offload engine: pinned host memory, the cudaMalloc slot
// slab, the cudaMemcpyAsync copy engine (byte counts, data, and that the compute
// stream really waits on a chunk's event), the transfer worker feeding a device
// cache through it, and the bandwidth probe. Skipped without CUDA or a device (GpuTest).
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "inference/backend_factory.h"
#include "offload/expert_bytes_source.h"
#include "offload/offload_metrics.h"
#include "offload/slot_slab.h"
#include "offload/transfer_worker.h"
#include "support/gpu_suite.h"
#include "support/test_log.h"

#if MOECHAT_HAVE_CUDA
#include <cuda_runtime.h>

#include "inference/cuda/cuda_check.h"
#include "offload/cuda/cuda_copy_link.h"
#include "offload/cuda/cuda_host_memory.h"
#include "offload/cuda/cuda_slot_memory.h"
#endif
#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

#if MOECHAT_HAVE_CUDA
namespace {

std::vector<uint8_t> readDevice(const void* dev, size_t n) {
  std::vector<uint8_t> h(n);
  moe::checkCuda(cudaMemcpy(h.data(), dev, n, cudaMemcpyDeviceToHost), "test readback");
  return h;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 131 + seed);
  return v;
}

// Pinned host memory freed at scope end.
struct Pinned {
  moe::CudaPinnedAllocator alloc;
  uint8_t* p;
  size_t n;
  explicit Pinned(size_t bytes) : p(alloc.allocate(bytes)), n(bytes) {}
  ~Pinned() { alloc.deallocate(p, n); }
};

// Experts of `layers` x `experts` in pinned memory, chunks of 3000/3000/2000 bytes,
// each chunk 256-aligned as HostExpertStore lays them out; byte values differ per expert.
class PinnedExpertBytes final : public moe::ExpertBytesSource {
 public:
  PinnedExpertBytes(int layers, int experts)
      : layers_(layers), experts_(experts), mem_(size_t(layers * experts) * kExpert) {
    for (int l = 0; l < layers; ++l)
      for (int e = 0; e < experts; ++e) {
        const auto bytes = pattern(kExpert, uint8_t(l * 16 + e));
        std::memcpy(mem_.p + (size_t(l) * experts + e) * kExpert, bytes.data(), kExpert);
      }
  }
  const uint8_t* expertData(int layer, int expert) const override {
    return mem_.p + (size_t(layer) * experts_ + expert) * kExpert;
  }
  size_t chunkOffset(int chunk) const override { return size_t(chunk) * 3072; }
  size_t chunkBytes(int chunk) const override { return chunk < 2 ? 3000 : 2000; }
  size_t expertBytes() const override { return kExpert; }
  static constexpr size_t kExpert = 3072 * 2 + 2048;

 private:
  int layers_, experts_;
  Pinned mem_;
};

// Blocks a stream from the host until open() (a host function spinning on a flag):
// everything queued behind it waits. Always opened at scope end, so nothing hangs.
struct StreamGate {
  std::atomic<bool> open_flag{false};
  explicit StreamGate(cudaStream_t s) {
    moe::checkCuda(cudaLaunchHostFunc(
                       s,
                       [](void* flag) {
                         while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
                       },
                       &open_flag),
                   "cudaLaunchHostFunc");
  }
  void open() { open_flag = true; }
  ~StreamGate() { open(); }
};

}  // namespace

// Each case skips without a usable device (GpuTest).
class CudaOffload : public moe::test::GpuTest {};

TEST_F(CudaOffload, pinnedAllocator) {
  moe::CudaPinnedAllocator alloc;
  const size_t n = size_t{8} << 20;
  uint8_t* p = alloc.allocate(n);
  ASSERT_TRUE(p != nullptr);
  ASSERT_TRUE(moe::isPinnedHostMemory(p));
  ASSERT_EQ(alloc.bytesAllocated(), uint64_t(n));
  std::memset(p, 0xab, n);
  ASSERT_EQ(p[n - 1], uint8_t(0xab));
  alloc.deallocate(p, n);
  ASSERT_EQ(alloc.bytesAllocated(), uint64_t(0));
  // An impossible request is a readable exception, not a crash.
  ASSERT_THROW((void)alloc.allocate(size_t{1} << 50), moe::CudaError);
}

TEST_F(CudaOffload, hostRegistration) {
  std::vector<uint8_t> buf(size_t{4} << 20, 1);
  ASSERT_FALSE(moe::isPinnedHostMemory(buf.data()));
  {
    moe::CudaHostRegistration reg(buf.data(), buf.size());
    ASSERT_TRUE(moe::isPinnedHostMemory(buf.data()));
  }
  ASSERT_FALSE(moe::isPinnedHostMemory(buf.data()));
}

TEST_F(CudaOffload, slotMemory) {
  moe::SlotSlab slab(4, 1000, std::make_unique<moe::CudaSlotMemory>());
  ASSERT_EQ(slab.slotBytes(), size_t(1024));  // rounded to 256
  for (int s = 0; s < 4; ++s) {
    cudaPointerAttributes attr{};
    moe::checkCuda(cudaPointerGetAttributes(&attr, slab.slotData(s)), "attributes");
    ASSERT_EQ(int(attr.type), int(cudaMemoryTypeDevice));
    ASSERT_EQ(slab.slotData(s) - slab.slotData(0), ptrdiff_t(s) * 1024);
  }
  const auto bytes = pattern(4 * 1024, 9);
  moe::checkCuda(cudaMemcpy(slab.slotData(0), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "fill");
  ASSERT_EQ(readDevice(slab.slotData(0), bytes.size()), bytes);
  moe::CudaSlotMemory mem;
  ASSERT_THROW((void)mem.allocate(size_t{1} << 50), moe::CudaOutOfMemory);
}

TEST_F(CudaOffload, copyLinkBytes) {
  moe::SlotSlab slab(2, 8192, std::make_unique<moe::CudaSlotMemory>());
  Pinned src(8192);
  const auto bytes = pattern(8192, 3);
  std::memcpy(src.p, bytes.data(), 8192);
  moe::CudaCopyLink engine;
  const size_t chunk[3] = {3000, 3000, 2000}, offset[3] = {0, 3072, 6144};
  for (int c = 0; c < 3; ++c) engine.copy(slab.slotData(1) + offset[c], src.p + offset[c], chunk[c]);
  ASSERT_EQ(engine.bytesCopied(), uint64_t(8000));
  ASSERT_EQ(engine.copies(), uint64_t(3));
  ASSERT_EQ(engine.trackedRanges(), size_t(3));
  const auto back = readDevice(slab.slotData(1), 8192);
  for (int c = 0; c < 3; ++c)
    ASSERT_TRUE(std::memcmp(back.data() + offset[c], bytes.data() + offset[c], chunk[c]) == 0);
  ASSERT_TRUE(engine.isComplete(slab.slotData(1), 8192));
  // The same chunk again replaces its record (no growth per reuse of a slot).
  engine.copy(slab.slotData(1), src.p, 3000);
  ASSERT_EQ(engine.trackedRanges(), size_t(3));
  ASSERT_EQ(engine.bytesCopied(), uint64_t(11000));
  ASSERT_EQ(engine.simulatedSeconds(), 0.0);
}

// The copy stream is held shut, so the chunk's event cannot complete: a compute
// stream that streamWaitFor'd the slot must not run its next operation (a
// device-to-device read of the slot) until the gate opens, and then reads the new bytes.
TEST_F(CudaOffload, computeStreamWaitsForChunk) {
  moe::SlotSlab slab(2, 4096, std::make_unique<moe::CudaSlotMemory>());
  Pinned src(4096);
  const auto bytes = pattern(4096, 77);
  std::memcpy(src.p, bytes.data(), 4096);
  moe::CudaCopyLink engine;
  cudaStream_t compute = nullptr;
  cudaEvent_t done = nullptr;
  void* consumer = nullptr;
  moe::checkCuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "stream");
  moe::checkCuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
  moe::checkCuda(cudaMalloc(&consumer, 4096), "malloc");
  {
    StreamGate gate(engine.stream());
    engine.copyAsync(slab.slotData(0), src.p, 4096);
    ASSERT_FALSE(engine.isComplete(slab.slotData(0), 4096));
    ASSERT_FALSE(engine.streamWaitFor(compute, slab.slotData(1), 4096));  // no copy touched slot 1
    ASSERT_TRUE(moe::streamWaitForSlot(engine, compute, slab, 0));
    moe::checkCuda(cudaMemcpyAsync(consumer, slab.slotData(0), 4096, cudaMemcpyDeviceToDevice, compute),
                   "read");
    moe::checkCuda(cudaEventRecord(done, compute), "record");
#if MOECHAT_CUDA_STANDIN
    cudastandin::waitUntilStreamStalled(compute);  // ran all it could: up to the wait, or past it
#else
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a GPU's streams cannot be asked
#endif
    ASSERT_EQ(int(cudaEventQuery(done)), int(cudaErrorNotReady));  // still waiting on the copy
    cudaGetLastError();
    gate.open();
    moe::checkCuda(cudaStreamSynchronize(compute), "sync");
  }
  ASSERT_TRUE(engine.isComplete(slab.slotData(0), 4096));
  ASSERT_EQ(readDevice(consumer, 4096), bytes);
  cudaFree(consumer);
  cudaEventDestroy(done);
  cudaStreamDestroy(compute);
}

// The host-side transfer worker, unchanged, over the CUDA slab and copy engine.
TEST_F(CudaOffload, transferWorkerFillsDeviceCache) {
  PinnedExpertBytes source(2, 4);
  moe::SlotSlab slab(4, source.expertBytes(), std::make_unique<moe::CudaSlotMemory>());
  moe::CudaCopyLink engine;
  moe::OffloadMetrics metrics;
  moe::TransferWorker worker(slab, moe::SlotTable(4, 2, moe::ExpertBytesSource::kChunks), source, engine,
                             metrics, moe::TransferMode::kThreaded);
  const std::vector<int> chosen = {1, 3};
  worker.pushPrecise(1, chosen);
  for (int e : chosen) {
    worker.waitReady(1, e);
    const int slot = worker.snapshot().find(1, e);
    ASSERT_TRUE(slot >= 0);
    const auto back = readDevice(slab.slotData(slot), source.expertBytes());
    for (int c = 0; c < moe::ExpertBytesSource::kChunks; ++c)
      ASSERT_TRUE(std::memcmp(back.data() + source.chunkOffset(c),
                              source.expertData(1, e) + source.chunkOffset(c), source.chunkBytes(c)) == 0);
  }
  worker.release(1);
  worker.waitIdle();
  ASSERT_EQ(engine.bytesCopied(), uint64_t(2 * 8000));
  ASSERT_EQ(engine.copies(), uint64_t(2 * moe::ExpertBytesSource::kChunks));
}

TEST_F(CudaOffload, bandwidthProbe) {
  const auto samples = moe::measurePinnedH2DBandwidthSamples({size_t{1} << 20, size_t{4} << 20}, 3);
  ASSERT_EQ(samples.size(), size_t(2));
  ASSERT_EQ(samples[1].bytes, size_t{4} << 20);
  for (const auto& s : samples) ASSERT_TRUE(s.gb_per_s > 0.0);
  const double best = moe::measurePinnedH2DBandwidth();
  ASSERT_TRUE(best > 0.0);
  moe::test::info("pinned H2D bandwidth: %.1f GB/s", best);
}

#if MOECHAT_CUDA_STANDIN
// On a machine with two GPUs, the model computes on device 1: the copy engine made
// there must queue its copies on device 1 from the transfer worker's thread too
// (a new thread is bound to device 0). The stand-in counts operations queued to a
// stream from a thread bound to another device.
TEST_F(CudaOffload, copyThreadBindsToTheComputeDevice) {
  cudastandin::setDeviceCount(2);
  moe::checkCuda(cudaSetDevice(1), "cudaSetDevice");
  {
    moe::CudaCopyLink engine;
    void* dst = moe::cudaMallocOrThrow(4096, "test slot");
    Pinned src(4096);
    const uint64_t before = cudastandin::totals().all.wrong_device_ops;
    std::thread worker([&] { engine.copy(dst, src.p, 4096); });
    worker.join();
    EXPECT_EQ(cudastandin::totals().all.wrong_device_ops - before, uint64_t(0));  // then back to one device
    cudaFree(dst);
  }
  moe::checkCuda(cudaSetDevice(0), "cudaSetDevice");
  cudastandin::setDeviceCount(1);
}
#endif

#else  // built without CUDA: the whole case reports skipped

TEST(CudaOffload, skipped) {
  GTEST_SKIP() << moe::test::kNoCudaDevice << "built without CUDA (nvcc not found or MOECHAT_CUDA=OFF)";
}

#endif
