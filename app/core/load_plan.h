// The VRAM budget, resolved once. resolveLoadPlan takes what the user asked for (auto,
// N GB of VRAM, or the CLI's cache size or share), the model's shape, the device's free
// memory and the context length, and returns the plan that loads: where the model
// computes, the policy, the expert-cache slots, the KV cache, the workspace and what is
// left. The settings dialog, the models view, the model wizard's fit column,
// `moechat-cli info` and the engine's load all call it, and nothing else turns a budget
// into slots: EngineSession builds the runtime from the plan's slots. Qt-free.
//
// What "auto" means (docs/offload.md, "The VRAM budget"):
//   on a GPU    the free memory when the model loads, less kAutoVramMarginBytes; the
//               weights that stay on the GPU, the KV cache of the context and the
//               workspace come out of it, the rest is expert cache (every expert fits:
//               resident). The demo model caches at most kDemoAutoShare of its experts,
//               so the machinery shows.
//   on the CPU  no cache: every expert is computed on the CPU from host RAM; the demo
//               model caches kDemoAutoShare of its experts in host memory, a simulation
//               (LoadPlan::simulated) labelled as such everywhere.
// An explicit budget on the CPU plans for a card with that much memory and runs that
// cache in host memory: a simulation too.
#pragma once

#include <cstdint>
#include <string>

#include "app/core/model_shape.h"
#include "inference/backend_factory.h"
#include "offload/fit_estimate.h"
#include "offload/policy.h"

namespace moe {

// Auto on a GPU leaves this much of the free memory alone: other programs, the
// driver, fragmentation. (The workspace holds kCudaContextBytes besides.)
inline constexpr uint64_t kAutoVramMarginBytes = uint64_t(1) << 30;
// Under auto the demo model, which fits anywhere, caches this share of its experts.
inline constexpr double kDemoAutoShare = 0.5;

// What is asked of the expert cache.
struct BudgetSetting {
  enum class Kind {
    kAuto,        // the app's "Auto": from the device's free memory (see above)
    kVramBytes,   // the app's "N GB": the whole GPU budget, weights and KV cache included
    kCacheBytes,  // the CLI's --cache-mb: the expert cache alone (staging slots included)
    kCacheShare,  // the CLI's --cache-share: a share (0, 1] of the routed experts
  };
  Kind kind = Kind::kAuto;
  uint64_t bytes = 0;  // kVramBytes, kCacheBytes
  double share = 0;    // kCacheShare

  static BudgetSetting automatic() { return {}; }
  static BudgetSetting vramBytes(uint64_t b) { return {Kind::kVramBytes, b, 0}; }
  static BudgetSetting cacheBytes(uint64_t b) { return {Kind::kCacheBytes, b, 0}; }
  static BudgetSetting cacheShare(double s) { return {Kind::kCacheShare, 0, s}; }
  // The app's stored setting: 0 is auto, else bytes of VRAM.
  static BudgetSetting fromAppSetting(uint64_t vram_bytes) {
    return vram_bytes ? vramBytes(vram_bytes) : automatic();
  }
  bool isAuto() const { return kind == Kind::kAuto; }
};

// What the plan is resolved against: the device the model computes on.
struct DeviceMemory {
  bool gpu = false;          // a usable GPU computes; false: the CPU
  uint64_t free_bytes = 0;   // GPU memory free before the model loads
  uint64_t total_bytes = 0;  // the GPU's memory
  std::string why_cpu;       // on the CPU: why no GPU is used
};

// The device `choice` computes on and, on a GPU, its memory now (cudaMemGetInfo).
// Throws std::runtime_error for kCuda without a usable GPU.
DeviceMemory probeDevice(DeviceChoice choice);

struct PlanRequest {
  BudgetSetting budget;
  OffloadPolicy policy = OffloadPolicy::kProactive;  // asked for; resident keeps every expert in place
  int n_ctx = 4096;                                  // clamped to the model's trained context
  bool demo = false;                                 // the demo model (auto caches kDemoAutoShare)
};

struct LoadPlan {
  BudgetSetting setting;   // what was asked
  bool on_gpu = false;     // the model computes on the GPU
  bool simulated = false;  // the cache is host memory standing in for VRAM (no GPU computes)
  OffloadPolicy policy = OffloadPolicy::kResident;  // what loads
  int n_ctx = 0;                                    // the context the KV cache is sized for
  FitEstimate fit;  // what stays on the GPU besides the cache; one expert; how many
  // The VRAM budget: auto's (free_bytes - margin_bytes) or the setting's; for a cache
  // size or share, what that cache and the fixed parts need. 0: none (the CPU's auto).
  uint64_t budget_bytes = 0;
  uint64_t free_bytes = 0, margin_bytes = 0;  // auto on a GPU: what it was worked out from
  int cache_slots = 0;                        // expert-cache slots (staging included); 0: resident
  uint64_t cache_bytes = 0;                   // cache_slots experts
  uint64_t left_bytes = 0;                    // budget - fixed - cache
  bool all_experts_fit = false;               // resident because every expert fits the budget
  bool capped_for_demo = false;               // fewer slots than the budget holds: the demo's share
  std::string error;                          // not empty: this does not load, and why

  bool loads() const { return error.empty(); }
  bool onCpuOnly() const { return !on_gpu && !simulated; }  // no cache: experts computed on the CPU
  double cacheShare() const {
    return fit.total_experts ? static_cast<double>(cache_slots) / double(fit.total_experts) : 0.0;
  }
};

// The one function that turns a budget into a plan. Never throws for bad input: a
// budget too small for two expert slots, a cache share outside (0, 1] or a size
// below two experts comes back as LoadPlan::error.
LoadPlan resolveLoadPlan(const PlanRequest& request, const ModelShape& shape, const DeviceMemory& device);

}  // namespace moe
