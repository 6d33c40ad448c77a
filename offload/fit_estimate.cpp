#include "offload/fit_estimate.h"

#include <algorithm>

namespace moe {

FitEstimate estimateFit(const ModelConfig& cfg, const ModelSizes& sizes, int n_ctx) {
  FitEstimate f;
  f.resident_bytes = sizes.other_bytes;
  // K and V of every attention layer, f16 on the GPU (CudaBackend::allocKv). A recurrent
  // layer (qwen35moe's gated delta-net) keeps no rows: its state is a fixed size per
  // sequence whatever the context, the conv inputs carried and the delta states, in f32,
  // live and in each of the kRecurrentSnapshots copies Transformer keeps.
  // gemma4's layers differ in K/V width, and a shared-KV layer keeps no rows of its own.
  uint64_t kv_row_elems = 0, recurrent_layers = 0;
  for (int il = 0; il < cfg.n_layer; ++il) {
    if (cfg.isRecurrentLayer(il))
      ++recurrent_layers;
    else if (cfg.ownsKv(il))
      kv_row_elems += uint64_t(cfg.kvWidthOf(il));
  }
  f.kv_bytes = 2ull * uint64_t(n_ctx) * kv_row_elems * 2;
  if (cfg.hasRecurrentLayers())
    f.recurrent_state_bytes = (1 + kRecurrentSnapshots) * recurrent_layers *
                              (cfg.delta.convStateFloats() + cfg.delta.deltaStateFloats()) * sizeof(float);
  // Activations for a prefill batch of 256 tokens (the MoE block's per-(token, rank)
  // rows of n_ff_exp and n_embd included) plus kCudaContextBytes.
  const uint64_t widest =
      std::max<uint64_t>({uint64_t(cfg.n_vocab), uint64_t(cfg.n_ff), uint64_t(cfg.n_ff_shexp)});
  const uint64_t per_token_moe = uint64_t(cfg.n_expert_used) * (uint64_t(cfg.n_ff_exp) + cfg.n_embd);
  f.workspace_bytes =
      256ull * (8ull * cfg.n_embd + 2 * widest + per_token_moe) * sizeof(float) + kCudaContextBytes;
  f.expert_bytes = sizes.expert_bytes;
  f.total_experts = uint64_t(sizes.moe_layers) * cfg.n_expert;
  f.host_pinned_bytes = sizes.routed_expert_bytes;
  return f;
}

}  // namespace moe
