#include "app/core/load_plan.h"

#include <algorithm>
#include <stdexcept>

#include "app/core/fit_words.h"

namespace moe {

DeviceMemory probeDevice(DeviceChoice choice) {
  DeviceMemory d;
  if (choice == DeviceChoice::kCpu) {
    d.why_cpu = "the CPU was chosen";
    return d;
  }
  std::string why;
  if (cudaDeviceAvailable(&why) && cudaMemoryInfo(&d.free_bytes, &d.total_bytes, &why)) {
    d.gpu = true;
    return d;
  }
  if (choice == DeviceChoice::kCuda) throw std::runtime_error("no usable GPU: " + why);
  d.free_bytes = d.total_bytes = 0;
  d.why_cpu = why.empty() ? "no usable GPU" : why;
  return d;
}

namespace {

// Slots for `budget` bytes of VRAM: what is left after the fixed parts, in whole
// experts, at most every expert. An error when fewer than 2 (the staging slots that
// stream any layer) fit.
void fitVramBudget(LoadPlan& p) {
  const uint64_t fixed = p.fit.fixedBytes();
  const uint64_t room = p.budget_bytes > fixed ? p.budget_bytes - fixed : 0;
  const uint64_t slots = std::min<uint64_t>(room / p.fit.expert_bytes, p.fit.total_experts);
  if (slots < 2) {
    p.error = budgetShortfall(p);
    return;
  }
  p.cache_slots = static_cast<int>(slots);
  p.all_experts_fit = slots == p.fit.total_experts;
}

// The demo under auto: at most kDemoAutoShare of its experts, at least 2.
int demoSlots(uint64_t total) {
  return static_cast<int>(std::min<uint64_t>(
      total, std::max<uint64_t>(2, static_cast<uint64_t>(kDemoAutoShare * double(total)))));
}

}  // namespace

LoadPlan resolveLoadPlan(const PlanRequest& request, const ModelShape& shape, const DeviceMemory& device) {
  LoadPlan p;
  p.setting = request.budget;
  p.on_gpu = device.gpu;
  p.policy = request.policy;
  p.n_ctx = std::clamp(request.n_ctx, 1, std::max(1, shape.config.n_ctx_train));
  p.fit = estimateFit(shape.config, shape.sizes, p.n_ctx);
  p.fit.host_pinned_bytes = shape.host_store_bytes;
  const uint64_t fixed = p.fit.fixedBytes(), expert = p.fit.expert_bytes, total = p.fit.total_experts;
  const BudgetSetting& b = request.budget;
  // Without a GPU, any cache is host memory standing in for VRAM.
  p.simulated = !device.gpu && !b.isAuto();

  // Bad settings first: they are errors wherever the model would run.
  if (b.kind == BudgetSetting::Kind::kCacheShare && !(b.share > 0 && b.share <= 1)) {
    p.error = "the cache share must be in (0, 1]";
    return p;
  }
  if (b.kind == BudgetSetting::Kind::kVramBytes && b.bytes == 0) {
    p.error = "a VRAM budget of 0 bytes holds nothing (use auto)";
    return p;
  }

  // Nothing to cache: a model without two routed experts to cache, or the resident policy.
  if (total < 2 || expert == 0 || request.policy == OffloadPolicy::kResident) {
    p.policy = OffloadPolicy::kResident;
    p.simulated = false;
    if (device.gpu) p.budget_bytes = fixed + total * expert;
    return p;
  }

  switch (b.kind) {
    case BudgetSetting::Kind::kAuto:
      if (!device.gpu) {
        if (!request.demo) {  // copies into a host-memory "cache" would only cost time
          p.policy = OffloadPolicy::kResident;
          return p;
        }
        p.simulated = true;
        p.cache_slots = demoSlots(total);
        p.capped_for_demo = true;
        p.budget_bytes = fixed + uint64_t(p.cache_slots) * expert;
        break;
      }
      p.free_bytes = device.free_bytes;
      p.margin_bytes = kAutoVramMarginBytes;
      p.budget_bytes =
          device.free_bytes > kAutoVramMarginBytes ? device.free_bytes - kAutoVramMarginBytes : 0;
      fitVramBudget(p);
      if (p.loads() && request.demo && p.cache_slots > demoSlots(total)) {
        p.cache_slots = demoSlots(total);
        p.all_experts_fit = false;
        p.capped_for_demo = true;
      }
      break;
    case BudgetSetting::Kind::kVramBytes:
      p.budget_bytes = b.bytes;
      fitVramBudget(p);
      break;
    case BudgetSetting::Kind::kCacheBytes: {
      const uint64_t slots = b.bytes / expert;
      if (slots < 2) {
        p.error =
            "a cache of " + formatBytes(b.bytes) + " holds fewer than 2 experts of " + formatBytes(expert);
        return p;
      }
      p.cache_slots = static_cast<int>(std::min(slots, total));
      p.budget_bytes = fixed + uint64_t(p.cache_slots) * expert;
      break;
    }
    case BudgetSetting::Kind::kCacheShare:
      p.cache_slots = static_cast<int>(
          std::min<uint64_t>(total, std::max<uint64_t>(2, static_cast<uint64_t>(b.share * double(total)))));
      p.budget_bytes = fixed + uint64_t(p.cache_slots) * expert;
      break;
  }
  if (!p.loads()) return p;
  if (p.all_experts_fit) {  // every expert fits the budget: nothing to offload
    p.policy = OffloadPolicy::kResident;
    p.cache_slots = 0;
  }
  p.cache_bytes = uint64_t(p.cache_slots) * expert;
  const uint64_t used = fixed + (p.all_experts_fit ? total * expert : p.cache_bytes);
  p.left_bytes = p.budget_bytes > used ? p.budget_bytes - used : 0;
  return p;
}

}  // namespace moe
