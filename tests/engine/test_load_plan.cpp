// The one function that turns a VRAM budget into the plan that loads
// (app/core/load_plan.h): auto and explicit budgets on a GPU-shaped device and on the
// CPU, the CLI's cache size and share, bad settings as errors, the words every view
// uses, and the engine taking the plan's slots as they are.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "app/core/engine_session.h"
#include "app/core/fit_words.h"
#include "app/core/load_plan.h"
#include "app/core/model_shape.h"

using namespace moe;

namespace {

// The demo model's config with sizes of a real model: 2 GB of weights that stay on the
// GPU, 64 routed experts of 100 MB (4 MoE layers x 16).
ModelShape gpuSizedShape() {
  ModelShape s = describeModel("", true);
  s.sizes.other_bytes = 2'000'000'000;
  s.sizes.expert_bytes = 100'000'000;
  s.sizes.moe_layers = 4;
  s.sizes.routed_expert_bytes = 64 * s.sizes.expert_bytes;
  s.host_store_bytes = s.sizes.routed_expert_bytes;
  return s;
}

constexpr uint64_t kGB = 1'000'000'000;

DeviceMemory gpuWithFree(uint64_t free_bytes) { return DeviceMemory{true, free_bytes, 24 * kGB, {}}; }
const DeviceMemory kCpu{false, 0, 0, "no usable GPU"};

PlanRequest request(BudgetSetting b, int n_ctx = 4096, bool demo = false) {
  return PlanRequest{b, OffloadPolicy::kProactive, n_ctx, demo};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(LoadPlan, autoOnAGpuIsTheFreeMemoryLessTheMarginAndTheFixedParts) {
  const ModelShape shape = gpuSizedShape();
  const uint64_t free_bytes = 6 * kGB;
  const LoadPlan p = resolveLoadPlan(request(BudgetSetting::automatic()), shape, gpuWithFree(free_bytes));
  ASSERT_TRUE(p.loads()) << p.error;
  EXPECT_TRUE(p.on_gpu);
  EXPECT_FALSE(p.simulated);
  EXPECT_EQ(p.budget_bytes, free_bytes - kAutoVramMarginBytes);
  EXPECT_EQ(p.margin_bytes, kAutoVramMarginBytes);
  const uint64_t fixed = p.fit.fixedBytes();
  EXPECT_EQ(fixed, 2 * kGB + p.fit.kv_bytes + p.fit.recurrent_state_bytes + p.fit.workspace_bytes);
  EXPECT_GE(p.fit.workspace_bytes, kCudaContextBytes);
  EXPECT_EQ(uint64_t(p.cache_slots), (p.budget_bytes - fixed) / 100'000'000);
  EXPECT_EQ(p.cache_bytes, uint64_t(p.cache_slots) * 100'000'000);
  EXPECT_EQ(p.left_bytes, p.budget_bytes - fixed - p.cache_bytes);
  EXPECT_LT(p.left_bytes, 100'000'000u);  // what is left holds no further expert
  EXPECT_EQ(p.policy, OffloadPolicy::kProactive);
  EXPECT_TRUE(contains(planSummary(p, 0), "free less a 1.07 GB safety margin")) << planSummary(p, 0);
  EXPECT_TRUE(contains(planNote(p), "proactive: cache of " + std::to_string(p.cache_slots) + " of 64"));

  // A longer context takes KV cache out of the same free memory: fewer slots.
  const LoadPlan longer =
      resolveLoadPlan(request(BudgetSetting::automatic(), 2048), shape, gpuWithFree(free_bytes));
  const LoadPlan shorter =
      resolveLoadPlan(request(BudgetSetting::automatic(), 64), shape, gpuWithFree(free_bytes));
  EXPECT_GT(longer.fit.kv_bytes, shorter.fit.kv_bytes);
  EXPECT_LE(longer.cache_slots, shorter.cache_slots);
  // The context is clamped to the model's.
  const LoadPlan huge =
      resolveLoadPlan(request(BudgetSetting::automatic(), 1 << 24), shape, gpuWithFree(free_bytes));
  EXPECT_EQ(huge.n_ctx, shape.config.n_ctx_train);

  // Every expert fits: resident, no cache.
  const LoadPlan roomy = resolveLoadPlan(request(BudgetSetting::automatic()), shape, gpuWithFree(20 * kGB));
  EXPECT_TRUE(roomy.loads() && roomy.all_experts_fit);
  EXPECT_EQ(roomy.policy, OffloadPolicy::kResident);
  EXPECT_EQ(roomy.cache_slots, 0);
  EXPECT_EQ(planShort(roomy), "yes, every expert on the GPU");

  // Less free than the margin: an error in words, never a crash.
  const LoadPlan full = resolveLoadPlan(request(BudgetSetting::automatic()), shape, gpuWithFree(kGB / 2));
  EXPECT_FALSE(full.loads());
  EXPECT_EQ(full.budget_bytes, 0u);
  EXPECT_TRUE(contains(full.error, "more than the auto budget")) << full.error;
  EXPECT_TRUE(contains(planShort(full), "no: needs ")) << planShort(full);
}

TEST(LoadPlan, explicitBudgetsOnAGpu) {
  const ModelShape shape = gpuSizedShape();
  const DeviceMemory gpu = gpuWithFree(24 * kGB);
  const uint64_t fixed = resolveLoadPlan(request(BudgetSetting::automatic()), shape, gpu).fit.fixedBytes();
  struct Case {
    uint64_t budget;
    int slots;  // -1: does not load
  };
  for (const Case c : {Case{fixed - 1, -1}, Case{fixed + 150'000'000, -1}, Case{fixed + 200'000'000, 2},
                       Case{fixed + 1'050'000'000, 10}, Case{fixed + 6'399'999'999, 63}}) {
    SCOPED_TRACE(c.budget);
    const LoadPlan p = resolveLoadPlan(request(BudgetSetting::vramBytes(c.budget)), shape, gpu);
    EXPECT_EQ(p.budget_bytes, c.budget);
    if (c.slots < 0) {
      EXPECT_FALSE(p.loads());
      EXPECT_TRUE(contains(p.error, c.budget < fixed ? "more than the" : "less than the 2 expert slots"))
          << p.error;
      continue;
    }
    ASSERT_TRUE(p.loads()) << p.error;
    EXPECT_EQ(p.cache_slots, c.slots);
    EXPECT_EQ(planShort(p),
              "yes, " + std::to_string(int(std::lround(100.0 * c.slots / 64))) + "% of experts cached");
  }
  // The free memory does not matter to an explicit budget.
  EXPECT_EQ(resolveLoadPlan(request(BudgetSetting::vramBytes(fixed + 1'050'000'000)), shape, gpuWithFree(0))
                .cache_slots,
            10);
  const LoadPlan all = resolveLoadPlan(request(BudgetSetting::vramBytes(fixed + 6'400'000'000)), shape, gpu);
  EXPECT_TRUE(all.all_experts_fit);
  EXPECT_EQ(all.policy, OffloadPolicy::kResident);
  EXPECT_TRUE(contains(planNote(all), "every expert fits the budget")) << planNote(all);
}

TEST(LoadPlan, onTheCpuEveryViewSaysSo) {
  const ModelShape shape = gpuSizedShape();
  // Auto, a real model: no cache, the CPU computes every expert.
  const LoadPlan p = resolveLoadPlan(request(BudgetSetting::automatic()), shape, kCpu);
  ASSERT_TRUE(p.loads());
  EXPECT_TRUE(p.onCpuOnly());
  EXPECT_EQ(p.policy, OffloadPolicy::kResident);
  EXPECT_EQ(p.cache_slots, 0);
  EXPECT_EQ(planShort(p), "runs on the CPU (no GPU)");
  EXPECT_TRUE(contains(planSummary(p, 0), "the model runs on the CPU")) << planSummary(p, 0);
  EXPECT_TRUE(contains(planNote(p), "no GPU in use")) << planNote(p);
  EXPECT_EQ(fitHeading(BudgetSetting::automatic(), kCpu), "Fits? (no GPU: runs on the CPU)");

  // Auto, the demo: half its experts in a simulated cache, labelled a simulation.
  const LoadPlan demo = resolveLoadPlan(request(BudgetSetting::automatic(), 4096, true), shape, kCpu);
  ASSERT_TRUE(demo.loads());
  EXPECT_TRUE(demo.simulated);
  EXPECT_EQ(demo.cache_slots, 32);
  EXPECT_TRUE(demo.capped_for_demo);
  EXPECT_EQ(planShort(demo), "simulated: 50% of experts cached (no GPU)");
  EXPECT_TRUE(contains(planSummary(demo, 0), "a simulation in host memory, not VRAM"))
      << planSummary(demo, 0);
  EXPECT_TRUE(contains(planNote(demo), "simulated: host memory standing in for VRAM")) << planNote(demo);

  // An explicit budget plans for a card that size: the GPU's slots, simulated.
  const DeviceMemory gpu = gpuWithFree(24 * kGB);
  const uint64_t fixed = p.fit.fixedBytes();
  for (uint64_t budget : {fixed + 250'000'000, fixed + 3'000'000'000}) {
    const LoadPlan sim = resolveLoadPlan(request(BudgetSetting::vramBytes(budget)), shape, kCpu);
    const LoadPlan real = resolveLoadPlan(request(BudgetSetting::vramBytes(budget)), shape, gpu);
    ASSERT_TRUE(sim.loads() && real.loads());
    EXPECT_TRUE(sim.simulated && !sim.on_gpu);
    EXPECT_EQ(sim.cache_slots, real.cache_slots);
    EXPECT_TRUE(contains(planShort(sim), "simulated")) << planShort(sim);
  }
  EXPECT_FALSE(resolveLoadPlan(request(BudgetSetting::vramBytes(fixed / 2)), shape, kCpu).loads());
}

TEST(LoadPlan, theDemoUnderAutoOnAGpuCachesHalf) {
  const ModelShape shape = gpuSizedShape();
  const LoadPlan p =
      resolveLoadPlan(request(BudgetSetting::automatic(), 4096, true), shape, gpuWithFree(20 * kGB));
  ASSERT_TRUE(p.loads());
  EXPECT_EQ(p.cache_slots, 32);
  EXPECT_EQ(p.policy, OffloadPolicy::kProactive);
  EXPECT_TRUE(p.capped_for_demo);
  // Where the budget holds fewer than half, the budget decides.
  const uint64_t fixed = p.fit.fixedBytes();
  const LoadPlan tight =
      resolveLoadPlan(request(BudgetSetting::automatic(), 4096, true), shape,
                      gpuWithFree(fixed + kAutoVramMarginBytes + 5 * shape.sizes.expert_bytes));
  EXPECT_EQ(tight.cache_slots, 5);
  EXPECT_FALSE(tight.capped_for_demo);
}

TEST(LoadPlan, theCliCacheSizeAndShareGoThroughTheSameFunction) {
  const ModelShape shape = gpuSizedShape();
  for (const DeviceMemory& d : {kCpu, gpuWithFree(24 * kGB)}) {
    const LoadPlan quarter = resolveLoadPlan(request(BudgetSetting::cacheShare(0.25)), shape, d);
    EXPECT_EQ(quarter.cache_slots, 16);
    EXPECT_EQ(quarter.simulated, !d.gpu);
    EXPECT_EQ(quarter.budget_bytes, quarter.fit.fixedBytes() + 16 * shape.sizes.expert_bytes);
    // A whole share keeps the policy: a benchmark asks for the policy at 100%.
    const LoadPlan whole = resolveLoadPlan(request(BudgetSetting::cacheShare(1.0)), shape, d);
    EXPECT_EQ(whole.cache_slots, 64);
    EXPECT_EQ(whole.policy, OffloadPolicy::kProactive);
    EXPECT_EQ(resolveLoadPlan(request(BudgetSetting::cacheShare(0.001)), shape, d).cache_slots, 2);
    EXPECT_EQ(resolveLoadPlan(request(BudgetSetting::cacheBytes(750'000'000)), shape, d).cache_slots, 7);
    EXPECT_EQ(resolveLoadPlan(request(BudgetSetting::cacheBytes(100 * kGB)), shape, d).cache_slots, 64);
  }
}

TEST(LoadPlan, badSettingsAreErrorsNotCrashes) {
  const ModelShape shape = gpuSizedShape();
  const DeviceMemory gpu = gpuWithFree(24 * kGB);
  for (double share : {0.0, -0.5, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const LoadPlan p = resolveLoadPlan(request(BudgetSetting::cacheShare(share)), shape, gpu);
    EXPECT_FALSE(p.loads()) << share;
    EXPECT_TRUE(contains(p.error, "(0, 1]")) << p.error;
    EXPECT_TRUE(contains(planShort(p), "no: ")) << planShort(p);
  }
  const LoadPlan tiny = resolveLoadPlan(request(BudgetSetting::cacheBytes(150'000'000)), shape, gpu);
  EXPECT_FALSE(tiny.loads());
  EXPECT_TRUE(contains(tiny.error, "fewer than 2 experts")) << tiny.error;
  EXPECT_FALSE(resolveLoadPlan(request(BudgetSetting::vramBytes(0)), shape, gpu).loads());
  // The app's stored 0 is auto, not a budget of nothing.
  EXPECT_TRUE(BudgetSetting::fromAppSetting(0).isAuto());
  // The resident policy keeps every expert in place whatever the budget.
  PlanRequest resident = request(BudgetSetting::vramBytes(1));
  resident.policy = OffloadPolicy::kResident;
  const LoadPlan r = resolveLoadPlan(resident, shape, gpu);
  EXPECT_TRUE(r.loads());
  EXPECT_EQ(r.cache_slots, 0);
}

// The session builds its runtime from the plan, and the cache has the plan's slots.
TEST(LoadPlan, theSessionLoadsThePlansSlots) {
  SessionOptions so;
  so.demo = true;
  so.policy = OffloadPolicy::kReactiveLru;
  so.threads = 1;
  for (const BudgetSetting& b : {BudgetSetting::cacheShare(0.3), BudgetSetting::cacheBytes(1)}) {
    so.budget = b;
    if (b.kind == BudgetSetting::Kind::kCacheBytes) {
      EXPECT_THROW(EngineSession{so}, std::invalid_argument);  // a cache below 2 experts
      continue;
    }
    EngineSession session(so);
    const LoadPlan again =
        resolveLoadPlan({b, so.policy, so.n_ctx, true}, shapeOf(session.model()), session.device());
    EXPECT_EQ(session.plan().cache_slots, again.cache_slots);
    EXPECT_EQ(session.cacheSlots(), session.plan().cache_slots);
    EXPECT_EQ(session.cacheSlots(), int(0.3 * OffloadEngine::routedExperts(session.model())));
  }
}

// The offload engine takes the slots it is given: more than the routed experts is an
// error, not something it quietly clamps.
TEST(LoadPlan, theEngineDoesNotClampTheSlotsAgain) {
  SessionOptions so;
  so.demo = true;
  so.threads = 1;
  EngineSession session(so);  // resident: the model and its backend
  OffloadConfig oc;
  oc.policy = OffloadPolicy::kReactiveLru;
  oc.cache_slots = OffloadEngine::routedExperts(session.model()) + 1;
  EXPECT_THROW(OffloadEngine(session.model(), session.backend(), oc), std::invalid_argument);
  oc.cache_slots = OffloadEngine::routedExperts(session.model());
  EXPECT_NO_THROW(OffloadEngine(session.model(), session.backend(), oc));
}
