#include "offload/routing/trace_routing.h"

#include <stdexcept>
#include <string>

#include "offload/routing/routing_profile.h"

namespace moe {

std::string routingShape(const ModelConfig& c) {
  int moe_layers = 0;
  for (int il = 0; il < c.n_layer; ++il) moe_layers += c.isMoeLayer(il) ? 1 : 0;
  return std::to_string(moe_layers) + " MoE layers x " + std::to_string(c.n_expert) + " experts, top-" +
         std::to_string(c.n_expert_used);
}

TraceRouting::TraceRouting(RoutingTrace trace, const ModelConfig& c, int start_token)
    : trace_(std::move(trace)), trace_layer_(size_t(c.n_layer), -1), start_(start_token) {
  int moe_layers = 0;
  for (int il = 0; il < c.n_layer; ++il)
    if (c.isMoeLayer(il)) trace_layer_[size_t(il)] = moe_layers++;
  const bool experts_fit =
      trace_.n_expert_exact ? trace_.n_expert == c.n_expert : trace_.n_expert <= c.n_expert;
  if (trace_.tokens() == 0 || trace_.n_layer != moe_layers || trace_.k != c.n_expert_used || !experts_fit)
    throw RoutingTraceError("routing trace " + trace_.source + " (" + trace_.shape() +
                            ") does not fit the model (" + routingShape(c) + ")");
  if (start_ < 0) throw std::invalid_argument("TraceRouting: negative start token");
}

void TraceRouting::route(int layer, int first_pos, int n_tokens, std::span<int> ids,
                         std::span<float> weights) const {
  const int tl = layer >= 0 && layer < int(trace_layer_.size()) ? trace_layer_[size_t(layer)] : -1;
  const size_t k = size_t(trace_.k);
  if (tl < 0 || ids.size() < size_t(n_tokens) * k || weights.size() < ids.size())
    throw std::invalid_argument("TraceRouting: layer " + std::to_string(layer) + " is not a MoE layer");
  for (int t = 0; t < n_tokens; ++t) {
    const int token = int((int64_t(start_) + first_pos + t) % trace_.tokens());
    const auto src_ids = trace_.idsAt(token, tl);
    const auto src_w = trace_.weightsAt(token, tl);
    for (size_t j = 0; j < k; ++j) {
      ids[size_t(t) * k + j] = src_ids[j];
      weights[size_t(t) * k + j] = src_w[j];
    }
  }
}

std::shared_ptr<const TraceRouting> realisticRouting(const ModelConfig& c, uint64_t seed, int n_tokens) {
  int moe_layers = 0;
  for (int il = 0; il < c.n_layer; ++il) moe_layers += c.isMoeLayer(il) ? 1 : 0;
  if (moe_layers == 0 || c.n_expert_used < 1 || c.n_expert_used > c.n_expert || c.n_expert > 65535)
    throw RoutingTraceError("realistic routing needs a MoE model; this one is " + routingShape(c));
  return std::make_shared<const TraceRouting>(
      synthesizeRouting(shippedRoutingProfile(), moe_layers, c.n_expert, c.n_expert_used, n_tokens, seed), c);
}

}  // namespace moe
