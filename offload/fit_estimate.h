// What fits where, before anything is loaded: the weights that stay on the GPU,
// how many expert-cache slots a VRAM budget leaves, and the pinned host RAM the
// expert store needs. Shown by `moechat-cli info`, the settings panel and the
// model wizard.
#pragma once

#include <cstdint>

#include "inference/model.h"

namespace moe {

struct FitEstimate {
  uint64_t vram_budget = 0;            // bytes the user allows moechat to use on the GPU
  uint64_t resident_bytes = 0;         // non-expert weights (always on the GPU)
  uint64_t kv_cache_bytes = 0;         // f16 K and V for n_ctx positions, attention layers only
  uint64_t recurrent_state_bytes = 0;  // qwen35moe: f32 conv + delta states, live and snapshots
  uint64_t workspace_bytes = 0;        // activations + a safety margin
  uint64_t expert_bytes = 0;           // one routed expert (3 matrices)
  uint64_t cache_slots = 0;            // experts the remaining budget holds
  uint64_t total_experts = 0;          // routed experts in the model
  uint64_t host_pinned_bytes = 0;      // the expert store in pinned host RAM
  bool fits_gpu = false;               // resident + kv + workspace + >= 2 staging slots fit
  bool all_experts_fit = false;        // no offloading needed at this budget

  // What the GPU holds besides the expert cache.
  uint64_t fixedBytes() const {
    return resident_bytes + kv_cache_bytes + recurrent_state_bytes + workspace_bytes;
  }
  double cacheShare() const { return total_experts ? static_cast<double>(cache_slots) / total_experts : 0.0; }
};

FitEstimate estimateFit(const ModelConfig& cfg, const ModelSizes& sizes, uint64_t vram_budget, int n_ctx);

}  // namespace moe
