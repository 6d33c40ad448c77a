// Top-k expert routing of one token, as the GGUF MoE family defines it
// (GGUF-NOTES.md, MoE table): the gating function over all experts, the k most
// probable (ties: the lower id; with a selection bias, the k largest biased
// scores, weighted by their unbiased ones), optional renormalisation over the k,
// then the scale. The CPU path routes with it; the CUDA kernel (cuda_moe.cu) computes the
// same, in double, and the CUDA backend falls back to it for very wide routers.
#pragma once

#include "inference/model_config.h"

namespace moe {

struct RoutingRule {
  int n_expert = 0;
  int k = 0;  // experts chosen per token
  GatingFunc gating = GatingFunc::Softmax;
  bool norm_topk = false;
  float scale = 1.0f;
  // [n_expert] host values added to the gate scores for choosing the experts only
  // (glm4moe's exp_probs_b, DeepSeek-V3's e_score_correction_bias); null: none.
  const float* selection_bias = nullptr;
  // > 1 with 0 < group_used < groups: only experts of the group_used groups whose two
  // best selection scores sum highest may be chosen (DeepSeek-V3's group-limited
  // routing, as llama.cpp's build_moe_ffn computes it for expert_group_count > 1).
  int groups = 0;
  int group_used = 0;

  static RoutingRule of(const ModelConfig& c) {
    RoutingRule r{c.n_expert, c.n_expert_used, c.gating, c.norm_topk_weights, c.expert_weights_scale};
    if (c.groupLimited()) {
      r.groups = c.n_expert_groups;
      r.group_used = c.n_group_used;
    }
    return r;
  }
  bool groupLimited() const { return groups > 1 && group_used > 0 && group_used < groups; }
};

// logits: [rule.n_expert] -> ids, weights: [rule.k].
void routeToken(const float* logits, const RoutingRule& rule, int* ids, float* weights);

}  // namespace moe
