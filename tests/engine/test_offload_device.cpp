// OffloadEngine's device seam (offload/offload_device.h) exercised on the CPU:
// a host-memory device whose parts count what the engine asks of them and whose
// fence logs every mark and overwrite. Checks that the engine takes the store's
// memory, the cache slab, the copies and the link figure from the device; that
// outputs stay bit-identical to the CPU path; and the fence's rule (offload/
// slot_fence.h): every copy into a slot that was read before comes after a
// "reads queued" mark that followed that read. On a GPU the same calls drive
// CUDA events (tests/test_cuda_offload_engine.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "offload/offload_device.h"
#include "offload/offload_engine.h"
#include "support/engine_fixture.h"
#include "support/offload_run.h"
#include "support/test_log.h"

using namespace moe;

namespace {

// What happened, in order: a slot read by the compute side, a fence mark, a copy into a slot.
struct Event {
  enum Kind { kRead, kMark, kOverwrite } kind;
  int slot = -1;
};

class EventLog {
 public:
  void add(Event e) {
    std::lock_guard lock(mu_);
    events_.push_back(e);
  }
  std::vector<Event> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

class RecordingFence final : public SlotFence {
 public:
  explicit RecordingFence(EventLog& log) : log_(log) {}
  void readsQueued() override { log_.add({Event::kMark}); }
  void beforeOverwrite(int slot) override { log_.add({Event::kOverwrite, slot}); }

 private:
  EventLog& log_;
};

class CountingAllocator final : public HostAllocator {
 public:
  uint8_t* allocate(size_t bytes) override {
    bytes_ += bytes;
    return static_cast<uint8_t*>(std::aligned_alloc(4096, (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096));
  }
  void deallocate(uint8_t* p, size_t) override { std::free(p); }
  const char* name() const override { return "counting"; }
  size_t bytes_ = 0;
};

class CountingSlotMemory final : public SlotMemory {
 public:
  explicit CountingSlotMemory(size_t* total) : total_(total) {}
  uint8_t* allocate(size_t bytes) override {
    *total_ += bytes;
    return host_.allocate(bytes);
  }
  void deallocate(uint8_t* p, size_t bytes) override { host_.deallocate(p, bytes); }

 private:
  HostSlotMemory host_;
  size_t* total_;
};

class HostTestDevice final : public OffloadDevice {
 public:
  std::string name() const override { return "host-test"; }
  std::shared_ptr<HostAllocator> hostAllocator() override { return allocator; }
  std::unique_ptr<SlotMemory> slotMemory() override {
    return std::make_unique<CountingSlotMemory>(&slab_bytes);
  }
  CopyLink& copyLink() override { return copier; }
  SlotFence& fence() override { return fence_; }
  double linkBytesPerSecond() override { return 12.5e9; }

  EventLog log;
  std::shared_ptr<CountingAllocator> allocator = std::make_shared<CountingAllocator>();
  size_t slab_bytes = 0;
  HostCopyLink copier;

 private:
  RecordingFence fence_{log};
};

// Logs the slot behind each expert the compute side reads (after waitFor: the
// moment a GPU would queue the expert's kernels).
class ReadLoggingSource final : public ExpertSource {
 public:
  ReadLoggingSource(ExpertSource& inner, const SlotSlab& slab, EventLog& log)
      : inner_(inner), slab_(slab), log_(log) {}
  void onLayerInput(int layer, std::span<const float> hidden, int n) override {
    inner_.onLayerInput(layer, hidden, n);
  }
  void onRouting(const RoutingEvent& ev) override { inner_.onRouting(ev); }
  std::vector<ExpertRef> acquire(int layer, std::span<const int> e) override {
    return inner_.acquire(layer, e);
  }
  void waitFor(int layer, const ExpertRef& ref) override {
    inner_.waitFor(layer, ref);
    const auto* p = static_cast<const uint8_t*>(ref.weights.gate.data);
    const uint8_t* slab = slab_.slotData(0);
    const size_t span = slab_.slotBytes() * size_t(slab_.slotCount());
    if (p >= slab && p < slab + span) log_.add({Event::kRead, int(size_t(p - slab) / slab_.slotBytes())});
  }
  void release(int layer) override { inner_.release(layer); }

 private:
  ExpertSource& inner_;
  const SlotSlab& slab_;
  EventLog& log_;
};

// Another backend under another name, counting its matmuls: the host backend of a
// device run (which experts it computed), or a stand-in for a GPU backend.
class CountingBackend final : public Backend {
 public:
  CountingBackend(std::unique_ptr<Backend> inner, std::string name, Device device)
      : in_(std::move(inner)), name_(std::move(name)), device_(device) {}
  std::string name() const override { return name_; }
  Device device() const override { return device_; }
  float* allocFloats(size_t n) override { return in_->allocFloats(n); }
  void freeFloats(float* p) override { in_->freeFloats(p); }
  WeightView prepareWeight(const WeightView& w) override { return in_->prepareWeight(w); }
  void releaseWeight(const WeightView& w) override { in_->releaseWeight(w); }
  void embed(const WeightView& t, const int32_t* tok, int n, float* out) override {
    in_->embed(t, tok, n, out);
  }
  void matmul(const WeightView& w, const float* x, float* y, int n) override {
    ++matmuls;
    in_->matmul(w, x, y, n);
  }
  void rmsNorm(const float* x, const float* w, float* y, int rows, int dim, float eps) override {
    in_->rmsNorm(x, w, y, rows, dim, eps);
  }
  void rope(float* x, int n, int heads, int hd, int rot, const int32_t* pos, float base,
            RopeStyle s) override {
    in_->rope(x, n, heads, hd, rot, pos, base, s);
  }
  KvCache allocKv(size_t n) override { return in_->allocKv(n); }
  void freeKv(const KvCache& kv) override { in_->freeKv(kv); }
  void storeKv(const KvCache& dst, size_t first, const float* src, size_t n) override {
    in_->storeKv(dst, first, src, n);
  }
  void attention(const float* q, const KvCache& k, const KvCache& v, int pos0, int n, const AttentionShape& s,
                 float* out) override {
    in_->attention(q, k, v, pos0, n, s, out);
  }
  void swiglu(const float* g, const float* u, float* out, size_t n) override { in_->swiglu(g, u, out, n); }
  void add(float* y, const float* x, size_t n) override { in_->add(y, x, n); }
  void axpy(float* y, const float* x, float a, size_t n) override { in_->axpy(y, x, a, n); }
  void copy(float* dst, const float* src, size_t n) override { in_->copy(dst, src, n); }
  void zero(float* y, size_t n) override { in_->zero(y, n); }
  void toHost(float* dst, const float* src, size_t n) override { in_->toHost(dst, src, n); }
  void fromHost(float* dst, const float* src, size_t n) override { in_->fromHost(dst, src, n); }
  void synchronize() override { in_->synchronize(); }
  int matmuls = 0;

 private:
  std::unique_ptr<Backend> in_;
  std::string name_;
  Device device_;
};

}  // namespace

TEST(OffloadDevice, engineUsesTheDeviceAndFencesEveryOverwrite) {
  auto spec = synth::tinySpec("qwen3moe");  // 16 experts, top-4
  spec.n_layer = 6;
  EngineFixture f(spec);
  for (auto policy : {OffloadPolicy::kReactiveLru, OffloadPolicy::kStatic, OffloadPolicy::kProactive}) {
    for (int n_slots : {3, 24}) {
      const std::string what = moe::test::format("%s, %d slots", policyName(policy), n_slots);
      OffloadConfig plain;
      plain.policy = policy;
      plain.cache_slots = n_slots;
      plain.switches.cpu_fallback = false;  // the copy path only (cpuExpertsOnADevice... has the other)
      OffloadEngine cpu_engine(*f.model, *f.backend, plain);
      const auto want = runPromptAndDecode(f, cpu_engine.source(), cpu_engine);

      auto device = std::make_shared<HostTestDevice>();
      OffloadConfig oc = plain;
      oc.device = device;
      OffloadEngine engine(*f.model, *f.backend, oc);
      ReadLoggingSource logged(engine.source(), engine.worker()->slab(), device->log);
      const auto got = runPromptAndDecode(f, logged, engine);
      ASSERT_TRUE(got == want) << what;

      ASSERT_EQ(device->allocator->bytes_, engine.store()->totalBytes());
      ASSERT_EQ(device->slab_bytes,
                engine.worker()->slab().slotBytes() * size_t(engine.worker()->slotCount()));
      const auto snap = engine.snapshot();
      ASSERT_EQ(device->copier.bytesCopied(), snap.bytes_h2d);
      ASSERT_DOUBLE_EQ(snap.link_bytes_per_second, 12.5e9);
      ASSERT_EQ(snap.cpu_computed, uint64_t(0));

      // The fence rule, and that it was put to the test.
      std::map<int, size_t> last_read;  // slot -> index of its last read
      size_t last_mark = 0;
      bool marked = false;
      int guarded_overwrites = 0;
      const auto events = device->log.events();
      for (size_t i = 0; i < events.size(); ++i) {
        const Event& e = events[i];
        if (e.kind == Event::kRead) last_read[e.slot] = i;
        if (e.kind == Event::kMark) {
          last_mark = i;
          marked = true;
        }
        if (e.kind != Event::kOverwrite) continue;
        auto r = last_read.find(e.slot);
        if (r == last_read.end()) continue;  // never read: nothing to protect
        ASSERT_TRUE(marked && last_mark > r->second)
            << what
            << moe::test::format(
                   ": slot %d overwritten (event %zu) after its read (event %zu) with no mark between",
                   e.slot, i, r->second);
        ++guarded_overwrites;
      }
      if (n_slots == 3) {
        ASSERT_TRUE(guarded_overwrites > 0) << what << ": no slot was reused";
      }
    }
  }
}

// cpu-experts with a device: the experts the CPU rule picks run on the host
// backend (3 matmuls each, none of them on the device), the rest on the device.
TEST(OffloadDevice, cpuExpertsOnADeviceRunOnTheHostBackend) {
  auto spec = synth::tinySpec("qwen3moe");
  spec.n_layer = 6;
  EngineFixture f(spec);
  OffloadConfig plain;
  plain.policy = OffloadPolicy::kCpuExperts;
  plain.cache_slots = 6;
  const double copy_s = double(HostExpertStore(*f.model).expertBytes()) / 12.5e9;  // the test device's link
  plain.cpu_cost = {1.5 * copy_s, 4 * copy_s};  // the CPU wins some misses, the link others
  plain.link.bytes_per_second = 12.5e9;
  OffloadEngine cpu_engine(*f.model, *f.backend, plain);
  const auto want = runPromptAndDecode(f, cpu_engine.source(), cpu_engine);

  OffloadConfig oc = plain;
  oc.device = std::make_shared<HostTestDevice>();
  CountingBackend host(makeCpuBackend(2), "cpu (host experts)", Device::kCpu);
  OffloadEngine engine(*f.model, host, oc);
  ASSERT_TRUE(runPromptAndDecode(f, engine.source(), engine, &host) == want);
  const auto snap = engine.snapshot();
  ASSERT_TRUE(snap.cpu_computed > 0);
  ASSERT_TRUE(snap.cpu_computed < snap.misses);
  ASSERT_EQ(uint64_t(host.matmuls), 3 * snap.cpu_computed);

  // Without a CPU backend to compute them on, the device path refuses cpu-experts.
  CountingBackend gpu_like(makeCpuBackend(1), "cuda (stand-in)", Device::kCuda);
  ASSERT_THROW(OffloadEngine(*f.model, gpu_like, oc), std::invalid_argument);
}

TEST(OffloadDevice, noDeviceForTheCpuBackend) {
  auto cpu = makeCpuBackend(1);
  ASSERT_TRUE(!makeOffloadDevice(*cpu));
}
