// What a model needs on the GPU besides its expert cache, before anything is
// loaded: the weights that stay on the GPU, the KV cache of a context, the
// workspace, one expert's size and how many there are, and the pinned host RAM
// the expert store needs. No budget here: app/core/load_plan.h turns a budget
// into cache slots, once, for every view and for the load.
#pragma once

#include <cstdint>

#include "inference/model.h"

namespace moe {

struct FitEstimate {
  uint64_t resident_bytes = 0;         // non-expert weights (always on the GPU)
  uint64_t kv_bytes = 0;               // f16 K and V for n_ctx positions, attention layers only
  uint64_t recurrent_state_bytes = 0;  // qwen35moe: f32 conv + delta states, live and snapshots
  uint64_t workspace_bytes = 0;        // activations + the CUDA context's margin (kCudaContextBytes)
  uint64_t expert_bytes = 0;           // one routed expert (3 matrices)
  uint64_t total_experts = 0;          // routed experts in the model
  uint64_t host_pinned_bytes = 0;      // the expert store in pinned host RAM

  // What the GPU holds besides the expert cache.
  uint64_t fixedBytes() const { return resident_bytes + kv_bytes + recurrent_state_bytes + workspace_bytes; }
};

// Counted into the workspace: the CUDA context's own allocations (cuBLAS
// workspace, kernels), which no tensor of ours accounts for.
inline constexpr uint64_t kCudaContextBytes = uint64_t(256) << 20;

FitEstimate estimateFit(const ModelConfig& cfg, const ModelSizes& sizes, int n_ctx);

}  // namespace moe
