// A recorded trace replayed as a model's routing (Transformer::setRoutingReplay):
// the token at position p takes the trace's token (start + p) mod its length, the
// model's MoE layers the trace's layers in order, so every run over the same
// positions (each bench row) sees the same choices.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "inference/model_config.h"
#include "inference/routing_replay.h"
#include "offload/routing/routing_trace.h"

namespace moe {

class TraceRouting final : public RoutingReplay {
 public:
  // Throws RoutingTraceError when the trace's shape (MoE layers, experts, top-k)
  // is not the model's, naming both.
  TraceRouting(RoutingTrace trace, const ModelConfig& model, int start_token = 0);
  void route(int layer, int first_pos, int n_tokens, std::span<int> ids,
             std::span<float> weights) const override;
  const RoutingTrace& trace() const { return trace_; }

 private:
  RoutingTrace trace_;
  std::vector<int> trace_layer_;  // per model layer: its layer in the trace, or -1 (dense)
  int start_;
};

// "24 MoE layers x 32 experts, top-4": a model's routing shape, as traces state theirs.
std::string routingShape(const ModelConfig& model);

// Realistic routing for a model without a trace of its own: n_tokens tokens drawn to
// follow the shipped routing profile (routing_profile.h) in the model's shape.
std::shared_ptr<const TraceRouting> realisticRouting(const ModelConfig& model, uint64_t seed = 1,
                                                     int n_tokens = 4096);

}  // namespace moe
